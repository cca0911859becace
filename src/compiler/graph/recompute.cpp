// SPDX-License-Identifier: Apache-2.0
#include "recompute.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ipusim/util/error.hpp"

namespace ipusim::compiler::graph {

std::vector<Segment> segments(const std::vector<Block>& nodes,
                              const std::vector<std::string>& checkpoints) {
  std::vector<Segment> out;
  std::size_t first = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (std::find(checkpoints.begin(), checkpoints.end(), nodes[i].layer) != checkpoints.end()) {
      out.emplace_back(first, i + 1);
      first = i + 1;
    }
  if (first < nodes.size()) out.emplace_back(first, nodes.size());
  return out;
}

void check_checkpoints(const ModelDef& m, const RunConfig& run) {
  for (const auto& c : run.checkpoints)
    if (std::none_of(m.layers.begin(), m.layers.end(), [&](const Layer& l) { return l.name == c; }))
      throw ConfigError(fmt::format("{}: '{}' is not a layer of {}",
                                    key_at(run, "run.recompute_checkpoints"), c, m.file));
}

}  // namespace ipusim::compiler::graph
