// SPDX-License-Identifier: Apache-2.0
// The conv/matmul planner (src/plan/, docs/kernels.md): serial splits, conv
// groups and strided 1x1 convs, against sizes worked out by hand from the GC200 rows of
// ipu-hardware.md (624 KiB per tile; the planner keeps 3 KiB stack + 3 x 1 KiB codelet code +
// 4 KiB margin = 10240 B back, so 628736 B per tile are available for the conv's buffers).
#include <gtest/gtest.h>

#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/kernels/kernels.hpp"
#include "ipusim/plan/conv.hpp"
#include "ipusim/plan/prefetch.hpp"
#include "ipusim/util/error.hpp"
#include "test_chips.hpp"

namespace ipusim::plan {
namespace {

using trace::Codelet;
using trace::DType;
using trace::StepKind;
namespace sl = trace::slot;

constexpr std::uint64_t kAvailable = 624 * 1024 - 10240;

ConvArgs matmul_args(std::uint64_t m, std::uint64_t n, std::uint64_t k, std::uint64_t groups = 1) {
  ConvArgs a;
  a.height = m;
  a.out_chans = n;
  a.in_chans = k;
  a.groups = groups;
  return a;
}

// FLOPs of the AMP vertices a program runs, from their parameters (2 per MAC): positions x
// in x out x groups x kernel taps x tiles, times the enclosing repeat counts.
std::uint64_t amp_flops(const trace::IpuProgram& prog, const std::vector<trace::Step>& steps,
                        std::uint64_t times = 1) {
  std::uint64_t flops = 0;
  for (const auto& st : steps) {
    if (st.kind == StepKind::kRepeat) flops += amp_flops(prog, st.body, times * st.count);
    if (st.kind != StepKind::kCompute) continue;
    for (const auto& v : prog.compute_sets[st.index].vertices) {
      if (v.codelet != Codelet::kAmpConv1x1 && v.codelet != Codelet::kAmpConvNx1) continue;
      std::uint64_t taps = 1;
      if (v.codelet == Codelet::kAmpConvNx1)
        taps = static_cast<std::uint64_t>(v.params[sl::kAmpKernelH] * v.params[sl::kAmpKernelW]);
      flops += times * v.tiles.size() * 2 * taps *
               static_cast<std::uint64_t>(v.params[sl::kAmpPositions] * v.params[sl::kAmpInChans] *
                                          v.params[sl::kAmpOutChans] * v.params[sl::kAmpGroups]);
    }
  }
  return flops;
}

std::uint64_t tensor_bytes(const trace::IpuProgram& prog, const std::string& name) {
  for (const auto& t : prog.tensors)
    if (t.name == name) return t.bytes_per_tile;
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

// A square image conv of batch 1: `in` channels of `hw` x `hw` to `out`.
ConvArgs image_conv(std::uint64_t in, std::uint64_t hw, std::uint64_t out, std::uint64_t kernel,
                    std::uint64_t stride = 1) {
  ConvArgs a;
  a.in_chans = in;
  a.height = hw;
  a.width = hw;
  a.out_chans = out;
  a.kernel = kernel;
  a.stride = stride;
  return a;
}

// The first vertex emit_conv writes for plan `p` of `a` (its first compute set's).
trace::Vertex first_vertex(const ChipSpec& chip, const ConvArgs& a, const ConvPlan& p) {
  trace::IpuProgram prog;
  std::vector<trace::Step> steps;
  emit_conv(prog, "", chip, a, p, steps);
  return prog.compute_sets.at(0).vertices.at(0);
}

ChipSpec one_tile_chip(std::uint64_t available) {
  ChipSpec chip = testing::gc200_by_hand();
  chip.tiles = 1;
  chip.tile_memory = Bytes{available + 10240};
  return chip;
}

TEST(Planner, Matmul8192NeedsASerialSplit) {
  // A parallel-only plan gives each tile an a x b x c block (rows x out x in) with
  // abc >= 8192^3 / 1472 = 3.735e8 MACs, and buffers of 2(ac + cb + ab) >= 6 (abc)^(2/3)
  // = 3.1 MB > 628736 B: only a serial split fits.
  const ChipSpec chip = testing::gc200_by_hand();
  const ConvPlan p = plan_conv(chip, matmul_args(8192, 8192, 8192));
  EXPECT_GT(p.serial(), 1u);
  EXPECT_TRUE(p.serial_in == 1 || p.serial_out == 1);
  EXPECT_EQ(8192 % p.serial(), 0u);
  EXPECT_LE(p.bytes_per_tile.count, kAvailable);
  EXPECT_LE(p.tiles_used(), 1472u);
  if (p.serial_in > 1 && p.in_split == 1) {
    // Input, weights, one iteration's outputs and the accumulated outputs, all half.
    const std::uint64_t r = p.rows_per_tile, i = p.in_per_tile, o = p.out_per_tile;
    EXPECT_EQ(p.bytes_per_tile.count, 2 * (r * i + i * o + r * o) + 2 * r * o);
  }
}

TEST(Planner, Matmul8192RunsAsARepeatLoopWithExactFlops) {
  const ChipSpec chip = testing::gc200_by_hand();
  const ConvPlan p = plan_conv(chip, matmul_args(8192, 8192, 8192));
  const trace::Trace t = kernels::matmul(chip, 8192, 8192, 8192, DType::kHalf);
  const auto& prog = t.ipus[0];
  ASSERT_EQ(prog.steps.size(), 1u);
  const trace::Step& loop = prog.steps[0];
  ASSERT_EQ(loop.kind, StepKind::kRepeat);
  EXPECT_EQ(loop.count, p.serial());
  // sync, fetch, conv [, sync, reduce exchange, reduce] [, accumulate]
  ASSERT_GE(loop.body.size(), 3u);
  EXPECT_EQ(loop.body[0].kind, StepKind::kSync);
  EXPECT_EQ(loop.body[1].kind, StepKind::kExchange);
  EXPECT_EQ(loop.body[2].kind, StepKind::kCompute);
  EXPECT_EQ(loop.body.size(), 3u + (p.in_split > 1 ? 3 : 0) + (p.serial_in > 1 ? 1 : 0));
  EXPECT_EQ(amp_flops(prog, prog.steps), std::uint64_t{2} * 8192 * 8192 * 8192);
}

// The planner skips a range of candidates whose smallest blocks' fetch and AMP vertex exceed
// the best plan so far (best_plan's `hopeless`): sound only if the vertex never gets cheaper as
// a block's input or output channels grow with the rest fixed. Checked over both vertices,
// element and partials types, weight heights, worker shares (1-13 positions and a field row
// cut), conv groups, 64- and 128-bit weight loads, 1-72 channels each way.
TEST(Planner, TheAmpVertexNeverGetsCheaperWithMoreChannels) {
  const ChipSpec chip = testing::gc200_by_hand();
  int checked = 0;
  for (const auto& [in, partials] :
       {std::pair{DType::kHalf, DType::kHalf}, std::pair{DType::kHalf, DType::kFloat},
        std::pair{DType::kFloat, DType::kFloat}})
    for (const std::uint64_t kernel : {1U, 3U})
      for (const std::uint64_t height : {1U, 2U, 4U}) {
        if (kernel == 1 && height > 1) continue;
        for (const std::uint64_t positions : {1U, 2U, 3U, 5U, 7U, 13U, 56U})
          for (const std::uint64_t groups : {1U, 2U})
            for (const std::uint64_t bits : {64U, 128U}) {
              cost::AmpConvArgs v;
              v.in = in;
              v.partials = partials;
              v.positions = positions;
              v.groups = groups;
              v.kernel_h = v.kernel_w = kernel;
              v.width = kernel > 1 ? std::min<std::uint64_t>(positions, 7) : 0;
              v.coeff_load_bits = bits;
              v.weight_height = height;
              const auto cycles = [&](std::uint64_t ic, std::uint64_t oc) {
                cost::AmpConvArgs w = v;
                w.in_chans = ic;
                w.out_chans = oc;
                return (kernel > 1 ? cost::amp_convnx1(chip, w) : cost::amp_conv1x1(chip, w))
                    .cycles;
              };
              for (std::uint64_t ic = 1; ic <= 72; ++ic)
                for (std::uint64_t oc = 1; oc <= 72; ++oc) {
                  const std::uint64_t here = cycles(ic, oc);
                  ASSERT_GE(cycles(ic + 1, oc), here) << ic << " x " << oc << ", " << positions;
                  ASSERT_GE(cycles(ic, oc + 1), here) << ic << " x " << oc << ", " << positions;
                  ++checked;
                }
            }
      }
  EXPECT_EQ(checked, 3 * (1 + 3) * 7 * 2 * 2 * 72 * 72);
}

// The HMAC vertex does get cheaper with more input channels where they fill whole vectors (a dot
// product over 4 halves is cheaper than over 2: getDenseDotProductCycles takes narrower vectors
// at 2 cycles each), so the planner bounds a range of blocks by the vertex with the smallest
// block's input channels rounded up to whole vectors (least_vertex_cycles). That bound holds for
// every larger block, and the vertex never gets cheaper with more positions or output channels.
TEST(Planner, TheHmacVertexBoundHoldsForLargerBlocks) {
  const ChipSpec chip = testing::gc200_by_hand();
  int checked = 0;
  for (const auto& [in, partials] :
       {std::pair{DType::kHalf, DType::kHalf}, std::pair{DType::kHalf, DType::kFloat},
        std::pair{DType::kFloat, DType::kFloat}})
    for (const std::uint64_t kernel : {1U, 3U})
      for (const std::uint64_t positions : {1U, 2U, 3U, 5U, 7U, 13U, 56U}) {
        const std::uint64_t vector = in == DType::kHalf ? 4 : 2;
        cost::HmacArgs v;
        v.in = in;
        v.partials = partials;
        v.kernel_h = v.kernel_w = kernel;
        v.width = kernel > 1 ? std::min<std::uint64_t>(positions, 7) : 0;
        const auto cycles = [&](std::uint64_t n, std::uint64_t ic, std::uint64_t oc) {
          cost::HmacArgs w = v;
          w.positions = n;
          w.in_chans = ic;
          w.out_chans = oc;
          return cost::conv_hmac(chip, w).cycles;
        };
        for (std::uint64_t ic = 1; ic <= 40; ++ic)
          for (std::uint64_t oc = 1; oc <= 8; ++oc) {
            const std::uint64_t least = cycles(positions, ceil_div(ic, vector) * vector, oc);
            for (std::uint64_t more = ic; more <= 48; ++more)
              ASSERT_GE(cycles(positions, more, oc), least) << ic << " -> " << more;
            ASSERT_GE(cycles(positions, ic, oc + 1), cycles(positions, ic, oc));
            ASSERT_GE(cycles(positions + 1, ic, oc), cycles(positions, ic, oc));
            ++checked;
          }
      }
  EXPECT_EQ(checked, 3 * 2 * 7 * 40 * 8);
}

TEST(Planner, ParallelPlanPreferredWhenItFits) {
  // 2048^3 half: a 2048 x 2048 x 2048 / 1472 block fits easily (the 2048 matmul tests).
  const ConvPlan p = plan_conv(testing::gc200_by_hand(), matmul_args(2048, 2048, 2048));
  EXPECT_EQ(p.serial(), 1u);
  EXPECT_EQ(p.serial_in, 1u);
  EXPECT_EQ(p.serial_out, 1u);
}

// Issue 31, item 3: the planner rounds a transfer's cycles up, by the one rounding rule the
// engines use (ceil_cycles), not down. On one tile a 1 x 3 x 16 half matmul fetches its
// 1 x 3 input (6 B) and 3 x 16 weights (96 B) at 4 B/cycle: 25.5 cycles, so 26; the estimate
// is that, the AMP vertex's cycles (poplin's objective has no fixed exchange or sync cost), and
// the padding of its 3 input channels to the AMP's 16 (poplin's padInChannels rearranges the
// input and weights): each operand's bytes received at 4 B/cycle and copied at 2 B/cycle times
// 5/4 (3 x 16 channels, a whole number of vectors), each rounded up: the input 6 B, 2 + 4
// cycles; the weights 96 B, 24 + 60 cycles; 90 in all.
TEST(Planner, AFetchOfAFractionalCycleCountIsRoundedUp) {
  const ChipSpec chip = one_tile_chip(kAvailable);
  const ConvPlan p = plan_conv(chip, matmul_args(1, 16, 3));
  ASSERT_EQ(p.tiles_used(), 1u);
  cost::AmpConvArgs amp;
  amp.positions = 1;
  amp.in_chans = 3;
  amp.out_chans = 16;
  amp.width = 1;
  amp.coeff_load_bits = 64;
  EXPECT_EQ(p.estimated_cycles.count, 26 + cost::amp_conv1x1(chip, amp).cycles + 90);
}

TEST(Planner, SerialSplitOnOneTile) {
  // One tile, 256^3 half, 300000 B available. Parallel: A + B + C = 3 x 131072 = 393216 B:
  // too big. Serial out S: all of A (131072) + B and C slices of 131072 / S each:
  // S = 2 -> 262144 fits. Serial in S: A and B slices of 131072 / S each + one iteration's C
  // (131072) + the accumulated C (131072): needs S >= 8 (294912). Fewest iterations and no
  // accumulate pass: serial_out = 2, and its cost is twice that of one 256 x 128 x 256
  // iteration planned on its own.
  const ChipSpec chip = one_tile_chip(300000);
  const ConvPlan p = plan_conv(chip, matmul_args(256, 256, 256), 300000);
  EXPECT_EQ(p.serial_out, 2u);
  EXPECT_EQ(p.serial_in, 1u);
  EXPECT_EQ(p.bytes_per_tile.count, 262144u);
  EXPECT_EQ(p.out_per_tile, 128u);
  EXPECT_EQ(p.in_per_tile, 256u);
  const ConvPlan iteration = plan_conv(chip, matmul_args(256, 128, 256), 300000);
  EXPECT_EQ(iteration.serial(), 1u);
  EXPECT_EQ(p.estimated_cycles.count, 2 * iteration.estimated_cycles.count);
  // With more memory on the tile than the budget, the serial plan within the budget still
  // wins over doubling the budget to 600000 for the 393216 B parallel plan (§1.5 order).
  const ConvPlan within = plan_conv(one_tile_chip(kAvailable), matmul_args(256, 256, 256), 300000);
  EXPECT_EQ(within.serial_out, 2u);
  EXPECT_EQ(within.bytes_per_tile.count, 262144u);
}

TEST(Planner, SerialInputSplitAccumulates) {
  // One tile, 256 x 16 x 4096 half (M x N x K), 150000 B available. Parallel: A 2 MiB: no.
  // Serial out cannot help (A stays whole). Serial in S: A slice 256 x 4096/S x 2 + B slice
  // 4096/S x 16 x 2 + C 8192 + acc 8192: S = 16 -> 131072 + 8192 + 16384 = 155648 (too big),
  // S = 32 -> 65536 + 4096 + 16384 = 86016. The MACs and bytes fetched are the same for any
  // S and every iteration adds fixed costs (vertex set-up, the accumulate pass), so the smallest S
  // that fits, 32, is the cheapest.
  const ChipSpec chip = one_tile_chip(150000);
  const ConvPlan p = plan_conv(chip, matmul_args(256, 16, 4096), 150000);
  EXPECT_EQ(p.serial_out, 1u);
  EXPECT_EQ(p.serial_in, 32u);
  EXPECT_EQ(p.in_per_tile, 128u);
  EXPECT_EQ(p.bytes_per_tile.count, 86016u);
  const trace::Trace t = kernels::conv2d(chip, matmul_args(256, 16, 4096));
  const auto& prog = t.ipus[0];
  ASSERT_EQ(prog.steps.size(), 1u);
  const trace::Step& loop = prog.steps[0];
  ASSERT_EQ(loop.kind, StepKind::kRepeat);
  EXPECT_EQ(loop.count, 32u);
  // The last step adds the iteration's 256 x 16 outputs into the accumulated output.
  const trace::Step& last = loop.body.back();
  ASSERT_EQ(last.kind, StepKind::kCompute);
  const auto& acc = prog.compute_sets[last.index];
  ASSERT_EQ(acc.vertices.size(), 1u);
  EXPECT_EQ(acc.vertices[0].codelet, Codelet::kBinary);
  EXPECT_EQ(acc.vertices[0].params[sl::kEltN], 256 * 16);
  EXPECT_EQ(tensor_bytes(prog, "acc"), 256u * 16 * 2);
  EXPECT_EQ(amp_flops(prog, prog.steps), std::uint64_t{2} * 256 * 16 * 4096);
}

TEST(Planner, GroupedMatmulFlopsAndGroupsParameter) {
  // BERT-Large attention scores: 32 groups of 512 x 64 x 512 (M x K x N).
  const ChipSpec chip = testing::gc200_by_hand();
  const ConvPlan p = plan_conv(chip, matmul_args(512, 512, 64, 32));
  EXPECT_GE(p.group_split * p.groups_per_tile, 32u);
  EXPECT_LT((p.group_split - 1) * p.groups_per_tile, 32u);
  const trace::Trace t = kernels::matmul(chip, 512, 512, 64, DType::kHalf, 32);
  const auto& prog = t.ipus[0];
  EXPECT_EQ(amp_flops(prog, prog.steps), std::uint64_t{2} * 32 * 512 * 512 * 64);
  for (const auto& cs : prog.compute_sets)
    for (const auto& v : cs.vertices)
      if (v.codelet == Codelet::kAmpConv1x1) {
        EXPECT_GE(v.params[sl::kAmpGroups], 1);
        EXPECT_LE(v.params[sl::kAmpGroups], static_cast<std::int64_t>(p.groups_per_tile));
      }
}

TEST(Planner, GroupedMatmulCostBetweenOneAndGTimesOneGroup) {
  // Dropping all groups but one from the G-group plan leaves a one-group plan on the same
  // splits that is no dearer, so the best one-group plan is at least as cheap. Keeping the
  // one-group plan's splits with all G groups on each tile (group_split = 1) costs at most
  // G times as much (every term is affine in the block size with a non-negative constant)
  // and fits (G x its buffers is still far below the tile memory here).
  const ChipSpec chip = testing::gc200_by_hand();
  for (const std::uint64_t g : {2, 4, 32}) {
    const ConvPlan one = plan_conv(chip, matmul_args(512, 512, 64));
    const ConvPlan many = plan_conv(chip, matmul_args(512, 512, 64, g));
    ASSERT_LE(g * one.bytes_per_tile.count, kAvailable);
    EXPECT_GE(many.estimated_cycles.count, one.estimated_cycles.count) << g;
    EXPECT_LE(many.estimated_cycles.count, g * one.estimated_cycles.count) << g;
  }
}

TEST(Planner, GroupsOnOneTile) {
  // One tile, 4 groups of 64 x 64 x 64 half: A, B and C are 8192 B per group, all on the
  // tile: 4 x 3 x 8192 = 98304 B, and one AMP vertex with groups = 4.
  const ChipSpec chip = one_tile_chip(kAvailable);
  const ConvPlan p = plan_conv(chip, matmul_args(64, 64, 64, 4));
  EXPECT_EQ(p.group_split, 1u);
  EXPECT_EQ(p.groups_per_tile, 4u);
  EXPECT_EQ(p.bytes_per_tile.count, 98304u);
  const trace::Trace t = kernels::matmul(chip, 64, 64, 64, DType::kHalf, 4);
  const auto& conv = t.ipus[0].compute_sets[0];
  ASSERT_EQ(conv.vertices.size(), 1u);
  EXPECT_EQ(conv.vertices[0].params[sl::kAmpGroups], 4);
  EXPECT_EQ(conv.vertices[0].params[sl::kAmpPositions], 64);
}

TEST(Planner, Strided1x1FetchesOnlyTheStridedPositions) {
  // One tile, 1x1 stride-2 conv 56x56x64 -> 28x28x64 half. Only every other row and column
  // is read: the input block is 28 x 28 x 64 x 2 = 100352 B (not 56 x 56 x 64 x 2 = 401408),
  // weights 64 x 64 x 2 = 8192, outputs 28 x 28 x 64 x 2 = 100352: 208896 B.
  const ChipSpec chip = one_tile_chip(kAvailable);
  const ConvArgs a = image_conv(64, 56, 64, 1, 2);
  const ConvPlan p = plan_conv(chip, a);
  EXPECT_EQ(p.bytes_per_tile.count, 208896u);
  const trace::Trace t = kernels::conv2d(chip, a);
  const auto& prog = t.ipus[0];
  EXPECT_EQ(tensor_bytes(prog, "in_blk"), 100352u);
  const auto& v = prog.compute_sets[0].vertices.at(0);
  EXPECT_EQ(v.codelet, Codelet::kAmpConv1x1);  // a dense 1x1 conv over the gathered block
  EXPECT_EQ(v.params[sl::kAmpPositions], 28 * 28);
  EXPECT_EQ(amp_flops(prog, prog.steps), std::uint64_t{2} * 28 * 28 * 64 * 64);
}

// A depthwise conv (16 one-channel groups combined into one, ConvArgs::combined_groups) runs
// on poplin's SLIC vertex when that is cheaper (getConvVertexSLICCandidates), with the same
// splits and only its real weights. Batch 1, 16 channels of 64 x 8, 3 x 3 kernel, stride 1,
// on one tile:
//  - the fetch (the planner's objective): 66 input rows x 8 x 16 x 2 = 16,896 B and the
//    weights, 16 x 3 x 4 (the width in 1x4 windows) x 2 = 384 B: 17,280 / 4 = 4,320 cycles;
//  - the SLIC vertex, 512 positions in rows of 8, 4 chains (half partials, 16 engines),
//    3 sub-kernels: worker shares of 85-86 positions cut at row ends, e.g. [0, 85): ten
//    rows of 8 and one of 5; rows of n >= 5 cost 15 + (n - 5), 18 for 8 and 15 for 5, 10 an
//    entry (11 zeroing), preamble 17 + 4 (16 groups): [0, 85) 21 + 10 x 28 + 25 = 326, zeroing
//    21 + 10 x 29 + 26 = 337; [85, 170): 3, then ten 8s, then 2: 21 + (10 + 20) + 280 + (10 +
//    19) = 360, zeroing 21 + 27 + 290 + 26 = 364, the slowest of the six (the others 326/337,
//    327/338 and 360/364 again): inner loops 6 x 360 = 2,160 and
//    6 x 364 = 2,184. Weights 9 + 6 + 6 x 11 + 6 + 16 = 103; four group strides of 103 + 21:
//    496 + 19 = 515, a sub-kernel 530, three 1,590 + 13 = 1,603; group loop 23 + 1 = 24;
//    28 + 24 + 1,603 + 2,184 + 2 x 4 x 2,160 = 21,119.
//  - SLIC's other groupings cost more here: 8x1 (2 vertex groups: preamble 21, inner 2,160 and
//    2,184; weights 103, 2 strides 248 + 7 = 255, a sub-kernel 270, three 823; group loop
//    2 x 23 + 7 = 53; 28 + 53 + 823 + 2 x 2,184 + 2 x 2 x 2 x 2,160 = 22,552) and 4x1 (4 vertex
//    groups: preamble 17, inner 2,136 and 2,160; weights 97, a sub-kernel 117, three 364; group
//    loop 4 x 15 + 19 = 79; 28 + 79 + 364 + 4 x 2,160 + 4 x 2 x 2,136 = 26,199).
TEST(Planner, ADepthwiseConvRunsOnSlicWhenThatIsCheaper) {
  const ChipSpec chip = one_tile_chip(kAvailable);
  ConvArgs dw;
  dw.batch = 1;
  dw.in_chans = dw.out_chans = 1;
  dw.height = 64;
  dw.width = 8;
  dw.kernel = 3;
  dw.groups = 16;
  dw.channel_groups = true;
  const ConvArgs a = combine_conv_groups(chip, dw);
  ASSERT_EQ(a.combined_groups, 16u);
  const ConvPlan p = plan_conv(chip, a);
  EXPECT_EQ(p.method, ConvMethod::kSlic);
  EXPECT_EQ(p.estimated_cycles.count, 4320u + 21119u);
  // Emitted: one amp_slic vertex with those arguments.
  const trace::Vertex v = first_vertex(chip, a, p);
  ASSERT_EQ(v.codelet, Codelet::kAmpSlic);
  EXPECT_EQ(v.params[sl::kSlicPositions], 512);
  EXPECT_EQ(v.params[sl::kSlicGroups], 16);
  EXPECT_EQ(v.params[sl::kSlicChains], 4);
  EXPECT_EQ(cost::vertex_cost(chip, v).cycles, 21119u);
  trace::Vertex by8 = v, by4 = v;
  by8.params[sl::kSlicGroups] = 8;
  by8.params[sl::kSlicGroupGroups] = 2;
  by4.params[sl::kSlicGroups] = 4;
  by4.params[sl::kSlicGroupGroups] = 4;
  EXPECT_EQ(cost::vertex_cost(chip, by8).cycles, 22552u);
  EXPECT_EQ(cost::vertex_cost(chip, by4).cycles, 26199u);
  // Within 30,000 B a tile neither vertex fits whole (SLIC 16,896 + 384 + 16,384 partials +
  // their 16,584 copy; the AMP 16,896 + 4,608 + 16,384): the AMP splits its output channels
  // serially, and SLIC, which needs every channel of its vertex group on the tile, is not
  // split.
  const ConvPlan tight = plan_conv(chip, a, 30000);
  EXPECT_EQ(tight.method, ConvMethod::kAmp);
  EXPECT_GT(tight.serial(), 1u);
  // The same conv with 4 channels a group is not depthwise: no SLIC.
  dw.in_chans = dw.out_chans = 4;
  EXPECT_EQ(plan_conv(chip, combine_conv_groups(chip, dw)).method, ConvMethod::kAmp);
}

// A float matrix-vector product on one tile, 1 x 64 x 1, runs on poplin's horizontal-MAC
// vertex (getConvVertexHMACCandidates), whose dot products cost less here than the AMP's
// weight loads and fixed costs:
//  - the fetch (the planner's objective): 64 floats of input and 64 of weights, 512 / 4 = 128;
//  - the HMAC vertex (swapped: one position, 64 input channels, one output channel): a dot
//    product of 64 floats 7 + 64 / 2 = 39; the one busy worker's entry 19 + (7 + 39) = 65;
//    6 x (16 + 65 + 16) = 582; the supervisor 58 + 6 x 9 + (23 + 15 + 10 + 582) = 742; zeroing
//    6 x (1 + 5) = 36: 778;
//  - 128 + 778 = 906, where the AMP's vertex for the same block costs more on its own.
TEST(Planner, AMatrixVectorProductRunsOnTheHmacVertexWhenThatIsCheaper) {
  const ChipSpec chip = one_tile_chip(kAvailable);
  ConvArgs a = matmul_args(1, 1, 64);
  a.dtype = a.partials = DType::kFloat;
  const ConvPlan p = plan_conv(chip, a);
  EXPECT_EQ(p.method, ConvMethod::kHmac);
  EXPECT_EQ(p.estimated_cycles.count, 128u + 778u);
  const trace::Vertex v = first_vertex(chip, a, p);
  ASSERT_EQ(v.codelet, Codelet::kConvHmac);
  EXPECT_EQ(v.params[sl::kHmacPositions], 1);
  EXPECT_EQ(v.params[sl::kHmacInChans], 64);
  EXPECT_EQ(v.params[sl::kHmacOutChans], 1);
  EXPECT_EQ(cost::vertex_cost(chip, v).cycles, 778u);
  cost::AmpConvArgs amp;
  amp.in = amp.partials = DType::kFloat;
  amp.positions = 1;
  amp.in_chans = 64;
  amp.out_chans = 1;
  amp.coeff_load_bits = 64;
  EXPECT_GT(cost::amp_conv1x1(chip, amp).cycles, 778u);
  // A batch of 16 rows keeps the AMP: 16 x 64 x 16 halves, where the HMAC's dot products take
  // longer than the AMP's fixed costs.
  EXPECT_EQ(plan_conv(chip, matmul_args(16, 16, 64)).method, ConvMethod::kAmp);
}

TEST(Planner, FewInputChannelsUseTallerWeights) {
  // One tile, a 7x7 stride-1 conv of 3 channels, 16x16 -> 16x16x16 half (an image stem in
  // miniature). Poplin's AMP candidates include inChansPerGroup 4 with weights of 4 kernel rows
  // (ConvVertexType.cpp, convUnitWeightHeight): 1 input group of ceil(7/4) = 2 row passes
  // instead of 7, so the plan takes weight height 4 and pads the kernel to 8 rows.
  // Buffers: input (16 - 1 + 7) rows x 16 columns x 3 x 2 = 2112 B, weights 8 x 7 x 3 x 16 x 2
  // = 5376 B, partials 256 x 16 x 2 = 8192 B: 15680 B. Its estimate is the fetch ((2112 + 5376)
  // / 4 = 1872 cycles), the height-4 vertex, and the padding of the 3 channels to 4 (poplin's
  // padInChannels: the input and weights rearranged, their bytes received at 4 B/cycle and
  // copied at 2 B/cycle x 5/4, 3 x 16 channels being whole vectors): the input's 16 x 16 x 3
  // halves, 1536 B, 384 + 960 cycles; the weights' 7 x 7 x 3 x 16, 4704 B, 1176 + 2940 cycles;
  // 5460 in all.
  const ChipSpec chip = one_tile_chip(kAvailable);
  ConvArgs a = image_conv(3, 16, 16, 7);
  const ConvPlan p = plan_conv(chip, a);
  EXPECT_EQ(p.weight_height, 4u);
  EXPECT_EQ(p.bytes_per_tile.count, 15680u);
  cost::AmpConvArgs v;
  v.positions = 256;
  v.in_chans = 3;
  v.out_chans = 16;
  v.kernel_h = 7;
  v.kernel_w = 7;
  v.width = 16;
  v.weight_height = 4;
  EXPECT_EQ(p.estimated_cycles.count, 1872 + cost::amp_convnx1(chip, v).cycles + 5460);
  const trace::Trace t = kernels::conv2d(chip, a);
  const auto& vx = t.ipus[0].compute_sets[0].vertices.at(0);
  EXPECT_EQ(vx.codelet, Codelet::kAmpConvNx1);
  EXPECT_EQ(vx.params[sl::kAmpNx1WeightHeight], 4);
  EXPECT_EQ(vx.params[sl::kAmpKernelH], 7);  // the conv's own kernel: its FLOPs are exact
  EXPECT_EQ(amp_flops(t.ipus[0], t.ipus[0].steps), std::uint64_t{2} * 256 * 3 * 16 * 49);
  // 16 channels fill the engines' weights: one row per load, as before.
  a.in_chans = 16;
  EXPECT_EQ(plan_conv(chip, a).weight_height, 1u);
  // A 1x1 kernel has no rows to stack (the 1x1 vertex needs height 1).
  a.in_chans = 3;
  a.kernel = 1;
  EXPECT_EQ(plan_conv(chip, a).weight_height, 1u);
}

// Issue 28, item 1: a matmul is also planned with its operands swapped, C^T = B^T A^T, the form
// poplin lays a matmul's operands out for (ConvModel.cpp addRearrangementAndPaddingCosts: the
// unswapped form rearranges input, weights and output). One tile, 16 x 16 x 64 half (M x K x N,
// a batch-16 fully connected layer), 64-bit weight loads (L = 16 x 16 x 2 / 8 = 64), the common
// path (c = 1) with state retention, half partials, one input group (the zeroing pass only):
//  - swapped: 64 positions, 16 out (OG = 1): workers of 11 and 10 positions, 37 + 4 x 8 - 7 = 62
//    and 58, inner = max(6 x 62, 6 x 58 + 14) = 372; vertex = 50 + 6 x 7 + 13 + 11 + (18 + 7 +
//    64 + 372) = 577;
//  - unswapped: 16 positions, 64 out (OG = 4): workers of 3 and 2 positions, 37 - 7 = 30 and
//    40 + 1 - 7 = 34, inner = max(6 x 34, 6 x 30 + 14) = 204; vertex = 50 + 42 + 13 + 11 +
//    4 x (18 + 7 + 64 + 204) = 1288.
// Both fetch A (512 B) and B (2048 B): 2560 / 4 = 640 cycles. The swapped plan is 640 + 577;
// the unswapped one, planned as a conv of 16 one-pixel images (the form a conv's operands are
// laid out for), 640 + 1288.
// Issue 28, item 2: poplin's expandDims (ConvModel.cpp expandDim). ResNet-50's first conv, 3
// channels of 224 x 224, a 7x7 kernel, stride 2 to 112 x 112: expanding the rows leaves a conv
// over 112 input rows (one an output row) with a 1 x 7 kernel, stride 1 down and 2 across, and
// 3 x 7 = 21 channels; the columns, likewise across; both, a 1x1 conv of 147 channels over
// 112 x 112. The output is the same in each.
TEST(Planner, ExpandingAKernelDimensionMovesItIntoTheInputChannels) {
  const ConvArgs a = image_conv(3, 224, 64, 7, 2);
  const auto expect = [&](bool h, bool w, std::uint64_t height, std::uint64_t width,
                          std::uint64_t in, Spatial kernel, Spatial stride) {
    const ConvArgs e = expand_dims(a, h, w);
    EXPECT_EQ(e.height, height) << h << w;
    EXPECT_EQ(e.width, width) << h << w;
    EXPECT_EQ(e.in_chans, in) << h << w;
    EXPECT_EQ(e.kernel, kernel) << h << w;
    EXPECT_EQ(e.stride, stride) << h << w;
    EXPECT_EQ(e.out_chans, 64u) << h << w;
  };
  expect(true, false, 112, 224, 21, {1, 7}, {1, 2});
  expect(false, true, 224, 112, 21, {7, 1}, {2, 1});
  expect(true, true, 112, 112, 147, 1, 1);
  // Candidates (getExpandDimsCandidates): a kernel dimension wider than 1 and no wider than
  // the input; ipusim expands ungrouped convs only.
  EXPECT_TRUE(expandable(a, true));
  EXPECT_TRUE(expandable(a, false));
  EXPECT_FALSE(expandable(image_conv(64, 56, 64, 1, 2), true));  // a strided 1x1 kernel
  ConvArgs small = image_conv(16, 2, 16, 3);
  EXPECT_FALSE(expandable(small, true));  // a 3x3 kernel over a 2 x 2 input
  small.height = 3;
  EXPECT_TRUE(expandable(small, true));
  EXPECT_FALSE(expandable(small, false));  // still 2 columns
  ConvArgs grouped = image_conv(16, 14, 16, 3);
  grouped.groups = 4;
  EXPECT_FALSE(expandable(grouped, true));
}

// The rearrangement an expanded plan and a padded one carry in the planner's objective
// (poplin's addRearrangementAndPaddingCosts, inputsCopyCycles + inputsExchangeCycles and the
// weights' likewise): each operand's share of the plan's tiles, rounded up, received at
// 4 B/cycle and copied at 2 B/cycle (an element a cycle) times 5/4 (21 x 64 and 3 x 64
// channels are whole vectors of 4 halves), each term rounded up; no copy call's fixed cost.
TEST(Planner, AnExpandedOrPaddedPlanCarriesPoplinsRearrangementOfItsOperands) {
  const ChipSpec chip = testing::gc200_by_hand();
  ConvArgs a = image_conv(3, 224, 64, 7, 2);
  a.batch = 20;
  ConvPlan p;  // ResNet-50 POD16's plan of its first conv: 320 row blocks x 4 output blocks
  p.row_split = 320;
  p.out_split = 4;
  p.weight_height = 4;  // 3 channels padded to the AMP's 4 at weight height 4
  // Unexpanded and padded: the input, 20 x 224 x 224 x 3 = 3,010,560 halves, 2352 a tile,
  // 4704 B: 1176 + 2940 cycles; the weights, 7 x 7 x 3 x 64 = 9408, 8 a tile, 16 B: 4 + 10.
  EXPECT_EQ(rearrangement_cycles(chip, a, p), 1176u + 2940 + 4 + 10);
  // The columns expanded (weight height 1, whether or not its grain pads the 21 channels): the
  // input, 20 x 224 x 112 x 21 = 10,536,960 halves, 8232 a tile, 16,464 B: 4116 + 10,290; the
  // weights, 7 x 21 x 64 = 9408 again: 14.
  p.expand_w = true;
  p.weight_height = 1;
  EXPECT_EQ(rearrangement_cycles(chip, planned_product(a, p), p), 4116u + 10290 + 14);
  // A conv whose channels fill the grain and that is not expanded carries none.
  EXPECT_EQ(rearrangement_cycles(chip, image_conv(16, 56, 64, 3), ConvPlan{}), 0u);
  // 8 output channels, padded to the AMP's 16 partials (poplin's padPartialChannels): the
  // weights and the output are rearranged, on one tile: the weights' 16 x 8 halves, 256 B,
  // 64 + 160 cycles; the output's 56 x 56 x 8, 50,176 B, 12,544 + 31,360 (8 channels are whole
  // vectors: 5/4).
  EXPECT_EQ(rearrangement_cycles(chip, image_conv(16, 56, 8, 1), ConvPlan{}),
            64u + 160 + 12544 + 31360);
}

// The reference kernel of an expanded plan builds the expanded input first: one copy (the
// transpose codelet with poplin's factor, 5/4 for 4,608 x 512 channels) of the expanded tensor
// spread over the plan's tiles. ResNet-50's 3x3/2 conv at 14 x 14 (the regression case
// resnet50/conv5-3x3s2-512to512-14) expands both dimensions with the whole tile memory: a 1x1
// conv of 9 x 512 = 4,608 channels over 20 x 7 x 7 positions, 4,515,840 elements.
TEST(Planner, AnExpandedReferenceKernelCopiesItsInputIntoPlaceFirst) {
  const ChipSpec chip = testing::gc200_by_hand();
  ConvArgs a = image_conv(512, 14, 512, 3, 2);
  a.batch = 20;
  const ConvPlan p = plan_conv(chip, a);
  ASSERT_TRUE(p.expand_h && p.expand_w);
  const trace::Trace t = kernels::conv2d(chip, a);
  const trace::ComputeSet& copy = t.ipus[0].compute_sets.at(0);
  EXPECT_EQ(copy.name, "expand_input");
  ASSERT_EQ(copy.vertices.size(), 1u);
  EXPECT_EQ(copy.vertices[0].codelet, Codelet::kTranspose);
  EXPECT_EQ(copy.vertices[0].tiles.last + 1, p.tiles_used());
  EXPECT_EQ(copy.vertices[0].params[sl::kTransposeN],
            static_cast<std::int64_t>(ceil_div(4515840, p.tiles_used())));
  EXPECT_EQ(copy.vertices[0].params[sl::kTransposeFactor], 1);  // 5/4
  // The conv after it runs the 1x1 vertex.
  EXPECT_EQ(t.ipus[0].compute_sets.at(1).vertices.at(0).codelet, Codelet::kAmpConv1x1);
}

TEST(Planner, AMatmulIsPlannedWithItsOperandsSwappedWhenThatIsCheaper) {
  const ChipSpec chip = one_tile_chip(kAvailable);
  ConvArgs a = matmul_args(16, 64, 16);
  a.matmul = true;
  const ConvArgs s = swap_operands(a);
  EXPECT_EQ(s.height, 64u);
  EXPECT_EQ(s.out_chans, 16u);
  EXPECT_EQ(s.in_chans, 16u);
  cost::AmpConvArgs v;
  v.positions = 64;
  v.in_chans = 16;
  v.out_chans = 16;
  v.width = 1;
  v.coeff_load_bits = 64;
  ASSERT_EQ(cost::amp_conv1x1(chip, v).cycles, 577u);
  v.positions = 16;
  v.out_chans = 64;
  ASSERT_EQ(cost::amp_conv1x1(chip, v).cycles, 1288u);
  const ConvPlan p = plan_conv(chip, a);
  EXPECT_TRUE(p.swapped);
  EXPECT_EQ(p.estimated_cycles.count, 640u + 577);
  EXPECT_EQ(p.rows_per_tile, 64u);  // the swapped product's rows: the matmul's N
  EXPECT_EQ(p.out_per_tile, 16u);
  ConvArgs conv = a;
  conv.matmul = false;  // a conv is planned as it is
  EXPECT_FALSE(swappable(conv));
  const ConvPlan q = plan_conv(chip, conv);
  EXPECT_FALSE(q.swapped);
  EXPECT_EQ(q.estimated_cycles.count, 640u + 1288);
  // The kernel runs the swapped product: one vertex of 64 positions and 16 output channels,
  // with the matmul's FLOPs.
  const trace::Trace t = kernels::matmul(chip, 16, 64, 16, DType::kHalf);
  const auto& vx = t.ipus[0].compute_sets[0].vertices.at(0);
  EXPECT_EQ(vx.params[sl::kAmpPositions], 64);
  EXPECT_EQ(vx.params[sl::kAmpOutChans], 16);
  EXPECT_EQ(amp_flops(t.ipus[0], t.ipus[0].steps), std::uint64_t{2} * 16 * 16 * 64);
}

// An unswapped matmul's plan carries poplin's rearrangement of its input, weights and output
// (ConvModel.cpp addRearrangementAndPaddingCosts): for each, its share per tile over the exchange
// rate, plus an element a cycle times 5/4 (channels a multiple of the vector width), as poplin's
// objective has it (no copy call's fixed cost: the rearrangement is in the objective only). One
// tile, 16 x 16 x 16 half: three operands of 256 elements, each 512 B / 4 = 128 +
// ceil(256 x 5/4) = 320: 3 x 448 = 1344 cycles. A swapped plan, or a conv's plan, carries none;
// with the compute of both forms equal, the swapped form is chosen.
TEST(Planner, AnUnswappedMatmulPaysPoplinsRearrangementOfItsOperands) {
  const ChipSpec chip = one_tile_chip(kAvailable);
  ConvArgs a = matmul_args(16, 16, 16);
  a.matmul = true;
  ConvPlan p;
  p.rows_per_tile = p.out_per_tile = p.in_per_tile = 16;
  EXPECT_EQ(rearrangement_cycles(chip, a, p), 1344u);
  p.swapped = true;
  EXPECT_EQ(rearrangement_cycles(chip, swap_operands(a), p), 0u);
  ConvArgs conv = a;
  conv.matmul = false;
  p.swapped = false;
  EXPECT_EQ(rearrangement_cycles(chip, conv, p), 0u);
  EXPECT_TRUE(plan_conv(chip, a).swapped);
  EXPECT_EQ(plan_conv(chip, a).estimated_cycles, plan_conv(chip, conv).estimated_cycles);
  // A conv's weight update (poplin's TRAINING_WU) rearranges only its output unless swapped:
  // 448. It too is planned swapped here.
  ConvArgs update = conv;
  update.weight_update = true;
  EXPECT_TRUE(swappable(update));
  EXPECT_EQ(rearrangement_cycles(chip, update, p), 448u);
  p.swapped = true;
  EXPECT_EQ(rearrangement_cycles(chip, swap_operands(update), p), 0u);
  EXPECT_TRUE(plan_conv(chip, update).swapped);
}

// The three passes of a fully connected layer (poplin's fullyConnectedPass, ConvPlan.cpp
// runPlanner): F = A B, its data gradient D = dC B^T and weight gradient W = A^T dC, as the
// compiler builds them (D reads B transposed, W reads A transposed).
struct FcPasses {
  ConvArgs f, d, w;
};
FcPasses fc_passes(std::uint64_t m, std::uint64_t n, std::uint64_t k) {
  FcPasses p;
  p.f = matmul_args(m, n, k);
  p.f.matmul = true;
  p.d = matmul_args(m, k, n);
  p.d.matmul = p.d.transposed_weights = true;
  p.w = matmul_args(k, n, m);
  p.w.matmul = p.w.transposed_input = true;
  return p;
}

// On one tile every plan holds the whole of each pass, so the joint plans are the separate ones
// (each swapped, as plan_conv picks a matmul's forms) but for two rearrangements poplin charges
// only separate plans: the data gradient's transposed copy of B and the weight gradient's move
// to B's layout. 16 x 16 x 16 half, 256 elements each: B's copy is 512 B / 4 = 128 cycles of
// exchange, the copy call's 288 and ceil(256 x 5/4) = 320 to copy (in x out = 256 channels, a
// multiple of the vector width: factor 5/4): 736; the move 128 + 320 = 448, no call. So the
// joint total is 1184 below the separate one and wins; its data gradient's estimate is the
// separate one's less 736, the others equal.
TEST(Planner, AFullyConnectedLayerIsPlannedJointlyWhenPoplinsTotalIsLower) {
  const ChipSpec chip = one_tile_chip(kAvailable);
  const FcPasses fc = fc_passes(16, 16, 16);
  const ConvPlan f = plan_conv(chip, fc.f), d = plan_conv(chip, fc.d), w = plan_conv(chip, fc.w);
  ASSERT_TRUE(f.swapped && d.swapped && w.swapped);
  const FcPlans p = plan_fully_connected(chip, fc.f, fc.d, fc.w, kAvailable);
  EXPECT_EQ(p.separate_cycles,
            f.estimated_cycles.count + d.estimated_cycles.count + w.estimated_cycles.count + 448);
  EXPECT_EQ(p.joint_cycles, p.separate_cycles - 736 - 448);
  ASSERT_TRUE(p.joint);
  EXPECT_EQ(p.fwd.estimated_cycles, f.estimated_cycles);
  EXPECT_EQ(p.bwd.estimated_cycles.count, d.estimated_cycles.count - 736);
  EXPECT_EQ(p.wu.estimated_cycles, w.estimated_cycles);
  for (const ConvPlan* q : {&p.fwd, &p.bwd, &p.wu}) EXPECT_TRUE(q->joint && q->swapped);
  EXPECT_EQ(p.bwd.order, TileOrder::kInputOuter);
  // Each pass alone, or poplin's option off, is planned as before.
  EXPECT_FALSE(f.joint || d.joint || w.joint);
}

// A joint plan's passes use the same tiles for each weight block (poplin's joint constraints:
// no parallel split of the forward's output channels, the activations' rows; no serial split of
// its input channels; rows in grains of 16, the AMP's input channels): forward block (rows r,
// inputs i) on tile r x I + i (plan_tile, standard order: I input blocks, one output block), the
// data gradient's block (rows i, inputs r) on ((0 x R + r) x I + i) in its input-outer order,
// and the weight gradient's block (rows r, outputs i) on (r x 1 + 0) x I + i. The ResNet-50
// classifier at micro-batch 16, 16 x 1024 x 1024 on the GC200, is planned jointly; with 1,024
// rows the forward pass's activations on every tile make the joint plan lose.
TEST(Planner, AJointPlanKeepsEachWeightBlockOnOneTileInEveryPass) {
  const ChipSpec chip = testing::gc200_by_hand();
  const FcPasses fc = fc_passes(16, 1024, 1024);
  const FcPlans p = plan_fully_connected(chip, fc.f, fc.d, fc.w, kAvailable / 4);
  ASSERT_TRUE(p.joint);
  EXPECT_EQ(p.fwd.out_split, 1u);
  EXPECT_EQ(p.fwd.serial_in, 1u);
  EXPECT_EQ(p.fwd.rows_per_tile % 16, 0u);
  EXPECT_EQ(p.bwd.row_split, p.fwd.in_split);
  EXPECT_EQ(p.bwd.in_split, p.fwd.row_split);
  EXPECT_EQ(p.wu.out_split, p.fwd.in_split);
  EXPECT_EQ(p.wu.in_split, 1u);
  EXPECT_GT(p.fwd.tiles_used(), 1u);
  for (std::uint32_t r = 0; r < p.fwd.row_split; ++r)
    for (std::uint32_t i = 0; i < p.fwd.in_split; ++i) {
      const std::uint32_t tile = r * p.fwd.in_split + i;
      ASSERT_EQ(plan_tile(p.fwd, 0, r, i, 0), tile);
      ASSERT_EQ(plan_tile(p.bwd, 0, i, r, 0), tile);
      ASSERT_EQ(plan_tile(p.wu, 0, r, 0, i), tile);
    }
  const FcPasses big = fc_passes(1024, 1024, 1024);
  const FcPlans q = plan_fully_connected(chip, big.f, big.d, big.w, kAvailable / 4);
  EXPECT_FALSE(q.joint);
  EXPECT_GT(q.joint_cycles, q.separate_cycles);
  EXPECT_THROW(plan_fully_connected(chip, fc.f, big.d, fc.w, kAvailable), UsageError);
}

TEST(Planner, InputBlocksShareTheExchangeBusAsPoplibsEstimatesIt) {
  // popops ExchangeEstimator.cpp: the rate doubles when the consecutive tiles receiving the
  // same data (the out_split) are a multiple of the 2 tiles of a bus, or are every tile used.
  const ChipSpec chip = testing::gc200_by_hand();
  ConvPlan p;
  const auto shares = [&](std::uint32_t rows, std::uint32_t outs) {
    p.row_split = rows;
    p.out_split = outs;
    return input_shares_bus(chip, p);
  };
  EXPECT_TRUE(shares(1, 2));   // one pair, the same block
  EXPECT_TRUE(shares(5, 4));   // runs of 4: pairs (0,1), (2,3), ... within a run
  EXPECT_FALSE(shares(2, 3));  // runs of 3: tiles 2 and 3 hold different blocks
  // Every tile the same block: poplibs shares the bus even for an odd count (the exchange model
  // charges the odd tile, 2, at the single rate).
  EXPECT_TRUE(shares(1, 3));
  EXPECT_FALSE(shares(4, 1));  // every tile its own block
  EXPECT_FALSE(shares(1, 1));  // a lone tile
}

TEST(Planner, Strided1x1InputBlocksOnTheChip) {
  // ResNet-50 downsample shortcut: 1x1/2, 56x56x256 -> 28x28x512, batch 4. Each tile's input
  // block covers its output rows x 28 output columns x its input channels, never a 56-wide row.
  const ChipSpec chip = testing::gc200_by_hand();
  ConvArgs a;
  a.batch = 4;
  a.in_chans = 256;
  a.height = 56;
  a.width = 56;
  a.out_chans = 512;
  a.stride = 2;
  const ConvPlan p = plan_conv(chip, a);
  const trace::Trace t = kernels::conv2d(chip, a);
  EXPECT_EQ(tensor_bytes(t.ipus[0], "in_blk"), p.rows_per_tile * 28 * p.in_per_tile * 2);
  // Every input block sent in the fetch is at most that size, summing (over row and input
  // blocks) to the 4 x 28 x 28 x 256 strided positions at most once per block.
  for (const auto& tr : t.ipus[0].exchanges[0].transfers)
    EXPECT_LE(tr.bytes, std::max(p.rows_per_tile * 28 * p.in_per_tile * 2,
                                 p.in_per_tile * p.out_per_tile * 2));
}

}  // namespace
}  // namespace ipusim::plan

namespace ipusim::plan {
namespace {

bool same_plan(const ConvPlan& a, const ConvPlan& b) {
  return a.row_split == b.row_split && a.out_split == b.out_split && a.in_split == b.in_split &&
         a.group_split == b.group_split && a.serial_in == b.serial_in &&
         a.serial_out == b.serial_out && a.estimated_cycles == b.estimated_cycles &&
         a.bytes_per_tile == b.bytes_per_tile;
}

TEST(Planner, TinyBudgetDoublesStraightToThePlanThatFits) {
  // Doubling a 1-byte budget until a plan fits reaches the first power of two at or above the
  // smallest candidate's buffers; every budget below that must therefore give the same plan
  // as the power of two just below that candidate's size, and one byte must not take longer
  // to plan than any other budget (it used to search every budget in between).
  const ChipSpec chip = testing::gc200_by_hand();
  ConvArgs a;
  a.batch = 20;
  a.height = 56;
  a.width = 56;
  a.in_chans = 64;
  a.out_chans = 64;
  a.kernel = 3;
  const ConvPlan from_one = plan_conv(chip, a, 1);
  ASSERT_GT(from_one.bytes_per_tile.count, 0u);
  std::uint64_t fits = 1;
  while (fits < from_one.bytes_per_tile.count) fits *= 2;
  for (std::uint64_t b : {std::uint64_t{2}, std::uint64_t{64}, fits / 2, fits})
    EXPECT_TRUE(same_plan(plan_conv(chip, a, b), from_one)) << "budget " << b;
  EXPECT_LE(from_one.bytes_per_tile.count, fits);
}

}  // namespace
}  // namespace ipusim::plan

namespace ipusim::plan {
namespace {

TEST(Planner, PartialSumsOfADeepInputSplitReduceInPoplinsStages) {
  // A 20 x 16 x 320 half matmul planned by hand as 20 input-channel blocks of 16 on tiles
  // 0..19: each tile's partials are 20 x 16 = 320 outputs, reduce-scattered in chunks of 16.
  // reduction_stages(20) = 2 stages of fan-in 5 (ceil(sqrt(20))). Stage 1: tiles in groups of
  // 5 (0..4, 5..9, ...); tile k owns the 4 chunks c = k mod 5 + 5j and receives them from its
  // 4 peers: 4 x 16 x 2 = 128 bytes per transfer, 20 x 4 = 80 transfers. Stage 2: tiles with
  // the same k mod 5 (4 of them); tile k owns chunk k only and receives it from 3 peers:
  // 16 x 2 = 32 bytes, 20 x 3 = 60 transfers. One stage (the plain reduce-scatter) would be
  // 20 x 19 = 380 transfers of 32 bytes.
  EXPECT_EQ(reduction_stages(20), (std::pair<int, std::uint64_t>{2, 5}));
  ConvArgs a;
  a.height = 20;
  a.in_chans = 320;
  a.out_chans = 16;
  ConvPlan p;
  p.in_split = 20;
  p.rows_per_tile = 20;
  p.out_per_tile = 16;
  p.in_per_tile = 16;
  trace::IpuProgram prog;
  std::vector<trace::Step> steps;
  emit_conv(prog, "mm/", testing::gc200_by_hand(), a, p, steps);
  ASSERT_EQ(prog.exchanges.size(), 3u);  // fetch, reduce, reduce2
  EXPECT_EQ(prog.exchanges[1].name, "mm/reduce");
  EXPECT_EQ(prog.exchanges[2].name, "mm/reduce2");
  const trace::Exchange e1 = trace::expanded(prog.exchanges[1]),
                        e2 = trace::expanded(prog.exchanges[2]);
  const auto& s1 = e1.transfers;
  const auto& s2 = e2.transfers;
  ASSERT_EQ(s1.size(), 80u);
  ASSERT_EQ(s2.size(), 60u);
  for (const auto& t : s1) EXPECT_EQ(t.bytes, 128u);
  for (const auto& t : s2) EXPECT_EQ(t.bytes, 32u);
  // Tile 7: stage 1 from 5, 6, 8, 9; stage 2 from 2, 12, 17.
  std::vector<std::uint32_t> from1, from2;
  for (const auto& t : s1)
    if (e1.destinations(t)[0].first == 7) from1.push_back(t.src.first);
  for (const auto& t : s2)
    if (e2.destinations(t)[0].first == 7) from2.push_back(t.src.first);
  EXPECT_EQ(from1, (std::vector<std::uint32_t>{5, 6, 8, 9}));
  EXPECT_EQ(from2, (std::vector<std::uint32_t>{2, 12, 17}));
  // Each stage's reduce vertices: 64 outputs from 5 inputs, then 16 outputs from 4 inputs.
  ASSERT_EQ(prog.compute_sets.size(), 3u);
  for (const auto& v : trace::expanded(prog.compute_sets[1]).vertices) {
    EXPECT_EQ(v.params[sl::kReduceOutputs], 64);
    EXPECT_EQ(v.params[sl::kReduceInputs], 5);
  }
  for (const auto& v : trace::expanded(prog.compute_sets[2]).vertices) {
    EXPECT_EQ(v.params[sl::kReduceOutputs], 16);
    EXPECT_EQ(v.params[sl::kReduceInputs], 4);
  }
  // Each stage is one reduce-scatter record over the one group of 20 tiles (trace v6).
  for (const trace::Exchange* ex : {&prog.exchanges[1], &prog.exchanges[2]}) {
    EXPECT_TRUE(ex->transfers.empty());
    ASSERT_EQ(ex->reduce_scatters.size(), 1u);
    EXPECT_EQ(ex->reduce_scatters[0].groups,
              (std::vector<trace::ReduceScatter::Groups>{{0, 0, 1, 320}}));
  }
}

// Every output block's reduction, with several row and output-channel blocks (the last of each
// smaller) in either tile order: the emitted stages are the transfers of each owner from its
// stage peers, block by block, as the stages define them (docs/kernels.md).
TEST(Planner, ReduceStagesOfEveryBlockAreEachOwnersTransfers) {
  for (const TileOrder order : {TileOrder::kStandard, TileOrder::kInputOuter})
    for (const std::uint32_t in_split : {2u, 3u, 7u, 20u}) {
      ConvArgs a;
      a.height = 21;     // rows: blocks of 8, 8, 5
      a.out_chans = 40;  // blocks of 16, 16, 8
      a.in_chans = 16 * in_split;
      ConvPlan p;
      p.order = order;
      p.row_split = 3;
      p.rows_per_tile = 8;
      p.out_split = 3;
      p.out_per_tile = 16;
      p.in_split = in_split;
      p.in_per_tile = 16;
      trace::IpuProgram prog;
      std::vector<trace::Step> steps;
      emit_conv(prog, "mm/", testing::gc200_by_hand(), a, p, steps);
      const auto [stages, fan_in] = reduction_stages(in_split);
      ASSERT_EQ(prog.exchanges.size(), 1u + stages);
      std::uint64_t stride = 1;
      for (int t = 0; t < stages; ++t, stride *= fan_in) {
        const trace::Exchange& ex = prog.exchanges[1 + t];
        ASSERT_EQ(ex.reduce_scatters.size(), 1u);
        std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>> want, got;
        for (std::uint32_t r = 0; r < 3; ++r)
          for (std::uint32_t o = 0; o < 3; ++o) {
            const std::uint64_t outputs = (r == 2 ? 5 : 8) * (o == 2 ? 8 : 16);
            const std::uint64_t size = (outputs + in_split - 1) / in_split;
            for (std::uint64_t k = 0; k < in_split; ++k) {
              std::uint64_t n = 0;  // the chunks c = k mod (stride x fan_in)
              for (std::uint64_t c = k % (stride * fan_in); c < in_split; c += stride * fan_in)
                n += c * size >= outputs ? 0 : std::min(size, outputs - c * size);
              if (n == 0) continue;
              for (std::uint64_t s = 0; s < in_split; ++s)  // peers: differ in digit t only
                if (s != k && s % stride == k % stride &&
                    s / (stride * fan_in) == k / (stride * fan_in))
                  want.emplace_back(plan_tile(p, 0, r, static_cast<std::uint32_t>(s), o),
                                    plan_tile(p, 0, r, static_cast<std::uint32_t>(k), o), n * 2);
            }
          }
        ex.for_each([&](const trace::TransferView& v) {
          got.emplace_back(v.src.first, v.dst[0].first, v.bytes);
        });
        EXPECT_EQ(got, want) << static_cast<int>(order) << " " << in_split << " stage " << t;
      }
    }
}

}  // namespace
}  // namespace ipusim::plan

namespace ipusim::plan {
namespace {

void expect_same_plan(const ConvPlan& a, const ConvPlan& b) {
  EXPECT_EQ(a.row_split, b.row_split);
  EXPECT_EQ(a.out_split, b.out_split);
  EXPECT_EQ(a.in_split, b.in_split);
  EXPECT_EQ(a.group_split, b.group_split);
  EXPECT_EQ(a.rows_per_tile, b.rows_per_tile);
  EXPECT_EQ(a.out_per_tile, b.out_per_tile);
  EXPECT_EQ(a.in_per_tile, b.in_per_tile);
  EXPECT_EQ(a.serial_in, b.serial_in);
  EXPECT_EQ(a.serial_out, b.serial_out);
  EXPECT_EQ(a.estimated_cycles.count, b.estimated_cycles.count);
  EXPECT_EQ(a.bytes_per_tile.count, b.bytes_per_tile.count);
}

// plan/prefetch.hpp: a plan made ahead on the second thread is the plan made when needed,
// whether the second thread made it, the taker made it (not started yet), or it was still
// being made; a plan never asked for is not there; plan_conv's error reaches the taker.
TEST(PlanPrefetcher, APlanMadeAheadIsThePlanMadeWhenNeeded) {
  const ChipSpec chip = testing::gc200_by_hand();
  const std::vector<ConvArgs> convs = {matmul_args(8192, 8192, 8192), matmul_args(2048, 2048, 2048),
                                       matmul_args(384, 1024, 4096), matmul_args(1, 3, 16)};
  const std::uint64_t budget = kAvailable / 2;
  PlanPrefetcher ahead(chip);
  for (std::size_t i = 0; i < convs.size(); ++i)
    ahead.request("conv" + std::to_string(i), convs[i], budget);
  ahead.request("conv0", convs[1], budget);  // a key asked for again keeps its first conv
  // Taken in reverse: the last ones are likely not started yet, the first made or in progress.
  for (std::size_t i = convs.size(); i-- > 0;) {
    const auto made = ahead.take("conv" + std::to_string(i), budget);
    ASSERT_TRUE(made.has_value());
    expect_same_plan(*made, plan_conv(chip, convs[i], budget));
  }
  EXPECT_FALSE(ahead.take("conv0", budget + 1).has_value());
  EXPECT_FALSE(ahead.take("never", budget).has_value());
  // No tile mapping of a 10^12-wide matmul fits the chip: plan_conv's ModelError (as
  // Limits.KernelTooLargeForTheChip), thrown by take().
  const std::uint64_t huge = 1'000'000'000'000;
  PlanPrefetcher failing(chip);
  failing.request("huge", matmul_args(huge, huge, huge), budget);
  EXPECT_THROW(failing.take("huge", budget), ModelError);
}

}  // namespace
}  // namespace ipusim::plan
