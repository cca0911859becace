// SPDX-License-Identifier: Apache-2.0
// A planned conv laid out as a program (docs/kernels.md): the fetch exchange, the AMP compute
// set, an input-channel split's staged reduce-scatter and reduction, and a serial split's loop.
#include <fmt/format.h>

#include <algorithm>

#include "geometry.hpp"
#include "ipusim/plan/conv.hpp"
#include "ipusim/plan/program_parts.hpp"

namespace ipusim::plan {

using namespace detail;  // NOLINT(google-build-using-namespace): this library's own internals
using trace::TileRange;

std::uint32_t plan_tile(const ConvPlan& p, std::uint32_t g, std::uint32_t r, std::uint32_t i,
                        std::uint32_t o) {
  if (p.order == TileOrder::kInputOuter)
    return ((g * p.in_split + i) * p.row_split + r) * p.out_split + o;
  return ((g * p.row_split + r) * p.in_split + i) * p.out_split + o;
}

namespace {

// The codelet of a plan's vertices given the product it computes (planned_product): the
// method's, or for the AMP the 1x1 or nx1 vertex by the product's kernel.
trace::Codelet product_codelet(const ConvArgs& product, ConvMethod method) {
  switch (method) {
    case ConvMethod::kSlic:
      return trace::Codelet::kAmpSlic;
    case ConvMethod::kHmac:
      return trace::Codelet::kConvHmac;
    case ConvMethod::kAmp:
      break;
  }
  return uses_nx1(product) ? trace::Codelet::kAmpConvNx1 : trace::Codelet::kAmpConv1x1;
}

}  // namespace

trace::Codelet plan_codelet(const ConvArgs& args, const ConvPlan& plan) {
  return product_codelet(planned_product(args, plan), plan.method);
}

void emit_conv(trace::IpuProgram& prog, const std::string& prefix, const ChipSpec& chip,
               const ConvArgs& whole, const ConvPlan& p, std::vector<trace::Step>& out_steps) {
  emit_conv(prog, prefix, chip, whole, p, out_steps, FetchSources{});
}

namespace {

namespace sl = trace::slot;

// One serial iteration of a planned conv, block by block: the exact sizes of each block (the
// last block of a dimension may be smaller) and the compute sets and exchanges built from them.
class ConvEmitter {
 public:
  ConvEmitter(const std::string& prefix, const ChipSpec& chip, const ConvArgs& iteration,
              const ConvPlan& p)
      : chip_(chip),
        prefix_(prefix),
        a_(iteration),
        p_(p),
        s_(shape_of(chip, iteration, p)),
        eb_(trace::dtype_bytes(iteration.dtype)),
        pb_(trace::dtype_bytes(s_.partials)) {}

  // The AMP compute set: one vertex group per run of tiles with equal block sizes.
  trace::ComputeSet conv() const {
    trace::ComputeSet cs{prefix_ + "conv", {}};
    for (std::uint32_t g = 0; g < p_.group_split; ++g)
      for (std::uint32_t r = 0; r < p_.row_split; ++r)
        for (std::uint32_t i = 0; i < p_.in_split; ++i) {
          // Tiles (g, r, i, 0..out_split-1) are contiguous; only the last out block may differ.
          const std::uint32_t last = p_.out_split - 1;
          if (out_of(last) == out_of(0)) {
            cs.vertices.push_back(amp_vertex(g, r, i, 0, last));
          } else {
            if (last > 0) cs.vertices.push_back(amp_vertex(g, r, i, 0, last - 1));
            cs.vertices.push_back(amp_vertex(g, r, i, last, last));
          }
        }
    return cs;
  }

