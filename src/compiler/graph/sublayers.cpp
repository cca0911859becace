// SPDX-License-Identifier: Apache-2.0
#include "sublayers.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ipusim::compiler::graph {

namespace {

// The IPUs of a replica in the order the model's layers run through them: 0, 1, ..., p - 1; with
// the heads tied to the embedding on IPU 0 of a pipeline, IPU 0's layers are the model's last
// (they run with the heads, after IPU p - 1): 1, ..., p - 1, 0.
std::vector<std::uint32_t> chain_order(const ModelDef& m, std::uint32_t ipus) {
  const bool tied_last = ipus > 1 && !m.head_on_last_ipu();
  std::vector<std::uint32_t> order;
  for (std::uint32_t i = tied_last ? 1 : 0; i < ipus; ++i) order.push_back(i);
  if (tied_last) order.push_back(0);
  return order;
}

// The first attention and FFN sub-layer IPU `ipu` holds: those of the IPUs before it in the
// chain order.
std::pair<std::uint64_t, std::uint64_t> first_sub_layers(const ModelDef& m, const RunConfig& run,
                                                         std::uint32_t ipu) {
  std::uint64_t attn0 = 0, ffn0 = 0;
  for (const std::uint32_t j : chain_order(m, static_cast<std::uint32_t>(run.placement.size()))) {
    if (j == ipu) break;
    attn0 += run.placement[j].first;
    ffn0 += run.placement[j].second;
  }
  return {attn0, ffn0};
}

// The last IPU in the chain order that holds a sub-layer (the last IPU when none does).
std::uint32_t last_with_layers(const ModelDef& m, const RunConfig& run) {
  const auto ipus = static_cast<std::uint32_t>(run.placement.size());
  std::uint32_t out = ipus - 1;
  for (const std::uint32_t j : chain_order(m, ipus))
    if (run.placement[j].first + run.placement[j].second > 0) out = j;
  return out;
}

}  // namespace

std::vector<Block> stage_blocks(const ModelDef& m, const RunConfig& run, std::uint32_t ipu) {
  const auto ipus = static_cast<std::uint32_t>(run.placement.size());
  const bool first = ipu == 0, last = ipu + 1 == ipus;
  const auto [attn0, ffn0] = first_sub_layers(m, run, ipu);
  const auto [n_attn, n_ffn] = run.placement[ipu];
  std::vector<Block> out;
  const auto add = [&](Op kind, std::uint64_t index = 0) {
    const OpInfo& row = info(kind);
    out.push_back({kind, row.numbered ? fmt::format("encoder{}/{}", index, row.name)
                                      : std::string(row.name)});
  };
  if (first) add(Op::kEmbedding);
  // In the model's order: layer j's attention, then its FFN.
  const std::uint64_t end = std::max(attn0 + n_attn, ffn0 + n_ffn);
  for (std::uint64_t j = std::min(attn0, ffn0); j < end; ++j) {
    if (j >= attn0 && j < attn0 + n_attn) add(Op::kAttention, j);
    if (j >= ffn0 && j < ffn0 + n_ffn) add(Op::kFfn, j);
  }
  // The final norm follows the model's last layer: on the last IPU of the chain that holds
  // any (IPU 0 with tied heads when it holds layers).
  if (m.pre_norm && ipu == last_with_layers(m, run)) add(Op::kFinalNorm);
  if (m.head_on_last_ipu() ? last : first) add(Op::kHeads);
  return out;
}

void check_stage_chain(const ModelDef& m, const RunConfig& run) {
  // Sub-layer k of the chain: layer k / 2's attention (k even) or FFN (k odd).
  std::uint64_t next = 0;
  for (const std::uint32_t ipu : chain_order(m, static_cast<std::uint32_t>(run.placement.size()))) {
    const auto [attn0, ffn0] = first_sub_layers(m, run, ipu);
    const auto [n_attn, n_ffn] = run.placement[ipu];
    if (n_attn + n_ffn == 0) continue;
    // Its sub-layers are chain positions 2j (attention j) and 2j + 1 (FFN j): contiguous from
    // where the IPU before it in the chain stopped.
    const std::uint64_t from = n_attn == 0  ? 2 * ffn0 + 1
                               : n_ffn == 0 ? 2 * attn0
                                            : std::min(2 * attn0, 2 * ffn0 + 1);
    const std::uint64_t to =
        std::max(n_attn == 0 ? 0 : 2 * (attn0 + n_attn) - 1, n_ffn == 0 ? 0 : 2 * (ffn0 + n_ffn));
    if (from != next || to - from != n_attn + n_ffn)
      throw ConfigError(fmt::format(
          "{}: run.pipeline_placement: IPU {} must hold the next sub-layers of the model's chain "
          "(layer 0's attention, its FFN, layer 1's attention, ...; the IPUs taken {}), from "
          "number {} on, without gaps; found {} attention and {} FFN sub-layers spanning numbers "
          "{} "
          "to {}",
          run.file, ipu,
          m.head_on_last_ipu() || run.placement.size() == 1 ? "in order"
                                                            : "in order from IPU 1, IPU 0 last",
          next, n_attn, n_ffn, from, to - 1));
    next = to;
  }
}

}  // namespace ipusim::compiler::graph
