// SPDX-License-Identifier: Apache-2.0
#include "optimiser.hpp"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <span>

#include "ipusim/util/units.hpp"

namespace ipusim::compiler {
namespace {

using trace::Op;

// Under replicated tensor sharding only tensors of at least PopART's
// minElementsForReplicatedTensorSharding (8,192) are sharded: reduce-scattered, then
// all-gathered after the update; the others are all-reduced.
constexpr std::uint64_t kMinShardedElements = 8192;

class Updater {
 public:
  Updater(IpuBuilder& b, Steps& out, const RunConfig& run, const WeightUpdate& u)
      : b_(b), out_(out), run_(run), u_(u), eb_(trace::dtype_bytes(u.dtype)) {
    // A weight the optimiser updates is on the tiles holding it: its own layout, or under
    // replicated tensor sharding its 1/replicas shard, taken to stay on the same tiles (each
    // tile keeps its part of the reduce-scatter).
    for (UpdatedWeights w : u.weights) {
      if (rts() && w.layout.elements() >= kMinShardedElements)
        w.layout = IpuBuilder::part(w.layout, run.replicas);
      weights_.push_back(w);
    }
  }

  // Phased training (RunConfig::phased_training): the gradients were reduced phase by phase;
  // the weights and gradients (each replica's share) are loaded from Streaming Memory with the
  // state, and the weights stored back as shards, gathered when a phase loads them.
  bool phased() const { return run_.phased_training(); }

  std::uint64_t run() {
    if (!phased()) reduce_gradients();
    const std::uint64_t sharded_tensors = sharded_count();
    const auto update_scope = b_.scope("", trace::Pass::kWeightUpdate, trace::OpKind::kOptimiser);
    const std::uint64_t state = optimiser_state_bytes(run_, u_.parameters, u_.dtype);
    const std::uint64_t shard =
        rts() ? ceil_div(u_.parameters * eb_, std::uint64_t{run_.replicas}) : u_.parameters * eb_;
    if (run_.optimiser_state_streaming) {  // the state lives in Streaming Memory
      b_.keep_in_streaming_memory(state);
      b_.host(out_, state + (phased() ? 2 * shard : 0), trace::HostDirection::kToIpu,
              trace::HostMemory::kStreaming);
    }
    const std::uint64_t norm_bytes = run_.clip_gradients ? clip_gradients() : 0;
    switch (run_.optimiser) {
      case Optimiser::kSgd:
        per_weight([&](Steps& out, const UpdatedWeights& w) { momentum(out, w, u_.sgd_decay); });
        break;
      case Optimiser::kLars:
        lars();
        break;
      case Optimiser::kLamb:
      case Optimiser::kAdamw:
        adaptive(sharded_tensors);
        break;
      case Optimiser::kNone:
        break;
    }
    if (run_.optimiser_state_streaming)
      b_.host(out_, state + (phased() ? shard : 0), trace::HostDirection::kFromIpu,
              trace::HostMemory::kStreaming);
    if (!phased()) gather_weights();
    return norm_bytes;
  }

 private:
  // The tensors reduce_gradients reduce-scatters one by one (replicated tensor sharding with
  // per-tensor collectives: those of at least kMinShardedElements); 0 with fused buffers.
  std::uint64_t sharded_count() const {
    if (!rts() || !per_tensor()) return 0;
    std::uint64_t n = 0;
    for (const auto& [elements, count] : tensor_sizes())
      if (elements >= kMinShardedElements) n += count;
    return n;
  }

  bool rts() const { return run_.replicated_tensor_sharding && run_.replicas > 1; }
  bool per_tensor() const { return run_.per_tensor_collectives && run_.replicas > 1; }
  static trace::Group replicas() { return {trace::GroupKind::kReplicas, 0}; }

  // The weight tensors by elements, with how many there are of each size.
  std::map<std::uint64_t, std::uint64_t> tensor_sizes() const {
    std::map<std::uint64_t, std::uint64_t> sizes;
    for (const auto& w : u_.weights) sizes[w.elements] += w.count;
    return sizes;
  }
  void each(trace::Step step, std::uint64_t count) { push_repeated(out_, std::move(step), count); }
  void per_weight(const std::function<void(Steps&, const UpdatedWeights&)>& ops) {
    for (const UpdatedWeights& w : weights_) {
      Steps body;
      ops(body, w);
      push_repeated(out_, std::move(body), w.count);
    }
  }

