// SPDX-License-Identifier: Apache-2.0
// compiler::generation_fit: the largest micro-batch and context a generation run fits in
// (tile memory and Streaming Memory), by compiling it at other sizes.
#include <fmt/format.h>

#include <functional>
#include <string>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler {
namespace {

// Whether the run compiles within tile memory and Streaming Memory; any other error is the
// run's own and is thrown.
bool fits(const ModelDef& model, const RunConfig& run, const SystemSpec& system) {
  try {
    (void)compile(model, run, system, nullptr, {.memory = true, .structure = false});
    return true;
  } catch (const cost::TileMemoryError&) {
    return false;
  } catch (const ConfigError& e) {
    if (std::string(e.what()).find("Streaming Memory") != std::string::npos) return false;
    throw;
  }
}

// The largest n in [from, cap] with ok(n), given ok(from): doubling, then halving the gap.
std::uint64_t largest(std::uint64_t from, std::uint64_t cap,
                      const std::function<bool(std::uint64_t)>& ok) {
  std::uint64_t good = from, bad = 0;
  while (bad == 0 && good < cap) {
    const std::uint64_t next = std::min(cap, good * 2);
    if (ok(next))
      good = next;
    else
      bad = next;
  }
  while (bad > good + 1) {
    const std::uint64_t mid = good + (bad - good) / 2;
    (ok(mid) ? good : bad) = mid;
  }
  return good;
}

}  // namespace

GenerationFit generation_fit(const ModelDef& model, const RunConfig& run,
                             const SystemSpec& system) {
  GenerationFit out;
  out.micro_batch_limit = std::max(GenerationFit::kMicroBatchCap, run.micro_batch);
  // Learned positions bound the context by the table; rotary ones by the search's cap.
  out.context_limit =
      std::max(model.rotary ? GenerationFit::kContextCap : model.max_positions, model.sequence);
  if (!fits(model, run, system)) return out;
  out.micro_batch = largest(run.micro_batch, out.micro_batch_limit, [&](std::uint64_t b) {
    RunConfig r = run;
    r.micro_batch = b;
    return fits(model, r, system);
  });
  out.context = largest(model.sequence, out.context_limit, [&](std::uint64_t s) {
    ModelDef m = model;
    m.sequence = s;
    return fits(m, run, system);
  });
  return out;
}

}  // namespace ipusim::compiler
