// SPDX-License-Identifier: Apache-2.0
#include "ipusim/plan/program_parts.hpp"

#include <utility>

#include "ipusim/cost/codelet_models.hpp"

namespace ipusim::plan {

void add_reduction(const ChipSpec& chip, trace::IpuProgram& program, trace::ComputeSet cs,
                   const std::string& second_name, std::vector<trace::Step>& steps) {
  namespace sl = trace::slot;
  trace::ComputeSet second{second_name, {}};
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
  const auto add = [&](trace::ComputeSet c) {
    program.compute_sets.push_back(std::move(c));
    steps.push_back(make_step(trace::StepKind::kCompute,
                              static_cast<std::uint32_t>(program.compute_sets.size() - 1)));
  };
  add(std::move(cs));
  if (second.vertices.empty()) return;
  steps.push_back(make_step(trace::StepKind::kSync));
  add(std::move(second));
}

}  // namespace ipusim::plan
