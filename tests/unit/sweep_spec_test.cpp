// SPDX-License-Identifier: Apache-2.0
// The sweep spec: expansion (product, zip, exclude), strict errors with file:line, point
// identities (equal inputs, equal ids; any changed input, a new id) and the CSV format.
#include <gtest/gtest.h>

#include "ipusim/sweep/point.hpp"
#include "ipusim/sweep/results.hpp"
#include "ipusim/sweep/spec.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::sweep {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_spec(text, "s.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kHead =
    "format: ipusim-sweep/1\nbase:\n  kernel: matmul\n  args: {m: 64, n: 64, k: 64}\n";

TEST(SweepSpec, ProductVariesTheLastAxisFastest) {
  const Spec s = parse_spec(
      kHead + "axes:\n  - chip.clock: [1GHz, 2GHz, 3GHz]\n  - chip.tiles: [736, 1472]\n", "s.yaml");
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0].label(), "chip.clock=1GHz, chip.tiles=736");
  EXPECT_EQ(points[1].label(), "chip.clock=1GHz, chip.tiles=1472");
  EXPECT_EQ(points[5].label(), "chip.clock=3GHz, chip.tiles=1472");
  EXPECT_EQ(points[5].index, 5u);
  EXPECT_EQ(points[0].line, 6);
  EXPECT_EQ(s.axis_keys(), (std::vector<std::string>{"chip.clock", "chip.tiles"}));
}

TEST(SweepSpec, ZipAndKeysWithinOneAxisPairValues) {
  const Spec s =
      parse_spec(kHead +
                     "combine: zip\naxes:\n  - chip.clock: [1GHz, 2GHz]\n    args.m: [64, 128]\n"
                     "  - chip.tiles: [736, 1472]\n",
                 "s.yaml");
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].label(), "chip.clock=1GHz, args.m=64, chip.tiles=736");
  EXPECT_EQ(points[1].label(), "chip.clock=2GHz, args.m=128, chip.tiles=1472");
}

TEST(SweepSpec, ExcludeDropsMatchingCombinationsAndRenumbers) {
  const Spec s = parse_spec(kHead +
                                "axes:\n  - chip.clock: [1GHz, 2GHz]\n  - chip.tiles: [736, 1472]\n"
                                "exclude:\n  - {chip.clock: 2GHz, chip.tiles: 736}\n",
                            "s.yaml");
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[2].label(), "chip.clock=2GHz, chip.tiles=1472");
  EXPECT_EQ(points[2].index, 2u);
}

TEST(SweepSpec, NoAxesIsOnePoint) {
  const auto points = expand(parse_spec(kHead, "s.yaml"));
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].label(), "base");
}

TEST(SweepSpec, ErrorsNameFileLineColumnAndKey) {
  EXPECT_EQ(error_of("format: ipusim-sweep/2\n"),
            "s.yaml:1:9: format: expected ipusim-sweep/1 (the only spec version this build reads), "
            "found \"ipusim-sweep/2\"");
  EXPECT_EQ(error_of(kHead + "axis:\n  - chip.clock: [1GHz]\n").substr(0, 61),
            "s.yaml:5:1: sweep: expected one of the keys format, name, des");
  EXPECT_NE(error_of(kHead + "axis:\n").find("unknown key 'axis' (did you mean 'axes'?)"),
            std::string::npos);
  EXPECT_NE(error_of(kHead + "axes:\n  - chip.tile_mem: [1KiB]\n")
                .find("s.yaml:6:5: axes[0]: expected a config key"),
            std::string::npos);
  EXPECT_NE(error_of(kHead + "axes:\n  - chip.tile_mem: [1KiB]\n")
                .find("did you mean 'chip.tile_memory'?"),
            std::string::npos);
  EXPECT_NE(error_of(kHead + "axes:\n  - chip.clock: [1GHz]\n    args.m: [1, 2]\n")
                .find("s.yaml:7:13: axes[0].args.m: expected 1 values (keys of one axis are "
                      "zipped), found 2"),
            std::string::npos);
  EXPECT_NE(error_of(kHead + "axes:\n  - chip.clock: [1GHz]\n  - chip.clock: [2GHz]\n")
                .find("s.yaml:7:5: axes[1]: key 'chip.clock' is already swept by another axis"),
            std::string::npos);
  EXPECT_NE(error_of(kHead + "axes:\n  - run: [resnet50-pod16]\n")
                .find("expected 'run' only with a base run"),
            std::string::npos);
  EXPECT_NE(
      error_of(kHead + "axes:\n  - chip.clock: [1GHz]\nexclude:\n  - {chip.clok: 1GHz}\n")
          .find("s.yaml:8:6: exclude[0]: expected an axis key (chip.clock), found 'chip.clok'"),
      std::string::npos);
  EXPECT_NE(error_of(kHead + "combine: cartesian\n").find("combine: expected product or zip"),
            std::string::npos);
  EXPECT_NE(error_of("format: ipusim-sweep/1\nbase: {kernel: matmul, run: resnet50-pod16}\n")
                .find("base: expected exactly one of kernel or run, found both"),
            std::string::npos);
  EXPECT_NE(error_of("format: ipusim-sweep/1\nbase: {kernel: matmul, set: [chip.clok=1GHz]}\n")
                .find("did you mean 'chip.clock'?"),
            std::string::npos);
  EXPECT_NE(error_of("format: ipusim-sweep/1\nbase: {kernel: matmul}\naxes: [[1]]\n")
                .find("axes[0]: expected a map of KEY: [values]"),
            std::string::npos);
}

