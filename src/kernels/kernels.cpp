// SPDX-License-Identifier: Apache-2.0
#include "ipusim/kernels/kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <span>
#include <string_view>

#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::kernels {
namespace {

using trace::DType;
using trace::TileRange;

std::uint32_t u32(std::uint64_t v) { return static_cast<std::uint32_t>(v); }

// Split counts s (1 <= s <= grains) giving distinct chunk sizes ceil(grains / s), each with
// the smallest s for its chunk size.
std::vector<std::uint64_t> distinct_splits(std::uint64_t grains, std::uint64_t max_split) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t s = 1; s <= std::min(grains, max_split); ++s)
    out.push_back(ceil_div(grains, ceil_div(grains, s)));  // the split of that chunk size
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Sizes derived from a conv problem and a choice of splits.
struct Shape {
  std::uint64_t out_h = 0, out_w = 0, rows = 0;  // output rows = batch x out_h
  std::uint32_t engines = 0, in_grain = 0;
  DType partials = DType::kHalf;
};

// Input channels one AMP engine takes per weight load (the planner's input-channel grain).
std::uint32_t amp_in_grain(const ChipSpec& chip, DType dtype) {
  return dtype == DType::kHalf ? chip.amp.weights_per_engine_half
                               : chip.amp.weights_per_engine_float;
}

Shape shape_of(const ChipSpec& chip, const ConvArgs& a) {
  Shape s;
  s.out_h = ceil_div(a.height, a.stride);
  s.out_w = ceil_div(a.width, a.stride);
  s.rows = a.batch * s.out_h;
  // FP16.16 for half by default (ConvArgs::partials selects FP16.32), FP32 for float.
  s.partials = partials_of(a);
  s.engines = cost::amp_engines(chip, a.dtype, s.partials);
  s.in_grain = amp_in_grain(chip, a.dtype);
  return s;
}

// The conv one serial iteration computes: the channel counts divided by the serial splits.
ConvArgs iteration_args(const ConvArgs& a, const ConvPlan& p) {
  ConvArgs it = a;
  it.in_chans = a.in_chans / p.serial_in;
  it.out_chans = a.out_chans / p.serial_out;
  return it;
}

// The AMP 1x1 vertex serves every conv whose kernel is 1x1: a strided 1x1 conv only reads
// every stride-th row and column of its input, which the fetch gathers as a dense block of
// out_h x out_w positions (poplin applies the stride to the input the same way).
bool uses_nx1(const ConvArgs& a) { return a.kernel > 1; }

// Input rows and columns a tile needs for `rows` output rows: the halo for a spatial kernel,
// only the strided positions for a 1x1 kernel.
std::uint64_t in_rows_for(const ConvArgs& a, std::uint64_t rows) {
  return uses_nx1(a) ? (rows - 1) * a.stride + a.kernel : rows;
}
std::uint64_t in_cols(const ConvArgs& a, const Shape& s) { return uses_nx1(a) ? a.width : s.out_w; }

// Per-tile buffer sizes (bytes) of the largest block of one serial iteration.
struct Blocks {
  std::uint64_t positions = 0;       // output positions per tile and group
  std::uint64_t in_bytes = 0;        // input block
  std::uint64_t weight_bytes = 0;    // weight block
  std::uint64_t partial_bytes = 0;   // partial sums of the tile's block
  std::uint64_t reduce_outputs = 0;  // outputs each tile reduces when in_split > 1
  std::uint64_t reduce_bytes = 0;    // received partials for the reduction
  std::uint64_t out_bytes = 0;       // reduced outputs
  std::uint64_t acc_outputs = 0;     // outputs the tile owns after the conv (or iteration)
  std::uint64_t acc_bytes = 0;       // accumulated output across a serial input split
};

// `a` is the conv of one iteration (iteration_args), `p` the plan.
Blocks blocks_of(const ConvArgs& a, const Shape& s, const ConvPlan& p) {
  Blocks b;
  const std::uint64_t eb = trace::dtype_bytes(a.dtype);
  const std::uint64_t pb = trace::dtype_bytes(s.partials);
  const std::uint64_t g = p.groups_per_tile;
  b.positions = p.rows_per_tile * s.out_w;
  b.in_bytes = g * in_rows_for(a, p.rows_per_tile) * in_cols(a, s) * p.in_per_tile * eb;
  b.weight_bytes = g * a.kernel * a.kernel * p.in_per_tile * p.out_per_tile * eb;
  b.partial_bytes = g * b.positions * p.out_per_tile * pb;
  b.acc_outputs = g * b.positions * p.out_per_tile;
  if (p.in_split > 1) {
    b.reduce_outputs = ceil_div(g * b.positions * p.out_per_tile, p.in_split);
    b.reduce_bytes = (p.in_split - 1) * b.reduce_outputs * pb;
    b.out_bytes = b.reduce_outputs * eb;
    b.acc_outputs = b.reduce_outputs;
  }
  if (p.serial_in > 1) b.acc_bytes = b.acc_outputs * eb;
  return b;
}

std::uint64_t memory_of(const Blocks& b) {
  return b.in_bytes + b.weight_bytes + b.partial_bytes + b.reduce_bytes + b.out_bytes + b.acc_bytes;
}

