// SPDX-License-Identifier: Apache-2.0
// Fuzz target: run directories as `ipusim report` and `ipusim compare` read them. The input is
// up to four files separated by NUL bytes:
//
//     stats.json [ '\0' config.resolved.yaml [ '\0' tiles.csv [ '\0' supersteps.csv ]]]
//
// (a file absent from the input is absent from the directory). They are written into a private
// directory and read by report::load_run_dir; then the stats are looked up as `report` and
// `compare` look them up, and compared with themselves (explain_comparison). The JSON reader
// (parse_json, also used for goldens' stats and sweep results) sees every byte of the first part.
// ipusim::Error is the expected outcome for bad input.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "fuzz_file_common.hpp"
#include "ipusim/report/compare.hpp"
#include "ipusim/report/run_dir.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/json_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ipusim;
  const std::string input = fuzz::as_string(data, size);
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (parts.size() < 3) {
    const auto nul = input.find('\0', start);
    if (nul == std::string::npos) break;
    parts.push_back(input.substr(start, nul - start));
    start = nul + 1;
  }
  parts.push_back(input.substr(start));

  // The JSON reader on its own, and lookup of the paths report and compare use.
  try {
    const JsonValue v = parse_json(parts[0], "stats.json");
    for (const char* path : {"total.cycles", "total.time", "ipu[0].tiles.memory.max",
                             "phases.compute.count", "links[0].utilisation"})
      (void)json_field(v, path);
  } catch (const Error&) {
  }

  const auto dir = fuzz::private_dir("run_dir") / "run";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir);
  static const char* const kNames[] = {"stats.json", "config.resolved.yaml", "tiles.csv",
                                       "supersteps.csv"};
  for (std::size_t i = 0; i < parts.size(); ++i) fuzz::write_file(dir / kNames[i], parts[i]);
  try {
    const report::RunDir run = report::load_run_dir(dir.string());
    (void)report::find_stat(run, "total.cycles");
    (void)report::find_stat(run, "chip.clock");
    (void)report::find_stat(run, "throughput.utilisation");
    // The explained comparison, of the run with itself, as compare prints it.
    const report::ExplainedComparison e = report::explain_comparison(run, run);
    (void)report::explained_text(e, 25);
    (void)report::explained_json(e, 25);
  } catch (const Error&) {
  }
  return 0;
}

// The report library links the SystemC model (RunStats lives there), and libsystemc expects an
// sc_main; this target never runs the SystemC kernel.
extern "C" int sc_main(int, char*[]) { return 1; }
