// SPDX-License-Identifier: Apache-2.0
// The plan cache (include/ipusim/plan/cache.hpp): stored plans are the plans the search returns,
// a changed input is another key, corrupted entries are planned again and rewritten, and each
// folder stays within its bound. Every test uses its own temporary folder.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ipusim/plan/cache.hpp"
#include "ipusim/plan/conv.hpp"
#include "test_chips.hpp"

namespace ipusim::plan {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kBudget = 624 * 1024 - 10240;

class PlanCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ipusim-plan-cache-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

ConvArgs conv(std::uint64_t chans, std::uint64_t size) {
  ConvArgs a;
  a.batch = 4;
  a.in_chans = chans;
  a.out_chans = chans;
  a.height = a.width = size;
  a.kernel = 3;
  return a;
}

ConvArgs matmul(std::uint64_t m, std::uint64_t n, std::uint64_t k) {
  ConvArgs a;
  a.height = m;
  a.out_chans = n;
  a.in_chans = k;
  a.matmul = true;
  return a;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST_F(PlanCacheTest, AStoredPlanIsThePlanTheSearchReturns) {
  const ChipSpec chip = testing::gc200_by_hand();
  const ChipKey key = chip_key(chip);
  const PlanStore store(dir_);
  for (const ConvArgs& a : {conv(64, 56), conv(256, 14), matmul(512, 1024, 768)}) {
    const ConvPlan searched = plan_conv(chip, a, kBudget);
    EXPECT_EQ(store.plan_conv(chip, key, a, kBudget), searched);            // searched and stored
    EXPECT_EQ(store.plan_conv(chip, key, a, kBudget), searched);            // read
    EXPECT_EQ(PlanStore(dir_).plan_conv(chip, key, a, kBudget), searched);  // another process
  }
  EXPECT_EQ(store.misses(), 3u);
  EXPECT_EQ(store.hits(), 3u);
  EXPECT_EQ(store.corrupted(), 0u);
}

TEST_F(PlanCacheTest, AFullyConnectedLayersPlansAreStoredWhole) {
  const ChipSpec chip = testing::gc200_by_hand();
  const ChipKey key = chip_key(chip);
  ConvArgs f = matmul(1024, 1024, 4096), d = matmul(1024, 4096, 1024), w = matmul(4096, 1024, 1024);
  d.transposed_weights = true;
  w.transposed_input = true;
  const FcPlans searched = plan_fully_connected(chip, f, d, w, kBudget);
  const PlanStore store(dir_);
  EXPECT_EQ(store.plan_fully_connected(chip, key, f, d, w, kBudget), searched);
  EXPECT_EQ(store.plan_fully_connected(chip, key, f, d, w, kBudget), searched);
  EXPECT_EQ(store.hits(), 1u);
}

// Every input is in the key: another chip parameter, budget or conv member is another entry.
TEST_F(PlanCacheTest, AnyChangedInputIsAnotherKey) {
  const ChipSpec chip = testing::gc200_by_hand();
  ChipSpec other = chip;
  other.exchange.column_hop_latency = Cycles{2};
  ChipSpec renamed = chip;
  renamed.clock = Frequency{1.85e9};
  const ConvArgs a = conv(64, 28);
  ConvArgs partials = a;
  partials.partials = trace::DType::kFloat;
  ConvArgs load = a;
  load.coeff_load_bits = 128;
  const std::string base = conv_key(chip_key(chip), a, kBudget);
  for (const std::string& k :
       {conv_key(chip_key(other), a, kBudget), conv_key(chip_key(renamed), a, kBudget),
        conv_key(chip_key(chip), a, kBudget / 2), conv_key(chip_key(chip), partials, kBudget),
        conv_key(chip_key(chip), load, kBudget)})
    EXPECT_NE(k, base);
  EXPECT_NE(base.find(fmt::format("planner {} ", kPlannerVersion)), std::string::npos) << base;
}

TEST_F(PlanCacheTest, ACorruptedEntryIsPlannedAgainAndRewritten) {
  const ChipSpec chip = testing::gc200_by_hand();
  const ChipKey key = chip_key(chip);
  const ConvArgs a = conv(128, 28);
  const ConvPlan searched = plan_conv(chip, a, kBudget);
  const fs::path entry = PlanStore(dir_).entry_path(conv_key(key, a, kBudget));
  (void)PlanStore(dir_).plan_conv(chip, key, a, kBudget);
  const std::string good = read(entry);
  ASSERT_FALSE(good.empty());
  const std::string damaged_plan = [&] {
    std::string s = good;
    s[s.find("row_split=") + 10] = 'x';  // the plan's text changed, its checksum not
    return s;
  }();
  for (const std::string& bad :
       {good.substr(0, good.size() / 2), std::string(), std::string("garbage\n\x01\x02"),
        damaged_plan, good.substr(0, good.size() - 1)}) {
    std::ofstream(entry, std::ios::binary | std::ios::trunc) << bad;
    const PlanStore store(dir_);
    EXPECT_EQ(store.plan_conv(chip, key, a, kBudget), searched);
    EXPECT_EQ(store.corrupted(), 1u);
    EXPECT_EQ(read(entry), good);  // rewritten
  }
}

// A folder over its bound keeps its most recently used three quarters, the new entry among them.
TEST_F(PlanCacheTest, AFolderOverItsBoundLosesItsLeastRecentlyUsed) {
  const ChipSpec chip = testing::gc200_by_hand();
  const ChipKey key = chip_key(chip);
  const ConvArgs a = conv(32, 14);
  const PlanStore store(dir_);
  const fs::path entry = store.entry_path(conv_key(key, a, kBudget));
  fs::create_directories(entry.parent_path());
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(48);
  for (std::size_t i = 0; i < kPlansPerFolder + 10; ++i) {
    const fs::path p = entry.parent_path() / fmt::format("{:016x}.plan", i);
    std::ofstream(p) << "x\n";
    fs::last_write_time(p, old + std::chrono::seconds(i));
  }
  (void)store.plan_conv(chip, key, a, kBudget);
  std::size_t count = 0;
  for (const auto& e : fs::directory_iterator(entry.parent_path())) count += e.path() != entry;
  EXPECT_EQ(count + 1, kPlansPerFolder * 3 / 4);
  EXPECT_TRUE(fs::exists(entry));
  // The oldest went first.
  EXPECT_FALSE(fs::exists(entry.parent_path() / fmt::format("{:016x}.plan", 0)));
  EXPECT_TRUE(fs::exists(entry.parent_path() / fmt::format("{:016x}.plan", kPlansPerFolder + 9)));
}

TEST_F(PlanCacheTest, AnUnwritableFolderPlansWithoutKeeping) {
  const ChipSpec chip = testing::gc200_by_hand();
  const fs::path file = dir_ / "a-file";
  std::ofstream(file) << "not a folder\n";
  const PlanStore store(file / "plans");
  const ConvArgs a = conv(64, 14);
  EXPECT_EQ(store.plan_conv(chip, chip_key(chip), a, kBudget), plan_conv(chip, a, kBudget));
  EXPECT_EQ(store.misses(), 1u);
}

TEST(PlanCacheFolder, FollowsXdgCacheHomeThenHome) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved = xdg ? xdg : "";
  ::setenv("XDG_CACHE_HOME", "/some/cache", 1);
  EXPECT_EQ(default_plan_cache_folder(), fs::path("/some/cache/ipusim/plans"));
  ::setenv("XDG_CACHE_HOME", "relative", 1);  // not absolute: ignored, as the spec says
  const char* home = std::getenv("HOME");
  if (home && *home) {
    EXPECT_EQ(default_plan_cache_folder(), fs::path(home) / ".cache/ipusim/plans");
  }
  if (xdg) {
    ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_CACHE_HOME");
  }
}

}  // namespace
}  // namespace ipusim::plan
