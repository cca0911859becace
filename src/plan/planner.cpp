// SPDX-License-Identifier: Apache-2.0
// The conv and matmul planner (poplar-compiler.md §1.5): a bounded search over parallel splits
// of conv groups, output rows, output channels and input channels, and serial splits when no
// parallel plan fits, each costed with the simulator's codelet models and exchange rates.
// The objective is poplin's (ConvModel.cpp, addExchangeCycleEstimates and the total of
// addEstimates): an exchange costs its bytes over the exchange rate, with no fixed overhead
// and no sync, so a plan is chosen as Poplar would choose it; the simulator charges those fixed
// costs when the plan runs (docs/kernels.md, "Planner cost model vs poplin").
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "geometry.hpp"
#include "ipusim/plan/conv.hpp"

namespace ipusim::plan {

using namespace detail;  // NOLINT(google-build-using-namespace): this library's own internals

namespace {

// Split counts s (1 <= s <= grains) giving distinct chunk sizes ceil(grains / s), each with
// the smallest s for its chunk size, ascending. (The split of chunk size ceil(grains / s) never
// decreases as s grows, so equal ones are adjacent.)
std::vector<std::uint64_t> distinct_splits(std::uint64_t grains, std::uint64_t max_split) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t s = 1; s <= std::min(grains, max_split); ++s) {
    const std::uint64_t split = ceil_div(grains, ceil_div(grains, s));  // of that chunk size
    if (out.empty() || out.back() != split) out.push_back(split);
  }
  return out;
}

// The busiest tile's send time in one iteration's fetch exchange: its input and weight blocks.
double fetch_send(const ChipSpec& chip, const Blocks& b) {
  return static_cast<double>(b.in_bytes + b.weight_bytes) / chip.exchange.bytes_per_cycle.value;
}

}  // namespace

bool input_shares_bus(const ChipSpec& chip, const ConvPlan& p) {
  const std::uint32_t group = chip.exchange.tiles_per_shared_bus;
  return group >= 2 && p.out_split >= 2 &&
         (p.out_split % group == 0 || p.out_split == p.tiles_used());
}

namespace {

// One iteration's fetch exchange: the larger of the busiest tile's receive and send time, the
// input at the super-tile rate when input_shares_bus.
std::uint64_t fetch_cycles(const ChipSpec& chip, const ConvPlan& p, const Blocks& b) {
  const double rate = chip.exchange.bytes_per_cycle.value;
  const double in_rate =
      input_shares_bus(chip, p) ? rate * chip.exchange.tiles_per_shared_bus : rate;
  const double receive =
      static_cast<double>(b.in_bytes) / in_rate + static_cast<double>(b.weight_bytes) / rate;
  return ceil_cycles(std::max(receive, fetch_send(chip, b))).count;
}

// Expected cycles of a plan: per iteration the fetch exchange (`fetch`, fetch_cycles), AMP
// compute, (with an input-channel split) the reduction exchange and reduce compute, and (with
// a serial input split) the add of the iteration's outputs into the accumulated output; times
// the serial count. Uses the simulator's own codelet models and exchange rates.
std::uint64_t estimate(const ChipSpec& chip, const ConvArgs& a, const Shape& s, const ConvPlan& p,
                       const Blocks& b, std::uint64_t fetch) {
  std::uint64_t cycles = fetch + vertex_cycles(chip, a, s, p);
  if (p.in_split > 1) {
    // The stages of emit_conv's reduce-scatter, for the tile owning the most outputs.
    const auto [stages, fan_in] = reduction_stages(p.in_split);
    const std::uint64_t pb = trace::dtype_bytes(s.partials);
    std::uint64_t stride = 1;
    for (int t = 0; t < stages; ++t) {
      const std::uint64_t span = stride * fan_in;
      const std::uint64_t owned = b.reduce_outputs * ceil_div(p.in_split, span);
      const std::uint64_t group = std::min(fan_in, ceil_div(p.in_split, stride));
      cycles += (Bytes{(group - 1) * owned * pb} / chip.exchange.bytes_per_cycle).count;
      cycles += cost::reduce(chip, trace::Op::kAdd, s.partials,
                             t + 1 == stages ? a.dtype : s.partials, owned, group)
                    .cycles;
      stride = span;
    }
  }
  if (p.serial_in > 1) cycles += cost::binary(chip, trace::Op::kAdd, a.dtype, b.acc_outputs).cycles;
  return cycles * p.serial();
}

// The cycles of moving a tensor of `elements` to another layout over `tiles` tiles: each tile's
// share over the exchange rate, then its copy on the tile with the transform factor, as poplin's
// objective costs a rearrangement (no fixed cost), or with `call` as a transpose vertex runs it
// (cost::transpose: the copy call's fixed cost too).
std::uint64_t rearranged_cycles(const ChipSpec& chip, trace::DType dtype, std::uint64_t elements,
                                std::uint32_t tiles, std::uint64_t factor, bool call = false) {
  const std::uint64_t per_tile = ceil_div(elements, std::max<std::uint32_t>(tiles, 1));
  return (Bytes{per_tile * trace::dtype_bytes(dtype)} / chip.exchange.bytes_per_cycle).count +
         (call ? cost::transpose(chip, dtype, per_tile, factor).cycles
               : cost::rearrangement_copy_cycles(chip, dtype, per_tile, factor));
}

}  // namespace

