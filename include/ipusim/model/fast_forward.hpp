// SPDX-License-Identifier: Apache-2.0
// Exact fast-forward of repeated loop iterations (docs/architecture.md, "Fast-forward").
//
// A repeat loop whose body has group steps or background host transfers runs iteration by
// iteration (its timing depends on other IPUs or overlaps its iterations). The model is
// deterministic: once the whole state of everything taking part is the same at two cuts,
// relative to each cut's time and apart from the statistics and the loops' iteration
// counters, the simulation from the second cut repeats what it did from the first, period
// after period, until a loop ends. SteadyState looks for that in a sequence of cuts and says
// how many periods can be accounted by multiplication.
//
// A cut is a moment where every party's state is known and stable: for the fast engine,
// the release of a group step that every simulated IPU takes part in (the parties are those
// IPUs and the Fabric), or, when one IPU alone is simulated, the start of an iteration of a
// loop with no group step (the party is that IPU).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace ipusim::model {

// One party's state at a cut.
struct CutState {
  // Where the party is in its program: the loops it runs iteration by iteration (their steps'
  // addresses and every outer loop's iteration), then the step it is at. Cuts are only
  // compared at the same place; a change of `loops` starts the search afresh.
  std::vector<std::uint64_t> loops;
  std::uint64_t step = 0;
  // Everything else that decides what happens next, relative to the cut's time (e.g. how
  // long ago the party arrived, how much longer a link or a background transfer is busy):
  // must be equal at the cuts compared.
  std::vector<std::uint64_t> relative;
  // Its statistics so far (filled only when the cut is kept): each period adds the same.
  std::vector<std::uint64_t> counters;
  // The innermost loop run iteration by iteration: the iteration under way and the loop's
  // count (both 0 for a party with no loop, the Fabric).
  std::uint64_t iteration = 0, iterations = 0;
};

// Periods to account by multiplication, proved by three cuts at the same place one period
// apart with the same relative state and the same increases.
struct Skip {
  std::uint64_t periods = 0;
  std::uint64_t cycles = 0;  // one period
  // Per party, in the cut's order: one period's increase of each counter and of the
  // innermost loop's iteration.
  std::vector<std::vector<std::uint64_t>> counters;
  std::vector<std::uint64_t> iterations;
};

class SteadyState {
 public:
  // A cut at `time` (cycles) with `parties` (counters left empty); `counters(i, out)` fills
  // party i's counters and is called only for cuts that are kept. Returns the periods to skip
  // (then the search starts afresh), at most as many as keep every party's innermost loop
  // from ending and the time within `limit`.
  std::optional<Skip> cut(
      std::uint64_t time, std::vector<CutState> parties,
      const std::function<void(std::size_t, std::vector<std::uint64_t>&)>& counters,
      std::uint64_t limit);
  // Forgets every cut: what happened since the last one may not repeat.
  void reset() {
    older_.reset();
    old_.reset();
  }

 private:
  struct Cut {
    std::uint64_t time = 0;
    std::vector<CutState> parties;
  };
  std::optional<Skip> steady(const Cut& c0, const Cut& c1, const Cut& c2,
                             std::uint64_t limit) const;

  std::optional<Cut> older_, old_;  // the last two cuts at the tracked place
  std::uint64_t since_ = 0;         // cuts elsewhere since the tracked place last came
};

}  // namespace ipusim::model