  // Fetch: each input block starts on its first consumer (out block 0) and is multicast to the
  // other out blocks (contiguous tiles); each weight block starts on row block 0 and is sent to
  // the same (group, in, out) block of every other row block. An operand with caller-supplied
  // sources is fetched by them instead.
  trace::Exchange fetch(const FetchSources& sources) const {
    trace::Exchange ex{prefix_ + "fetch", {}, {}};
    if (sources.input) sources.input(ex);
    if (sources.weights) sources.weights(ex);
    for (std::uint32_t g = 0; g < p_.group_split; ++g) {
      for (std::uint32_t r = 0; r < p_.row_split && !sources.input; ++r)
        for (std::uint32_t i = 0; i < p_.in_split; ++i)
          if (p_.out_split > 1) {
            const TileRange dst{tile(g, r, i, 1), tile(g, r, i, p_.out_split - 1)};
            ex.add(TileRange{tile(g, r, i, 0), tile(g, r, i, 0)}, {&dst, 1}, in_bytes(g, r, i));
          }
      for (std::uint32_t i = 0; i < p_.in_split && !sources.weights; ++i)
        for (std::uint32_t o = 0; o < p_.out_split; ++o)
          if (p_.row_split > 1) {
            std::vector<TileRange> dst;
            for (std::uint32_t r = 1; r < p_.row_split; ++r)
              dst.push_back({tile(g, r, i, o), tile(g, r, i, o)});
            ex.add(TileRange{tile(g, 0, i, o), tile(g, 0, i, o)}, dst, weight_bytes(g, i, o));
          }
    }
    return ex;
  }

  // Stage t of the reduce-scatter of the partial sums over the D input-channel blocks, in
  // poplin's stages (reduction_stages: fan-in f per stage). Tile k ends up owning chunk k of
  // its block's outputs. Stage t (stride S = f^(t-1)) groups the tiles that agree in all base-f
  // digits but digit t; a tile owns the chunks whose lowest t digits equal its own and receives
  // the group peers' partials of them. One stage (f = D) is the plain reduce-scatter. The
  // exchange is one trace::ReduceScatter record over the blocks (g, r, o), whose D tiles are a
  // fixed step apart; when that could stand for more transfers than a record may, its
  // transfers are listed instead.
  std::pair<trace::Exchange, trace::ComputeSet> reduce_stage(int t, int stages,
                                                             std::uint64_t fan_in,
                                                             std::uint64_t stride) const {
    trace::Exchange red{
        prefix_ + (t == 0 ? std::string("reduce") : fmt::format("reduce{}", t + 1)), {}, {}};
    trace::ComputeSet reduce_cs{red.name, {}};
    trace::ReduceScatter rs;
    rs.members = p_.in_split;
    rs.member_step = tile(0, 0, 1, 0) - tile(0, 0, 0, 0);
    rs.fan_in = static_cast<std::uint32_t>(fan_in);
    rs.stride = static_cast<std::uint32_t>(stride);
    rs.element_bytes = static_cast<std::uint32_t>(pb_);
    for (std::uint32_t g = 0; g < p_.group_split; ++g)
      for (std::uint32_t r = 0; r < p_.row_split; ++r)
        for (std::uint32_t o = 0; o < p_.out_split; ++o) {
          const std::uint64_t elements = outputs_of(g, r, o);
          if (elements == 0) continue;
          // Blocks (g, r, o...) are consecutive tiles: a run while their outputs are equal.
          const std::uint32_t first = tile(g, r, 0, o);
          trace::ReduceScatter::Groups* last = rs.groups.empty() ? nullptr : &rs.groups.back();
          if (last && last->elements == elements &&
              last->first + std::uint64_t{last->count} == first &&
              (last->count == 1 || last->step == 1)) {
            last->step = 1;
            ++last->count;
          } else {
            rs.groups.push_back({first, 0, 1, elements});
          }
          for (std::uint32_t k = 0; k < p_.in_split; ++k) {
            const std::uint64_t n = rs.owned(elements, k);  // elements tile k owns after it
            const std::uint64_t inputs = rs.stage_group(k).second;
            if (n == 0 || inputs < 2) continue;
            trace::Vertex rv{
                trace::Codelet::kReduce, TileRange{tile(g, r, k, o), tile(g, r, k, o)}, {}};
            rv.params[sl::kReduceOp] = static_cast<std::int64_t>(trace::Op::kAdd);
            rv.params[sl::kReduceIn] = static_cast<std::int64_t>(s_.partials);
            rv.params[sl::kReduceOut] =
                static_cast<std::int64_t>(t + 1 == stages ? a_.dtype : s_.partials);
            rv.params[sl::kReduceOutputs] = static_cast<std::int64_t>(n);
            rv.params[sl::kReduceInputs] = static_cast<std::int64_t>(inputs);
            reduce_cs.add(rv);
          }
        }
    if (rs.groups.empty()) return {std::move(red), std::move(reduce_cs)};
    if (rs.transfer_bound() <= trace::kMaxReduceScatterTransfers) {
      red.reduce_scatters.push_back(std::move(rs));
    } else {
      rs.for_each_piece([&](std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) {
        const TileRange to{dst, dst};
        red.add({src, src}, {&to, 1}, bytes);
      });
    }
    return {std::move(red), std::move(reduce_cs)};
  }