std::uint64_t transpose_factor(const ChipSpec& chip, const ConvArgs& a) {
  return cost::transpose_factor(chip, a.dtype, a.in_chans * a.out_chans);
}

// The one-off cost of the operands a plan rearranges (ConvModel.cpp,
// addRearrangementAndPaddingCosts), `a` being the plan's product: those the pass reads
// transposed (a data-gradient pass's weights, a weight-gradient pass's activations); for a matmul
// planned unswapped, the form its operands are not laid out for, its input, weights and output;
// for an expanded plan (poplin's expandDims), its input and weights, built for the expanded conv;
// where the vertex's input-channel grain does not divide the input channels (poplin's
// padInChannels), the input and weights, padded; and where its partials grain does not divide the
// output channels (padPartialChannels), the weights and output. Each of the plan's tiles receives
// its share of each (exchange) and rearranges it (cost::transpose: an element per cycle times
// poplin's 5/4 or 5/3, the output's factor from its channels alone). The transposed reads and an
// expanded input run as supersteps of their own (IpuBuilder::conv); the rest is in the objective
// only, so that the form is chosen as Poplar chooses it (docs/kernels.md).
std::uint64_t rearrangement_cycles(const ChipSpec& chip, const ConvArgs& a, const ConvPlan& p) {
  const bool unswapped = swappable(a) && !p.swapped;
  const bool unswapped_matmul = unswapped && a.matmul;
  // A weight update's output is rearranged unless swapped (its input and weights are in both
  // forms, so they do not move the choice and are left out, the activations' transposed copy
  // apart).
  const bool unswapped_update = unswapped && a.weight_update;
  // (A weight update's input and weights are rearranged in every plan, padded or not, and are
  // left out, as above.)
  const Shape s = shape_of(chip, a, p);
  const bool padded = !a.weight_update && a.in_chans % s.in_grain != 0;
  // Output channels padded to the vertex's partials grain (poplin's padPartialChannels): the
  // weights and the output are rearranged.
  const bool padded_out = a.out_chans % s.out_grain != 0;
  // An expanded or padded operand is costed as poplin's objective costs it, without the copy
  // call's fixed cost that the transposed copies (run as transpose vertices) and an unswapped
  // matmul's rearrangements carry.
  const bool rebuilt = p.expanded() || padded;
  const auto operand = [&](std::uint64_t elements, std::uint64_t factor, bool call) {
    return rearranged_cycles(chip, a.dtype, elements, p.tiles_used(), factor, call);
  };
  const std::uint64_t factor = transpose_factor(chip, a);
  std::uint64_t cycles = 0;
  if (a.transposed_input || unswapped_matmul || rebuilt)
    cycles += operand(input_elements(a), factor, a.transposed_input);
  if (a.transposed_weights || unswapped_matmul || rebuilt || (padded_out && !a.weight_update))
    cycles += operand(weight_elements(a), factor, a.transposed_weights);
  if (unswapped_matmul || unswapped_update || padded_out)
    cycles += operand(a.groups * a.batch * s.out_h * s.out_w * a.out_chans,
                      cost::transpose_factor(chip, a.dtype, a.out_chans), false);
  return cycles;
}

namespace {

// One split of a dimension: the split count, the block size it gives (elements) and the
// number of blocks (at most the count).
struct Split {
  std::uint64_t count = 1, per_tile = 0;
  std::uint32_t blocks = 1;
};

// `p` (its serial splits) with these splits of groups, rows, output and input channels.
ConvPlan with_splits(ConvPlan p, const Split& g, const Split& r, const Split& o, const Split& i) {
  p.groups_per_tile = g.per_tile;
  p.rows_per_tile = r.per_tile;
  p.out_per_tile = o.per_tile;
  p.in_per_tile = i.per_tile;
  p.group_split = g.blocks;
  p.row_split = r.blocks;
  p.out_split = o.blocks;
  p.in_split = i.blocks;
  return p;
}

// Longest serial loop the planner considers (iterations).
constexpr std::uint64_t kMaxSerial = 4096;

// Divisors 2 <= d <= kMaxSerial of n, ascending.
std::vector<std::uint64_t> serial_counts(std::uint64_t n) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t d = 2; d <= std::min(n, kMaxSerial); ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// Memory that every tile needs besides the kernel's tensors: stack, code for the codelets
// used, and a margin for vertex state and exchange code.
std::uint64_t fixed_memory(const ChipSpec& chip) {
  return chip.runtime.stack_bytes.count + 3 * chip.runtime.codelet_code_bytes.count + 4096;
}

}  // namespace

