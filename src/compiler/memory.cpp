// SPDX-License-Identifier: Apache-2.0
#include "memory.hpp"

#include <utility>

namespace ipusim::compiler {

std::vector<Holding> inference_memory(const InferenceMemory& m) {
  using trace::TensorKind;
  std::vector<Holding> out;
  for (const auto& p : m.parameters)
    out.push_back({"weights/" + p.name, TensorKind::kWeight, p.layout, p.copies, p.layout.dtype, 0,
                   std::nullopt});
  out.push_back(
      {"live_activations", TensorKind::kActivation, std::nullopt, 1, m.dtype, m.live_bytes, {}});
  if (m.input_bytes > 0)
    out.push_back({"input_buffer", TensorKind::kInput, std::nullopt, 1, trace::DType::kChar,
                   m.input_bytes, std::nullopt});
  return out;
}

std::vector<Holding> cnn_training_memory(const CnnMemory& c) {
  using trace::TensorKind;
  std::vector<Holding> out;
  for (const auto& p : c.parameters)
    for (const auto& [prefix, kind] : {std::pair{"weights/", TensorKind::kWeight},
                                       std::pair{"gradient_accumulator/", TensorKind::kGradient},
                                       std::pair{"momentum/", TensorKind::kOptimiser}})
      out.push_back({prefix + p.name, kind, p.layout, p.copies, p.layout.dtype, 0, std::nullopt});
  for (const auto& k : c.kept)
    out.push_back({k.name, k.kind, k.layout, 1, k.layout.dtype, 0, k.live});
  if (c.input_bytes > 0)
    out.push_back({"input_buffer", TensorKind::kInput, std::nullopt, 1, trace::DType::kChar,
                   c.input_bytes, std::nullopt});
  return out;
}

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
