// SPDX-License-Identifier: Apache-2.0
// Instruction-level tile model (docs/tile-model.md): the engine's barrel, port, issue and
// latency rules on small programs, and codelet bundle programs, with counts worked by hand.
#include <gtest/gtest.h>

#include "ipusim/tile/codelets.hpp"
#include "ipusim/tile/ops.hpp"
#include "ipusim/tile/program.hpp"
#include "test_chips.hpp"

namespace ipusim {
namespace {

using tile::OpClass;
using trace::Codelet;
using u64 = std::uint64_t;

trace::Vertex vertex(Codelet c, std::initializer_list<std::int64_t> params) {
  trace::Vertex v;
  v.codelet = c;
  std::size_t i = 0;
  for (const auto p : params) v.params[i++] = p;
  return v;
}

constexpr std::int64_t kHalf = 0, kFloat = 1;

tile::WorkerProgram straight(u64 n, tile::Bundle b = tile::bundle(OpClass::kAdd)) {
  tile::WorkerProgram p;
  p.straight(b, n);
  return p;
}

TEST(TileEngine, BarrelIssuesOneBundlePerContextPerRound) {
  const ChipSpec chip = testing::gc200_by_hand();
  std::vector<tile::WorkerProgram> ws(6, straight(10));
  // Worker i issues its k-th bundle at cycle 6k + i: the last ends at 60, the first at 55.
  const tile::RunTiming t = tile::run_workers(chip, ws, 0);
  EXPECT_EQ(t.last_exit, 60u);
  EXPECT_EQ(t.first_exit, 55u);
  EXPECT_EQ(t.cycles, 60u);
  // A supervisor tail of 12 after the first exit ends at 67 (rule 3).
  EXPECT_EQ(tile::run_workers(chip, ws, 12).cycles, 67u);
  // An idle context's turn is still an empty cycle: one worker of 10 bundles ends at 6 x 9 + 1.
  EXPECT_EQ(tile::run_workers(chip, {straight(10)}, 0).cycles, 55u);
}

TEST(TileEngine, RptIsZeroOverheadAndSkipsAheadExactly) {
  ChipSpec chip = testing::gc200_by_hand();
  chip.tile.rpt_count_max = 1000000;
  tile::WorkerProgram p;
  p.rpt({tile::bundle(OpClass::kLd64), tile::bundle(OpClass::kAdd), tile::bundle(OpClass::kSt64)},
        100000);
  // One rpt bundle + 3 x 100000 body bundles per worker, 6 cycles each.
  std::vector<tile::WorkerProgram> ws(6, p);
  EXPECT_EQ(tile::run_workers(chip, ws, 0).cycles, 6u * (1 + 300000));
  EXPECT_EQ(tile::run_workers(chip, ws, 0).bundles, 6u * (1 + 300000));
  // Past rpt_count_max the loop is re-armed: ceil(100000 / 4095) = 25 rpt bundles.
  chip.tile.rpt_count_max = 4095;
  EXPECT_EQ(tile::run_workers(chip, ws, 0).cycles, 6u * (25 + 300000));
}

TEST(TileEngine, MemoryPortOverflowHoldsTheBarrel) {
  ChipSpec chip = testing::gc200_by_hand();
  tile::Bundle wide = tile::bundle(OpClass::kLd64);
  wide.load_bytes = 16;  // 16 B on the 8 B/cycle plain port: 2 cycles
  tile::WorkerProgram p;
  p.rpt({wide}, 1000);
  std::vector<tile::WorkerProgram> ws(6, p);
  // Round of rpt bundles: 6 cycles; then 1000 rounds of 6 x 2 cycles.
  EXPECT_EQ(tile::run_workers(chip, ws, 0).cycles, 6u + 12000);
  chip.memory.load_bytes_per_cycle = BytesPerCycle{16};
  EXPECT_EQ(tile::run_workers(chip, ws, 0).cycles, 6u + 6000);
}

TEST(TileEngine, SingleIssueSplitsPairedBundles) {
  ChipSpec chip = testing::gc200_by_hand();
  const auto pair = tile::bundle(OpClass::kLd64, OpClass::kFvArith);
  std::vector<tile::WorkerProgram> ws(6, straight(10, pair));
  EXPECT_EQ(tile::run_workers(chip, ws, 0).cycles, 60u);
  chip.tile.issue_width = 1;
  EXPECT_EQ(tile::run_workers(chip, ws, 0).cycles, 120u);  // two turns per bundle
}

TEST(TileEngine, LatencyExposedWithFewerContextsThanPipelineDepth) {
  ChipSpec chip = testing::gc200_by_hand();
  chip.worker_contexts = 3;
  std::vector<tile::WorkerProgram> ws(
      3, straight(10, tile::bundle(OpClass::kLd64, OpClass::kFnop, true)));
  // Each context waits 6 cycles for its last load: context 2 issues at 2, 8, ..., 56.
  EXPECT_EQ(tile::run_workers(chip, ws, 0).cycles, 57u);
}

TEST(TileEngine, SkippedSteadyStateMatchesTurnByTurnUnderStalls) {
  ChipSpec chip = testing::gc200_by_hand();
  chip.worker_contexts = 3;  // fewer contexts than the 6-cycle latency: every other turn stalls
  const tile::Bundle dep = tile::bundle(OpClass::kLd64, OpClass::kFnop, true);
  // Straight line (no skipping): context c issues at c, c + 6, ..., c + 6 x 999.
  std::vector<tile::WorkerProgram> flat(3, straight(1000, dep));
  EXPECT_EQ(tile::run_workers(chip, flat, 0).cycles, 2u + 6 * 999 + 1);
  // As an rpt (skipped ahead): the rpt bundle's result is ready a cycle later, so the body
  // starts at the next turn, c + 3, then every 6: the last ends at 2 + 3 + 6 x 999 + 1.
  tile::WorkerProgram r;
  r.rpt({dep}, 1000);
  std::vector<tile::WorkerProgram> looped(3, r);
  EXPECT_EQ(tile::run_workers(chip, looped, 0).cycles, 2u + 3 + 6 * 999 + 1);
}

TEST(TileEngine, SupervisorLoopsChargeBrnzdecExceptOnTheLastIteration) {
  const ChipSpec chip = testing::gc200_by_hand();
  // 4 x (2 simple + 1 control) + 3 taken brnzdec (6) + 1 falling through (1).
  EXPECT_EQ(tile::supervisor_cycles(chip, {tile::loop(4, {tile::simple(2), tile::control(1)})}),
            4u * 8 + 3 * 6 + 1);
  // Weight load: 512 B at 16 B/cycle (ld128putcs); with 64-bit loads (ld64putcs) at 8 B/cycle.
  EXPECT_EQ(tile::supervisor_cycles(chip, {tile::weight_load(512, 0)}), 32u);
  EXPECT_EQ(tile::supervisor_cycles(chip, {tile::weight_load(512, 128)}), 32u);
  EXPECT_EQ(tile::supervisor_cycles(chip, {tile::weight_load(512, 64)}), 64u);
}

// ----- Codelet programs counted by hand ------------------------------------------------------

TEST(TileCodelets, BinaryAddHalfCountedByHand) {
  const ChipSpec chip = testing::gc200_by_hand();
  // 240 half = 60 vectors, 10 per worker. Worker: 20 prologue + 2 preload + rpt bundle +
  // 9 x 3 body + 2 drain + 4 tail checks + exit = 57 bundles; run max(6 x 57, 337 + 6 sync)
  // = 343; supervisor 3 + runall 6 + 343 + 1 = 353.
  const auto v = vertex(Codelet::kBinary, {0 /*add*/, kHalf, 240});
  EXPECT_EQ(tile::isa_vertex_cycles(chip, v), 353u);
}

TEST(TileCodelets, UnaryReluHalfCountedByHand) {
  const ChipSpec chip = testing::gc200_by_hand();
  // 1536 half = 384 vectors, 64 per worker. Worker: 12 + 64 x (load, 2 relu, store, add,
  // brnzdec) + 4 + exit = 401; run max(2406, 2401 + 6) = 2407; supervisor 12 + 6 + 2407 + 1.
  const auto v = vertex(Codelet::kUnary, {6 /*relu*/, kHalf, 1536});
  EXPECT_EQ(tile::isa_vertex_cycles(chip, v), 2426u);
}

TEST(TileCodelets, Amp1x1HalfFloatOnePassCountedByHand) {
  const ChipSpec chip = testing::gc200_by_hand();
  // 24 positions, 16 in, 8 out, half->float (8 engines): one pass, 4 positions per worker.
  // Worker: 11 set-up + fill 3 x 4 + rpt bundle + 1 x 4 body + drain 3 x 4 + exit = 41;
  // run max(246, 241 + 2 + 6) = 249. Output group: 1 + 6 (pointer) + put 6 + weights
  // 8 x 16 x 2 B / 16 = 16 + zero flag 1 + runall 6 + 249 = 285, + brnzdec 1 = 286.
  // Zeroing input group: 5 + 286 = 291. Conv group: 1 + 12 + 291 = 304. Vertex: 8 + 42 (state)
  // + 304 + brnzdec 1 = 355.
  const auto v = vertex(Codelet::kAmpConv1x1, {kHalf, kFloat, 24, 16, 8, 1, 0});
  EXPECT_EQ(tile::isa_vertex_cycles(chip, v), 355u);
}

TEST(TileCodelets, ReduceCountedByHandPastTheUnrollLimit) {
  const ChipSpec chip = testing::gc200_by_hand();
  // 960 half outputs = 120 accumulator groups of 8, 20 per worker (timed at 8 and 9 and
  // extended linearly). Per group: clear, rpt, 4 inputs x 2 loads, 2 read-outs, 2 stores,
  // pointer, brnzdec = 16. Worker 19 + 20 x 16 + exit = 340; run max(2040, 2035 + 6) = 2041;
  // supervisor 7 + 3 x 6 + runall 6 + 2041 + 1 = 2073.
  const auto v = vertex(Codelet::kReduce, {0 /*add*/, kHalf, kHalf, 960, 4});
  EXPECT_EQ(tile::isa_vertex_cycles(chip, v), 2073u);
}

TEST(TileCodelets, LongFusedMapAndHugeVerticesStayCheap) {
  const ChipSpec chip = testing::gc200_by_hand();
  // 1000 fused-op turns per vector (held turns past 64 bundles time the same): 60 vectors, 10
  // per worker. Worker 20 + 10 x (2 loads + 1000 + store + add + brnzdec) + 4 + exit = 10075;
  // run max(60450, 60445 + 6) = 60451; supervisor 3 + 6 + 60451 + 1.
  EXPECT_EQ(tile::isa_vertex_cycles(chip, vertex(Codelet::kMap, {kHalf, 240, 1000, 50})), 60461u);
  // 2^40 - 1 int -> half: two bundles per element on each of 6 workers, so at least 2 cycles
  // per element; the rpt is re-armed every 4095 iterations (held turns, not simulated).
  const std::int64_t n = (std::int64_t{1} << 40) - 1;
  const u64 cast = tile::isa_vertex_cycles(chip, vertex(Codelet::kCast, {2 /*int*/, kHalf, n}));
  EXPECT_GE(cast, 2 * static_cast<u64>(n));
  EXPECT_LE(cast, 2 * static_cast<u64>(n) + 2 * static_cast<u64>(n) / 4095 + 1000);
}

TEST(TileCodelets, HalfTransposeMovesTwoElementsPerCycle) {
  const ChipSpec chip = testing::gc200_by_hand();
  // 4x4 half blocks: 4 loads + 4 stores with the 8 shuffles beside them = 8 bundles per 16
  // elements. n = 96k: k blocks per worker; worker 42 + rpt + 8k + exit; run 6(8k + 44) + 1;
  // supervisor 3 + 6 + run + 1 = 275 + n/2. The closed form (poplin's regroup estimate, one
  // element per cycle) charges 288 + n: docs/tile-model.md.
  for (const u64 k : {10u, 100u, 1000u}) {
    const auto v = vertex(Codelet::kTranspose, {kHalf, static_cast<std::int64_t>(96 * k)});
    EXPECT_EQ(tile::isa_vertex_cycles(chip, v), 275 + 48 * k);
  }
}

}  // namespace
}  // namespace ipusim