bool swappable(const ConvArgs& a) {
  return (a.matmul || a.weight_update) && a.matmul_shaped() && a.groups == 1 && !a.channel_groups;
}

ConvArgs swap_operands(const ConvArgs& a) {
  ConvArgs s = a;
  std::swap(s.height, s.out_chans);
  std::swap(s.transposed_input, s.transposed_weights);
  return s;
}

ConvArgs expand_dims(const ConvArgs& a, bool h, bool w) {
  ConvArgs e = a;
  if (h) {
    e.height = ceil_div(a.height, a.stride.h);
    e.in_chans *= a.kernel.h;
    e.kernel.h = e.stride.h = 1;
  }
  if (w) {
    e.width = ceil_div(a.width, a.stride.w);
    e.in_chans *= a.kernel.w;
    e.kernel.w = e.stride.w = 1;
  }
  return e;
}

bool expandable(const ConvArgs& a, bool h) {
  const std::uint64_t k = h ? a.kernel.h : a.kernel.w, size = h ? a.height : a.width;
  return a.groups == 1 && !a.channel_groups && k > 1 && size >= k;
}

ConvArgs combine_conv_groups(const ChipSpec& chip, const ConvArgs& a) {
  if (!a.channel_groups || a.groups <= 1 || a.in_chans > 2) return a;
  const std::uint64_t grain = amp_in_grain(chip, a.dtype);
  std::uint64_t f = 1;
  while (2 * f * a.in_chans <= grain && a.groups % (2 * f) == 0) f *= 2;
  ConvArgs c = a;
  c.groups = a.groups / f;
  c.in_chans = a.in_chans * f;
  c.out_chans = a.out_chans * f;
  c.combined_groups = static_cast<std::uint32_t>(f);
  return c;
}

ConvPlan plan_conv(const ChipSpec& chip, const ConvArgs& a) {
  return plan_conv(chip, a,
                   chip.tile_memory.count - std::min(chip.tile_memory.count, fixed_memory(chip)));
}