TEST(SweepPoint, IdentityFollowsTheResolvedInputs) {
  const Spec s = parse_spec(
      kHead + "axes:\n  - chip.clock: [1.5GHz, 1500MHz, 1.6GHz]\n  - args.m: [64, 128]\n",
      "s.yaml");
  const auto points = expand(s);
  std::vector<PointPlan> plans;
  for (const auto& p : points) plans.push_back(plan_point(s, p));
  // 1.5GHz and 1500MHz resolve to the same config: the same point.
  EXPECT_EQ(plans[0].id, plans[2].id);
  EXPECT_NE(plans[0].id, plans[4].id);  // another clock
  EXPECT_NE(plans[0].id, plans[1].id);  // another kernel argument
  EXPECT_EQ(plans[0].id.size(), 16u);
  EXPECT_EQ(plans[0].workload, "matmul");
  EXPECT_EQ(plans[0].ipus, 1u);
  // Planning twice gives the same id.
  EXPECT_EQ(plan_point(s, points[0]).id, plans[0].id);
  // The job: kernel with the chip.* overrides and the argument, then run --out the work dir.
  const auto job = point_job(plans[1], "/bin/ipusim", "/w");
  ASSERT_EQ(job.steps.size(), 2u);
  const auto& k = job.steps[0];
  EXPECT_EQ(k[1], "kernel");
  EXPECT_NE(std::find(k.begin(), k.end(), "chip.clock=1.5GHz"), k.end());
  const auto m = std::find(k.begin(), k.end(), "--m");
  ASSERT_NE(m, k.end());
  EXPECT_EQ(*(m + 1), "128");
  EXPECT_EQ(job.steps[1].back(), "/w/kernel.itb");
}

TEST(SweepPoint, WorkloadPointsTakeTheRunsSystemAndCountItsIpus) {
  const Spec s = parse_spec(
      "format: ipusim-sweep/1\nbase: {run: resnet50-pod16}\ncombine: zip\naxes:\n"
      "  - run: [resnet50-pod16, resnet50-pod64]\n    system: [pod16, pod64]\n",
      "s.yaml");
  const auto points = expand(s);
  const PointPlan a = plan_point(s, points[0]), b = plan_point(s, points[1]);
  EXPECT_EQ(a.ipus, 16u);
  EXPECT_EQ(b.ipus, 64u);
  EXPECT_EQ(a.workload, "ResNet-50-v1.5");
  EXPECT_NE(a.id, b.id);
}

TEST(SweepPoint, BadValuesNameThePoint) {
  const Spec s = parse_spec(kHead + "axes:\n  - chip.clock: [1GHz, fast]\n", "s.yaml");
  const auto points = expand(s);
  EXPECT_NO_THROW(plan_point(s, points[0]));
  try {
    plan_point(s, points[1]);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("s.yaml:6: point 1 (chip.clock=fast): ", 0), 0u)
        << e.what();
  }
}

TEST(SweepResults, CsvQuotesAndKeepsNumbersAsWritten) {
  PointResult ok;
  ok.id = "00000000000000aa";
  ok.values = {{"chip.clock", "1GHz"}};
  ok.ok = true;
  ok.workload = "matmul";
  ok.system = "GC200";
  ok.cycles = "1000";
  ok.step_time_s = "9.9999999999999995e-07";
  ok.breakdown_s.values.fill("0.0");
  ok.peak_tile_memory_b = "474912";
  ok.tile_memory_b = "638976";
  PointResult bad = ok;
  bad.peak_tile_memory_b = bad.tile_memory_b = "";
  bad.index = 1;
  bad.ok = false;
  bad.error = "out of memory on tile 3, \"big\"";
  bad.cycles = bad.step_time_s = "";
  bad.breakdown_s.values.fill("");
  const std::string csv = sweep_csv({"chip.clock"}, {ok, bad});
  EXPECT_EQ(
      csv,
      "index,id,chip.clock,status,workload,system_name,ipus,cycles,step_time_s,throughput,"
      "throughput_unit,global_batch,global_batch_unit,time_to_train_s,compute_s,"
      "sync_s,exchange_s,host_s,streaming_s,external_sync_s,waiting_s,inter_ipu_s,collective_"
      "s,flop_utilisation,peak_tile_memory_B,tile_memory_B,"
      "error\n"
      "0,00000000000000aa,1GHz,ok,matmul,GC200,1,1000,9.9999999999999995e-07,,,,,,0.0,0.0,0.0,"
      "0.0,0.0,0.0,0.0,0.0,"
      "0.0,,474912,638976,\n"
      "1,00000000000000aa,1GHz,failed,matmul,GC200,1,,,,,,,,,,,,,,,,,,,,\"out of memory on "
      "tile 3, \"\"big\"\"\"\n");
  // A workload point's global batch and time to train are columns too, and read back.
  PointResult wl = ok;
  wl.throughput = "256000";
  wl.throughput_unit = "images/s";
  wl.samples_per_step = "256";
  wl.samples_unit = "images";
  wl.time_to_train_s = "0.25";
  EXPECT_NE(sweep_csv({}, {wl}).find(",256000,images/s,256,images,0.25,"), std::string::npos);
  EXPECT_EQ(sweep_csv({}, {parse_point_record(point_record(wl), "p.json")}), sweep_csv({}, {wl}));
  // A record reads back to the same row.
  const PointResult back = parse_point_record(point_record(ok), "p.json");
  EXPECT_EQ(sweep_csv({}, {back}), sweep_csv({}, {ok}));
  EXPECT_EQ(point_error("log\nerror: a/w/x.itb: bad\n", "fallback", "a/w", "points/1"),
            "points/1/x.itb: bad");
  EXPECT_EQ(point_error("", "fallback", "a/w", "points/1"), "fallback");
}

}  // namespace
}  // namespace ipusim::sweep
