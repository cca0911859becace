// SPDX-License-Identifier: Apache-2.0
// End-to-end tests of the ipusim command line: each test runs the binary as a child process.
#include <gtest/gtest.h>

#include "cli_harness.hpp"

namespace ipusim::testing {
namespace {

TEST(Cli, HelpListsCommands) {
  const auto r = ipusim("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* cmd : {"run", "kernel", "validate", "info"})
    EXPECT_NE(r.out.find(cmd), std::string::npos) << cmd;
}

TEST(Cli, EverySubcommandHasHelp) {
  for (const char* cmd : {"run", "kernel", "validate", "info"}) {
    const auto r = ipusim(std::string(cmd) + " --help");
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_NE(r.out.find("Usage: ipusim " + std::string(cmd)), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--log-level"), std::string::npos) << cmd;
  }
}

TEST(Cli, UnknownCommandIsAUsageError) {
  const auto r = ipusim("rnu");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown command 'rnu'"), std::string::npos) << r.err;
}

TEST(Cli, UnknownOptionIsAUsageError) {
  const auto r = ipusim("run --chipp x.yaml t.trace");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("ipusim run"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ipusim::testing