  // Serial input split: each tile adds the outputs it owns this iteration into its accumulated
  // output (same tile every iteration, so no exchange).
  trace::ComputeSet accumulate() const {
    trace::ComputeSet acc{prefix_ + "accumulate", {}};
    for (std::uint32_t g = 0; g < p_.group_split; ++g)
      for (std::uint32_t r = 0; r < p_.row_split; ++r)
        for (std::uint32_t o = 0; o < p_.out_split; ++o)
          for (std::uint32_t k = 0; k < p_.in_split; ++k) {
            const std::uint64_t n = p_.in_split > 1 ? chunk(g, r, o, k)
                                    : k == 0        ? outputs_of(g, r, o)
                                                    : 0;
            if (n == 0) continue;
            trace::Vertex v{
                trace::Codelet::kBinary, TileRange{tile(g, r, k, o), tile(g, r, k, o)}, {}};
            v.params[sl::kEltOp] = static_cast<std::int64_t>(trace::Op::kAdd);
            v.params[sl::kEltDType] = static_cast<std::int64_t>(a_.dtype);
            v.params[sl::kEltN] = static_cast<std::int64_t>(n);
            acc.vertices.push_back(v);
          }
    return acc;
  }

 private:
  // The plan's tile order (plan_tile): output-channel block innermost in either.
  std::uint32_t tile(std::uint32_t g, std::uint32_t r, std::uint32_t i, std::uint32_t o) const {
    return plan_tile(p_, g, r, i, o);
  }
  std::uint64_t groups_of(std::uint32_t g) const {
    return std::min(p_.groups_per_tile, a_.groups - g * p_.groups_per_tile);
  }
  std::uint64_t rows_of(std::uint32_t r) const {
    return std::min(p_.rows_per_tile, s_.rows - r * p_.rows_per_tile);
  }
  std::uint64_t in_of(std::uint32_t i) const {
    return std::min(p_.in_per_tile, a_.in_chans - i * p_.in_per_tile);
  }
  std::uint64_t out_of(std::uint32_t o) const {
    return std::min(p_.out_per_tile, a_.out_chans - o * p_.out_per_tile);
  }
  std::uint64_t in_bytes(std::uint32_t g, std::uint32_t r, std::uint32_t i) const {
    return groups_of(g) * in_rows_for(a_, rows_of(r)) * in_cols(a_, s_) * in_of(i) * eb_;
  }
  std::uint64_t weight_bytes(std::uint32_t g, std::uint32_t i, std::uint32_t o) const {
    if (p_.method == ConvMethod::kSlic) return groups_of(g) * slic_weight_elements(a_) * eb_;
    return groups_of(g) * kernel_rows(a_, s_) * a_.kernel.w * in_of(i) * out_of(o) * eb_;
  }
  // Outputs of block (g, r, o) (all its groups).
  std::uint64_t outputs_of(std::uint32_t g, std::uint32_t r, std::uint32_t o) const {
    return groups_of(g) * rows_of(r) * s_.out_w * out_of(o);
  }
  // With an input-channel split, tile (g, r, k, o) reduces chunk k of block (g, r, o)'s outputs.
  std::uint64_t chunk(std::uint32_t g, std::uint32_t r, std::uint32_t o, std::uint32_t k) const {
    const std::uint64_t outputs = outputs_of(g, r, o);
    const std::uint64_t size = ceil_div(outputs, p_.in_split);
    return k * size >= outputs ? 0 : std::min(size, outputs - k * size);
  }
  // The AMP vertex of tiles (g, r, i, o_first..o_last), whose blocks are the same size.
  trace::Vertex amp_vertex(std::uint32_t g, std::uint32_t r, std::uint32_t i, std::uint32_t o_first,
                           std::uint32_t o_last) const {
    const TileRange tiles{tile(g, r, i, o_first), tile(g, r, i, o_last)};
    if (p_.method == ConvMethod::kSlic) return slic_vertex(g, r, tiles);
    if (p_.method == ConvMethod::kHmac) return hmac_vertex(g, r, i, o_first, tiles);
    const bool nx1 = uses_nx1(a_);
    trace::Vertex v{product_codelet(a_, p_.method), tiles, {}};
    v.params[sl::kAmpIn] = static_cast<std::int64_t>(a_.dtype);
    v.params[sl::kAmpPartials] = static_cast<std::int64_t>(s_.partials);
    v.params[sl::kAmpPositions] = static_cast<std::int64_t>(rows_of(r) * s_.out_w);
    v.params[sl::kAmpInChans] = static_cast<std::int64_t>(in_of(i));
    v.params[sl::kAmpOutChans] = static_cast<std::int64_t>(out_of(o_first));
    v.params[sl::kAmpGroups] = static_cast<std::int64_t>(groups_of(g));
    if (nx1) {
      v.params[sl::kAmpKernelH] = static_cast<std::int64_t>(a_.kernel.h);
      v.params[sl::kAmpKernelW] = static_cast<std::int64_t>(a_.kernel.w);
      v.params[sl::kAmpWidth] = static_cast<std::int64_t>(s_.out_w);
      // 0 (the default) for one row, so that such vertices read as before.
      if (s_.weight_height > 1)
        v.params[sl::kAmpNx1WeightHeight] = static_cast<std::int64_t>(s_.weight_height);
    }
    v.params[nx1 ? sl::kAmpNx1CoeffLoadBits : sl::kAmp1x1CoeffLoadBits] =
        static_cast<std::int64_t>(a_.coeff_load_bits);
    return v;
  }

