// SPDX-License-Identifier: Apache-2.0
// The plan cache through the ipusim binary (include/ipusim/plan/cache.hpp, docs/performance.md
// "A plan cache"): results byte-identical with the cache off, cold and warm, for every shipped
// run config; concurrent compiles and sweeps sharing one cache folder; corrupted entries
// reported, planned again and rewritten. Every test points XDG_CACHE_HOME at its own temporary
// folder, never the user's cache.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_harness.hpp"

namespace ipusim::testing {
namespace {

namespace fs = std::filesystem;

// Runs ipusim with XDG_CACHE_HOME = `cache` (the plan cache in `cache`/ipusim/plans).
CommandResult with_cache(const std::string& cache, const std::string& args) {
  ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  ::unsetenv("IPUSIM_PLAN_CACHE");
  return ipusim(args);
}

// The shipped run configs' file names (configs/runs/*.yaml), sorted.
std::vector<std::string> run_configs() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(source_dir() + "/configs/runs"))
    if (e.path().extension() == ".yaml") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> entries(const std::string& cache) {
  std::vector<fs::path> out;
  const fs::path plans = fs::path(cache) / "ipusim" / "plans";
  if (!fs::exists(plans)) return out;
  for (const auto& e : fs::recursive_directory_iterator(plans))
    if (e.path().extension() == ".plan") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Compiles `run` with the cache off, cold and warm (its own cache folder) and expects the same
// trace bytes; a warm compile searches nothing.
void expect_same_traces(const TempDir& dir, const std::string& run) {
  const std::string name = fs::path(run).stem().string();
  const std::string cache = dir.file(name + "-cache");
  const std::string off = dir.file("off.itb"), cold = dir.file("cold.itb"),
                    warm = dir.file("warm.itb");
  const auto r0 = with_cache(cache, "compile -q --no-plan-cache --run " + run + " --out " + off);
  ASSERT_EQ(r0.status, 0) << name << ": " << r0.err;
  EXPECT_TRUE(entries(cache).empty()) << name << ": --no-plan-cache wrote plans";
  const auto r1 = with_cache(cache, "compile -q --run " + run + " --out " + cold);
  ASSERT_EQ(r1.status, 0) << name << ": " << r1.err;
  EXPECT_FALSE(entries(cache).empty()) << name << ": a cold compile kept no plan";
  const auto r2 = with_cache(cache, "compile -q --log-level info --run " + run + " --out " + warm);
  ASSERT_EQ(r2.status, 0) << name << ": " << r2.err;
  EXPECT_NE(r2.err.find(", 0 searched"), std::string::npos) << name << ": " << r2.err;
  const std::string expected = read_all(off);
  EXPECT_FALSE(expected.empty());
  EXPECT_TRUE(read_all(cold) == expected) << name << ": the cold cache's trace differs";
  EXPECT_TRUE(read_all(warm) == expected) << name << ": the warm cache's trace differs";
  fs::remove_all(cache);
}

// Every shipped run config compiles to the same trace with the plan cache off, cold and warm
// (one test per config).
class PlanCacheRunConfig : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanCacheRunConfig, CompilesToTheSameTraceOffColdAndWarm) {
  TempDir dir;
  expect_same_traces(dir, source_dir() + "/configs/runs/" + GetParam());
}

INSTANTIATE_TEST_SUITE_P(Shipped, PlanCacheRunConfig, ::testing::ValuesIn(run_configs()));

// A whole run (compile, simulate, every output of the run directory but the timings) is the
// same too, for a CNN, a pipelined transformer with fully connected passes planned jointly, and
// an inference run.
TEST(PlanCache, RunDirectoriesAreTheSameOffColdAndWarm) {
  TempDir dir;
  for (const char* name : {"resnet50-pod256", "bert-base-squad-pod16",
                           "efficientnet-b0-inference-m2000", "vit-b16-pod16"}) {
    const std::string run = source_dir() + "/configs/runs/" + name + ".yaml";
    const std::string cache = dir.file(std::string(name) + "-cache");
    std::vector<std::string> outs;
    for (const char* mode : {"off", "cold", "warm"}) {
      const std::string out = dir.file(std::string(name) + "-" + mode);
      const auto r = with_cache(
          cache, fmt_args("run -q ", mode == std::string("off") ? "--no-plan-cache " : "", "--run ",
                          run, " --out ", out));
      ASSERT_EQ(r.status, 0) << name << " " << mode << ": " << r.err;
      outs.push_back(out);
    }
    for (const char* file : {"stats.json", "plan.csv", "layers.csv", "supersteps.csv"}) {
      const std::string expected = read_all(outs[0] + "/" + file);
      EXPECT_FALSE(expected.empty()) << name << " " << file;
      EXPECT_TRUE(read_all(outs[1] + "/" + file) == expected) << name << " cold: " << file;
      EXPECT_TRUE(read_all(outs[2] + "/" + file) == expected) << name << " warm: " << file;
    }
  }
}

// Two processes compiling at once into one empty cache folder both succeed, with the trace of
// a compile without the cache, and leave whole entries a third compile reads.
TEST(PlanCache, ConcurrentCompilesShareOneCache) {
  TempDir dir;
  const std::string run = source_dir() + "/configs/runs/bert-base-squad-pod16.yaml";
  const std::string cache = dir.file("cache");
  ASSERT_EQ(
      with_cache(cache, "compile -q --no-plan-cache --run " + run + " --out " + dir.file("off.itb"))
          .status,
      0);
  ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  const std::string one = fmt_args(IPUSIM_BINARY, " compile -q --run ", run, " --out ");
  const std::string cmd =
      fmt_args("(", one, dir.file("a.itb"), "; echo $? >", dir.file("a.rc"), ") & (", one,
               dir.file("b.itb"), "; echo $? >", dir.file("b.rc"), ") & wait");
  ASSERT_EQ(system_bounded(cmd, 600), 0);
  EXPECT_EQ(read_all(dir.file("a.rc")), "0\n");
  EXPECT_EQ(read_all(dir.file("b.rc")), "0\n");
  const std::string expected = read_all(dir.file("off.itb"));
  EXPECT_TRUE(read_all(dir.file("a.itb")) == expected);
  EXPECT_TRUE(read_all(dir.file("b.itb")) == expected);
  const auto again =
      with_cache(cache, "compile -q --log-level info --run " + run + " --out " + dir.file("c.itb"));
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.err.find(", 0 searched"), std::string::npos) << again.err;
  EXPECT_EQ(again.err.find("corrupted"), std::string::npos) << again.err;
  EXPECT_TRUE(read_all(dir.file("c.itb")) == expected);
}

