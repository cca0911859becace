// SPDX-License-Identifier: Apache-2.0
// Reference kernels: hand-plannable programs that exercise one part of the model each, mapped
// over the chip's tiles the way a sensible planner would (docs/kernels.md describes each
// mapping). Each generator plans for the given chip, so a changed chip gets a re-planned kernel.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::kernels {

// C[M x N] = A[M x K] x B[K x N], or a 2-D convolution, on the AMP units. With groups > 1,
// G independent convs of these sizes (a grouped conv, or a batched matmul [G][M][K] x
// [G][K][N]).
struct ConvArgs {
  std::uint64_t batch = 1;      // N (images); 1 for a matmul
  std::uint64_t in_chans = 0;   // C (matmul: K)
  std::uint64_t height = 0;     // H (matmul: M)
  std::uint64_t width = 1;      // W (matmul: 1)
  std::uint64_t out_chans = 0;  // K (matmul: N)
  std::uint64_t kernel = 1;     // square kernel size
  std::uint64_t stride = 1;
  trace::DType dtype = trace::DType::kHalf;
  std::uint64_t groups = 1;  // G conv groups; in_chans and out_chans are per group
  // The groups are slices of the channels (a grouped or depthwise conv of a CNN), not of the
  // rows (a grouped matmul, e.g. attention per head): the compiler's layouts differ.
  bool channel_groups = false;
  // AMP accumulation type: half (FP16.16) or float (FP16.32) for half inputs; a float dtype
  // always accumulates in float (partials_of), so the default keeps each dtype's precision.
  trace::DType partials = trace::DType::kHalf;
  // The pass reads this operand transposed (a data-gradient pass its weights, a
  // weight-gradient pass its activations): a rearranged copy is made first, and the planner
  // counts that copy's cost in the plan's, as poplin does (poplar-compiler.md §1.3).
  bool transposed_input = false, transposed_weights = false;
  // Bits per supervisor weight load into the AMP engines: 64, Poplar's default
  // (use128BitConvUnitLoad = false, poplar-compiler.md §1.3), or 128.
  std::uint32_t coeff_load_bits = 64;
};

// The partials type a conv accumulates in: float for float inputs, else args.partials.
inline trace::DType partials_of(const ConvArgs& a) {
  return a.dtype == trace::DType::kFloat ? trace::DType::kFloat : a.partials;
}

// The plan chosen for a conv/matmul: parallel splits of conv groups, output rows, output
// channels and input channels, optional serial splits, and what it is expected to cost.
// With a serial split the conv is a repeat loop of serial() iterations over the same tiles;
// each iteration is a conv with in_chans / serial_in input and out_chans / serial_out output
// channels per group, and the parallel splits and per-tile sizes describe one iteration.
struct ConvPlan {
  std::uint32_t row_split = 1, out_split = 1, in_split = 1;
  std::uint64_t rows_per_tile = 0, out_per_tile = 0, in_per_tile = 0;
  std::uint64_t estimated_cycles = 0;  // whole conv, all serial iterations
  std::uint64_t bytes_per_tile = 0;    // peak buffers of the busiest tile (bytes)
  std::uint32_t group_split = 1;       // parallel split of the conv groups (outermost)
  std::uint64_t groups_per_tile = 1;   // conv groups per group block
  // Serial splits of the input or output channels (at most one of them > 1); each divides
  // the channel count exactly.
  std::uint32_t serial_in = 1, serial_out = 1;
  std::uint32_t tiles_used() const { return group_split * row_split * out_split * in_split; }
  std::uint32_t serial() const { return serial_in * serial_out; }
};

// Poplar's "combine conv groups" transform (poplar-compiler.md §1.2, step 7): a channel-grouped
// conv with 1 or 2 input channels per group packs F groups into one with F x the input and
// output channels (the weights block-diagonal, padded with zeros), so the AMP's input grain
// is used; F is the largest power of two up to grain / in_chans that divides the groups.
// Other convs are returned unchanged.
ConvArgs combine_conv_groups(const ChipSpec& chip, const ConvArgs& args);

// poplin's empirical factor on the transposed copy of an operand of `a`
// (cost::transpose_factor of its in x out channels per conv group).
std::uint64_t transpose_factor(const ChipSpec& chip, const ConvArgs& a);

// Plans with every byte of tile memory not needed by the stack and code available.
ConvPlan plan_conv(const ChipSpec& chip, const ConvArgs& args);
// Plans within `budget` bytes per tile for the conv's buffers (the available-memory
// proportion of poplar-compiler.md §1.5): the fastest parallel-only plan that fits; if none
// fits, the fastest plan with a serial split that fits; if none fits, the budget is doubled
// until a plan fits or it exceeds the tile memory (then ModelError), as Poplar's planner
// falls back.
ConvPlan plan_conv(const ChipSpec& chip, const ConvArgs& args, std::uint64_t budget);