  // The SLIC vertex of block (g, r) (a SLIC plan splits neither input nor output channels).
  trace::Vertex slic_vertex(std::uint32_t g, std::uint32_t r, TileRange tiles) const {
    ConvPlan block = p_;
    block.rows_per_tile = rows_of(r);
    block.groups_per_tile = groups_of(g);
    const cost::SlicArgs sa = slic_args(chip_, a_, s_, block);
    trace::Vertex v{trace::Codelet::kAmpSlic, tiles, {}};
    v.params[sl::kSlicIn] = static_cast<std::int64_t>(a_.dtype);
    v.params[sl::kSlicPartials] = static_cast<std::int64_t>(sa.partials);
    v.params[sl::kSlicPositions] = static_cast<std::int64_t>(sa.positions);
    v.params[sl::kSlicWidth] = static_cast<std::int64_t>(sa.width);
    v.params[sl::kSlicGroups] = static_cast<std::int64_t>(sa.groups_per_group);
    v.params[sl::kSlicChans] = static_cast<std::int64_t>(sa.chans);
    v.params[sl::kSlicGroupGroups] = static_cast<std::int64_t>(sa.group_groups);
    v.params[sl::kSlicKernelH] = static_cast<std::int64_t>(sa.kernel_h);
    v.params[sl::kSlicKernelW] = static_cast<std::int64_t>(sa.kernel_w);
    v.params[sl::kSlicStride] = static_cast<std::int64_t>(sa.stride);
    v.params[sl::kSlicChains] = static_cast<std::int64_t>(sa.chains);
    return v;
  }

