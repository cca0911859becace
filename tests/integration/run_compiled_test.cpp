// SPDX-License-Identifier: Apache-2.0
// `ipusim run --run RUN.yaml`: the training step compiled in memory and simulated in one
// process gives the run directory of 'ipusim compile' followed by 'ipusim run' (issue 14,
// item 3), and the trace id is that of the in-memory trace, from the bytes read or written
// (item 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "cli_harness.hpp"
#include "ipusim/trace/trace_io.hpp"

namespace ipusim::testing {
namespace {

std::string tiny_run() { return source_dir() + "/tests/data/workloads/resnet_tiny-pod16.yaml"; }
std::string pod16() { return source_dir() + "/configs/systems/pod16.yaml"; }

// stats.json without its lines that name the simulated trace file (a "file" line that is not
// a config's .yaml) and, with `identity`, without its "identity" line.
std::string without_trace_lines(const std::string& stats, bool identity) {
  std::string out;
  std::size_t at = 0;
  while (at < stats.size()) {
    auto end = stats.find('\n', at);
    if (end == std::string::npos) end = stats.size();
    const std::string line = stats.substr(at, end - at);
    const bool names_file =
        line.find("\"file\": ") != std::string::npos && line.find(".yaml") == std::string::npos;
    const bool names_identity = identity && line.find("\"identity\": ") != std::string::npos;
    if (!names_file && !names_identity) out += line + "\n";
    at = end + 1;
  }
  return out;
}
// stats.json without its "file" line (the trace file simulated, if any).
std::string without_file(const std::string& stats) { return without_trace_lines(stats, false); }
// stats.json without the lines naming the trace (file and identity).
std::string without_trace(const std::string& stats) { return without_trace_lines(stats, true); }

// stats.json without its per-layer rows (the ipu[].layers arrays), which come
// from the provenance.
std::string without_layers(std::string stats) {
  const std::string open = ",\n      \"layers\": [", close = "\n      ]";
  for (auto at = stats.find(open); at != std::string::npos; at = stats.find(open, at)) {
    const auto end = stats.find(close, at);
    if (end == std::string::npos) break;
    stats.erase(at, end + close.size() - at);
  }
  return stats;
}

// `text` less what provenance gives: stats.json's "layer" and "pass" lines (of the top compute
// sets and exchanges), supersteps.csv's last two columns (layer, pass).
std::string without_provenance(const std::string& text, bool csv) {
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(' ');
    if (!csv && first != std::string::npos &&
        (line.compare(first, 9, "\"layer\": ") == 0 || line.compare(first, 8, "\"pass\": ") == 0))
      continue;
    if (csv)
      for (int column = 0; column < 2; ++column) line.erase(line.rfind(','));
    out += line + "\n";
  }
  return out;
}

std::string identity_line(const std::string& trace_id) {
  const auto at = trace_id.find("identity: ");
  return at == std::string::npos ? "" : trace_id.substr(at);
}

// Trace format v3: the compiler writes transfers and vertices as runs. The same program with
// every run written out (one record per transfer and per vertex instance group, as a v2
// trace had it) simulates to the same statistics, on the fast and the reference engine.
TEST(RunCompiled, RunsAndTheirExpandedFormGiveIdenticalStatistics) {
  TempDir dir;
  const std::string runs = dir.file("runs.itb"), flat = dir.file("flat.itb");
  auto r = ipusim("compile --run " + tiny_run() + " --out " + runs);
  ASSERT_EQ(r.status, 0) << r.err;
  trace::Trace t = trace::read_file(runs);
  std::uint64_t records = 0, transfers = 0;
  for (auto& ipu : t.ipus) {
    for (auto& ex : ipu.exchanges) {
      records += ex.transfers.size();
      transfers += ex.transfer_count();
      ex = trace::expanded(ex);
    }
    for (auto& cs : ipu.compute_sets) cs = trace::expanded(cs);
  }
  EXPECT_LT(records * 2, transfers) << "the compiled trace should be mostly runs";
  // Provenance is for reports only: the expanded trace also drops it, and still simulates the
  // same.
  for (auto& ipu : t.ipus) {
    for (auto& ex : ipu.exchanges) ex.provenance = {};
    for (auto& cs : ipu.compute_sets) cs.provenance = {};
  }
  trace::write_file(t, flat, trace::Format::kBinary);
  for (const std::string engine : {"", " --engine reference"}) {
    r = ipusim("run -q --system " + pod16() + engine + " --out " + dir.file("a") + " " + runs);
    ASSERT_EQ(r.status, 0) << r.err;
    r = ipusim("run -q --system " + pod16() + engine + " --out " + dir.file("b") + " " + flat);
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string a = read_all(dir.file("a/stats.json")),
                      b = read_all(dir.file("b/stats.json"));
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(without_provenance(without_layers(without_trace(a)), false),
              without_provenance(without_layers(without_trace(b)), false))
        << engine;
    EXPECT_NE(without_layers(a), a);  // (there were layer rows to leave out)
    EXPECT_EQ(read_all(dir.file("a/tiles.csv")), read_all(dir.file("b/tiles.csv"))) << engine;
    const std::string steps_a = read_all(dir.file("a/supersteps.csv"));
    if (engine.empty()) EXPECT_NE(steps_a.find(",forward\n"), std::string::npos);  // (named)
    EXPECT_EQ(without_provenance(steps_a, true),
              without_provenance(read_all(dir.file("b/supersteps.csv")), true))
        << engine;
    std::filesystem::remove_all(dir.file("a"));
    std::filesystem::remove_all(dir.file("b"));
  }
}

// Trace format v3 provenance: every compute set, exchange, host copy and collective of a
// compiled training step says which pass it belongs to, and layer operations name their layer.
void expect_stamped_steps(const std::vector<trace::Step>& steps, int& seen) {
  for (const auto& s : steps) {
    if (s.kind == trace::StepKind::kHost || s.kind == trace::StepKind::kCollective) {
      EXPECT_NE(s.provenance.pass, trace::Pass::kNone);
      ++seen;
    }
    expect_stamped_steps(s.body, seen);
  }
}

TEST(RunCompiled, CompiledTracesCarryProvenance) {
  TempDir dir;
  for (const std::string workload : {"resnet_tiny-pod16.yaml", "bert_tiny-pod16.yaml"}) {
    const std::string file = dir.file(workload + ".itb");
    auto r = ipusim("compile --run " + source_dir() + "/tests/data/workloads/" + workload +
                    " --out " + file);
    ASSERT_EQ(r.status, 0) << r.err;
    const trace::Trace t = trace::read_file(file);
    std::set<trace::Pass> passes;
    std::set<std::string> layers;
    int steps = 0;
    for (const auto& ipu : t.ipus) {
      for (const auto& cs : ipu.compute_sets) {
        EXPECT_NE(cs.provenance.pass, trace::Pass::kNone) << cs.name;
        EXPECT_NE(cs.provenance.op, trace::OpKind::kNone) << cs.name;
        passes.insert(cs.provenance.pass);
        layers.insert(cs.provenance.layers.begin(), cs.provenance.layers.end());
        if (cs.name.starts_with("conv_") && cs.name.ends_with("/conv") &&
            cs.provenance.pass == trace::Pass::kForward)
          EXPECT_FALSE(cs.provenance.layers.empty()) << cs.name;
      }
      for (const auto& ex : ipu.exchanges) {
        EXPECT_NE(ex.provenance.pass, trace::Pass::kNone) << ex.name;
        passes.insert(ex.provenance.pass);
      }
      expect_stamped_steps(ipu.steps, steps);
    }
    EXPECT_GT(steps, 0) << workload;
    for (auto p : {trace::Pass::kForward, trace::Pass::kDataGradient, trace::Pass::kWeightGradient,
                   trace::Pass::kWeightUpdate})
      EXPECT_TRUE(passes.contains(p)) << workload << " " << trace::kPassNames[static_cast<int>(p)];
    EXPECT_GT(layers.size(), 3u) << workload;
    for (const auto& g : t.global_exchanges)
      EXPECT_EQ(g.provenance.pass, trace::Pass::kPipelineCopy);
  }
}

// Issue 27: an elementwise op pending from one layer and applied in the next one's scope was
// the next layer's work in layers.csv. In the reduced BERT, each encoder's attention ends with
// a layer norm whose apply ((x - mean) inv_std gamma + beta, one fused compute set) runs when
// the FFN reads its input: it names the attention sub-layer (it named only the FFN).
TEST(RunCompiled, PendingOpsAreTheWorkOfTheLayerTheyComeFrom) {
  TempDir dir;
  const std::string file = dir.file("b.itb");
  ASSERT_EQ(ipusim("compile -q --run " + source_dir() +
                   "/tests/data/workloads/bert_tiny-pod16.yaml --out " + file)
                .status,
            0);
  const trace::Trace t = trace::read_file(file);
  std::set<std::string> applied_for;
  for (const auto& ipu : t.ipus)
    for (const auto& cs : ipu.compute_sets)
      if (cs.name.starts_with("map_sub_mul_mul_add_") &&
          cs.provenance.pass == trace::Pass::kForward)
        applied_for.insert(cs.provenance.layers.begin(), cs.provenance.layers.end());
  for (const char* layer : {"encoder0/attention", "encoder1/attention", "encoder0/ffn"})
    EXPECT_TRUE(applied_for.count(layer)) << layer;
}

TEST(RunCompiled, GivesTheRunDirectoryOfCompileThenRun) {
  TempDir dir;
  const std::string sets = " --set chip.clock=1.5GHz --set run.gradient_accumulation=2";
  const std::string trace = dir.file("t.itb");
  auto r = ipusim("compile --run " + tiny_run() + sets + " --out " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  r = ipusim("run -q --system " + pod16() + " --set chip.clock=1.5GHz --out " + dir.file("two") +
             " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  // One process, no trace file: the same run directory except the trace file's name.
  r = ipusim("run -q --run " + tiny_run() + sets + " --out " + dir.file("one"));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string two = read_all(dir.file("two/stats.json")),
                    one = read_all(dir.file("one/stats.json"));
  ASSERT_FALSE(two.empty());
  EXPECT_NE(one.find("\"file\": \"\""), std::string::npos) << "no trace file was simulated";
  // The overrides each run was given (the run.* one went to compile in the two-step run).
  const std::string both =
                        "\"overrides\": [\n    \"chip.clock=1.5GHz\",\n"
                        "    \"run.gradient_accumulation=2\"\n  ]",
                    clock = "\"overrides\": [\n    \"chip.clock=1.5GHz\"\n  ]";
  std::string one_as_two = one;
  ASSERT_NE(one.find(both), std::string::npos) << one.substr(0, 400);
  ASSERT_NE(two.find(clock), std::string::npos) << two.substr(0, 400);
  one_as_two.replace(one_as_two.find(both), both.size(), clock);
  EXPECT_EQ(without_file(one_as_two), without_file(two));
  for (const char* f : {"tiles.csv", "supersteps.csv"})
    EXPECT_EQ(read_all(dir.file(std::string("one/") + f)),
              read_all(dir.file(std::string("two/") + f)))
        << f;
  // config.resolved.yaml: the same system, and with --run the run config's keys after it
  // (run.*, for 'ipusim compare'), which a run of a trace file does not know.
  const std::string config_one = read_all(dir.file("one/config.resolved.yaml")),
                    config_two = read_all(dir.file("two/config.resolved.yaml"));
  ASSERT_FALSE(config_two.empty());
  EXPECT_EQ(config_one.substr(0, config_two.size()), config_two);
  EXPECT_TRUE(config_one.substr(config_two.size()).starts_with("run:\n")) << config_one;
  EXPECT_NE(config_one.find("\n  gradient_accumulation: 2\n"), std::string::npos) << config_one;
  EXPECT_EQ(config_two.find("\nrun:"), std::string::npos) << config_two;
  // The id of the in-memory trace is the one 'ipusim run' gives for its file.
  const std::string id = identity_line(read_all(dir.file("two/trace.id")));
  ASSERT_EQ(id.size(), std::string("identity: ").size() + 16 + 1) << id;
  EXPECT_EQ(identity_line(read_all(dir.file("one/trace.id"))), id);
  // Only the run directory was written: no trace beside it.
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1u) << "t.itb only";
}

TEST(RunCompiled, SaveTraceWritesTheTraceItSimulated) {
  TempDir dir;
  // --save-trace with the name compile would use: stats.json is byte-identical.
  auto r = ipusim("compile --run " + tiny_run() + " --out " + dir.file("c.itb"));
  ASSERT_EQ(r.status, 0) << r.err;
  r = ipusim("run -q --system " + pod16() + " --out " + dir.file("two") + " " + dir.file("c.itb"));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string compiled = read_all(dir.file("c.itb"));
  std::filesystem::remove(dir.file("c.itb"));
  r = ipusim("run -q --run " + tiny_run() + " --save-trace " + dir.file("c.itb") + " --out " +
             dir.file("one"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_all(dir.file("one/stats.json")), read_all(dir.file("two/stats.json")));
  EXPECT_EQ(read_all(dir.file("one/trace.id")), read_all(dir.file("two/trace.id")));
  EXPECT_TRUE(read_all(dir.file("c.itb")) == compiled)
      << "the saved trace is the compiled one, byte for byte";
  // Running the saved file gives the same stats; a text trace too, and the same id.
  r = ipusim("run -q --system " + pod16() + " --out " + dir.file("again") + " " +
             dir.file("c.itb"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_all(dir.file("again/stats.json")), read_all(dir.file("one/stats.json")));
  r = ipusim("run -q --run " + tiny_run() + " --save-trace " + dir.file("sub/c.trace") + " --out " +
             dir.file("text"));
  ASSERT_EQ(r.status, 0) << r.err;
  r = ipusim("run -q --system " + pod16() + " --out " + dir.file("text2") + " " +
             dir.file("sub/c.trace"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_all(dir.file("text/stats.json")), read_all(dir.file("text2/stats.json")));
  EXPECT_EQ(identity_line(read_all(dir.file("text/trace.id"))),
            identity_line(read_all(dir.file("one/trace.id"))));
  EXPECT_EQ(identity_line(read_all(dir.file("text2/trace.id"))),
            identity_line(read_all(dir.file("one/trace.id"))));
}

TEST(RunCompiled, BadInputsAreClearErrors) {
  TempDir dir;
  auto r = ipusim("run --run " + dir.file("missing.yaml") + " --out " + dir.file("o"));
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find(dir.file("missing.yaml")), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o/stats.json")));
  { std::ofstream(dir.file("bad.yaml")) << "run:\n  name: x\n  replicaz: 2\n"; }
  r = ipusim("run --run " + dir.file("bad.yaml"));
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find(dir.file("bad.yaml")), std::string::npos) << r.err;
  r = ipusim("run --run " + tiny_run() + " --set run.replicas=32");
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("need 32 IPUs"), std::string::npos) << r.err;
  r = ipusim("run --run " + tiny_run() + " " + dir.file("x.itb"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("not both"), std::string::npos) << r.err;
  r = ipusim("run --save-trace " + dir.file("x.itb") + " " + dir.file("x.itb"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--save-trace: needs --run"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ipusim::testing

namespace ipusim::testing {
namespace {

// `ipusim run --run` leaves the memory check to the model (compiler::CompileChecks): a step
// that does not fit fails with the compiler's message and status all the same.
TEST(RunCompiled, OutOfMemoryIsTheCompilersErrorWhenTheModelFindsIt) {
  TempDir dir;
  const std::string args =
      "--run " + source_dir() + "/configs/runs/bert-large-pod16.yaml --set chip.tile_memory=256KiB";
  const auto compiled = ipusim("compile " + args + " --out " + dir.file("x.itb"));
  const auto run = ipusim("run -q " + args + " --out " + dir.file("out"));
  EXPECT_EQ(compiled.status, 4);
  EXPECT_EQ(run.status, 4);
  EXPECT_NE(run.err.find("out of memory on tile"), std::string::npos) << run.err;
  EXPECT_EQ(run.err, compiled.err);
  EXPECT_FALSE(std::filesystem::exists(dir.file("out")));
}

}  // namespace
}  // namespace ipusim::testing
