// SPDX-License-Identifier: Apache-2.0
// The plan cache (docs/performance.md "A plan cache"): conv and matmul plans kept on disk, so
// that a compile whose convs were planned before, in any process, reads them instead of
// searching again. A plan is a pure function of the chip, the planned conv and the budget
// (plan_conv, plan_fully_connected), so a stored plan is the plan the search returns.
//
// Key: the text of every input, compared whole when an entry is read (a hash only names the
// file): the entry format, kPlannerVersion, the identity of the planner's sources (a hash of
// src/ and include/ of the plan library and the libraries it links: plan, cost, tile, trace,
// config, util), every ChipSpec member, every ConvArgs member of each planned conv and the
// budget in bytes. The members are listed through structured bindings, so a member added to
// ChipSpec, ConvArgs or ConvPlan fails to compile until the cache lists it.
//
// Files: <folder>/<2 hex digits>/<16 hex digits>.plan, one plan (or a fully connected layer's
// three) each: the key, the plan and an FNV-1a checksum of both. Written to a temporary in the
// same folder and renamed into place, so readers see a whole entry or none; concurrent
// processes writing the same entry write the same bytes. A missing entry is planned; an entry
// that does not parse or whose checksum fails is reported (spdlog warning), planned and
// rewritten. Bounded: after each write, a folder of more than kPlansPerFolder entries loses its
// least recently used quarter (reads refresh an entry's time at most hourly), so the cache
// holds at most 256 x kPlansPerFolder = 16,384 plans (each 1-2 KB, one 4 KiB file-system block:
// at most 64 MiB on disk).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/plan/conv.hpp"

namespace ipusim::plan {

// Bump when the planner's results change without its sources changing (its sources' identity
// is in the key too, where the build has one).
inline constexpr std::uint32_t kPlannerVersion = 1;
// Entries per folder before the least recently used are evicted.
inline constexpr std::size_t kPlansPerFolder = 64;

// The part of every key a compile shares: format, planner version and identity, and the chip.
struct ChipKey {
  std::string text;
};
ChipKey chip_key(const ChipSpec& chip);
// The whole key of a conv's plan, and of a fully connected layer's three plans.
std::string conv_key(const ChipKey& chip, const ConvArgs& args, std::uint64_t budget);
std::string fully_connected_key(const ChipKey& chip, const ConvArgs& fwd, const ConvArgs& bwd,
                                const ConvArgs& wu, std::uint64_t budget);

class PlanStore {
 public:
  explicit PlanStore(std::filesystem::path folder);
  const std::filesystem::path& folder() const { return folder_; }

  // plan_conv(chip, args, budget), read from the store if there, else searched and stored.
  // A search that fails (nothing fits) throws as plan_conv does and stores nothing.
  ConvPlan plan_conv(const ChipSpec& chip, const ChipKey& key, const ConvArgs& args,
                     std::uint64_t budget) const;
  // plan_fully_connected likewise.
  FcPlans plan_fully_connected(const ChipSpec& chip, const ChipKey& key, const ConvArgs& fwd,
                               const ConvArgs& bwd, const ConvArgs& wu, std::uint64_t budget) const;

  // Entries read, searched (and written), and found corrupted, since construction.
  std::uint64_t hits() const { return hits_; }
  std::uint64_t misses() const { return misses_; }
  std::uint64_t corrupted() const { return corrupted_; }

  // The entry file of key text `key` (tests corrupt it).
  std::filesystem::path entry_path(const std::string& key) const;

 private:
  // The value stored under `key`, or nullopt (missing, or corrupted: warned).
  std::optional<std::string> read(const std::string& key) const;
  void write(const std::string& key, const std::string& value) const;
  void evict(const std::filesystem::path& dir) const;

  std::filesystem::path folder_;
  mutable std::atomic<std::uint64_t> hits_{0}, misses_{0}, corrupted_{0};
  mutable std::atomic<bool> write_failed_{false};  // warned once
};

// The process's store, used by every compile (IpuBuilder, PlanPrefetcher); null (the default)
// plans without one. The ipusim binary sets it from --no-plan-cache, IPUSIM_PLAN_CACHE and
// default_plan_cache_folder() before it compiles.
void set_plan_store(std::shared_ptr<const PlanStore> store);
std::shared_ptr<const PlanStore> plan_store();

// Logs (info) what the process's store did: "plan cache FOLDER: N plan(s) read, M searched and
// stored"; nothing without a store.
void log_plan_store_use();

// $XDG_CACHE_HOME/ipusim/plans if XDG_CACHE_HOME is an absolute path, else
// $HOME/.cache/ipusim/plans; nullopt when neither is set.
std::optional<std::filesystem::path> default_plan_cache_folder();
// IPUSIM_PLAN_CACHE set to "off", "0", "false" or "no" turns the cache off.
bool plan_cache_disabled_by_environment();

}  // namespace ipusim::plan