namespace {

// The fastest plan with the serial splits and weight height of `base` whose buffers fit in
// `budget` bytes per tile
// (fewer tiles, then fewer serial iterations, break ties); rows_per_tile == 0 if none fits.
// Candidates that cannot cost `bound` cycles or fewer are not costed in full: the fetches and
// transposed copies alone exceed it (the rest of an estimate is never negative). The plan
// returned is the same as without a bound whenever that plan costs at most `bound`.
ConvPlan best_plan(const ChipSpec& chip, const ConvArgs& a, std::uint64_t budget,
                   const ConvPlan& base, std::uint64_t& least,
                   std::uint64_t bound = std::numeric_limits<std::uint64_t>::max()) {
  const ConvArgs it = iteration_args(a, base);
  const Shape s = shape_of(chip, it, base);
  const std::uint64_t out_grains = ceil_div(it.out_chans, s.out_grain);
  const std::uint64_t in_grains = ceil_div(it.in_chans, s.in_grain);
  ConvPlan best;
  best.estimated_cycles = Cycles{std::numeric_limits<std::uint64_t>::max()};
  // Conv groups are the outermost split (poplar-compiler.md §1.7).
  // The distinct splits of each dimension up to all tiles, ascending, with the block size
  // and block count each gives: those up to a smaller limit are exactly the ones not above it
  // (each split is the smallest count giving its chunk size), so each table is computed once
  // and cut at the tiles the outer splits leave.
  const auto table = [&](std::uint64_t grains, std::uint64_t grain, std::uint64_t size) {
    std::vector<Split> out;
    for (std::uint64_t split : distinct_splits(grains, chip.tiles)) {
      const std::uint64_t per = std::min(size, ceil_div(grains, split) * grain);
      out.push_back({split, per, u32(ceil_div(size, per))});
    }
    return out;
  };
  const std::vector<Split> groups = table(a.groups, 1, a.groups), rows = table(s.rows, 1, s.rows),
                           outs = table(out_grains, s.out_grain, it.out_chans),
                           ins = table(in_grains, s.in_grain, it.in_chans);
  const auto upto = [](const std::vector<Split>& splits, std::uint64_t limit) {
    return std::span(splits.begin(),
                     std::upper_bound(splits.begin(), splits.end(), limit,
                                      [](std::uint64_t l, const Split& x) { return l < x.count; }));
  };
  // The transposed copies' cost depends on the tiles used only.
  std::vector<std::uint64_t> copies_at(std::size_t{chip.tiles} + 1,
                                       std::numeric_limits<std::uint64_t>::max());
  // Whole ranges of candidates are skipped once a plan is found (or a bound is given: then
  // `least` no longer matters): those whose fetch and least vertex cycles (least_vertex_cycles),
  // costed with the smallest blocks of the range (block sizes never grow with a split; a range
  // shares its rows), exceed the best, and those whose
  // input, weight and partial-sum blocks alone exceed the budget. Both are lower bounds of what
  // each candidate of the range is checked against below, so the plan chosen does not change.
  const auto hopeless = [&](const Split& sg, const Split& sr, const Split& so, const Split& si) {
    if (bound == std::numeric_limits<std::uint64_t>::max() && best.rows_per_tile == 0) return false;
    // The range's smallest blocks (its input-channel split's buffers are not counted).
    const ConvPlan smallest = with_splits(base, sg, sr, so, si);
    const Blocks b = blocks_of(it, s, smallest);
    if (b.in_bytes + b.weight_bytes + b.partial_bytes > budget) return true;
    const std::uint64_t limit = std::min(bound, best.estimated_cycles.count);
    const std::uint64_t fetch = ceil_cycles(fetch_send(chip, b)).count;
    if (fetch * base.serial() > limit) return true;
    return (fetch + least_vertex_cycles(chip, it, s, smallest)) * base.serial() > limit;
  };
  for (const Split& sg : upto(groups, chip.tiles))
    for (const Split& sr : upto(rows, chip.tiles / sg.count)) {
      const std::uint64_t left = chip.tiles / (sg.count * sr.count);  // for so x si
      if (hopeless(sg, sr, upto(outs, left).back(), upto(ins, left).back())) continue;
      for (const Split& so : upto(outs, left)) {
        const auto in_splits = upto(ins, left / so.count);
        if (hopeless(sg, sr, so, in_splits.back())) continue;
        for (const Split& si : in_splits) {
          if (sg.count * sr.count * so.count * si.count > chip.tiles) continue;
          ConvPlan p = with_splits(base, sg, sr, so, si);
          const Blocks b = blocks_of(it, s, p);
          p.bytes_per_tile = Bytes{memory_of(b)};
          least = std::min(least, p.bytes_per_tile.count);
          if (p.bytes_per_tile.count > budget) continue;
          const std::uint64_t fetch = fetch_cycles(chip, p, b);
          std::uint64_t& copies = copies_at[p.tiles_used()];
          if (copies == std::numeric_limits<std::uint64_t>::max())
            copies = rearrangement_cycles(chip, a, p);
          // The fetches and copies alone exceed the bound or the best so far: this candidate
          // can neither beat nor tie it.
          if (fetch * p.serial() + copies > std::min(bound, best.estimated_cycles.count)) continue;
          p.estimated_cycles = Cycles{estimate(chip, it, s, p, b, fetch) + copies};
          if (p.estimated_cycles < best.estimated_cycles ||
              (p.estimated_cycles == best.estimated_cycles && p.tiles_used() < best.tiles_used()))
            best = p;
        }
      }
    }
  if (best.rows_per_tile == 0) best = ConvPlan{};  // nothing fits this budget
  return best;
}

// A lower bound on one serial iteration's estimate: its vertex at the smallest block a plan can
// give a tile (one group, one output position, one input and one output channel). The vertex
// models never fall as a block grows from there (a worker's list of one position is its
// cheapest, docs/codelets.md), and the other terms of an estimate are never negative.
std::uint64_t least_iteration(const ChipSpec& chip, const ConvArgs& a, const ConvPlan& base) {
  ConvPlan p = base;
  p.rows_per_tile = p.in_per_tile = p.out_per_tile = 1;
  const Shape s = shape_of(chip, a, p);
  if (p.method == ConvMethod::kSlic) {
    cost::SlicArgs v = slic_args(chip, a, s, p);
    v.positions = v.width = 1;
    return cost::amp_slic(chip, v).cycles;
  }
  if (p.method == ConvMethod::kHmac) return least_vertex_cycles(chip, a, s, p);
  cost::AmpConvArgs v = amp_args(a, s, p);
  v.positions = v.width = 1;
  return (uses_nx1(a) ? cost::amp_convnx1(chip, v) : cost::amp_conv1x1(chip, v)).cycles;
}

// The plan for one budget, vertex, weight height and form (those of `base`; for a swapped
// `base`, `a` is swap_operands of the conv's arguments) (poplar-compiler.md §1.5 step 1): the
// fastest parallel-only plan that fits; if none fits, the fastest plan with a serial split of
// the input or the output channels (one kind, a divisor of the channel count, at most
// kMaxSerial) that fits. `least` is lowered to the smallest per-tile buffer size of any
// candidate seen.
ConvPlan plan_for(const ChipSpec& chip, const ConvArgs& a, std::uint64_t budget,
                  const ConvPlan& base, std::uint64_t& least) {
  ConvPlan best = best_plan(chip, a, budget, base, least);
  // A SLIC plan holds all of a vertex group's channels on each tile: no serial channel split.
  if (best.rows_per_tile != 0 || base.method == ConvMethod::kSlic) return best;
  auto consider = [&](const ConvPlan& p) {
    if (p.rows_per_tile == 0) return;
    if (best.rows_per_tile == 0 || p.estimated_cycles < best.estimated_cycles ||
        (p.estimated_cycles == best.estimated_cycles && p.serial() < best.serial()))
      best = p;
  };
  // Every iteration of a serial plan costs at least least_iteration, so once d x that exceeds
  // the best plan found no plan of d or more iterations can beat or tie it, and a candidate
  // whose fetches alone exceed the best is skipped (best_plan's bound): the plan chosen is the
  // one a search of every divisor finds.
  const std::uint64_t floor = least_iteration(chip, a, base);
  const auto search = [&](const std::vector<std::uint64_t>& counts, bool in) {
    for (auto d : counts) {
      const bool found = best.rows_per_tile != 0;
      if (found && d * floor > best.estimated_cycles.count) break;
      const auto bound =
          found ? best.estimated_cycles.count : std::numeric_limits<std::uint64_t>::max();
      ConvPlan serial = base;
      (in ? serial.serial_in : serial.serial_out) = u32(d);
      consider(best_plan(chip, a, budget, serial, least, bound));
    }
  };
  search(serial_counts(a.in_chans), true);
  search(serial_counts(a.out_chans), false);
  return best;
}

// The weight heights worth planning (poplin's AMP candidates with inChansPerGroup = weights,
// weights / 2 and weights / 4, ConvVertexType.cpp getConvVertexAMPCandidates): 1 always; 2 and
// 4 for a spatial kernel whose input channels are not a multiple of the engine's weights. With
// a multiple of them (m groups of `weights`), height h needs m x h input groups of
// ceil(k / h) row passes, at least the m x k passes of height 1, each at a higher weight-height
// cost (ipu-hardware.md §4), so such heights never win and are not searched.
std::vector<std::uint32_t> weight_heights(const ChipSpec& chip, const ConvArgs& a) {
  std::vector<std::uint32_t> out{1};
  const std::uint32_t weights = amp_in_grain(chip, a.dtype);
  if (a.kernel.h <= 1 || a.in_chans % weights == 0) return out;
  for (std::uint32_t h : {2U, 4U})
    if (weights % h == 0) out.push_back(h);
  return out;
}

// The MACs of `a` (its real channels, no padding), as a double for the floors below.
double macs_of(const ConvArgs& a, const Shape& s) {
  return static_cast<double>(a.groups) * static_cast<double>(s.rows * s.out_w) *
         static_cast<double>(a.in_chans * a.out_chans * a.kernel.area());
}

// A lower bound on any HMAC plan's estimate of `a`: its MACs shared by every tile at the
// vertex's best rate, a dot product's output channels (2 for half -> half, else 1) x the vector
// width of activations per worker cycle (getDenseDotProductCycles: at least a cycle per vector),
// and a tile's cycles at least its workers' summed cycles (W x the slowest, barrel issue).

std::uint64_t hmac_floor(const ChipSpec& chip, const ConvArgs& a) {
  const Shape s = shape_of(chip, a, ConvPlan{});
  const std::uint64_t outs = a.dtype == DType::kHalf && s.partials == DType::kHalf ? 2 : 1;
  return static_cast<std::uint64_t>(std::floor(
      macs_of(a, s) / static_cast<double>(chip.tiles * outs * vector_elements(chip, a.dtype))));
}

// A lower bound on any plan's estimate of `a`: its MACs shared by every tile at the AMP's peak
// rate, which no vertex exceeds.
std::uint64_t conv_floor(const ChipSpec& chip, const ConvArgs& a) {
  const Shape s = shape_of(chip, a, ConvPlan{});
  const double peak =
      chip.peak_macs_per_cycle_per_tile(a.dtype == DType::kHalf, s.partials == DType::kFloat);
  return static_cast<std::uint64_t>(
      std::floor(macs_of(a, s) / (static_cast<double>(chip.tiles) * peak)));
}

// The fastest of plan_for's plans over poplin's vertices, in its method order
// (getConvMethodCandidates: the AMP, SLIC, HMAC; the first winning a tie): the AMP over the
// weight heights (ties: the smaller height) and, where swappable, over both forms in poplin's
// order, swapped first for a matmul, unswapped first for a conv's weight update (ConvPlan.cpp,
// getSwapOperandCandidates); a swapped plan's splits are those of swap_operands(a). A
// depthwise conv that slic_candidate allows is also planned on the SLIC vertex, and every conv
// on the HMAC vertex in the same forms where hmac_floor does not already exceed the best plan
// (the HMAC's dot products reach a few MACs a cycle against the AMP's 64, so it wins only where
// the AMP's fixed costs or padding dominate). All of this for the conv as it is, then for each
// of poplin's kernel expansions that expandable allows (the rows, the columns, both; ConvPlan.cpp
// getExpandDimsCandidates), an expanded plan's splits being those of expand_dims(a).
ConvPlan plan_within(const ChipSpec& chip, const ConvArgs& a, std::uint64_t budget,
                     std::uint64_t& least) {
  require(a.batch >= 1 && a.in_chans >= 1 && a.height >= 1 && a.width >= 1 && a.out_chans >= 1 &&
              a.kernel.h >= 1 && a.kernel.w >= 1 && a.stride.h >= 1 && a.stride.w >= 1 &&
              a.groups >= 1,
          "conv dimensions must all be at least 1");
  ConvPlan best;
  const auto consider = [&](const ConvPlan& p) {
    if (p.rows_per_tile != 0 &&
        (best.rows_per_tile == 0 || p.estimated_cycles < best.estimated_cycles))
      best = p;
  };
  // Each expansion in poplin's order (none, the rows, the columns, both), and each form in its
  // order (swapped first for a matmul), the AMP over its weight heights.
  for (const auto& [h, w] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
    if ((h && !expandable(a, true)) || (w && !expandable(a, false))) continue;
    ConvPlan expansion;
    expansion.expand_h = h;
    expansion.expand_w = w;
    const ConvArgs e = planned_product(a, expansion);
    // An expansion whose rearrangement (at its cheapest, on every tile) and MACs at the AMP's
    // peak rate already exceed the best plan cannot win.
    if (expansion.expanded() && best.rows_per_tile != 0) {
      ConvPlan all = expansion;
      all.row_split = chip.tiles;
      if (rearrangement_cycles(chip, e, all) + conv_floor(chip, e) > best.estimated_cycles.count)
        continue;
    }
    const auto plan = [&](ConvMethod method, std::uint32_t height, bool swapped) {
      ConvPlan base = expansion;
      base.method = method;
      base.weight_height = height;
      base.swapped = swapped;
      consider(plan_for(chip, swapped ? swap_operands(e) : e, budget, base, least));
    };
    const auto forms = [&](ConvMethod method, const std::vector<std::uint32_t>& heights) {
      if (swappable(e) && e.matmul) plan(method, 1, true);
      for (std::uint32_t height : heights) plan(method, height, false);
      if (swappable(e) && !e.matmul) plan(method, 1, true);
    };
    forms(ConvMethod::kAmp, weight_heights(chip, e));
    if (slic_candidate(chip, e)) plan(ConvMethod::kSlic, 1, false);
    if (best.rows_per_tile == 0 || hmac_floor(chip, e) <= best.estimated_cycles.count)
      forms(ConvMethod::kHmac, {1});
  }
  return best;
}

}  // namespace

