// SPDX-License-Identifier: Apache-2.0
// Codelet cycle models: hand-computed cases (expected values derived in the comments from the
// formulas in docs/codelets.md, never by calling the model) and analytic-bound properties.
#include "ipusim/cost/codelet_models.hpp"

#include <gtest/gtest.h>

#include <cstdint>

#include "ipusim/kernels/kernels.hpp"
#include "ipusim/tile/reduce_plan.hpp"
#include "ipusim/util/error.hpp"
#include "test_chips.hpp"

namespace ipusim::cost {
namespace {

using testing::gc200_by_hand;
using trace::Codelet;
using trace::DType;
using trace::Op;

AmpConvArgs conv(DType in, DType partials, std::uint64_t positions, std::uint64_t in_chans,
                 std::uint64_t out_chans, std::uint64_t groups = 1, std::uint64_t kh = 1,
                 std::uint64_t kw = 1) {
  AmpConvArgs a;
  a.in = in;
  a.partials = partials;
  a.positions = positions;
  a.in_chans = in_chans;
  a.out_chans = out_chans;
  a.groups = groups;
  a.kernel_h = kh;
  a.kernel_w = kw;
  return a;
}

// The trace vertex of an AMP vertex with these arguments (the nx1 fields for amp_convnx1).
trace::Vertex amp_vertex(Codelet c, const AmpConvArgs& a) {
  namespace sl = trace::slot;
  trace::Vertex v{c, {0, 0}, {}};
  v.params[sl::kAmpIn] = static_cast<std::int64_t>(a.in);
  v.params[sl::kAmpPartials] = static_cast<std::int64_t>(a.partials);
  v.params[sl::kAmpPositions] = static_cast<std::int64_t>(a.positions);
  v.params[sl::kAmpInChans] = static_cast<std::int64_t>(a.in_chans);
  v.params[sl::kAmpOutChans] = static_cast<std::int64_t>(a.out_chans);
  v.params[sl::kAmpGroups] = static_cast<std::int64_t>(a.groups);
  const auto bits = static_cast<std::int64_t>(a.coeff_load_bits);
  if (c == Codelet::kAmpConv1x1) {
    v.params[sl::kAmp1x1CoeffLoadBits] = bits;
    return v;
  }
  v.params[sl::kAmpKernelH] = static_cast<std::int64_t>(a.kernel_h);
  v.params[sl::kAmpKernelW] = static_cast<std::int64_t>(a.kernel_w);
  v.params[sl::kAmpWidth] = static_cast<std::int64_t>(a.width);
  v.params[sl::kAmpNx1CoeffLoadBits] = bits;
  v.params[sl::kAmpNx1WeightHeight] =
      a.weight_height == 1 ? 0 : static_cast<std::int64_t>(a.weight_height);
  return v;
}

double macs_per_cycle(const VertexCost& c) {
  return static_cast<double>(c.flops) / 2.0 / static_cast<double>(c.cycles);
}

// ---- amp_conv1x1 ------------------------------------------------------------------------------

TEST(CodeletAmp1x1, HandComputedHalfHalf16Engines) {
  // GC200: W=6, E=16, weights/engine 16, core = 16/4 = 4, common path (c=1) with state
  // retention (poplibs getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat):
  // 60 positions -> 10 per worker: worker = 38 + 4*(10-3) - 7 = 59 without zeroing, 37 + 28 - 7
  // = 58 with. inner_nz = max(6*59, 6*59+14) = 368, inner_z = max(348, 362) = 362.
  // IG = 32/16 = 2, OG = 32/16 = 2, P = 1, L = 16*16*2/16 = 32.
  // per CG = 12+1 + (2-1)*(16-1 + 2*(19 + (6+32+368))) + (11 + 2*(19-1 + (7+32+362)))
  //        = 13 + (15 + 850) + (11 + 838) = 1727; retention 6*(7 + 3*(2*1 - 1)) = 60;
  // cycles = 50 + 60 + 1727 = 1837.  flops = 2*60*32*32 = 122880.
  const auto c = amp_conv1x1(gc200_by_hand(), conv(DType::kHalf, DType::kHalf, 60, 32, 32));
  EXPECT_EQ(c.cycles, 1837u);
  EXPECT_EQ(c.flops, 122880u);
}

TEST(CodeletAmp1x1, SixtyFourBitWeightLoadsHalveTheLoadRate) {
  // As HandComputedHalfHalf16Engines, whose 2 x 2 (input group, output group) passes each
  // load 512 B of weights: 32 cycles at the chip's 16 B/cycle, 64 at 8 B/cycle with 64-bit
  // loads (Poplar's default): 1837 + 4 x 32 = 1965. 128-bit loads run at the chip's rate.
  auto a = conv(DType::kHalf, DType::kHalf, 60, 32, 32);
  a.coeff_load_bits = 64;
  EXPECT_EQ(amp_conv1x1(gc200_by_hand(), a).cycles, 1965u);
  a.coeff_load_bits = 128;
  EXPECT_EQ(amp_conv1x1(gc200_by_hand(), a).cycles, 1837u);
  // From a trace vertex (the last amp_conv1x1 parameter).
  a.coeff_load_bits = 64;
  EXPECT_EQ(vertex_cost(gc200_by_hand(), amp_vertex(Codelet::kAmpConv1x1, a)).cycles, 1965u);
}

TEST(CodeletAmp1x1, HandComputedHalfFloatUnevenSplit) {
  // half->float: E=8, common path (float partials) with retention. 4 positions over 6 workers,
  // one input group, so only the zeroing pass: 1 position 31 + 1 - 7 = 25, none 20 + 1 - 7 = 14.
  // inner = max(6*25, 6*14 + 14) = max(150, 98) = 150.  IG = 1, OG = 8/8 = 1,
  // L = 8*16*2/16 = 16.  per CG = 13 + 0 + (11 + 1*(18 + (7+16+150))) = 215; retention 6*7 = 42.
  // cycles = 50 + 42 + 215 = 307;  flops = 2*4*16*8 = 1024.
  const auto c = amp_conv1x1(gc200_by_hand(), conv(DType::kHalf, DType::kFloat, 4, 16, 8));
  EXPECT_EQ(c.cycles, 307u);
  EXPECT_EQ(c.flops, 1024u);
}

TEST(CodeletAmp1x1, HandComputedFloatWithZeroing) {
  // float->float: E=16, weights/engine 8, core = 8/1 = 8, base 46, zeroing 2 + 8n (float in
  // with 16 engines), no retention; float partials take the common outer constants (c=1).
  // 18 positions -> 3 per worker. zeroing worker = 46 + 2 + 8*3 = 72.
  // inner_z = max(432, 446) = 446.  IG = 8/8 = 1, OG = 16/16 = 1, L = 16*8*4/16 = 32.
  // per CG = 12 + 1 + (11 + 1*(19 - 1 + (7+32+446))) = 527;  cycles = 50 + 2*527 = 1104.
  // flops = 2*18*8*16*2 = 9216.
  const auto c = amp_conv1x1(gc200_by_hand(), conv(DType::kFloat, DType::kFloat, 18, 8, 16, 2));
  EXPECT_EQ(c.cycles, 1104u);
  EXPECT_EQ(c.flops, 9216u);
}

TEST(CodeletAmp1x1, HalfHalfApproaches64MacPerCycleButNeverExceeds) {
  const ChipSpec chip = gc200_by_hand();
  const double peak = chip.peak_macs_per_cycle_per_tile(true, false);
  ASSERT_DOUBLE_EQ(peak, 64.0);
  double previous = 0;
  for (std::uint64_t n : {6u, 60u, 600u, 6000u, 60000u}) {
    const auto a = conv(DType::kHalf, DType::kHalf, n, 64, 64);
    const double rate = macs_per_cycle(amp_conv1x1(chip, a));
    EXPECT_LE(rate, peak) << "n=" << n;
    EXPECT_GT(rate, previous) << "n=" << n;
    previous = rate;
  }
  EXPECT_GT(previous, 0.98 * peak);
}

TEST(CodeletAmp1x1, HalfFloatPeaksAt32MacPerCycle) {
  const ChipSpec chip = gc200_by_hand();
  const auto a = conv(DType::kHalf, DType::kFloat, 60000, 64, 64);
  const double rate = macs_per_cycle(amp_conv1x1(chip, a));
  EXPECT_LE(rate, 32.0);
  EXPECT_GT(rate, 0.97 * 32.0);
}

TEST(CodeletAmp1x1, FloatPeaksAt16MacPerCycle) {
  // The float path pays output zeroing (2 + 8n per worker) on the first of IG input groups,
  // so 512 input channels (IG = 64) are used to amortise it.
  const ChipSpec chip = gc200_by_hand();
  const auto a = conv(DType::kFloat, DType::kFloat, 60000, 512, 64);
  const double rate = macs_per_cycle(amp_conv1x1(chip, a));
  EXPECT_LE(rate, 16.0);
  EXPECT_GT(rate, 0.97 * 16.0);
}

TEST(CodeletAmp1x1, HalvingHalfEnginesRoughlyDoublesCycles) {
  ChipSpec full = gc200_by_hand();
  ChipSpec halved = full;
  halved.amp.half_half.engines = 8;
  const auto a = conv(DType::kHalf, DType::kHalf, 600, 256, 64);
  const double ratio = static_cast<double>(amp_conv1x1(halved, a).cycles) /
                       static_cast<double>(amp_conv1x1(full, a).cycles);
  EXPECT_GT(ratio, 1.8);
  EXPECT_LT(ratio, 2.3);
  EXPECT_EQ(amp_conv1x1(halved, a).flops, amp_conv1x1(full, a).flops);
}

TEST(CodeletAmp1x1, UnsupportedPairThrows) {
  const ChipSpec chip = gc200_by_hand();
  EXPECT_THROW(amp_engines(chip, DType::kFloat, DType::kHalf), ModelError);
  EXPECT_THROW(amp_engines(chip, DType::kInt, DType::kInt), ModelError);
  EXPECT_THROW(amp_conv1x1(chip, conv(DType::kFloat, DType::kHalf, 60, 16, 16)), ModelError);
  EXPECT_THROW(amp_convnx1(chip, conv(DType::kChar, DType::kHalf, 60, 16, 16, 1, 3, 3)),
               ModelError);
}

TEST(CodeletAmp1x1, EnginesFollowChip) {
  ChipSpec chip = gc200_by_hand();
  EXPECT_EQ(amp_engines(chip, DType::kHalf, DType::kHalf), 16u);
  EXPECT_EQ(amp_engines(chip, DType::kHalf, DType::kFloat), 8u);
  EXPECT_EQ(amp_engines(chip, DType::kFloat, DType::kFloat), 16u);
  chip.amp.half_float.engines = 0;
  EXPECT_THROW(amp_engines(chip, DType::kHalf, DType::kFloat), ModelError);
}

// ---- amp_convnx1 ------------------------------------------------------------------------------

TEST(CodeletAmpNx1, HandComputedHalfHalf3x3) {
  // 12 positions -> 2 per worker. worker = 17 + 1 (half partials) + 3 + f(2)=33 - 9 = 45.
  // per kernel position = max(6*45, 6*45 + 9) = 279.  L = 32, h_cost = 15, P = 1.
  // inner = 3*14 + 9*(12 + (32 + 15 + 3 + 279)) = 42 + 9*341 = 3111.
  // outer = 109 + 6*9 + 6*10 + 1*(17*1 + 6*0 + 1) + 6*0 + 1 + 1*(16 + 1*(14 + 1*(14 + 3111)))
  //       = 109 + 54 + 60 + 18 + 1 + 3155 = 3397.
  // zeroing: 12 positions x 16 partials / 6 workers = 32 each, 8 vectors of 4 halves + 5:
  //       6 * 1 * 1 * 13 = 78; cycles = 3397 + 78 = 3475.
  // flops = 2*12*16*16*3*3 = 55296.
  const auto c =
      amp_convnx1(gc200_by_hand(), conv(DType::kHalf, DType::kHalf, 12, 16, 16, 1, 3, 3));
  EXPECT_EQ(c.cycles, 3475u);
  EXPECT_EQ(c.flops, 55296u);
}

TEST(CodeletAmpNx1, SixtyFourBitWeightLoadsHalveTheLoadRate) {
  // As HandComputedHalfHalf3x3: one pass per kernel position (9), each loading 512 B of
  // weights, 32 more cycles each at 8 B/cycle: 3475 + 9 x 32 = 3763.
  auto a = conv(DType::kHalf, DType::kHalf, 12, 16, 16, 1, 3, 3);
  a.coeff_load_bits = 64;
  EXPECT_EQ(amp_convnx1(gc200_by_hand(), a).cycles, 3763u);
}

TEST(CodeletAmpNx1, RowsCutEachWorkersShareIntoWorklistEntries) {
  // As HandComputedHalfHalf3x3 (12 positions, 2 per worker), but the output rows hold one
  // position (width = 1): each worker's 2 positions are 2 entries of n = 1, 2*(3 + 29 - 9)
  // = 46 worker cycles, instead of one entry of n = 2, 3 + 33 - 9 = 27: 19 more per worker,
  // 6*19 = 114 more per kernel position, 9*114 = 1026 more in all: 3475 + 1026 = 4501.
  auto a = conv(DType::kHalf, DType::kHalf, 12, 16, 16, 1, 3, 3);
  a.width = 1;
  EXPECT_EQ(amp_convnx1(gc200_by_hand(), a).cycles, 4501u);
  // Rows of 2 (each share is exactly one row) and rows of 12 (one row) cost as one run.
  a.width = 2;
  EXPECT_EQ(amp_convnx1(gc200_by_hand(), a).cycles, 3475u);
  a.width = 12;
  EXPECT_EQ(amp_convnx1(gc200_by_hand(), a).cycles, 3475u);
  // Rows of 3: the shares [2,4) and [8,10) each span two rows, so those workers pay two
  // entries of n = 1: 18 + 46 = 64 worker cycles against 18 + 27 = 45 for the others; per
  // kernel position max(6*64, 6*45 + 9) = 384 (105 more than 279): 3475 + 9*105 = 4420.
  a.width = 3;
  EXPECT_EQ(amp_convnx1(gc200_by_hand(), a).cycles, 4420u);
  // The parameter reaches the cost from a trace vertex too.
  a.width = 1;
  EXPECT_EQ(vertex_cost(gc200_by_hand(), amp_vertex(Codelet::kAmpConvNx1, a)).cycles, 4501u);
}

TEST(CodeletAmpNx1, HandComputedFloat1x2TwoGroups) {
  // float->float: 30 positions -> 5 per worker. f(5) = 45 + 8*2 = 61.
  // worker = 17 + 0 + 3 + 61 - 9 = 72; per kernel position = max(432, 441) = 441.
  // L = 16*8*4/16 = 32. inner = 1*14 + 2*(12 + (32 + 15 + 3 + 441)) = 14 + 2*503 = 1020.
  // IG = 16/8 = 2, OG = 32/16 = 2, CG = 2.
  // setup = 109 + 6*9 + 6*9 + 2*(17*2 + 6*1 + 1) + 6*1 + 1 = 109 + 54 + 54 + 82 + 7 = 306.
  // loops = 2*(16 + 2*(14 + 2*(14 + 1020))) = 2*(16 + 2*2082) = 2*4180 = 8360.
  // zeroing: 30 x 16 / 6 = 80 floats a worker, 40 vectors of 2 + 5 = 45: 6*2*2*45 = 1080.
  // cycles = 306 + 8360 + 1080 = 9746;  flops = 2*30*16*32*2*1*2 = 122880.
  const auto c =
      amp_convnx1(gc200_by_hand(), conv(DType::kFloat, DType::kFloat, 30, 16, 32, 2, 1, 2));
  EXPECT_EQ(c.cycles, 9746u);
  EXPECT_EQ(c.flops, 122880u);
}

TEST(CodeletAmpNx1, WeightHeightFourFillsTheEnginesWithThreeChannelsOfFourRows) {
  // A 7x7 conv of 3 input channels (an image stem), 12 positions, 16 output channels, as
  // HandComputedHalfHalf3x3 otherwise: worker = 45, per kernel position = 279.
  // Height 1: IG = ceil(3/16) = 1, 7 row passes of 7 columns, L = 32, h_cost = 15:
  //   per kx = 12 + (32 + 15 + 3 + 279) = 341; inner = 7*14 + 49*341 = 16807;
  //   loops = 16 + 14 + 14 + 16807 = 16851; setup = 242; zeroing 78 (as HandComputedHalfHalf3x3:
  //   the same positions and engines); cycles = 17171.
  // Height 4 (poplin's convUnitWeightHeight with inChansPerGroup 4): IG = ceil(3/4) = 1,
  //   ceil(7/4) = 2 row passes, 64-bit weight loads (L = 512 B / 8 = 64), h_cost = 60:
  //   per kx = 12 + (64 + 60 + 3 + 279) = 418; inner = 2*14 + 14*418 = 5880;
  //   loops = 16 + 14 + 14 + 5880 = 5924; cycles = 242 + 5924 + 78 = 6244.
  // The FLOPs are the conv's own: 2*12*3*16*7*7 = 56448 either way.
  auto a = conv(DType::kHalf, DType::kHalf, 12, 3, 16, 1, 7, 7);
  const auto one = amp_convnx1(gc200_by_hand(), a);
  EXPECT_EQ(one.cycles, 17171u);
  a.weight_height = 4;
  const auto four = amp_convnx1(gc200_by_hand(), a);
  EXPECT_EQ(four.cycles, 6244u);
  EXPECT_EQ(one.flops, 56448u);
  EXPECT_EQ(four.flops, 56448u);
  // The parameter reaches the cost from a trace vertex (0, its default, is height 1).
  a.weight_height = 1;
  trace::Vertex v = amp_vertex(Codelet::kAmpConvNx1, a);
  EXPECT_EQ(v.params[trace::slot::kAmpNx1WeightHeight], 0);
  EXPECT_EQ(vertex_cost(gc200_by_hand(), v).cycles, 17171u);
  v.params[trace::slot::kAmpNx1WeightHeight] = 4;
  EXPECT_EQ(vertex_cost(gc200_by_hand(), v).cycles, 6244u);
}

TEST(CodeletAmpNx1, WeightHeightTwoTakesEightChannelsOfTwoRows) {
  // 6 input channels, 3x3, otherwise as HandComputedHalfHalf3x3; height 2: IG = ceil(6/8) = 1,
  // ceil(3/2) = 2 row passes of 3 columns, L = 32 (height 2 keeps 128-bit loads), h_cost = 46:
  // per kx = 12 + (32 + 46 + 3 + 279) = 372; inner = 2*14 + 6*372 = 2260;
  // loops = 16 + 14 + 14 + 2260 = 2304; cycles = 242 + 2304 + 78 (zeroing) = 2624;
  // flops = 2*12*6*16*9.
  auto a = conv(DType::kHalf, DType::kHalf, 12, 6, 16, 1, 3, 3);
  a.weight_height = 2;
  const auto c = amp_convnx1(gc200_by_hand(), a);
  EXPECT_EQ(c.cycles, 2624u);
  EXPECT_EQ(c.flops, 20736u);
  a.weight_height = 3;
  EXPECT_THROW(amp_convnx1(gc200_by_hand(), a), ModelError);
}

TEST(CodeletAmpNx1, HalfNeverExceedsPeak) {
  const ChipSpec chip = gc200_by_hand();
  const auto a = conv(DType::kHalf, DType::kHalf, 6000, 64, 64, 1, 3, 3);
  const double rate = macs_per_cycle(amp_convnx1(chip, a));
  EXPECT_LE(rate, 64.0);
  EXPECT_GT(rate, 0.9 * 64.0);
}

// ---- dot ----------------------------------------------------------------------------------------

TEST(CodeletDot, HandComputedHalf) {
  // half: vw = 8 B / 2 B = 4; 64 elements -> 16 vectors; per dot = 6 + 16 = 22.
  // 12 dots over 6 workers -> 2 each: worker = 16 + 19 + 2*(7 + 22) = 93.
  // cycles = 65 + 6*93 = 623;  flops = 2*64*12 = 1536.
  const auto c = dot(gc200_by_hand(), DType::kHalf, DType::kFloat, 64, 12);
  EXPECT_EQ(c.cycles, 623u);
  EXPECT_EQ(c.flops, 1536u);
}

TEST(CodeletDot, HandComputedFloatOneWorkerBusy) {
  // float: vw = 2; 10 elements -> 5 vectors; per dot = 4 + 5 = 9.
  // 1 dot: slowest worker = 16 + 19 + 1*(7 + 9) = 51; idle workers still cost their slot.
  // cycles = 58 + 6*51 = 364;  flops = 2*10*1 = 20.
  const auto c = dot(gc200_by_hand(), DType::kFloat, DType::kFloat, 10, 1);
  EXPECT_EQ(c.cycles, 364u);
  EXPECT_EQ(c.flops, 20u);
}

TEST(CodeletDot, WiderDatapathIsFaster) {
  ChipSpec wide = gc200_by_hand();
  wide.datapath_width = Bytes{16};
  EXPECT_LT(dot(wide, DType::kHalf, DType::kHalf, 1024, 60).cycles,
            dot(gc200_by_hand(), DType::kHalf, DType::kHalf, 1024, 60).cycles);
  EXPECT_THROW(dot(gc200_by_hand(), DType::kFloat, DType::kHalf, 8, 8), ModelError);
}

// ---- reduce -------------------------------------------------------------------------------------

TEST(CodeletReduce, HandComputedFloatAdd) {
  // float: accumulator 16 B = 4 floats; 48 outputs -> 12 loops -> 2 per worker.
  // loads per partial = 16 B / 8 B/cycle = 2; per loop = 2*5 + 7 = 17.
  // cycles = 33 + 6*(20 + 17*2) = 357;  flops = 48*(5-1) = 192.
  const auto c = reduce(gc200_by_hand(), Op::kAdd, DType::kFloat, DType::kFloat, 48, 5);
  EXPECT_EQ(c.cycles, 357u);
  EXPECT_EQ(c.flops, 192u);
}

TEST(CodeletReduce, HandComputedHalfToFloat) {
  // half: accumulator 8 halves; 20 outputs -> 3 loops -> 1 per worker.
  // per loop = 2*3 + 10 (output conversion) = 16;  cycles = 33 + 6*(20 + 16) = 249.
  // flops = 20*(3-1) = 40.
  const auto c = reduce(gc200_by_hand(), Op::kAdd, DType::kHalf, DType::kFloat, 20, 3);
  EXPECT_EQ(c.cycles, 249u);
  EXPECT_EQ(c.flops, 40u);
}

TEST(CodeletReduce, MoreInputsCostMore) {
  const ChipSpec chip = gc200_by_hand();
  std::uint64_t previous = 0;
  for (std::uint64_t inputs : {1u, 2u, 8u, 32u, 128u}) {
    const auto c = reduce(chip, Op::kAdd, DType::kFloat, DType::kFloat, 1024, inputs);
    EXPECT_GT(c.cycles, previous) << "inputs=" << inputs;
    previous = c.cycles;
  }
}

TEST(CodeletReduce, MaxCostsNoMoreThanAdd) {
  const ChipSpec chip = gc200_by_hand();
  EXPECT_LE(reduce(chip, Op::kMax, DType::kHalf, DType::kHalf, 500, 16).cycles,
            reduce(chip, Op::kAdd, DType::kHalf, DType::kHalf, 500, 16).cycles);
  EXPECT_THROW(reduce(chip, Op::kExp, DType::kHalf, DType::kHalf, 500, 16), ModelError);
}

TEST(CodeletReduce, FasterLoadsAreFaster) {
  ChipSpec fast = gc200_by_hand();
  fast.memory.load_bytes_per_cycle = BytesPerCycle{16};
  EXPECT_LT(reduce(fast, Op::kAdd, DType::kFloat, DType::kFloat, 1024, 16).cycles,
            reduce(gc200_by_hand(), Op::kAdd, DType::kFloat, DType::kFloat, 1024, 16).cycles);
}

TEST(CodeletReduce, OneOutputIsSplitOverTheWorkersAsPopopsDoes) {
  // 1000 halves to one float, add (popops ReductionConnection.cpp and
  // getCyclesEstimateForSingleInput). Split: rough = ceil(1000 / 8) = 125 cycles, one stage
  // 30 + 125 = 155, at most min(1000/2, 155/4) = 38 pieces; 2 pieces 60 + 62 = 122, 3: 101,
  // 4: 91, 5: 85, 6: 80 (each less): 6 pieces. Rows in grains of 4: 4 * (1000 / 24) = 164
  // each, the 1000 % 24 = 16 left over as +4 on the first 4: 168, 168, 168, 168, 164, 164.
  // A worker over 168 halves: 8 per loop of 2 loads, 17 + 2*168/8 + 168 % 8 = 59 cycles; over
  // 164, 17 + 41 + 4 = 62 (its remainder of 4 one a cycle): the slowest.
  // Second stage, 6 floats on one worker: 4 per loop of 2 loads, 17 + 2*6/4 + 6 % 4 = 22.
  // cycles = 6*62 + 6*22 = 504 (the barrel: a stage holds the tile 6 x its slowest worker);
  // flops = 999.
  const auto c = reduce(gc200_by_hand(), Op::kAdd, DType::kHalf, DType::kFloat, 1, 1000);
  EXPECT_EQ(c.cycles, 504u);
  EXPECT_EQ(c.flops, 999u);
  // Three halves: one piece (at most min(1, 31/4) pieces), one stage:
  // 6 * (17 + 2*3/8 + 3) = 120.
  EXPECT_EQ(reduce(gc200_by_hand(), Op::kAdd, DType::kHalf, DType::kFloat, 1, 3).cycles, 120u);
  // A half output converts: + 5 a worker.
  EXPECT_EQ(reduce(gc200_by_hand(), Op::kAdd, DType::kHalf, DType::kHalf, 1, 3).cycles, 150u);
  // The pieces of the split (shared with the instruction-level tile model).
  EXPECT_EQ(tile::scalar_reduce_pieces(1000, 6, 8, 4),
            (std::vector<std::uint64_t>{168, 168, 168, 168, 164, 164}));
  EXPECT_EQ(tile::scalar_reduce_pieces(3, 6, 8, 4), (std::vector<std::uint64_t>{3}));
  EXPECT_EQ(scalar_reduce_split(gc200_by_hand(), Op::kAdd, DType::kHalf, 1000), 6u);
  // popops runs the second stage in a compute set of its own: a vertex marked as the first
  // stage costs 6 * 62 = 372, and the second stage is a reduce of the 6 floats, 6 * 22 = 132.
  EXPECT_EQ(reduce(gc200_by_hand(), Op::kAdd, DType::kHalf, DType::kFloat, 1, 1000,
                   trace::ReduceLayout::kPartialSums, /*first_stage=*/true)
                .cycles,
            372u);
  EXPECT_EQ(reduce(gc200_by_hand(), Op::kAdd, DType::kFloat, DType::kFloat, 1, 6).cycles, 132u);
}

// The reduce kernel and the compiler split a reduction to one value as popops does
// (ReductionConnection.cpp, connectTwoStageReductions): the first stage's vertex, a sync, and
// the "Reduce_Second_Stage" compute set reducing the 6 pieces' results (in the output type).
// 1,000 halves to one half: stage 1 6 * 67 (the 164-half pieces: 17 + 41 + 4 + 5 to convert),
// stage 2 6 * (17 + 2 * 6 / 8 + 6 + 5) = 6 * 29; each compute set + 12, the sync 90:
// 414 + 90 + 186 = 690 cycles (one vertex was 12 + 402 + 174 = 588).
TEST(CodeletReduce, AReductionToOneValueRunsItsSecondStageInAComputeSetOfItsOwn) {
  const ChipSpec chip = gc200_by_hand();
  const trace::Trace t = kernels::reduce(chip, 1, 1000, DType::kHalf);
  const auto& prog = t.ipus[0];
  ASSERT_EQ(prog.compute_sets.size(), 2u);
  ASSERT_EQ(prog.steps.size(), 3u);
  EXPECT_EQ(prog.steps[1].kind, trace::StepKind::kSync);
  namespace sl = trace::slot;
  const trace::Vertex& first = prog.compute_sets[0].vertices.at(0);
  const trace::Vertex& second = prog.compute_sets[1].vertices.at(0);
  EXPECT_EQ(first.params[sl::kReduceFirstStage], 1);
  EXPECT_EQ(second.params[sl::kReduceInputs], 6);
  EXPECT_EQ(second.params[sl::kReduceOutputs], 1);
  EXPECT_EQ(second.params[sl::kReduceFirstStage], 0);
  EXPECT_EQ(vertex_cost(chip, first).cycles, 6u * 67);
  EXPECT_EQ(vertex_cost(chip, second).cycles, 6u * 29);
  // A reduction the workers do not split (3 halves: one piece) stays one compute set.
  EXPECT_EQ(kernels::reduce(chip, 1, 3, DType::kHalf).ipus[0].compute_sets.size(), 1u);
}

TEST(CodeletReduce, StridedAndContinuousAsPopopsEstimatesThem) {
  using trace::ReduceLayout;
  const ChipSpec chip = gc200_by_hand();
  // Strided (getCyclesEstimateForStridedReduce), 240 outputs of 64 halves to float: a worker's
  // share ceil(240 / 6) = 40 outputs (whole vectors of 4); per vector 3 + (1 + 6) + 3 + 63 = 76;
  // worker 16 + 10 * 76 = 776; cycles 6 * 776 = 4656.
  EXPECT_EQ(
      reduce(chip, Op::kAdd, DType::kHalf, DType::kFloat, 240, 64, ReduceLayout::kStrided).cycles,
      4656u);
  // Float, 2400 outputs of 4: 400 a worker in vectors of 2 (200 loops of 3 + (3 + 2) + 3 + 3 =
  // 14): 16 + 2800 = 2816; cycles 16896.
  EXPECT_EQ(
      reduce(chip, Op::kAdd, DType::kFloat, DType::kFloat, 2400, 4, ReduceLayout::kStrided).cycles,
      16896u);
  // Continuous (getCycleEstimateReduceAllRegionsContinuous), 16 outputs of 512 halves: 3 a
  // worker, 4 halves a cycle: 3 * 128 + 12 * 3 + 10 + 7 = 437; cycles 6 * 437 = 2622.
  EXPECT_EQ(reduce(chip, Op::kAdd, DType::kHalf, DType::kFloat, 16, 512, ReduceLayout::kContinuous)
                .cycles,
            2622u);
  // 511 partials: 511 / 4 = 127 whole vectors, and an odd count costs 2 more a worker:
  // 3 * 127 + 2 + 36 + 17 = 436; cycles 6 * 436 = 2616.
  EXPECT_EQ(reduce(chip, Op::kAdd, DType::kHalf, DType::kFloat, 16, 511, ReduceLayout::kContinuous)
                .cycles,
            2616u);
  // The conv's partial sums (the default) keep poplin's ReduceAdd loop (HandComputedHalfToFloat).
  EXPECT_EQ(reduce(chip, Op::kAdd, DType::kHalf, DType::kFloat, 20, 3).cycles, 249u);
}

// ---- unary / binary ---------------------------------------------------------------------------

TEST(CodeletUnary, HandComputedReluHalf) {
  // 240 -> 40 per worker -> ceil(40/4) = 10 vectors; c = 2.
  // cycles = 11 + 9 + 6*(17 + 10*(2 + 4)) = 20 + 6*77 = 482;  flops = 240.
  const auto c = unary(gc200_by_hand(), Op::kRelu, DType::kHalf, 240);
  EXPECT_EQ(c.cycles, 482u);
  EXPECT_EQ(c.flops, 240u);
}

TEST(CodeletUnary, HandComputedExpFloat) {
  // 100 -> ceil(100/6) = 17 per worker -> ceil(17/2) = 9 vectors; c = 6; EXP base 33.
  // cycles = 20 + 6*(33 + 9*(6 + 4)) = 20 + 6*123 = 758.
  EXPECT_EQ(unary(gc200_by_hand(), Op::kExp, DType::kFloat, 100).cycles, 758u);
}

TEST(CodeletUnary, IdleWorkersStillCostTheirSlot) {
  // 4 halves (one worker busy) cost the same as 24 (every worker with one vector).
  const ChipSpec chip = gc200_by_hand();
  EXPECT_EQ(unary(chip, Op::kRelu, DType::kHalf, 4).cycles,
            unary(chip, Op::kRelu, DType::kHalf, 24).cycles);
  EXPECT_LT(unary(chip, Op::kRelu, DType::kHalf, 24).cycles,
            unary(chip, Op::kRelu, DType::kHalf, 25).cycles);
}

TEST(CodeletUnary, WiderDatapathSpeedsUp) {
  ChipSpec wide = gc200_by_hand();
  wide.datapath_width = Bytes{16};
  // 8 B: 800/worker -> 200 vectors -> 20 + 6*(17 + 1200) = 7322.
  // 16 B: 100 vectors -> 20 + 6*(17 + 600) = 3722.
  EXPECT_EQ(unary(gc200_by_hand(), Op::kRelu, DType::kHalf, 4800).cycles, 7322u);
  EXPECT_EQ(unary(wide, Op::kRelu, DType::kHalf, 4800).cycles, 3722u);
}

TEST(CodeletUnary, RejectsBinaryOp) {
  EXPECT_THROW(unary(gc200_by_hand(), Op::kAdd, DType::kHalf, 8), ModelError);
}

TEST(CodeletBinary, HandComputedAddHalf) {
  // 1000 -> 167 per worker -> 42 vectors; c = 1, assembly (+2).
  // cycles = 11 + 6*(26 + 42*3) = 11 + 6*152 = 923;  flops = 1000.
  const auto c = binary(gc200_by_hand(), Op::kAdd, DType::kHalf, 1000);
  EXPECT_EQ(c.cycles, 923u);
  EXPECT_EQ(c.flops, 1000u);
}

TEST(CodeletBinary, HandComputedDivFloat) {
  // 12 -> 2 per worker -> 1 vector; c = 10, C++ (+5).  cycles = 11 + 6*(29 + 15) = 275.
  EXPECT_EQ(binary(gc200_by_hand(), Op::kDiv, DType::kFloat, 12).cycles, 275u);
}

TEST(CodeletBinary, RejectsUnaryOp) {
  EXPECT_THROW(binary(gc200_by_hand(), Op::kRelu, DType::kHalf, 8), ModelError);
}

// ---- scaled_add / cast / copy / dynamic_slice
// ----------------------------------------------------

TEST(CodeletScaledAdd, HandComputedHalf) {
  // vw = 4: 25 vectors, no remainder -> 5 for the slowest worker.
  // per vector = 2*8 B / 8 B/cycle + 1 store = 3. worker = 15 + (6 + 3*4) + 4 = 37.
  // supervisor = 21 + 11 + 7 + 12 + 6 = 57.  cycles = 57 + 6*37 = 279;  flops = 200.
  const auto c = scaled_add(gc200_by_hand(), DType::kHalf, 100);
  EXPECT_EQ(c.cycles, 279u);
  EXPECT_EQ(c.flops, 200u);
}

TEST(CodeletScaledAdd, HandComputedFloatWithTail) {
  // vw = 2: 3 vectors + 1 tail element -> slowest worker 1 vector + the tail.
  // worker = 15 + (6 + 0) + 4 + 7*1 = 32. supervisor = 21 + 11 + 13 + 12 + 6 = 63.
  // cycles = 63 + 6*32 = 255.
  EXPECT_EQ(scaled_add(gc200_by_hand(), DType::kFloat, 7).cycles, 255u);
}

TEST(CodeletCast, HandComputedFloatToHalf) {
  // 600 -> 100 per worker. load 8 B = 2 floats, store 8 B = 4 halves: op width = min(2*2, 4)
  // = 4, cycles/vector = max(4/2, 4/4) = 2. worker = 19 + 2*25 + 2 remainder checks = 71.
  // cycles = 19 + 6*(23 + 71) = 583;  flops = 600.
  const auto c = cast(gc200_by_hand(), DType::kFloat, DType::kHalf, 600);
  EXPECT_EQ(c.cycles, 583u);
  EXPECT_EQ(c.flops, 600u);
}

TEST(CodeletCast, HandComputedHalfToFloatWithRemainder) {
  // 30 -> 5 per worker. load 4 halves, store 2 floats: op width = min(8, 2) = 2, 1 cycle per
  // vector. worker = 19 + 1*2 + (1 check + 2 for the odd element) = 24.
  // cycles = 19 + 6*(23 + 24) = 301.
  EXPECT_EQ(cast(gc200_by_hand(), DType::kHalf, DType::kFloat, 30).cycles, 301u);
}

TEST(CodeletCopy, HandComputed) {
  // 288 fixed + ceil(1000 / 8) = 288 + 125 = 413; no flops.
  const auto c = copy(gc200_by_hand(), 1000);
  EXPECT_EQ(c.cycles, 413u);
  EXPECT_EQ(c.flops, 0u);
}

TEST(CodeletCopy, FollowsMemcpyRate) {
  ChipSpec fast = gc200_by_hand();
  fast.memory.memcpy_bytes_per_cycle = BytesPerCycle{16};
  // 288 + 80000/16 = 5288 vs 288 + 80000/8 = 10288.
  EXPECT_EQ(copy(fast, 80000).cycles, 5288u);
  EXPECT_EQ(copy(gc200_by_hand(), 80000).cycles, 10288u);
}

TEST(CodeletDynamicSlice, HandComputedHalf) {
  // 240 elements -> 40 per worker -> 10 vectors; 3 copies.
  // worker = 39 + (24 + 2*10)*3 = 171;  cycles = 25 + 6*171 = 1051.
  const auto c = dynamic_slice(gc200_by_hand(), DType::kHalf, 240, 3);
  EXPECT_EQ(c.cycles, 1051u);
  EXPECT_EQ(c.flops, 0u);
}

TEST(CodeletWorkers, FewerWorkerContextsChangeTiming) {
  // W = 4: 40 positions -> 10 per worker, zeroing pass only: worker = 37 + 28 - 7 = 58;
  // inner = 4*58 + 14 = 246. IG = OG = 1, L = 32: per CG = 13 + (11 + (18 + 7 + 32 + 246)) =
  // 327; retention 4*7 = 28; cycles = 50 + 28 + 327 = 405.
  ChipSpec chip = gc200_by_hand();
  chip.worker_contexts = 4;
  EXPECT_EQ(amp_conv1x1(chip, conv(DType::kHalf, DType::kHalf, 40, 16, 16)).cycles, 405u);
  chip.worker_contexts = 0;
  EXPECT_THROW(unary(chip, Op::kRelu, DType::kHalf, 8), ModelError);
}

// ---- vertex_cost dispatch -----------------------------------------------------------------------

trace::Vertex vertex(Codelet c, std::initializer_list<std::int64_t> params) {
  trace::Vertex v;
  v.codelet = c;
  std::size_t i = 0;
  for (auto p : params) v.params[i++] = p;
  return v;
}

constexpr std::int64_t kHalf = static_cast<std::int64_t>(DType::kHalf);
constexpr std::int64_t kFloat = static_cast<std::int64_t>(DType::kFloat);

TEST(CodeletVertexCost, DispatchesEveryCodeletWithSlotOrder) {
  const ChipSpec chip = gc200_by_hand();
  // Same hand-computed values as the per-model tests above.
  EXPECT_EQ(vertex_cost(chip, vertex(Codelet::kAmpConv1x1, {kHalf, kHalf, 60, 32, 32, 1})).cycles,
            1837u);
  EXPECT_EQ(
      vertex_cost(chip, vertex(Codelet::kAmpConvNx1, {kHalf, kHalf, 12, 16, 16, 1, 3, 3})).cycles,
      3475u);
  EXPECT_EQ(vertex_cost(chip, vertex(Codelet::kDot, {kHalf, kFloat, 64, 12})).cycles, 623u);
  EXPECT_EQ(vertex_cost(chip, vertex(Codelet::kReduce,
                                     {static_cast<std::int64_t>(Op::kAdd), kFloat, kFloat, 48, 5}))
                .cycles,
            357u);
  EXPECT_EQ(
      vertex_cost(chip, vertex(Codelet::kUnary, {static_cast<std::int64_t>(Op::kRelu), kHalf, 240}))
          .cycles,
      482u);
  EXPECT_EQ(vertex_cost(
                chip, vertex(Codelet::kBinary, {static_cast<std::int64_t>(Op::kAdd), kHalf, 1000}))
                .cycles,
            923u);
  EXPECT_EQ(vertex_cost(chip, vertex(Codelet::kScaledAdd, {kHalf, 100})).cycles, 279u);
  EXPECT_EQ(vertex_cost(chip, vertex(Codelet::kCast, {kFloat, kHalf, 600})).cycles, 583u);
  EXPECT_EQ(vertex_cost(chip, vertex(Codelet::kCopy, {1000})).cycles, 413u);
  EXPECT_EQ(vertex_cost(chip, vertex(Codelet::kDynamicSlice, {kHalf, 240, 3})).cycles, 1051u);
  EXPECT_EQ(vertex_cost(chip, vertex(Codelet::kMap, {kHalf, 1200, 6, 5})).cycles, 3467u);
  EXPECT_EQ(vertex_cost(chip, vertex(Codelet::kTranspose, {kFloat, 100})).cycles, 388u);
}

// ---- map (fused elementwise) and transpose
TEST(CodeletModels, MapIsOneBinaryOp1DShapedLoopOverTheFusedOps) {
  const ChipSpec chip = gc200_by_hand();
  // half, n = 1200: ceil(1200 / 6) = 200 elements per worker = 50 vectors of 4; worker =
  // 26 + 50 x (6 + 5) = 576; vertex = 11 + 6 x 576 = 3467; 5 ops x 1200 = 6000 FLOPs.
  const auto h = map(chip, DType::kHalf, 1200, 6, 5);
  EXPECT_EQ(h.cycles, 3467u);
  EXPECT_EQ(h.flops, 6000u);
  // float: 200 per worker = 100 vectors of 2; worker = 29 + 100 x 11 = 1129; 11 + 6774.
  EXPECT_EQ(map(chip, DType::kFloat, 1200, 6, 5).cycles, 6785u);
  // Fusing pays the overheads once: relu after add as one map beats two separate vertices.
  const Op add = Op::kAdd, relu = Op::kRelu;
  const std::uint64_t fused =
      map(chip, DType::kHalf, 1200,
          op_vector_cycles(add, DType::kHalf) + op_vector_cycles(relu, DType::kHalf), 2)
          .cycles;
  EXPECT_LT(fused, binary(chip, add, DType::kHalf, 1200).cycles +
                       unary(chip, relu, DType::kHalf, 1200).cycles);
}

TEST(CodeletModels, TransposeMovesOneElementPerCycle) {
  const ChipSpec chip = gc200_by_hand();
  // min(8 B/cycle memcpy, element size) bytes per cycle: 2 B for half, 4 B for float; + 288.
  EXPECT_EQ(transpose(chip, DType::kHalf, 1000).cycles, 1288u);
  EXPECT_EQ(transpose(chip, DType::kFloat, 100).cycles, 388u);
  EXPECT_EQ(transpose(chip, DType::kHalf, 0).cycles, 288u);
  EXPECT_EQ(transpose(chip, DType::kHalf, 1000).flops, 0u);
}

TEST(CodeletModels, TransposeTakesPoplinsEmpiricalFactor) {
  const ChipSpec chip = gc200_by_hand();
  // 2,000 B at 2 B/cycle x 5/4 = 1,250 cycles, + 288; x 5/3 = 1,666.7 -> 1,667, + 288.
  EXPECT_EQ(transpose(chip, DType::kHalf, 1000, 1).cycles, 1538u);
  EXPECT_EQ(transpose(chip, DType::kHalf, 1000, 2).cycles, 1955u);
  // The factor is 5/4 where in x out channels are a multiple of the vector width (4 half,
  // 2 float), else 5/3: 3 x 64 = 192 and 2 x 3 = 6 are (half, float); 3 x 5 = 15 is not.
  EXPECT_EQ(transpose_factor(chip, DType::kHalf, 3 * 64), 1u);
  EXPECT_EQ(transpose_factor(chip, DType::kHalf, 3 * 5), 2u);
  EXPECT_EQ(transpose_factor(chip, DType::kFloat, 2 * 3), 1u);
  EXPECT_EQ(vertex_cost(chip, vertex(Codelet::kTranspose, {kHalf, 1000, 1})).cycles, 1538u);
}

TEST(CodeletModels, BroadcastBinaryFollowsPopopsBroadcastVectorInnerEstimate) {
  const ChipSpec chip = gc200_by_hand();
  const Op mul = Op::kMul, add = Op::kAdd;
  // half, n = 2,720 = 170 blocks of B = 16: the slowest worker holds m = ceil(170 / 6) = 29.
  // MUL out of place, pipelined: core 9 + 3 + (16/4)(9 + 29) + 1 = 165; 13 supervisor +
  // 6 x 24 + 6 x (19 + 165) + 2 x 6 = 1,273.
  EXPECT_EQ(broadcast_binary(chip, mul, DType::kHalf, 2720, 16, false).cycles, 1273u);
  // MUL in place: core 5 + 3 + 4 (7 + 2 x 29) + 1 = 269; 13 + 144 + 6 x 288 + 4 x 6 = 1,909.
  EXPECT_EQ(broadcast_binary(chip, mul, DType::kHalf, 2720, 16, true).cycles, 1909u);
  // ADD in place, 8 channels at a time: core 5 + 2 + 4 + 2 (8 + 2 x 28 + 7) + 1 = 154;
  // 13 + 6 x 173 + 2 x 6 = 1,063; out of place 4 x 6 instead: 1,075.
  EXPECT_EQ(broadcast_binary(chip, add, DType::kHalf, 2720, 16, true).cycles, 1063u);
  EXPECT_EQ(broadcast_binary(chip, add, DType::kHalf, 2720, 16, false).cycles, 1075u);
  // B = 64, n = 2,688 (42 blocks, m = 7): MUL 9 + 3 + 16 (9 + 7) + 1 = 269 -> 1,897; ADD in
  // place 5 + 7 + 8 (8 + 12 + 7) = 228 -> 13 + 6 x 247 + 12 = 1,507.
  EXPECT_EQ(broadcast_binary(chip, mul, DType::kHalf, 2688, 64, false).cycles, 1897u);
  EXPECT_EQ(broadcast_binary(chip, add, DType::kHalf, 2688, 64, true).cycles, 1507u);
  // The vector in registers makes it cheaper than a BinaryOp1D over the same elements:
  // 11 + 6 x (26 + 114 x 3) = 2,219.
  EXPECT_EQ(binary(chip, mul, DType::kHalf, 2720).cycles, 2219u);
  EXPECT_EQ(broadcast_binary(chip, mul, DType::kHalf, 2720, 16, false).flops, 2720u);
  EXPECT_EQ(vertex_cost(chip, vertex(Codelet::kBroadcastBinary,
                                     {static_cast<std::int64_t>(mul), kHalf, 2720, 16, 0}))
                .cycles,
            1273u);
  EXPECT_THROW(broadcast_binary(chip, Op::kDiv, DType::kHalf, 2720, 16, false), ModelError);
}

// ---- amp_slic (poplibs PerformanceEstimation.hpp, the SLIC estimators; docs/codelets.md) ----

SlicArgs slic(DType partials, std::uint64_t positions, std::uint64_t width, std::uint64_t groups,
              std::uint64_t chans, std::uint64_t group_groups, std::uint64_t kh, std::uint64_t kw,
              std::uint64_t stride, std::uint64_t chains) {
  SlicArgs a;
  a.partials = partials;
  a.positions = positions;
  a.width = width;
  a.groups_per_group = groups;
  a.chans = chans;
  a.group_groups = group_groups;
  a.kernel_h = kh;
  a.kernel_w = kw;
  a.stride = stride;
  a.chains = chains;
  return a;
}

// A first-layer tile: 4 channels, half partials on 4 chains (one input pass), a 7x7 kernel
// (ceil(7 / 4) x 7 = 14 sub-kernels) at stride 2, two output rows of 112.
//  - workers of 37, 37, 38, 37, 37, 38 positions, each within one row. A row of n >= 3 at
//    stride 2 costs 15 + 2 (n - 3): 83 or 85. Worker preamble 2 + 3 + 1 + 2 + 4 + 2 + 2 + 1 =
//    17, 10 an entry (11 zeroing): 17 + 10 + 85 = 112, zeroing 113; inner loops 6 x 112 = 672
//    and 6 x 113 = 678;
//  - weights (4 channels): 6 + 6 + 6 + 16 = 34; a sub-kernel 34 + 3 + 2 + 1 + 6 + 1 + 6 + 1 =
//    54, the loop 54 x 14 + 6 x 13 + 1 = 835; the conv-group loop 15 + 1 = 16;
//  - 28 + 16 + 835 + 678 + 13 x 672 = 10,293.
TEST(CodeletSlic, FirstLayerTileAtStride2ByHand) {
  const ChipSpec chip = gc200_by_hand();
  const VertexCost c = amp_slic(chip, slic(DType::kHalf, 224, 112, 1, 4, 1, 7, 7, 2, 4));
  EXPECT_EQ(c.cycles, 10293u);
  EXPECT_EQ(c.flops, 2u * 224 * 4 * 4 * 7 * 7);
  // Through a trace vertex: in, partials, positions, width, groups, chans, group_groups,
  // kernel_h, kernel_w, stride, chains.
  EXPECT_EQ(
      vertex_cost(chip, vertex(Codelet::kAmpSlic, {kHalf, kHalf, 224, 112, 1, 4, 1, 7, 7, 2, 4}))
          .cycles,
      10293u);
}

// Depthwise 3x3 (4 conv groups of one channel, 8 such groups on the tile), float partials (2
// chains, two passes over the input), stride 1, 4 rows of 14:
//  - shares [0,9) [9,18) [18,28) [28,37) [37,46) [46,56): entries 9 | 5, 4 | 10 | 9 | 5, 4 | 10.
//    Rows of n >= 5: 15 + (n - 5); n = 4: n + 17 = 21 without zeroing, 10 + 4 + 3 = 17 with;
//    float partials: each row 1 less, plus 3. Without zeroing the 5 + 4 worker is slowest:
//    17 + (10 + 3 + 2 x 14) + (10 + 3 + 2 x 20) = 111 (the 10s: 17 + 10 + 3 + 2 x 19 = 68);
//    with zeroing 17 + (11 + 3 + 28) + (11 + 3 + 32) = 105 (the 10s: 69). Inner 666 and 630;
//  - weights (1 channel, 4 groups): the workers rearrange them, 10 each: 9 + 6 + 60 + 6 + 16 =
//    97; a sub-kernel 97 + 14 = 111 + 6 = 117, 3 sub-kernels (ceil(3 / 4) x 3): 351 + 13 = 364;
//    8 group groups: 15 x 8 + 6 x 7 + 1 = 163;
//  - 28 + 163 + 364 + 8 x 630 + 8 x 2 x 666 = 16,251.
TEST(CodeletSlic, DepthwiseFloatPartialsCutAtRowEndsByHand) {
  const ChipSpec chip = gc200_by_hand();
  const VertexCost c = amp_slic(chip, slic(DType::kFloat, 56, 14, 4, 1, 8, 3, 3, 1, 2));
  EXPECT_EQ(c.cycles, 16251u);
  EXPECT_EQ(c.flops, 2u * 56 * 4 * 8 * 9);
}

// 16 conv groups of one channel with half partials on 2 chains (poplibs' "half8" path): six
// workers of one position, a 1x4 kernel (one sub-kernel):
//  - a row of n = 1 < 6 costs 7 + 6 = 13 (10 + 3 zeroing), twice (two input passes); preamble
//    17 + 4 (8 or 16 groups), 9 an entry (10 zeroing), 2 for the merge decision: 21 + 9 + 26 +
//    2 = 58, zeroing 59; the zeroing pass merges the outputs: 6 x 59 + 2 + 2 x 6 = 368;
//  - weights: workers 10 + 1 each, 9 + 6 + 66 + 6 + 16 = 103; 4 group strides of 103 + 21 =
//    124: 496 + 6 x 3 + 1 = 515, a sub-kernel 515 + 15 = 530, its loop 531; the group loop
//    12 + 8 + 1 = 21;
//  - 25 + 21 + 531 + 368 = 945 (no pass without zeroing).
TEST(CodeletSlic, SixteenGroupsOnTheHalfPartialsPathByHand) {
  const ChipSpec chip = gc200_by_hand();
  EXPECT_EQ(amp_slic(chip, slic(DType::kHalf, 6, 0, 16, 1, 1, 1, 4, 1, 2)).cycles, 945u);
  // A second sub-kernel (a 1x8 kernel) adds one loop body and the pass without zeroing, which
  // the estimator multiplies by the 4 group strides: 530 + 6 and 4 x 6 x 58 = 1,392.
  EXPECT_EQ(amp_slic(chip, slic(DType::kHalf, 6, 0, 16, 1, 1, 1, 8, 1, 2)).cycles,
            945u + 536 + 1392);
}

TEST(CodeletSlic, RejectsWhatPoplinHasNoVertexFor) {
  const ChipSpec chip = gc200_by_hand();
  // 4 chains need half partials; 8 groups of one channel too; 3 channels is no grouping;
  // stride 3; a float input (through the trace vertex).
  EXPECT_THROW(amp_slic(chip, slic(DType::kFloat, 8, 0, 1, 4, 1, 1, 4, 1, 4)), ModelError);
  EXPECT_THROW(amp_slic(chip, slic(DType::kFloat, 8, 0, 8, 1, 1, 1, 4, 1, 2)), ModelError);
  EXPECT_THROW(amp_slic(chip, slic(DType::kHalf, 8, 0, 1, 3, 1, 1, 4, 1, 2)), ModelError);
  EXPECT_THROW(amp_slic(chip, slic(DType::kHalf, 8, 0, 1, 4, 1, 1, 4, 3, 2)), ModelError);
  EXPECT_THROW(
      vertex_cost(chip, vertex(Codelet::kAmpSlic, {kFloat, kFloat, 8, 0, 1, 4, 1, 1, 4, 1, 2})),
      ModelError);
}

HmacArgs hmac(DType in, DType partials, std::uint64_t positions, std::uint64_t width,
              std::uint64_t in_chans, std::uint64_t out_chans, std::uint64_t groups,
              std::uint64_t kh, std::uint64_t kw) {
  HmacArgs a;
  a.in = in;
  a.partials = partials;
  a.positions = positions;
  a.width = width;
  a.in_chans = in_chans;
  a.out_chans = out_chans;
  a.groups = groups;
  a.kernel_h = kh;
  a.kernel_w = kw;
  return a;
}

// Half -> half, a 1x1 conv of 16 positions (one flattened row), 16 input and 2 output channels
// (one output pair), poplibs' PerformanceEstimation.hpp by hand:
//  - dot product of 16 halves, two outputs at once: (1 + 2) x 2 + 1 + 3 + 1 = 11, 16 / 4 vectors
//    of 64 bits, less 1 for half: 14;
//  - one row split in 6 parts, the slowest worker one part of (16 + 5) / 6 = 3 positions: an
//    entry of 19 + 3 x (7 + 14) = 82; 16 - 6 (retention) + 82 + 16 = 108, x 6 = 648;
//  - supervisor 65 + 6 x 10 + 6 x 6 + (23 + (15 + (10 + 648))) = 857;
//  - zeroing: 16 x 2 / 6 -> 6 partials a worker, 3 float vectors + 5, x 6 = 48;
//  - 857 + 48 = 905.
TEST(CodeletHmac, HalfPartialsOneByOneByHand) {
  const ChipSpec chip = gc200_by_hand();
  const VertexCost c = conv_hmac(chip, hmac(DType::kHalf, DType::kHalf, 16, 0, 16, 2, 1, 1, 1));
  EXPECT_EQ(c.cycles, 905u);
  EXPECT_EQ(c.flops, 2u * 16 * 16 * 2);
  // Through a trace vertex: in, partials, positions, width, in_chans, out_chans, groups,
  // kernel_h, kernel_w.
  EXPECT_EQ(
      vertex_cost(chip, vertex(Codelet::kConvHmac, {kHalf, kHalf, 16, 0, 16, 2, 1, 1, 1})).cycles,
      905u);
}

// Half -> float, 1x1, 10 positions, 6 input and 3 output channels: the 1x1 specialisation
// (half activations, float partials, one row), one output channel a group:
//  - dot of 6 halves: 6 is not a multiple of 4, so 2 at a time, 2 cycles each (under 64 bits),
//    one more to load the weights apart: 3 + 3 + 1 = 7, + 1 + 3 x 2 - 1 = 13;
//  - the slowest worker (10 + 5) / 6 = 2 positions: 13 + 1 + 2 x (2 + 13) = 44; 16 - 15 + 44 +
//    16 = 61, x 6 = 366;
//  - supervisor 65 - 10 + 6 x 9 + 6 x 15 + (23 + (15 + 3 x (10 + 366))) = 1,365; no zeroing.
TEST(CodeletHmac, OneByOneSpecialisationWithFloatPartialsByHand) {
  const ChipSpec chip = gc200_by_hand();
  const VertexCost c = conv_hmac(chip, hmac(DType::kHalf, DType::kFloat, 10, 0, 6, 3, 1, 1, 1));
  EXPECT_EQ(c.cycles, 1365u);
  EXPECT_EQ(c.flops, 2u * 10 * 6 * 3);
}

// Float, a 3x3 kernel over 2 rows of 6 positions, 3 input channels, 1 output, 2 conv groups:
//  - dot of 3 floats: one at a time (3 is odd), 2 cycles each: 3 + 3 + 1 = 7, + 1 + 6 = 14;
//  - 2 rows in 3 parts each, 6 parts: the slowest worker one part of (6 + 2) / 3 = 2 positions,
//    19 + 2 x (7 + 14) = 61 a kernel position; 9 x (16 + 61) + 16 = 709, x 6 = 4,254;
//  - supervisor 58 + 6 x 9 + 2 x (23 + (15 + (10 + 4,254))) = 8,716;
//  - zeroing 12 / 6 = 2 partials a worker, 1 vector + 5, x 6 x 2 groups = 72;
//  - 8,716 + 72 = 8,788.
TEST(CodeletHmac, FloatSpatialKernelByHand) {
  const ChipSpec chip = gc200_by_hand();
  const VertexCost c = conv_hmac(chip, hmac(DType::kFloat, DType::kFloat, 12, 6, 3, 1, 2, 3, 3));
  EXPECT_EQ(c.cycles, 8788u);
  EXPECT_EQ(c.flops, 2u * 12 * 3 * 1 * 2 * 9);
}

TEST(CodeletHmac, RejectsFloatInputWithHalfPartials) {
  const ChipSpec chip = gc200_by_hand();
  EXPECT_THROW(conv_hmac(chip, hmac(DType::kFloat, DType::kHalf, 8, 0, 4, 2, 1, 1, 1)), ModelError);
  EXPECT_THROW(vertex_cost(chip, vertex(Codelet::kConvHmac, {kFloat, kHalf, 8, 0, 4, 2, 1, 1, 1})),
               ModelError);
}

TEST(CodeletVertexCost, RejectsBadSlotValues) {
  const ChipSpec chip = gc200_by_hand();
  EXPECT_THROW(vertex_cost(chip, vertex(Codelet::kCopy, {-1})), ModelError);
  EXPECT_THROW(vertex_cost(chip, vertex(Codelet::kScaledAdd, {7, 100})), ModelError);
  EXPECT_THROW(vertex_cost(chip, vertex(Codelet::kUnary, {99, kHalf, 8})), ModelError);
  EXPECT_THROW(vertex_cost(chip, vertex(Codelet::kAmpConv1x1, {kFloat, kHalf, 60, 16, 16, 1})),
               ModelError);
}

}  // namespace
}  // namespace ipusim::cost
