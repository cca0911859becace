// SPDX-License-Identifier: Apache-2.0
// Plans made ahead of need on a second thread (docs/performance.md "Plans made ahead"). A plan
// is a pure function of the chip, the conv and the budget (plan_conv), so a plan made early,
// on any thread, is the plan the compiler would have made when it needed it: traces do not
// change. The CNN lowering asks for each forward conv's data- and weight-gradient plans while
// it lowers the forward pass; the backward pass then takes them, waiting for one in progress
// or making one not yet started itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "ipusim/plan/cache.hpp"
#include "ipusim/plan/conv.hpp"

namespace ipusim::plan {

class PlanPrefetcher {
 public:
  // With `store`, plans are read from it when there and stored when searched (plan/cache.hpp).
  explicit PlanPrefetcher(const ChipSpec& chip,
                          std::shared_ptr<const PlanStore> store = plan_store());
  // Pending requests are dropped; the one in progress finishes first.
  ~PlanPrefetcher();
  PlanPrefetcher(const PlanPrefetcher&) = delete;
  PlanPrefetcher& operator=(const PlanPrefetcher&) = delete;

  // Plans `args` within `budget` bytes per tile on the second thread, under `key` (the
  // caller's name for the planned conv); a key already requested is ignored.
  void request(const std::string& key, const ConvArgs& args, std::uint64_t budget);
  // The plan requested under (key, budget): made on this thread if not started, waited for if
  // in progress; plan_conv's error, if it failed, is thrown here. nullopt if never requested.
  std::optional<ConvPlan> take(const std::string& key, std::uint64_t budget);

 private:
  struct Job {
    ConvArgs args;
    std::uint64_t budget = 0;
    std::atomic<bool> claimed{false};  // by whichever thread plans it
    std::promise<ConvPlan> promise;
    std::shared_future<ConvPlan> result;
  };
  void run(Job& job) const;
  void work();

  const ChipSpec& chip_;
  std::shared_ptr<const PlanStore> store_;
  ChipKey chip_key_;  // with a store
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::map<std::pair<std::string, std::uint64_t>, std::shared_ptr<Job>> jobs_;
  bool stop_ = false;
  std::thread worker_;  // started by the first request
};

}  // namespace ipusim::plan
