// SPDX-License-Identifier: Apache-2.0
#include "ipusim/plan/prefetch.hpp"

namespace ipusim::plan {

PlanPrefetcher::PlanPrefetcher(const ChipSpec& chip, std::shared_ptr<const PlanStore> store)
    : chip_(chip), store_(std::move(store)) {
  if (store_) chip_key_ = chip_key(chip_);
}

PlanPrefetcher::~PlanPrefetcher() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void PlanPrefetcher::run(Job& job) const {
  try {
    job.promise.set_value(store_ ? store_->plan_conv(chip_, chip_key_, job.args, job.budget)
                                 : plan_conv(chip_, job.args, job.budget));
  } catch (...) {
    job.promise.set_exception(std::current_exception());
  }
}

void PlanPrefetcher::request(const std::string& key, const ConvArgs& args, std::uint64_t budget) {
  {
    const std::lock_guard lock(mutex_);
    auto [it, added] = jobs_.try_emplace({key, budget});
    if (!added) return;
    auto job = std::make_shared<Job>();
    job->args = args;
    job->budget = budget;
    job->result = job->promise.get_future().share();
    it->second = job;
    queue_.push_back(std::move(job));
    if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  }
  wake_.notify_one();
}

std::optional<ConvPlan> PlanPrefetcher::take(const std::string& key, std::uint64_t budget) {
  std::shared_ptr<Job> job;
  {
    const std::lock_guard lock(mutex_);
    const auto it = jobs_.find({key, budget});
    if (it == jobs_.end()) return std::nullopt;
    job = it->second;
  }
  if (!job->claimed.exchange(true)) run(*job);
  return job->result.get();
}

void PlanPrefetcher::work() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!job->claimed.exchange(true)) run(*job);
  }
}

}  // namespace ipusim::plan
