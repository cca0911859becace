// SPDX-License-Identifier: Apache-2.0
// Systems end to end: `ipusim info --system`, all-reduce against the ring bound, a pipelined
// and replicated program against a hand calculation, and replica symmetry.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <utility>

#include "cli_harness.hpp"
#include "ipusim/util/json_reader.hpp"

namespace ipusim::testing {
namespace {

std::string system_file(const std::string& name) {
  return source_dir() + "/configs/systems/" + name + ".yaml";
}

double total_cycles(const std::string& stats) { return json_value_after(stats, "\"total\""); }

// Runs a collective kernel on a system and returns stats.json.
std::string run_collective(const TempDir& dir, const std::string& system, std::uint64_t bytes,
                           std::uint32_t group, const std::string& method,
                           const std::string& extra = "") {
  const std::string trace = dir.file("c.trace");
  const auto k = ipusim(fmt_args("kernel allreduce --bytes ", bytes, " --group ", group,
                                 " --method ", method, " --out ", trace));
  EXPECT_EQ(k.status, 0) << k.err;
  const auto r = ipusim("run -q --system " + system_file(system) + " --out " + dir.file("out") +
                        " " + extra + " " + trace);
  EXPECT_EQ(r.status, 0) << r.err;
  return read_all(dir.file("out/stats.json"));
}

TEST(SystemInfo, Pod256ShowsItsRacksAndGwLinks) {
  const auto r = ipusim("info --system " + system_file("pod256"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("IPUs              256 x GC200"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("racks             4 (torus each), joined over GW-Links"),
            std::string::npos);
  EXPECT_NE(r.out.find("GW-Link               64 bundles"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("64: 676 cycles"), std::string::npos) << r.out;
}

TEST(SystemInfo, InvalidSystemIsAClearError) {
  const auto r = ipusim("info --system " + system_file("pod16") + " --set system.racks=3");
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("power of two of at least 16; found 48 IPUs"), std::string::npos) << r.err;
}

// Ring bound of ipu-hardware.md §5: 2(N-1)/N x S / per-direction ring bandwidth, where a ring
// hop on a rail is 2 IPU-Links of 128 Gibit/s x 0.32.
double ring_bound_cycles(double bytes, double n) {
  const double ring = 2 * 128.0 * (1u << 30) / 8 * 0.32;
  return 2 * (n - 1) / n * bytes / ring * 1.325e9;
}

TEST(AllReduce, LargeMessagesWithinFifteenPercentOfTheRingBoundInAPod64) {
  for (std::uint64_t bytes : {64ull << 20, 256ull << 20}) {
    TempDir dir;
    const double cycles = total_cycles(run_collective(dir, "pod64", bytes, 64, "ring"));
    const double bound = ring_bound_cycles(static_cast<double>(bytes), 64);
    EXPECT_GE(cycles, bound) << bytes;
    EXPECT_LE(cycles, 1.15 * bound) << bytes;
  }
}

TEST(AllReduce, TimeGrowsWithSizeAndSmallMessagesAreSyncBound) {
  double previous = 0;
  for (std::uint64_t bytes : {1ull << 10, 1ull << 14, 1ull << 18, 1ull << 22, 1ull << 26}) {
    TempDir dir;
    const double cycles = total_cycles(run_collective(dir, "pod64", bytes, 64, "auto"));
    EXPECT_GT(cycles, previous) << bytes;
    previous = cycles;
  }
  // 1 KiB over 64 IPUs: the bandwidth term is ~0.1 cycle per hop; the external sync (676
  // cycles) and per-step handshakes dominate.
  TempDir dir;
  const std::string stats = run_collective(dir, "pod64", 1024, 64, "auto");
  const double sync = json_value_after(stats, "\"external_sync\"");
  const double bandwidth = ring_bound_cycles(1024, 64);
  EXPECT_EQ(sync, 676);
  EXPECT_GT(total_cycles(stats), 20 * bandwidth);
}

TEST(AllReduce, AClockWhatIfMovesOnlyTheOnChipPart) {
  // Link bandwidths and latencies are given in Gbit/s and seconds, not in IPU cycles: a 50 MiB
  // all-reduce over 16 IPUs is link-bound, so clocking the IPU 40% faster (1.325 -> 1.85 GHz)
  // changes its time by well under 1% (only the on-chip reduce and staging get faster) while
  // its cycle count grows with the clock.
  TempDir a, b;
  const std::string slow = run_collective(a, "pod16", 52428800, 16, "auto");
  const std::string fast =
      run_collective(b, "pod16", 52428800, 16, "auto", "--set chip.clock=1.85GHz");
  auto seconds = [](const std::string& stats) {
    return json_value_after(stats.substr(stats.find("\"total\"")), "\"time\"");
  };
  EXPECT_NEAR(seconds(fast), seconds(slow), 0.01 * seconds(slow));
  EXPECT_NEAR(total_cycles(fast) / total_cycles(slow), 1.85 / 1.325, 0.02);
}

TEST(AllReduce, Pod128AndPod256AddAGwLinkStage) {
  // 64 MiB per IPU: the same reduce-scatter and all-gather inside each POD64, plus an
  // all-reduce of the shards between racks over GW-Links.
  // With no GW-Link latency, a sync across the two racks of a POD128 costs what one inside
  // a POD64 does (64 IPUs in the fullest rack: 676 cycles), so the POD128 pays its GW stage's
  // bytes and the syncs of its two extra steps only.
  TempDir a, b, c;
  const std::string no_latency = "--set fabric.gw_link.latency=0s";
  const std::string s64 =
      run_collective(a, "pod64", 64ull << 20, 64, "bidirectional_ring", no_latency);
  const std::string s128 =
      run_collective(b, "pod128", 64ull << 20, 128, "bidirectional_ring", no_latency);
  const std::string s256 = run_collective(c, "pod256", 64ull << 20, 256, "bidirectional_ring");
  // The GW stage moves each IPU's 1 MiB shard (64 MiB / 64) between racks: half of it in
  // the reduce-scatter step and half in the all-gather step of a 2-rack ring, the 4 IPUs of
  // a machine sharing its 2 GW-Links of 100 Gbit/s x 0.85.
  const double gw = 2 * 100e9 / 8 * 0.85;
  const double stage = 4.0 * (1 << 20) / gw * 1.325e9;
  const double extra128 = total_cycles(s128) - total_cycles(s64) - 2 * 676;
  EXPECT_GE(extra128, stage);
  EXPECT_LE(extra128, 1.5 * stage);
  // POD256: a ring of 4 racks, each machine slot one GW-Link to each neighbour rack.
  EXPECT_GT(total_cycles(s256), total_cycles(s128));
  EXPECT_EQ(s64.find("gw:"), std::string::npos);
}

// Two pipeline stages (IPUs 0 and 1 of a replica) x 2 replicas on a POD16: stage 0 computes,
// copies its activations to stage 1, which computes; then each stage all-reduces its
// gradients with the same stage of the other replica.
constexpr const char* kPipeline = R"(ipusim-trace 2
name pipeline_2x2
replicas 2
global_exchange acts
  copy src=0 dst=1 bytes=1048576
end
ipu 0
computeset fwd
  vertex tiles=0 copy bytes=8000
end
program
  compute fwd
  global_exchange acts
  collective all_reduce bytes=4194304 dtype=half group=replicas method=ring
end
ipu 1
computeset fwd
  vertex tiles=0 copy bytes=8000
end
program
  global_exchange acts
  compute fwd
  collective all_reduce bytes=4194304 dtype=half group=replicas method=ring
end
)";

// The hand calculation of kPipeline's terms at 1.325 GHz (ipu-hardware.md,
// configs/parts/*.yaml), in cycles.
struct PipelineTerms {
  double compute, copy, allreduce;
};
PipelineTerms pipeline_terms() {
  const double hz = 1.325e9;
  const double link = 128.0 * (1u << 30) / 8 * 0.32 / hz;  // one IPU-Link, bytes/cycle
  const double hop_latency = 20;                           // ceil(15 ns x hz)
  PipelineTerms t{};
  // compute: copy vertex 288 + 8000 / 8 (memcpy 8 B/cycle) + 12 compute-set overhead.
  t.compute = 288 + 1000 + 12;
  // copy IPU0 -> IPU1 over their rung (4 links).
  t.copy = std::ceil(1048576 / (4 * link)) + hop_latency;
  // all-reduce of 4 MiB between IPUs two apart on a rail (2 links), ring of 2: one
  // reduce-scatter step (2 MiB each way), a reduction, one all-gather step; the second step
  // starts with another external sync (each step is a BSP superstep) of all 4 IPUs of both
  // replicas: ceil(2 x (1 + 4/4) x 15 ns x hz) = 80.
  const double step = std::ceil(2097152 / (2 * link)) + hop_latency;
  // Reduction: 2 MiB of half = 1048576 elements over 1472 tiles = 713 per tile; binary add
  // (docs/codelets.md): 11 + 6 x (26 + ceil(ceil(713 / 6) / 4) x (1 + 2)) = 11 + 6 x (26 + 30 x 3)
  // = 707, + 12 compute-set overhead + 90 internal sync.
  const double reduce = 11 + 6 * (26 + 30 * 3) + 12 + 90;
  t.allreduce = step + reduce + 80 + step;
  return t;
}

double run_pipeline(const std::string& trace_text) {
  TempDir dir;
  const std::string trace = dir.file("p.trace");
  std::ofstream(trace) << trace_text;
  const auto r =
      ipusim("run --system " + system_file("pod16") + " --out " + dir.file("out") + " " + trace);
  EXPECT_EQ(r.status, 0) << r.err;
  return total_cycles(read_all(dir.file("out/stats.json")));
}

TEST(Pipeline, TwoStagesTimesTwoReplicasMatchesAHandCalculation) {
  const auto t = pipeline_terms();
  // external sync: the trace sets no engine.sync_replicas_independently, so as Poplar's
  // default every sync spans all 4 IPUs of the trace: 80 cycles.
  const double sync4 = 80;
  // One program per replica (docs/topology.md "Sync domain"): every external sync involves
  // both IPUs of a replica, so the two stages' all-reduces run one after the other although
  // their rails are disjoint. IPU0 computes, both sync and copy; stage 0 all-reduces at once
  // (IPU1's compute runs meanwhile); stage 1's all-reduce starts when stage 0's has ended.
  EXPECT_EQ(run_pipeline(kPipeline), t.compute + sync4 + t.copy + 2 * (sync4 + t.allreduce));
}

// The same pipeline with replicas syncing independently (Poplar's
// target.syncReplicasIndependently): a sync involves every IPU of the replicas its step
// involves, no more. The inter-stage copy syncs replica 0's 2 IPUs,
// ceil(2 x (1 + 2/4) x 15 ns x 1.325 GHz) = 60 cycles; each all-reduce (stage i of both
// replicas) syncs all 4, both stages still one after the other.
TEST(Pipeline, IndependentReplicasSyncEveryIpuOfTheReplicasInvolved) {
  std::string text = kPipeline;
  text.replace(text.find("replicas 2\n"), 11,
               "replicas 2\nmeta engine.sync_replicas_independently true\n");
  const auto t = pipeline_terms();
  const double sync2 = 60, sync4 = 80;
  EXPECT_EQ(run_pipeline(text), t.compute + sync2 + t.copy + 2 * (sync4 + t.allreduce));
}

// A collective over every replica involves them all, so with replicas syncing independently
// each of its steps still syncs every IPU, in every phase: on a POD128 of one-IPU replicas the
// steps of the ring inside each rack sync both racks over the GW-Links, as they do by default
// (they once synced each rack on its own, making the all-reduce cheaper than by default).
TEST(AllReduce, OverEveryReplicaSyncsEveryIpuWhetherReplicasSyncIndependentlyOrNot) {
  TempDir a, b;
  const double global = total_cycles(run_collective(a, "pod128", 8ull << 20, 128, "ring"));
  std::string text = read_all(a.file("c.trace"));
  text.replace(text.find("replicas 128\n"), 13,
               "replicas 128\nmeta engine.sync_replicas_independently true\n");
  const std::string trace = b.file("independent.trace");
  std::ofstream(trace) << text;
  const auto r =
      ipusim("run -q --system " + system_file("pod128") + " --out " + b.file("out") + " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string stats = read_all(b.file("out/stats.json"));
  EXPECT_EQ(total_cycles(stats), global);
}

// Groups of some of a replica's IPUs run side by side when each IPU is its own Poplar replica
// (2-D tensor parallelism as popxl runs it): one replica of 4 IPUs, each all-reducing 4 MiB
// with the IPU two from it (`replica:2/2`: IPUs 0 and 2, 1 and 3, each pair on its own rail)
// takes one all-reduce of kPipeline's pairs after one sync of all 4 IPUs, not two one after
// the other as in one Poplar replica of 4 IPUs.
TEST(AllReduce, GroupsOfSomeOfAReplicasIpusRunSideBySide) {
  std::string text = "ipusim-trace 5\nreplicas 1\nmeta engine.single_ipu_replicas true\n";
  for (int i = 0; i < 4; ++i)
    text += fmt_args("ipu ", i,
                     "\nprogram\n  collective all_reduce bytes=4194304 dtype=half "
                     "group=replica:2/2 method=ring\nend\n");
  const auto t = pipeline_terms();
  const double sync4 = 80;
  EXPECT_EQ(run_pipeline(text), sync4 + t.allreduce);
  text.replace(text.find("meta engine.single_ipu_replicas true\n"), 37, "");
  EXPECT_EQ(run_pipeline(text), 2 * (sync4 + t.allreduce));
  // Syncing independently, each pair syncs its own 2 IPUs, ceil(2 x (1 + 2/4) x 15 ns x
  // 1.325 GHz) = 60 cycles, in both places.
  text.replace(text.find("replicas 1\n"), 11,
               "replicas 1\nmeta engine.sync_replicas_independently true\n"
               "meta engine.single_ipu_replicas true\n");
  const double sync2 = 60;
  EXPECT_EQ(run_pipeline(text), sync2 + t.allreduce - sync4 + sync2);
}

// Runs `trace_text` on a POD16 replica-symmetric and with every replica simulated; returns
// both stats.json files.
std::pair<std::string, std::string> symmetric_and_full(const std::string& trace_text) {
  TempDir dir;
  const std::string trace = dir.file("t.trace");
  std::ofstream(trace) << trace_text;
  const auto sym =
      ipusim("run -q --system " + system_file("pod16") + " --out " + dir.file("a") + " " + trace);
  const auto full = ipusim("run -q --all-replicas --system " + system_file("pod16") + " --out " +
                           dir.file("b") + " " + trace);
  EXPECT_EQ(sym.status, 0) << sym.err;
  EXPECT_EQ(full.status, 0) << full.err;
  return {read_all(dir.file("a/stats.json")), read_all(dir.file("b/stats.json"))};
}

TEST(Pipeline, ReplicaSymmetricEqualsFullSimulation) {
  const auto [a, b] = symmetric_and_full(kPipeline);
  EXPECT_EQ(total_cycles(a), total_cycles(b));
  EXPECT_NE(a.find("\"replica_symmetric\": true"), std::string::npos);
  EXPECT_NE(b.find("\"replica_symmetric\": false"), std::string::npos);
}

TEST(AllReduce, GroupsOfTwoAndOfAllReplicasAreDistinctGroups) {
  // Batch-norm style all-reduces over pairs of replicas, then one over all four: replicas 0
  // and 1 form pair 0 and all four form group 0 too, yet they are different groups. Every
  // replica simulated must give the replica-symmetric result (the pairs' collectives once
  // mixed with the all-replica one and the run stopped, IPUs waiting at different steps).
  const auto [a, b] = symmetric_and_full(
      "ipusim-trace 2\nreplicas 4\nipu 0\nprogram\n"
      "  collective all_reduce bytes=4096 dtype=float group=replicas:2\n"
      "  collective all_reduce bytes=4096 dtype=float group=replicas:2\n"
      "  collective all_reduce bytes=1048576 group=replicas\nend\n");
  EXPECT_EQ(total_cycles(a), total_cycles(b));
}

TEST(AllReduce, ReplicaSymmetricEqualsFullSimulation) {
  TempDir a, b;
  const double sym = total_cycles(run_collective(a, "pod64", 8ull << 20, 64, "auto"));
  const double full =
      total_cycles(run_collective(b, "pod64", 8ull << 20, 64, "auto", "--all-replicas"));
  EXPECT_EQ(sym, full);
}

TEST(Pipeline, MismatchedGroupStepsAreAnErrorNotAHang) {
  TempDir dir;
  const std::string trace = dir.file("bad.trace");
  std::ofstream(trace) << "ipusim-trace 2\nreplicas 2\nipu 0\nprogram\n"
                          "  collective all_reduce bytes=64 group=replicas\nend\n"
                          "ipu 1\nprogram\n  sync group=replica\nend\n";
  const auto r = ipusim("run --system " + system_file("pod16") + " " + trace);
  EXPECT_EQ(r.status, 4);
  EXPECT_NE(r.err.find("did not finish"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("waiting at"), std::string::npos) << r.err;
}

// Both ways a group step can go wrong leave a member's thread waiting in the fabric when the
// simulation stops: never arriving (IPU 1 waits for IPU 0's sync) and arriving at a different
// step (IPU 1's collective stops the run while IPU 0 waits in its own). The waiting thread is
// never resumed, so it must hold nothing that owns memory: in the ASan build, which has no
// leak suppressions, LeakSanitizer would abort the process (status 134, not 4). Both engines.
TEST(Pipeline, GroupStepErrorsLeaveNothingBehindInEitherEngine) {
  TempDir dir;
  const std::string never = dir.file("never.trace"), other = dir.file("other.trace");
  std::ofstream(never) << "ipusim-trace 2\nipu 0\nprogram\n  sync group=all\nend\n"
                          "ipu 1\nprogram\n  sync group=all\n  sync group=replica\nend\n";
  std::ofstream(other) << "ipusim-trace 2\nipu 0\nprogram\n  sync group=all\n"
                          "  collective all_reduce bytes=64 group=all\nend\n"
                          "ipu 1\nprogram\n  sync group=all\n"
                          "  collective all_reduce bytes=128 group=all\nend\n";
  for (const char* engine : {"fast", "reference"}) {
    SCOPED_TRACE(engine);
    const std::string run =
        std::string("run --engine ") + engine + " --system " + system_file("pod16") + " ";
    auto r = ipusim(run + never);
    EXPECT_EQ(r.status, 4) << r.err;
    EXPECT_NE(
        r.err.find(
            "error: system.ipu1 did not finish: its group steps do not match those of "
            "the other IPUs; waiting at 'sync group=replica (x1)': 1 of 2 IPUs arrived (IPU 1)"),
        std::string::npos)
        << r.err;
    r = ipusim(run + other);
    EXPECT_EQ(r.status, 4) << r.err;
    EXPECT_NE(
        r.err.find("error: IPU 1 reached 'collective all_reduce bytes=128 group=all (x1)' as its "
                   "group step 1 in a group where IPU 0 reached 'collective all_reduce "
                   "bytes=64 group=all (x1)'"),
        std::string::npos)
        << r.err;
  }
}

TEST(Pipeline, GroupStepsWithoutASystemAreAnError) {
  TempDir dir;
  const std::string trace = dir.file("s.trace");
  std::ofstream(trace) << kPipeline;
  const auto r = ipusim("run " + trace);
  EXPECT_EQ(r.status, 4);
  EXPECT_NE(r.err.find("run it on a system (--system"), std::string::npos) << r.err;
}

TEST(Pipeline, TraceNeedingMoreIpusThanTheSystemHas) {
  TempDir dir;
  const std::string trace = dir.file("big.trace");
  ASSERT_EQ(ipusim("kernel allreduce --bytes 64 --group 32 --out " + trace).status, 0);
  const auto r = ipusim("run --system " + system_file("pod16") + " " + trace);
  EXPECT_EQ(r.status, 4);
  EXPECT_NE(
      r.err.find("the trace needs 32 IPUs (32 replicas x 1 IPUs per replica) but IPU-POD16 has 16"),
      std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace ipusim::testing

namespace ipusim::testing {
namespace {

TEST(SystemKernels, LinkP2pAcrossARung) {
  TempDir dir;
  const std::string trace = dir.file("p2p.trace");
  ASSERT_EQ(ipusim("kernel link-p2p --bytes 1000000 --src-ipu 0 --dst-ipu 1 --out " + trace).status,
            0);
  const auto r =
      ipusim("run -q --system " + system_file("pod16") + " --out " + dir.file("o") + " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  // Sync of 2 IPUs (60) + 1e6 B over 4 IPU-Links of 128 Gibit/s x 0.32 + 20 cycles latency.
  const double rate = 4 * 128.0 * (1u << 30) / 8 * 0.32 / 1.325e9;
  EXPECT_EQ(total_cycles(read_all(dir.file("o/stats.json"))), 60 + std::ceil(1e6 / rate) + 20);
}

TEST(SystemKernels, ExternalSyncLoop) {
  TempDir dir;
  const std::string trace = dir.file("sync.trace");
  ASSERT_EQ(ipusim("kernel sync --group 16 --iterations 10 --out " + trace).status, 0);
  const auto r =
      ipusim("run -q --system " + system_file("pod16") + " --out " + dir.file("o") + " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(total_cycles(read_all(dir.file("o/stats.json"))), 10.0 * 199);  // §2: N=16 -> 199
}

}  // namespace
}  // namespace ipusim::testing

namespace ipusim::testing {
namespace {

// Cycles of phase `phase` of simulated IPU `ipu` in a stats.json.
double ipu_phase(const std::string& stats, std::size_t ipu, const std::string& phase) {
  const JsonValue root = parse_json(stats, "stats.json");
  return root.find("ipu")
      ->items.at(ipu)
      .find("phases")
      ->find(phase)
      ->find("cycles")
      ->find("value")
      ->number.d;
}

TEST(ExternalSync, WaitingForPeersIsNotSync) {
  // IPU 0 computes (a copy vertex), then both IPUs of the replica sync. IPU 1 arrives at 0
  // and waits until IPU 0 arrives, after its compute phase; then both pay the sync itself:
  // 2 x (1 + 2/4) hops x 15 ns x 1.325 GHz = 59.6, rounded up to 60 cycles (ipu-hardware.md
  // §2 sync latency model). Both engines agree.
  TempDir dir;
  const std::string trace = dir.file("w.trace");
  std::ofstream(trace)
      << "ipusim-trace 3\nipu 0\ncomputeset c\n  vertex tiles=0 copy bytes=80000\nend\n"
         "program\n  compute c\n  sync group=replica\nend\n"
         "ipu 1\nprogram\n  sync group=replica\nend\n";
  for (const std::string engine : {"fast", "reference"}) {
    const auto r = ipusim("run -q --engine " + engine + " --system " + source_dir() +
                          "/configs/systems/pod16.yaml --out " + dir.file(engine) + " " + trace);
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string stats = read_all(dir.file(engine + "/stats.json"));
    const double compute = ipu_phase(stats, 0, "compute");
    ASSERT_GT(compute, 0);
    EXPECT_EQ(ipu_phase(stats, 0, "waiting"), 0) << engine;
    EXPECT_EQ(ipu_phase(stats, 1, "waiting"), compute) << engine;
    EXPECT_EQ(ipu_phase(stats, 0, "external_sync"), 60) << engine;
    EXPECT_EQ(ipu_phase(stats, 1, "external_sync"), 60) << engine;
  }
}

}  // namespace
}  // namespace ipusim::testing

namespace ipusim::testing {
namespace {

// `ipus` IPUs of an IPU-M2000 each stream `tiles` x `bytes` from Streaming Memory onto their
// last `tiles` tiles (I/O tiles) at once; returns the run's cycles.
double streamed_onto_io_tiles(std::uint32_t tiles, std::uint64_t bytes, std::uint32_t ipus = 1) {
  TempDir dir;
  const std::string trace = dir.file("io.trace");
  std::ofstream out(trace);
  out << "ipusim-trace 3\n";
  for (std::uint32_t i = 0; i < ipus; ++i)
    out << "ipu " << i << "\nprogram\n  host to_ipu tiles=" << 1472 - tiles
        << "..1471 bytes=" << bytes << " memory=streaming\nend\n";
  out.close();
  const auto r =
      ipusim("run --system " + system_file("m2000") + " --out " + dir.file("out") + " " + trace);
  EXPECT_EQ(r.status, 0) << r.err;
  return total_cycles(read_all(dir.file("out/stats.json")));
}

TEST(HostIo, ATransferOntoFewIoTilesIsBoundByTheirExchangeRate) {
  // 4 MiB from Streaming Memory at 1.325 GHz, plus the gateway latency, 2 us = 2,650 cycles.
  // One IPU streaming has the gateway's DDR (57.6 GB/s) to itself: its PCIe Gen4 x8 link,
  // 15.75 GB/s, bounds it, 4 MiB / 15.75 GB/s = 352,855 cycles. The 4 IPUs of the machine
  // streaming at once share the DDR, 14.4 GB/s each: 385,926 cycles. Each receiving tile takes
  // its share at 4 B/cycle.
  const double latency = 2650;
  const double pcie = std::ceil(4.0 * (1 << 20) / 15.75e9 * 1.325e9);
  const double ddr = std::ceil(4.0 * (1 << 20) / 14.4e9 * 1.325e9);
  // Four I/O tiles of 1 MiB each: 262,144 cycles at 4 B/cycle, so the link bounds it.
  EXPECT_EQ(streamed_onto_io_tiles(4, 1 << 20), latency + pcie);
  EXPECT_EQ(streamed_onto_io_tiles(4, 1 << 20, 4), latency + ddr);
  // Two of 2 MiB each: 524,288 cycles, above the link's time: the I/O tiles bound it.
  EXPECT_EQ(streamed_onto_io_tiles(2, 2 << 20), latency + (2 << 20) / 4);
}

}  // namespace
}  // namespace ipusim::testing
