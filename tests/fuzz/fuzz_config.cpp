// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the chip config loader. The input is a YAML document, optionally followed by a
// NUL byte and `--set` assignments, one per line:
//
//     <yaml text> [ '\0' KEY=VALUE { '\n' KEY=VALUE } ]
//
// It runs what `ipusim --chip FILE --set ...` runs (config::parse_document, apply_override,
// config::resolve against chip_schema(), chip_from), then the same against system_schema()
// (a system config with its parts already merged in: includes are not followed, they read
// files), and finally ipusim::load_system on the YAML written to a file (includes followed, so
// missing, cyclic and deep includes are exercised; the file is "system.yaml" in a private
// temporary directory). ConfigError is the expected outcome for bad input. When the input resolves,
// config.resolved.yaml (Resolved::to_yaml) must load and resolve again to the same YAML: that
// file is written into every run directory so that a run can be repeated.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "ipusim/config/chip.hpp"
#include "ipusim/config/config.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/util/error.hpp"

namespace {

void check(const std::string& yaml, const std::vector<std::string>& overrides,
           const ipusim::config::Schema& schema) {
  using namespace ipusim;
  std::string resolved_yaml;
  try {
    config::Document doc = config::parse_document(yaml, "fuzz.yaml");
    for (const auto& o : overrides) config::apply_override(doc, o, schema);
    const config::Resolved resolved = config::resolve(doc, schema);
    const ChipSpec spec = chip_from(resolved);
    (void)spec.peak_flops(true, false);
    (void)spec.exchange_bandwidth();
    resolved_yaml = resolved.to_yaml();
  } catch (const Error&) {
    return;  // rejected with a message: the expected outcome for bad input
  }

  // The resolved config must load again (no exception of any kind) and be a fixed point.
  try {
    const config::Document again = config::parse_document(resolved_yaml, "config.resolved.yaml");
    const config::Resolved resolved_again = config::resolve(again, schema);
    (void)chip_from(resolved_again);
    if (resolved_again.to_yaml() != resolved_yaml)
      fuzz::fuzz_fail("config.resolved.yaml does not resolve to itself",
                      resolved_yaml + "---\n" + resolved_again.to_yaml());
  } catch (const Error& e) {
    fuzz::fuzz_fail("config.resolved.yaml is rejected",
                    std::string(e.what()) + "\n" + resolved_yaml);
  }
}

// A private directory for the system file, created once per process.
const std::string& system_file() {
  static const std::string path = [] {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("ipusim-fuzz-config-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    static std::string remove_at_exit = dir.string();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(remove_at_exit, ec);
    });
    return (dir / "system.yaml").string();
  }();
  return path;
}

void check_system_file(const std::string& yaml, const std::vector<std::string>& overrides) {
  {
    std::ofstream out(system_file(), std::ios::binary | std::ios::trunc);
    out << yaml;
  }
  try {
    (void)ipusim::load_system(system_file(), overrides);
  } catch (const ipusim::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ipusim;
  const std::string input = fuzz::as_string(data, size);
  const auto nul = input.find('\0');
  const std::string yaml = input.substr(0, nul);
  const std::vector<std::string> overrides = fuzz::overrides_after_nul(input);
  check(yaml, overrides, chip_schema());
  check(yaml, overrides, system_schema());
  check_system_file(yaml, overrides);
  return 0;
}
