// SPDX-License-Identifier: Apache-2.0
#include "lifetimes.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace ipusim::compiler::graph {

std::vector<KeptTensor> kept_tensors(const std::vector<Block>& nodes, const Consumers& consumers,
                                     const std::vector<Segment>& segments, const Body& body,
                                     std::uint64_t offset) {
  std::vector<KeptTensor> out;
  if (body.steps == 0) return out;
  const auto& spans = body.spans;
  // Positions of body steps [begin, end) (an empty span: its place; within the body).
  const auto at = [&](std::size_t i) { return offset + std::min(i, body.steps - 1); };
  const auto live = [&](std::size_t begin, std::size_t end) {
    return trace::Lifetime{at(begin), std::max(at(begin), at(end > begin ? end - 1 : begin))};
  };
  static const std::vector<std::size_t> kNone;
  const auto readers = [&](const std::string& name) -> const std::vector<std::size_t>& {
    const auto it = consumers.find(name);
    return it == consumers.end() ? kNone : it->second;
  };
  const auto used_until = [&](const std::string& name, std::size_t own, bool backward) {
    std::size_t end = own;
    for (std::size_t j : readers(name))
      end = std::max(end, backward ? spans[j].bwd.second : spans[j].fwd.second);
    return end;
  };
  const auto first_gradient = [&](const std::string& name) {
    std::size_t begin = body.steps;
    for (std::size_t j : readers(name)) begin = std::min(begin, spans[j].bwd.first);
    return begin;
  };
  if (body.images_at)
    out.push_back({"input_images", trace::TensorKind::kActivation, "",
                   live(*body.images_at, used_until("", 0, true))});
  std::set<std::size_t> checkpoints;
  for (const auto& [first, last] : segments)
    if (last < nodes.size()) checkpoints.insert(last - 1);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string& name = nodes[i].layer;
    const Spans& sp = spans[i];
    if (checkpoints.count(i) != 0) {
      out.push_back({"checkpoint/" + name, trace::TensorKind::kActivation, name,
                     live(sp.fwd.first, used_until(name, sp.bwd.second, true))});
    } else if (info(nodes[i].kind).keeps_output) {
      if (sp.recomputed) {
        out.push_back({"activation/" + name, trace::TensorKind::kActivation, name,
                       live(sp.fwd.first, used_until(name, sp.fwd.second, false))});
        out.push_back({"recomputed/" + name, trace::TensorKind::kActivation, name,
                       live(sp.rec.first, used_until(name, sp.bwd.second, true))});
      } else {
        out.push_back({"activation/" + name, trace::TensorKind::kActivation, name,
                       live(sp.fwd.first, used_until(name, sp.bwd.second, true))});
      }
    }
    if (!readers(name).empty())
      out.push_back({"gradient/" + name, trace::TensorKind::kGradient, name,
                     live(first_gradient(name), sp.bwd.second)});
  }
  return out;
}

}  // namespace ipusim::compiler::graph
