// SPDX-License-Identifier: Apache-2.0
// The JSON reader (parse_json) on files ipusim wrote: set IPUSIM_BENCH_JSON to one or more
// paths separated by ':' (e.g. the stats.json of `ipusim run --run
// configs/runs/bert-large-pod128.yaml --out DIR` and the sweep.json of the scaling sweep);
// one benchmark per file, named after its last two path components.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ipusim/util/json_reader.hpp"

namespace ipusim::bench {
namespace {

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void read_json(benchmark::State& state, const std::string& path) {
  const std::string text = file_text(path);
  if (text.empty()) {
    state.SkipWithError(("cannot read " + path).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(parse_json(text, path));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}

const bool registered = [] {
  const char* env = std::getenv("IPUSIM_BENCH_JSON");
  if (!env || !*env) {
    benchmark::RegisterBenchmark("BM_JsonRead", [](benchmark::State& state) {
      state.SkipWithError("set IPUSIM_BENCH_JSON to stats.json or sweep.json files");
    });
    return true;
  }
  std::stringstream paths(env);
  std::string path;
  while (std::getline(paths, path, ':')) {
    if (path.empty()) continue;
    const std::filesystem::path p(path);
    const std::string name =
        "BM_JsonRead/" + p.parent_path().filename().string() + "/" + p.filename().string();
    benchmark::RegisterBenchmark(name.c_str(), read_json, path)->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace ipusim::bench
