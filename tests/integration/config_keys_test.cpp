// SPDX-License-Identifier: Apache-2.0
// The config-key walk (issue 55, part 1; docs/config-reference.md, "A key either takes effect,
// is refused or is said to have none"): every key of the system schema (chip.*, machine.*,
// fabric.*, system.*) is set with --set on a run of a CNN and of a transformer, in training
// and in inference, on a single-rack IPU-POD16, a multi-rack IPU-POD128, an IPU-M2000 and a
// C600 card, under both tile models. Each value must either change what the run reports
// (stats.json, tiles.csv, supersteps.csv and layers.csv, less the echo of the overrides and
// warnings and the trace's identity), or be refused with an error that names the key, or be said to
// have no effect
// ("--set KEY has no effect: why"); a warning is checked to be true (the run reports the same
// as without the key). A key that does none of these is silently ignored: the walk lists it.
// The run-key walk is tests/unit/run_keys_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cli_harness.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/system.hpp"

namespace ipusim::testing {
namespace {

const std::string kWorkloads = source_dir() + "/tests/data/workloads/";
const std::string kSystems = source_dir() + "/configs/systems/";

// A run walked: a run config and the overrides that make it the case.
struct Case {
  std::string run_file;
  std::vector<std::string> sets;
};

const std::vector<std::string> kInference = {"run.mode=inference", "run.gradient_accumulation=1",
                                             "run.optimiser=none"};
std::vector<std::string> cnn_inference(std::vector<std::string> more) {
  std::vector<std::string> s = kInference;
  s.insert(s.end(), {"run.recompute_checkpoints=none", "run.batchnorm_group=1"});
  s.insert(s.end(), more.begin(), more.end());
  return s;
}

// A value to try, with the keys it needs beside it to show (the run is then compared with the
// same run without the key, with those keys).
struct Try {
  std::string value;
  std::vector<std::string> with;
};

// The value tried for each key: far enough from the shipped ones to show in a small run.
// Choice keys also try each other choice. A key of the schema without an entry fails the walk:
// a new key must say how it is walked.
std::vector<Try> tries(const config::ParamDecl& decl) {
  static const std::map<std::string, std::vector<Try>> values = {
      {"chip.name", {{"walked"}}},
      {"chip.clock", {{"1GHz"}}},
      {"chip.tiles", {{"1024"}}},
      {"chip.tile_memory", {{"312KiB"}}},
      {"chip.worker_contexts", {{"4"}}},
      {"chip.datapath_width", {{"16B"}}},
      {"chip.memory.load_bytes_per_cycle", {{"2B/cycle"}}},
      {"chip.memory.interleaved_load_bytes_per_cycle", {{"2B/cycle"}}},
      {"chip.memory.memcpy_bytes_per_cycle", {{"1B/cycle"}}},
      {"chip.amp.engines_half_half", {{"8"}}},
      {"chip.amp.engines_half_float", {{"4"}}},
      {"chip.amp.engines_float_float", {{"8"}}},
      {"chip.amp.weights_per_engine_half", {{"8"}}},
      {"chip.amp.weights_per_engine_float", {{"4"}}},
      {"chip.amp.macs_per_engine_half", {{"2"}}},
      {"chip.amp.macs_per_engine_float", {{"2"}}},
      {"chip.amp.coeff_load_bytes_per_cycle", {{"2B/cycle"}, {"32B/cycle"}}},
      {"chip.amp.pipeline_depth", {{"8"}}},
      {"chip.tile.issue_width", {{"1"}}},
      {"chip.tile.result_latency", {{"12"}, {"3"}}},
      {"chip.tile.store_bytes_per_cycle", {{"1B/cycle"}}},
      {"chip.tile.supervisor_simple_cycles", {{"4"}}},
      {"chip.tile.supervisor_control_cycles", {{"20"}}},
      {"chip.tile.rpt_count_max", {{"8"}}},
      {"chip.exchange.bytes_per_cycle", {{"1B/cycle"}}},
      {"chip.exchange.tiles_per_shared_bus", {{"1"}}},
      {"chip.exchange.fixed_overhead", {{"1000cycles"}}},
      {"chip.exchange.tiles_per_column", {{"4"}}},
      {"chip.exchange.column_hop_latency", {{"10cycles"}}},
      {"chip.sync.internal_latency", {{"1000cycles"}}},
      {"chip.host.bandwidth", {{"10MB/s"}}},
      {"chip.host.latency", {{"1ms"}}},
      {"chip.runtime.vertex_state_bytes", {{"64B"}}},
      {"chip.runtime.stack_bytes", {{"64KiB"}}},
      {"chip.runtime.codelet_code_bytes", {{"16KiB"}}},
      {"chip.runtime.exchange_code_bytes_per_transfer", {{"64B"}}},
      {"chip.runtime.compute_set_overhead", {{"500cycles"}}},
      {"machine.name", {{"walked"}}},
      {"machine.ipus", {{"8"}}},
      {"machine.rung_links", {{"1"}}},
      {"machine.rail_links", {{"1"}}},
      {"machine.gw_links", {{"1"}}},
      {"machine.gateway.pcie_bandwidth", {{"10MB/s"}}},
      {"machine.gateway.streaming_memory", {{"1KiB"}}},
      {"machine.gateway.ddr_bandwidth", {{"10MB/s"}}},
      {"machine.gateway.latency", {{"1ms"}}},
      {"machine.host_link.bandwidth", {{"10MB/s"}}},
      {"machine.host_link.latency", {{"1ms"}}},
      {"fabric.ipu_link.bandwidth", {{"100MB/s"}}},
      {"fabric.ipu_link.efficiency", {{"0.05"}}},
      {"fabric.ipu_link.latency", {{"100us"}}},
      {"fabric.gw_link.bandwidth", {{"100MB/s"}}},
      {"fabric.gw_link.efficiency", {{"0.05"}}},
      {"fabric.gw_link.latency", {{"100us"}}},
      {"fabric.sync.hop_latency", {{"100us"}}},
      {"fabric.sync.ipus_per_hop", {{"1"}}},
      // The NIC share binds only when it is the narrowest part of the host path.
      {"fabric.host_server_bandwidth", {{"10MB/s"}}},
      {"system.host_servers", {{"4", {"fabric.host_server_bandwidth=10MB/s"}}}},
      {"fabric.gcl.max_broadcast_size", {{"1GiB"}}},
      {"system.name", {{"walked"}}},
      {"system.chip", {{source_dir() + "/configs/chips/bow.yaml"}}},
      {"system.machine", {{source_dir() + "/configs/parts/m2000.yaml"}}},
      {"system.fabric", {{source_dir() + "/configs/parts/ipu-fabric.yaml"}}},
      {"system.machines_per_rack", {{"8"}}},
      {"system.racks", {{"2"}}},
      {"system.extra_links", {{"0-2:4"}}},
  };
  std::vector<Try> out;
  if (auto it = values.find(decl.path); it != values.end()) out = it->second;
  for (const std::string& choice : decl.choices) out.push_back({choice});
  if (out.empty()) ADD_FAILURE() << decl.path << ": the config-key walk has no value for it";
  return out;
}

// `json` less the array that follows `"key": ` (a JSON array of strings).
std::string without_array(std::string json, const std::string& key) {
  const auto at = json.find("\"" + key + "\": [");
  if (at == std::string::npos) return json;
  std::size_t i = json.find('[', at) + 1;
  for (bool in_string = false; i < json.size(); ++i) {
    if (in_string && json[i] == '\\') {
      ++i;
    } else if (json[i] == '"') {
      in_string = !in_string;
    } else if (!in_string && json[i] == ']') {
      break;
    }
  }
  return json.erase(at, i + 1 - at);
}

// `json` less the trace's identity: the trace records the chip it was compiled for (its AMP
// engines among them, to warn when it runs on another), which is not a result of the run.
std::string without_identity(std::string json) {
  const std::string key = "\"identity\": \"";
  const auto at = json.find(key);
  if (at == std::string::npos) return json;
  return json.erase(at, json.find('"', at + key.size()) + 1 - at);
}

struct Outcome {
  int status = 0;
  std::string err;
  std::string reported;  // what the run reports, less the overrides and warnings
};

Outcome run(const Case& c, const std::vector<std::string>& sets) {
  TempDir dir;
  std::string args =
      "run --quiet --run " + shell_quote(c.run_file) + " --out " + shell_quote(dir.file("out"));
  for (const auto& s : c.sets) args += " --set " + shell_quote(s);
  for (const auto& s : sets) args += " --set " + shell_quote(s);
  const CommandResult r = ipusim(args);
  Outcome o{r.status, without_asan_stack_warning(r.err), ""};
  if (r.status == 0) {
    o.reported = without_identity(without_array(
        without_array(read_all(dir.file("out/stats.json")), "overrides"), "warnings"));
    for (const char* f : {"tiles.csv", "supersteps.csv", "layers.csv"})
      o.reported += read_all(dir.file(std::string("out/") + f));
  }
  return o;
}

// Walks every key over `c`; returns one line per value that was silently ignored or warned
// about wrongly. `unchanged` lists the keys whose value is expected to leave this run's
// results as they are, each with why (checked: the key must then leave them unchanged).
std::vector<std::string> walk(const Case& c, const std::map<std::string, std::string>& unchanged) {
  const Outcome base = run(c, {});
  EXPECT_EQ(base.status, 0) << base.err;
  if (base.status != 0) return {};
  std::map<std::vector<std::string>, Outcome> bases{{{}, base}};
  // The base's own values, so that a value it already has is not tried.
  std::vector<std::string> run_sets, system_sets;
  for (const auto& s : c.sets) (s.starts_with("run.") ? run_sets : system_sets).push_back(s);
  const LoadedSystem system =
      load_system(compiler::load_run(c.run_file, run_sets).run.system_file, system_sets);
  std::vector<std::string> problems;
  for (const config::ParamDecl& decl : system_schema().params()) {
    const std::string& key = decl.path;
    const bool has = system.resolved.values().count(key) > 0;
    for (const Try& t : tries(decl)) {
      if (has && config::format_value(system.resolved.at(key)) == t.value) continue;
      if (!bases.count(t.with)) bases[t.with] = run(c, t.with);
      const Outcome& before = bases[t.with];
      std::vector<std::string> sets = t.with;
      sets.push_back(key + "=" + t.value);
      const Outcome o = run(c, sets);
      const std::string what = key + "=" + t.value + ": ";
      if (o.status != 0) {
        if (o.err.find(key) == std::string::npos)
          problems.push_back(what + "refused without naming the key: " + o.err);
        continue;
      }
      const bool warned = o.err.find("--set " + key + " has no effect") != std::string::npos;
      const bool same = before.status == 0 && o.reported == before.reported;
      if (warned && !same)
        problems.push_back(what + "said to have no effect, but it changed the run");
      const auto expected = unchanged.find(key);
      if (expected != unchanged.end()) {
        if (!same) problems.push_back(what + "expected unchanged (" + expected->second + ")");
        continue;
      }
      if (same && !warned)
        problems.push_back(what + "silently ignored: the run reports the same as without it");
    }
  }
  for (const auto& [key, why] : unchanged)
    if (!system_schema().find(key)) problems.push_back(key + ": not a key of the schema");
  return problems;
}

std::string lines(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += "\n  " + s;
  return out;
}

// Values a run's work does not depend on, though the key takes effect: the IPU-Link traffic
// of a data-parallel CNN is ring collectives, which a ladder carries as fast as a torus (the
// rails of both hold a ring through every IPU).
const std::map<std::string, std::string> kDataParallelCnn = {
    {"system.rack_topology", "a ring all-reduce over the rails is the same on both"},
};

TEST(ConfigKeys, EveryKeyChangesACnnTrainingRunOnAPod16OrIsRefusedOrSaid) {
  const auto problems = walk({kWorkloads + "resnet_tiny-pod16.yaml", {}}, kDataParallelCnn);
  EXPECT_TRUE(problems.empty()) << lines(problems);
}

TEST(ConfigKeys, EveryKeyChangesATransformerTrainingRunOnAPod16OrIsRefusedOrSaid) {
  const auto problems = walk({kWorkloads + "bert_tiny-pod16.yaml", {}}, {});
  EXPECT_TRUE(problems.empty()) << lines(problems);
}

TEST(ConfigKeys, EveryKeyChangesACnnInferenceRunOnAnM2000OrIsRefusedOrSaid) {
  const auto problems =
      walk({kWorkloads + "resnet_tiny-pod16.yaml",
            cnn_inference({"run.system=" + kSystems + "m2000.yaml", "run.replicas=4"})},
           {});
  EXPECT_TRUE(problems.empty()) << lines(problems);
}

TEST(ConfigKeys, EveryKeyChangesATransformerInferenceRunOnAPod16OrIsRefusedOrSaid) {
  const auto problems = walk({kWorkloads + "bert_tiny-pod16.yaml", kInference}, {});
  EXPECT_TRUE(problems.empty()) << lines(problems);
}

TEST(ConfigKeys, EveryKeyChangesACnnTrainingRunOnAMultiRackPod128OrIsRefusedOrSaid) {
  const auto problems = walk({kWorkloads + "resnet_tiny-pod16.yaml",
                              {"run.system=" + kSystems + "pod128.yaml", "run.replicas=128"}},
                             kDataParallelCnn);
  EXPECT_TRUE(problems.empty()) << lines(problems);
}

TEST(ConfigKeys, EveryKeyChangesACnnInferenceRunOnAC600OrIsRefusedOrSaid) {
  const auto problems =
      walk({kWorkloads + "resnet_tiny-pod16.yaml",
            cnn_inference({"run.system=" + kSystems + "c600.yaml", "run.replicas=1"})},
           {});
  EXPECT_TRUE(problems.empty()) << lines(problems);
}

TEST(ConfigKeys, EveryKeyChangesRunsUnderTheInstructionLevelTileModelOrIsRefusedOrSaid) {
  auto problems =
      walk({kWorkloads + "resnet_tiny-pod16.yaml", {"chip.tile_model=isa"}}, kDataParallelCnn);
  for (const auto& p : walk({kWorkloads + "bert_tiny-pod16.yaml", {"chip.tile_model=isa"}}, {}))
    problems.push_back("transformer: " + p);
  EXPECT_TRUE(problems.empty()) << lines(problems);
}

}  // namespace
}  // namespace ipusim::testing