ConvPlan plan_conv(const ChipSpec& chip, const ConvArgs& a, std::uint64_t budget) {
  const std::uint64_t limit =
      chip.tile_memory.count - std::min(chip.tile_memory.count, fixed_memory(chip));
  // Doubling the budget until a plan fits (poplar-compiler.md §1.5 step 2) ends at the first
  // budget x 2^k that holds the smallest candidate's buffers: after one search that finds no
  // plan, jump there instead of searching every budget in between (a tiny proportion would
  // otherwise search some 20 budgets).
  std::uint64_t least = std::numeric_limits<std::uint64_t>::max();
  for (std::uint64_t b = std::max<std::uint64_t>(1, std::min(budget, limit));;) {
    ConvPlan p = plan_within(chip, a, b, least);
    if (p.rows_per_tile != 0) return p;
    if (least <= limit && b < least) {
      while (b < least) b = std::min(2 * b, limit);
      continue;
    }
    throw ModelError(fmt::format(
        "no tile mapping fits: even the finest split needs more than the {} per tile available "
        "for tensors on {} ({} tiles)",
        human_bytes(static_cast<double>(limit)), chip.name, chip.tiles));
  }
}

namespace {

// `p` for product `a` with its buffers and estimate filled in (best_plan's, for one plan); the
// rearrangement charges of `charged` (rearrangement_cycles), the product itself or a copy with
// some of its flags cleared.
ConvPlan costed(const ChipSpec& chip, const ConvArgs& a, ConvPlan p, const ConvArgs& charged) {
  const ConvArgs it = iteration_args(a, p);
  const Shape s = shape_of(chip, it, p);
  const Blocks b = blocks_of(it, s, p);
  p.bytes_per_tile = Bytes{memory_of(b)};
  p.estimated_cycles = Cycles{estimate(chip, it, s, p, b, fetch_cycles(chip, p, b)) +
                              rearrangement_cycles(chip, charged, p)};
  return p;
}

// The joint plans derived from `fwd`, a plan of the forward pass's swapped product `fs`, and
// their total estimate; total 0 if a pass does not fit `budget`.
struct Joint {
  FcPlans plans;
  std::uint64_t total = 0;
};
Joint joint_plans(const ChipSpec& chip, const ConvArgs& fs, const ConvArgs& ds, const ConvArgs& ws,
                  std::uint64_t budget, const ConvPlan& fwd) {
  Joint j;
  ConvPlan bwd = fwd;  // getFullyConnectedBwdPlan: rows <-> input channels
  std::swap(bwd.row_split, bwd.in_split);
  std::swap(bwd.rows_per_tile, bwd.in_per_tile);
  bwd.order = TileOrder::kInputOuter;
  ConvPlan wu = fwd;  // getFullyConnectedWUPlan: input <-> output channels, serial splits too
  std::swap(wu.in_split, wu.out_split);
  std::swap(wu.in_per_tile, wu.out_per_tile);
  std::swap(wu.serial_in, wu.serial_out);
  // The data gradient's weights are on its tiles already: no exchange of them is charged
  // (ConvModel.cpp: no rearrangeInput for a joint FC_TRAINING_BWD); its transposed copy on the
  // tile (fullyConnectedWeightTranspose) is not in poplin's estimate either.
  ConvArgs d_charged = ds;
  d_charged.transposed_input = false;
  j.plans.fwd = costed(chip, fs, fwd, fs);
  j.plans.bwd = costed(chip, ds, bwd, d_charged);
  j.plans.wu = costed(chip, ws, wu, ws);
  for (const ConvPlan* p : {&j.plans.fwd, &j.plans.bwd, &j.plans.wu})
    if (p->bytes_per_tile.count > budget) return j;
  j.total = j.plans.fwd.estimated_cycles.count + j.plans.bwd.estimated_cycles.count +
            j.plans.wu.estimated_cycles.count;
  return j;
}

// The fastest joint plan within `budget` (fewer tiles break ties): parallel splits of the
// swapped forward product's rows (in grains of the vertex's input channels, poplin's joint
// fieldGrainSize) and input channels, every output channel on each tile; with a serial split of
// the output channels (a divisor of them, fewest iterations first) only if no parallel plan
// fits. total 0 if none fits.
Joint best_joint(const ChipSpec& chip, const ConvArgs& fs, const ConvArgs& ds, const ConvArgs& ws,
                 std::uint64_t budget) {
  ConvPlan base;
  base.swapped = base.joint = true;
  const Shape s = shape_of(chip, fs, base);
  Joint best;
  const auto search = [&](std::uint64_t serial) {
    ConvPlan p = base;
    p.serial_out = u32(serial);
    p.out_per_tile = fs.out_chans / serial;
    const std::uint64_t row_grains = ceil_div(fs.height, s.in_grain);
    const std::uint64_t in_grains = ceil_div(fs.in_chans, s.in_grain);
    for (const std::uint64_t sr : distinct_splits(row_grains, chip.tiles)) {
      p.rows_per_tile = std::min(fs.height, ceil_div(row_grains, sr) * s.in_grain);
      p.row_split = u32(ceil_div(fs.height, p.rows_per_tile));
      for (const std::uint64_t si : distinct_splits(in_grains, chip.tiles / p.row_split)) {
        p.in_per_tile = std::min(fs.in_chans, ceil_div(in_grains, si) * s.in_grain);
        p.in_split = u32(ceil_div(fs.in_chans, p.in_per_tile));
        const Joint j = joint_plans(chip, fs, ds, ws, budget, p);
        if (j.total != 0 &&
            (best.total == 0 || j.total < best.total ||
             (j.total == best.total && j.plans.fwd.tiles_used() < best.plans.fwd.tiles_used())))
          best = j;
      }
    }
  };
  search(1);
  if (best.total == 0)
    for (const std::uint64_t d : serial_counts(fs.out_chans)) {
      search(d);
      if (best.total != 0) break;
    }
  return best;
}

}  // namespace

