// SPDX-License-Identifier: Apache-2.0
#include "memory.hpp"

namespace ipusim::compiler {

std::vector<Holding> stage_training_memory(const StageMemory& s) {
  using trace::TensorKind;
  std::vector<Holding> out;
  const auto on = [&](std::string name, TensorKind kind, const Layout& l, std::uint64_t copies) {
    out.push_back({std::move(name), kind, l, copies, l.dtype, 0, std::nullopt});
  };
  const auto spread = [&](std::string name, TensorKind kind, trace::DType dtype,
                          std::uint64_t bytes, std::optional<trace::Lifetime> live) {
    out.push_back({std::move(name), kind, std::nullopt, 1, dtype, bytes, live});
  };
  for (const auto& p : s.parameters) {
    on("weights/" + p.name, TensorKind::kWeight, p.layout, p.copies);
    on("gradient_accumulator/" + p.name, TensorKind::kGradient, p.layout, p.copies);
    if (!s.streaming && !s.sharded)
      on("optimiser_state/" + p.name, TensorKind::kOptimiser, p.layout, s.moments * p.copies);
  }
  if (!s.streaming && s.sharded)
    spread("optimiser_state", TensorKind::kOptimiser, s.dtype, s.sharded_state_bytes, std::nullopt);
  spread("stashed_activations", TensorKind::kActivation, s.dtype,
         (2 * s.stages_to_end + 1) * s.stage_input_bytes, s.loop_live);
  spread("live_activations", TensorKind::kActivation, s.dtype, s.live_bytes, s.loop_live);
  if (s.input_bytes > 0)
    spread("input_buffer", TensorKind::kInput, trace::DType::kChar, s.input_bytes, std::nullopt);
  return out;
}

}  // namespace ipusim::compiler
