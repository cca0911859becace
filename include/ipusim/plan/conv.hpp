// SPDX-License-Identifier: Apache-2.0
// The conv and matmul planner and emitter (docs/kernels.md, poplar-compiler.md §1): a conv or
// matmul's tile partition chosen within an available-memory budget and costed with the
// simulator's own codelet and exchange models, then laid out as compute sets, exchanges and
// supersteps. The compiler plans every conv and matmul of a model with it; `ipusim kernel
// conv2d` and `matmul` run one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/trace/program.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::plan {

// A size or step in the two spatial dimensions: rows (h) and columns (w). One number is both
// (a square kernel, the same stride down and across).
struct Spatial {
  std::uint64_t h = 1, w = 1;
  Spatial() = default;
  Spatial(std::uint64_t both) : h(both), w(both) {}  // NOLINT(google-explicit-constructor)
  Spatial(std::uint64_t rows, std::uint64_t cols) : h(rows), w(cols) {}
  bool operator==(const Spatial&) const = default;
  std::uint64_t area() const { return h * w; }
};
// "3" for a square 3 x 3, else rows x columns ("7x1"), as conv names print them.
inline std::string to_string(const Spatial& s) {
  return s.h == s.w ? std::to_string(s.h) : std::to_string(s.h) + "x" + std::to_string(s.w);
}

// C[M x N] = A[M x K] x B[K x N], or a 2-D convolution, on the AMP units. With groups > 1,
// G independent convs of these sizes (a grouped conv, or a batched matmul [G][M][K] x
// [G][K][N]).
struct ConvArgs {
  std::uint64_t batch = 1;      // N (images); 1 for a matmul
  std::uint64_t in_chans = 0;   // C (matmul: K)
  std::uint64_t height = 0;     // H (matmul: M)
  std::uint64_t width = 1;      // W (matmul: 1)
  std::uint64_t out_chans = 0;  // K (matmul: N)
  Spatial kernel = 1;           // kernel rows x columns
  Spatial stride = 1;           // output stride down and across
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
  // A matmul (poplin's NONE_MATMUL and fully connected passes), not a conv: Poplar lays its
  // operands out for the swapped form, C^T = B^T A^T, so that form needs no rearrangement and
  // the unswapped one does (ConvModel.cpp, addRearrangementAndPaddingCosts). A conv's weight
  // gradient lowered as a matmul is a conv pass (false): weight_update.
  bool matmul = false;
  // A conv's weight-gradient pass lowered as a matmul (poplin's TRAINING_WU): poplin
  // rearranges its output unless its operands are swapped (addRearrangementAndPaddingCosts:
  // a weight update's output "should be swapped"), so it too is planned in both forms.
  bool weight_update = false;
  // Conv groups packed into each group by combine_conv_groups (1: none). A conv of 1 or 2
  // channels a group so combined may also run on poplin's SLIC vertex, whose weights are not
  // block-diagonal (geometry.hpp slic_groupings).
  std::uint32_t combined_groups = 1;

  // Shaped as a matmul: one image one column wide under a 1x1 window at stride 1 (how
  // IpuBuilder::matmul plans an M x K by K x N product: height M, input channels K).
  bool matmul_shaped() const { return batch == 1 && width == 1 && kernel == 1 && stride == 1; }
};

// Whether the planner also tries the product with its operands swapped (poplin's swapOperands
// transform, poplar-compiler.md §1.2): a matmul or a conv's weight update (ConvArgs::matmul,
// weight_update) of one group. poplin tries both forms for every conv and matmul; ipusim tries
// the swapped form where poplin charges the unswapped one a rearrangement, so it can win.
bool swappable(const ConvArgs& a);
// The same product with its operands swapped, C^T = B^T A^T: rows and output channels
// exchanged, and each operand's flags (read transposed) going with it.
ConvArgs swap_operands(const ConvArgs& a);

