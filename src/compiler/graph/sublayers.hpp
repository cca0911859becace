// SPDX-License-Identifier: Apache-2.0
// The sub-layers of a transformer (docs/workloads.md, "Transformers"), one table row each, and
// the sub-layers each IPU of a pipelined replica runs. A transformer is a chain of sub-layers:
// the embedding, `layers` attention and FFN sub-layers, the final layer norm of a pre-norm
// model and the heads; the run's pipeline placement cuts the chain into stages. As with
// graph::Op, a sub-layer without its row fails a static_assert and one without its lowering
// fails to compile (the lowering switches over it with no default).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::compiler::graph {

enum class SubLayer : std::uint8_t {
  kEmbedding,
  kAttention,
  kFfn,
  kFinalNorm,
  kHeads,
  kCount,  // not a sub-layer: the number of them
};
inline constexpr std::size_t kSubLayerCount = static_cast<std::size_t>(SubLayer::kCount);

struct SubLayerInfo {
  SubLayer kind;
  std::string_view name;  // its layer name in provenance ("encoder<i>/" + name when numbered)
  bool numbered;          // one per encoder layer
  trace::OpKind op;       // the provenance op its scope gives (kNone: each step's own)
};

inline constexpr std::array<SubLayerInfo, kSubLayerCount> kSubLayers{{
    {SubLayer::kEmbedding, "embedding", false, trace::OpKind::kEmbedding},
    {SubLayer::kAttention, "attention", true, trace::OpKind::kNone},
    {SubLayer::kFfn, "ffn", true, trace::OpKind::kNone},
    {SubLayer::kFinalNorm, "final_norm", false, trace::OpKind::kNone},
    {SubLayer::kHeads, "heads", false, trace::OpKind::kNone},
}};

constexpr bool sublayer_rows_complete() {
  for (std::size_t i = 0; i < kSubLayerCount; ++i)
    if (kSubLayers[i].kind != static_cast<SubLayer>(i) || kSubLayers[i].name.empty()) return false;
  return true;
}
static_assert(sublayer_rows_complete(), "graph::kSubLayers needs one row per graph::SubLayer");

constexpr const SubLayerInfo& info(SubLayer s) { return kSubLayers[static_cast<std::size_t>(s)]; }

// One sub-layer of a stage, with the name its steps carry ("encoder3/attention").
struct Block {
  SubLayer kind;
  std::string layer;
  bool operator==(const Block&) const = default;
};

// The sub-layers IPU `ipu` of a replica runs, in forward order: the embedding on IPU 0; its
// placement's attention and FFN sub-layers, numbered over the whole model, alternating while
// both last; the final norm of a pre-norm model on the last IPU; the heads with the embedding
// (tied) or, for a classifier, on the last IPU.
std::vector<Block> stage_blocks(const ModelDef& m, const RunConfig& run, std::uint32_t ipu);

}  // namespace ipusim::compiler::graph
