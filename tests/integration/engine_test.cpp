// SPDX-License-Identifier: Apache-2.0
// Exactness of the fast engine (docs/performance.md): on every reference kernel, the fast
// engine (one process per IPU, cached phase costs, memoised loops) and the reference engine
// (one process per tile, every phase costed on every execution, every loop iteration run) give
// byte-identical stats.json and per-tile statistics. Loop memoisation is also checked against
// full evaluation, and both against the reference engine, on programs with nested loops, host
// copies and group steps. Small tile counts keep the reference engine quick.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cli_harness.hpp"

namespace ipusim::testing {
namespace {

std::string system_file(const std::string& name) {
  return source_dir() + "/configs/systems/" + name + ".yaml";
}

struct Outcome {
  std::string stats;  // stats.json
  std::string tiles;  // --tile-stats CSV
};

Outcome run_trace(const TempDir& dir, const std::string& trace, const std::string& tag,
                  const std::string& args) {
  const auto r = ipusim("run -q " + args + " --out " + dir.file(tag) + " --tile-stats " +
                        dir.file(tag + ".csv") + " " + trace);
  EXPECT_EQ(r.status, 0) << tag << ": " << r.err;
  return {read_all(dir.file(tag + "/stats.json")), read_all(dir.file(tag + ".csv"))};
}

// The first line where two texts differ, with its number, or "" if they are equal.
std::string first_difference(const std::string& a, const std::string& b) {
  if (a == b) return "";
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(sa, la));
    const bool more_b = static_cast<bool>(std::getline(sb, lb));
    if (!more_a && !more_b) return "texts differ";
    if (la != lb || more_a != more_b)
      return fmt_args("line ", line, ": '", more_a ? la : "<end>", "' vs '", more_b ? lb : "<end>",
                      "'");
  }
}

void expect_identical(const Outcome& a, const Outcome& b, const std::string& what) {
  ASSERT_FALSE(a.stats.empty()) << what;
  ASSERT_FALSE(a.tiles.empty()) << what;
  EXPECT_EQ(first_difference(a.stats, b.stats), "") << what << " (stats.json)";
  EXPECT_EQ(first_difference(a.tiles, b.tiles), "") << what << " (per-tile CSV)";
}

// Writes kernel `args` for a chip of `tiles` tiles (optionally a system) and checks that both
// engines give the same results.
void check_kernel(const std::string& args, std::uint32_t tiles, const std::string& run_args = "") {
  TempDir dir;
  const std::string chip = fmt_args("--set chip.tiles=", tiles);
  const std::string trace = dir.file("k.itb");
  const auto k = ipusim("kernel " + args + " " + chip + " --out " + trace);
  ASSERT_EQ(k.status, 0) << args << ": " << k.err;
  const Outcome fast = run_trace(dir, trace, "fast", chip + " " + run_args);
  const Outcome ref = run_trace(dir, trace, "reference", chip + " --engine reference " + run_args);
  expect_identical(fast, ref, args + " " + run_args);
}

TEST(Engine, MatmulHalfIdentical) { check_kernel("matmul --m 512 --n 256 --k 1024", 64); }
TEST(Engine, MatmulFloatWithEdgeBlocksIdentical) {
  check_kernel("matmul --m 96 --n 80 --k 200 --dtype float", 32);
}
TEST(Engine, Conv2d3x3Identical) {
  check_kernel("conv2d --batch 2 --channels 32 --height 14 --width 14 --filters 64 --kernel 3", 64);
}
TEST(Engine, Conv2dStride2Identical) {
  check_kernel("conv2d --channels 64 --height 28 --width 28 --filters 32 --stride 2", 48);
}
TEST(Engine, ReduceIdentical) { check_kernel("reduce --outputs 5000 --inputs 7", 64); }
TEST(Engine, ElementwiseUnaryIdentical) { check_kernel("elementwise --op gelu --n 100000", 64); }
TEST(Engine, ElementwiseBinaryIdentical) {
  check_kernel("elementwise --op add --n 777 --dtype float", 100);
}
TEST(Engine, ExchangeAllToAllIdentical) {
  // 100 tiles: transfers cross column boundaries (46 tiles per column).
  check_kernel("exchange-all-to-all --bytes 1024 --tiles 40", 100);
}
TEST(Engine, ExchangeBroadcastIdentical) {
  check_kernel("exchange-broadcast --bytes 4096 --tiles 120 --src 7", 128);
  // The sender's super-tile partner receives alone; odd sizes exercise the rounding.
  check_kernel("exchange-broadcast --bytes 999 --tiles 93 --src 92", 96);
}
TEST(Engine, SyncLoopIdentical) { check_kernel("sync-loop --iterations 300", 16); }