// Elements of a conv's input, groups x batch x height x width x input channels, and of its
// weights, groups x kernel rows x columns x input x output channels.
inline std::uint64_t input_elements(const ConvArgs& a) {
  return a.groups * a.batch * a.height * a.width * a.in_chans;
}
inline std::uint64_t weight_elements(const ConvArgs& a) {
  return a.groups * a.kernel.area() * a.in_chans * a.out_chans;
}

// The partials type a conv accumulates in: float for float inputs, else args.partials.
inline trace::DType partials_of(const ConvArgs& a) {
  return a.dtype == trace::DType::kFloat ? trace::DType::kFloat : a.partials;
}

// The vertex a plan's blocks run on, poplin's methods (ConvVertexType.cpp
// getConvMethodCandidates) that ipusim plans:
// - kAmp: the AMP (amp_conv1x1, amp_convnx1), output channels in groups of its engines;
// - kSlic: poplin's SLIC vertex (amp_slic: vertex groups of 2 to 16 conv groups of 1 or 2
//   channels, 1x4 kernel windows), on the AMP's splits, only the conv's real weights fetched
//   (getConvVertexSLICCandidates);
// - kHmac: the horizontal-MAC vertex (conv_hmac: dot products on the vector datapath), output
//   channels in groups of 2 (half partials) or 1 and input channels in groups of 2 (half) or 1,
//   a tile's input channels one group (getConvVertexHMACCandidates).
enum class ConvMethod : std::uint8_t { kAmp, kSlic, kHmac };

// The order of a plan's blocks on its tiles (plan_tile; poplin's Plan::LinearizeTileOrder):
// - kStandard: conv-group block outermost, then row block, input-channel block, and
//   output-channel block innermost;
// - kInputOuter: the input-channel block outside the row block (poplin's FC_BWD_AS_CONV), the
//   data-gradient pass of a joint plan (plan_fully_connected): its block (rows i, input
//   channels r) lands on the tile of the forward pass's block (rows r, input channels i), which
//   holds that weight block.
enum class TileOrder : std::uint8_t { kStandard, kInputOuter };

// The plan chosen for a conv/matmul: parallel splits of conv groups, output rows, output
// channels and input channels, optional serial splits, and what it is expected to cost.
// With a serial split the conv is a repeat loop of serial() iterations over the same tiles;
// each iteration is a conv with in_chans / serial_in input and out_chans / serial_out output
// channels per group, and the parallel splits and per-tile sizes describe one iteration.
struct ConvPlan {
  std::uint32_t row_split = 1, out_split = 1, in_split = 1;
  std::uint64_t rows_per_tile = 0, out_per_tile = 0, in_per_tile = 0;
  Cycles estimated_cycles{};          // whole conv, all serial iterations
  Bytes bytes_per_tile{};             // peak buffers of the busiest tile
  std::uint32_t group_split = 1;      // parallel split of the conv groups (outermost)
  std::uint64_t groups_per_tile = 1;  // conv groups per group block
  // Serial splits of the input or output channels (at most one of them > 1); each divides
  // the channel count exactly.
  std::uint32_t serial_in = 1, serial_out = 1;
  // Kernel rows per AMP weight load (poplin's convUnitWeightHeight, 1, 2 or 4): with fewer input
  // channels than an engine's weights (a 3-channel image), an engine's weights hold
  // weights / weight_height channels of weight_height kernel rows, and the kernel height is
  // padded to a multiple of it (docs/codelets.md, amp_convnx1).
  std::uint32_t weight_height = 1;
  // The plan is for swap_operands(args): its splits and block sizes are those of the swapped
  // product (rows = the matmul's N, output channels = its M), and its output is C^T.
  bool swapped = false;
  // The plan is for expand_dims(args, expand_h, expand_w) (poplin's expandDims): the kernel's
  // rows, columns or both moved into the input channels.
  bool expand_h = false, expand_w = false;
  // The vertex the blocks run on (ConvMethod).
  ConvMethod method = ConvMethod::kAmp;
  // The blocks' order on the tiles (TileOrder).
  TileOrder order = TileOrder::kStandard;
  // One of the three plans of a joint plan (plan_fully_connected).
  bool joint = false;
  bool operator==(const ConvPlan&) const = default;
  bool expanded() const { return expand_h || expand_w; }
  std::uint32_t tiles_used() const { return group_split * row_split * out_split * in_split; }
  std::uint32_t serial() const { return serial_in * serial_out; }
};

