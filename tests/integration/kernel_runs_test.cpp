// SPDX-License-Identifier: Apache-2.0
// Reference kernels run through the SystemC model; cycle counts are computed by hand in each
// test from the GC200 parameters (4 B/cycle/tile exchange, 100-cycle exchange overhead,
// 90-cycle sync, 46 tiles per column, 12-cycle compute-set overhead).
#include <gtest/gtest.h>

#include "cli_harness.hpp"

namespace ipusim::testing {
namespace {

// Writes kernel `args` to a trace, runs it and returns stats.json.
std::string run_kernel(const TempDir& dir, const std::string& args,
                       const std::string& run_args = "") {
  const std::string trace = dir.file("k.trace");
  const auto k = ipusim("kernel " + args + " --out " + trace);
  EXPECT_EQ(k.status, 0) << k.err;
  const auto r = ipusim("run --out " + dir.file("out") + " " + run_args + " " + trace);
  EXPECT_EQ(r.status, 0) << r.err;
  return read_all(dir.file("out/stats.json"));
}

double total_cycles(const std::string& stats) { return json_value_after(stats, "\"total\""); }

TEST(KernelRun, SyncLoopIsIterationsTimesSyncLatency) {
  TempDir dir;
  const std::string stats = run_kernel(dir, "sync-loop --iterations 1000");
  EXPECT_EQ(total_cycles(stats), 1000.0 * 90);
}

TEST(KernelRun, SyncLoopMemoisedEqualsFullEvaluation) {
  TempDir dir;
  const std::string memo = run_kernel(dir, "sync-loop --iterations 5000");
  const std::string full = run_kernel(dir, "sync-loop --iterations 5000", "--full-loops");
  EXPECT_EQ(memo, full);
}

TEST(KernelRun, AllToAllOnEightTiles) {
  TempDir dir;
  // Each of 8 tiles sends 7 x 1 KiB and receives 7 x 1 KiB: 7168 / 4 = 1792 cycles, + 100
  // fixed, all in column 0 (no latency term), after one 90-cycle sync.
  const std::string stats = run_kernel(dir, "exchange-all-to-all --bytes 1024 --tiles 8");
  EXPECT_EQ(total_cycles(stats), 90.0 + 100 + 1792);
}

TEST(KernelRun, BroadcastUsesSuperTilePairs) {
  TempDir dir;
  // Tile 0 sends 4096 B once: 1024 cycles. Tile 1 (its pair partner is the sender) receives
  // alone at 4 B/cycle: 1024 cycles; tiles 2..15 receive in pairs at 8 B/cycle: 512 cycles.
  const std::string stats = run_kernel(dir, "exchange-broadcast --bytes 4096 --tiles 16");
  EXPECT_EQ(total_cycles(stats), 90.0 + 100 + 1024);
  // Broadcasting over 92 tiles crosses into column 1: one more cycle of latency.
  TempDir dir2;
  const std::string wide = run_kernel(dir2, "exchange-broadcast --bytes 4096 --tiles 92");
  EXPECT_EQ(total_cycles(wide), 90.0 + 100 + 1024 + 1);
}

TEST(KernelRun, ElementwiseReluOnFourTiles) {
  TempDir dir;
  // 6144 half elements over 4 tiles = 1536 per tile. UnaryOp1D (docs/codelets.md):
  // per worker ceil(1536 / 6) = 256 elements = 64 vectors of 4 half; relu c = 2:
  // 11 + 9 + 6 x (17 + 64 x (2 + 4)) = 2426, + 12 compute-set overhead = 2438.
  const std::string stats =
      run_kernel(dir, "elementwise --op relu --n 6144 --set chip.tiles=4", "--set chip.tiles=4");
  EXPECT_EQ(total_cycles(stats), 2438.0);
}

double flops(const std::string& stats) {
  return json_value_after(stats.substr(stats.find("\"throughput\"")), "\"flops\"");
}

TEST(KernelRun, Matmul8192RunsWithASerialSplit) {
  // No parallel split of 8192^3 half fits in a GC200 tile (tests/unit/planner_test.cpp), so
  // the planner loops serially. Every MAC runs once: 2 x 8192^3 FLOP, plus at most one add
  // per output and iteration for accumulating and reducing partials (< 1%).
  TempDir dir;
  const std::string stats = run_kernel(dir, "matmul --m 8192 --n 8192 --k 8192 --dtype half");
  const double mm = 2.0 * 8192 * 8192 * 8192;
  EXPECT_GE(flops(stats), mm);
  EXPECT_LE(flops(stats), mm * 1.01);
}

TEST(KernelRun, GroupedMatmul) {
  // 32 groups of 512 x 64 x 512 (M x K x N): 2 x 32 x 512 x 512 x 64 FLOP of MACs, plus at
  // most 3 partial additions per output (K = 64 is 4 input-channel groups of 16).
  TempDir dir;
  const std::string stats = run_kernel(dir, "matmul --m 512 --n 512 --k 64 --groups 32");
  const double mm = 2.0 * 32 * 512 * 512 * 64;
  EXPECT_GE(flops(stats), mm);
  EXPECT_LE(flops(stats), mm + 3.0 * 32 * 512 * 512);
  const auto bad =
      ipusim("kernel matmul --m 8 --n 8 --k 8 --groups 0 --out " + dir.file("g.trace"));
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--groups"), std::string::npos) << bad.err;
  const auto help = ipusim("kernel --help");
  EXPECT_NE(help.out.find("--groups"), std::string::npos) << help.out;
}

TEST(KernelRun, TraceForAnotherChipIsRejected) {
  TempDir dir;
  const std::string trace = dir.file("k.trace");
  ASSERT_EQ(ipusim("kernel exchange-broadcast --bytes 64 --out " + trace).status, 0);
  const auto r = ipusim("run --set chip.tiles=736 " + trace);
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("1471"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("736"), std::string::npos) << r.err;
}

TEST(KernelRun, TextAndBinaryTracesGiveIdenticalStats) {
  TempDir dir;
  ASSERT_EQ(ipusim("kernel matmul --m 256 --n 256 --k 256 --out " + dir.file("m.trace")).status, 0);
  ASSERT_EQ(ipusim("kernel matmul --m 256 --n 256 --k 256 --out " + dir.file("m.itb")).status, 0);
  ASSERT_EQ(ipusim("run -q --out " + dir.file("a") + " " + dir.file("m.trace")).status, 0);
  ASSERT_EQ(ipusim("run -q --out " + dir.file("b") + " " + dir.file("m.itb")).status, 0);
  std::string a = read_all(dir.file("a/stats.json"));
  std::string b = read_all(dir.file("b/stats.json"));
  // Only the file name differs.
  a.replace(a.find("m.trace"), 7, "m.X");
  b.replace(b.find("m.itb"), 5, "m.X");
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace ipusim::testing
