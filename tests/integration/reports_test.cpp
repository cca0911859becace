// SPDX-License-Identifier: Apache-2.0
// Reports people can read (docs/reports.md): the run directory's CSVs, the Perfetto timeline,
// the HTML report rendered in headless Chromium, ipusim compare, the progress line, and
// docs/stats-reference.md kept in step with stats.json.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "cli_harness.hpp"
#include "ipusim/util/json_reader.hpp"

namespace ipusim::testing {
namespace {

std::string workload(const std::string& name) {
  return source_dir() + "/tests/data/workloads/" + name;
}
std::string pod16() { return source_dir() + "/configs/systems/pod16.yaml"; }

// Compiles the reduced ResNet for a POD16 into dir/w.itb.
std::string compile_resnet(const TempDir& dir) {
  const std::string trace = dir.file("w.itb");
  const auto c =
      ipusim("compile -q --run " + workload("resnet_tiny-pod16.yaml") + " --out " + trace);
  EXPECT_EQ(c.status, 0) << c.err;
  return trace;
}

JsonValue parse_file(const std::string& path) { return parse_json(read_all(path), path); }

double num(const JsonValue& root, const std::string& path) {
  const JsonValue* v = json_field(root, path);
  EXPECT_NE(v, nullptr) << path;
  return v ? v->number.d : -1;
}

std::vector<std::vector<std::string>> read_csv(const std::string& path, std::string* header) {
  std::istringstream in(read_all(path));
  std::string line;
  std::getline(in, *header);
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

constexpr const char* kPhases[] = {"compute", "sync",      "exchange",
                                   "host",    "streaming", "external_sync",
                                   "waiting", "inter_ipu", "collective"};

// Both detail levels: every phase a span, or (the default) a compute phase with its on-chip
// sync and exchange as one superstep span (issue 27: a BERT-Large POD64 timeline was 168 MB;
// 85 MB with supersteps), whose args give each part; both nest and add up to stats.json.
class TimelineDetail : public ::testing::TestWithParam<std::string> {};

TEST_P(TimelineDetail, IsValidTraceEventJsonAndMatchesStats) {
  const bool phases = GetParam() == "phases";
  TempDir dir;
  const std::string trace = compile_resnet(dir);
  const auto r = ipusim("run -q --system " + pod16() + " --out " + dir.file("out") +
                        " --timeline " + dir.file("t.json") + " --timeline-detail " + GetParam() +
                        " --timeline-tiles 0 --timeline-steps 2:4 " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "");  // machine-readable files only; nothing extra on stdout
  const JsonValue stats = parse_file(dir.file("out/stats.json"));
  const JsonValue tl = parse_file(dir.file("t.json"));
  ASSERT_EQ(tl.kind, JsonValue::Kind::kObject);
  const JsonValue* unit = tl.find("displayTimeUnit");
  ASSERT_NE(unit, nullptr);
  EXPECT_EQ(unit->string, "ns");
  const JsonValue* events = tl.find("traceEvents");
  ASSERT_NE(events, nullptr);
  ASSERT_EQ(events->kind, JsonValue::Kind::kArray);
  const double clock = num(stats, "chip.clock");
  const double us_per_cycle = 1e6 / clock;

  std::map<double, double> compute_cycles, compute_us;  // per pid
  std::map<double, double> sync_cycles, exchange_cycles;
  std::map<std::pair<double, double>, std::vector<std::pair<double, double>>>
      stacks;  // open spans per track
  std::map<std::pair<double, double>, double> last_ts;
  std::set<std::string> cats;
  std::size_t tile_events = 0, complete = 0;
  std::set<double> tile_steps;
  for (const auto& e : events->items) {
    ASSERT_EQ(e.kind, JsonValue::Kind::kObject);
    for (const char* k : {"ph", "pid", "tid", "name"}) ASSERT_NE(e.find(k), nullptr) << k;
    const std::string ph = e.find("ph")->string;
    ASSERT_TRUE(ph == "X" || ph == "M") << ph;
    if (ph == "M") continue;
    ++complete;
    ASSERT_NE(e.find("ts"), nullptr);
    ASSERT_NE(e.find("dur"), nullptr);
    ASSERT_EQ(e.find("ts")->kind, JsonValue::Kind::kNumber);
    const double ts = e.find("ts")->number.d, dur = e.find("dur")->number.d;
    ASSERT_GE(ts, 0);
    ASSERT_GE(dur, 0);
    const auto track = std::make_pair(e.find("pid")->number.d, e.find("tid")->number.d);
    // Monotonic start times per track, and spans on a track nest (Perfetto's requirement).
    if (last_ts.count(track)) {
      ASSERT_GE(ts, last_ts[track]) << e.find("name")->string;
    }
    last_ts[track] = ts;
    auto& stack = stacks[track];
    while (!stack.empty() && ts >= stack.back().second - 1e-7) stack.pop_back();
    if (!stack.empty()) {
      ASSERT_LE(ts + dur, stack.back().second + 1e-7) << e.find("name")->string;
    }
    stack.emplace_back(ts, ts + dur);
    const std::string cat = e.find("cat")->string;
    cats.insert(cat);
    const JsonValue* args = e.find("args");
    if (cat == "compute") {
      const double cycles = args->find("cycles")->number.d;
      compute_cycles[track.first] += cycles;
      compute_us[track.first] += dur;
      EXPECT_NEAR(dur, cycles * us_per_cycle, 1e-5);
    }
    if (cat == "superstep") {
      const double cycles = args->find("cycles")->number.d, c = args->find("compute")->number.d,
                   sy = args->find("sync")->number.d, ex = args->find("exchange")->number.d;
      EXPECT_EQ(cycles, c + sy + ex);
      compute_cycles[track.first] += c;
      compute_us[track.first] += c * us_per_cycle;
      sync_cycles[track.first] += sy;
      exchange_cycles[track.first] += ex;
      EXPECT_NEAR(dur, cycles * us_per_cycle, 1e-5);
    }
    if (cat == "sync") sync_cycles[track.first] += args->find("cycles")->number.d;
    if (cat == "exchange") exchange_cycles[track.first] += args->find("cycles")->number.d;
    if (cat == "tile_compute" || cat == "tile_exchange") {
      ++tile_events;
      EXPECT_EQ(track.first, 0);
      EXPECT_GE(track.second, 100);
      tile_steps.insert(e.find("args")->find("superstep")->number.d);
    }
  }
  // ResNet on a POD16: replica 0 is simulated; compute, sync, exchange, collectives, loops.
  for (const char* c : {"external_sync", "collective", "loop", "background_host"})
    EXPECT_TRUE(cats.count(c)) << c;
  for (const char* c : {"compute", "sync", "exchange"}) EXPECT_EQ(cats.count(c) == 1, phases) << c;
  EXPECT_EQ(cats.count("superstep") == 1, !phases);
  ASSERT_EQ(compute_cycles.size(), num(stats, "system.simulated_ipus"));
  for (std::size_t i = 0; i < compute_cycles.size(); ++i) {
    const double pid = num(stats, "ipu[" + std::to_string(i) + "].index");
    EXPECT_EQ(compute_cycles[pid],
              num(stats, "ipu[" + std::to_string(i) + "].phases.compute.cycles"));
    EXPECT_NEAR(compute_us[pid] * 1e-6,
                num(stats, "ipu[" + std::to_string(i) + "].phases.compute.time"),
                1e-9 * compute_cycles.size() + 1e-9);
    EXPECT_EQ(sync_cycles[pid], num(stats, "ipu[" + std::to_string(i) + "].phases.sync.cycles"));
    EXPECT_EQ(exchange_cycles[pid],
              num(stats, "ipu[" + std::to_string(i) + "].phases.exchange.cycles"));
  }
  EXPECT_GT(tile_events, 0u);
  EXPECT_EQ(tile_steps, (std::set<double>{2, 3, 4}));
  // The end of the last span is the step time.
  double end = 0;
  for (const auto& e : events->items)
    if (e.find("ph")->string == "X")
      end = std::max(end, e.find("ts")->number.d + e.find("dur")->number.d);
  EXPECT_NEAR(end * 1e-6, num(stats, "total.time"), 1e-9);
}

INSTANTIATE_TEST_SUITE_P(Reports, TimelineDetail, ::testing::Values("phases", "supersteps"));

// --timeline-window keeps the spans that overlap it: none that ends before it or starts after
// it, and fewer than the whole timeline has.
TEST(Reports, TimelineWindowKeepsTheSpansThatOverlapIt) {
  TempDir dir;
  const std::string trace = compile_resnet(dir);
  const std::string base = "run -q --system " + pod16() + " " + trace + " --timeline ";
  ASSERT_EQ(ipusim(base + dir.file("all.json")).status, 0);
  const auto r = ipusim(base + dir.file("w.json") + " --timeline-window 100us:200us");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto spans = [&](const std::string& f) {
    std::vector<std::pair<double, double>> out;
    const JsonValue tl = parse_file(dir.file(f));
    for (const auto& e : tl.find("traceEvents")->items)
      if (e.find("ph")->string == "X")
        out.emplace_back(e.find("ts")->number.d, e.find("ts")->number.d + e.find("dur")->number.d);
    return out;
  };
  const auto all = spans("all.json"), window = spans("w.json");
  std::size_t overlapping = 0;
  for (const auto& [a, b] : all) overlapping += b >= 100 - 1e-3 && a <= 200 + 1e-3;
  ASSERT_GT(window.size(), 0u);
  EXPECT_LT(window.size(), all.size());
  EXPECT_EQ(window.size(), overlapping);
  for (const auto& [a, b] : window) {
    EXPECT_GE(b, 100 - 1e-3);
    EXPECT_LE(a, 200 + 1e-3);
  }
  EXPECT_EQ(ipusim(base + dir.file("x.json") + " --timeline-window 2us:1us").status, 2);
}

TEST(Reports, SuperstepsAndTilesCsvSumToStats) {
  TempDir dir;
  const std::string trace = compile_resnet(dir);
  const auto r = ipusim("run -q --system " + pod16() + " --out " + dir.file("out") + " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  const JsonValue stats = parse_file(dir.file("out/stats.json"));
  std::string header;
  const auto rows = read_csv(dir.file("out/supersteps.csv"), &header);
  EXPECT_EQ(header,
            "ipu,superstep,step,executions,start_cycle,compute_cycles,sync_cycles,exchange_cycles,"
            "host_cycles,streaming_cycles,external_sync_cycles,waiting_cycles,inter_ipu_cycles,"
            "collective_cycles,active_tiles,layer,pass");
  ASSERT_GT(rows.size(), 10u);
  std::map<std::string, double> sums;
  double compute_execs = 0;
  // Superstep -1 (phases before the first compute phase) exists only if there are any.
  const std::int64_t first = std::stoll(rows.front()[1]);
  EXPECT_TRUE(first == -1 || first == 0) << first;
  std::int64_t previous = first - 1;
  std::size_t named = 0;
  for (const auto& row : rows) {
    // The layer and pass columns are empty for superstep -1 (read_csv drops trailing empties).
    ASSERT_GE(row.size(), 15u);
    ASSERT_LE(row.size(), 17u);
    if (row.size() == 17 && !row[15].empty() &&
        std::set<std::string>{"forward", "recompute", "data_gradient", "weight_gradient",
                              "weight_update", "host_io"}
            .count(row[16]))
      ++named;
    EXPECT_EQ(std::stoll(row[1]), previous + 1);  // supersteps numbered in order
    previous = std::stoll(row[1]);
    for (int k = 0; k < 9; ++k) sums[kPhases[k]] += std::stod(row[5 + k]);
    if (std::stoll(row[1]) >= 0) {
      compute_execs += std::stod(row[3]);
      EXPECT_GT(std::stod(row[14]), 0);  // active tiles
    }
  }
  for (const char* p : kPhases)
    EXPECT_EQ(sums[p], num(stats, std::string("ipu[0].phases.") + p + ".cycles")) << p;
  EXPECT_EQ(compute_execs, num(stats, "ipu[0].phases.compute.count"));
  // A compiled step's supersteps name the layer and pass their compute set serves.
  EXPECT_GT(named * 2, rows.size()) << named << " of " << rows.size();

  const auto tiles = read_csv(dir.file("out/tiles.csv"), &header);
  EXPECT_EQ(header,
            "ipu,tile,compute_cycles,exchange_bytes,memory_bytes,weight_bytes,activation_bytes,"
            "gradient_bytes,optimiser_bytes,partial_bytes,input_bytes,output_bytes,temp_bytes,"
            "vertex_state_bytes,code_bytes,exchange_code_bytes,stack_bytes");
  ASSERT_EQ(tiles.size(), num(stats, "chip.tiles") * num(stats, "system.simulated_ipus"));
  double max_mem = 0, max_busy = 0;
  for (const auto& t : tiles) {
    // The memory categories add up to the tile's memory.
    ASSERT_EQ(t.size(), 17u);
    double categories = 0;
    for (std::size_t k = 5; k < 17; ++k) categories += std::stod(t[k]);
    EXPECT_EQ(categories, std::stod(t[4]));
    max_mem = std::max(max_mem, std::stod(t[4]));
    max_busy = std::max(max_busy, std::stod(t[2]));
  }
  EXPECT_EQ(max_mem, num(stats, "ipu[0].tiles.memory.max"));
  EXPECT_EQ(max_busy, num(stats, "ipu[0].tiles.compute_cycles.max"));
}

// A memoised loop is recorded once, whatever its count (bounded memory and file size); with
// --full-loops every iteration is recorded, and the sums agree.
TEST(Reports, MemoisedLoopIsRecordedOnce) {
  TempDir dir;
  auto trace = [&](int n) {
    const std::string path = dir.file("loop" + std::to_string(n) + ".trace");
    std::ofstream(path) << "ipusim-trace 2\nname loop\nipu 0\ncomputeset work\n"
                           "  vertex tiles=0..7 binary op=mul dtype=half n=300\nend\n"
                           "exchange shift\n  transfer src=0..3 dst=4..7 bytes=256\nend\n"
                           "program\n  repeat "
                        << n
                        << "\n    compute work\n    sync\n"
                           "    exchange shift\n  end\nend\n";
    return path;
  };
  std::map<std::string, std::string> csv;
  for (const std::string& run : {"10", "1000", "full"}) {
    const std::string t = trace(run == "10" ? 10 : 1000);
    const auto r = ipusim("run -q --set chip.tiles=16 --out " + dir.file(run) + " --timeline " +
                          dir.file(run + ".json") + " --timeline-detail phases" +
                          (run == "full" ? " --full-loops " : " ") + t);
    ASSERT_EQ(r.status, 0) << r.err;
    csv[run] = read_all(dir.file(run + "/supersteps.csv"));
    const JsonValue tl = parse_file(dir.file(run + ".json"));
    const JsonValue stats = parse_file(dir.file(run + "/stats.json"));
    std::size_t spans = 0;
    double compute = 0;
    for (const auto& e : tl.find("traceEvents")->items) {
      if (e.find("ph")->string != "X") continue;
      ++spans;
      if (e.find("cat")->string == "compute") compute += e.find("args")->find("cycles")->number.d;
      if (e.find("cat")->string == "loop")
        EXPECT_EQ(e.find("name")->string, "loop x" + (run == "10" ? run : "1000"));
    }
    EXPECT_EQ(compute, num(stats, "phases.compute.cycles"));
    // loop + compute + sync + exchange once, or every iteration.
    EXPECT_EQ(spans, run == "full" ? 1 + 3 * 1000u : 4u) << run;
  }
  std::string header;
  const auto once = read_csv(dir.file("1000/supersteps.csv"), &header);
  const auto full = read_csv(dir.file("full/supersteps.csv"), &header);
  ASSERT_EQ(once.size(), 1u);
  EXPECT_EQ(once[0][3], "1000");  // executions
  // supersteps.csv holds each distinct superstep once (issue 27: one row per execution made
  // GPT-2 XL's 5.2 GB): run every iteration, the loop's body is still one row of 1,000
  // executions, the same file as the memoised run's.
  ASSERT_EQ(full.size(), 1u);
  EXPECT_EQ(csv["full"], csv["1000"]);
  EXPECT_EQ(read_csv(dir.file("10/supersteps.csv"), &header).size(), 1u);
}

TEST(Reports, ReferenceEngineRejectsTimeline) {
  TempDir dir;
  ASSERT_EQ(ipusim("kernel reduce --outputs 500 --inputs 4 --out " + dir.file("k.trace")).status,
            0);
  const auto r = ipusim("run -q --engine reference --timeline " + dir.file("t.json") + " " +
                        dir.file("k.trace"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("fast engine only"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("t.json")));
  const auto bad = ipusim("run -q --timeline " + dir.file("t.json") + " --timeline-steps 5:2 " +
                          dir.file("k.trace"));
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--timeline-steps: expected FIRST:LAST"), std::string::npos) << bad.err;
}

// docs/stats-reference.md lists every field of stats.json with its unit: every field a
// workload run on a system writes must be documented with the unit it carries, and every
// documented field must exist in that run or in a single-chip kernel run.
std::string normalise(const std::string& path) {
  return std::regex_replace(path, std::regex(R"(\[[^\]]*\])"), "[]");
}

void collect(const JsonValue& v, const std::string& path, std::map<std::string, std::string>& out) {
  if (v.kind == JsonValue::Kind::kObject) {
    const JsonValue* value = v.find("value");
    const JsonValue* unit = v.find("unit");
    if (value && unit && v.members.size() == 2) {
      out[normalise(path)] = unit->string;
      return;
    }
    // A summary object's plain numbers (min, mean, max) are in its "unit".
    const std::string inherited =
        unit && unit->kind == JsonValue::Kind::kString ? unit->string : "";
    for (const auto& [k, m] : v.members) {
      const std::string p = path.empty() ? k : path + "." + k;
      if (m.kind == JsonValue::Kind::kNumber)
        out[normalise(p)] = inherited;
      else
        collect(m, p, out);
    }
  } else if (v.kind == JsonValue::Kind::kArray) {
    for (const auto& item : v.items) collect(item, path + "[]", out);
  } else {
    out[normalise(path)] = "";
  }
}

TEST(Reports, StatsReferenceDocumentsEveryField) {
  TempDir dir;
  const std::string trace = compile_resnet(dir);
  ASSERT_EQ(ipusim("run -q --system " + pod16() + " --out " + dir.file("w") + " " + trace).status,
            0);
  ASSERT_EQ(ipusim("kernel reduce --outputs 500 --inputs 4 --out " + dir.file("k.trace")).status,
            0);
  ASSERT_EQ(ipusim("run -q --out " + dir.file("k") + " " + dir.file("k.trace")).status, 0);
  // Fields only some runs write: warnings (a trace run on a system with more IPUs than it
  // uses) and an inference run's latency.
  ASSERT_EQ(ipusim("run -q --system " + source_dir() + "/configs/systems/pod64.yaml --out " +
                   dir.file("w64") + " " + trace)
                .status,
            0);
  ASSERT_EQ(
      ipusim("run -q --run " + workload("resnet_tiny-pod16.yaml") +
             " --set run.mode=inference --set run.gradient_accumulation=1 --set run.optimiser=none"
             " --set run.recompute_checkpoints=none --set run.batchnorm_group=1 --out " +
             dir.file("inf"))
          .status,
      0);
  // A run chosen for an imported model (chosen[], model_notes[]).
  ASSERT_EQ(ipusim("run -q --model " + source_dir() +
                   "/tests/data/onnx/torch/resnet18_opset11.onnx --system " + pod16() + " --out " +
                   dir.file("chosen"))
                .status,
            0);
  // A pipelined training run (pipeline.*).
  ASSERT_EQ(ipusim("run -q --run " + workload("resnet_tiny-pod16.yaml") +
                   " --set run.ipus_per_replica=2 --set run.replicas=8 "
                   "--set run.pipeline_splits=b2/0/conv1 --out " +
                   dir.file("pipe"))
                .status,
            0);
  // A text generation run with a KV cache, its limits searched (workload.generation.*).
  ASSERT_EQ(ipusim("run -q --run " + workload("gpt_tiny-pod16.yaml") +
                   " --set run.mode=inference --set run.gradient_accumulation=1 --set "
                   "run.optimiser=none --set run.ipus_per_replica=1 --set run.replicas=16 --set "
                   "run.pipeline_placement=ipu0=2,2 --set run.kv_cache=streaming --set "
                   "run.prompt_tokens=8 --set run.new_tokens=4 --fit --out " +
                   dir.file("gen"))
                .status,
            0);
  // Its HTML report says the same (the 8-token prompt: 8 steps to the first token).
  ASSERT_EQ(ipusim("report " + dir.file("gen")).status, 0);
  EXPECT_NE(read_all(dir.file("gen/report.html")).find("<td>first token after "),
            std::string::npos);
  EXPECT_NE(read_all(dir.file("gen/report.html")).find(" (8 steps), then "), std::string::npos);
  std::map<std::string, std::string> fields, kernel_fields;
  collect(parse_file(dir.file("gen/stats.json")), "", kernel_fields);
  collect(parse_file(dir.file("w/stats.json")), "", fields);
  collect(parse_file(dir.file("pipe/stats.json")), "", kernel_fields);
  collect(parse_file(dir.file("chosen/stats.json")), "", kernel_fields);
  collect(parse_file(dir.file("k/stats.json")), "", kernel_fields);
  collect(parse_file(dir.file("w64/stats.json")), "", kernel_fields);
  collect(parse_file(dir.file("inf/stats.json")), "", kernel_fields);
  // The doc's table rows: | `path` | unit | meaning |
  std::map<std::string, std::string> documented;
  std::istringstream doc(read_all(source_dir() + "/docs/stats-reference.md"));
  std::string line;
  const std::regex row(R"(^\| `([^`]+)` \| ([^|]*) \|)");
  std::smatch m;
  while (std::getline(doc, line))
    if (std::regex_search(line, m, row)) {
      std::string unit = m[2];
      unit.erase(unit.find_last_not_of(' ') + 1);
      if (unit == "-") unit = "";
      if (unit.size() >= 2 && unit.front() == '`' && unit.back() == '`')
        unit = unit.substr(1, unit.size() - 2);
      documented[m[1]] = unit;
    }
  ASSERT_GT(documented.size(), 30u);
  for (const auto& [path, unit] : fields) {
    auto it = documented.find(path);
    if (it == documented.end()) {
      ADD_FAILURE() << "stats.json field not in docs/stats-reference.md: " << path;
      continue;
    }
    // Workload units depend on the model's sample unit: the doc writes <unit>.
    if (it->second.find('<') == std::string::npos) {
      EXPECT_EQ(it->second, unit) << path;
    }
  }
  for (const auto& [path, unit] : documented) {
    if (!path.starts_with("supersteps.csv:") && !path.starts_with("tiles.csv:") &&
        !path.starts_with("plan.csv:")) {
      EXPECT_TRUE(fields.count(path) || kernel_fields.count(path))
          << "documented field not written by ipusim run: " << path;
    }
  }
  // plan.csv (a compiled run's): every column documented, every documented column written.
  std::string plan_header;
  read_csv(dir.file("inf/plan.csv"), &plan_header);
  std::set<std::string> plan_columns;
  for (std::size_t at = 0; at <= plan_header.size();) {
    const std::size_t comma = std::min(plan_header.find(',', at), plan_header.size());
    plan_columns.insert("plan.csv:" + plan_header.substr(at, comma - at));
    at = comma + 1;
  }
  EXPECT_EQ(plan_columns.size(), 28u);
  for (const auto& col : plan_columns) EXPECT_TRUE(documented.count(col)) << col;
  for (const auto& [path, unit] : documented)
    if (path.starts_with("plan.csv:")) EXPECT_TRUE(plan_columns.count(path)) << path;
  // The CSV columns are documented too.
  for (const std::string col : {"supersteps.csv:active_tiles", "supersteps.csv:collective_cycles",
                                "tiles.csv:memory_bytes"})
    EXPECT_TRUE(documented.count(col)) << col;
}

// --- the HTML report in headless Chromium -----------------------------------------------------

struct Rendered {
  std::string dom, log;
};

// Chromium renders one of these pages in a few seconds; a run still going after a minute is
// stopped (system_bounded) so that a browser hanging in some environment cannot hold the suite.
constexpr int kChromiumSeconds = 60;

// Runs one Chromium command (`what`: its mode, for messages) until `complete()` says its whole
// output is there: the screenshot, or the DOM to its </html>. A run stopped at the time limit
// with its output written passes, as when the browser hangs on exit, and says so on stderr. A
// run stopped with nothing written is the browser stalling before the page (seen under load on
// CI's two cores: the GPU process started, then nothing for a minute); it is tried once more,
// with a fresh profile, and fails if the second try stalls too. A page whose own script never
// finishes stalls both tries and fails. Any other exit status fails at once, with the log.
void run_chromium(const TempDir& dir, const std::string& args, const std::string& what,
                  const std::string& log, const std::function<bool()>& complete) {
  const std::string flags =
      "--headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
      "--no-first-run --enable-logging=stderr --v=0 ";
  for (int attempt = 1;; ++attempt) {
    const std::string profile = dir.file("chromium-profile-" + std::to_string(attempt));
    const int status = system_bounded(
        "chromium " + flags + "--user-data-dir=" + profile + " " + args + " 2>" + log,
        kChromiumSeconds);
    if (status == 0) return;
    if (status == kTimedOut && complete()) {
      std::cerr << "note: chromium " << what << " wrote its output but did not exit within "
                << kChromiumSeconds << " s; stopped\n";
      return;
    }
    if (status == kTimedOut && attempt == 1) {
      std::cerr << "note: chromium " << what << " wrote nothing within " << kChromiumSeconds
                << " s; stopped and tried once more. Its log:\n"
                << read_all(log);
      continue;
    }
    if (status == kTimedOut)
      ADD_FAILURE() << "chromium " << what << " did not finish within " << kChromiumSeconds
                    << " s, twice\n"
                    << read_all(log);
    else
      ADD_FAILURE() << "chromium " << what << " exited with status " << status << "\n"
                    << read_all(log);
    return;
  }
}

// Renders `html` headless: the DOM after scripts ran, Chromium's log, and a screenshot. Fails
// (does not skip) without chromium: tools/install-deps.sh installs it.
// `min_png`: the screenshot's least size in bytes (a blank 1280x2400 page is ~10 KB; the
// reports' charts and tile maps make it hundreds).
// With IPUSIM_TEST_SCREENSHOTS=DIR in the environment, the screenshot is kept as DIR/keep_as.png
// (for people to look at; tests never read it back).
Rendered render(const TempDir& dir, const std::string& html, std::uintmax_t min_png = 60000,
                const std::string& keep_as = "") {
  Rendered r;
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    ADD_FAILURE() << "chromium not found: run tools/install-deps.sh (Debian package chromium)";
    return r;
  }
  const std::string url = shell_quote("file://" + html);
  const std::string shot = dir.file("shot.png");
  run_chromium(dir, "--window-size=1280,2400 --screenshot=" + shot + " " + url + " >/dev/null",
               "--screenshot", dir.file("shot.log"), [&] {
                 return std::filesystem::exists(shot) && std::filesystem::file_size(shot) > min_png;
               });
  EXPECT_TRUE(std::filesystem::exists(shot));
  if (std::filesystem::exists(shot)) {
    EXPECT_GT(std::filesystem::file_size(shot), min_png);
    const char* keep = std::getenv("IPUSIM_TEST_SCREENSHOTS");
    if (keep && *keep && !keep_as.empty()) {
      std::filesystem::create_directories(keep);
      std::filesystem::copy_file(shot, std::string(keep) + "/" + keep_as + ".png",
                                 std::filesystem::copy_options::overwrite_existing);
    }
  }
  const std::string dom = dir.file("dom.html");
  run_chromium(dir, "--dump-dom " + url + " >" + dom, "--dump-dom", dir.file("dom.log"),
               [&] { return read_all(dom).find("</html>") != std::string::npos; });
  r.dom = read_all(dom);
  r.log = read_all(dir.file("shot.log")) + read_all(dir.file("dom.log"));
  return r;
}

// Console messages as Chromium logs them with --enable-logging=stderr: "INFO:CONSOLE:3]" (or
// "CONSOLE(3)" in older versions).
bool has_console_message(const std::string& log) {
  return log.find(":CONSOLE") != std::string::npos || log.find("Uncaught") != std::string::npos;
}

void expect_clean(const Rendered& r) {
  // The page's script ran to the end and recorded no error; Chromium logged no console message.
  EXPECT_NE(r.dom.find("data-ready=\"1\""), std::string::npos);
  EXPECT_NE(r.dom.find("<pre id=\"js-errors\"></pre>"), std::string::npos);
  EXPECT_FALSE(has_console_message(r.log)) << r.log;
}

// The checks above can fail: a page with a console error and a script error trips both.
TEST(Reports, HeadlessCheckCatchesConsoleAndScriptErrors) {
  TempDir dir;
  std::ofstream(dir.file("bad.html"))
      << "<!DOCTYPE html><html><body><pre id=\"js-errors\"></pre><script>"
         "window.addEventListener('error', function (e) {"
         " document.getElementById('js-errors').textContent += 'error: ' + e.message; });"
         "console.error('broken');</script><script>undefinedFunction();</script></body></html>";
  const Rendered r = render(dir, dir.file("bad.html"), 0);
  EXPECT_TRUE(has_console_message(r.log)) << r.log;
  EXPECT_NE(r.dom.find("undefinedFunction is not defined"), std::string::npos) << r.dom;
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// The contents of the element with id `id` (to its first closing `close` tag).
std::string element(const std::string& dom, const std::string& id, const std::string& close) {
  const auto start = dom.find("id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  return dom.substr(start, dom.find(close, start) - start);
}

TEST(Reports, LongestSuperstepsShowEachPhaseAndNameThePhasesBeforeTheFirstComputeSet) {
  // A 16 MiB Streaming Memory read before the first compute set (superstep -1), then one
  // compute set. Issue 27: the chart drew the read as 99.9% "collective" and labelled it #-1.
  TempDir dir;
  const std::string trace = dir.file("s.trace");
  std::ofstream(trace) << "ipusim-trace 2\nname streamed\nipu 0\ncomputeset c\n"
                          "  vertex tiles=0..1471 copy bytes=8000\nend\nprogram\n"
                          "  host to_ipu tiles=0..1471 bytes=11397 memory=streaming\n"
                          "  compute c\nend\n";
  ASSERT_EQ(ipusim("run -q --system " + pod16() + " --out " + dir.file("a") + " " + trace).status,
            0);
  ASSERT_EQ(ipusim("report " + dir.file("a") + " --out " + dir.file("r.html")).status, 0);
  const std::string html = read_all(dir.file("r.html"));
  const std::string chart = element(html, "chart-supersteps", "</svg>");
  ASSERT_FALSE(chart.empty());
  EXPECT_NE(chart.find("data-phase=\"streaming\""), std::string::npos) << chart;
  EXPECT_EQ(chart.find("data-phase=\"collective\""), std::string::npos) << chart;
  EXPECT_NE(chart.find("(before the first compute set)"), std::string::npos) << chart;
  EXPECT_EQ(html.find("#-1"), std::string::npos);
}

TEST(Reports, SuperstepsAndTopComputeSetsNameTheLayerPassAndDominantPhase) {
  // Issue 55, part 5: the longest-superstep table and the top compute sets name the (layer,
  // pass) a compiled step's compute set serves and the phase kind that dominates, not the
  // generated compute-set name (kept on hover).
  TempDir dir;
  const std::string trace = compile_resnet(dir);
  ASSERT_EQ(ipusim("run -q --system " + pod16() + " --out " + dir.file("a") + " " + trace).status,
            0);
  ASSERT_EQ(ipusim("report " + dir.file("a") + " --out " + dir.file("r.html")).status, 0);
  const std::string html = read_all(dir.file("r.html"));
  const auto at = html.find("<h2>Longest supersteps");
  ASSERT_NE(at, std::string::npos);
  const std::string table = html.substr(at, html.find("</table>", at) - at);
  EXPECT_NE(table.find("<th>layer</th><th>pass</th><th>most time in</th>"), std::string::npos)
      << table;
  // A row: a layer of the model in the cell, the compute set's generated name in its title.
  const std::regex row(
      "<td title=\"[a-z0-9_/]+\">([a-z0-9_/ +()]+)</td><td>([a-z_]+)</td><td>"
      "(compute|sync|exchange|host|streaming|external_sync|waiting|inter_ipu|"
      "collective)</td>");
  EXPECT_TRUE(std::regex_search(table, row)) << table.substr(0, 3000);
  const std::string top = element(html, "chart-top-compute-sets", "</svg>");
  for (const char* pass : {" forward<", " data_gradient<"})
    EXPECT_NE(top.find(pass), std::string::npos) << pass << top;
}

TEST(Reports, HtmlReportRendersChartsAndTileMaps) {
  TempDir dir;
  const std::string trace = compile_resnet(dir);
  ASSERT_EQ(ipusim("run -q --system " + pod16() + " --out " + dir.file("a") + " " + trace).status,
            0);
  ASSERT_EQ(ipusim("run -q --system " + pod16() + " --set chip.clock=1.85GHz --out " +
                   dir.file("b") + " " + trace)
                .status,
            0);
  // The what-if's page (b, at 1.85 GHz) compared with the baseline (a, at 1.325 GHz).
  const auto rep = ipusim("report " + dir.file("b") + " --compare " + dir.file("a") + " --out " +
                          dir.file("r.html"));
  ASSERT_EQ(rep.status, 0) << rep.err;
  EXPECT_EQ(rep.out, dir.file("r.html") + "\n");
  const std::string html = read_all(dir.file("r.html"));
  // Self-contained: no external resource.
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  const Rendered r = render(dir, dir.file("r.html"));
  expect_clean(r);
  for (const char* id : {"summary", "chart-time-split", "heatmap-memory-ipu0",
                         "heatmap-compute-ipu0", "worst-tiles-ipu0", "chart-top-compute-sets",
                         "chart-top-exchanges", "chart-supersteps", "compare"})
    EXPECT_NE(r.dom.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  // One square per tile in each heat map (plus the 10 of the colour scale).
  const double tiles = num(parse_file(dir.file("a/stats.json")), "chip.tiles");
  EXPECT_EQ(count(element(r.dom, "heatmap-memory-ipu0", "</svg>"), "<rect"), tiles + 10);
  // The time split has a compute segment; the summary shows the throughput.
  EXPECT_NE(element(r.dom, "chart-time-split", "</svg>").find("data-phase=\"compute\""),
            std::string::npos);
  EXPECT_NE(element(r.dom, "summary", "</table>").find("images/s"), std::string::npos);
  EXPECT_NE(element(r.dom, "compare", "</div>").find("chip.clock"), std::string::npos);
  // The compare section opens with the headline, then attributes the change (equation, chart
  // by phase kind and by layer, labelled axes) and lists the settings.
  for (const char* id :
       {"compare-headline", "compare-equation", "chart-compare-phases", "compare-phases",
        "chart-compare-layers", "compare-layers", "compare-settings", "compare-stats"})
    EXPECT_NE(r.dom.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  // Issue 27: it read from this run to the other, so the faster what-if's page said "slower".
  // Now B is this run and A the other, as 'ipusim compare a b' has them.
  const std::string headline = element(r.dom, "compare-headline", "</table>");
  EXPECT_NE(headline.find("<th>A (other run)</th><th>B (this run)</th>"), std::string::npos)
      << headline;
  EXPECT_NE(headline.find("faster"), std::string::npos) << headline;  // 1.325 -> 1.85 GHz
  EXPECT_EQ(headline.find("slower"), std::string::npos) << headline;
  // ... and it sits after the summary, linked from the top, not at the end of the page.
  const auto link = html.find("<a href=\"#compared-with\">"),
             title = html.find("<h2 id=\"compared-with\">"),
             next = html.find("<h2", html.find("<h2>Summary</h2>") + 1);
  EXPECT_LT(link, title);
  EXPECT_EQ(next, title) << "the first section after the summary";
  EXPECT_NE(headline.find("higher"), std::string::npos) << headline;
  EXPECT_NE(headline.find("same memory"), std::string::npos) << headline;
  const std::string phases = element(r.dom, "chart-compare-phases", "</svg>");
  EXPECT_TRUE(std::regex_search(
      phases, std::regex("change in step time by phase kind, B \u2212 A \\[(ms|us)\\]")))
      << phases;
  EXPECT_NE(phases.find(">compute<"), std::string::npos) << phases;
  EXPECT_NE(element(r.dom, "chart-compare-layers", "</svg>").find("change in step time by layer"),
            std::string::npos);
  EXPECT_NE(element(r.dom, "compare-settings", "</table>").find("1.85GHz"), std::string::npos);

  // The compare section on its own page (the report's head, style and script), screenshotted
  // for people to look at (IPUSIM_TEST_SCREENSHOTS).
  const std::size_t body = html.find("<h2>Summary</h2>"),
                    section = html.find("<h2 id=\"compared-with\">Compared with");
  ASSERT_NE(body, std::string::npos);
  ASSERT_NE(section, std::string::npos);
  const std::size_t end = html.find("</div>\n", section);
  ASSERT_NE(end, std::string::npos);
  std::ofstream(dir.file("compare.html"))
      << html.substr(0, body) + html.substr(section, end + 7 - section) + "</body></html>\n";
  TempDir shot_dir;
  const Rendered c = render(shot_dir, dir.file("compare.html"), 30000, "compare-clock-what-if");
  expect_clean(c);
  EXPECT_NE(c.dom.find("id=\"chart-compare-phases\""), std::string::npos);
}

// The per-layer views (issue 13) on the reduced BERT pipeline (2 IPUs): the sortable layer
// table, whose rows add up to each IPU's step; the stacked chart of the top layers; the
// roofline with a point per layer that has FLOPs and exchanged bytes; the BSP strip of the
// slowest IPU covering its whole width; the memory maps coloured against the tile capacity.
TEST(Reports, HtmlReportShowsLayersRooflineBspStripAndMemoryAgainstCapacity) {
  TempDir dir;
  const auto r =
      ipusim("run -q --run " + workload("bert_tiny-pod16.yaml") + " --out " + dir.file("out"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rep = ipusim("report " + dir.file("out") + " --out " + dir.file("r.html"));
  ASSERT_EQ(rep.status, 0) << rep.err;
  // A click on the executions header once the page's own handlers are in place.
  std::string html = read_all(dir.file("r.html"));
  html.insert(html.rfind("</body>"),
              "<script>document.addEventListener('DOMContentLoaded', function () {"
              "Array.prototype.filter.call(document.querySelectorAll('#layers th'), function (t) "
              "{ return t.textContent === 'executions'; })[0].click(); });</script>\n");
  std::ofstream(dir.file("clicked.html")) << html;
  const Rendered page = render(dir, dir.file("clicked.html"), 60000, "layers-bert-tiny");
  expect_clean(page);
  for (const char* id : {"layers", "chart-layers", "chart-roofline", "chart-bsp-strip"})
    EXPECT_NE(page.dom.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  const JsonValue stats = parse_file(dir.file("out/stats.json"));
  std::string header;
  const auto csv = read_csv(dir.file("out/layers.csv"), &header);
  ASSERT_GT(csv.size(), 4u);

  // The table: one row per layers.csv row; each IPU's totals add up to its step cycles; after
  // the click, sorted by executions, most first.
  const std::string table = element(page.dom, "layers", "</table>");
  EXPECT_NE(table.find("data-dir=\"desc\">executions"), std::string::npos) << table.substr(0, 800);
  std::map<unsigned long, double> totals;
  std::vector<double> executions;
  std::size_t rows = 0;
  const std::regex total_re("class=\"n total\" data-v=\"([^\"]+)\""),
      cell_re("data-v=\"([^\"]+)\"");
  for (auto p = table.find("<tr data-ipu=\""); p != std::string::npos;
       p = table.find("<tr data-ipu=\"", p + 1)) {
    const std::string tr = table.substr(p, table.find("</tr>", p) - p);
    ++rows;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(tr, m, total_re)) << tr;
    totals[std::stoul(tr.substr(14))] += std::stod(m[1]);
    std::vector<double> cells;
    for (std::sregex_iterator it(tr.begin(), tr.end(), cell_re), e; it != e; ++it)
      cells.push_back(std::stod((*it)[1]));
    ASSERT_GE(cells.size(), 2u);
    executions.push_back(cells[1]);  // IPU, executions, ...
  }
  EXPECT_EQ(rows, csv.size());
  EXPECT_TRUE(std::is_sorted(executions.rbegin(), executions.rend()));
  const double ipus = num(stats, "system.simulated_ipus");
  ASSERT_EQ(totals.size(), ipus);
  for (std::size_t i = 0; i < ipus; ++i) {
    const std::string at = "ipu[" + std::to_string(i) + "].";
    EXPECT_EQ(totals[static_cast<unsigned long>(num(stats, at + "index"))],
              num(stats, at + "cycles"))
        << i;
  }

  // The top layers: a bar (with its total) per row, at most 20.
  EXPECT_EQ(count(element(page.dom, "chart-layers", "</svg>"), "<text class=\"total\""),
            std::min<std::size_t>(20, csv.size()));

  // The roofline: a point per row with FLOPs and exchanged bytes; labelled axes and both roofs.
  std::size_t with_both = 0;
  for (const auto& row : csv)
    if (std::stod(row[14]) > 0 && std::stod(row[15]) > 0 && std::stod(row[13]) > 0) ++with_both;
  const std::string roof = element(page.dom, "chart-roofline", "</svg>");
  EXPECT_GT(with_both, 0u);
  EXPECT_EQ(count(roof, "<circle class=\"point\""), with_both);
  for (const char* text :
       {"FLOP per exchanged byte (FLOP/B", "achieved FLOP/s", "AMP peak", "B/cycle", "TFLOP/s"})
    EXPECT_NE(roof.find(text), std::string::npos) << text;

  // The BSP strip: the slowest IPU, all its supersteps, every pixel column of the strip drawn.
  std::size_t slowest = 0;
  for (std::size_t i = 1; i < ipus; ++i)
    if (num(stats, "ipu[" + std::to_string(i) + "].cycles") >
        num(stats, "ipu[" + std::to_string(slowest) + "].cycles"))
      slowest = i;
  const auto slowest_ipu =
      static_cast<unsigned long>(num(stats, "ipu[" + std::to_string(slowest) + "].index"));
  const auto steps = read_csv(dir.file("out/supersteps.csv"), &header);
  const auto supersteps = std::count_if(steps.begin(), steps.end(), [&](const auto& row) {
    return std::stoul(row[0]) == slowest_ipu;
  });
  const std::string strip = element(page.dom, "chart-bsp-strip", "</svg>");
  EXPECT_NE(
      strip.find(fmt::format("data-supersteps=\"{}\" data-ipu=\"{}\"", supersteps, slowest_ipu)),
      std::string::npos)
      << strip.substr(0, 300);
  std::set<int> columns;
  const std::regex seg_re(
      "class=\"segment\" data-kind=\"\\w+\" x=\"(\\d+)\" y=\"[^\"]+\" "
      "width=\"(\\d+)\"");
  for (std::sregex_iterator it(strip.begin(), strip.end(), seg_re), e; it != e; ++it)
    for (int x = std::stoi((*it)[1]), w = std::stoi((*it)[2]), i = 0; i < w; ++i)
      columns.insert(x + i);
  EXPECT_EQ(columns.size(), 1000u);
  EXPECT_NE(strip.find("data-kind=\"compute\""), std::string::npos);
  EXPECT_NE(strip.find("time in the step ("), std::string::npos);

  // Memory against the tile capacity, which the legend names.
  const std::string mem = element(page.dom, "heatmap-memory-ipu0", "</svg>");
  EXPECT_NE(mem.find("0 .. " + fmt::format("{}", num(stats, "chip.tile_memory")) + " B"),
            std::string::npos)
      << mem.substr(mem.size() - 400);
  EXPECT_NE(mem.find("tile capacity of "), std::string::npos);
  EXPECT_NE(mem.find("(chip.tile_memory)"), std::string::npos);
  // The memory by category: its rows add up to the IPU's memory in tiles.csv.
  const std::string cats = element(page.dom, "memory-breakdown-ipu0", "</table>");
  // (A training step has weights, activations, gradients and optimiser state, and the
  // runtime's categories; no "tensors" row: that is only an older tiles.csv's.)
  for (const char* c : {"weights", "activations", "gradients", "optimiser state", "vertex state",
                        "code", "exchange code", "stack"})
    EXPECT_NE(cats.find(std::string("<td>") + c + "</td>"), std::string::npos) << c;
  EXPECT_EQ(cats.find("<td>tensors</td>"), std::string::npos);
  double cat_sum = 0, ipu0_memory = 0;
  for (std::sregex_iterator it(cats.begin(), cats.end(), cell_re), e; it != e; ++it)
    cat_sum += std::stod((*it)[1]);
  for (const auto& row : read_csv(dir.file("out/tiles.csv"), &header))
    if (row[0] == "0") ipu0_memory += std::stod(row[4]);
  EXPECT_EQ(cat_sum, ipu0_memory);
  EXPECT_NE(page.dom.find("id=\"chart-memory-ipu0\""), std::string::npos);

  // An older tiles.csv, with the tensors in one category, renders them as "tensors".
  std::string together =
      "ipu,tile,compute_cycles,exchange_bytes,memory_bytes,tensor_bytes,vertex_state_bytes,"
      "code_bytes,exchange_code_bytes,stack_bytes\n";
  for (const auto& row : read_csv(dir.file("out/tiles.csv"), &header)) {
    double tensors = 0;
    for (std::size_t k = 5; k < 13; ++k) tensors += std::stod(row[k]);
    together += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", row[0], row[1], row[2], row[3],
                            row[4], tensors, row[13], row[14], row[15], row[16]);
  }
  const std::string now_tiles = read_all(dir.file("out/tiles.csv"));
  { std::ofstream(dir.file("out/tiles.csv")) << together; }
  const auto together_rep =
      ipusim("report " + dir.file("out") + " --out " + dir.file("together.html"));
  ASSERT_EQ(together_rep.status, 0) << together_rep.err;
  const std::string together_cats =
      element(read_all(dir.file("together.html")), "memory-breakdown-ipu0", "</table>");
  EXPECT_NE(together_cats.find("<td>tensors</td>"), std::string::npos);
  EXPECT_EQ(together_cats.find("<td>weights</td>"), std::string::npos);
  { std::ofstream(dir.file("out/tiles.csv")) << now_tiles; }

  // An older run directory (tiles.csv without the categories) still renders, saying so.
  std::string old_tiles = "ipu,tile,compute_cycles,exchange_bytes,memory_bytes\n";
  for (const auto& row : read_csv(dir.file("out/tiles.csv"), &header))
    old_tiles += fmt::format("{},{},{},{},{}\n", row[0], row[1], row[2], row[3], row[4]);
  { std::ofstream(dir.file("out/tiles.csv")) << old_tiles; }
  const auto old_rep = ipusim("report " + dir.file("out") + " --out " + dir.file("old.html"));
  ASSERT_EQ(old_rep.status, 0) << old_rep.err;
  const std::string old_html = read_all(dir.file("old.html"));
  EXPECT_NE(old_html.find("No memory categories in tiles.csv"), std::string::npos);
  EXPECT_NE(old_html.find("id=\"heatmap-memory-ipu0\""), std::string::npos);
}

TEST(Reports, SweepReportDrawsScalingCharts) {
  TempDir dir;
  // tests/data/sweep/sweep.json: resnet 1000 / 3600 / 12800 images/s on 16 / 64 / 256 IPUs,
  // bert 100 / 380 sequences/s on 16 / 64, one failed point.
  const std::string sweep = dir.file("sweep");
  std::filesystem::create_directories(sweep);
  std::filesystem::copy_file(source_dir() + "/tests/data/sweep/sweep.json", sweep + "/sweep.json");
  const auto rep = ipusim("report " + sweep + " --out " + dir.file("s.html"));
  ASSERT_EQ(rep.status, 0) << rep.err;
  const Rendered r = render(dir, dir.file("s.html"));
  expect_clean(r);
  // One panel per workload, in order of appearance.
  const std::string thr = element(r.dom, "chart-sweep-throughput-0", "</svg>");
  const std::string eff = element(r.dom, "chart-sweep-efficiency-0", "</svg>");
  const std::string bert_eff = element(r.dom, "chart-sweep-efficiency-1", "</svg>");
  EXPECT_EQ(count(thr, "<circle"), 3u);
  EXPECT_EQ(count(element(r.dom, "chart-sweep-throughput-1", "</svg>"), "<circle"), 2u);
  EXPECT_EQ(count(eff, "<circle"), 3u);
  EXPECT_NE(thr.find("resnet50: 256 IPUs: 12800"), std::string::npos) << thr;
  EXPECT_NE(thr.find(">IPUs (log2 scale)</text>"), std::string::npos) << thr;
  // Efficiency: (3600 / 64) / (1000 / 16) = 0.9; (12800 / 256) / (1000 / 16) = 0.8;
  // (380 / 64) / (100 / 16) = 0.95; with the ideal line at 1.
  EXPECT_NE(eff.find("resnet50: 64 IPUs: 0.9<"), std::string::npos) << eff;
  EXPECT_NE(eff.find("resnet50: 256 IPUs: 0.8<"), std::string::npos) << eff;
  EXPECT_NE(bert_eff.find("bert-large: 64 IPUs: 0.95<"), std::string::npos) << bert_eff;
  EXPECT_NE(eff.find("class=\"ideal\""), std::string::npos) << eff;
  const std::string table = element(r.dom, "sweep-points", "</table>");
  EXPECT_EQ(count(table, "<tr class=\"failed\""), 1u);
  EXPECT_NE(table.find("out of memory on tile 17"), std::string::npos);

  // A malformed point is a clear error naming the key path.
  std::string bad = read_all(sweep + "/sweep.json");
  bad.replace(bad.find("\"ipus\": 16"), 10, "\"ipus\": \"16\"");
  { std::ofstream(sweep + "/sweep.json") << bad; }
  const auto err = ipusim("report " + sweep);
  EXPECT_EQ(err.status, 3);
  EXPECT_NE(err.err.find("points[0].ipus\": expected a number, found a string"), std::string::npos)
      << err.err;
}

// Issue 27: a sweep over values that double (tile counts 368, 736, 2944) was drawn on a
// linear axis that crowded the small ones, or read as evenly spaced without saying why. Values
// spanning a factor of 8 or more go on a log2 axis whose title says so: tick x positions are
// then l + pad + (log2 x - log2 368) / 3 x width, so 736 sits a third of the way to 2944.
// A clock sweep (1 to 1.85 GHz) stays linear.
TEST(Reports, SweepOverDoublingValuesDrawsALog2AxisAndSaysSo) {
  TempDir dir;
  const std::string sweep = dir.file("sweep");
  std::filesystem::create_directories(sweep);
  std::string points;
  const std::array<int, 3> tiles{368, 736, 2944};
  for (std::size_t i = 0; i < tiles.size(); ++i)
    points += fmt::format(
        "{}{{\"id\": \"t{}\", \"overrides\": {{\"chip.tiles\": \"{}\"}}, \"status\": \"ok\", "
        "\"error\": \"\", \"run_dir\": \"points/t{}\", \"workload\": \"matmul\", \"system\": "
        "\"GC200\", \"ipus\": 1, \"step_time_s\": {}, \"throughput\": null, "
        "\"throughput_unit\": \"\"}}",
        i ? ",\n" : "", i, tiles[i], i, 1e-3 / (i + 1));
  std::ofstream(sweep + "/sweep.json")
      << "{\"format\": \"ipusim-sweep/1\", \"spec\": \"s.yaml\", \"name\": \"tiles\", "
         "\"points\": [\n"
      << points << "]}\n";
  const auto rep = ipusim("report " + sweep + " --out " + dir.file("s.html"));
  ASSERT_EQ(rep.status, 0) << rep.err;
  const std::string html = read_all(dir.file("s.html"));
  const auto at = html.find("id=\"chart-sweep-time-0\"");
  const std::string chart =
      html.substr(at == std::string::npos ? html.find("class=\"chart\"") : at);
  EXPECT_NE(chart.find(">chip.tiles (log2 scale)</text>"), std::string::npos)
      << chart.substr(0, 3000);
  std::map<int, double> x;
  const std::regex tick("<text class=\"x-tick\" x=\"([0-9.]+)\"[^>]*>([0-9]+)</text>");
  const std::string svg = chart.substr(0, chart.find("</svg>"));
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tick); it != std::sregex_iterator();
       ++it)
    x[std::stoi((*it)[2])] = std::stod((*it)[1]);
  ASSERT_EQ(x.size(), 3u) << svg;
  EXPECT_NEAR(x[736] - x[368], (x[2944] - x[368]) / 3, 0.2);
}

// A sweep.json of `points` (each: the swept overrides, IPUs, global batch) as 'ipusim sweep'
// writes it, without run directories.
std::string sweep_json(
    const std::vector<std::tuple<std::string, std::map<std::string, std::string>, int, int>>&
        points) {
  std::string out = "{\"format\": \"ipusim-sweep/1\", \"spec\": \"s.yaml\", \"points\": [";
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& [id, overrides, ipus, batch] = points[i];
    std::string o;
    for (const auto& [k, v] : overrides)
      o += (o.empty() ? "" : ", ") + fmt::format("\"{}\": \"{}\"", k, v);
    out += fmt::format(
        "{}{{\"id\": \"{}\", \"overrides\": {{{}}}, \"status\": \"ok\", \"error\": \"\", "
        "\"run_dir\": \"points/{}\", \"workload\": \"resnet\", \"system\": \"pod\", \"ipus\": {}, "
        "\"step_time_s\": 1.0, \"throughput\": {}, \"throughput_unit\": \"images/s\", "
        "\"samples_per_step\": {}, \"samples_unit\": \"images\"}}",
        i ? ", " : "", id, o, id, ipus, 100 * ipus, batch);
  }
  return out + "]}";
}

TEST(Reports, SweepChartsKeepSweptValuesAndLabelBatchesOnlyWhereTheyChange) {
  // Issue 55, part 5: a legend shortens the key, never the value (a long model path is kept
  // whole, over several lines); the per-point labels name a path by its file name; "batch N"
  // labels only a series whose batch changes along it.
  TempDir dir;
  const std::string model = "/a/very/long/directory/name/for/the/models/resnet_tiny_variant.yaml";
  std::vector<std::tuple<std::string, std::map<std::string, std::string>, int, int>> pts;
  for (const char* ipus : {"16", "64"})
    for (const char* m : {"a.yaml", model.c_str()})
      pts.push_back({fmt::format("p{}{}", ipus, m[0] == '/' ? "long" : "short"),
                     {{"run.replicas", ipus}, {"run.model", m}},
                     std::stoi(ipus),
                     256});
  std::filesystem::create_directories(dir.file("s"));
  std::ofstream(dir.file("s/sweep.json")) << sweep_json(pts);
  auto rep = ipusim("report " + dir.file("s") + " --out " + dir.file("s.html"));
  ASSERT_EQ(rep.status, 0) << rep.err;
  std::string html = read_all(dir.file("s.html"));
  const auto svg_of = [&](const std::string& id) {
    const auto at = html.find("id=\"" + id + "\"");
    return at == std::string::npos ? std::string() : html.substr(at, html.find("</svg>", at) - at);
  };
  const std::string chart = svg_of("chart-sweep-throughput-0");
  ASSERT_FALSE(chart.empty()) << html;
  // The legend's lines put together are the series name: the key shortened, the value whole.
  std::string legend;
  const std::regex tspan("<tspan[^>]*>([^<]*)</tspan>");
  for (auto it = std::sregex_iterator(chart.begin(), chart.end(), tspan);
       it != std::sregex_iterator(); ++it)
    legend += (*it)[1].str() + "|";
  EXPECT_NE(legend.find("model=a.yaml|"), std::string::npos) << legend;
  std::string joined = legend;
  joined.erase(std::remove(joined.begin(), joined.end(), '|'), joined.end());
  EXPECT_NE(joined.find("model=" + model), std::string::npos) << legend;
  EXPECT_EQ(chart.find("..."), std::string::npos) << chart;
  EXPECT_EQ(chart.find(">batch "), std::string::npos) << "the batch is 256 at every point";
  EXPECT_NE(html.find("Every point's global batch: 256 images per step."), std::string::npos);
  // The per-point labels: the file name of the path.
  const std::string breakdown = svg_of("chart-sweep-breakdown");
  EXPECT_NE(breakdown.find(">p64long resnet_tiny_variant.yaml 64<"), std::string::npos)
      << breakdown;

  // A scaling sweep that grows the global batch with the IPUs labels its points.
  pts = {{"q16", {{"run.replicas", "16"}}, 16, 256}, {"q64", {{"run.replicas", "64"}}, 64, 1024}};
  std::ofstream(dir.file("s/sweep.json")) << sweep_json(pts);
  rep = ipusim("report " + dir.file("s") + " --out " + dir.file("s.html"));
  ASSERT_EQ(rep.status, 0) << rep.err;
  html = read_all(dir.file("s.html"));
  const std::string grown = svg_of("chart-sweep-throughput-0");
  EXPECT_NE(grown.find(">batch 256<"), std::string::npos) << grown;
  EXPECT_NE(grown.find(">batch 1024<"), std::string::npos) << grown;
}

TEST(Reports, SweepOverAClockDrawsAgainstTheClockAndLinksAReportPerPoint) {
  // A what-if over the tile clock of the reduced ResNet on a POD16: charts against
  // chip.clock (GHz), not IPUs; the swept value a column of the points table and of sweep.csv;
  // each point's own report written and linked; global batch and time to train in sweep.csv.
  TempDir dir;
  const std::string spec = dir.file("clock.yaml");
  {
    std::ofstream(spec) << "format: ipusim-sweep/1\nname: clock\nbase:\n  run: " +
                               workload("resnet_tiny-pod16.yaml") +
                               "\naxes:\n  - chip.clock: [1GHz, 1.325GHz, 1.85GHz]\n";
  }
  const std::string out = dir.file("sweep");
  const auto sw = ipusim("sweep " + spec + " --out " + out + " --jobs 2");
  ASSERT_EQ(sw.status, 0) << sw.out << sw.err;
  const auto rep = ipusim("report " + out + " --out " + dir.file("s.html"));
  ASSERT_EQ(rep.status, 0) << rep.err;
  TempDir shot_dir;
  const Rendered r = render(shot_dir, dir.file("s.html"), 30000, "sweep-clock-what-if");
  expect_clean(r);
  const std::string chart = element(r.dom, "chart-sweep-throughput-0", "</svg>");
  EXPECT_EQ(count(chart, "<circle"), 3u);
  EXPECT_NE(chart.find(">chip.clock (GHz)</text>"), std::string::npos) << chart;
  EXPECT_EQ(chart.find(">IPUs"), std::string::npos) << chart;
  for (const char* tick : {">1<", ">1.325<", ">1.85<"})
    EXPECT_NE(chart.find(tick), std::string::npos) << tick;
  EXPECT_NE(chart.find(">throughput (images/s)</text>"), std::string::npos) << chart;
  EXPECT_EQ(r.dom.find("chart-sweep-efficiency-0"), std::string::npos);  // not an IPU axis
  EXPECT_NE(r.dom.find("id=\"chart-sweep-breakdown\""), std::string::npos);
  const std::string table = element(r.dom, "sweep-points", "</table>");
  EXPECT_NE(table.find("<th class=\"path\">chip.clock</th>"), std::string::npos) << table;
  EXPECT_EQ(count(table, "report.html\""), 6u) << table;  // id and run directory, per point
  for (const char* v : {">1GHz<", ">1.325GHz<", ">1.85GHz<"})
    EXPECT_NE(table.find(v), std::string::npos) << v;

  // sweep.csv: the swept value, the global batch (16 replicas x 8 images x GA 2 = 256) and
  // the time to train (1 epoch of 50,000 images: ceil(50000 / 256) = 196 steps, no host terms).
  std::string header;
  const auto rows = read_csv(out + "/sweep.csv", &header);
  ASSERT_EQ(rows.size(), 3u);
  const auto column = [&](const std::string& name) {
    std::istringstream in(header);
    std::string f;
    for (std::size_t i = 0; std::getline(in, f, ','); ++i)
      if (f == name) return i;
    ADD_FAILURE() << "no column " << name << " in " << header;
    return std::size_t{0};
  };
  for (const auto& row : rows) {
    EXPECT_EQ(row[column("global_batch")], "256");
    EXPECT_EQ(row[column("global_batch_unit")], "images");
    EXPECT_NEAR(std::stod(row[column("time_to_train_s")]),
                196 * std::stod(row[column("step_time_s")]), 1e-9);
    EXPECT_TRUE(
        std::filesystem::is_regular_file(out + "/points/" + row[column("id")] + "/report.html"));
  }
  EXPECT_EQ(rows[0][column("chip.clock")], "1GHz");
}

// Issue 27: the summary of a pipeline showed one IPU's phases without saying whose, hid the
// fullest IPU past the first four, compared a replica's FLOP/s with a replica's peak without
// saying so, and did not repeat the run's --set overrides. Whose phases and which IPU is
// fullest are read back from stats.json's ipu[] (the IPU ending last; the largest tile).
TEST(Reports, SummaryNamesItsIpusItsOverridesAndWhatItsPeakCovers) {
  TempDir dir;
  const std::string placement = "ipu1=0,0 ipu2=0,0 ipu3=1,1 ipu4=1,1 ipu0=0,0";
  const auto r = ipusim("run --run " + workload("bert_tiny-pod16.yaml") +
                        " --set run.replicas=2 --set 'run.ipus_per_replica = 5' --set "
                        "'run.pipeline_placement=" +
                        placement + "' --out " + dir.file("out"));
  ASSERT_EQ(r.status, 0) << r.err;
  const JsonValue stats = parse_json(read_all(dir.file("out/stats.json")), "stats.json");
  std::uint32_t last = 0, fullest = 0;
  double last_cycles = -1, fullest_bytes = -1;
  for (std::uint32_t i = 0; i < 5; ++i) {
    const double c = json_field(stats, fmt::format("ipu[{}].cycles", i))->number.d;
    const double m = json_field(stats, fmt::format("ipu[{}].tiles.memory.max", i))->number.d;
    if (c > last_cycles) {
      last = i;
      last_cycles = c;
    }
    if (m > fullest_bytes) {
      fullest = i;
      fullest_bytes = m;
    }
  }
  ASSERT_NE(fullest, 0u) << "the placement should make another IPU than IPU 0 the fullest";
  EXPECT_NE(r.out.find(fmt::format("\n  phases of ipu{} (the IPU whose program ends last", last)),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\n  ipu0 tile mem "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("\n  ipu{} tile mem ", fullest)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; the fullest IPU)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" on the 5 simulated IPUs (one replica) = "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("% of their 1.25 PFLOP/s FP16.16 peak"), std::string::npos) << r.out;
  const std::string given =
      "run.replicas=2, run.ipus_per_replica=5, run.pipeline_placement=" + placement;
  EXPECT_NE(r.out.find("\n  overrides     " + given + "\n"), std::string::npos) << r.out;
  const JsonValue* overrides = json_find(stats, "overrides");
  ASSERT_NE(overrides, nullptr);
  ASSERT_EQ(overrides->items.size(), 3u);
  EXPECT_EQ(overrides->items[1].string, "run.ipus_per_replica=5");
  EXPECT_EQ(overrides->items[2].string, "run.pipeline_placement=" + placement);
}

TEST(Reports, CompareShowsClockKeyAndMovedStatsFirst) {
  TempDir dir;
  const std::string trace = compile_resnet(dir);
  ASSERT_EQ(ipusim("run -q --system " + pod16() + " --out " + dir.file("a") + " " + trace).status,
            0);
  ASSERT_EQ(ipusim("run -q --system " + pod16() + " --set chip.clock=1.85GHz --out " +
                   dir.file("b") + " " + trace)
                .status,
            0);
  const auto r = ipusim("compare --top 100 " + dir.file("a") + " " + dir.file("b"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  const auto config_at = std::find_if(lines.begin(), lines.end(), [](auto& l) {
    return l.starts_with("settings that differ (config.resolved.yaml and the trace, A -> B: 1)");
  });
  ASSERT_NE(config_at, lines.end()) << r.out;
  EXPECT_NE((config_at + 1)->find("chip.clock"), std::string::npos) << r.out;
  EXPECT_NE((config_at + 1)->find("1.85GHz"), std::string::npos) << r.out;
  const auto stats_at = std::find_if(
      lines.begin(), lines.end(), [](auto& l) { return l.starts_with("stats that moved most"); });
  ASSERT_NE(stats_at, lines.end());
  EXPECT_GT(stats_at, config_at);  // config differences first
  // The headline first: a higher clock is faster, with higher throughput, a shorter time to
  // train and the same memory.
  const auto head_at = std::find_if(
      lines.begin(), lines.end(), [](auto& l) { return l.starts_with("headline (B against A)"); });
  ASSERT_NE(head_at, lines.end()) << r.out;
  EXPECT_LT(head_at, config_at);
  auto headline = [&](const std::string& label) -> std::string {
    for (auto it = head_at + 1; it != lines.end() && !it->empty(); ++it)
      if (it->starts_with("  " + label + " ")) return *it;
    return "";
  };
  EXPECT_TRUE(headline("step time").ends_with(" faster")) << r.out;
  EXPECT_TRUE(headline("throughput").ends_with(" higher")) << r.out;
  EXPECT_NE(headline("throughput").find("images/s"), std::string::npos) << r.out;
  EXPECT_TRUE(headline("time to train").ends_with(" faster")) << r.out;
  EXPECT_TRUE(headline("peak tile memory").ends_with(" same memory")) << r.out;
  EXPECT_NE(headline("peak tile memory").find(" 0% "), std::string::npos) << r.out;
  // Every changed stat has a direction.
  // Rows sorted by |%|, largest first; the clock itself moved by +39.6% (1.325 -> 1.85 GHz).
  std::vector<double> pct;
  bool clock_row = false;
  for (auto it = stats_at + 2; it != lines.end(); ++it) {
    const auto d = it->rfind(' ');
    const std::string direction = it->substr(d + 1);
    EXPECT_TRUE(direction == "up" || direction == "down") << *it;
    const std::string rest = it->substr(0, it->find_last_not_of(' ', d) + 1);
    const auto p = rest.rfind(' ');
    std::string last = rest.substr(p + 1);
    if (last.ends_with('%')) last.pop_back();
    if (last == "new") continue;
    pct.push_back(std::fabs(std::stod(last)));
    if (it->find("chip.clock [Hz]") != std::string::npos) {
      clock_row = true;
      EXPECT_NE(it->find("+39.6%"), std::string::npos) << *it;
    }
  }
  ASSERT_GT(pct.size(), 3u);
  EXPECT_TRUE(std::is_sorted(pct.rbegin(), pct.rend())) << r.out;
  EXPECT_TRUE(clock_row) << r.out;
  EXPECT_GT(pct.front(), 0);
  EXPECT_EQ(r.out.find("chip.tiles"), std::string::npos);  // unchanged fields are not listed
  // Not a run directory: a clear error.
  const auto bad = ipusim("compare " + dir.file("a") + " " + dir.path());
  EXPECT_EQ(bad.status, 3);
  EXPECT_NE(bad.err.find("not a run directory"), std::string::npos) << bad.err;
}

TEST(Reports, BadRunDirectoriesAndTimelineOptionsAreClearErrors) {
  TempDir dir;
  const std::string trace = compile_resnet(dir);
  // Replica symmetry: only IPU 0 of the POD16 is simulated.
  const auto tiles = ipusim("run -q --system " + pod16() + " --timeline " + dir.file("t.json") +
                            " --timeline-tiles 3 " + trace);
  EXPECT_EQ(tiles.status, 2);
  EXPECT_NE(tiles.err.find("--timeline-tiles: IPU 3 was not simulated"), std::string::npos)
      << tiles.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("t.json")));
  ASSERT_EQ(ipusim("run -q --system " + pod16() + " --out " + dir.file("a") + " " + trace).status,
            0);
  // A corrupt CSV names the file, line and column.
  std::string csv = read_all(dir.file("a/tiles.csv"));
  const auto line7 = [&] {
    std::size_t p = 0;
    for (int i = 0; i < 6; ++i) p = csv.find('\n', p) + 1;
    return p;
  }();
  csv.replace(csv.find('\n', line7) - 1, 1, "x");
  { std::ofstream(dir.file("a/tiles.csv")) << csv; }
  auto r = ipusim("report " + dir.file("a"));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("tiles.csv:7: column stack_bytes: expected an integer, found"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("a/report.html")));
  // A stats.json that is not ours.
  { std::ofstream(dir.file("a/stats.json")) << "{\"format\": \"other/2\"}\n"; }
  r = ipusim("compare " + dir.file("a") + " " + dir.file("a"));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("key \"format\": expected \"ipusim-stats/1\", found \"other/2\""),
            std::string::npos)
      << r.err;
  r = ipusim("report " + dir.path() + "/missing");
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("not a run directory"), std::string::npos) << r.err;
}

TEST(Reports, StatsReportAndCompareCannotUseAreRefusedWhenTheRunDirectoryIsRead) {
  // Issue 30, defects 6 and 15: a chip.clock of 0 made the report's roofline take the log of
  // a non-positive rate and loop about 2^31 times (11 s, 2.1 GB) where compare refused it; a
  // later format was accepted by its prefix, and a number for the format said found "".
  TempDir dir;
  const std::string trace = compile_resnet(dir);
  ASSERT_EQ(ipusim("run -q --system " + pod16() + " --out " + dir.file("a") + " " + trace).status,
            0);
  const std::string good = read_all(dir.file("a/stats.json"));
  // stats.json with the first match of `from` (a regular expression) replaced by `to`.
  const auto with = [&](const std::string& from, const std::string& to) {
    const std::string s =
        std::regex_replace(good, std::regex(from), to, std::regex_constants::format_first_only);
    EXPECT_TRUE(from.empty() || s != good) << from;
    std::ofstream(dir.file("a/stats.json")) << s;
  };
  for (const std::string bad : {"0", "-1325000000.0"}) {
    with(R"("clock": \{\s*"value": [0-9.e+]+)", "\"clock\": {\"value\": " + bad);
    for (const std::string cmd : {std::string("report "), "report --compare " + dir.file("a") + " ",
                                  "compare " + dir.file("a") + " "}) {
      const auto r = ipusim(cmd + dir.file("a"));
      EXPECT_EQ(r.status, 3) << cmd << bad;
      EXPECT_NE(r.err.find("stats.json: key \"chip.clock\": expected a positive number, found"),
                std::string::npos)
          << r.err;
    }
    EXPECT_FALSE(std::filesystem::exists(dir.file("a/report.html")));
  }
  with(R"("format": "ipusim-stats/1")", "\"format\": \"ipusim-stats/2\"");
  auto r = ipusim("report " + dir.file("a"));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("key \"format\": expected \"ipusim-stats/1\", found \"ipusim-stats/2\""),
            std::string::npos)
      << r.err;
  with(R"("format": "ipusim-stats/1")", "\"format\": 5");
  r = ipusim("compare " + dir.file("a") + " " + dir.file("a"));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("key \"format\": expected \"ipusim-stats/1\", found a number"),
            std::string::npos)
      << r.err;
  with("", "");  // the run as written reports again
  EXPECT_EQ(ipusim("report " + dir.file("a")).status, 0);
}

// --- progress -------------------------------------------------------------------------------

// Runs `ipusim args` under a pseudo-terminal (script from util-linux); returns what it printed.
std::string on_terminal(const TempDir& dir, const std::string& args) {
  const std::string cmd = std::string("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 script -qfec ") +
                          shell_quote(std::string(IPUSIM_BINARY) + " " + args) + " /dev/null >" +
                          dir.file("tty.out") + " 2>&1 </dev/null";
  const int status = system_bounded(cmd, 120);
  EXPECT_NE(status, kTimedOut) << "script did not finish within 120 s";
  EXPECT_EQ(status, 0) << read_all(dir.file("tty.out"));
  return read_all(dir.file("tty.out"));
}

// Whether `script` can give a command a pseudo-terminal here (containers without /dev/pts
// cannot); the progress tests need one.
bool have_terminal() {
  return system_bounded("script -qfec true /dev/null >/dev/null 2>&1 </dev/null", 30) == 0;
}

TEST(Reports, ProgressOnTerminalOnly) {
  if (!have_terminal())
    GTEST_SKIP() << "no pseudo-terminal here ('script -qfec true /dev/null' failed): the "
                    "progress line is drawn on terminals only";
  TempDir dir;
  const std::string trace = compile_resnet(dir);
  const std::string run = "run --system " + pod16() + " " + trace;
  const std::string tty = on_terminal(dir, run);
  EXPECT_NE(tty.find("ipusim run: "), std::string::npos) << tty;
  EXPECT_NE(tty.find("ipusim run: reading "), std::string::npos) << tty;
  EXPECT_NE(tty.find("ipusim run: building the model"), std::string::npos) << tty;
  EXPECT_NE(tty.find(" phases ("), std::string::npos) << tty;
  EXPECT_NE(tty.find("100.0%"), std::string::npos) << tty;
  EXPECT_NE(tty.find("ETA"), std::string::npos) << tty;
  EXPECT_NE(tty.find("\r\x1b[K"), std::string::npos);  // redrawn in place, then erased
  // --quiet silences it on a terminal too; in a pipe it never appears.
  EXPECT_EQ(on_terminal(dir, run + " -q").find("ipusim run: "), std::string::npos);
  const auto piped = ipusim(run);
  ASSERT_EQ(piped.status, 0);
  EXPECT_EQ(piped.err.find("ipusim run: "), std::string::npos) << piped.err;
  EXPECT_EQ(piped.out.find("\x1b["), std::string::npos);
  // compile shows its stages.
  const std::string compile = on_terminal(
      dir, "compile --run " + workload("resnet_tiny-pod16.yaml") + " --out " + dir.file("x.itb"));
  EXPECT_NE(compile.find("ipusim compile: lowering"), std::string::npos) << compile;
  const auto compile_piped =
      ipusim("compile --run " + workload("resnet_tiny-pod16.yaml") + " --out " + dir.file("y.itb"));
  EXPECT_EQ(compile_piped.err.find("ipusim compile:"), std::string::npos) << compile_piped.err;
}

}  // namespace
}  // namespace ipusim::testing