// poplin's expandDims transform (ConvModel.cpp expandDim; poplar-compiler.md §1.2): a spatial
// dimension of the kernel moved into the input channels. Expanding the rows (h) of a
// kh x kw kernel with stride sh gives a conv over out_h input rows with a 1 x kw kernel, stride
// 1 down, and kh x the input channels: input row y of the expanded conv holds the kh rows output
// row y reads, side by side (the columns, w, likewise). The output is unchanged; the expanded
// input is a new tensor (IpuBuilder::conv rearranges the input into it).
ConvArgs expand_dims(const ConvArgs& a, bool h, bool w);

// Whether poplin tries expanding dimension h (rows) or w (columns) of `a`
// (ConvPlan.cpp getExpandDimsCandidates): one whose kernel is wider than 1 and no wider than
// the input. ipusim expands ungrouped convs only, and not a strided 1x1 kernel, which the fetch
// already reads as its expansion would (only the strided positions).
bool expandable(const ConvArgs& a, bool h);

// Which of the kernel's dimensions a plan expanded, as plan.csv names it: "no", "rows",
// "columns" or "both".
inline const char* expansion_name(const ConvPlan& p) {
  return p.expand_h && p.expand_w ? "both" : p.expand_h ? "rows" : p.expand_w ? "columns" : "no";
}

// The product a plan computes: swap_operands(args) for a swapped plan, expand_dims of args for
// an expanded one, else args. Its splits and block sizes are this product's.
inline ConvArgs planned_product(const ConvArgs& args, const ConvPlan& plan) {
  if (plan.swapped) return swap_operands(args);
  return plan.expanded() ? expand_dims(args, plan.expand_h, plan.expand_w) : args;
}

// The codelet of a plan's vertices (emit_conv writes them; plan.csv names it).
trace::Codelet plan_codelet(const ConvArgs& args, const ConvPlan& plan);

// Poplar's "combine conv groups" transform (poplar-compiler.md §1.2, step 7): a channel-grouped
// conv with 1 or 2 input channels per group packs F groups into one with F x the input and
// output channels (the weights block-diagonal, padded with zeros), so the AMP's input grain
// is used; F is the largest power of two up to grain / in_chans that divides the groups.
// Other convs are returned unchanged. The result's combined_groups is F.
ConvArgs combine_conv_groups(const ChipSpec& chip, const ConvArgs& args);

// Whether a plan's tiles receive their input blocks at the super-tile pair's doubled rate.
// Consecutive tiles differ in output-channel block, so runs of out_split consecutive tiles
// receive the same input block. As poplibs' ExchangeEstimator has it (popops
// ExchangeEstimator.cpp, getCycles), both tiles of each pair receive the same data when that
// run is a multiple of the pair, or when every tile used receives the same block (at least 2
// tiles: a lone tile has no partner). An odd run leaves some pairs split between two blocks,
// so the busiest tile receives at the single rate (as the exchange model charges it).
bool input_shares_bus(const ChipSpec& chip, const ConvPlan& plan);

// The one-off rearrangement a plan's estimate carries (poplin's addRearrangementAndPaddingCosts)
// for `a`, the plan's product (planned_product): the operands `a` reads transposed, an unswapped
// matmul's input, weights and output, an expanded plan's input and weights, the input and
// weights of a plan whose vertex pads the input channels (not a multiple of its grain), and the
// weights and output of one whose vertex pads the output channels.
std::uint64_t rearrangement_cycles(const ChipSpec& chip, const ConvArgs& a, const ConvPlan& plan);

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

