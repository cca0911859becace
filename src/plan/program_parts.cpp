// SPDX-License-Identifier: Apache-2.0
#include "ipusim/plan/program_parts.hpp"

#include <utility>

#include "ipusim/cost/codelet_models.hpp"

namespace ipusim::plan {

trace::ComputeSet split_scalar_reductions(const ChipSpec& chip, trace::ComputeSet& cs,
                                          std::string name) {
  namespace sl = trace::slot;
  trace::ComputeSet second{std::move(name), {}};
  for (trace::Vertex& v : cs.vertices) {
    if (v.codelet != trace::Codelet::kReduce || v.params[sl::kReduceOutputs] != 1) continue;
    const auto op = static_cast<trace::Op>(v.params[sl::kReduceOp]);
    const auto in = static_cast<trace::DType>(v.params[sl::kReduceIn]);
    const auto inputs = static_cast<std::uint64_t>(v.params[sl::kReduceInputs]);
    if (inputs < 2) continue;
    const std::uint64_t pieces = cost::scalar_reduce_split(chip, op, in, inputs);
    if (pieces < 2) continue;
    v.params[sl::kReduceFirstStage] = 1;
    trace::Vertex s = v;
    s.params[sl::kReduceIn] = v.params[sl::kReduceOut];
    s.params[sl::kReduceInputs] = static_cast<std::int64_t>(pieces);
    s.params[sl::kReduceFirstStage] = 0;
    second.vertices.push_back(s);
  }
  return second;
}

}  // namespace ipusim::plan
