// SPDX-License-Identifier: Apache-2.0
#include "pipeline.hpp"

#include <algorithm>

namespace ipusim::compiler {

std::vector<StageSlot> ipu_stages(const std::vector<std::uint32_t>& stage_ipus, std::uint32_t ipu,
                                  bool training) {
  const std::uint64_t loss = stage_ipus.size() - 1;
  std::vector<StageSlot> out;
  for (std::uint32_t s = 0; s < stage_ipus.size(); ++s) {
    if (stage_ipus[s] != ipu) continue;
    out.push_back({s, s, true, training && s == loss});
    if (training && s != loss) out.push_back({s, 2 * loss - s, false, true});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const StageSlot& a, const StageSlot& b) { return a.start < b.start; });
  return out;
}

trace::GlobalExchange pipeline_copies(const std::vector<trace::IpuCopy>& forward, bool training) {
  const trace::Provenance copy{{}, trace::Pass::kPipelineCopy, trace::OpKind::kCopy};
  trace::GlobalExchange out{training ? "stage_copies" : "stage_activations", forward, copy};
  if (training)
    for (const trace::IpuCopy& c : forward) out.copies.push_back({c.dst, c.src, c.bytes});
  return out;
}

Steps pipeline_loops(const std::vector<PipelineStage>& stages, std::uint64_t ga,
                     std::uint64_t cycles, bool copy) {
  std::vector<std::uint64_t> cuts{0, cycles};
  for (const PipelineStage& st : stages) {
    cuts.push_back(st.start);
    cuts.push_back(st.start + ga);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  Steps out;
  for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
    const std::uint64_t from = cuts[k], to = cuts[k + 1];
    trace::Step loop = make_step(trace::StepKind::kRepeat);
    loop.count = to - from;
    for (const PipelineStage& st : stages) {
      if (from < st.start || from >= st.start + ga) continue;
      loop.body.insert(loop.body.end(), st.steps.begin(), st.steps.end());
    }
    if (copy) loop.body.push_back(make_step(trace::StepKind::kGlobalExchange, 0));
    out.push_back(std::move(loop));
  }
  return out;
}

}  // namespace ipusim::compiler