// Appends a planned conv to `program`: its compute sets and exchanges (named with `prefix`),
// and the supersteps that run it to `steps`. Adds no tensors: the caller accounts memory
// (the plan's bytes_per_tile are its temporaries).
void emit_conv(trace::IpuProgram& program, const std::string& prefix, const ChipSpec& chip,
               const ConvArgs& args, const ConvPlan& plan, std::vector<trace::Step>& steps);

// The tile of block (group g, row r, input-channel i, output-channel o) of a plan, in the
// order emit_conv lays blocks out (group outermost, output-channel block innermost).
// Poplar's multi-stage reduce plan for a reduction over `depth` tiles (poplar-compiler.md §1.3,
// §2.2): 1 stage below a depth of 16, 2 from 16, 3 from 125, each of fan-in about the
// stage-th root of the depth (at least 2); {0, 1} when there is nothing to reduce.
std::pair<int, std::uint64_t> reduction_stages(std::uint64_t depth);

std::uint32_t plan_tile(const ConvPlan& plan, std::uint32_t g, std::uint32_t r, std::uint32_t i,
                        std::uint32_t o);

// Where the fetch exchange reads an operand from. By default each block starts on one of the
// tiles that use it (the operand was created for the conv) and is multicast to the others; a
// caller that knows where the operand lives adds its transfers to the fetch exchange itself
// (so that a tile receives its block straight from the producer, in the one exchange).
struct FetchSources {
  std::function<void(trace::Exchange&fetch)> input, weights;
};
// emit_conv with caller-supplied fetch transfers for the operands set in `sources` (plans
// without a serial split only).
void emit_conv(trace::IpuProgram& program, const std::string& prefix, const ChipSpec& chip,
               const ConvArgs& args, const ConvPlan& plan, std::vector<trace::Step>& steps,
               const FetchSources& sources);

// The trace name of a conv or matmul kernel: its shape, groups and (when wider than the
// inputs) its partials type, e.g. "matmul_2048x2048x2048_half".
std::string conv_name(const ConvArgs& args);

trace::Trace matmul(const ChipSpec& chip, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                    trace::DType dtype);
// `groups` independent matmuls [G][M][K] x [G][K][N], planned as one grouped conv.
trace::Trace matmul(const ChipSpec& chip, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                    trace::DType dtype, std::uint64_t groups);
trace::Trace conv2d(const ChipSpec& chip, const ConvArgs& args);
// The same kernel planned within `budget` bytes per tile (plan_conv's budget overload).
trace::Trace conv2d(const ChipSpec& chip, const ConvArgs& args, std::uint64_t budget);
// Sum `inputs` partial vectors of `outputs` elements each; partials are already on the tiles
// that own their outputs, so the reduction is tile-local.
trace::Trace reduce(const ChipSpec& chip, std::uint64_t outputs, std::uint64_t inputs,
                    trace::DType dtype);
// One elementwise op over `n` elements spread evenly over all tiles.
trace::Trace elementwise(const ChipSpec& chip, trace::Op op, std::uint64_t n, trace::DType dtype);
// Every one of `tiles` tiles sends a distinct `bytes` block to every other.
trace::Trace exchange_all_to_all(const ChipSpec& chip, std::uint64_t bytes, std::uint32_t tiles);
// Tile `src` sends the same `bytes` to tiles 0..tiles-1.
trace::Trace exchange_broadcast(const ChipSpec& chip, std::uint64_t bytes, std::uint32_t tiles,
                                std::uint32_t src);
// `iterations` internal syncs in a repeat loop.
trace::Trace sync_loop(const ChipSpec& chip, std::uint64_t iterations);

// System microbenchmarks (trace format v2; run with --system).
// IPU `src` copies `bytes` to IPU `dst` in one global exchange.
trace::Trace link_p2p(const ChipSpec& chip, std::uint64_t bytes, std::uint32_t src,
                      std::uint32_t dst);
// One collective of a `bytes` tensor over `group` data-parallel replicas of one IPU each.
trace::Trace collective(const ChipSpec& chip, trace::CollectiveOp op, std::uint64_t bytes,
                        std::uint32_t group, trace::CollectiveMethod method, trace::DType dtype);
// `iterations` external syncs of all `group` IPUs.
trace::Trace external_sync(const ChipSpec& chip, std::uint32_t group, std::uint64_t iterations);

}  // namespace ipusim::kernels
