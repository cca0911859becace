// SPDX-License-Identifier: Apache-2.0
// Fuzz target: run configs (configs/runs/*.yaml), as `ipusim compile --run FILE --set ...`
// reads them. The input is the run file, optionally followed by a NUL byte and `--set`
// assignments, one per line (as in fuzz_config.cpp):
//
//     <yaml text> [ '\0' KEY=VALUE { '\n' KEY=VALUE } ]
//
// The file is "run.yaml" in a private directory that also holds links to the repository's
// configs/, models/ and tests/data/workloads/ (as workloads/), so that the seeds' model and
// system paths resolve and a run's system includes are read too. compiler::load_run, then
// load_model of the model it names. ipusim::Error is the expected outcome for bad input.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "fuzz_file_common.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ipusim;
  const std::string input = fuzz::as_string(data, size);
  const auto nul = input.find('\0');
  const std::vector<std::string> overrides = fuzz::overrides_after_nul(input);
  static const bool linked = [] {
    const auto dir = fuzz::private_dir("run_config");
    const std::filesystem::path src = IPUSIM_SOURCE_DIR;
    std::error_code ec;
    std::filesystem::create_directory_symlink(src / "configs", dir / "configs", ec);
    std::filesystem::create_directory_symlink(src / "models", dir / "models", ec);
    std::filesystem::create_directory_symlink(src / "tests/data/workloads", dir / "workloads", ec);
    return true;
  }();
  (void)linked;
  const auto file = fuzz::private_dir("run_config") / "run.yaml";
  fuzz::write_file(file, input.substr(0, nul));
  try {
    const compiler::LoadedRun loaded = compiler::load_run(file.string(), overrides);
    (void)loaded.run.samples_per_step();
    (void)compiler::load_model(loaded.run.model_file);
  } catch (const Error&) {
  }
  return 0;
}
