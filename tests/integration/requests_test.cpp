// SPDX-License-Identifier: Apache-2.0
// The libraries behind 'ipusim run', 'ipusim check' and 'ipusim sweep', called directly (issue
// 17, item 5): a request struct given to one library function does what the command does, with
// the same files and the same output. Each test calls at most one simulation in this process
// (SystemC elaborates once per process; ctest runs each test in its own process).
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <string>

#include "cli_harness.hpp"
#include "ipusim/driver/run.hpp"
#include "ipusim/regression/check.hpp"
#include "ipusim/sweep/run.hpp"

namespace ipusim::testing {
namespace {

// `text` with every occurrence of `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// `text` without the lines that contain `marker`.
std::string without_lines(const std::string& text, const std::string& marker) {
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line))
    if (line.find(marker) == std::string::npos) out += line + "\n";
  return out;
}

TEST(Requests, RunRequestGivesTheRunDirectoryAndSummaryOfIpusimRun) {
  spdlog::set_level(spdlog::level::warn);
  TempDir dir;
  const std::string trace = dir.file("mm.itb");
  ASSERT_EQ(ipusim("kernel matmul --m 256 --n 256 --k 256 --dtype half --chip " +
                   chip_file("gc200") + " --out " + trace)
                .status,
            0);
  const auto cli = ipusim("run --chip " + chip_file("gc200") + " --out " + dir.file("cli") +
                          " --tile-stats " + dir.file("cli-tiles.csv") + " " + trace);
  ASSERT_EQ(cli.status, 0) << cli.err;

  driver::RunRequest request;
  request.trace_file = trace;
  request.chip_file = chip_file("gc200");
  request.out_dir = dir.file("lib");
  request.tile_stats_file = dir.file("lib-tiles.csv");
  std::ostringstream out, err;
  const RunStats stats = driver::run(request, out, err);

  EXPECT_EQ(out.str(), replaced(cli.out, dir.file("cli"), dir.file("lib")));
  EXPECT_EQ(err.str(), cli.err);
  for (const char* file :
       {"stats.json", "config.resolved.yaml", "trace.id", "tiles.csv", "supersteps.csv"})
    EXPECT_EQ(read_all(dir.file("lib/") + file), read_all(dir.file("cli/") + file)) << file;
  EXPECT_EQ(read_all(dir.file("lib-tiles.csv")), read_all(dir.file("cli-tiles.csv")));
  EXPECT_GT(stats.cycles, 0u);
  EXPECT_EQ(json_value_after(read_all(dir.file("lib/stats.json")), "\"total\""),
            static_cast<double>(stats.cycles));
}

TEST(Requests, CheckRequestGivesTheReportOfIpusimCheck) {
  const std::string suite = source_dir() + "/tests/regression/suite.yaml";
  const std::string filter = "matmul/square-512-half";
  const auto cli = ipusim("check --suite " + suite + " --jobs 1 --verbose --filter " + filter);
  ASSERT_EQ(cli.status, 0) << cli.out << cli.err;

  regression::CheckRequest request;
  request.suite = suite;
  request.filters = {filter};
  request.verbose = true;
  request.executable = IPUSIM_BINARY;
  std::ostringstream out, err;
  const regression::CheckResult result = regression::check(request, out, err);
  EXPECT_EQ(result.passed, 1u);
  EXPECT_EQ(result.failed, 0u);
  EXPECT_EQ(result.exit_code(), 0);
  // Only the seconds differ: the per-case line and "check: 1 case(s) in N s".
  EXPECT_EQ(without_lines(without_lines(out.str(), " s)"), " s with "),
            without_lines(without_lines(cli.out, " s)"), " s with "));
  EXPECT_EQ(err.str(), cli.err);
  EXPECT_NE(out.str().find("check: 1 passed, 0 failed\n"), std::string::npos) << out.str();

  // A case that moves fails, with the exit status of the command.
  request.overrides = {"chip.sync.internal_latency=1000cycles"};
  std::ostringstream moved_out, moved_err;
  const regression::CheckResult moved = regression::check(request, moved_out, moved_err);
  EXPECT_EQ(moved.failed, 1u);
  EXPECT_EQ(moved.exit_code(), regression::kCheckFailed);
}

TEST(Requests, SweepRequestGivesTheFilesOfIpusimSweep) {
  TempDir dir;
  const std::string spec = dir.file("s.yaml");
  {
    std::ofstream f(spec);
    f << "format: ipusim-sweep/1\n"
         "name: matmul-clocks\n"
         "base:\n"
         "  kernel: matmul\n"
         "  args: {m: 256, n: 256, k: 256, dtype: half}\n"
         "  chip: gc200\n"
         "axes:\n"
         "  - chip.clock: [1.33GHz, 1.85GHz]\n";
  }
  const auto cli = ipusim("sweep " + spec + " --jobs 1 --out " + dir.file("cli"));
  ASSERT_EQ(cli.status, 0) << cli.out << cli.err;

  sweep::SweepRequest request;
  request.spec_file = spec;
  request.out_dir = dir.file("lib");
  request.executable = IPUSIM_BINARY;
  std::ostringstream out, err;
  const sweep::SweepResult result = sweep::run_sweep(request, out, err);
  EXPECT_EQ(result.points, 2u);
  EXPECT_EQ(result.ran, 2u);
  EXPECT_EQ(result.failed, 0u);
  EXPECT_EQ(result.exit_code(), 0);
  EXPECT_EQ(out.str(), replaced(cli.out, dir.file("cli"), dir.file("lib")));
  EXPECT_EQ(err.str(), "");
  EXPECT_EQ(read_all(dir.file("lib/sweep.csv")), read_all(dir.file("cli/sweep.csv")));
  EXPECT_EQ(read_all(dir.file("lib/sweep.json")), read_all(dir.file("cli/sweep.json")));

  // A second request finds both points finished and runs none.
  std::ostringstream again_out, again_err;
  const sweep::SweepResult again = sweep::run_sweep(request, again_out, again_err);
  EXPECT_EQ(again.ran, 0u);
  EXPECT_EQ(again.skipped, 2u);
}

}  // namespace
}  // namespace ipusim::testing

// libsystemc refers to an sc_main; the tests drive the kernel through driver::run() instead.
int sc_main(int, char*[]) { return 1; }