// System kernels: group steps go through the same Fabric in both engines.
TEST(Engine, SystemAllReduceIdentical) {
  const std::string pod16 = "--system " + system_file("pod16");
  check_kernel("allreduce --bytes 1048576 --group 16", 32, pod16);
  check_kernel("allreduce --bytes 1048576 --group 16", 32, pod16 + " --all-replicas");
}
TEST(Engine, SystemCollectiveLinkAndSyncIdentical) {
  const std::string pod16 = "--system " + system_file("pod16");
  check_kernel("collective --collective reduce_scatter --bytes 65536 --group 8 --method ring", 32,
               pod16);
  check_kernel("link-p2p --bytes 100000 --src-ipu 0 --dst-ipu 5", 32, pod16);
  check_kernel("sync --group 16 --iterations 5", 32, pod16);
}

// A program with every on-chip step kind inside nested loops, and background host transfers
// (which stall the program when the next one is issued before the last has landed):
// memoised loops (default), full evaluation and the reference engine must agree exactly.
constexpr const char* kLoops = R"(ipusim-trace 2
name loops
ipu 0
tensor a kind=activation dtype=half tiles=0..15 bytes=4096
computeset work
  vertex tiles=0..7 amp_conv1x1 in=half partials=float positions=64 in_chans=32 out_chans=16
  vertex tiles=4..15 binary op=mul dtype=half n=300
  vertex tiles=15 copy bytes=0
end
computeset tail
  vertex tiles=3 reduce op=max in=float out=half outputs=40 inputs=3
end
exchange shuffle
  transfer src=0..7 dst=0..15 bytes=100 mode=personalised
  transfer src=9 dst=2..5,10..13 bytes=333 mode=multicast
end
exchange gather
  transfer src=1..14 dst=0 bytes=64
end
program
  host to_ipu tiles=0..15 bytes=2048
  host to_ipu tiles=0..15 bytes=65536 overlap=yes
  repeat 3
    host to_ipu tiles=0..15 bytes=8192 overlap=yes
    compute work
    sync
    repeat 4
      exchange shuffle
      sync
      compute tail
    end
    exchange gather
  end
  repeat 2
    host from_ipu tiles=0..3 bytes=512 memory=host
    repeat 5
      compute tail
    end
  end
  host from_ipu tiles=0..15 bytes=65536 overlap=yes
end
)";

TEST(Engine, NestedLoopsMemoisedFullAndReferenceIdentical) {
  TempDir dir;
  const std::string trace = dir.file("loops.trace");
  std::ofstream(trace) << kLoops;
  const std::string chip = "--set chip.tiles=16";
  const Outcome memo = run_trace(dir, trace, "memo", chip);
  const Outcome full = run_trace(dir, trace, "full", chip + " --full-loops");
  const Outcome ref = run_trace(dir, trace, "ref", chip + " --engine reference");
  expect_identical(memo, full, "memoised vs full loops");
  expect_identical(memo, ref, "fast vs reference");
}

// A 2-stage pipeline x 2 replicas in a loop, with stages of different lengths, an inter-IPU
// copy and a collective: memoised loops, full loops, the reference engine, each replica
// symmetric and with every replica simulated.
constexpr const char* kPipelineLoop = R"(ipusim-trace 2
name pipeline_loop
replicas 2
global_exchange acts
  copy src=0 dst=1 bytes=1048576
end
ipu 0
tensor x kind=activation dtype=half tiles=0..31 bytes=8000
computeset fwd
  vertex tiles=0..31 copy bytes=8000
