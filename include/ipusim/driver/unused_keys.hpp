// SPDX-License-Identifier: Apache-2.0
// The --set keys a finished run did not use: the resources they describe carried nothing in
// it (no data crossed an IPU-Link, no AMP vertex read float weights). A key that takes effect
// only on what a run uses is then said, never silently kept (issue 55, part 1); the keys a
// system or chip never reads are said when they are loaded (LoadedSystem::warnings).
#pragma once

#include <string>
#include <vector>

#include "ipusim/config/system.hpp"
#include "ipusim/stats/run_stats.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::driver {

// "--set KEY has no effect: why" for each of `overrides` (KEY=VALUE) whose resource `stats`
// and `trace` show unused; `system` is null for a single chip. A key the system's own warnings
// already name (links of a one-IPU or one-rack system) is not named again.
std::vector<std::string> unused_by_run(const std::vector<std::string>& overrides,
                                       const ChipSpec& chip, const SystemSpec* system,
                                       const trace::Trace& trace, const RunStats& stats);

}  // namespace ipusim::driver
