// SPDX-License-Identifier: Apache-2.0
#include "ipusim/model/simulation.hpp"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "ipusim/cost/program_costs.hpp"
#include "ipusim/model/fabric.hpp"
#include "ipusim/model/ipu.hpp"
#include "ipusim/model/reference_ipu.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::model {
namespace {

// Top of the module tree: the fabric (for a system) and one Ipu per simulated program.
class System : public sc_core::sc_module {
 public:
  System(sc_core::sc_module_name name, const ChipSpec& chip, const trace::Trace& trace,
         const ModelOptions& options, const SystemSpec* system, bool all_replicas)
      : sc_core::sc_module(name) {
    if (system) fabric = std::make_unique<Fabric>("fabric", *system, trace, all_replicas);
    const std::uint32_t replicas = fabric ? fabric->replicas_simulated() : 1;
    const std::uint32_t per_replica = trace.ipus_per_replica();
    for (std::uint32_t r = 0; r < replicas; ++r)
      for (const auto& program : trace.ipus) {
        const Placement place{r * per_replica + program.ipu, program.ipu, r};
        const std::string module = fmt::format("ipu{}", place.system_ipu);
        if (options.engine == Engine::kReference)
          ipus.push_back(
              std::make_unique<ReferenceIpu>(module.c_str(), chip, program, place, fabric.get()));
        else
          ipus.push_back(std::make_unique<Ipu>(module.c_str(), chip, program, options, place,
                                               fabric.get(), &exchange_costs));
      }
  }
  ExchangeCostCache exchange_costs;  // before the IPUs, which point into it
  std::unique_ptr<Fabric> fabric;
  std::vector<std::unique_ptr<IpuModule>> ipus;
};

bool host_steps_within(const std::vector<trace::Step>& steps, std::uint32_t tiles) {
  for (const auto& step : steps) {
    if (step.kind == trace::StepKind::kHost && step.tiles.last >= tiles) return false;
    if (step.kind == trace::StepKind::kRepeat && !host_steps_within(step.body, tiles)) return false;
  }
  return true;
}

RunStats run(const ChipSpec& chip, const trace::Trace& trace, const ModelOptions& options,
             const SystemSpec* system, bool all_replicas) {
  const auto start = std::chrono::steady_clock::now();
  // Tile indices are checked against the chip while each IPU builds its memory map (a pass
  // over every tensor, vertex and transfer that is needed anyway; it throws TraceError on the
  // first tile out of range) and here for host steps; the detailed check, which names the
  // item at fault, runs only when one of them fails.
  // Errors about the trace name its file (issue 16, defect M: `run` printed "error: : tensor").
  const std::string origin = !options.origin.empty() ? options.origin
                             : !trace.name.empty()   ? trace.name
                                                     : std::string("trace");
  trace::check_ipu_sections(trace, origin);
  bool host_ok = true;
  for (const auto& p : trace.ipus) host_ok = host_ok && host_steps_within(p.steps, chip.tiles);
  if (!host_ok) trace::check_tiles(trace, chip.tiles, origin);
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  std::optional<System> built;
  try {
    try {
      built.emplace("system", chip, trace, options, system, all_replicas);
    } catch (const cost::TileMemoryError& e) {
      // A compiled workload's program: say which run keys make it fit.
      if (!trace::find_meta(trace.meta, "target.run")) throw;
      throw cost::TileMemoryError(std::string(e.what()) +
                                  std::string(cost::kCompiledWorkloadAdvice));
    }
  } catch (const TraceError&) {
    trace::check_tiles(trace, chip.tiles, origin);
    throw;
  }
  System& top = *built;
  if (options.before_run) options.before_run();
  // An IPU that fails stops the kernel with sc_stop(); SystemC would report that as an info
  // message on stdout, where ipusim prints nothing on error (docs/errors.md).
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO,
                                          sc_core::SC_DO_NOTHING);
  sc_core::sc_start();
  for (const auto& ipu : top.ipus)
    if (ipu->error()) std::rethrow_exception(ipu->error());
  RunStats stats;
  for (auto& ipu : top.ipus) {
    if (!ipu->finished()) {
      std::string stuck;
      if (top.fabric)
        for (const auto& s : top.fabric->stuck()) stuck += "; waiting at " + s;
      throw ModelError(
          fmt::format("{} did not finish: its group steps do not match those of the other IPUs{}",
                      ipu->name(), stuck));
    }
    stats.ipus.push_back(ipu->stats());
    stats.cycles = std::max(stats.cycles, stats.ipus.back().cycles);
  }
  stats.replicas = trace.replicas;
  stats.system_ipus = trace.replicas * trace.ipus_per_replica();
  if (top.fabric) {
    stats.system_name = system->name;
    stats.machine_name = system->machine.name;
    stats.ipus_in_system = system->ipus();
    stats.replica_symmetric = top.fabric->replicas_simulated() < trace.replicas;
    stats.links = top.fabric->link_use();
  }
  stats.seconds = (Cycles{stats.cycles} / chip.clock).seconds;
  stats.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace

std::optional<Engine> engine_by_name(std::string_view name) {
  if (name == "fast") return Engine::kFast;
  if (name == "reference") return Engine::kReference;
  return std::nullopt;
}

std::string_view engine_name(Engine engine) {
  return engine == Engine::kReference ? "reference" : "fast";
}

RunStats simulate(const ChipSpec& chip, const trace::Trace& trace, const ModelOptions& options) {
  return run(chip, trace, options, nullptr, false);
}

RunStats simulate(const SystemSpec& system, const trace::Trace& trace, const ModelOptions& options,
                  bool all_replicas) {
  return run(system.chip, trace, options, &system, all_replicas);
}

}  // namespace ipusim::model
