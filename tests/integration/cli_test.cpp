// SPDX-License-Identifier: Apache-2.0
// End-to-end tests of the ipusim command line: each test runs the binary as a child process.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

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

TEST(Cli, InfoPrintsTheClockAsTheReportDoes) {
  // gc200.yaml's 1.325 GHz (issue 27: info printed "1.32 GHz" where the report prints 1.325);
  // and a spaced --set reaches the same key.
  const auto r = ipusim("info --system " + source_dir() + "/configs/systems/pod16.yaml");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(1472 tiles at 1.325 GHz)"), std::string::npos) << r.out;
  const auto spaced = ipusim("info --system " + source_dir() +
                             "/configs/systems/pod16.yaml --set 'chip.clock = 1.5GHz'");
  ASSERT_EQ(spaced.status, 0) << spaced.err;
  EXPECT_NE(spaced.out.find("(1472 tiles at 1.5 GHz)"), std::string::npos) << spaced.out;
}

TEST(Cli, RunHelpNamesEveryFileOfARunDirectory) {
  // The files of docs/stats-reference.md's first table, each named by `run --help` (issue 27:
  // it named three of the six).
  std::ifstream doc(source_dir() + "/docs/stats-reference.md");
  std::string line;
  std::vector<std::string> files;
  bool in_table = false;
  while (std::getline(doc, line)) {
    if (line.rfind("| file | contents |", 0) == 0)
      in_table = true;
    else if (in_table && line.rfind("| ", 0) != 0 && line.rfind("|-", 0) != 0)
      break;
    else if (in_table && line.rfind("| ", 0) == 0)
      files.push_back(line.substr(2, line.find(" |", 2) - 2));
  }
  ASSERT_GE(files.size(), 6u);
  const auto r = ipusim("run --help");
  ASSERT_EQ(r.status, 0);
  for (const auto& f : files) EXPECT_NE(r.out.find(f), std::string::npos) << f;
  // compile lowers every model family and inference too, not only two training steps.
  const auto top = ipusim("--help");
  EXPECT_EQ(top.out.find("ResNet-50 or BERT-Large training step"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("training or inference step"), std::string::npos) << top.out;
}

}  // namespace
}  // namespace ipusim::testing