  // The gradients reduced over the replicas: one collective per weight tensor, equal sizes
  // together (PopART 2.3: run.collective_grouping per_tensor), or fused buffers.
  void reduce_gradients() {
    if (run_.replicas <= 1) return;
    const auto scope = b_.scope("", trace::Pass::kGradientAllreduce);
    if (per_tensor()) {
      for (const auto& [elements, count] : tensor_sizes()) {
        const bool sharded = rts() && elements >= kMinShardedElements;
        each(b_.collective(
                 sharded ? trace::CollectiveOp::kReduceScatter : trace::CollectiveOp::kAllReduce,
                 elements * eb_, u_.dtype, replicas()),
             count);
      }
    } else {
      b_.collectives(out_,
                     rts() ? trace::CollectiveOp::kReduceScatter : trace::CollectiveOp::kAllReduce,
                     u_.parameters * eb_, u_.dtype, replicas(), run_.allreduce_buffer);
    }
  }

  // The sharded weights gathered again after the update (replicated tensor sharding).
  void gather_weights() {
    if (rts() && per_tensor()) {
      for (const auto& [elements, count] : tensor_sizes())
        if (elements >= kMinShardedElements)
          each(b_.collective(trace::CollectiveOp::kAllGather, elements * eb_, u_.dtype, replicas()),
               count);
    } else if (rts()) {
      b_.collectives(out_, trace::CollectiveOp::kAllGather, u_.parameters * eb_, u_.dtype,
                     replicas(), run_.allreduce_buffer);
    }
  }

  // PopART's ClipWeightGradientsByNorm (sdk-release-2.3 transforms/
  // clipweightgradientsbynorm.cpp): a ReduceSumSquare (one SQUARE_ADD reduction, IpuBuilder::
  // norm) of each reduced gradient on its IPU, the norms copied to IPU 0 and summed (sqrt, max,
  // div there: scalars), the clip factor copied back, and every gradient multiplied by it
  // before the optimiser. Returns the norms' bytes.
  std::uint64_t clip_gradients() {
    const auto clip_scope =
        b_.scope("gradient_clipping", trace::Pass::kWeightUpdate, trace::OpKind::kOptimiser);
    std::uint64_t weight_tensors = 0;
    for (const auto& w : weights_) weight_tensors += w.count;
    per_weight(
        [&](Steps& out, const UpdatedWeights& w) { b_.norm(out, w.layout, /*broadcast=*/false); });
    if (u_.pipelined) {
      out_.push_back(make_step(trace::StepKind::kGlobalExchange, 1));
      out_.push_back(make_step(trace::StepKind::kGlobalExchange, 2));
    }
    const Op scale = Op::kMul;
    per_weight([&](Steps& out, const UpdatedWeights& w) {
      b_.elementwise(out, w.layout, {&scale, 1});
    });
    return 4 * weight_tensors;
  }

  // SGD with momentum, with or without weight decay.
  void momentum(Steps& out, const UpdatedWeights& w, bool decay) {
    if (decay) {  // v = m v + (g + wd w); w -= lr v
      const Op update[] = {Op::kMul, Op::kMul, Op::kAdd, Op::kAdd, Op::kMul, Op::kSub};
      b_.elementwise(out, w.layout, update);
    } else {  // v = m v + lr g; w -= v
      const Op update[] = {Op::kMul, Op::kMul, Op::kAdd, Op::kSub};
      b_.elementwise(out, w.layout, update);
    }
  }

  // LARS as TensorFlow applies it per variable (graphcore/examples cnns lars_optimizer.py):
  // its two norms, ||w|| and ||g||, of each adapted tensor (conv and fc kernels; batch-norm
  // gamma and beta and biases are in its skip list), each one SQUARE_ADD reduction over that
  // tensor's tiles (IpuBuilder::norm: XLA's reduce of x * x, fused by the poplar plugin as
  // reduction_square_add); then the fused momentum and weight update of every tensor. With
  // run.reduce_many_buffer the norms are combined into ReduceMany ops of at most that many
  // float outputs' bytes (the plugin's ReduceManyColocatorHelper), every update after them.
  void lars() {
    const std::uint64_t per_op = run_.reduce_many_buffer / 4;  // 0: each norm on its own
    if (per_op > 0) {
      std::vector<Layout> norms;  // ||w|| and ||g|| of each adapted tensor, in order
      for (const auto& w : weights_)
        if (w.adapted)
          for (std::uint64_t i = 0; i < 2 * w.count; ++i) norms.push_back(w.layout);
      for (std::size_t i = 0; i < norms.size(); i += per_op) {
        const std::size_t n = std::min<std::size_t>(per_op, norms.size() - i);
        b_.reduce_many(out_, fmt::format("lars_norms{}", i / per_op),
                       std::span(norms).subspan(i, n));
      }
    }
    per_weight([&](Steps& out, const UpdatedWeights& w) {
      if (!w.adapted) return momentum(out, w, /*decay=*/false);
      if (per_op == 0)
        for (int norm = 0; norm < 2; ++norm) b_.norm(out, w.layout, /*broadcast=*/true);
      // v = m v + lr trust (g + wd w); w -= v
      const Op update[] = {Op::kMul, Op::kAdd, Op::kMul, Op::kMul, Op::kAdd, Op::kSub};
      b_.elementwise(out, w.layout, update);
    });
  }

