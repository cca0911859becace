// SPDX-License-Identifier: Apache-2.0
#include "ipusim/compiler/graph/op.hpp"

#include <string>

namespace ipusim::compiler::graph {

std::optional<Op> op_named(std::string_view name) {
  for (const OpInfo& row : kOps)
    if (row.family == Family::kCnn && row.name == name) return row.op;
  return std::nullopt;
}

const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const OpInfo& row : kOps)
      if (row.family == Family::kCnn) out.emplace_back(row.name);
    return out;
  }();
  return names;
}

}  // namespace ipusim::compiler::graph