  // The HMAC vertex of tiles (g, r, i, o...), whose blocks are the same size.
  trace::Vertex hmac_vertex(std::uint32_t g, std::uint32_t r, std::uint32_t i, std::uint32_t o,
                            TileRange tiles) const {
    ConvPlan block = p_;
    block.rows_per_tile = rows_of(r);
    block.groups_per_tile = groups_of(g);
    block.in_per_tile = in_of(i);
    block.out_per_tile = out_of(o);
    const cost::HmacArgs ha = hmac_args(a_, s_, block);
    trace::Vertex v{trace::Codelet::kConvHmac, tiles, {}};
    v.params[sl::kHmacIn] = static_cast<std::int64_t>(ha.in);
    v.params[sl::kHmacPartials] = static_cast<std::int64_t>(ha.partials);
    v.params[sl::kHmacPositions] = static_cast<std::int64_t>(ha.positions);
    v.params[sl::kHmacWidth] = static_cast<std::int64_t>(ha.width);
    v.params[sl::kHmacInChans] = static_cast<std::int64_t>(ha.in_chans);
    v.params[sl::kHmacOutChans] = static_cast<std::int64_t>(ha.out_chans);
    v.params[sl::kHmacGroups] = static_cast<std::int64_t>(ha.groups);
    v.params[sl::kHmacKernelH] = static_cast<std::int64_t>(ha.kernel_h);
    v.params[sl::kHmacKernelW] = static_cast<std::int64_t>(ha.kernel_w);
    return v;
  }

  const ChipSpec& chip_;
  const std::string& prefix_;
  const ConvArgs a_;
  const ConvPlan& p_;
  const Shape s_;
  const std::uint64_t eb_, pb_;  // bytes per element of the operands and of the partials
};

}  // namespace

void emit_conv(trace::IpuProgram& prog, const std::string& prefix, const ChipSpec& chip,
               const ConvArgs& args, const ConvPlan& p, std::vector<trace::Step>& out_steps,
               const FetchSources& sources) {
  const ConvArgs whole = planned_product(args, p);
  require(p.serial() == 1 || (!sources.input && !sources.weights),
          "caller-supplied fetch sources need a plan without a serial split");
  require(whole.in_chans % p.serial_in == 0 && whole.out_chans % p.serial_out == 0 &&
              (p.serial_in == 1 || p.serial_out == 1),
          "a conv plan's serial split must divide its channels, one kind at a time");
  // Everything below is one serial iteration; a serial plan repeats it.
  const ConvEmitter emitter(prefix, chip, iteration_args(whole, p), p);
  std::vector<trace::Step> body;
  std::vector<trace::Step>& steps = p.serial() > 1 ? body : out_steps;
  const auto next_cs = [&] { return static_cast<std::uint32_t>(prog.compute_sets.size()); };
  const auto next_ex = [&] { return static_cast<std::uint32_t>(prog.exchanges.size()); };
  // A superstep: sync, the exchange and the compute set about to be added.
  const auto superstep = [&] {
    steps.push_back(make_step(trace::StepKind::kSync));
    steps.push_back(make_step(trace::StepKind::kExchange, next_ex()));
    steps.push_back(make_step(trace::StepKind::kCompute, next_cs()));
  };
  superstep();  // fetch, AMP compute set
  prog.compute_sets.push_back(emitter.conv());
  prog.exchanges.push_back(emitter.fetch(sources));
  if (p.in_split > 1) {
    const auto [stages, fan_in] = reduction_stages(p.in_split);
    std::uint64_t stride = 1;
    for (int t = 0; t < stages; ++t, stride *= fan_in) {
      superstep();
      auto [exchange, reduce] = emitter.reduce_stage(t, stages, fan_in, stride);
      prog.exchanges.push_back(std::move(exchange));
      prog.compute_sets.push_back(std::move(reduce));
    }
  }
  if (p.serial_in > 1) {
    steps.push_back(make_step(trace::StepKind::kCompute, next_cs()));
    prog.compute_sets.push_back(emitter.accumulate());
  }
  if (p.serial() > 1) {
    trace::Step loop = make_step(trace::StepKind::kRepeat);
    loop.count = p.serial();
    loop.body = std::move(body);
    out_steps.push_back(std::move(loop));
  }
}

}  // namespace ipusim::plan