cost::AmpConvArgs amp_args(const ConvArgs& a, const Shape& s, const ConvPlan& p) {
  cost::AmpConvArgs v;
  v.in = a.dtype;
  v.partials = s.partials;
  v.positions = p.rows_per_tile * s.out_w;
  v.in_chans = p.in_per_tile;
  v.out_chans = p.out_per_tile;
  v.groups = p.groups_per_tile;
  v.kernel_h = a.kernel;
  v.kernel_w = a.kernel;
  v.width = s.out_w;
  v.coeff_load_bits = a.coeff_load_bits;
  return v;
}

// Expected cycles of a plan: per iteration the fetch exchange, AMP compute, (with an
// input-channel split) the reduction exchange and reduce compute, each exchange with its sync,
// and (with a serial input split) the add of the iteration's outputs into the accumulated
// output; times the serial count. Uses the simulator's own codelet models and exchange rates.
std::uint64_t estimate(const ChipSpec& chip, const ConvArgs& a, const Shape& s, const ConvPlan& p,
                       const Blocks& b) {
  const double rate = chip.exchange.bytes_per_cycle.value;
  const std::uint64_t fixed = chip.exchange.fixed_overhead.count + chip.sync.internal_latency.count;
  // Consecutive tiles differ in output-channel block: with out_split >= 2 both tiles of a
  // super-tile pair receive the same input block at twice the rate.
  const double in_rate = p.out_split >= 2 ? rate * chip.exchange.tiles_per_shared_bus : rate;
  const double receive =
      static_cast<double>(b.in_bytes) / in_rate + static_cast<double>(b.weight_bytes) / rate;
  const double send = static_cast<double>(b.in_bytes + b.weight_bytes) / rate;
  std::uint64_t cycles = fixed + static_cast<std::uint64_t>(std::max(receive, send));
  const auto args = amp_args(a, s, p);
  cycles += (uses_nx1(a) ? cost::amp_convnx1(chip, args) : cost::amp_conv1x1(chip, args)).cycles;
  if (p.in_split > 1) {
    // The stages of emit_conv's reduce-scatter, for the tile owning the most outputs.
    const auto [stages, fan_in] = reduction_stages(p.in_split);
    const std::uint64_t pb = trace::dtype_bytes(s.partials);
    std::uint64_t stride = 1;
    for (int t = 0; t < stages; ++t) {
      const std::uint64_t span = stride * fan_in;
      const std::uint64_t owned = b.reduce_outputs * ceil_div(p.in_split, span);
      const std::uint64_t group = std::min(fan_in, ceil_div(p.in_split, stride));
      cycles +=
          fixed + static_cast<std::uint64_t>(static_cast<double>((group - 1) * owned * pb) / rate);
      cycles += cost::reduce(chip, trace::Op::kAdd, s.partials,
                             t + 1 == stages ? a.dtype : s.partials, owned, group)
                    .cycles;
      stride = span;
    }
  }
  if (p.serial_in > 1) cycles += cost::binary(chip, trace::Op::kAdd, a.dtype, b.acc_outputs).cycles;
  return cycles * p.serial();
}

}  // namespace

std::uint64_t transpose_factor(const ChipSpec& chip, const ConvArgs& a) {
  return cost::transpose_factor(chip, a.dtype, a.in_chans * a.out_chans);
}

