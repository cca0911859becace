// SPDX-License-Identifier: Apache-2.0
// The 2048^3 half matmul of the foundation issue: what it reports, analytic bounds, and
// what-if directions (fewer tiles, fewer AMP engines, the Bow clock).
#include <gtest/gtest.h>

#include "cli_harness.hpp"

namespace ipusim::testing {
namespace {

struct MatmulRun {
  double cycles = 0;
  double seconds = 0;
  double flop_rate = 0;
  std::string stats;
  std::string summary;
};

MatmulRun run_matmul(const std::string& chip_args) {
  TempDir dir;
  const std::string trace = dir.file("mm.trace");
  const auto k = ipusim("kernel matmul --m 2048 --n 2048 --k 2048 --dtype half " + chip_args +
                        " --out " + trace);
  EXPECT_EQ(k.status, 0) << k.err;
  const auto r = ipusim("run " + chip_args + " --out " + dir.file("out") + " " + trace);
  EXPECT_EQ(r.status, 0) << r.err;
  MatmulRun m;
  m.stats = read_all(dir.file("out/stats.json"));
  m.summary = r.out;
  m.cycles = json_value_after(m.stats, "\"total\"");
  // "total": {"cycles": {...}, "time": {...}}: the first "time" after "total".
  m.seconds = json_value_after(m.stats.substr(m.stats.find("\"total\"")), "\"time\"");
  m.flop_rate = json_value_after(m.stats, "\"flop_rate\"");
  return m;
}

const MatmulRun& gc200() {
  static const MatmulRun run = run_matmul("--chip " + chip_file("gc200"));
  return run;
}

TEST(Matmul2048, ReportsTotalsSplitAndTileMemory) {
  const MatmulRun& m = gc200();
  for (const char* key : {"\"total\"", "\"compute\"", "\"sync\"", "\"exchange\"", "\"memory\"",
                          "\"worst_tiles\"", "\"flop_rate\"", "\"identity\""})
    EXPECT_NE(m.stats.find(key), std::string::npos) << key;
  for (const char* word :
       {"total", "compute", "sync", "exchange", "tile mem", "achieved", "the gap"})
    EXPECT_NE(m.summary.find(word), std::string::npos) << word << "\n" << m.summary;
  // 2 x 2048^3 FLOP in the reported time, plus the partial-sum additions of the split-K
  // reduction (at most 2048 x 2048 x 15 more).
  const double flops = m.flop_rate * m.seconds;
  EXPECT_GE(flops, 2.0 * 2048 * 2048 * 2048 * (1 - 1e-9));
  EXPECT_LE(flops, 2.0 * 2048 * 2048 * 2048 + 2048.0 * 2048 * 15);
}

TEST(Matmul2048, StaysUnderThePeak) {
  const MatmulRun& m = gc200();
  // §5: at most 64 MAC/cycle/tile x 1472 tiles: 2 x 2048^3 / (64 x 1472) = 182,361 MAC-cycles.
  EXPECT_GT(m.cycles, 2.0 * 2048 * 2048 * 2048 / 2 / (64.0 * 1472));
  EXPECT_LT(m.flop_rate, 250e12);
  EXPECT_GT(m.flop_rate, 50e12);  // a sensible mapping is not pathologically slow
}

TEST(Matmul2048, HalfTheTilesIsAboutTwiceAsSlow) {
  const MatmulRun half = run_matmul("--set chip.tiles=736");
  const double ratio = half.cycles / gc200().cycles;
  EXPECT_GT(ratio, 1.6);
  EXPECT_LT(ratio, 2.3);
}

TEST(Matmul2048, HalfTheAmpEnginesIsMuchSlower) {
  const MatmulRun half = run_matmul("--set chip.amp.engines_half_half=8");
  const double ratio = half.cycles / gc200().cycles;
  // Compute is about 70% of the time and doubles; exchange does not change.
  EXPECT_GT(ratio, 1.4);
  EXPECT_LT(ratio, 2.3);
}

TEST(Matmul2048, BowIsFasterByTheClockRatio) {
  const MatmulRun bow = run_matmul("--chip " + chip_file("bow"));
  // Same design, so the same cycles; time scales by 1.325 / 1.85.
  EXPECT_EQ(bow.cycles, gc200().cycles);
  EXPECT_NEAR(bow.seconds / gc200().seconds, 1.325 / 1.85, 1e-6);
}

}  // namespace
}  // namespace ipusim::testing
