// SPDX-License-Identifier: Apache-2.0
#include "stages.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "ipusim/util/error.hpp"

namespace ipusim::compiler::graph {

std::vector<Segment> pipeline_stages(const std::vector<LayerNode>& nodes, const ModelDef& m,
                                     const RunConfig& run) {
  const auto bad = [&](const std::string& what) {
    return ConfigError(fmt::format("{}: run.pipeline_splits: {}", run.file, what));
  };
  if (run.pipeline_splits.size() + 1 != run.ipus_per_replica)
    throw bad(fmt::format(
        "a CNN replica of {} IPU(s) runs {} pipeline stage(s), so {} split(s) (each a layer "
        "that begins a stage); found {}",
        run.ipus_per_replica, run.ipus_per_replica, run.ipus_per_replica - 1,
        run.pipeline_splits.size()));
  std::vector<Segment> out;
  std::size_t first = 0;
  for (const auto& name : run.pipeline_splits) {
    const auto it = std::find_if(nodes.begin(), nodes.end(),
                                 [&](const LayerNode& n) { return n.layer->name == name; });
    if (it == nodes.end()) throw bad(fmt::format("'{}' is not a layer of {}", name, m.file));
    const auto at = static_cast<std::size_t>(it - nodes.begin());
    if (at == 0)
      throw bad(fmt::format("'{}' is the first layer: the first stage would be empty", name));
    if (at <= first)
      throw bad(
          fmt::format("'{}' comes before or at the previous split '{}': splits are "
                      "listed in model order",
                      name, nodes[first].layer->name));
    out.emplace_back(first, at);
    first = at;
  }
  out.emplace_back(first, nodes.size());
  return out;
}

std::vector<std::size_t> crossing(const std::vector<LayerNode>& nodes, std::size_t boundary) {
  std::map<std::string, std::size_t> producer;
  for (std::size_t i = 0; i < boundary && i < nodes.size(); ++i) producer[nodes[i].layer->name] = i;
  std::vector<std::size_t> out;
  const auto read = [&](const std::string& name) {
    const auto it = producer.find(name);
    if (it != producer.end() && std::find(out.begin(), out.end(), it->second) == out.end())
      out.push_back(it->second);
  };
  for (std::size_t i = boundary; i < nodes.size(); ++i) {
    read(nodes[i].input);
    read(nodes[i].layer->other);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::uint64_t crossing_elements(const std::vector<LayerNode>& nodes, std::size_t boundary) {
  std::uint64_t n = 0;
  for (const std::size_t p : crossing(nodes, boundary)) n += nodes[p].out.elements();
  return n;
}

}  // namespace ipusim::compiler::graph
