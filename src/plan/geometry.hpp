// SPDX-License-Identifier: Apache-2.0
// The geometry of a planned conv, shared by the planner (planner.cpp) and the emitter
// (emit.cpp): its output shape and AMP grains, one serial iteration's conv, a tile's block and
// buffer sizes, and the AMP vertex arguments of a block.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/plan/conv.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::plan::detail {

using trace::DType;

inline std::uint32_t u32(std::uint64_t v) { return static_cast<std::uint32_t>(v); }

inline void require(bool ok, const std::string& what) {
  if (!ok) throw UsageError(what);
}

// Sizes derived from a conv problem and a choice of splits.
struct Shape {
  std::uint64_t out_h = 0, out_w = 0, rows = 0;  // output rows = batch x out_h
  // The channel grains the splits are made in: the AMP's engines and the input channels of
  // one weight load, or the HMAC vertex's output and input channel groups.
  std::uint32_t out_grain = 0, in_grain = 0;
  std::uint32_t weight_height = 1;  // kernel rows per AMP weight load (ConvPlan::weight_height)
  DType partials = DType::kHalf;
};

// Input channels one AMP engine takes per weight load (the planner's input-channel grain).
inline std::uint32_t amp_in_grain(const ChipSpec& chip, DType dtype) {
  return dtype == DType::kHalf ? chip.amp.weights_per_engine_half
                               : chip.amp.weights_per_engine_float;
}

// With weight height h an engine's weights hold amp_in_grain / h input channels of h kernel
// rows, so the AMP's input-channel grain is amp_in_grain / h.
inline Shape shape_of(const ChipSpec& chip, const ConvArgs& a, const ConvPlan& p) {
  Shape s;
  s.out_h = ceil_div(a.height, a.stride.h);
  s.out_w = ceil_div(a.width, a.stride.w);
  s.rows = a.batch * s.out_h;
  // FP16.16 for half by default (ConvArgs::partials selects FP16.32), FP32 for float.
  s.partials = partials_of(a);
  s.weight_height = std::max<std::uint32_t>(p.weight_height, 1);
  if (p.method == ConvMethod::kHmac) {
    s.out_grain = u32(cost::hmac_out_chans_per_group(s.partials));
    s.in_grain = u32(cost::hmac_in_grain(a.dtype));
    return s;
  }
  s.out_grain = cost::amp_engines(chip, a.dtype, s.partials);
  s.in_grain = std::max<std::uint32_t>(amp_in_grain(chip, a.dtype) / s.weight_height, 1);
  return s;
}

// The conv one serial iteration computes: the channel counts divided by the serial splits.
inline ConvArgs iteration_args(const ConvArgs& a, const ConvPlan& p) {
  ConvArgs it = a;
  it.in_chans = a.in_chans / p.serial_in;
  it.out_chans = a.out_chans / p.serial_out;
  return it;
}

// The AMP 1x1 vertex serves every conv whose kernel is 1x1: a strided 1x1 conv only reads
// every stride-th row and column of its input, which the fetch gathers as a dense block of
// out_h x out_w positions (poplin applies the stride to the input the same way).
inline bool uses_nx1(const ConvArgs& a) { return a.kernel != Spatial{1}; }

// Input rows and columns a tile needs for `rows` output rows: the halo for a spatial kernel,
// only the strided positions for a 1x1 kernel.
inline std::uint64_t in_rows_for(const ConvArgs& a, std::uint64_t rows) {
  return uses_nx1(a) ? (rows - 1) * a.stride.h + a.kernel.h : rows;
}
inline std::uint64_t in_cols(const ConvArgs& a, const Shape& s) {
  return uses_nx1(a) ? a.width : s.out_w;
}

// Whether the chip's 16 half engines take SLIC's 4-chain vertex and its 8x1 and 16x1 groupings:
// half partials on 16 engines (getConvVertexSLICCandidates).
inline bool slic_sixteen_engines(const ChipSpec& chip, DType partials) {
  return partials == DType::kHalf && cost::amp_engines(chip, DType::kHalf, DType::kHalf) == 16;
}

