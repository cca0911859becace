// SPDX-License-Identifier: Apache-2.0
// The weight update of a training step, one pass over a model's weight tensors for every model
// (docs/workloads.md "Weight update"): after the gradient-accumulation loop the gradients are
// reduced over the replicas (fused buffers, or one collective per tensor; reduce-scattered
// under replicated tensor sharding), optionally clipped by their global norm, then the
// optimiser (SGD with momentum, LARS, LAMB or AdamW) runs one weight tensor at a time on the
// tiles holding it, its state streamed from Streaming Memory when it lives there. No SystemC.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ipu_builder.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "memory.hpp"

namespace ipusim::compiler {

// Weight tensors the optimiser updates alike: `count` of them, each of `elements` (its
// gradient's collective payload) on `layout` (sharded by the pass under replicated tensor
// sharding). Equal tensors run as one loop of `count`.
struct UpdatedWeights {
  Layout layout;
  std::uint64_t elements = 0;
  std::uint64_t count = 1;
  bool adapted = true;  // LARS adapts it (a conv or fc kernel; biases and norms it skips)
};

struct WeightUpdate {
  std::vector<UpdatedWeights> weights;  // in update order
  std::uint64_t parameters = 0;         // elements of all of them: the fused collectives' payload
  trace::DType dtype = trace::DType::kHalf;
  // SGD's momentum takes weight decay (v = m v + (g + wd w); w -= lr v), as the transformer
  // recipes run it; without, v = m v + lr g; w -= v (the CNN recipes' SGD, and LARS's skipped
  // tensors).
  bool sgd_decay = true;
  bool pipelined = false;  // clipping's norms and factor cross the replica's IPUs
};

// Optimiser moments kept per weight: SGD's and LARS's momentum, or LAMB's and AdamW's two.
std::uint64_t moments_kept(Optimiser o);
// Bytes of the optimiser state of `parameters` elements of `dtype`: its moments of every
// weight, or of their 1/replicas shard under replicated tensor sharding.
std::uint64_t optimiser_state_bytes(const RunConfig& run, std::uint64_t parameters,
                                    trace::DType dtype);
// Where the run keeps the optimiser state of `parameters` elements of `dtype` (memory.hpp).
OptimiserMemory optimiser_memory(const RunConfig& run, std::uint64_t parameters,
                                 trace::DType dtype);

// Appends the weight update to `out`. Returns the bytes of weight-tensor norms each IPU sends
// to IPU 0 for gradient clipping (0 without): the caller adds those global exchanges
// (indices 1 and 2 of the trace's, pushed here when `pipelined`).
std::uint64_t lower_weight_update(IpuBuilder& b, Steps& out, const RunConfig& run,
                                  const WeightUpdate& update);

// Gradient clipping's two global exchanges in a pipeline of `norm_bytes.size()` IPUs: each
// IPU's weight-tensor norms (4-byte floats, `norm_bytes[i]` from IPU i) to IPU 0, which sums
// them, and its clip factor back (trace indices 1 and 2, after the pipeline's copy).
std::vector<trace::GlobalExchange> clip_copies(const std::vector<std::uint64_t>& norm_bytes);

}  // namespace ipusim::compiler
