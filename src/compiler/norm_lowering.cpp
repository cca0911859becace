// SPDX-License-Identifier: Apache-2.0
#include "norm_lowering.hpp"

#include <array>

namespace ipusim::compiler {

using trace::DType;
using trace::Op;

void NormLowering::share_statistics(Steps& out, std::uint64_t channels) {
  if (run_.batchnorm_group > 1)
    out.push_back(b_.collective(trace::CollectiveOp::kAllReduce, 2 * channels * 4, DType::kFloat,
                                {trace::GroupKind::kReplicas, run_.batchnorm_group}));
}

Value NormLowering::batch_norm_inference(const Value& x) {
  Value scaled{x.layout, {}, {}};
  pend(b_, scaled, {Op::kMul, Op::kAdd});
  return scaled;
}

Value NormLowering::batch_norm(Steps& out, const Value& x, std::uint64_t c, bool statistics) {
  // Statistics (sum and sum of squares per channel) among the tiles holding each channel,
  // shared over the batch-norm group.
  const Layout channels = b_.linear(DType::kFloat, 1, c);
  if (statistics) {
    b_.reduce(out, x.layout, Axis::kPositions, 2, /*broadcast=*/false);
    share_statistics(out, c);
    // mean, inverse standard deviation (popnn's InverseStdDeviation).
    const Op stats[] = {Op::kMul, Op::kSquare, Op::kSub, Op::kRsqrt};
    b_.elementwise(out, channels, stats);
  }
  if (run_.popnn_norms) {
    // TensorFlow for IPU (norm.cc): with cached statistics the stored variance is turned back
    // into inv_std first; per-channel multiplicand = gamma inv_std and addend = beta -
    // multiplicand mean (two small maps), brought to the tiles holding each channel; then
    // popnn's batchNormalise: an out-of-place multiply and an in-place add over the
    // activations, each its own compute set; after statistics, inv_std is turned into the
    // variance the op returns.
    if (!statistics) b_.elementwise(out, channels, std::array{Op::kAdd, Op::kRsqrt});
    b_.elementwise(out, channels, std::array{Op::kMul});
    b_.elementwise(out, channels, std::array{Op::kMul, Op::kSub});
    b_.broadcast(out, x.layout, Axis::kPositions, 2);
    b_.channel_op(out, x.layout, Op::kMul, /*in_place=*/false);
    b_.channel_op(out, x.layout, Op::kAdd, /*in_place=*/true);
    if (statistics) b_.elementwise(out, channels, std::array{Op::kMul, Op::kDiv, Op::kSub});
    return Value{x.layout, {}};
  }
  // mean and inv_std back to the tiles holding each channel; whiten (x - mean) inv_std, then
  // scale and shift: pending, fused with what follows.
  if (statistics) b_.broadcast(out, x.layout, Axis::kPositions, 2);
  Value whitened{x.layout, {}, {}};
  pend(b_, whitened, {Op::kSub, Op::kMul, Op::kMul, Op::kAdd});
  return whitened;
}

void NormLowering::batch_norm_gradient(Steps& out, Value& g, std::uint64_t c, DType dtype) {
  if (run_.popnn_norms) {
    // TensorFlow for IPU's BatchNormGrad (norm.cc) through popnn (poplin Norms.cpp): variance
    // back to inv_std; batchNormWhiten (an out-of-place subtract, an in-place multiply);
    // batchNormGradients: g gamma, x_hat (g gamma), one joint reduction of both (shared over
    // the batch-norm group), a copy of the gradient, x_hat times the variance delta, the mean
    // delta added, a scaled add, times inv_std; then batchNormParamGradients on its own: x_hat
    // g and its joint reduction again. Each pass over the activations is its own compute set;
    // the per-channel deltas are small maps brought to the tiles holding each channel.
    const Layout& gl = g.layout;
    const Layout channels = b_.linear(DType::kFloat, 1, c);
    b_.elementwise(out, channels, std::array{Op::kAdd, Op::kRsqrt});
    b_.broadcast(out, gl, Axis::kPositions, 2);
    b_.channel_op(out, gl, Op::kSub, /*in_place=*/false);  // x - mean
    b_.channel_op(out, gl, Op::kMul, /*in_place=*/true);   // x_hat
    b_.channel_op(out, gl, Op::kMul, /*in_place=*/false);  // g gamma
    b_.elementwise(out, gl, std::array{Op::kMul});         // x_hat g gamma
    b_.reduce(out, gl, Axis::kPositions, 2, /*broadcast=*/false);
    share_statistics(out, c);
    b_.elementwise(out, channels, std::array{Op::kMul, Op::kMul});
    b_.broadcast(out, gl, Axis::kPositions, 2);
    b_.copy(out, gl);
    b_.channel_op(out, gl, Op::kMul, /*in_place=*/false);  // x_hat variance delta
    b_.channel_op(out, gl, Op::kAdd, /*in_place=*/true);   // + mean delta
    b_.scaled_add(out, gl);
    b_.channel_op(out, gl, Op::kMul, /*in_place=*/true);  // inv_std
    b_.elementwise(out, gl, std::array{Op::kMul});        // x_hat g, for gamma and beta
    b_.reduce(out, gl, Axis::kPositions, 2, /*broadcast=*/false);
    b_.scaled_add(out, b_.linear(dtype, 1, 2 * c));
    return;
  }
  // Gradient statistics (sum g, sum g x_hat) among the tiles holding each channel of the
  // gradient, with x_hat = (x - mean) inv_std whitened again and multiplied by g; the input
  // gradient is left pending, fused with what follows.
  const std::array<Op, 3> whiten_mul{Op::kSub, Op::kMul, Op::kMul};
  b_.elementwise(out, g.layout, whiten_mul);
  b_.reduce(out, g.layout, Axis::kPositions, 2, /*broadcast=*/false);
  share_statistics(out, c);
  b_.broadcast(out, g.layout, Axis::kPositions, 2);
  // gamma and beta gradients into their accumulators
  b_.scaled_add(out, b_.linear(dtype, 1, 2 * c));
  // dx = (g - mean(g) - x_hat mean(g x_hat)) gamma inv_std, fused with what follows.
  g.pending.clear();
  g.pending_layers.clear();
  pend(b_, g, {Op::kMul, Op::kSub, Op::kMul, Op::kSub, Op::kMul});
}

// popnn's group norm (poplibs lib/popnn/GroupNorm.cpp) runs poplin's norm functions
// (Norms.cpp), as batch norm does, on the grouped view of the activations (groupActs:
// group_norm_view), where each sample's group is one statistic: the reductions and the
// whitening are per statistic on that view, gamma and beta per channel on the activations.
Value NormLowering::group_norm(Steps& out, const Value& x, std::uint64_t samples,
                               std::uint64_t groups, bool statistics) {
  const Layout view = group_norm_view(x.layout, samples, groups);
  const Layout stats = b_.linear(DType::kFloat, 1, samples * groups);
  if (statistics) {
    // groupNormStatistics: normStatistics over the view (sum and sum of squares per statistic
    // among the tiles holding it), then mean and inverse standard deviation.
    b_.reduce(out, view, Axis::kPositions, 2, /*broadcast=*/false);
    b_.elementwise(out, stats, std::array{Op::kMul, Op::kSquare, Op::kSub, Op::kRsqrt});
  }
  if (run_.popnn_norms) {
    // groupNormalise: groupNormWhiten (normWhiten on the view: the statistics brought to the
    // tiles holding each, an out-of-place subtract, an in-place multiply), then normalise:
    // gamma and beta brought to the tiles holding each channel, an out-of-place multiply and
    // an in-place add. Cached statistics hold the variance, turned back into inv_std first.
    if (!statistics) b_.elementwise(out, stats, std::array{Op::kAdd, Op::kRsqrt});
    b_.broadcast(out, view, Axis::kPositions, 2);
    b_.channel_op(out, view, Op::kSub, /*in_place=*/false);
    b_.channel_op(out, view, Op::kMul, /*in_place=*/true);
    b_.broadcast(out, x.layout, Axis::kPositions, 2);
    b_.channel_op(out, x.layout, Op::kMul, /*in_place=*/false);
    b_.channel_op(out, x.layout, Op::kAdd, /*in_place=*/true);
    return Value{x.layout, {}};
  }
  // The statistics back to the tiles holding each; whiten, scale and shift pending, fused with
  // what follows.
  if (statistics) b_.broadcast(out, view, Axis::kPositions, 2);
  Value whitened{x.layout, {}, {}};
  pend(b_, whitened, {Op::kSub, Op::kMul, Op::kMul, Op::kAdd});
  return whitened;
}

void NormLowering::group_norm_gradient(Steps& out, Value& g, std::uint64_t samples, std::uint64_t c,
                                       std::uint64_t groups, DType dtype) {
  const Layout& gl = g.layout;
  const Layout view = group_norm_view(gl, samples, groups);
  if (run_.popnn_norms) {
    // As a framework calls popnn (PopART's GroupNormGradOpx): groupNormParamGradients from
    // the activations (groupNormWhiten, then normParamGradients: x_hat g and one joint
    // reduction per channel of g and x_hat g), into the accumulators; then groupNormGradients
    // from the activations (whitened again; normGradients: g gamma with gamma brought to the
    // tiles holding each channel; normStatisticsGradients on the view: x_hat (g gamma), one
    // joint reduction per statistic of both, the deltas, brought back, then a copy, x_hat
    // times the variance delta, the mean delta added, a scaled add, times inv_std).
    const Layout stats = b_.linear(DType::kFloat, 1, samples * groups);
    const auto whiten = [&] {
      b_.broadcast(out, view, Axis::kPositions, 2);
      b_.channel_op(out, view, Op::kSub, /*in_place=*/false);  // x - mean
      b_.channel_op(out, view, Op::kMul, /*in_place=*/true);   // x_hat
    };
    whiten();
    b_.elementwise(out, gl, std::array{Op::kMul});  // x_hat g
    b_.reduce(out, gl, Axis::kPositions, 2, /*broadcast=*/false);
    b_.scaled_add(out, b_.linear(dtype, 1, 2 * c));
    whiten();
    b_.broadcast(out, gl, Axis::kPositions, 1);
    b_.channel_op(out, gl, Op::kMul, /*in_place=*/false);  // g gamma
    b_.elementwise(out, gl, std::array{Op::kMul});         // x_hat g gamma
    b_.reduce(out, view, Axis::kPositions, 2, /*broadcast=*/false);
    b_.elementwise(out, stats, std::array{Op::kMul, Op::kMul});
    b_.broadcast(out, view, Axis::kPositions, 2);
    b_.copy(out, gl);
    b_.channel_op(out, view, Op::kMul, /*in_place=*/false);  // x_hat variance delta
    b_.channel_op(out, view, Op::kAdd, /*in_place=*/true);   // + mean delta
    b_.scaled_add(out, gl);
    b_.channel_op(out, view, Op::kMul, /*in_place=*/true);  // inv_std
    return;
  }
  // Fused: x_hat g (whitened again), its per-channel reduction for gamma and beta, the
  // per-statistic reduction of g gamma and x_hat g gamma on the view, brought back; the input
  // gradient is left pending, fused with what follows.
  b_.elementwise(out, gl, std::array{Op::kSub, Op::kMul, Op::kMul});
  b_.reduce(out, gl, Axis::kPositions, 2, /*broadcast=*/false);
  b_.scaled_add(out, b_.linear(dtype, 1, 2 * c));
  b_.reduce(out, view, Axis::kPositions, 2, /*broadcast=*/false);
  b_.broadcast(out, view, Axis::kPositions, 2);
  g.pending.clear();
  g.pending_layers.clear();
  pend(b_, g, {Op::kMul, Op::kSub, Op::kMul, Op::kSub, Op::kMul});
}

void NormLowering::nonlinearity(Steps& out, Value& v, Op op) {
  if (run_.popnn_norms) {
    flush(b_, out, v);
    b_.elementwise(out, v.layout, std::array{op});
  } else {
    pend(b_, v, {op});
  }
}

// popnn's nonLinearityInPlace and nonLinearityInputGradient (g x (y > 0)).
void NormLowering::relu(Steps& out, Value& v) { nonlinearity(out, v, Op::kRelu); }
void NormLowering::relu_gradient(Steps& out, Value& g) { nonlinearity(out, g, Op::kMul); }

}  // namespace ipusim::compiler
