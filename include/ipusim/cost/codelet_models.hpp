// SPDX-License-Identifier: Apache-2.0
// Codelet cycle models: how many tile clock cycles one vertex instance takes, derived from the
// timing rules in ../shared/reference/ipu-hardware.md §3-§4 (barrel issue: a tile runs its
// worker contexts round-robin, so a multi-worker vertex costs
// worker_contexts x (slowest worker's instruction count) + supervisor overhead).
// Plain C++ with no SystemC: the simulator and the planners call the same functions.
// Every model reads its hardware numbers (AMP engines, vector width, load width, worker count)
// from the ChipSpec, so changing the chip changes the timing; the loop-structure constants
// (instructions of fixed overhead per loop) are properties of the codelet software and live in
// codelet_models.cpp with their source.
#pragma once

#include <cstdint>
#include <string>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/trace/codelet.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::cost {

struct VertexCost {
  std::uint64_t cycles = 0;  // tile clock cycles for the whole vertex (all workers)
  std::uint64_t flops = 0;   // useful floating-point operations (a MAC counts 2)
  bool operator==(const VertexCost&) const = default;
};

struct AmpConvArgs {
  trace::DType in = trace::DType::kHalf;
  trace::DType partials = trace::DType::kHalf;
  std::uint64_t positions = 0;  // output positions computed on the tile (field x batch)
  std::uint64_t in_chans = 0;   // input channels per conv group
  std::uint64_t out_chans = 0;  // output channels per conv group
  std::uint64_t groups = 1;     // conv groups
  std::uint64_t kernel_h = 1;   // kernel height (nx1 path only)
  std::uint64_t kernel_w = 1;   // kernel width (nx1 path only)
  std::uint64_t width = 0;      // nx1: output positions per field row (0: one contiguous run)
  // Bits per supervisor weight load: 64 caps the load at 8 B/cycle; 0 or 128: the chip's rate.
  std::uint64_t coeff_load_bits = 0;
  // nx1 only: kernel rows one weight load covers (poplin's convUnitWeightHeight, 1, 2 or 4):
  // an engine's weights then hold weights_per_engine / weight_height input channels of
  // weight_height rows, so convs with few input channels fill the engines.
  std::uint64_t weight_height = 1;
};

VertexCost amp_conv1x1(const ChipSpec& chip, const AmpConvArgs& a);

// poplin's SLIC vertex (ConvPartial1x4SLIC: a 1x4 kernel window slid along an output row, for
// few channels per conv group), half in, as poplibs' estimator costs it
// (PerformanceEstimation.hpp, getConvPartialSlicSupervisor{WeightLoad,OuterLoop,InnerLoop}
// CycleEstimate and getConvPartialSlicInnerLoopCycles; docs/codelets.md "amp_slic").
struct SlicArgs {
  trace::DType partials = trace::DType::kHalf;
  std::uint64_t positions = 0;         // output positions computed on the tile (field x batch)
  std::uint64_t width = 0;             // output positions per field row (0: one run)
  std::uint64_t groups_per_group = 1;  // conv groups per group: 1, 2, 4 (8, 16 with 4 chains)
  std::uint64_t chans = 4;             // input = output channels per conv group: 4, 2 or 1
  std::uint64_t group_groups = 1;      // groups of conv groups on the tile
  std::uint64_t kernel_h = 1, kernel_w = 4;  // kernel_w in 1x4 windows (rounded up)
  std::uint64_t stride = 1;                  // output stride along the row: 1 or 2
  std::uint64_t chains = 2;                  // conv-unit chains: 4 (16 engines, half partials) or 2
};
VertexCost amp_slic(const ChipSpec& chip, const SlicArgs& a);
VertexCost amp_convnx1(const ChipSpec& chip, const AmpConvArgs& a);

// poplin's horizontal-MAC vertex (ConvPartialHorizontalMac: each worker's output positions as
// dot products over the input channels on the vector datapath, no AMP), as poplibs' planner
// costs it (PerformanceEstimation.hpp estimateConvPartialHorizontalMacInnerLoopCycles,
// getConvPartialHorizontalMacSupervisorOuterLoopCycleEstimate, estimateZeroSupervisorCycles;
// docs/codelets.md "conv_hmac"). One input-channel group of in_chans channels; output
// channels in groups of 2 with half partials, 1 with float.
struct HmacArgs {
  trace::DType in = trace::DType::kHalf;
  trace::DType partials = trace::DType::kHalf;
  std::uint64_t positions = 0;  // output positions computed on the tile (field x batch)
  std::uint64_t width = 0;      // output positions per field row (0: one row)
  std::uint64_t in_chans = 1;   // input channels per conv group (one group, 2-padded for half)
  std::uint64_t out_chans = 1;  // output channels per conv group
  std::uint64_t groups = 1;     // conv groups
  std::uint64_t kernel_h = 1, kernel_w = 1;
};
VertexCost conv_hmac(const ChipSpec& chip, const HmacArgs& a);
// Output channels the HMAC vertex computes at once: 2 with half partials, 1 with float
// (ConvVertexType.cpp getConvVertexHMACCandidates' partialChansPerGroup).
std::uint64_t hmac_out_chans_per_group(trace::DType partials);
// Input channels a half HMAC vertex's group is padded to a multiple of: 2 for half, 1 for
// float (getConvVertexHMACCandidates' grain).
std::uint64_t hmac_in_grain(trace::DType in);