// Two sweeps at once into different folders, sharing the cache (points that change the chip
// and points that do not), write the same sweep.csv and sweep.json as a sweep without it.
TEST(PlanCache, ConcurrentSweepsShareOneCache) {
  TempDir dir;
  const std::string spec = dir.file("s.yaml");
  std::ofstream(spec) << "format: ipusim-sweep/1\n"
                         "name: plan-cache\n"
                         "base:\n"
                         "  run: resnet50-pod16\n"
                         "axes:\n"
                         "  - run.gradient_accumulation: [2, 4]\n"
                         "  - chip.clock: [1.325GHz, 1.85GHz]\n";
  const std::string cache = dir.file("cache");
  const auto off =
      with_cache(cache, "sweep -q --no-plan-cache --jobs 2 " + spec + " --out " + dir.file("off"));
  ASSERT_EQ(off.status, 0) << off.out << off.err;
  EXPECT_TRUE(entries(cache).empty()) << "--no-plan-cache reaches the points";
  const std::string one = fmt_args(IPUSIM_BINARY, " sweep -q --jobs 1 ", spec, " --out ");
  const std::string cmd =
      fmt_args("(", one, dir.file("a"), " >/dev/null; echo $? >", dir.file("a.rc"), ") & (", one,
               dir.file("b"), " >/dev/null; echo $? >", dir.file("b.rc"), ") & wait");
  ASSERT_EQ(system_bounded(cmd, 600), 0);
  EXPECT_EQ(read_all(dir.file("a.rc")), "0\n");
  EXPECT_EQ(read_all(dir.file("b.rc")), "0\n");
  EXPECT_FALSE(entries(cache).empty());
  for (const char* file : {"sweep.csv", "sweep.json"}) {
    const std::string expected = read_all(dir.file(std::string("off/") + file));
    ASSERT_FALSE(expected.empty()) << file;
    EXPECT_TRUE(read_all(dir.file(std::string("a/") + file)) == expected) << file;
    EXPECT_TRUE(read_all(dir.file(std::string("b/") + file)) == expected) << file;
  }
}

// A truncated entry and one of garbage are reported, planned again (the same trace) and
// rewritten, so the next compile reads them without a warning.
TEST(PlanCache, CorruptedEntriesAreReportedAndRebuilt) {
  TempDir dir;
  const std::string run = source_dir() + "/configs/runs/resnet50-pod16.yaml";
  const std::string cache = dir.file("cache");
  const std::string compile = "compile -q --run " + run + " --out ";
  ASSERT_EQ(with_cache(cache, compile + dir.file("cold.itb")).status, 0);
  const auto files = entries(cache);
  ASSERT_GE(files.size(), 2u);
  const std::string first = read_all(files[0].string());
  std::ofstream(files[0], std::ios::trunc) << first.substr(0, first.size() / 2);
  std::ofstream(files[1], std::ios::trunc) << "\x7f"
                                              "ELF garbage, not a plan\n";
  const auto r = with_cache(cache, compile + dir.file("repaired.itb"));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const auto& f : {files[0], files[1]})
    EXPECT_NE(r.err.find("[warning] plan cache: " + f.string() + " is corrupted"),
              std::string::npos)
        << r.err;
  EXPECT_TRUE(read_all(dir.file("repaired.itb")) == read_all(dir.file("cold.itb")));
  EXPECT_EQ(read_all(files[0].string()), first);  // rewritten whole
  const auto again = with_cache(cache, compile + dir.file("again.itb"));
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(again.err.find("corrupted"), std::string::npos) << again.err;
}

}  // namespace
}  // namespace ipusim::testing
