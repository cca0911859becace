// SPDX-License-Identifier: Apache-2.0
#include "sublayers.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ipusim::compiler::graph {

std::vector<Block> stage_blocks(const ModelDef& m, const RunConfig& run, std::uint32_t ipu) {
  const auto ipus = static_cast<std::uint32_t>(run.placement.size());
  const bool first = ipu == 0, last = ipu + 1 == ipus;
  std::uint32_t attn0 = 0, ffn0 = 0;  // the sub-layers on the IPUs before this one
  for (std::uint32_t j = 0; j < ipu; ++j) {
    attn0 += run.placement[j].first;
    ffn0 += run.placement[j].second;
  }
  const auto [n_attn, n_ffn] = run.placement[ipu];
  std::vector<Block> out;
  const auto add = [&](Op kind, std::uint32_t index = 0) {
    const OpInfo& row = info(kind);
    out.push_back({kind, row.numbered ? fmt::format("encoder{}/{}", index, row.name)
                                      : std::string(row.name)});
  };
  if (first) add(Op::kEmbedding);
  for (std::uint32_t i = 0; i < std::max(n_attn, n_ffn); ++i) {
    if (i < n_attn) add(Op::kAttention, attn0 + i);
    if (i < n_ffn) add(Op::kFfn, ffn0 + i);
  }
  if (last && m.pre_norm) add(Op::kFinalNorm);
  if (m.head_on_last_ipu() ? last : first) add(Op::kHeads);
  return out;
}

}  // namespace ipusim::compiler::graph