VertexCost dot(const ChipSpec& chip, trace::DType in, trace::DType partials, std::uint64_t length,
               std::uint64_t count);
VertexCost reduce(const ChipSpec& chip, trace::Op op, trace::DType in, trace::DType out,
                  std::uint64_t outputs, std::uint64_t inputs,
                  trace::ReduceLayout layout = trace::ReduceLayout::kPartialSums,
                  bool first_stage = false);
// The pieces popops splits a reduction of `inputs` partials to one value into, one per worker
// (tile::scalar_reduce_pieces): with more than one, a second stage reduces their results.
std::uint64_t scalar_reduce_split(const ChipSpec& chip, trace::Op op, trace::DType in,
                                  std::uint64_t inputs);
VertexCost unary(const ChipSpec& chip, trace::Op op, trace::DType dtype, std::uint64_t n);
VertexCost binary(const ChipSpec& chip, trace::Op op, trace::DType dtype, std::uint64_t n);
VertexCost scaled_add(const ChipSpec& chip, trace::DType dtype, std::uint64_t n);
VertexCost cast(const ChipSpec& chip, trace::DType from, trace::DType to, std::uint64_t n);
VertexCost copy(const ChipSpec& chip, std::uint64_t bytes);
VertexCost dynamic_slice(const ChipSpec& chip, trace::DType dtype, std::uint64_t elems,
                         std::uint64_t copies);
// A fused elementwise expression (popops::map code generation): one generated C++ codelet
// whose loop applies `ops` operators per vector, costing `op_cycles` (their summed
// per-vector cycles from the poplibs op tables) plus the C++ loop overhead per vector.
VertexCost map(const ChipSpec& chip, trace::DType dtype, std::uint64_t n, std::uint64_t op_cycles,
               std::uint64_t ops);
// Rearranging n elements on a tile (transpose or channel regroup): one element per
// min(memcpy rate, element size) bytes per cycle, as poplin costs rearrangements, times
// poplin's empirical factor `factor` (the transpose codelet's parameter: 0 none, 1 = 5/4,
// 2 = 5/3), plus a six-worker copy call.
// poplin's estimate of that rearrangement in its plan objective (ConvModel.cpp,
// addRearrangementAndPaddingCosts: inputsCopyCycles and the like): transpose without the call.
std::uint64_t rearrangement_copy_cycles(const ChipSpec& chip, trace::DType dtype, std::uint64_t n,
                                        std::uint64_t factor);
VertexCost transpose(const ChipSpec& chip, trace::DType dtype, std::uint64_t n,
                     std::uint64_t factor = 0);
// A binary op of n elements with a vector of `length` broadcast along the outer dimension
// (popops' BroadcastVectorInner MultiVertex: batch norm's per-channel scale and shift), as
// popops estimates it (docs/codelets.md "broadcast_binary").
VertexCost broadcast_binary(const ChipSpec& chip, trace::Op op, trace::DType dtype, std::uint64_t n,
                            std::uint64_t length, bool in_place);
// The factor poplin applies to a rearrangement of conv operands whose channels (in x out per
// conv group) are `channels`: 1 (5/4) if a multiple of the vector width, else 2 (5/3).
std::uint64_t transpose_factor(const ChipSpec& chip, trace::DType dtype, std::uint64_t channels);

// Per-vector cycles `c` of an elementwise operator in the poplibs op tables (ipu-hardware.md
// §4), for composing fused `map` vertices.
std::uint64_t op_vector_cycles(trace::Op op, trace::DType dtype);

// Dispatch on a trace vertex (parameters in catalogue slot order). Cycle and FLOP counts are
// overflow-checked: a vertex whose counts pass 2^64 throws ArithmeticOverflow (a ModelError)
// naming the vertex and its parameters.
VertexCost vertex_cost(const ChipSpec& chip, const trace::Vertex& v);
// "amp_conv1x1 in=half partials=float positions=4 ...", for messages.
std::string describe_vertex(const trace::Vertex& v);

// AMP engines for an (input, partials) pair on this chip; throws ModelError for an
// unsupported pair (e.g. float in, half partials).
std::uint32_t amp_engines(const ChipSpec& chip, trace::DType in, trace::DType partials);

}  // namespace ipusim::cost
