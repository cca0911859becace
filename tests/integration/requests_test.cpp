// SPDX-License-Identifier: Apache-2.0
// The libraries behind 'ipusim run', called directly (issue 17, item 5): a request struct given to
// one library function does what the command does, with the same files and the same output. Each
// test calls at most one simulation in this process (SystemC elaborates once per process; ctest
// runs each test in its own process).
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <string>

#include "cli_harness.hpp"
#include "ipusim/driver/run.hpp"

namespace ipusim::testing {
namespace {

// `text` with every occurrence of `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
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

}  // namespace
}  // namespace ipusim::testing

// libsystemc refers to an sc_main; the tests drive the kernel through driver::run() instead.
int sc_main(int, char*[]) { return 1; }