FcPlans plan_fully_connected(const ChipSpec& chip, const ConvArgs& fwd, const ConvArgs& bwd,
                             const ConvArgs& wu, std::uint64_t budget) {
  require(swappable(fwd) && fwd.matmul && bwd.height == fwd.height &&
              bwd.in_chans == fwd.out_chans && bwd.out_chans == fwd.in_chans &&
              wu.height == fwd.in_chans && wu.in_chans == fwd.height &&
              wu.out_chans == fwd.out_chans,
          "plan_fully_connected: the passes must be one ungrouped matmul's forward, data "
          "gradient and weight gradient");
  FcPlans out;
  out.fwd = plan_conv(chip, fwd, budget);
  out.bwd = plan_conv(chip, bwd, budget);
  out.wu = plan_conv(chip, wu, budget);
  // The separate weight gradient is moved to the weights' layout (IpuBuilder::weight_gradient).
  out.separate_cycles = out.fwd.estimated_cycles.count + out.bwd.estimated_cycles.count +
                        out.wu.estimated_cycles.count +
                        rearranged_cycles(chip, wu.dtype, weight_elements(fwd), out.wu.tiles_used(),
                                          cost::transpose_factor(chip, wu.dtype, wu.out_chans));
  // Joint plans within the budget as given (poplin doubles a memory bound only when neither
  // the joint nor the separate plans fit; plan_conv's separate plans then fit a doubled one).
  const std::uint64_t limit =
      chip.tile_memory.count - std::min(chip.tile_memory.count, fixed_memory(chip));
  const Joint j = best_joint(chip, swap_operands(fwd), swap_operands(bwd), swap_operands(wu),
                             std::min(budget, limit));
  out.joint_cycles = j.total;
  if (j.total != 0 && j.total <= out.separate_cycles) {
    const std::uint64_t separate = out.separate_cycles;
    out = j.plans;
    out.joint = true;
    out.joint_cycles = j.total;
    out.separate_cycles = separate;
  }
  return out;
}

