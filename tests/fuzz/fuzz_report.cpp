// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the HTML report of a run directory, as `ipusim report DIR` and
// `ipusim report DIR --compare DIR` write it. The input is up to five files separated by NUL
// bytes:
//
//     stats.json [ '\0' config.resolved.yaml [ '\0' tiles.csv [ '\0' supersteps.csv
//                [ '\0' layers.csv ]]]]
//
// (a file absent from the input is absent from the directory), written into a private
// directory, read by report::load_run_dir and rendered by report::html_report alone and
// compared with itself. ipusim::Error is the expected outcome for bad input. Oracle: a page
// that renders is one whole document whose only script is the report's own (every value from
// the run directory is escaped).
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "fuzz_file_common.hpp"
#include "ipusim/report/html.hpp"
#include "ipusim/report/run_dir.hpp"
#include "ipusim/util/error.hpp"

namespace {

std::size_t count_script_tags(const std::string& html) {
  std::string lower(html.size(), ' ');
  std::transform(html.begin(), html.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::size_t n = 0;
  for (auto at = lower.find("<script"); at != std::string::npos; at = lower.find("<script", at + 1))
    ++n;
  return n;
}

void check_page(const std::string& html) {
  if (!html.starts_with("<!DOCTYPE html>\n") || !html.ends_with("</body></html>\n"))
    ipusim::fuzz::fuzz_fail("the report is not one whole HTML document", html.substr(0, 200));
  if (count_script_tags(html) != 1)
    ipusim::fuzz::fuzz_fail("a value from the run directory reached the page unescaped",
                            html.substr(0, 200));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ipusim;
  const std::string input = fuzz::as_string(data, size);
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (parts.size() < 4) {
    const auto nul = input.find('\0', start);
    if (nul == std::string::npos) break;
    parts.push_back(input.substr(start, nul - start));
    start = nul + 1;
  }
  parts.push_back(input.substr(start));

  const auto dir = fuzz::private_dir("report") / "run";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir);
  static const char* const kNames[] = {"stats.json", "config.resolved.yaml", "tiles.csv",
                                       "supersteps.csv", "layers.csv"};
  for (std::size_t i = 0; i < parts.size(); ++i) fuzz::write_file(dir / kNames[i], parts[i]);
  try {
    const report::RunDir run = report::load_run_dir(dir.string());
    check_page(report::html_report(run));
    check_page(report::html_report(run, &run));
  } catch (const Error&) {
  }
  return 0;
}

// The report library links the SystemC model (RunStats lives there), and libsystemc expects an
// sc_main; this target never runs the SystemC kernel.
extern "C" int sc_main(int, char*[]) { return 1; }