namespace {

// The one-off cost of the rearranged, transposed copies of the operands the pass reads
// transposed: each of the plan's tiles receives its share of the operand (exchange) and
// transposes it (cost::transpose: an element per cycle times poplin's 5/4 or 5/3), in one
// extra superstep.
std::uint64_t rearrangement_cycles(const ChipSpec& chip, const ConvArgs& a, const ConvPlan& p) {
  const std::uint64_t eb = trace::dtype_bytes(a.dtype);
  std::uint64_t elements = 0;
  if (a.transposed_input) elements += a.groups * a.batch * a.height * a.width * a.in_chans;
  if (a.transposed_weights) elements += a.groups * a.kernel * a.kernel * a.in_chans * a.out_chans;
  if (elements == 0) return 0;
  const std::uint64_t per_tile = ceil_div(elements, p.tiles_used());
  const std::uint64_t fixed = chip.exchange.fixed_overhead.count + chip.sync.internal_latency.count;
  return fixed +
         static_cast<std::uint64_t>(static_cast<double>(per_tile * eb) /
                                    chip.exchange.bytes_per_cycle.value) +
         cost::transpose(chip, a.dtype, per_tile, transpose_factor(chip, a)).cycles;
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

trace::Trace one_ipu(std::string name) {
  trace::Trace t;
  t.name = std::move(name);
  t.ipus.emplace_back();
  return t;
}

trace::Step step(trace::StepKind kind, std::uint32_t index = 0) {
  trace::Step s;
  s.kind = kind;
  s.index = index;
  return s;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw UsageError(what);
}

// Spreads `n` items over `tiles` tiles: the first (n % tiles) tiles get one more.
struct Spread {
  std::uint64_t big = 0, small = 0;
  std::uint32_t big_tiles = 0, used = 0;
};

Spread spread(std::uint64_t n, std::uint32_t tiles) {
  Spread s;
  s.used = u32(std::min<std::uint64_t>(n, tiles));
  if (s.used == 0) return s;
  s.small = n / s.used;
  s.big_tiles = u32(n % s.used);
  s.big = s.small + 1;
  return s;
}

// Adds one vertex per group of the spread; `set_count` writes the per-tile count.
template <class F>
void add_spread(trace::ComputeSet& cs, trace::Codelet codelet, const Spread& sp, F&& params) {
  if (sp.big_tiles > 0) {
    trace::Vertex v{codelet, TileRange{0, sp.big_tiles - 1}, {}};
    params(v, sp.big);
    cs.vertices.push_back(v);
  }
  if (sp.used > sp.big_tiles && sp.small > 0) {
    trace::Vertex v{codelet, TileRange{sp.big_tiles, sp.used - 1}, {}};
    params(v, sp.small);
    cs.vertices.push_back(v);
  }
}

}  // namespace

ConvArgs combine_conv_groups(const ChipSpec& chip, const ConvArgs& a) {
  if (!a.channel_groups || a.groups <= 1 || a.in_chans > 2) return a;
  const std::uint64_t grain = amp_in_grain(chip, a.dtype);
  std::uint64_t f = 1;
  while (2 * f * a.in_chans <= grain && a.groups % (2 * f) == 0) f *= 2;
  ConvArgs c = a;
  c.groups = a.groups / f;
  c.in_chans = a.in_chans * f;
  c.out_chans = a.out_chans * f;
  return c;
}

ConvPlan plan_conv(const ChipSpec& chip, const ConvArgs& a) {
  return plan_conv(chip, a,
                   chip.tile_memory.count - std::min(chip.tile_memory.count, fixed_memory(chip)));
}

namespace {

// The fastest plan with the given serial splits whose buffers fit in `budget` bytes per tile
// (fewer tiles, then fewer serial iterations, break ties); rows_per_tile == 0 if none fits.
ConvPlan best_plan(const ChipSpec& chip, const ConvArgs& a, std::uint64_t budget,
                   std::uint32_t serial_in, std::uint32_t serial_out, std::uint64_t& least) {
  ConvPlan base;
  base.serial_in = serial_in;
  base.serial_out = serial_out;
  const ConvArgs it = iteration_args(a, base);
  const Shape s = shape_of(chip, it);
  const std::uint64_t out_grains = ceil_div(it.out_chans, s.engines);
  const std::uint64_t in_grains = ceil_div(it.in_chans, s.in_grain);
  ConvPlan best;
  best.estimated_cycles = std::numeric_limits<std::uint64_t>::max();
  // Conv groups are the outermost split (poplar-compiler.md §1.7).
  // The distinct splits of each dimension up to all tiles, ascending: those up to a smaller
  // limit are exactly the ones not above it (each split is the smallest count giving its
  // chunk size), so each list is computed once and cut at the tiles the outer splits leave.
  const std::vector<std::uint64_t> groups = distinct_splits(a.groups, chip.tiles),
                                   rows = distinct_splits(s.rows, chip.tiles),
                                   outs = distinct_splits(out_grains, chip.tiles),
                                   ins = distinct_splits(in_grains, chip.tiles);
  const auto upto = [](const std::vector<std::uint64_t>& splits, std::uint64_t limit) {
    return std::span(splits.begin(), std::upper_bound(splits.begin(), splits.end(), limit));
  };
  for (auto sg : upto(groups, chip.tiles))
    for (auto sr : upto(rows, chip.tiles / sg))
      for (auto so : upto(outs, chip.tiles / (sg * sr)))
        for (auto si : upto(ins, chip.tiles / (sg * sr * so))) {
          if (sg * sr * so * si > chip.tiles) continue;
          ConvPlan p = base;
          p.groups_per_tile = ceil_div(a.groups, sg);
          p.rows_per_tile = ceil_div(s.rows, sr);
          p.out_per_tile = std::min(it.out_chans, ceil_div(out_grains, so) * s.engines);
          p.in_per_tile = std::min(it.in_chans, ceil_div(in_grains, si) * s.in_grain);
          p.group_split = u32(ceil_div(a.groups, p.groups_per_tile));
          p.row_split = u32(ceil_div(s.rows, p.rows_per_tile));
          p.out_split = u32(ceil_div(it.out_chans, p.out_per_tile));
          p.in_split = u32(ceil_div(it.in_chans, p.in_per_tile));
          const Blocks b = blocks_of(it, s, p);
          p.bytes_per_tile = memory_of(b);
          least = std::min(least, p.bytes_per_tile);
          if (p.bytes_per_tile > budget) continue;
          p.estimated_cycles = estimate(chip, it, s, p, b) + rearrangement_cycles(chip, a, p);
          if (p.estimated_cycles < best.estimated_cycles ||
              (p.estimated_cycles == best.estimated_cycles && p.tiles_used() < best.tiles_used()))
            best = p;
        }
  if (best.rows_per_tile == 0) best = ConvPlan{};  // nothing fits this budget
  return best;
}

// The plan for one budget (poplar-compiler.md §1.5 step 1): the fastest parallel-only plan
// that fits; if none fits, the fastest plan with a serial split of the input or the output
// channels (one kind, a divisor of the channel count, at most kMaxSerial) that fits.
// `least` is lowered to the smallest per-tile buffer size of any candidate seen.
ConvPlan plan_within(const ChipSpec& chip, const ConvArgs& a, std::uint64_t budget,
                     std::uint64_t& least) {
  require(a.batch >= 1 && a.in_chans >= 1 && a.height >= 1 && a.width >= 1 && a.out_chans >= 1 &&
              a.kernel >= 1 && a.stride >= 1 && a.groups >= 1,
          "conv dimensions must all be at least 1");
  ConvPlan best = best_plan(chip, a, budget, 1, 1, least);
  if (best.rows_per_tile != 0) return best;
  auto consider = [&](const ConvPlan& p) {
    if (p.rows_per_tile == 0) return;
    if (best.rows_per_tile == 0 || p.estimated_cycles < best.estimated_cycles ||
        (p.estimated_cycles == best.estimated_cycles && p.serial() < best.serial()))
      best = p;
  };
  for (auto d : serial_counts(a.in_chans)) consider(best_plan(chip, a, budget, u32(d), 1, least));
  for (auto d : serial_counts(a.out_chans)) consider(best_plan(chip, a, budget, 1, u32(d), least));
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

std::string conv_name(const ConvArgs& a) {
  const std::string dt(trace::kDTypeNames[static_cast<std::size_t>(a.dtype)]);
  const bool is_matmul = a.batch == 1 && a.width == 1 && a.kernel == 1 && a.stride == 1;
  std::string name = is_matmul
                         ? fmt::format("matmul_{}x{}x{}_{}", a.height, a.out_chans, a.in_chans, dt)
                         : fmt::format("conv2d_n{}_c{}_{}x{}_k{}_f{}_s{}_{}", a.batch, a.in_chans,
                                       a.height, a.width, a.out_chans, a.kernel, a.stride, dt);
  if (a.groups > 1) name += fmt::format("_g{}", a.groups);
  const trace::DType partials = partials_of(a);
  if (partials != a.dtype)
    name += fmt::format("_p{}", trace::kDTypeNames[static_cast<std::size_t>(partials)]);
  return name;
}

namespace {

trace::Trace conv2d_with(const ChipSpec& chip, const ConvArgs& a, const ConvPlan& p) {
  const ConvArgs it = iteration_args(a, p);
  const Shape s = shape_of(chip, it);
  const Blocks b = blocks_of(it, s, p);  // the largest block: buffer sizes on every tile
  trace::Trace t = one_ipu(conv_name(a));
  auto& prog = t.ipus[0];
  const TileRange all{0, p.tiles_used() - 1};
  // Buffers are allocated at the largest block's size on every tile used.
  prog.tensors.push_back({"in_blk", trace::TensorKind::kActivation, a.dtype, all, b.in_bytes});
  prog.tensors.push_back({"weight_blk", trace::TensorKind::kWeight, a.dtype, all, b.weight_bytes});
  prog.tensors.push_back(
      {"partials", trace::TensorKind::kPartial, s.partials, all, b.partial_bytes});
  if (p.in_split > 1) {
    prog.tensors.push_back(
        {"reduce_buf", trace::TensorKind::kTemp, s.partials, all, b.reduce_bytes});
    prog.tensors.push_back({"out", trace::TensorKind::kOutput, a.dtype, all, b.out_bytes});
  }
  if (p.serial_in > 1)
    prog.tensors.push_back({"acc", trace::TensorKind::kOutput, a.dtype, all, b.acc_bytes});
  emit_conv(prog, "", chip, a, p, prog.steps);
  return t;
}

}  // namespace

trace::Trace conv2d(const ChipSpec& chip, const ConvArgs& a) {
  return conv2d_with(chip, a, plan_conv(chip, a));
}

trace::Trace conv2d(const ChipSpec& chip, const ConvArgs& a, std::uint64_t budget) {
  return conv2d_with(chip, a, plan_conv(chip, a, budget));
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

std::uint32_t plan_tile(const ConvPlan& p, std::uint32_t g, std::uint32_t r, std::uint32_t i,
                        std::uint32_t o) {
  return ((g * p.row_split + r) * p.in_split + i) * p.out_split + o;
}

void emit_conv(trace::IpuProgram& prog, const std::string& prefix, const ChipSpec& chip,
               const ConvArgs& whole, const ConvPlan& p, std::vector<trace::Step>& out_steps) {
  emit_conv(prog, prefix, chip, whole, p, out_steps, FetchSources{});
}

void emit_conv(trace::IpuProgram& prog, const std::string& prefix, const ChipSpec& chip,
               const ConvArgs& whole, const ConvPlan& p, std::vector<trace::Step>& out_steps,
               const FetchSources& sources) {
  require(p.serial() == 1 || (!sources.input && !sources.weights),
          "caller-supplied fetch sources need a plan without a serial split");
  require(whole.in_chans % p.serial_in == 0 && whole.out_chans % p.serial_out == 0 &&
              (p.serial_in == 1 || p.serial_out == 1),
          "a conv plan's serial split must divide its channels, one kind at a time");
  // Everything below is one serial iteration; a serial plan repeats it.
  const ConvArgs a = iteration_args(whole, p);
  std::vector<trace::Step> body;
  std::vector<trace::Step>& steps = p.serial() > 1 ? body : out_steps;
  const Shape s = shape_of(chip, a);
  const std::uint32_t cs_base = static_cast<std::uint32_t>(prog.compute_sets.size());
  const std::uint32_t ex_base = static_cast<std::uint32_t>(prog.exchanges.size());
  // Tile order: conv-group block outermost, then row block, input-channel block, and
  // output-channel block innermost.
  auto tile = [&](std::uint32_t g, std::uint32_t row, std::uint32_t in, std::uint32_t out) {
    return plan_tile(p, g, row, in, out);
  };
  // Exact sizes of each block: the last block of a dimension may be smaller.
  auto groups_of = [&](std::uint32_t g) {
    return std::min(p.groups_per_tile, a.groups - g * p.groups_per_tile);
  };
  auto rows_of = [&](std::uint32_t r) {
    return std::min(p.rows_per_tile, s.rows - r * p.rows_per_tile);
  };
  auto in_of = [&](std::uint32_t i) {
    return std::min(p.in_per_tile, a.in_chans - i * p.in_per_tile);
  };
  auto out_of = [&](std::uint32_t o) {
    return std::min(p.out_per_tile, a.out_chans - o * p.out_per_tile);
  };
  const std::uint64_t eb = trace::dtype_bytes(a.dtype);
  const auto pd = s.partials;
  const std::uint64_t pb = trace::dtype_bytes(pd);
  auto in_bytes = [&](std::uint32_t g, std::uint32_t r, std::uint32_t i) {
    return groups_of(g) * in_rows_for(a, rows_of(r)) * in_cols(a, s) * in_of(i) * eb;
  };
  auto weight_bytes = [&](std::uint32_t g, std::uint32_t i, std::uint32_t o) {
    return groups_of(g) * a.kernel * a.kernel * in_of(i) * out_of(o) * eb;
  };
  // Outputs of block (g, r, o) (all its groups).
  auto outputs_of = [&](std::uint32_t g, std::uint32_t r, std::uint32_t o) -> std::uint64_t {
    return groups_of(g) * rows_of(r) * s.out_w * out_of(o);
  };
  // With an input-channel split, tile (g, r, k, o) reduces chunk k of block (g, r, o)'s outputs.
  auto chunk = [&](std::uint32_t g, std::uint32_t r, std::uint32_t o,
                   std::uint32_t k) -> std::uint64_t {
    const std::uint64_t outputs = outputs_of(g, r, o);
    const std::uint64_t size = ceil_div(outputs, p.in_split);
    return k * size >= outputs ? 0 : std::min(size, outputs - k * size);
  };
  namespace sl = trace::slot;
  trace::ComputeSet conv{prefix + "conv", {}};
  for (std::uint32_t g = 0; g < p.group_split; ++g)
    for (std::uint32_t r = 0; r < p.row_split; ++r)
      for (std::uint32_t i = 0; i < p.in_split; ++i) {
        // Tiles (g, r, i, 0..out_split-1) are contiguous; only the last out block may differ.
        auto add = [&](std::uint32_t o_first, std::uint32_t o_last) {
          trace::Vertex v{uses_nx1(a) ? trace::Codelet::kAmpConvNx1 : trace::Codelet::kAmpConv1x1,
                          TileRange{tile(g, r, i, o_first), tile(g, r, i, o_last)},
                          {}};
          v.params[sl::kAmpIn] = static_cast<std::int64_t>(a.dtype);
          v.params[sl::kAmpPartials] = static_cast<std::int64_t>(pd);
          v.params[sl::kAmpPositions] = static_cast<std::int64_t>(rows_of(r) * s.out_w);
          v.params[sl::kAmpInChans] = static_cast<std::int64_t>(in_of(i));
          v.params[sl::kAmpOutChans] = static_cast<std::int64_t>(out_of(o_first));
          v.params[sl::kAmpGroups] = static_cast<std::int64_t>(groups_of(g));
          if (uses_nx1(a)) {
            v.params[sl::kAmpKernelH] = static_cast<std::int64_t>(a.kernel);
            v.params[sl::kAmpKernelW] = static_cast<std::int64_t>(a.kernel);
            v.params[sl::kAmpWidth] = static_cast<std::int64_t>(s.out_w);
          }
          v.params[uses_nx1(a) ? sl::kAmpNx1CoeffLoadBits : sl::kAmp1x1CoeffLoadBits] =
              static_cast<std::int64_t>(a.coeff_load_bits);
          conv.vertices.push_back(v);
        };
        const std::uint32_t last = p.out_split - 1;
        if (out_of(last) == out_of(0)) {
          add(0, last);
        } else {
          if (last > 0) add(0, last - 1);
          add(last, last);
        }
      }
  prog.compute_sets.push_back(std::move(conv));

  // Fetch: each input block starts on its first consumer (out block 0) and is multicast to the
  // other out blocks (contiguous tiles); each weight block starts on row block 0 and is sent
  // to the same (group, in, out) block of every other row block.
  trace::Exchange fetch{prefix + "fetch", {}, {}};
  if (sources.input) sources.input(fetch);
  if (sources.weights) sources.weights(fetch);
  for (std::uint32_t g = 0; g < p.group_split; ++g) {
    for (std::uint32_t r = 0; r < p.row_split && !sources.input; ++r)
      for (std::uint32_t i = 0; i < p.in_split; ++i)
        if (p.out_split > 1) {
          const TileRange dst{tile(g, r, i, 1), tile(g, r, i, p.out_split - 1)};
          fetch.add(TileRange{tile(g, r, i, 0), tile(g, r, i, 0)}, {&dst, 1}, in_bytes(g, r, i));
        }
    for (std::uint32_t i = 0; i < p.in_split && !sources.weights; ++i)
      for (std::uint32_t o = 0; o < p.out_split; ++o)
        if (p.row_split > 1) {
          std::vector<TileRange> dst;
          for (std::uint32_t r = 1; r < p.row_split; ++r)
            dst.push_back({tile(g, r, i, o), tile(g, r, i, o)});
          fetch.add(TileRange{tile(g, 0, i, o), tile(g, 0, i, o)}, dst, weight_bytes(g, i, o));
        }
  }
  prog.exchanges.push_back(std::move(fetch));
  steps.push_back(step(trace::StepKind::kSync));
  steps.push_back(step(trace::StepKind::kExchange, ex_base));
  steps.push_back(step(trace::StepKind::kCompute, cs_base));
  std::uint32_t next_cs = cs_base + 1;

  std::uint32_t next_ex = ex_base + 1;
  if (p.in_split > 1) {
    // Reduce-scatter of the partial sums over the D input-channel blocks, in poplin's stages
    // (reduction_stages: fan-in f per stage). Tile k ends up owning chunk k of its block's
    // outputs. Stage t (stride S = f^(t-1)) groups the tiles that agree in all base-f digits
    // but digit t; a tile owns the chunks whose lowest t digits equal its own and receives the
    // group peers' partials of them. One stage (f = D) is the plain reduce-scatter.
    const std::uint64_t depth = p.in_split;
    const auto [stages, fan_in] = reduction_stages(depth);
    std::uint64_t stride = 1;
    for (int t = 0; t < stages; ++t) {
      const std::uint64_t span = stride * fan_in;  // ownership modulus after this stage
      trace::Exchange red{
          prefix + (t == 0 ? std::string("reduce") : fmt::format("reduce{}", t + 1)), {}, {}};
      trace::ComputeSet reduce_cs{red.name, {}};
      for (std::uint32_t g = 0; g < p.group_split; ++g)
        for (std::uint32_t r = 0; r < p.row_split; ++r)
          for (std::uint32_t o = 0; o < p.out_split; ++o)
            for (std::uint32_t k = 0; k < depth; ++k) {
              std::uint64_t n = 0;  // elements tile k owns after this stage
              for (std::uint64_t c = k % span; c < depth; c += span)
                n += chunk(g, r, o, static_cast<std::uint32_t>(c));
              if (n == 0) continue;
              const TileRange owner{tile(g, r, k, o), tile(g, r, k, o)};
              const std::uint64_t base =
                  k - (k / stride) % fan_in * stride;  // digit t of k set to 0
              std::uint64_t inputs = 0;
              for (std::uint64_t m = 0; m < fan_in; ++m) {
                const std::uint64_t i = base + m * stride;
                if (i >= depth) break;
                ++inputs;
                if (i != k)
                  red.add(TileRange{tile(g, r, static_cast<std::uint32_t>(i), o),
                                    tile(g, r, static_cast<std::uint32_t>(i), o)},
                          {&owner, 1}, n * pb);
              }
              if (inputs < 2) continue;
              trace::Vertex rv{trace::Codelet::kReduce, owner, {}};
              rv.params[sl::kReduceOp] = static_cast<std::int64_t>(trace::Op::kAdd);
              rv.params[sl::kReduceIn] = static_cast<std::int64_t>(pd);
              rv.params[sl::kReduceOut] = static_cast<std::int64_t>(t + 1 == stages ? a.dtype : pd);
              rv.params[sl::kReduceOutputs] = static_cast<std::int64_t>(n);
              rv.params[sl::kReduceInputs] = static_cast<std::int64_t>(inputs);
              reduce_cs.vertices.push_back(rv);
            }
      prog.exchanges.push_back(std::move(red));
      prog.compute_sets.push_back(std::move(reduce_cs));
      steps.push_back(step(trace::StepKind::kSync));
      steps.push_back(step(trace::StepKind::kExchange, next_ex++));
      steps.push_back(step(trace::StepKind::kCompute, next_cs++));
      stride = span;
    }
  }

  if (p.serial_in > 1) {
    // Serial input split: each tile adds the outputs it owns this iteration into its
    // accumulated output (same tile every iteration, so no exchange).
    trace::ComputeSet acc{prefix + "accumulate", {}};
    for (std::uint32_t g = 0; g < p.group_split; ++g)
      for (std::uint32_t r = 0; r < p.row_split; ++r)
        for (std::uint32_t o = 0; o < p.out_split; ++o)
          for (std::uint32_t k = 0; k < p.in_split; ++k) {
            const std::uint64_t n = p.in_split > 1 ? chunk(g, r, o, k)
                                    : k == 0       ? outputs_of(g, r, o)
                                                   : 0;
            if (n == 0) continue;
            const TileRange owner{tile(g, r, k, o), tile(g, r, k, o)};
            trace::Vertex v{trace::Codelet::kBinary, owner, {}};
            v.params[sl::kEltOp] = static_cast<std::int64_t>(trace::Op::kAdd);
            v.params[sl::kEltDType] = static_cast<std::int64_t>(a.dtype);
            v.params[sl::kEltN] = static_cast<std::int64_t>(n);
            acc.vertices.push_back(v);
          }
    prog.compute_sets.push_back(std::move(acc));
    steps.push_back(step(trace::StepKind::kCompute, next_cs++));
  }

  if (p.serial() > 1) {
    trace::Step loop = step(trace::StepKind::kRepeat);
    loop.count = p.serial();
    loop.body = std::move(body);
    out_steps.push_back(std::move(loop));
  }
}

trace::Trace matmul(const ChipSpec& chip, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                    DType dtype) {
  return matmul(chip, m, n, k, dtype, 1);
}

trace::Trace matmul(const ChipSpec& chip, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                    DType dtype, std::uint64_t groups) {
  ConvArgs a;
  a.height = m;
  a.out_chans = n;
  a.in_chans = k;
  a.dtype = dtype;
  a.groups = groups;
  return conv2d(chip, a);
}

trace::Trace reduce(const ChipSpec& chip, std::uint64_t outputs, std::uint64_t inputs,
                    DType dtype) {
  require(outputs >= 1 && inputs >= 1, "reduce needs --outputs and --inputs of at least 1");
  trace::Trace t = one_ipu(fmt::format("reduce_{}x{}_{}", inputs, outputs,
                                       trace::kDTypeNames[static_cast<std::size_t>(dtype)]));
  auto& prog = t.ipus[0];
  const Spread sp = spread(outputs, chip.tiles);
  const TileRange used{0, sp.used - 1};
  const std::uint64_t eb = trace::dtype_bytes(dtype);
  prog.tensors.push_back(
      {"partials", trace::TensorKind::kPartial, dtype, used, sp.big * inputs * eb});
  prog.tensors.push_back({"out", trace::TensorKind::kOutput, dtype, used, sp.big * eb});
  trace::ComputeSet cs{"reduce", {}};
  namespace sl = trace::slot;
  add_spread(cs, trace::Codelet::kReduce, sp, [&](trace::Vertex& v, std::uint64_t count) {
    v.params[sl::kReduceOp] = static_cast<std::int64_t>(trace::Op::kAdd);
    v.params[sl::kReduceIn] = static_cast<std::int64_t>(dtype);
    v.params[sl::kReduceOut] = static_cast<std::int64_t>(dtype);
    v.params[sl::kReduceOutputs] = static_cast<std::int64_t>(count);
    v.params[sl::kReduceInputs] = static_cast<std::int64_t>(inputs);
  });
  prog.compute_sets.push_back(std::move(cs));
  prog.steps = {step(trace::StepKind::kCompute, 0)};
  return t;
}

trace::Trace elementwise(const ChipSpec& chip, trace::Op op, std::uint64_t n, DType dtype) {
  require(n >= 1, "elementwise needs --n of at least 1");
  const bool is_binary = op <= trace::Op::kMin;
  trace::Trace t =
      one_ipu(fmt::format("elementwise_{}_{}_{}", trace::kOpNames[static_cast<std::size_t>(op)], n,
                          trace::kDTypeNames[static_cast<std::size_t>(dtype)]));
  auto& prog = t.ipus[0];
  const Spread sp = spread(n, chip.tiles);
  const TileRange used{0, sp.used - 1};
  const std::uint64_t bytes = sp.big * trace::dtype_bytes(dtype);
  prog.tensors.push_back({"a", trace::TensorKind::kActivation, dtype, used, bytes});
  if (is_binary) prog.tensors.push_back({"b", trace::TensorKind::kActivation, dtype, used, bytes});
  prog.tensors.push_back({"out", trace::TensorKind::kOutput, dtype, used, bytes});
  trace::ComputeSet cs{"elementwise", {}};
  namespace sl = trace::slot;
  add_spread(cs, is_binary ? trace::Codelet::kBinary : trace::Codelet::kUnary, sp,
             [&](trace::Vertex& v, std::uint64_t count) {
               v.params[sl::kEltOp] = static_cast<std::int64_t>(op);
               v.params[sl::kEltDType] = static_cast<std::int64_t>(dtype);
               v.params[sl::kEltN] = static_cast<std::int64_t>(count);
             });
  prog.compute_sets.push_back(std::move(cs));
  prog.steps = {step(trace::StepKind::kCompute, 0)};
  return t;
}

namespace {
// An exchange kernel runs over 2 to chip.tiles tiles; a one-tile chip has no such range.
void require_exchange_tiles(const ChipSpec& chip, std::string_view kernel, std::uint64_t tiles) {
  require(chip.tiles >= 2, fmt::format("{} needs a chip of at least 2 tiles, found chip.tiles {}",
                                       kernel, chip.tiles));
  require(tiles >= 2 && tiles <= chip.tiles,
          fmt::format("{} needs 2 to {} tiles, got {}", kernel, chip.tiles, tiles));
}
}  // namespace

trace::Trace exchange_all_to_all(const ChipSpec& chip, std::uint64_t bytes, std::uint32_t tiles) {
  require_exchange_tiles(chip, "all-to-all", tiles);
  trace::Trace t = one_ipu(fmt::format("exchange_all_to_all_{}B_{}tiles", bytes, tiles));
  auto& prog = t.ipus[0];
  const TileRange all{0, tiles - 1};
  prog.tensors.push_back(
      {"send_buf", trace::TensorKind::kTemp, DType::kChar, all, bytes * (tiles - 1)});
  prog.tensors.push_back(
      {"recv_buf", trace::TensorKind::kTemp, DType::kChar, all, bytes * (tiles - 1)});
  trace::Exchange ex{"all_to_all", {}, {}};
  ex.add(all, {&all, 1}, bytes, trace::TransferMode::kPersonalised);
  prog.exchanges.push_back(std::move(ex));
  prog.steps = {step(trace::StepKind::kSync), step(trace::StepKind::kExchange, 0)};
  return t;
}

trace::Trace exchange_broadcast(const ChipSpec& chip, std::uint64_t bytes, std::uint32_t tiles,
                                std::uint32_t src) {
  require_exchange_tiles(chip, "broadcast", tiles);
  require(src < tiles,
          fmt::format("broadcast needs a source tile below its {} tiles, got {}", tiles, src));
  trace::Trace t = one_ipu(fmt::format("exchange_broadcast_{}B_{}tiles", bytes, tiles));
  auto& prog = t.ipus[0];
  const TileRange all{0, tiles - 1};
  prog.tensors.push_back({"data", trace::TensorKind::kActivation, DType::kChar, all, bytes});
  trace::Exchange ex{"broadcast", {}, {}};
  ex.add(TileRange{src, src}, {&all, 1}, bytes);
  prog.exchanges.push_back(std::move(ex));
  prog.steps = {step(trace::StepKind::kSync), step(trace::StepKind::kExchange, 0)};
  return t;
}

trace::Trace sync_loop(const ChipSpec& /*chip*/, std::uint64_t iterations) {
  require(iterations >= 1, "sync-loop needs --iterations of at least 1");
  trace::Trace t = one_ipu(fmt::format("sync_loop_{}", iterations));
  trace::Step loop = step(trace::StepKind::kRepeat);
  loop.count = iterations;
  loop.body.push_back(step(trace::StepKind::kSync));
  t.ipus[0].steps.push_back(std::move(loop));
  return t;
}

trace::Trace link_p2p(const ChipSpec& /*chip*/, std::uint64_t bytes, std::uint32_t src,
                      std::uint32_t dst) {
  require(src != dst, "link-p2p needs two different IPUs (--src-ipu, --dst-ipu)");
  trace::Trace t;
  t.name = fmt::format("link_p2p_{}B_ipu{}_to_ipu{}", bytes, src, dst);
  t.global_exchanges.push_back({"p2p", {trace::IpuCopy{src, dst, bytes}}});
  for (std::uint32_t ipu : {std::min(src, dst), std::max(src, dst)}) {
    trace::IpuProgram& p = t.ipus.emplace_back();
    p.ipu = ipu;
    p.steps.push_back(step(trace::StepKind::kGlobalExchange, 0));
  }
  return t;
}

trace::Trace collective(const ChipSpec& chip, trace::CollectiveOp op, std::uint64_t bytes,
                        std::uint32_t group, trace::CollectiveMethod method, DType dtype) {
  require(group >= 1, "a collective needs --group of at least 1");
  trace::Trace t = one_ipu(
      fmt::format("{}_{}B_{}ipus_{}", trace::kCollectiveOpNames[static_cast<std::size_t>(op)],
                  bytes, group, trace::kCollectiveMethodNames[static_cast<std::size_t>(method)]));
  t.replicas = group;
  // The tensor is spread over all tiles, as gradients are.
  const Spread sp = spread(ceil_div(bytes, 1), chip.tiles);
  if (sp.used > 0)
    t.ipus[0].tensors.push_back(
        {"tensor", trace::TensorKind::kGradient, dtype, TileRange{0, sp.used - 1}, sp.big});
  trace::Step c = step(trace::StepKind::kCollective);
  c.collective = op;
  c.method = method;
  c.dtype = dtype;
  c.bytes = bytes;
  c.group = trace::Group{trace::GroupKind::kReplicas, 0};
  t.ipus[0].steps.push_back(c);
  return t;
}

trace::Trace external_sync(const ChipSpec& /*chip*/, std::uint32_t group,
                           std::uint64_t iterations) {
  require(group >= 1 && iterations >= 1, "sync needs --group and --iterations of at least 1");
  trace::Trace t = one_ipu(fmt::format("external_sync_{}ipus_{}", group, iterations));
  t.replicas = group;
  trace::Step loop = step(trace::StepKind::kRepeat);
  loop.count = iterations;
  trace::Step sync = step(trace::StepKind::kSync);
  sync.group = trace::Group{trace::GroupKind::kAll, 0};
  loop.body.push_back(sync);
  t.ipus[0].steps.push_back(std::move(loop));
  return t;
}

}  // namespace ipusim::kernels