// The plans of a fully connected layer's three training passes, as poplin plans a matmul with
// fullyConnectedPass TRAINING_FWD (ConvPlan.cpp runPlanner; poplar-compiler.md §1.6): `fwd` the
// forward matmul C = A B (B the weights), `bwd` its data gradient dA = dC B^T (B read
// transposed), `wu` its weight gradient dB = A^T dC (A read transposed), as the compiler builds
// them (IpuBuilder::data_gradient_args, weight_gradient_args). poplin plans each pass on its own
// and also a joint plan, the cheaper total winning (a tie: the joint one). A joint plan is the
// forward pass swapped (C^T = B^T A^T: rows = the weights' columns, input channels = its rows,
// output channels = A's rows) with no parallel split of the output channels and no serial
// split of the input channels (ConvModel.cpp constructModel with isJointPlan), each weight on
// one tile; its rows in grains of the vertex's input channels. The data-gradient plan swaps
// its row and input-channel splits (getFullyConnectedBwdPlan, TileOrder::kInputOuter) and the
// weight-gradient plan its input- and output-channel splits (getFullyConnectedWUPlan), so that
// every pass finds each weight block on the tile that holds it: the data gradient reads it
// transposed on that tile, and the weight gradient is produced there. The joint total is the
// three estimates (addBwdEstimates, addWuEstimates; the data gradient charged no exchange of
// its weights); the separate total is plan_conv's three plus the weight gradient's move to the
// weights' layout (addRearrangementAndPaddingCosts: rearrangeOutput of a separate
// FC_TRAINING_WU). Joint plans are searched for AMP plans of one conv group.
struct FcPlans {
  ConvPlan fwd, bwd, wu;
  bool joint = false;  // the three are a joint plan (each ConvPlan::joint)
  std::uint64_t joint_cycles = 0, separate_cycles = 0;  // the two totals (0: none fits)
  bool operator==(const FcPlans&) const = default;
};
FcPlans plan_fully_connected(const ChipSpec& chip, const ConvArgs& fwd, const ConvArgs& bwd,
                             const ConvArgs& wu, std::uint64_t budget);

// Appends a planned conv to `program`: its compute sets and exchanges (named with `prefix`),
// and the supersteps that run it to `steps`. Adds no tensors: the caller accounts memory
// (the plan's bytes_per_tile are its temporaries). A swapped plan emits planned_product(args).
void emit_conv(trace::IpuProgram& program, const std::string& prefix, const ChipSpec& chip,
               const ConvArgs& args, const ConvPlan& plan, std::vector<trace::Step>& steps);

// Poplar's multi-stage reduce plan for a reduction over `depth` tiles (poplar-compiler.md §1.3,
// §2.2): 1 stage below a depth of 16, 2 from 16, 3 from 125, each of fan-in about the
// stage-th root of the depth (at least 2); {0, 1} when there is nothing to reduce.
std::pair<int, std::uint64_t> reduction_stages(std::uint64_t depth);

// The tile of block (group g, row r, input-channel i, output-channel o) of a plan, in the
// plan's order (TileOrder), as emit_conv lays blocks out.
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
// without a serial split only; for a swapped plan, those of planned_product(args)).
void emit_conv(trace::IpuProgram& program, const std::string& prefix, const ChipSpec& chip,
               const ConvArgs& args, const ConvPlan& plan, std::vector<trace::Step>& steps,
               const FetchSources& sources);

// The trace name of a conv or matmul kernel: its shape, groups and (when wider than the
// inputs) its partials type, e.g. "matmul_2048x2048x2048_half".
std::string conv_name(const ConvArgs& args);

// The per-tile buffers of a plan's largest block (bytes), allocated on every tile it uses:
// what a conv run on its own holds (`ipusim kernel conv2d`).
struct ConvBuffers {
  trace::DType partials = trace::DType::kHalf;  // the partial sums' type
  std::uint64_t input = 0, weights = 0, partial_sums = 0;
  std::uint64_t reduce = 0, reduced = 0;  // an input-channel split's received partials, outputs
  std::uint64_t accumulated = 0;          // a serial input split's accumulated output
};
ConvBuffers conv_buffers(const ChipSpec& chip, const ConvArgs& args, const ConvPlan& plan);

}  // namespace ipusim::plan
