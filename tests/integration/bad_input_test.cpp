// SPDX-License-Identifier: Apache-2.0
// Each bad input gives one clear error line naming the file and key, line or offset, and a
// non-zero exit status (docs/errors.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_harness.hpp"

namespace ipusim::testing {
namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A copy of gc200.yaml with `from` replaced by `to`.
std::string edited_chip(const TempDir& dir, const std::string& from, const std::string& to) {
  std::string text = read_all(chip_file("gc200"));
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos);
  text.replace(pos, from.size(), to);
  const std::string path = dir.file("chip.yaml");
  write(path, text);
  return path;
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(BadInput, UnknownConfigKey) {
  TempDir dir;
  const std::string chip = edited_chip(dir, "  clock: 1.325GHz", "  clok: 1.325GHz");
  const auto r = ipusim("info --chip " + chip);
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.err, "error: " + chip + ":8:3: chip.clok: unknown key (did you mean chip.clock?)\n");
  EXPECT_EQ(r.out, "");
}

TEST(BadInput, BadUnit) {
  TempDir dir;
  const std::string chip = edited_chip(dir, "clock: 1.325GHz", "clock: 1.325GB");
  const auto r = ipusim("validate " + chip);
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(
      r.err,
      "error: " + chip +
          ":8:10: chip.clock: expected a frequency such as \"1.325GHz\", found \"1.325GB\"\n");
}

TEST(BadInput, BadUnitOnTheCommandLine) {
  const auto r = ipusim("info --set chip.exchange.bytes_per_cycle=4GB/s");
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_NE(r.err.find("chip.exchange.bytes_per_cycle: expected a rate such as \"4B/cycle\""),
            std::string::npos)
      << r.err;
}

TEST(BadInput, NegativeSize) {
  TempDir dir;
  const std::string chip = edited_chip(dir, "tile_memory: 624KiB", "tile_memory: -1KiB");
  const auto r = ipusim("info --chip " + chip);
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_NE(r.err.find(chip + ":10:16: chip.tile_memory:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not negative"), std::string::npos) << r.err;
}