// The SLIC vertex groupings (conv groups a vertex group, channels a conv group) that can run
// a combined conv's blocks (ConvVertexType.cpp getConvVertexSLICCandidates, in its order):
// half inputs, a spatial kernel, an output stride of 1 or 2, and conv groups of c = 1 or 2
// input = output channels combined (combine_conv_groups) by F; 2x2 for two channels, and for
// one 4x1, 8x1 and 16x1 (the last two with half partials on 16 engines), each dividing F. A
// tile's block of combined groups then holds whole vertex groups and all their channels.
inline std::vector<std::pair<std::uint32_t, std::uint32_t>> slic_groupings(const ChipSpec& chip,
                                                                           const ConvArgs& a) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
  const std::uint32_t f = a.combined_groups;
  if (a.dtype != DType::kHalf || !uses_nx1(a) || a.stride.h != a.stride.w || a.stride.w > 2 ||
      f < 2 || a.in_chans != a.out_chans || a.in_chans % f != 0)
    return out;
  const std::uint64_t c = a.in_chans / f;
  const bool sixteen = slic_sixteen_engines(chip, partials_of(a));
  if (c == 2) out.emplace_back(2, 2);
  if (c == 1)
    for (const std::uint32_t g : {4U, 8U, 16U})
      if (f % g == 0 && (g == 4 || sixteen)) out.emplace_back(g, 1);
  return out;
}
inline bool slic_candidate(const ChipSpec& chip, const ConvArgs& a) {
  return !slic_groupings(chip, a).empty();
}

// A SLIC block's weight elements per combined group: each conv group's own in x out channels
// (not block-diagonal) per kernel position, the kernel width padded to 1x4 windows.
inline std::uint64_t slic_weight_elements(const ConvArgs& a) {
  return a.in_chans * a.out_chans / a.combined_groups * a.kernel.h * ceil_div(a.kernel.w, 4) * 4;
}