  // LAMB and AdamW, as PopART applies them (one updater and var-update op per weight):
  // m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; u = m / (sqrt(v) + eps) + wd w; LAMB then takes
  // ||w|| and ||u|| of the tensor (LambSquareOpx: one SQUARE_ADD reduction each).
  void adaptive(std::uint64_t sharded_tensors) {
    const bool lamb = run_.optimiser == Optimiser::kLamb;
    const Op moments[] = {Op::kMul,  Op::kAdd, Op::kMul, Op::kMul, Op::kAdd,
                          Op::kSqrt, Op::kAdd, Op::kDiv, Op::kAdd};
    per_weight([&](Steps& out, const UpdatedWeights& w) {
      b_.elementwise(out, w.layout, moments);
      for (int norm = 0; lamb && norm < 2; ++norm) b_.norm(out, w.layout, /*broadcast=*/true);
    });
    if (!lamb) {
      const Op update[] = {Op::kMul, Op::kSub};  // w -= lr u
      per_weight(
          [&](Steps& out, const UpdatedWeights& w) { b_.elementwise(out, w.layout, update); });
      return;
    }
    // A sharded tensor's norms are sums over every replica's shard: PopART adds a scalar
    // all-reduce (float) after each of LAMB's two (LambSquareOp with replicated tensor
    // sharding).
    if (per_tensor() && sharded_tensors > 0)
      each(b_.collective(trace::CollectiveOp::kAllReduce, 4, trace::DType::kFloat, replicas()),
           2 * sharded_tensors);
    const Op update[] = {Op::kDiv, Op::kMul, Op::kSub};  // w -= lr (||w|| / ||u||) u
    per_weight([&](Steps& out, const UpdatedWeights& w) { b_.elementwise(out, w.layout, update); });
  }

  IpuBuilder& b_;
  Steps& out_;
  const RunConfig& run_;
  const WeightUpdate& u_;
  std::uint64_t eb_;
  std::vector<UpdatedWeights> weights_;  // sharded where the run shards them
};

}  // namespace

std::uint64_t moments_kept(Optimiser o) {
  return o == Optimiser::kSgd || o == Optimiser::kLars ? 1 : 2;
}

std::uint64_t optimiser_state_bytes(const RunConfig& run, std::uint64_t parameters,
                                    trace::DType dtype) {
  const bool sharded = run.replicated_tensor_sharding && run.replicas > 1;
  const std::uint64_t shard = sharded ? ceil_div(parameters, run.replicas) : parameters;
  return moments_kept(run.optimiser) * shard * trace::dtype_bytes(dtype);
}

OptimiserMemory optimiser_memory(const RunConfig& run, std::uint64_t parameters,
                                 trace::DType dtype) {
  OptimiserMemory o;
  o.moments = moments_kept(run.optimiser);
  o.streaming = run.optimiser_state_streaming;
  o.sharded = run.replicated_tensor_sharding && run.replicas > 1;
  o.sharded_bytes = o.sharded ? optimiser_state_bytes(run, parameters, dtype) : 0;
  return o;
}

std::uint64_t lower_weight_update(IpuBuilder& b, Steps& out, const RunConfig& run,
                                  const WeightUpdate& update) {
  return Updater(b, out, run, update).run();
}

std::vector<trace::GlobalExchange> clip_copies(const std::vector<std::uint64_t>& norm_bytes) {
  const trace::Provenance copy{
      {"gradient_clipping"}, trace::Pass::kWeightUpdate, trace::OpKind::kCopy};
  trace::GlobalExchange norms{"clip_norms", {}, copy}, factor{"clip_factor", {}, copy};
  for (std::uint32_t i = 1; i < norm_bytes.size(); ++i) {
    norms.copies.push_back({i, 0, norm_bytes[i]});
    factor.copies.push_back({0, i, 4});
  }
  return {std::move(norms), std::move(factor)};
}

}  // namespace ipusim::compiler
