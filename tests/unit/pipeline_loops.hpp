// SPDX-License-Identifier: Apache-2.0
// What the compiler tests read of a pipelined program.
#pragma once

#include <cstdint>
#include <vector>

#include "ipusim/trace/program.hpp"

namespace ipusim::testing {

// The repeat counts of a program's pipeline loops: the top-level loops that end with the
// cycle's inter-IPU copy (the weight update's loops over equal tensors have none).
inline std::vector<std::uint64_t> pipeline_loop_counts(const trace::IpuProgram& p) {
  std::vector<std::uint64_t> counts;
  for (const auto& s : p.steps)
    if (s.kind == trace::StepKind::kRepeat && !s.body.empty() &&
        s.body.back().kind == trace::StepKind::kGlobalExchange)
      counts.push_back(s.count);
  return counts;
}

}  // namespace ipusim::testing