end
program
  repeat 3
    compute fwd
    global_exchange acts
    sync group=replica
  end
end
ipu 1
tensor y kind=activation dtype=half tiles=0..31 bytes=8000
computeset fwd
  vertex tiles=0..15 copy bytes=16000
end
program
  repeat 3
    global_exchange acts
    compute fwd
    sync group=replica
    collective all_reduce bytes=4194304 dtype=half group=replicas method=auto
  end
end
)";

TEST(Engine, PipelineLoopMemoisedFullReferenceAndReplicasIdentical) {
  TempDir dir;
  const std::string trace = dir.file("pipe.trace");
  std::ofstream(trace) << kPipelineLoop;
  const std::string sys = "--system " + system_file("pod16") + " --set chip.tiles=32";
  const Outcome memo = run_trace(dir, trace, "memo", sys);
  const Outcome full = run_trace(dir, trace, "full", sys + " --full-loops");
  const Outcome ref = run_trace(dir, trace, "ref", sys + " --engine reference");
  expect_identical(memo, full, "memoised vs full loops");
  expect_identical(memo, ref, "fast vs reference");
  const Outcome all_fast = run_trace(dir, trace, "all_fast", sys + " --all-replicas");
  const Outcome all_ref =
      run_trace(dir, trace, "all_ref", sys + " --all-replicas --engine reference");
  expect_identical(all_fast, all_ref, "fast vs reference, every replica simulated");
}

// Host input shares the host server's NIC and each machine's host link among the IPUs that
// take it (Fabric::host_cycles): on IPU-POD16 (one host server of 100 Gbit/s, machines of 4
// IPUs with a 100 Gbit/s host link and 15.75 GB/s PCIe per IPU) 2 replicas of 2 IPUs sit on
// machine 0. With IPU 0 of each replica alone reading the input, 2 IPUs share 12.5 GB/s: 6.25
// GB/s each; with both IPUs of each replica, 4 share it: 3.125 GB/s. By hand, for 1,024 tiles
// of 6,104 B (6,250,496 B) at 1.325 GHz: 7 us of gateway and host-link latency (9,275 cycles)
// plus ceil(6,250,496 / 6.25e9 x 1.325e9) = 1,325,106 cycles, or ceil(2,650,210.4) =
// 2,650,211 at 3.125 GB/s.
std::string host_input_trace(bool both_ipus_read) {
  std::string t =
      "ipusim-trace 2\nname host_share\nreplicas 2\nipu 0\nprogram\n"
      "  host to_ipu tiles=0..1023 bytes=6104 memory=host\nend\nipu 1\nprogram\n";
  t += both_ipus_read ? "  host to_ipu tiles=0..1023 bytes=6104 memory=host\n" : "  sync\n";
  return t + "end\n";
}

TEST(Engine, HostInputSharesTheHostLinksAmongTheIpusThatReadIt) {
  TempDir dir;
  const std::string sys = "--system " + system_file("pod16");
  for (const bool both : {false, true}) {
    const std::string trace = dir.file(both ? "both.trace" : "first.trace");
    std::ofstream(trace) << host_input_trace(both);
    const Outcome out = run_trace(dir, trace, both ? "both" : "first", sys);
    const auto ipu0 = out.stats.find("\"ipu\": [");
    ASSERT_NE(ipu0, std::string::npos);
    EXPECT_EQ(json_value_after(out.stats.substr(ipu0), "\"host\""),
              9275 + (both ? 2650211 : 1325106))
        << (both ? "both IPUs read" : "the first IPU reads");
  }
}

