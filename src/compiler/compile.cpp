// SPDX-License-Identifier: Apache-2.0
// compiler::compile: checks the run against the system, lowers the model (cnn_lowering.cpp,
// transformer_lowering.cpp), records what reports need, and checks memory and structure.
#include <fmt/format.h>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/util/error.hpp"
#include "lowering.hpp"

namespace ipusim::compiler {
namespace {

std::string meta_number(double v) {
  std::string s = fmt::format("{:.9g}", v);
  return s;
}

}  // namespace

trace::Trace compile(const ModelDef& model, const RunConfig& run, const SystemSpec& system) {
  const std::uint64_t needed = static_cast<std::uint64_t>(run.replicas) * run.ipus_per_replica;
  if (needed > system.ipus())
    throw ConfigError(fmt::format("{}: {} replicas x {} IPUs need {} IPUs, but {} has {}", run.file,
                                  run.replicas, run.ipus_per_replica, needed, system.name, system.ipus()));
  trace::Trace t = model.family == "cnn" ? compile_cnn(model, run, system)
                                         : compile_transformer(model, run, system);
  // What reports need to turn a step time into throughput and time to train.
  t.meta = {{"model", model.name},
            {"samples_per_step", std::to_string(run.samples_per_step())},
            {"sample_unit", run.sample_unit},
            {"ttt.epochs", meta_number(run.epochs)},
            {"ttt.samples_per_epoch", std::to_string(run.samples_per_epoch)},
            {"ttt.samples_to_train", std::to_string(run.samples_to_train)},
            {"ttt.lead_in_s", meta_number(run.lead_in_seconds)},
            {"ttt.checkpoint_s", meta_number(run.checkpoint_seconds)},
            {"ttt.checkpoints", std::to_string(run.checkpoints_taken)},
            {"ttt.evaluation_s", meta_number(run.evaluation_seconds)},
            {"ttt.evaluations", std::to_string(run.evaluations)}};
  // Vertices into runs (exchanges are coalesced as their transfers are added).
  for (auto& program : t.ipus)
    for (auto& cs : program.compute_sets) trace::coalesce(cs);
  for (const auto& program : t.ipus) cost::check_memory(system.chip, program, cost::memory_map(system.chip, program));
  trace::check_structure(t, run.name);
  return t;
}

}  // namespace ipusim::compiler