std::string conv_name(const ConvArgs& a) {
  const std::string dt(trace::kDTypeNames[static_cast<std::size_t>(a.dtype)]);
  std::string name =
      a.matmul_shaped()
          ? fmt::format("matmul_{}x{}x{}_{}", a.height, a.out_chans, a.in_chans, dt)
          : fmt::format("conv2d_n{}_c{}_{}x{}_k{}_f{}_s{}_{}", a.batch, a.in_chans, a.height,
                        a.width, a.out_chans, to_string(a.kernel), to_string(a.stride), dt);
  if (a.groups > 1) name += fmt::format("_g{}", a.groups);
  const trace::DType partials = partials_of(a);
  if (partials != a.dtype)
    name += fmt::format("_p{}", trace::kDTypeNames[static_cast<std::size_t>(partials)]);
  return name;
}

std::pair<int, std::uint64_t> reduction_stages(std::uint64_t depth) {
  const int stages = depth < 2 ? 0 : depth < 16 ? 1 : depth < 125 ? 2 : 3;
  if (stages == 0) return {0, 1};
  // The stage-th root of the depth, rounded up: the least fan-in f with f^stages >= depth
  // (in integers; the same as ceil(depth^(1/stages)) for every depth up to 2 x 10^6, checked).
  const auto reaches = [&](std::uint64_t f) {
    std::uint64_t p = 1;
    for (int i = 0; i < stages && p < depth; ++i) p *= f;
    return p >= depth;
  };
  std::uint64_t fan_in = 1;
  while (!reaches(fan_in)) ++fan_in;
  return {stages, std::max<std::uint64_t>(2, fan_in)};
}

ConvBuffers conv_buffers(const ChipSpec& chip, const ConvArgs& a, const ConvPlan& p) {
  const ConvArgs it = iteration_args(planned_product(a, p), p);
  const Shape s = shape_of(chip, it, p);
  const Blocks b = blocks_of(it, s, p);
  ConvBuffers out;
  out.partials = s.partials;
  out.input = b.in_bytes;
  out.weights = b.weight_bytes;
  out.partial_sums = b.partial_bytes;
  out.reduce = b.reduce_bytes;
  out.reduced = b.out_bytes;
  out.accumulated = b.acc_bytes;
  return out;
}

}  // namespace ipusim::plan
