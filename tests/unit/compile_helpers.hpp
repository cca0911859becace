// SPDX-License-Identifier: Apache-2.0
// What the compiler tests share: compiling a run file, and what they read of a pipelined
// program.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/layout.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/trace/program.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::testing {

// A layout of `positions` x `channels` half elements in blocks of `ppt` positions by `cpt`
// channels, one block per tile from tile 0.
inline compiler::Layout grid(std::uint64_t positions, std::uint64_t channels, std::uint64_t ppt,
                             std::uint64_t cpt) {
  compiler::Layout l;
  l.dtype = trace::DType::kHalf;
  l.positions = positions;
  l.channels = channels;
  l.positions_per_tile = ppt;
  l.chans_per_tile = cpt;
  return l;
}

// The message of the ConfigError `f` throws ("" if none).
template <class F>
std::string config_error_of(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// The run file `run_file` with the `set` overrides, compiled for its model and system.
inline trace::Trace compile_run(const std::string& run_file,
                                const std::vector<std::string>& set = {}) {
  const compiler::LoadedRun run = compiler::load_run(run_file, set);
  const compiler::ModelDef model = compiler::load_model(run.run.model_file);
  const auto system = ipusim::load_system(run.run.system_file);
  return compiler::compile(model, run.run, system.spec);
}

// The repeat counts of a program's pipeline loops: the top-level loops that end with the
// cycle's inter-IPU copy (the weight update's loops over equal tensors have none).
inline std::vector<std::uint64_t> pipeline_loop_counts(const trace::IpuProgram& p) {
  std::vector<std::uint64_t> counts;
  for (const auto& s : p.steps)
    if (s.kind == trace::StepKind::kRepeat && !s.body.empty() &&
        s.body.back().kind == trace::StepKind::kGlobalExchange)
      counts.push_back(s.count);
  return counts;
}

}  // namespace ipusim::testing
