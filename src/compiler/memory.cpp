// SPDX-License-Identifier: Apache-2.0
#include "memory.hpp"

#include <utility>

namespace ipusim::compiler {
namespace {

using trace::TensorKind;

// `copies` of a layout's blocks, always live.
Holding on(std::string name, TensorKind kind, const Layout& l, std::uint64_t copies) {
  return {std::move(name), kind, l, copies, l.dtype, 0, std::nullopt};
}
// `bytes` spread over every tile.
Holding spread(std::string name, TensorKind kind, trace::DType dtype, std::uint64_t bytes,
               std::optional<trace::Lifetime> live = std::nullopt) {
  return {std::move(name), kind, std::nullopt, 1, dtype, bytes, live};
}
Holding input_buffer(std::uint64_t bytes) {
  return spread("input_buffer", TensorKind::kInput, trace::DType::kChar, bytes);
}

// Each parameter's weights, gradient accumulator and optimiser state kept on its layout (named
// `state`/...), then a sharded optimiser state spread over the tiles.
void hold_trained(std::vector<Holding>& out, const std::vector<Parameter>& parameters,
                  const OptimiserMemory& o, trace::DType dtype, const std::string& state) {
  for (const auto& p : parameters) {
    out.push_back(on("weights/" + p.name, TensorKind::kWeight, p.layout, p.copies));
    out.push_back(on("gradient_accumulator/" + p.name, TensorKind::kGradient, p.layout, p.copies));
    if (!o.streaming && !o.sharded)
      out.push_back(
          on(state + "/" + p.name, TensorKind::kOptimiser, p.layout, o.moments * p.copies));
  }
  if (!o.streaming && o.sharded)
    out.push_back(spread("optimiser_state", TensorKind::kOptimiser, dtype, o.sharded_bytes));
}

}  // namespace

std::vector<Holding> inference_memory(const InferenceMemory& m) {
  std::vector<Holding> out;
  for (const auto& p : m.parameters)
    out.push_back(on("weights/" + p.name, TensorKind::kWeight, p.layout, p.copies));
  out.push_back(spread("live_activations", TensorKind::kActivation, m.dtype, m.live_bytes));
  if (m.input_bytes > 0) out.push_back(input_buffer(m.input_bytes));
  return out;
}

std::vector<Holding> training_memory(const TrainingMemory& c) {
  std::vector<Holding> out;
  hold_trained(out, c.parameters, c.optimiser, c.dtype,
               c.optimiser.moments == 1 ? "momentum" : "optimiser_state");
  for (const auto& k : c.kept) {
    out.push_back(on(k.name, k.kind, k.layout, 1));
    out.back().live = k.live;
  }
  if (c.stashed_bytes > 0)
    out.push_back(spread("stashed_activations", TensorKind::kActivation, c.dtype, c.stashed_bytes,
                         c.loop_live));
  if (c.live_bytes > 0)
    out.push_back(
        spread("live_activations", TensorKind::kActivation, c.dtype, c.live_bytes, c.loop_live));
  if (c.input_bytes > 0) out.push_back(input_buffer(c.input_bytes));
  return out;
}

}  // namespace ipusim::compiler
