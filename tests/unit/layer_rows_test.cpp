// SPDX-License-Identifier: Apache-2.0
// Statistics once (issue 54, item 3): layers.csv's rows (report::layer_rows) and supersteps.csv
// (report::supersteps_csv) take every cycle, FLOP and byte from what the engine recorded for
// each compute set and exchange (IpuRunStats::compute_sets, exchanges), never from costing the
// trace again. The trace below has no vertices and no transfers, so costing it would give
// 0 FLOPs and 0 bytes; the engine's numbers are planted, and every expected value is worked
// out by hand from them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ipusim/report/run_files.hpp"
#include "test_chips.hpp"

namespace ipusim::report {
namespace {

trace::Provenance provenance(std::vector<std::string> layers, trace::Pass pass) {
  return {std::move(layers), pass, trace::OpKind::kConv};
}

trace::Step step(trace::StepKind kind, std::uint32_t index = 0) {
  trace::Step s;
  s.kind = kind;
  s.index = index;
  return s;
}

// One IPU program. Compute set 0 serves conv1, compute set 1 conv2 and conv3 together,
// exchange 0 conv1; all in the forward pass. Program positions in brackets:
//   [0] sync  [1] compute 0  [2] sync  [3] exchange 0
//   [4] repeat 3 { [5] sync  [6] compute 1 }
//   [7] host copy  [8] compute 0, run as a recomputation  [9] sync (ends the list)
trace::Trace program() {
  trace::IpuProgram p;
  p.compute_sets = {{"a", {}, provenance({"conv1"}, trace::Pass::kForward)},
                    {"shared", {}, provenance({"conv2", "conv3"}, trace::Pass::kForward)}};
  trace::Exchange x;
  x.name = "x";
  x.provenance = provenance({"conv1"}, trace::Pass::kForward);
  p.exchanges = {x};
  trace::Step loop = step(trace::StepKind::kRepeat);
  loop.count = 3;
  loop.body = {step(trace::StepKind::kSync), step(trace::StepKind::kCompute, 1)};
  trace::Step recompute = step(trace::StepKind::kCompute, 0);
  recompute.provenance.pass = trace::Pass::kRecompute;
  trace::Step host = step(trace::StepKind::kHost);
  host.bytes = 1024;
  p.steps = {step(trace::StepKind::kSync),
             step(trace::StepKind::kCompute, 0),
             step(trace::StepKind::kSync),
             step(trace::StepKind::kExchange, 0),
             loop,
             host,
             recompute,
             step(trace::StepKind::kSync)};
  trace::Trace t;
  t.ipus = {p};
  return t;
}

// What the engine recorded for that program on system IPU 5: compute set 0 ran twice at 1,000
// cycles and 5,000 FLOPs each, compute set 1 three times at 701 cycles and 333 FLOPs, the
// exchange once in 250 cycles receiving 4,096 bytes; host copies took 777 cycles.
RunStats engine_stats() {
  IpuRunStats ipu;
  ipu.ipu = 5;
  ipu.compute_sets = {{"a", 2, 2000, "conv1", "forward", 5000, 0},
                      {"shared", 3, 2103, "conv2+conv3", "forward", 333, 0}};
  ipu.exchanges = {{"x", 1, 250, "conv1", "forward", 0, 4096}};
  ipu.phases[PhaseKind::kHost] = 777;
  RunStats stats;
  stats.ipus = {ipu};
  return stats;
}

// Live bytes at each of the ten program positions: 10, 20, ... on the IPU, 1, 2, ... on its
// fullest tile.
LiveMemories memory() {
  LiveMemory m;
  for (std::uint64_t p = 0; p < 10; ++p) {
    m.ipu_bytes.push_back(10 * (p + 1));
    m.tile_bytes.push_back(p + 1);
  }
  return {{5, m}};
}

TEST(LayerRows, TakeEachItemsCyclesFlopsAndBytesFromTheEngine) {
  const ChipSpec chip = testing::gc200_by_hand();  // on-chip syncs of 90 cycles
  const std::vector<LayerRow> rows = layer_rows(chip, engine_stats(), program(), memory());
  ASSERT_EQ(rows.size(), 5u);
  // Largest total first. conv1 forward: compute set 0 once (1,000), the exchange (250) and the
  // two syncs before them (180); its peak live memory is at position 3.
  const LayerRow& conv1 = rows[0];
  EXPECT_EQ(conv1.ipu, 5u);
  EXPECT_EQ(conv1.layer + " " + conv1.pass, "conv1 forward");
  EXPECT_EQ(conv1.cycles[PhaseKind::kCompute], 1000u);
  EXPECT_EQ(conv1.cycles[PhaseKind::kSync], 180u);
  EXPECT_EQ(conv1.cycles[PhaseKind::kExchange], 250u);
  EXPECT_EQ(conv1.total(), 1430u);
  EXPECT_EQ(conv1.executions, 1u);
  EXPECT_EQ(conv1.flops, 5000u);
  EXPECT_EQ(conv1.exchange_bytes, 4096u);
  EXPECT_EQ(conv1.peak_live_bytes, 40u);
  EXPECT_EQ(conv1.peak_tile_live_bytes, 4u);
  EXPECT_EQ(conv1.group, "");
  // Compute set 1, shared by conv2 and conv3, in a loop of 3: 2,103 cycles, 3 executions,
  // 999 FLOPs and the loop's three syncs (270 cycles) split in two, the odd one to the first.
  const LayerRow& conv2 = rows[1];
  const LayerRow& conv3 = rows[2];
  EXPECT_EQ(conv2.layer + " " + conv2.pass, "conv2 forward");
  EXPECT_EQ(conv3.layer + " " + conv3.pass, "conv3 forward");
  EXPECT_EQ(conv2.cycles[PhaseKind::kCompute], 1052u);
  EXPECT_EQ(conv3.cycles[PhaseKind::kCompute], 1051u);
  EXPECT_EQ(conv2.cycles[PhaseKind::kSync], 135u);
  EXPECT_EQ(conv3.cycles[PhaseKind::kSync], 135u);
  EXPECT_EQ(conv2.executions, 2u);
  EXPECT_EQ(conv3.executions, 1u);
  EXPECT_EQ(conv2.flops, 500u);
  EXPECT_EQ(conv3.flops, 499u);
  EXPECT_EQ(conv2.exchange_bytes, 0u);
  EXPECT_EQ(conv2.peak_live_bytes, 70u);
  EXPECT_EQ(conv3.peak_tile_live_bytes, 7u);
  EXPECT_EQ(conv2.group, "conv2+conv3");
  EXPECT_EQ(conv3.group, "conv2+conv3");
  // Compute set 0 run again as a recomputation: its own row, with the sync that ends the list.
  const LayerRow& recompute = rows[3];
  EXPECT_EQ(recompute.layer + " " + recompute.pass, "conv1 recompute");
  EXPECT_EQ(recompute.cycles[PhaseKind::kCompute], 1000u);
  EXPECT_EQ(recompute.cycles[PhaseKind::kSync], 90u);
  EXPECT_EQ(recompute.executions, 1u);
  EXPECT_EQ(recompute.flops, 5000u);
  EXPECT_EQ(recompute.peak_live_bytes, 90u);
  // The host copies' time, as the engine totalled it.
  const LayerRow& host = rows[4];
  EXPECT_EQ(host.layer + " " + host.pass, "(host I/O) host_io");
  EXPECT_EQ(host.cycles[PhaseKind::kHost], 777u);
  EXPECT_EQ(host.total(), 777u);
  EXPECT_EQ(host.peak_live_bytes, 80u);
  // Every FLOP and byte the engine recorded is in a row, once.
  std::uint64_t flops = 0, bytes = 0;
  for (const LayerRow& r : rows) {
    flops += r.flops;
    bytes += r.exchange_bytes;
  }
  EXPECT_EQ(flops, 2 * 5000u + 3 * 333u);
  EXPECT_EQ(bytes, 4096u);
}

TEST(LayerRows, SuperstepsCsvNamesEachRowAfterTheEnginesComputeSet) {
  RunStats stats = engine_stats();
  SuperstepTotals row;
  row.index = 0;
  row.compute_set = 1;
  row.executions = 3;
  row.first_start = 12;
  row.active_tiles = 4;
  row.cycles[PhaseKind::kCompute] = 2103;
  stats.ipus[0].supersteps = {row};
  EXPECT_EQ(supersteps_csv(stats),
            supersteps_header() + "\n5,0,shared,3,12,2103,0,0,0,0,0,0,0,0,4,conv2+conv3,forward\n");
}

}  // namespace
}  // namespace ipusim::report
