// SPDX-License-Identifier: Apache-2.0
// compiler::compile_layer: one conv or matmul layer on one IPU, forward only or a whole
// training step of that layer (forward, data gradient, weight gradient, SGD update), built
// with the same IpuBuilder operations as a model's conv layer is lowered with, so that one
// layer of a model can be studied and checked on its own (docs/workloads.md).
#include <fmt/format.h>

#include <cmath>

#include "ipu_builder.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::compiler {
namespace {

using trace::DType;
using trace::StepKind;

std::string layer_name(const plan::ConvArgs& a, LayerPass pass) {
  return plan::conv_name(a) + (pass == LayerPass::kTraining ? "_training" : "_forward");
}

}  // namespace

trace::Trace compile_layer(const ChipSpec& chip, const plan::ConvArgs& a, LayerPass pass,
                           double available_memory, bool fully_connected_pass) {
  if (!(available_memory > 0 && available_memory <= 1))
    throw UsageError(
        fmt::format("available-memory proportion must be in (0, 1], found {}", available_memory));
  if (!(a.batch >= 1 && a.in_chans >= 1 && a.height >= 1 && a.width >= 1 && a.out_chans >= 1 &&
        a.kernel.h >= 1 && a.kernel.w >= 1 && a.stride.h >= 1 && a.stride.w >= 1 && a.groups >= 1))
    throw UsageError("conv dimensions must all be at least 1");
  trace::Trace t;
  t.name = layer_name(a, pass);
  auto& program = t.ipus.emplace_back();
  IpuBuilder b(chip, program, available_memory, plan::partials_of(a), /*fuse_elementwise=*/true);
  b.set_coeff_load_bits(a.coeff_load_bits);
  // A training matmul is planned with its backward passes (poplin's fullyConnectedPass).
  b.plan_fully_connected_passes(fully_connected_pass && pass == LayerPass::kTraining);
  const DType dt = a.dtype;
  const std::uint64_t out_h = ceil_div(a.height, a.stride.h), out_w = ceil_div(a.width, a.stride.w);
  Steps& out = program.steps;

  // Forward: the input is created for the conv (createInput), so it needs no rearrangement.
  const Layout x = b.input_layout(a);
  const Layout y = b.conv(out, a, Operand{x, false});
  if (pass == LayerPass::kTraining) {
    // The output gradient arrives where the forward output lives (the next layer's
    // elementwise backward ops run on it).
    const Layout g = y;
    const Layout weights = b.weights_layout(a);
    // Data gradient, weight gradient, then SGD: the gradient moves to the weights' layout and
    // w -= lr * g is one scaled_add there.
    b.data_gradient(out, a, weights, g);
    b.weight_gradient(out, a, x, weights, g, /*update=*/true);
  }

  // Memory: the layer's tensors spread over all tiles, and the largest conv's temporaries.
  const std::uint64_t eb = trace::dtype_bytes(dt);
  const std::uint64_t weight_bytes = plan::weight_elements(a) * eb;
  const std::uint64_t in_bytes = plan::input_elements(a) * eb;
  const std::uint64_t out_bytes = a.groups * a.batch * out_h * out_w * a.out_chans * eb;
  b.tensor("weights", trace::TensorKind::kWeight, dt, weight_bytes);
  b.tensor("input_activation", trace::TensorKind::kActivation, dt, in_bytes);
  b.tensor("output_activation", trace::TensorKind::kActivation, dt, out_bytes);
  if (pass == LayerPass::kTraining) {
    b.tensor("weight_gradient", trace::TensorKind::kGradient, dt, weight_bytes);
    b.tensor("output_gradient", trace::TensorKind::kGradient, dt, out_bytes);
    b.tensor("input_gradient", trace::TensorKind::kGradient, dt, in_bytes);
  }
  program.tensors.push_back({"conv_temporaries", trace::TensorKind::kTemp, dt,
                             trace::TileRange{0, chip.tiles - 1}, b.peak_temp()});
  for (auto& cs : program.compute_sets) trace::coalesce(cs);
  cost::check_memory(chip, program, cost::memory_map(chip, program));
  trace::check_structure(t, t.name);
  return t;
}

}  // namespace ipusim::compiler