TEST(BadInput, NegativeSizeInATrace) {
  TempDir dir;
  const std::string trace = dir.file("neg.trace");
  write(trace,
        "ipusim-trace 1\nname neg\nipu 0\ntensor t kind=weight dtype=half tiles=0..3 bytes=-8\n"
        "program\nend\n");
  const auto r = ipusim("run " + trace);
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_NE(r.err.find(trace + ":4:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("-8"), std::string::npos) << r.err;
}

TEST(BadInput, TruncatedBinaryTrace) {
  TempDir dir;
  const std::string full = dir.file("mm.itb");
  ASSERT_EQ(ipusim("kernel matmul --m 128 --n 128 --k 128 --out " + full).status, 0);
  std::string bytes = read_all(full);
  const std::string cut = dir.file("cut.itb");
  write(cut, bytes.substr(0, bytes.size() / 2));
  const auto r = ipusim("run " + cut);
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_NE(r.err.find(cut + "@"), std::string::npos) << r.err;
}

TEST(BadInput, TileOutOfMemory) {
  TempDir dir;
  const std::string trace = dir.file("oom.trace");
  write(trace,
        "ipusim-trace 1\nname oom\nipu 0\n"
        "tensor weights kind=weight dtype=half tiles=0..1471 bytes=400000\n"
        "tensor acts kind=activation dtype=half tiles=5..5 bytes=300000\n"
        "program\nend\n");
  const auto r = ipusim("run " + trace);
  EXPECT_EQ(r.status, 4);
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_NE(r.err.find("out of memory on tile 5"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("largest tensors: weights 390.62 KiB, acts 292.97 KiB"), std::string::npos)
      << r.err;
  // validate reports the same without simulating, with run's status (well formed, does not fit).
  const auto v = ipusim("validate " + trace);
  EXPECT_EQ(v.status, 4);
  EXPECT_NE(v.err.find("out of memory on tile 5"), std::string::npos) << v.err;
}

TEST(BadInput, SmallerTileMemoryMakesTheMatmulPlanFail) {
  // The planner cannot map 2048^3 onto 64 tiles of 16 KiB: a clear error, no crash.
  const auto r = ipusim(
      "kernel matmul --m 2048 --n 2048 --k 2048 --set chip.tiles=64 "
      "--set chip.tile_memory=16KiB --out /dev/null");
  EXPECT_EQ(r.status, 4);
  EXPECT_NE(r.err.find("no tile mapping fits"), std::string::npos) << r.err;
}

TEST(BadInput, MissingTraceFile) {
  const auto r = ipusim("run /nonexistent/x.trace");
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("/nonexistent/x.trace"), std::string::npos) << r.err;
}

TEST(BadInput, FailedRunLeavesNoStats) {
  TempDir dir;
  const std::string trace = dir.file("oom.trace");
  write(trace,
        "ipusim-trace 1\nname oom\nipu 0\ntensor w kind=weight dtype=half tiles=0..0 bytes=700000\n"
        "program\nend\n");
  const auto r = ipusim("run --out " + dir.file("out") + " " + trace);
  EXPECT_NE(r.status, 0);
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/stats.json")));
}

// Issue 31, item 4: `ipusim validate` checks every kind of file by its own schema. Every shipped
// chip, system, part, run config, model, sweep spec and suite is accepted (it used to read every
// YAML file as a chip config and reject all but the chips); a wrong key in each kind is an error
// naming file:line and the key; a YAML file of no known kind says what it expected.
TEST(BadInput, ValidateChecksEachKindOfFileByItsOwnSchema) {
  std::vector<std::string> shipped;
  for (const std::string dir : {"configs/chips", "configs/systems", "configs/parts", "configs/runs",
                                "configs/sweeps", "models"})
    for (const auto& e : std::filesystem::directory_iterator(source_dir() + "/" + dir))
      if (e.path().extension() == ".yaml") shipped.push_back(e.path().string());
  shipped.push_back(source_dir() + "/tests/regression/suite.yaml");
  std::string all;
  for (const auto& f : shipped) all += " " + f;
  const auto ok = ipusim("validate" + all);
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(lines(ok.out), static_cast<int>(shipped.size()));
  for (const char* kind :
       {"(chip ", "(system ", "(system part ", "(run ", "(model ", "(sweep ", "(suite "})
    EXPECT_NE(ok.out.find(kind), std::string::npos) << kind;

  TempDir dir;
  const std::string s = source_dir();
  const auto edit = [&](const std::string& name, const std::string& from_file,
                        std::vector<std::pair<std::string, std::string>> edits) {
    std::string text = read_all(s + "/" + from_file);
    for (const auto& [from, to] : edits) {
      for (auto pos = text.find(from); pos != std::string::npos;
           pos = text.find(from, pos + to.size()))
        text.replace(pos, from.size(), to);
    }
    write(dir.file(name), text);
    return dir.file(name);
  };
  const struct {
    std::string file, expected;
  } cases[] = {
      {edit("chip.yaml", "configs/chips/gc200.yaml", {{"  clock: 1.325GHz", "  clok: 1.325GHz"}}),
       ":8:3: chip.clok: unknown key (did you mean chip.clock?)"},
      {edit("part.yaml", "configs/parts/m2000.yaml", {{"  ipus: 4 ", "  ipu: 4 "}}),
       ":6:3: machine.ipu: unknown key"},
      {edit("system.yaml", "configs/systems/pod16.yaml",
            {{"../", s + "/configs/"}, {"system:\n", "system:\n  rakcs: 1\n"}}),
       ":4:3: system.rakcs: unknown key (did you mean system.racks?)"},
      {edit("run.yaml", "tests/data/workloads/resnet_tiny-pod16.yaml",
            {{"model: resnet_tiny.yaml", "model: " + s + "/tests/data/workloads/resnet_tiny.yaml"},
             {"../../../", s + "/"},
             {"run:\n", "run:\n  replicsa: 4\n"}}),
       ":3:3: run.replicsa: unknown key (did you mean run.replicas?)"},
      {edit("model.yaml", "tests/data/workloads/resnet_tiny.yaml",
            {{"kernel: 3, stride: 1}", "kernel: 3, stirde: 1}"}}),
       ": unknown key (did you mean 'stride'?)"},
      {edit("sweep.yaml", "configs/sweeps/scaling.yaml", {{"\ndescription:", "\ndescriptoin:"}}),
       ":7:1: sweep: expected one of the keys format, name, description, base, axes, combine, "
       "exclude, found unknown key 'descriptoin' (did you mean 'description'?)"},
      {edit("suite.yaml", "tests/regression/suite.yaml",
            {{"\ngoldens: golden", "\ngoldnes: golden"}}),
       ": suite: expected one of the keys format, name, description, goldens, defaults, cases, "
       "found unknown key 'goldnes' (did you mean 'goldens'?)"},
  };
  for (const auto& c : cases) {
    const auto r = ipusim("validate " + c.file);
    EXPECT_EQ(r.status, 3) << c.file;
    EXPECT_EQ(r.err.rfind("error: " + c.file + ":", 0), 0u) << r.err;  // file:line first
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
  }
  write(dir.file("other.yaml"), "widget:\n  a: 1\n");
  const auto other = ipusim("validate " + dir.file("other.yaml"));
  EXPECT_EQ(other.status, 3);
  EXPECT_NE(other.err.find("not a file ipusim knows: expected a top-level key chip, system, "
                           "machine, fabric, run or model, or format: ipusim-sweep/1 or "
                           "ipusim-suite/1; found the keys widget"),
            std::string::npos)
      << other.err;
}

}  // namespace
}  // namespace ipusim::testing
