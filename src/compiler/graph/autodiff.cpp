// SPDX-License-Identifier: Apache-2.0
#include "autodiff.hpp"

#include <fmt/format.h>

#include <set>

#include "ipusim/util/error.hpp"

namespace ipusim::compiler::graph {

std::vector<GradientStep> gradient_flow(const ModelDef& m, const std::vector<LayerNode>& nodes) {
  std::vector<GradientStep> steps(nodes.size());
  std::set<std::string> reached;  // layer outputs some later layer's gradient goes into
  for (std::size_t i = nodes.size(); i-- > 0;) {
    const LayerNode& n = nodes[i];
    const Layer& l = *n.layer;
    if (l.op != Op::kSoftmaxLoss && !reached.contains(l.name))
      throw ConfigError(fmt::format(
          "{}: layer '{}': no gradient reaches it in training: no later layer reads its output "
          "(every layer of a trained CNN leads to its softmax_loss; read it with `input:` or "
          "`other:`, or remove it)",
          l.at.empty() ? m.file : l.at, l.name));
    GradientStep& s = steps[i];
    s.data_gradient = i != 0;
    s.weight_gradient = info(l.op).weights != Weights::kNone;
    if (!l.other.empty()) s.into.push_back(l.other);
    if (s.data_gradient) s.into.push_back(n.input);
    reached.insert(s.into.begin(), s.into.end());
  }
  return steps;
}

}  // namespace ipusim::compiler::graph
