// SPDX-License-Identifier: Apache-2.0
// Each bad input gives one clear error line naming the file and key, line or offset, and a
// non-zero exit status (docs/errors.md).
#include <gtest/gtest.h>

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
  // validate reports the same without simulating.
  const auto v = ipusim("validate " + trace);
  EXPECT_EQ(v.status, 3);
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

}  // namespace
}  // namespace ipusim::testing
