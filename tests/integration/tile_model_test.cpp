// SPDX-License-Identifier: Apache-2.0
// chip.tile_model=isa end to end: reference kernels timed by the instruction-level tile model
// (docs/tile-model.md), recorded in stats.json.
#include <gtest/gtest.h>

#include "cli_harness.hpp"

namespace ipusim::testing {
namespace {

std::string run_kernel(const TempDir& dir, const std::string& args, const std::string& sets) {
  const std::string trace = dir.file("k.trace");
  const auto k = ipusim("kernel " + args + sets + " --out " + trace);
  EXPECT_EQ(k.status, 0) << k.err;
  const auto r = ipusim("run --out " + dir.file("out") + sets + " " + trace);
  EXPECT_EQ(r.status, 0) << r.err;
  return read_all(dir.file("out/stats.json"));
}

double total_cycles(const std::string& stats) { return json_value_after(stats, "\"total\""); }

TEST(TileModelRun, ReluOnFourTilesCountedFromTheBundleProgram) {
  TempDir dir;
  // 1536 half per tile = 64 vectors per worker. Worker: 12 set-up + 64 x (load, 2 relu,
  // store, add, brnzdec) + 4 tail checks + exit = 401 bundles; run max(6 x 401, 2401 + 6
  // sync) = 2407; supervisor 12 + runall 6 + 2407 + 1 = 2426; + 12 compute-set overhead.
  const std::string stats = run_kernel(dir, "elementwise --op relu --n 6144",
                                       " --set chip.tiles=4 --set chip.tile_model=isa");
  EXPECT_NE(stats.find("\"tile_model\": \"isa\""), std::string::npos) << stats.substr(0, 600);
  EXPECT_EQ(total_cycles(stats), 2438.0);
}

TEST(TileModelRun, MatmulAndConvAgreeWithTheClosedFormWithinTenPercent) {
  for (const std::string args :
       {std::string("matmul --m 512 --n 512 --k 512 --dtype half"),
        std::string("conv2d --batch 4 --channels 64 --height 56 --width 56 "
                    "--filters 64 --kernel 3")}) {
    TempDir a, b;
    const std::string closed = run_kernel(a, args, "");
    const std::string isa = run_kernel(b, args, " --set chip.tile_model=isa");
    EXPECT_NE(closed.find("\"tile_model\": \"closed_form\""), std::string::npos);
    EXPECT_NEAR(total_cycles(isa) / total_cycles(closed), 1.0, 0.10) << args;
  }
}

}  // namespace
}  // namespace ipusim::testing

namespace ipusim::testing {
namespace {

TEST(TileModelRun, TheSummaryAndTheReportSayWhichModelTimedTheRun) {
  TempDir dir;
  const std::string trace = dir.file("k.trace");
  ASSERT_EQ(ipusim("kernel matmul --m 64 --n 64 --k 64 --out " + trace).status, 0);
  auto r = ipusim("run --set chip.tile_model=isa --out " + dir.file("isa") + " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("  tile model    instruction-level (chip.tile_model=isa"), std::string::npos)
      << r.out;
  ASSERT_EQ(ipusim("report " + dir.file("isa")).status, 0);
  EXPECT_NE(read_all(dir.file("isa/report.html")).find("instruction-level (chip.tile_model=isa)"),
            std::string::npos);
  r = ipusim("run --out " + dir.file("closed") + " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("tile model"), std::string::npos) << r.out;  // the default says nothing
  ASSERT_EQ(ipusim("report " + dir.file("closed")).status, 0);
  EXPECT_NE(read_all(dir.file("closed/report.html")).find("closed-form codelet models"),
            std::string::npos);
}

}  // namespace
}  // namespace ipusim::testing
