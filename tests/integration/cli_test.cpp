// SPDX-License-Identifier: Apache-2.0
// End-to-end tests of the ipusim command line: each test runs the binary as a child process.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
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

TEST(Cli, ReportAndCompareHelpNameEverySectionTheyWrite) {
  // Issue 55, part 5: --help lists what a command really does. Each <h2> section of a run's
  // report (a compiled step's, with a comparison) is named by `report --help`: the phrase for
  // each heading is below, and a heading without one (a new section) fails until it has one.
  TempDir dir;
  const std::string run = source_dir() + "/tests/data/workloads/resnet_tiny-pod16.yaml";
  for (const char* out : {"a", "b"})
    ASSERT_EQ(ipusim(fmt_args("run -q --run ", run, " --out ", dir.file(out),
                              std::string(out) == "b" ? " --set chip.clock=1GHz" : ""))
                  .status,
              0);
  ASSERT_EQ(ipusim("report " + dir.file("b") + " --compare " + dir.file("a")).status, 0);
  const std::string html = read_all(dir.file("b/report.html"));
  const std::map<std::string, std::string> phrase = {
      {"Summary", "the summary"},
      {"Compared with", "the comparison"},
      {"Where the time goes", "where the time goes"},
      {"By layer", "time by layer and pass"},
      {"Plan", "the plan of each conv and matmul"},
      {"Roofline", "a roofline"},
      {"BSP timeline of one step", "a BSP timeline of one step"},
      {"Tiles", "per-tile"},
      {"Memory over the program", "memory over the program"},
      {"Top compute sets and exchanges", "the top compute sets and exchanges"},
      {"Longest supersteps", "the longest supersteps"},
  };
  std::string help = ipusim("report --help").out;
  for (char& c : help)
    if (c == '\n') c = ' ';
  std::size_t sections = 0;
  for (auto at = html.find("<h2"); at != std::string::npos; at = html.find("<h2", at + 1)) {
    const auto open = html.find('>', at) + 1;
    std::string heading = html.substr(open, html.find('<', open) - open);
    heading = heading.substr(0, heading.find(" ("));  // "Tiles (IPU 0)"
    if (heading.starts_with("Compared with")) heading = "Compared with";
    ++sections;
    const auto it = phrase.find(heading);
    if (it == phrase.end()) {
      ADD_FAILURE() << "report section '" << heading << "' has no phrase in this test";
      continue;
    }
    EXPECT_NE(help.find(it->second), std::string::npos) << it->second << "\n" << help;
  }
  EXPECT_GE(sections, 10u);
  std::string compare = ipusim("compare --help").out;
  for (char& c : compare)
    if (c == '\n') c = ' ';
  EXPECT_NE(compare.find("the plan changes of those layers' convs and matmuls"), std::string::npos)
      << compare;
  // The overview names the system kernels too.
  const std::string top = ipusim("--help").out;
  for (const char* kernel : {"link-p2p", "allreduce", "collective", "sync-loop"})
    EXPECT_NE(top.find(kernel), std::string::npos) << kernel;
}

}  // namespace
}  // namespace ipusim::testing