// A phase's weight load in phased training (docs/workloads.md "Phased training"): the reduced
// GPT's layer, 789,760 half weights = 1,579,520 B, sharded over 16 replicas of one IPU on
// IPU-POD16 (98,720 B each, PhasedTraining.EachPhaseLoadsItsWeightsOnceAndLoopsOverItsMicroBatches
// compiles it as 68 B on each of 1,472 tiles: 100,096 B). The 4 IPUs of a machine stream at
// once, sharing its gateway's DDR (57.6 GB/s / 4 = 14.4 GB/s, below the 15.75 GB/s PCIe link).
// By hand at 1.325 GHz: 2 us of gateway latency (2,650 cycles) plus
// ceil(100,096 / 14.4e9 x 1.325e9) = ceil(9,210.2) = 9,211 cycles: 11,861.
TEST(Engine, APhasesWeightLoadSharesTheGatewayDdrAmongItsMachinesIpus) {
  TempDir dir;
  const std::string trace = dir.file("phase.trace");
  std::ofstream(trace) << "ipusim-trace 2\nname phase_load\nreplicas 16\nipu 0\nprogram\n"
                          "  host to_ipu tiles=0..1471 bytes=68 memory=streaming\nend\n";
  const Outcome out = run_trace(dir, trace, "phase", "--system " + system_file("pod16"));
  const auto ipu0 = out.stats.find("\"ipu\": [");
  ASSERT_NE(ipu0, std::string::npos);
  EXPECT_EQ(json_value_after(out.stats.substr(ipu0), "\"streaming\""), 2650 + 9211);
}

// The Fabric reuses the method `auto` chose for a collective when the same collective starts
// again on idle links (docs/performance.md). Three identical all-reduces, each on idle links,
// must then take exactly three times as long as one, and load the links three times as much.
std::string auto_collectives(int count) {
  return fmt_args("ipusim-trace 2\nname ar\nreplicas 16\nipu 0\ncomputeset c\n",
                  "  vertex tiles=0..31 copy bytes=4096\nend\nprogram\n  repeat ", count, "\n",
                  "    compute c\n",
                  "    collective all_reduce bytes=8388608 dtype=half group=replicas method=auto\n",
                  "  end\nend\n");
}

TEST(Engine, RepeatedAutoCollectivesTakeTheSameTimeEach) {
  TempDir dir;
  std::ofstream(dir.file("one.trace")) << auto_collectives(1);
  std::ofstream(dir.file("three.trace")) << auto_collectives(3);
  const std::string sys = "--system " + system_file("pod16") + " --set chip.tiles=32";
  const Outcome one = run_trace(dir, dir.file("one.trace"), "one", sys);
  const Outcome three = run_trace(dir, dir.file("three.trace"), "three", sys);
  for (const char* anchor : {"\"total\"", "\"external_sync\"", "\"collective\"", "\"busy\""}) {
    const double a = json_value_after(one.stats, anchor);
    const double b = json_value_after(three.stats, anchor);
    EXPECT_GT(a, 0) << anchor;
    EXPECT_EQ(b, 3 * a) << anchor;
  }
  // The reference engine (every iteration run, same Fabric) agrees.
  const Outcome ref = run_trace(dir, dir.file("three.trace"), "ref", sys + " --engine reference");
  expect_identical(three, ref, "fast vs reference");
}

TEST(Engine, UnknownEngineIsAUsageError) {
  TempDir dir;
  const std::string trace = dir.file("k.trace");
  ASSERT_EQ(ipusim("kernel sync-loop --iterations 2 --out " + trace).status, 0);
  const auto r = ipusim("run --engine naive " + trace);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--engine: expected fast or reference"), std::string::npos) << r.err;
}

TEST(Engine, ReferenceEngineReportsModelErrorsLikeTheFastOne) {
  // AMP with float inputs and half partials is unsupported: the same error from both engines.
  TempDir dir;
  const std::string trace = dir.file("bad.trace");
  std::ofstream(trace) << "ipusim-trace 2\nipu 0\ncomputeset c\n"
                          "  vertex tiles=0..3 amp_conv1x1 in=float partials=half positions=4 "
                          "in_chans=8 out_chans=8\nend\nprogram\n  compute c\nend\n";
  const auto fast = ipusim("run --set chip.tiles=8 " + trace);
  const auto ref = ipusim("run --set chip.tiles=8 --engine reference " + trace);
  EXPECT_EQ(fast.status, 4) << fast.err;
  EXPECT_EQ(ref.status, fast.status) << ref.err;
  EXPECT_EQ(without_asan_stack_warning(ref.err), without_asan_stack_warning(fast.err));
}

}  // namespace
}  // namespace ipusim::testing
