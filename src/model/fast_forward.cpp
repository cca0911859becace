// SPDX-License-Identifier: Apache-2.0
#include "ipusim/model/fast_forward.hpp"

#include <algorithm>
#include <limits>

namespace ipusim::model {
namespace {

// Cuts elsewhere after which a tracked place that has not come back is given up (the loops
// being the same, every place in the innermost body comes back once per iteration).
constexpr std::uint64_t kPatience = 1 << 14;

bool same_loops(const std::vector<CutState>& a, const std::vector<CutState>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].loops != b[i].loops) return false;
  return true;
}

bool same_place(const std::vector<CutState>& a, const std::vector<CutState>& b) {
  if (!same_loops(a, b)) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].step != b[i].step) return false;
  return true;
}

}  // namespace

std::optional<Skip> SteadyState::cut(
    std::uint64_t time, std::vector<CutState> parties,
    const std::function<void(std::size_t, std::vector<std::uint64_t>&)>& counters,
    std::uint64_t limit) {
  const bool here = old_ && same_place(old_->parties, parties);
  if (!here) {
    // Track this place instead when nothing is tracked, the loops changed (a loop began or
    // ended somewhere) or the tracked place has not come back for long.
    if (old_ && same_loops(old_->parties, parties) && ++since_ < kPatience) return std::nullopt;
    older_.reset();
    old_.reset();
  }
  since_ = 0;
  Cut now{time, std::move(parties)};
  for (std::size_t i = 0; i < now.parties.size(); ++i) counters(i, now.parties[i].counters);
  if (older_) {
    if (auto skip = steady(*older_, *old_, now, limit)) {
      older_.reset();
      old_.reset();
      return skip;
    }
  }
  older_ = std::move(old_);
  old_ = std::move(now);
  return std::nullopt;
}

std::optional<Skip> SteadyState::steady(const Cut& c0, const Cut& c1, const Cut& c2,
                                        std::uint64_t limit) const {
  const std::uint64_t period = c2.time - c1.time;
  if (c1.time <= c0.time || period != c1.time - c0.time || c2.time > limit) return std::nullopt;
  Skip skip;
  skip.cycles = period;
  std::uint64_t periods = (limit - c2.time) / period;  // the time stays within the limit
  bool looping = false;
  for (std::size_t i = 0; i < c2.parties.size(); ++i) {
    const CutState &a = c0.parties[i], &b = c1.parties[i], &c = c2.parties[i];
    if (a.relative != b.relative || b.relative != c.relative) return std::nullopt;
    if (a.counters.size() != c.counters.size() || b.counters.size() != c.counters.size())
      return std::nullopt;
    // Each period adds the same to every counter (modulo 2^64, as the sums themselves).
    std::vector<std::uint64_t> increase(c.counters.size());
    for (std::size_t k = 0; k < increase.size(); ++k) {
      increase[k] = c.counters[k] - b.counters[k];
      if (b.counters[k] - a.counters[k] != increase[k]) return std::nullopt;
    }
    skip.counters.push_back(std::move(increase));
    std::uint64_t step = 0;
    if (c.iterations != 0) {
      // The loop advances by the same number of iterations each period, and the skipped
      // periods end at this place of an iteration the loop still runs.
      step = c.iteration - b.iteration;
      if (b.iteration <= a.iteration || b.iteration - a.iteration != step ||
          c.iterations != a.iterations || c.iteration >= c.iterations)
        return std::nullopt;
      periods = std::min(periods, (c.iterations - 1 - c.iteration) / step);
      looping = true;
    }
    skip.iterations.push_back(step);
  }
  if (!looping || periods == 0) return std::nullopt;
  skip.periods = periods;
  return skip;
}

}  // namespace ipusim::model
