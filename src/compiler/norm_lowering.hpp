// SPDX-License-Identifier: Apache-2.0
// Norm lowering: a CNN's batch norm, group norm and ReLU as popnn lowers them (run.norm_lowering
// popnn: each pass over the activations its own compute set, poplibs' popnn batchNormalise,
// batchNorm gradients and nonLinearity ops) or fused (run.norm_lowering fused: the elementwise work
// left pending, fused with its neighbours into one compute set). The one place that choice is made.
#pragma once

#include <cstdint>

#include "ipu_builder.hpp"
#include "lowering.hpp"

namespace ipusim::compiler {

class NormLowering {
 public:
  NormLowering(IpuBuilder& b, const RunConfig& run) : b_(b), run_(run) {}

  // Batch norm of `x` (`channels` channels) in training: the statistics (skipped when
  // `statistics` is false: a recomputation reusing the cached ones), then the normalisation.
  // Returns the output value (in place: on x's layout).
  Value batch_norm(Steps& out, const Value& x, std::uint64_t channels, bool statistics);
  // Inference: the stored statistics folded into a per-channel scale and shift, applied where
  // the data lives (fused with what follows).
  Value batch_norm_inference(const Value& x);
  // The gradient of a batch norm, `g` on the layout the forward input has been brought to;
  // leaves g as the input gradient (dtype: the parameters' gradients).
  void batch_norm_gradient(Steps& out, Value& g, std::uint64_t channels, trace::DType dtype);
  // Group norm of `x` (`samples` samples, its layout's channels) in `groups` groups, in
  // training or inference (its statistics are each sample's: nothing to fold, nothing to share
  // over replicas); `statistics` false reuses cached ones. Returns the output value (in place).
  Value group_norm(Steps& out, const Value& x, std::uint64_t samples, std::uint64_t groups,
                   bool statistics);
  // The gradient of a group norm, `g` on the layout the forward input has been brought to;
  // leaves g as the input gradient (dtype: the parameters' gradients).
  void group_norm_gradient(Steps& out, Value& g, std::uint64_t samples, std::uint64_t channels,
                           std::uint64_t groups, trace::DType dtype);
  // Whether a recomputed norm reuses the forward's statistics (run.batchnorm_statistics_cache).
  bool caches_statistics() const { return run_.batchnorm_statistics_cache; }
  // ReLU in place on `v`, and its gradient g x (y > 0) (y already on g's layout).
  void relu(Steps& out, Value& v);
  void relu_gradient(Steps& out, Value& g);

 private:
  // Distributed batch norm: a batch norm's two per-channel float statistics all-reduced over
  // the run's batch-norm group of replicas.
  void share_statistics(Steps& out, std::uint64_t channels);
  // `op` on `v`: popnn's own compute set (not part of an expression), or pending when fused.
  void nonlinearity(Steps& out, Value& v, trace::Op op);

  IpuBuilder& b_;
  const RunConfig& run_;
};

}  // namespace ipusim::compiler