namespace ipusim::testing {
namespace {

// Two layers on tiles 0..3: l1's compute set (a copy of 8,000 bytes) and exchange, then l2's
// compute set (a copy of 16,000 bytes), each after a sync; `tensors` go first in the section.
std::string two_layer_trace(const std::string& tensors) {
  return "ipusim-trace 3\nipu 0\n" + tensors +
         "computeset a layer=l1 pass=forward op=conv\n  vertex tiles=0..3 copy bytes=8000\nend\n"
         "computeset b layer=l2 pass=forward op=conv\n  vertex tiles=0..3 copy bytes=16000\nend\n"
         "exchange x layer=l1 pass=forward op=copy\n  transfer src=0 dst=1..3 bytes=4096\nend\n"
         "program\n  sync\n  compute a\n  sync\n  exchange x\n  sync\n  compute b\nend\n";
}

TEST(Reports, LayersCsvAttributesTimeToLayersAndAddsUpToTheTotals) {
  // A hand-built two-layer trace: layer l1's compute set (a copy of 8,000 bytes) and exchange,
  // then layer l2's compute set (a copy of 16,000 bytes), each after a sync. Each row holds
  // its layer's compute phase, exchange and the syncs before them (l1: two, l2: one); the
  // rows add up to the IPU's phase totals, the larger first.
  TempDir dir;
  const std::string trace = dir.file("two.trace");
  std::ofstream(trace) << two_layer_trace("");
  const auto r = ipusim("run --chip " + source_dir() + "/configs/chips/gc200.yaml --out " +
                        dir.file("out") + " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("top layers"), std::string::npos) << r.out;
  std::string header;
  const auto rows = read_csv(dir.file("out/layers.csv"), &header);
  EXPECT_EQ(header.substr(0, 30), "ipu,layer,pass,executions,comp");
  ASSERT_EQ(rows.size(), 2u);
  const JsonValue stats = parse_file(dir.file("out/stats.json"));
  // Columns: 0 ipu, 1 layer, 2 pass, 3 executions, 4.. the phases in kPhases order (compute,
  // sync, exchange, ...), then total, flops, exchange bytes.
  EXPECT_GE(std::stod(rows[0][13]), std::stod(rows[1][13]));
  const auto& l1 = rows[0][1] == "l1" ? rows[0] : rows[1];
  const auto& l2 = rows[0][1] == "l1" ? rows[1] : rows[0];
  ASSERT_EQ(l1[1], "l1");
  ASSERT_EQ(l2[1], "l2");
  for (const auto* row : {&l1, &l2}) {
    EXPECT_EQ((*row)[2], "forward");
    EXPECT_EQ((*row)[3], "1");
  }
  EXPECT_EQ(std::stod(l1[5]), 180);  // two 90-cycle on-chip syncs
  EXPECT_EQ(std::stod(l2[5]), 90);
  EXPECT_GT(std::stod(l1[6]), 0);                 // l1's exchange ...
  EXPECT_EQ(std::stod(l1[15]), 3.0 * 4096);       // ... received by 3 tiles
  EXPECT_EQ(std::stod(l2[6]), 0);                 // l2 has none
  EXPECT_GT(std::stod(l2[4]), std::stod(l1[4]));  // the larger copy
  // Copy FLOPs are 0; the rows' phases add up to the IPU's.
  double compute = 0, sync = 0, exchange = 0, total = 0;
  for (const auto& row : rows) {
    compute += std::stod(row[4]);
    sync += std::stod(row[5]);
    exchange += std::stod(row[6]);
    total += std::stod(row[13]);
  }
  EXPECT_EQ(compute, num(stats, "ipu[0].phases.compute.cycles"));
  EXPECT_EQ(sync, num(stats, "ipu[0].phases.sync.cycles"));
  EXPECT_EQ(exchange, num(stats, "ipu[0].phases.exchange.cycles"));
  EXPECT_EQ(total, num(stats, "total.cycles"));
  // stats.json has the same rows, per IPU, in the same order.
  const std::string first = rows[0][1];
  const JsonValue* layers = stats.find("ipu")->items[0].find("layers");
  ASSERT_NE(layers, nullptr);
  ASSERT_EQ(layers->items.size(), 2u);
  EXPECT_EQ(layers->items[0].find("layer")->string, first);
  const std::string l1_at = first == "l1" ? "ipu[0].layers[0]" : "ipu[0].layers[1]";
  EXPECT_EQ(num(stats, l1_at + ".cycles.sync"), 180);
  EXPECT_EQ(num(stats, l1_at + ".executions"), 1);
  EXPECT_EQ(num(stats, l1_at + ".exchange_bytes"), 3.0 * 4096);
  EXPECT_EQ(num(stats, l1_at + ".cycles.total"),
            std::stod((first == "l1" ? rows[0] : rows[1])[13]));
  // The reference engine attributes the same time: its stats.json is the same, byte for byte.
  const auto ref = ipusim("run --engine reference --chip " + source_dir() +
                          "/configs/chips/gc200.yaml --out " + dir.file("ref") + " " + trace);
  ASSERT_EQ(ref.status, 0) << ref.err;
  EXPECT_EQ(read_all(dir.file("ref/layers.csv")), read_all(dir.file("out/layers.csv")));
}

// Issue 27: a compute set serving several layers was one row named by the group ("l1+l2"),
// which changes with the plan. Now each layer is its own row: the shared compute set's cycles,
// FLOPs (a copy has none) and executions are split equally between l1 and l2, the odd cycle
// to the first; the sync before it likewise. Measured against the same trace with the compute
// set attributed to l1 alone.
TEST(Reports, LayersCsvSplitsASharedComputeSetAmongItsLayers) {
  TempDir dir;
  const auto layers = [&](const std::string& layer) {
    const std::string trace = dir.file(layer + ".trace");
    std::ofstream(trace) << "ipusim-trace 3\nipu 0\ncomputeset a layer=" + layer +
                                " pass=forward op=conv\n  vertex tiles=0..3 copy bytes=8000\n"
                                "end\nprogram\n  sync\n  repeat 3\n    compute a\n  end\nend\n";
    const auto r = ipusim("run -q --chip " + source_dir() + "/configs/chips/gc200.yaml --out " +
                          dir.file(layer) + " " + trace);
    EXPECT_EQ(r.status, 0) << r.err;
    std::map<std::string, std::vector<std::string>> out;
    std::string header;
    for (const auto& row : read_csv(dir.file(layer + "/layers.csv"), &header)) out[row[1]] = row;
    return out;
  };
  const auto alone = layers("l1");
  const auto shared = layers("l1,l2");
  ASSERT_EQ(alone.size(), 1u);
  ASSERT_EQ(shared.size(), 2u);
  ASSERT_TRUE(shared.count("l1") && shared.count("l2"));
  for (std::size_t col : {4u, 5u}) {  // compute_cycles, sync_cycles
    const double whole = std::stod(alone.at("l1")[col]);
    EXPECT_EQ(std::stod(shared.at("l1")[col]), std::ceil(whole / 2)) << col;
    EXPECT_EQ(std::stod(shared.at("l2")[col]), std::floor(whole / 2)) << col;
  }
  EXPECT_EQ(alone.at("l1")[3], "3");  // executions: 3 = 2 + 1
  EXPECT_EQ(shared.at("l1")[3], "2");
  EXPECT_EQ(shared.at("l2")[3], "1");
  EXPECT_EQ(shared.at("l1")[2], "forward");
  // Each shared row names its group (the last column); a row that shares nothing has none.
  ASSERT_EQ(shared.at("l1").size(), 19u);
  EXPECT_EQ(shared.at("l1")[18], "l1+l2");
  EXPECT_EQ(shared.at("l2")[18], "l1+l2");
  EXPECT_EQ(alone.at("l1").size(), 18u);  // "...,<peak_tile_live_bytes>," : the group is empty
}

// Issue 27: layer rows survive a re-plan. ResNet-50 POD16 with twice the tile memory plans
// many layers differently (other tile grids, other rearrangements, other compute sets shared),
// yet layers.csv has the same 540 (layer, pass) rows: a row is a layer of the model, with the
// elementwise ops pending from it (a residual add applied in its ReLU's scope) its own.
TEST(Reports, LayersCsvRowsAreTheSameBeforeAndAfterAReplan) {
  TempDir dir;
  const std::string run = source_dir() + "/configs/runs/resnet50-pod16.yaml";
  std::map<std::string, std::set<std::pair<std::string, std::string>>> keys;
  std::map<std::string, std::string> supersteps;
  for (const std::string memory : {"624KiB", "1248KiB"}) {
    const auto r = ipusim("run -q --run " + run + " --set chip.tile_memory=" + memory + " --out " +
                          dir.file(memory));
    ASSERT_EQ(r.status, 0) << r.err;
    std::string header;
    for (const auto& row : read_csv(dir.file(memory + "/layers.csv"), &header)) {
      EXPECT_EQ(row[1].find('+'), std::string::npos) << "a group row: " << row[1];
      keys[memory].insert({row[1], row[2]});
    }
    supersteps[memory] = read_all(dir.file(memory + "/supersteps.csv"));
  }
  EXPECT_NE(supersteps["624KiB"], supersteps["1248KiB"]) << "the plans should differ";
  EXPECT_GT(keys["624KiB"].size(), 300u);
  EXPECT_EQ(keys["624KiB"], keys["1248KiB"]);
  // The residual add of block b3/0 has its own forward row in both plans.
  EXPECT_TRUE(keys["1248KiB"].count({"b3/0/add", "forward"}));
}

TEST(Reports, PeakLiveMemoryFollowsTensorLifetimes) {
  // The two-layer trace above with two tensors on tiles 0..3: t1 (1,000 B per tile) live at
  // positions 1..2, t2 (2,000 B) at 4..5. Positions: 0 sync, 1 compute a (l1), 2 sync,
  // 3 exchange x (l1), 4 sync, 5 compute b (l2). So l1's steps see t1 (+1,000 B per tile) and
  // l2's see t2 (+2,000 B); the tiles hold at most 2,000 B of them, once.
  TempDir dir;
  const std::string trace = dir.file("two.trace");
  std::ofstream(trace) << two_layer_trace(
      "tensor t1 tiles=0..3 bytes=1000 live=1..2\ntensor t2 tiles=0..3 bytes=2000 live=4..5\n");
  const auto r = ipusim("run --chip " + source_dir() + "/configs/chips/gc200.yaml --out " +
                        dir.file("out") + " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  const JsonValue stats = parse_file(dir.file("out/stats.json"));
  const std::string m = "ipu[0].memory_over_program";
  EXPECT_EQ(num(stats, m + ".positions"), 6);
  const double always_tile = num(stats, m + ".always_live.tile");
  const double always_ipu = num(stats, m + ".always_live.ipu");
  EXPECT_EQ(num(stats, m + ".peak.tile"), always_tile + 2000);
  EXPECT_EQ(num(stats, m + ".peak.ipu"), always_ipu + 4 * 2000);
  // The fullest tile holds the tensors' peak, once: its memory is the curve's peak.
  EXPECT_EQ(num(stats, "ipu[0].tiles.memory.max"), always_tile + 2000);
  // Position 1 (t1 live) and position 3 (none) in the first sample run, ...
  const JsonValue* samples = stats.find("ipu")->items[0].find("memory_over_program");
  ASSERT_NE(samples, nullptr);
  samples = samples->find("samples");
  ASSERT_NE(samples, nullptr);
  ASSERT_EQ(samples->items.size(), 6u);  // one position per sample
  const double curve[] = {0, 1000, 1000, 0, 2000, 2000};
  for (std::size_t p = 0; p < 6; ++p)
    EXPECT_EQ(json_field(samples->items[p], "tile_bytes")->number.d, always_tile + curve[p]) << p;
  std::string header;
  const auto rows = read_csv(dir.file("out/layers.csv"), &header);
  EXPECT_EQ(header.substr(header.size() - 42), "peak_live_bytes,peak_tile_live_bytes,group");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    const double extra = row[1] == "l1" ? 1000 : 2000;
    EXPECT_EQ(std::stod(row[16]), always_ipu + 4 * extra) << row[1];
    EXPECT_EQ(std::stod(row[17]), always_tile + extra) << row[1];
  }
  const std::string at = rows[0][1] == "l2" ? "ipu[0].layers[0]" : "ipu[0].layers[1]";
  EXPECT_EQ(num(stats, at + ".peak_live.tile"), always_tile + 2000);
  // The report draws the curve against the tile capacity and lists the peaks per layer.
  ASSERT_EQ(ipusim("report " + dir.file("out")).status, 0);
  const std::string html = read_all(dir.file("out/report.html"));
  EXPECT_NE(html.find("id=\"chart-liveness-ipu0\""), std::string::npos);
  EXPECT_NE(html.find("peak live<br>(fullest tile)"), std::string::npos);
}

TEST(Reports, LayersCsvOfACompiledStepAddsUpToEachIpusTotals) {
  // The reduced BERT pipeline (2 IPUs): every phase column of each IPU's rows sums to that
  // IPU's phase total in stats.json.
  TempDir dir;
  const auto r =
      ipusim("run -q --run " + workload("bert_tiny-pod16.yaml") + " --out " + dir.file("out"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::string header;
  const auto rows = read_csv(dir.file("out/layers.csv"), &header);
  ASSERT_GT(rows.size(), 4u);
  const JsonValue stats = parse_file(dir.file("out/stats.json"));
  for (std::size_t ipu = 0; ipu < 2; ++ipu) {
    for (std::size_t k = 0; k < 9; ++k) {
      double sum = 0;
      for (const auto& row : rows)
        if (std::stoul(row[0]) == ipu) sum += std::stod(row[4 + k]);
      EXPECT_EQ(sum,
                num(stats, "ipu[" + std::to_string(ipu) + "].phases." + kPhases[k] + ".cycles"))
          << ipu << " " << kPhases[k];
    }
  }
}

TEST(Reports, EverySpanOfAPipelinedStepIsNamedWaitingIncluded) {
  // The reduced BERT pipeline waits at external syncs for its slower stage: those spans (in
  // the timeline and in supersteps.csv) are named after what they wait at, and no span is
  // nameless ("?").
  TempDir dir;
  const auto r = ipusim("run -q --run " + workload("bert_tiny-pod16.yaml") + " --out " +
                        dir.file("out") + " --timeline " + dir.file("t.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  const JsonValue tl = parse_file(dir.file("t.json"));
  std::size_t waiting = 0;
  for (const auto& e : tl.find("traceEvents")->items) {
    const std::string name = e.find("name")->string;
    EXPECT_NE(name, "?");
    if (name.starts_with("waiting at external sync (")) ++waiting;
  }
  EXPECT_GT(waiting, 0u);
  const std::string supersteps = read_all(dir.file("out/supersteps.csv"));
  EXPECT_EQ(supersteps.find(",?,"), std::string::npos);
}

}  // namespace
}  // namespace ipusim::testing

// --- ipusim compare: the explained comparison ----------------------------------------------

namespace ipusim::testing {
namespace {

// The decimal text "+4.118" (or "-0.25", "0") in units of its `decimals`-th decimal: 4118.
std::int64_t in_units(std::string text, int decimals) {
  const bool negative = !text.empty() && text[0] == '-';
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) text.erase(0, 1);
  const auto dot = text.find('.');
  std::string whole = text.substr(0, dot),
              frac = dot == std::string::npos ? "" : text.substr(dot + 1);
  EXPECT_LE(frac.size(), static_cast<std::size_t>(decimals)) << text;
  frac.resize(static_cast<std::size_t>(decimals), '0');
  const std::int64_t v = std::stoll(whole + frac);
  return negative ? -v : v;
}

// The step change and the phase terms of the equation line "step +X ms = compute +Y ms (top:
// ...) + sync +Z ms", as (name, decimal text, unit).
std::vector<std::array<std::string, 3>> equation_terms(const std::string& line) {
  std::vector<std::array<std::string, 3>> out;
  const std::string plain = std::regex_replace(line, std::regex(R"( \([^)]*\))"), "");
  static const std::regex term(R"(([a-z_]+) ([+-]?[0-9.]+) (s|ms|us|ns))");
  for (auto it = std::sregex_iterator(plain.begin(), plain.end(), term);
       it != std::sregex_iterator(); ++it)
    out.push_back({(*it)[1], (*it)[2], (*it)[3]});
  return out;
}

// The most significant digits of any number in `v` as written ("0.00000390188679245": 12;
// "2.496512e+14": 7; 0.30000000000000004: 17).
std::size_t most_significant_digits(const JsonValue& v) {
  std::size_t most = 0;
  if (v.kind == JsonValue::Kind::kNumber) {
    std::string digits;
    for (char ch : v.number.text.substr(0, v.number.text.find_first_of("eE")))
      if (std::isdigit(static_cast<unsigned char>(ch))) digits += ch;
    const auto first = digits.find_first_not_of('0'), last = digits.find_last_not_of('0');
    return first == std::string::npos ? 0 : last - first + 1;
  }
  for (const auto& item : v.items) most = std::max(most, most_significant_digits(item));
  for (const auto& m : v.members) most = std::max(most, most_significant_digits(m.value));
  return most;
}

int decimals_of(const std::string& text) {
  const auto dot = text.find('.');
  return dot == std::string::npos ? 0 : static_cast<int>(text.size() - dot - 1);
}

std::string gc200() { return source_dir() + "/configs/chips/gc200.yaml"; }

// Two layers of pure compute (and the on-chip syncs before them): cycles do not depend on
// the clock, so every phase's and layer's time scales with 1 / clock.
std::string two_layer_compute_trace(const TempDir& dir) {
  const std::string trace = dir.file("two.trace");
  std::ofstream(trace)
      << "ipusim-trace 3\nipu 0\n"
         "computeset a layer=l1 pass=forward op=conv\n  vertex tiles=0..3 copy bytes=8000\nend\n"
         "computeset b layer=l2 pass=forward op=conv\n  vertex tiles=0..3 copy bytes=16000\nend\n"
         "program\n  sync\n  compute a\n  sync\n  compute b\n  sync\n  compute a\nend\n";
  return trace;
}

TEST(Reports, CompareAttributesAClockWhatIfToPhasesAndLayersAndAddsUp) {
  TempDir dir;
  const std::string trace = two_layer_compute_trace(dir);
  ASSERT_EQ(ipusim("run -q --chip " + gc200() + " --out " + dir.file("a") + " " + trace).status, 0);
  ASSERT_EQ(ipusim("run -q --chip " + gc200() + " --set chip.clock=1GHz --out " + dir.file("b") +
                   " " + trace)
                .status,
            0);
  const JsonValue sa = parse_file(dir.file("a/stats.json")),
                  sb = parse_file(dir.file("b/stats.json"));
  const double cycles = num(sa, "total.cycles"), clock_a = num(sa, "chip.clock");
  ASSERT_EQ(cycles, num(sb, "total.cycles"));  // the premise: same cycles at any clock
  ASSERT_EQ(num(sb, "chip.clock"), 1e9);
  // Derived independently: the step takes cycles / clock at each clock.
  const double expected = cycles / 1e9 - cycles / clock_a;
  ASSERT_GT(expected, 0);

  // --json: one document with the documented keys.
  const auto j = ipusim("compare --json " + dir.file("a") + " " + dir.file("b"));
  ASSERT_EQ(j.status, 0) << j.err;
  const JsonValue c = parse_json(j.out, "compare --json");
  ASSERT_EQ(c.kind, JsonValue::Kind::kObject);
  for (const char* key :
       {"format", "a", "b", "identical", "headline", "attribution", "settings", "stats"})
    EXPECT_NE(c.find(key), nullptr) << key;
  EXPECT_EQ(c.find("format")->string, "ipusim-compare/1");
  EXPECT_FALSE(c.find("identical")->boolean);
  const JsonValue& step = c.find("headline")->items.at(0);
  EXPECT_EQ(step.find("name")->string, "step_time");
  EXPECT_EQ(step.find("direction")->string, "slower");
  EXPECT_NEAR(step.find("relative")->number.d, clock_a / 1e9 - 1, 1e-9);
  // Kernel runs have no throughput or time to train; the memory is the same.
  ASSERT_EQ(c.find("headline")->items.size(), 2u);
  const JsonValue& mem = c.find("headline")->items[1];
  EXPECT_EQ(mem.find("name")->string, "peak_tile_memory");
  EXPECT_EQ(mem.find("direction")->string, "same memory");
  EXPECT_EQ(mem.find("delta")->number.text, "0");

  // The phase kinds add up to the step change, each scaled by the clock ratio.
  const JsonValue& at = *c.find("attribution");
  const double delta = num(at, "step.delta");
  EXPECT_NEAR(delta, expected, 1e-11 * cycles / 1e9);
  double sum = 0;
  std::map<std::string, double> phase;
  for (const auto& p : at.find("phases")->items) {
    sum += p.find("delta")->number.d;
    phase[p.find("phase")->string] = p.find("delta")->number.d;
    const double a = p.find("a_cycles")->number.d;
    EXPECT_EQ(a, p.find("b_cycles")->number.d);
    EXPECT_NEAR(p.find("delta")->number.d, a / 1e9 - a / clock_a, 1e-11 * cycles / 1e9);
  }
  EXPECT_NEAR(sum, delta, 1e-14);
  EXPECT_GT(phase["compute"], 0);
  EXPECT_GT(phase["sync"], 0);
  EXPECT_EQ(phase["exchange"], 0);
  // The layers too: l1 (two compute phases) and l2, from layers.csv.
  ASSERT_TRUE(at.find("layers_available")->boolean);
  std::string header;
  std::map<std::string, double> layer_cycles;
  for (const auto& row : read_csv(dir.file("a/layers.csv"), &header))
    layer_cycles[row[1]] = std::stod(row[13]);
  ASSERT_EQ(layer_cycles.size(), 2u);
  double layer_sum = num(at, "other_layers.delta");
  for (const auto& l : at.find("layers")->items) {
    const std::string name = l.find("layer")->string;
    ASSERT_TRUE(layer_cycles.count(name)) << name;
    layer_sum += l.find("delta")->number.d;
    EXPECT_NEAR(l.find("delta")->number.d, layer_cycles[name] / 1e9 - layer_cycles[name] / clock_a,
                1e-11 * cycles / 1e9);
    EXPECT_EQ(l.find("direction")->string, "more time");
  }
  EXPECT_NEAR(layer_sum, delta, 1e-14);
  ASSERT_EQ(c.find("settings")->items.size(), 1u);
  EXPECT_EQ(c.find("settings")->items[0].find("key")->string, "chip.clock");
  EXPECT_EQ(c.find("settings")->items[0].find("b")->string, "1GHz");

  // The text: the equation's printed terms add up exactly to the printed step change.
  const auto t = ipusim("compare " + dir.file("a") + " " + dir.file("b"));
  ASSERT_EQ(t.status, 0) << t.err;
  std::istringstream in(t.out);
  std::string line, equation;
  while (std::getline(in, line))
    if (line.starts_with("  step ") && line.find(" = ") != std::string::npos) equation = line;
  const auto terms = equation_terms(equation);
  ASSERT_GE(terms.size(), 3u) << t.out;
  EXPECT_EQ(terms[0][0], "step");
  const int decimals = decimals_of(terms[0][1]);
  std::int64_t printed = 0;
  for (std::size_t i = 1; i < terms.size(); ++i) {
    EXPECT_EQ(decimals_of(terms[i][1]), decimals) << equation;
    printed += in_units(terms[i][1], decimals);
  }
  EXPECT_EQ(printed, in_units(terms[0][1], decimals)) << equation;
  const std::map<std::string, double> unit{{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  EXPECT_NEAR(std::stod(terms[0][1]) * unit.at(terms[0][2]), expected, expected * 1e-3) << t.out;
  EXPECT_NE(equation.find("compute +"), std::string::npos) << equation;
  EXPECT_NE(equation.find("(top: l"), std::string::npos) << equation;
  EXPECT_TRUE(std::regex_search(
      t.out, std::regex(R"(\n  l2 +forward +[0-9.]+ +[0-9.]+ +\+[0-9.]+ +more time\n)")))
      << t.out;
  // The other way round it is faster, by the same amount.
  const auto back = ipusim("compare --json " + dir.file("b") + " " + dir.file("a"));
  const JsonValue r = parse_json(back.out, "compare --json");
  EXPECT_EQ(r.find("headline")->items.at(0).find("direction")->string, "faster");
  EXPECT_EQ(num(*r.find("attribution"), "step.delta"), -delta);
}

TEST(Reports, CompareOfIdenticalRunsSaysNoDifferencesWithoutNoise) {
  TempDir dir;
  const std::string trace = two_layer_compute_trace(dir);
  for (const char* out : {"a", "b"})
    ASSERT_EQ(ipusim("run -q --chip " + gc200() + " --out " + dir.file(out) + " " + trace).status,
              0);
  // b's step time off in its last digits (a double computed another way): no change.
  std::string stats = read_all(dir.file("b/stats.json"));
  const JsonValue parsed = parse_json(stats, "b");
  const JsonValue* time = json_field(parsed, "total.time");
  ASSERT_NE(time, nullptr);
  const auto at = stats.find(time->number.text, stats.find("\"total\""));
  ASSERT_NE(at, std::string::npos);
  stats.replace(at, time->number.text.size(), fmt::format("{:.17g}", time->number.d * (1 + 1e-13)));
  { std::ofstream(dir.file("b/stats.json")) << stats; }
  ASSERT_NE(read_all(dir.file("b/stats.json")), read_all(dir.file("a/stats.json")));

  const auto t = ipusim("compare " + dir.file("a") + " " + dir.file("b"));
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("no differences"), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("stats that moved"), std::string::npos) << t.out;
  // No 1e-13 anywhere, no 0.30000000000000004.
  const std::regex noise(R"([0-9]e-[0-9]|[0-9]{13})");
  EXPECT_FALSE(std::regex_search(t.out, noise)) << t.out;
  EXPECT_NE(t.out.find(" same\n"), std::string::npos) << t.out;
  const auto j = ipusim("compare --json " + dir.file("a") + " " + dir.file("b"));
  ASSERT_EQ(j.status, 0) << j.err;
  const JsonValue c = parse_json(j.out, "compare --json");
  EXPECT_LE(most_significant_digits(c), 12u) << j.out;
  EXPECT_TRUE(c.find("identical")->boolean);
  EXPECT_TRUE(c.find("settings")->items.empty());
  EXPECT_EQ(num(c, "stats.changed"), 0);
  for (const auto& h : c.find("headline")->items) {
    EXPECT_EQ(h.find("delta")->number.text, "0");
    EXPECT_TRUE(h.find("direction")->string.starts_with("same")) << h.find("name")->string;
  }
  EXPECT_EQ(num(*c.find("attribution"), "step.delta"), 0);
  for (const auto& p : c.find("attribution")->find("phases")->items)
    EXPECT_EQ(p.find("delta")->number.text, "0");
}

// A stats.json with what compare reads: a step of `cycles` at `clock` (all compute), a peak tile
// memory and, if `throughput` > 0, a workload with a time to train.
std::string minimal_stats(double clock, double cycles, double memory, double throughput) {
  std::string phases;
  for (const char* k : kPhases)
    phases +=
        fmt::format("{}\"{}\": {{\"cycles\": {{\"value\": {}, \"unit\": \"cycles\"}}}}",
                    phases.empty() ? "" : ", ", k, std::string(k) == "compute" ? cycles : 0.0);
  std::string workload;
  if (throughput > 0)
    workload = fmt::format(
        "\"workload\": {{\"throughput\": {{\"value\": {}, \"unit\": \"images/s\"}}, "
        "\"time_to_train\": {{\"total\": {{\"value\": {}, \"unit\": \"s\"}}}}}}, ",
        throughput, 1e6 / throughput);
  return fmt::format(
      "{{\"format\": \"ipusim-stats/1\", \"trace\": {{\"name\": \"t\", \"identity\": \"x\"}}, "
      "\"chip\": {{\"clock\": {{\"value\": {}, \"unit\": \"Hz\"}}}}, "
      "\"total\": {{\"cycles\": {{\"value\": {}, \"unit\": \"cycles\"}}, \"time\": {{\"value\": "
      "{:.17g}, \"unit\": \"s\"}}}}, {}\"phases\": {{{}}}, \"ipu\": [{{\"index\": 0, \"cycles\": "
      "{{\"value\": {}, \"unit\": \"cycles\"}}, \"tiles\": {{\"memory\": {{\"max\": {{\"value\": "
      "{}, \"unit\": \"B\"}}}}}}}}]}}\n",
      clock, cycles, cycles / clock, workload, phases, cycles, memory);
}

// A stats.json of one IPU whose layer rows have these FLOPs and compute cycles (a, b, and the
// collectives row, which has no pass).
std::string stats_with_layers(double flops_a, double flops_b, double collective_cycles) {
  const auto row = [](const char* layer, const char* pass, double flops, double compute) {
    return fmt::format(
        "{{\"layer\": \"{}\", \"pass\": \"{}\", \"cycles\": {{\"compute\": {{\"value\": {}, "
        "\"unit\": \"cycles\"}}}}, \"flops\": {{\"value\": {}, \"unit\": \"FLOP\"}}, "
        "\"compute_phase_utilisation\": {{\"value\": {}, \"unit\": \"fraction\"}}}}",
        layer, pass, compute, flops, flops / compute / 1000);
  };
  std::string s = minimal_stats(1e9, 1000, 1000, 0);
  const std::string layers = fmt::format(
      ", \"layers\": [{}, {}, {}]", row("a", "forward", flops_a, 100),
      row("b", "forward", flops_b, 100), row("(collectives)", "", 0, collective_cycles));
  s.insert(s.rfind("}]}"), layers);
  return s;
}

TEST(Reports, CompareKeepsFlopsMovedBetweenLayersOfASharedComputeSetOutOfTheMovedStats) {
  // Issue 55, part 5: a compute set several layers share splits its FLOPs among them, so a
  // plan change can move FLOPs from one layer to another with the IPU's work unchanged: that
  // is not a change of the layers' FLOPs. And a row without a pass is keyed without a
  // trailing space.
  TempDir dir;
  const auto write = [&](const char* name, const std::string& stats) {
    std::filesystem::create_directories(dir.file(name));
    std::ofstream(dir.file(std::string(name) + "/stats.json")) << stats;
  };
  write("a", stats_with_layers(600, 400, 10));
  write("moved", stats_with_layers(500, 500, 20));  // the same 1000 FLOPs, split otherwise
  write("more", stats_with_layers(700, 400, 10));   // 100 FLOPs more
  auto r = ipusim("compare " + dir.file("a") + " " + dir.file("moved"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find(".flops"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("utilisation"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ipu[0].layers[(collectives)].cycles.compute"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("(collectives) ]"), std::string::npos) << r.out;
  r = ipusim("compare " + dir.file("a") + " " + dir.file("more"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ipu[0].layers[a forward].flops"), std::string::npos) << r.out;
}

TEST(Reports, CompareLabelsTheDirectionOfEveryHeadlineDelta) {
  TempDir dir;
  auto write = [&](const std::string& name, const std::string& stats) {
    std::filesystem::create_directories(dir.file(name));
    std::ofstream(dir.file(name + "/stats.json")) << stats;
  };
  write("slow", minimal_stats(1e9, 2000, 4096, 500));
  write("fast", minimal_stats(1e9, 1000, 8192, 1000));
  write("kernel", minimal_stats(1e9, 1000, 8192, 0));
  auto headline = [&](const std::string& a, const std::string& b) {
    const auto r = ipusim("compare --json " + dir.file(a) + " " + dir.file(b));
    EXPECT_EQ(r.status, 0) << r.err;
    std::map<std::string, std::string> out;
    const JsonValue c = parse_json(r.out, "compare --json");
    for (const auto& h : c.find("headline")->items)
      out[h.find("name")->string] = h.find("direction")->string;
    return out;
  };
  auto h = headline("slow", "fast");
  EXPECT_EQ(h["step_time"], "faster");
  EXPECT_EQ(h["throughput"], "higher");
  EXPECT_EQ(h["time_to_train"], "faster");
  EXPECT_EQ(h["peak_tile_memory"], "more memory");
  h = headline("fast", "slow");
  EXPECT_EQ(h["step_time"], "slower");
  EXPECT_EQ(h["throughput"], "lower");
  EXPECT_EQ(h["time_to_train"], "slower");
  EXPECT_EQ(h["peak_tile_memory"], "less memory");
  h = headline("slow", "kernel");
  EXPECT_EQ(h["throughput"], "only in A");
  EXPECT_EQ(h["time_to_train"], "only in A");
  // The text says the same, with percentages to 3 significant digits.
  const auto t = ipusim("compare " + dir.file("slow") + " " + dir.file("fast"));
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("-50.0%  faster"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("+100%  higher"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("+100%  more memory"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("step time change by layer: unavailable"), std::string::npos) << t.out;
}

// Issue 27, the plan view: plan.csv has a row per conv and matmul the compiler planned and the
// layer and pass it serves, with what the planner chose. Its simulated cost is checked against
// layers.csv, which attributes the same phases another way (from each step's and compute set's
// provenance): a conv layer's forward row, and its recompute row where it is recomputed, hold
// only its conv, run GA = 2 times a step. A trace run has no plan, and removes an earlier run's
// plan.csv.
TEST(Reports, PlanCsvHasEachPlannedConvAndItsSimulatedCost) {
  TempDir dir;
  const auto r = ipusim("run -q --run " + workload("resnet_tiny-pod16.yaml") + " --save-trace " +
                        dir.file("w.itb") + " --out " + dir.file("out"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::string header;
  const auto rows = read_csv(dir.file("out/plan.csv"), &header);
  EXPECT_EQ(header,
            "ipu,layer,pass,op,name,shape,dtype,partials,vertex,amp,tiles,group_split,row_split,"
            "out_split,in_split,serial_in,serial_out,available_memory_proportion,budget_bytes,"
            "temporary_bytes,rearranged_bytes,estimated_cycles,simulated_cycles,"
            "rearrangement_cycles,weight_height,swapped,expanded,joint");
  std::map<std::pair<std::string, std::string>, double> simulated;
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 28u);
    simulated[{row[1], row[2]}] += std::stod(row[22]);
    // Tiles used: the product of the parallel splits.
    EXPECT_EQ(std::stoul(row[10]),
              std::stoul(row[11]) * std::stoul(row[12]) * std::stoul(row[13]) * std::stoul(row[14]))
        << row[1];
    EXPECT_EQ(row[17], "0.15") << row[1];
    // 0.15 of 624 KiB, truncated to bytes; every tiny plan fits in it.
    EXPECT_EQ(row[18], "95846") << row[1];
    EXPECT_LE(std::stoul(row[19]), 95846u) << row[1];
    EXPECT_GT(std::stod(row[21]), 0) << row[1];
    EXPECT_GT(std::stod(row[22]), 0) << row[1];
  }
  // Every conv and the fc: forward and weight gradient; all but the first a data gradient;
  // the layers before the checkpoint b1/0/relu recomputed, the ones after it not.
  const std::vector<std::string> convs{"conv1",     "b1/0/conv1", "b1/0/conv2", "b1/0/conv3",
                                       "b1/0/down", "b2/0/conv1", "b2/0/conv2", "b2/0/conv3",
                                       "b2/0/down", "fc"};
  const auto has = [&](const std::string& layer, const std::string& pass) {
    return simulated.count({layer, pass}) == 1;
  };
  for (const auto& c : convs) {
    EXPECT_TRUE(has(c, "forward")) << c;
    EXPECT_TRUE(has(c, "weight_gradient")) << c;
    EXPECT_EQ(has(c, "data_gradient"), c != "conv1") << c;
    EXPECT_EQ(has(c, "recompute"), !c.starts_with("b2") && c != "fc") << c;
  }
  const auto row_of = [&](const std::string& layer, const std::string& pass) {
    for (const auto& row : rows)
      if (row[1] == layer && row[2] == pass) return row;
    return std::vector<std::string>{};
  };
  // A 3x3 conv runs on the nx1 vertex unless both its kernel's dimensions were moved into its
  // input channels (poplin's expandDims), which leaves a 1x1 conv.
  for (const std::string layer : {"conv1", "b1/0/conv2", "b2/0/conv2"}) {
    const auto row = row_of(layer, "forward");
    EXPECT_EQ(row[8], row[26] == "both" ? "amp_conv1x1" : "amp_convnx1") << layer;
  }
  EXPECT_EQ(row_of("b1/0/conv1", "forward")[8], "amp_conv1x1");
  EXPECT_EQ(row_of("fc", "forward")[3], "matmul");  // the fc layer
  EXPECT_EQ(row_of("fc", "forward")[5].substr(0, 2), "m=");
  // Only a matmul's plans (the fc's) and a conv's weight gradient (lowered as a matmul) may swap
  // their operands, only a spatial conv takes taller weights, and only the forward conv of a
  // spatial kernel, or its data gradient, is expanded.
  bool expanded = false;
  for (const auto& row : rows) {
    EXPECT_TRUE(row[25] == "no" || row[1] == "fc" || row[2] == "weight_gradient")
        << row[1] << " " << row[2];
    EXPECT_TRUE(row[24] == "1" || row[8] == "amp_convnx1") << row[1] << " " << row[2];
    const bool spatial = row[1] == "conv1" || row[1].ends_with("/conv2");
    EXPECT_TRUE(row[26] == "no" || (spatial && row[2] != "weight_gradient"))
        << row[1] << " " << row[2];
    EXPECT_TRUE(row[26] == "no" || row[26] == "rows" || row[26] == "columns" || row[26] == "both");
    expanded = expanded || row[26] != "no";
    // Only the fc (a matmul: poplin's fullyConnectedPass) is planned jointly, all three of its
    // passes or none, each swapped (poplin's joint plans swap the operands).
    EXPECT_TRUE(row[27] == "no" || (row[1] == "fc" && row[25] == "yes")) << row[1];
    EXPECT_EQ(row[27], row_of("fc", "forward")[27]) << row[1] << " " << row[2];
  }
  EXPECT_TRUE(expanded);  // the tiny ResNet's small maps make some expansion pay
  // The report's plan table names each plan's form after its vertex.
  {
    const auto rep = ipusim("report " + dir.file("out"));
    ASSERT_EQ(rep.status, 0) << rep.err;
    const std::string html = read_all(dir.file("out/report.html"));
    for (const auto& row : rows) {
      const std::string form = row[26] == "both"  ? "kernel rows and columns expanded"
                               : row[26] != "no"  ? "kernel " + row[26] + " expanded"
                               : row[25] == "yes" ? "swapped"
                                                  : "";
      if (!form.empty())
        EXPECT_NE(html.find("<td>" + row[8] + ", " + form), std::string::npos) << row[1];
      if (row[27] == "yes")
        EXPECT_NE(html.find("<td>" + row[8] + ", swapped, planned jointly"), std::string::npos);
    }
  }
  // Run directories written before the last column, the last two and the last four still read
  // (as no; no and no; 1, no, no and no).
  const std::string full = read_all(dir.file("out/plan.csv"));
  for (const int dropped : {1, 2, 4}) {
    std::string rewritten;
    std::istringstream lines(full);
    for (std::string line; std::getline(lines, line);) {
      for (int k = 0; k < dropped; ++k) line = line.substr(0, line.rfind(','));
      rewritten += line + "\n";
    }
    std::ofstream(dir.file("out/plan.csv")) << rewritten;
    const auto rep = ipusim("report " + dir.file("out"));
    EXPECT_EQ(rep.status, 0) << rep.err;
  }
  std::map<std::pair<std::string, std::string>, double> layer_total;
  for (const auto& row : read_csv(dir.file("out/layers.csv"), &header))
    layer_total[{row[1], row[2]}] = std::stod(row[13]);
  for (const auto& c : convs)
    for (const std::string pass : {"forward", "recompute"}) {
      if (!has(c, pass)) continue;
      const double planned = simulated[{c, pass}];
      const double in_layers = layer_total[std::pair<std::string, std::string>(c, pass)];
      // The fc's forward also adds its bias (fused with the loss's exp).
      if (c == "fc")
        EXPECT_GT(in_layers, 2 * planned) << c << " " << pass;
      else
        EXPECT_EQ(in_layers, 2 * planned) << c << " " << pass;
    }
  // The saved trace run into the same directory: no plan, and the old plan.csv is gone.
  const auto t =
      ipusim("run -q --system " + pod16() + " --out " + dir.file("out") + " " + dir.file("w.itb"));
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/plan.csv")));
  const auto rep = ipusim("report " + dir.file("out"));
  ASSERT_EQ(rep.status, 0) << rep.err;
  EXPECT_NE(read_all(dir.file("out/report.html")).find("No plan.csv in the run directory"),
            std::string::npos);
}

// Issue 28: the three passes of a fully connected layer planned jointly (poplin's
// fullyConnectedPass; ResNet-50's classifier, 20 x 2048 x 1000 a micro-batch, is) are marked in
// plan.csv's joint column and named in the report's plan table; every other plan is not.
TEST(Reports, AJointlyPlannedFcIsMarkedInPlanCsvAndTheReport) {
  TempDir dir;
  const auto r = ipusim("run -q --run " + source_dir() + "/configs/runs/resnet50-pod16.yaml" +
                        " --out " + dir.file("out"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::size_t joint = 0;
  std::string header;
  for (const auto& row : read_csv(dir.file("out/plan.csv"), &header)) {
    ASSERT_EQ(row.size(), 28u);
    EXPECT_EQ(row[27], row[1] == "fc" ? "yes" : "no") << row[1] << " " << row[2];
    joint += row[27] == "yes";
  }
  EXPECT_EQ(joint, 3u);  // forward, data gradient, weight gradient
  const auto rep = ipusim("report " + dir.file("out"));
  ASSERT_EQ(rep.status, 0) << rep.err;
  EXPECT_NE(read_all(dir.file("out/report.html")).find("amp_conv1x1, swapped, planned jointly"),
            std::string::npos);
}

// Issue 27: compare diffs plans. With 0.5% of tile memory for conv buffers the tiny ResNet's
// larger convs take serial splits on fewer tiles; compare lists, for the layer rows that moved
// most, each conv whose plan changed with its plan in A and in B, which are plan.csv's rows of
// each run, and only convs whose plan differs.
TEST(Reports, CompareShowsWhatThePlannerChoseForTheLayersThatMovedMost) {
  TempDir dir;
  for (const std::string& side : {"a", "b"}) {
    const auto r = ipusim("run -q --run " + workload("resnet_tiny-pod16.yaml") +
                          (side == "b" ? " --set run.available_memory_proportion=0.005" : "") +
                          " --out " + dir.file(side));
    ASSERT_EQ(r.status, 0) << r.err;
  }
  std::map<std::string, std::map<std::pair<std::string, std::string>, std::vector<std::string>>>
      plans;
  for (const std::string& side : {"a", "b"}) {
    std::string header;
    for (const auto& row : read_csv(dir.file(side + "/plan.csv"), &header))
      plans[side].emplace(std::pair{row[1], row[2]}, row);  // the first of each (layer, pass)
  }
  const auto c = ipusim("compare --json " + dir.file("a") + " " + dir.file("b"));
  ASSERT_EQ(c.status, 0) << c.err;
  const JsonValue j = parse_json(c.out, "compare.json");
  ASSERT_TRUE(j.find("plans_available") && j.find("plans_available")->boolean);
  const JsonValue* list = j.find("plans");
  ASSERT_NE(list, nullptr);
  ASSERT_FALSE(list->items.empty());
  std::set<std::pair<std::string, std::string>> shown;
  for (const auto& l : j.find("attribution")->find("layers")->items)
    shown.insert({l.find("layer")->string, l.find("pass")->string});
  for (const auto& p : list->items) {
    const std::pair<std::string, std::string> key{p.find("layer")->string, p.find("pass")->string};
    EXPECT_TRUE(shown.count(key)) << key.first << " is not a layer row shown";
    const auto& ra = plans["a"].at(key);
    const auto& rb = plans["b"].at(key);
    EXPECT_EQ(num(p, "a.tiles"), std::stod(ra[10])) << key.first;
    EXPECT_EQ(num(p, "b.tiles"), std::stod(rb[10])) << key.first;
    EXPECT_EQ(num(p, "b.simulated_cycles"), std::stod(rb[22])) << key.first;
    ASSERT_TRUE(p.find("b") && p.find("b")->find("split"));
    EXPECT_EQ(p.find("b")->find("split")->string,
              rb[11] + "x" + rb[12] + "x" + rb[13] + "x" + rb[14]);
    EXPECT_FALSE(p.find("changes")->items.empty());
    // A budget of 0.5% of tile memory: 3,194 bytes (of 3,194.88).
    EXPECT_EQ(num(p, "b.budget_bytes"), 3194) << key.first;
  }
  const auto text = ipusim("compare " + dir.file("a") + " " + dir.file("b"));
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("plan changes of those rows"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("serial 1 -> "), std::string::npos) << text.out;
}

// Issue 27: recomputation is its own pass. A step that runs its compute set in another pass
// than the compute set's own (trace format v4: `compute a pass=recompute`) goes to that pass's
// row: three forward executions and one recomputation of the same compute set are a forward row
// of 3 executions and a recompute row of 1, its cycles 3 : 1, each sync with its step.
TEST(Reports, ARecomputationStepIsItsOwnPassInLayersCsv) {
  TempDir dir;
  const std::string trace = dir.file("r.trace");
  std::ofstream(trace)
      << "ipusim-trace 5\nipu 0\ncomputeset a layer=l1 pass=forward op=conv\n"
         "  vertex tiles=0..3 copy bytes=8000\nend\nprogram\n  repeat 3\n"
         "    sync\n    compute a\n  end\n  sync\n  compute a pass=recompute\nend\n";
  const auto r = ipusim("run -q --chip " + source_dir() + "/configs/chips/gc200.yaml --out " +
                        dir.file("out") + " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string header;
  std::map<std::string, std::vector<std::string>> rows;
  for (const auto& row : read_csv(dir.file("out/layers.csv"), &header)) rows[row[2]] = row;
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_TRUE(rows.count("forward") && rows.count("recompute"));
  EXPECT_EQ(rows["forward"][1], "l1");
  EXPECT_EQ(rows["recompute"][1], "l1");
  EXPECT_EQ(rows["forward"][3], "3");
  EXPECT_EQ(rows["recompute"][3], "1");
  for (std::size_t col : {4u, 5u})  // compute_cycles, sync_cycles
    EXPECT_EQ(std::stod(rows["forward"][col]), 3 * std::stod(rows["recompute"][col])) << col;
  EXPECT_GT(std::stod(rows["recompute"][4]), 0);
}

}  // namespace
}  // namespace ipusim::testing