// Kernel rows the AMP runs: the kernel height padded with zero rows to a multiple of the weight
// height (poplin pads the kernel's outermost spatial dimension, ConvModel's
// addRearrangementAndPaddingCosts for convUnitWeightHeight != 1).
inline std::uint64_t kernel_rows(const ConvArgs& a, const Shape& s) {
  return ceil_div(a.kernel.h, s.weight_height) * s.weight_height;
}

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
inline Blocks blocks_of(const ConvArgs& a, const Shape& s, const ConvPlan& p) {
  Blocks b;
  const std::uint64_t eb = trace::dtype_bytes(a.dtype);
  const std::uint64_t pb = trace::dtype_bytes(s.partials);
  const std::uint64_t g = p.groups_per_tile;
  b.positions = p.rows_per_tile * s.out_w;
  b.in_bytes = g * in_rows_for(a, p.rows_per_tile) * in_cols(a, s) * p.in_per_tile * eb;
  b.weight_bytes = g * kernel_rows(a, s) * a.kernel.w * p.in_per_tile * p.out_per_tile * eb;
  b.partial_bytes = g * b.positions * p.out_per_tile * pb;
  if (p.method == ConvMethod::kSlic) {
    // One weight a conv group and kernel position, the kernel width padded to 1x4 windows;
    // the vertex's extra output buffer: a vertex group's partials and 200 bytes (ConvModel.cpp
    // addConvTempMemoryEstimate).
    b.weight_bytes = g * slic_weight_elements(a) * eb;
    b.partial_bytes += ceil_div(b.partial_bytes, g) + 200;
  }
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

inline std::uint64_t memory_of(const Blocks& b) {
  return b.in_bytes + b.weight_bytes + b.partial_bytes + b.reduce_bytes + b.out_bytes + b.acc_bytes;
}

// The SLIC vertex of a block (ConvMethod::kSlic): the cheapest of poplin's candidates, in its order
// (4 conv-unit chains, with half partials on 16 engines, then 2; the groupings of slic_groupings),
// the first winning a tie.
inline cost::SlicArgs slic_args(const ChipSpec& chip, const ConvArgs& a, const Shape& s,
                                const ConvPlan& p) {
  cost::SlicArgs v, best;
  v.partials = s.partials;
  v.positions = p.rows_per_tile * s.out_w;
  v.width = s.out_w;
  v.kernel_h = a.kernel.h;
  v.kernel_w = a.kernel.w;
  v.stride = a.stride.w;
  std::uint64_t least = 0;
  const bool four = slic_sixteen_engines(chip, s.partials);
  for (const std::uint64_t chains : {4U, 2U}) {
    if (chains == 4 && !four) continue;
    for (const auto& [groups, chans] : slic_groupings(chip, a)) {
      v.chains = chains;
      v.groups_per_group = groups;
      v.chans = chans;
      // The tile's conv groups in vertex groups: combined groups x F / groups.
      v.group_groups = p.groups_per_tile * (a.combined_groups / groups);
      const std::uint64_t cycles = cost::amp_slic(chip, v).cycles;
      if (least == 0 || cycles < least) {
        best = v;
        least = cycles;
      }
    }
  }
  return best;
}

inline cost::AmpConvArgs amp_args(const ConvArgs& a, const Shape& s, const ConvPlan& p) {
  cost::AmpConvArgs v;
  v.in = a.dtype;
  v.partials = s.partials;
  v.positions = p.rows_per_tile * s.out_w;
  v.in_chans = p.in_per_tile;
  v.out_chans = p.out_per_tile;
  v.groups = p.groups_per_tile;
  v.kernel_h = a.kernel.h;
  v.kernel_w = a.kernel.w;
  v.width = s.out_w;
  v.coeff_load_bits = a.coeff_load_bits;
  v.weight_height = s.weight_height;
  return v;
}

// The HMAC vertex of a block (ConvMethod::kHmac): the tile's input channels one group (padded
// to the grain), the field flattened to one row for a 1x1 kernel (poplin flattens such a
// conv's batch and field).
inline cost::HmacArgs hmac_args(const ConvArgs& a, const Shape& s, const ConvPlan& p) {
  cost::HmacArgs v;
  v.in = a.dtype;
  v.partials = s.partials;
  v.positions = p.rows_per_tile * s.out_w;
  v.width = uses_nx1(a) ? s.out_w : 0;
  v.in_chans = ceil_div(p.in_per_tile, s.in_grain) * s.in_grain;
  v.out_chans = p.out_per_tile;
  v.groups = p.groups_per_tile;
  v.kernel_h = a.kernel.h;
  v.kernel_w = a.kernel.w;
  return v;
}

// The cycles of a block's vertex: SLIC's, the HMAC's or the AMP's (1x1 or nx1).
inline std::uint64_t vertex_cycles(const ChipSpec& chip, const ConvArgs& a, const Shape& s,
                                   const ConvPlan& p) {
  if (p.method == ConvMethod::kSlic) return cost::amp_slic(chip, slic_args(chip, a, s, p)).cycles;
  if (p.method == ConvMethod::kHmac) return cost::conv_hmac(chip, hmac_args(a, s, p)).cycles;
  const cost::AmpConvArgs v = amp_args(a, s, p);
  return (uses_nx1(a) ? cost::amp_convnx1(chip, v) : cost::amp_conv1x1(chip, v)).cycles;
}

// Elements of type t in one vector of the chip's datapath (4 halves or 2 floats in 64 bits).
inline std::uint64_t vector_elements(const ChipSpec& chip, DType t) {
  return std::max<std::uint64_t>(chip.datapath_width.count / trace::dtype_bytes(t), 1);
}

// A lower bound on the vertex cycles of every block with at least `p`'s positions, channels and
// groups: vertex_cycles, but for the HMAC with the input channels rounded up to whole vectors (its
// dot product over part of a vector costs more than over the whole vector,
// getDenseDotProductCycles; test Planner.TheHmacVertexBoundHoldsForLargerBlocks). The other
// vertices never get cheaper as a block grows
// (Planner.TheAmpVertexNeverGetsCheaperWithMoreChannels).
inline std::uint64_t least_vertex_cycles(const ChipSpec& chip, const ConvArgs& a, const Shape& s,
                                         const ConvPlan& p) {
  if (p.method != ConvMethod::kHmac) return vertex_cycles(chip, a, s, p);
  cost::HmacArgs v = hmac_args(a, s, p);
  const std::uint64_t vector = vector_elements(chip, a.dtype);
  v.in_chans = ceil_div(v.in_chans, vector) * vector;
  return cost::conv_hmac(chip, v).cycles;
}

}  // namespace ipusim::plan::detail
