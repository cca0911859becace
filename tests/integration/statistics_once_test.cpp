// SPDX-License-Identifier: Apache-2.0
// Statistics once (issue 54, item 3): the engine records what one execution of each compute
// set and exchange does (its cycles, FLOPs and bytes) as it costs it, and the run directory's
// layer rows (layers.csv) and plan rows (plan.csv) are made from those numbers, never from
// costing the trace again. Expected values are worked out by hand.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_harness.hpp"
#include "ipusim/driver/run.hpp"
#include "ipusim/util/json_reader.hpp"

namespace ipusim::testing {
namespace {

// Plan rows from planted numbers: the trace has no vertices and no transfers (costing it would
// give nothing), so every cycle and byte below is the engine's.
TEST(StatisticsOnce, PlanRowsTakeEachItemsCyclesAndBytesFromTheEngine) {
  ChipSpec chip;
  chip.sync.internal_latency = Cycles{90};
  trace::Trace trace;
  trace.ipus.resize(1);
  trace.ipus[0].compute_sets.resize(2);
  trace.ipus[0].exchanges.resize(2);
  // System IPU 5 ran the program: compute set 0 four times (1,000 cycles each), compute set 1
  // three times (1,000 cycles in all: 333.3 each), exchange 0 three times (200 cycles and
  // 7,777 bytes each), exchange 1 once (50 cycles, 123 bytes).
  IpuRunStats ipu;
  ipu.ipu = 5;
  ipu.compute_sets = {{"c0", 4, 4000, "", "", 0, 0}, {"c1", 3, 1000, "", "", 0, 0}};
  ipu.exchanges = {{"e0", 3, 600, "", "", 0, 7777}, {"e1", 1, 50, "", "", 0, 123}};
  RunStats stats;
  stats.ipus = {ipu};
  // One matmul serving two layers: the conv runs compute set 0 twice, compute set 1 once and
  // exchange 0 once, with three syncs; its operands' rearrangement runs exchange 1 twice, with
  // one sync.
  compiler::PlannedConv conv;
  conv.provenance = {{"fc1", "fc2"}, trace::Pass::kForward, trace::OpKind::kMatmul};
  conv.name = "matmul_64x32x16";
  conv.args.in_chans = 32;
  conv.args.height = 64;
  conv.args.out_chans = 16;
  conv.args.matmul = true;
  conv.plan.estimated_cycles = Cycles{2500};
  conv.conv = {{{0, 2}, {1, 1}}, {{0, 1}}, 3};
  conv.rearrangement = {{}, {{1, 2}}, 1};
  const std::vector<report::PlanRow> rows = driver::plan_rows(chip, stats, trace, {conv});
  ASSERT_EQ(rows.size(), 2u);
  for (const report::PlanRow& r : rows) {
    EXPECT_EQ(r.ipu, 5u);
    EXPECT_EQ(r.pass, "forward");
    EXPECT_EQ(r.op, "matmul");
    EXPECT_EQ(r.shape, "m=64 k=32 n=16 groups=1");
    EXPECT_EQ(r.estimated_cycles, 2500u);
    // The rearrangement: 1 x 90 + 2 x 50 cycles, receiving 2 x 123 bytes.
    EXPECT_EQ(r.rearrangement_cycles, 190u);
    EXPECT_EQ(r.rearranged_bytes, 246u);
    // The conv: 3 x 90 + 2 x 1,000 + 333.3 + 200 = 2,803.3 cycles, rounded, plus its
    // rearrangement.
    EXPECT_EQ(r.simulated_cycles, 2803u + 190u);
  }
  EXPECT_EQ(rows[0].layer, "fc1");
  EXPECT_EQ(rows[1].layer, "fc2");
}

std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::istringstream in(read_all(path));
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

// A hand-built trace whose FLOPs and bytes are known: layers l1 and l2 share a weight update of
// 4 scaled_add vertices of 1,000 elements (2 FLOPs each: 8,000 FLOPs an execution), run 4
// times in a loop; layer l3's compute set is 2 binary adds of 500 elements (1,000 FLOPs) and
// its exchange sends 4,096 bytes from tile 0 to tiles 1..3 (12,288 bytes received), run once
// before the loop and once in each iteration.
constexpr const char* kTrace =
    "ipusim-trace 3\nipu 0\n"
    "computeset upd layer=l1,l2 pass=weight_update op=elementwise\n"
    "  vertex tiles=0..3 scaled_add dtype=half n=1000\nend\n"
    "computeset act layer=l3 pass=forward op=elementwise\n"
    "  vertex tiles=0..1 binary op=add dtype=float n=500\nend\n"
    "exchange x layer=l3 pass=forward op=copy\n  transfer src=0 dst=1..3 bytes=4096\nend\n"
    "program\n  sync\n  compute act\n  sync\n  exchange x\n"
    "  repeat 4\n    sync\n    compute upd\n    sync\n    exchange x\n  end\nend\n";

TEST(StatisticsOnce, LayersCsvHasTheFlopsAndBytesTheEngineRecorded) {
  TempDir dir;
  const std::string trace = dir.file("t.trace");
  std::ofstream(trace) << kTrace;
  // The fast engine with loops timed once and with every iteration run, and the reference
  // engine (which costs each tile's share on its own): the same rows.
  std::string first;
  int runs = 0;
  for (const std::string options : {"", "--full-loops", "--engine reference"}) {
    const std::string out = dir.file("out" + std::to_string(runs++));
    const auto r = ipusim("run -q --chip " + chip_file("gc200") + " " + options + " --out " + out +
                          " " + trace);
    ASSERT_EQ(r.status, 0) << options << ": " << r.err;
    const JsonValue stats = parse_json(read_all(out + "/stats.json"), "stats.json");
    const auto number = [&](const char* path) {
      const JsonValue* v = json_field(stats, path);
      return v ? v->number.d : -1;
    };
    EXPECT_EQ(number("throughput.flops"), 4 * 8000.0 + 1000) << options;
    EXPECT_EQ(number("throughput.exchange_bytes"), 5 * 12288.0) << options;
    // Columns: ipu, layer, pass, executions, 9 phases, total, flops, exchange_bytes, ...
    std::map<std::string, std::vector<std::string>> rows;
    const auto csv = read_csv(out + "/layers.csv");
    for (std::size_t i = 1; i < csv.size(); ++i) rows[csv[i][1] + " " + csv[i][2]] = csv[i];
    ASSERT_EQ(rows.size(), 3u) << options;
    EXPECT_EQ(rows["l1 weight_update"][14], "16000") << options;  // half of 4 x 8,000
    EXPECT_EQ(rows["l2 weight_update"][14], "16000") << options;
    EXPECT_EQ(rows["l1 weight_update"][15], "0") << options;
    EXPECT_EQ(rows["l3 forward"][14], "1000") << options;
    EXPECT_EQ(rows["l3 forward"][15], "61440") << options;   // 5 x 12,288
    EXPECT_EQ(rows["l1 weight_update"][3], "2") << options;  // 4 executions split in two
    EXPECT_EQ(rows["l2 weight_update"][3], "2") << options;
    EXPECT_EQ(rows["l3 forward"][3], "1") << options;
    if (first.empty())
      first = read_all(out + "/layers.csv");
    else
      EXPECT_EQ(read_all(out + "/layers.csv"), first) << options;
  }
}

}  // namespace
}  // namespace ipusim::testing
