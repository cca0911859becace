// SPDX-License-Identifier: Apache-2.0
#include "stages.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "autodiff.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler::graph {
namespace {

ConfigError split_error(const RunConfig& run, const std::string& what) {
  return ConfigError(fmt::format("{}: {}", key_at(run, "run.pipeline_splits"), what));
}

// A replica of P IPUs runs P stages: P - 1 splits (`replica` says what the replica is); with
// run.pipeline_ipus, one stage per IPU listed, every IPU of the replica listed and no two
// stages in a row on one IPU.
void check_split_count(const RunConfig& run, std::string_view replica) {
  if (!run.pipeline_ipus.empty()) {
    const auto bad = [&](const std::string& what) {
      return ConfigError(fmt::format("{}: {}", key_at(run, "run.pipeline_ipus"), what));
    };
    if (run.pipeline_ipus.size() != run.pipeline_splits.size() + 1)
      throw bad(fmt::format("{} split(s) make {} stage(s), each with an IPU; found {} IPU(s)",
                            run.pipeline_splits.size(), run.pipeline_splits.size() + 1,
                            run.pipeline_ipus.size()));
    if (run.pipeline_ipus.front() != 0)
      throw bad(fmt::format("the first stage (the host input's) runs on IPU 0; found IPU {}",
                            run.pipeline_ipus.front()));
    for (std::uint32_t ipu = 0; ipu < run.ipus_per_replica; ++ipu)
      if (std::find(run.pipeline_ipus.begin(), run.pipeline_ipus.end(), ipu) ==
          run.pipeline_ipus.end())
        throw bad(
            fmt::format("IPU {} of the replica's {} runs no stage", ipu, run.ipus_per_replica));
    for (std::size_t s = 1; s < run.pipeline_ipus.size(); ++s)
      if (run.pipeline_ipus[s] == run.pipeline_ipus[s - 1])
        throw bad(
            fmt::format("stages {} and {} both run on IPU {} (join them: drop the split "
                        "between them)",
                        s - 1, s, run.pipeline_ipus[s]));
    return;
  }
  if (run.pipeline_splits.size() + 1 != run.ipus_per_replica)
    throw split_error(run, fmt::format("{} of {} IPU(s) runs {} pipeline stage(s), so {} "
                                       "split(s) (each a layer that begins a stage); found {}",
                                       replica, run.ipus_per_replica, run.ipus_per_replica,
                                       run.ipus_per_replica - 1, run.pipeline_splits.size()));
}

// The IPU of stage `s` (run.pipeline_ipus, else s).
std::uint32_t stage_ipu(const RunConfig& run, std::size_t s) {
  return run.pipeline_ipus.empty() ? static_cast<std::uint32_t>(s) : run.pipeline_ipus.at(s);
}

}  // namespace

std::vector<Segment> pipeline_stages(const std::vector<LayerNode>& nodes, const ModelDef& m,
                                     const RunConfig& run) {
  const auto bad = [&](const std::string& what) { return split_error(run, what); };
  check_split_count(run, "a CNN replica");
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

namespace {

// A CNN trained differentiates from its loss: a softmax_loss last, and only there (a loss in
// the middle, or none, left layers without a gradient).
void check_loss_last(const ModelDef& m, const RunConfig& run) {
  if (run.inference) return;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const bool last = i + 1 == m.layers.size();
    if ((m.layers[i].op == Op::kSoftmaxLoss) != last)
      throw ConfigError(fmt::format(
          "{}: layer '{}': a CNN trained (run.mode training) ends with one softmax_loss layer, "
          "its last; {}",
          m.layers[i].at.empty() ? m.file : m.layers[i].at, m.layers[i].name,
          last ? fmt::format("found '{}' last", name(m.layers[i].op))
               : "found a softmax_loss before the last layer"));
  }
}

void check_placement(const ModelDef& m, const RunConfig& run) {
  if (run.placement.size() != run.ipus_per_replica)
    throw ConfigError(
        fmt::format("{}: run.pipeline_placement: a transformer needs a placement for each of "
                    "the {} IPUs of a replica",
                    run.file, run.ipus_per_replica));
  std::uint64_t attn = 0, ffn = 0;
  for (const auto& [a, f] : run.placement) {
    attn += a;
    ffn += f;
  }
  if (attn != m.encoder_layers || ffn != m.encoder_layers)
    throw ConfigError(
        fmt::format("{}: run.pipeline_placement places {} attention and {} FFN sub-layers; "
                    "{} has {} of each",
                    run.file, attn, ffn, m.file, m.encoder_layers));
  check_stage_chain(m, run);
}

ForwardStages cnn_stages(const ModelDef& m, const RunConfig& run) {
  check_checkpoints(m, run);
  check_loss_last(m, run);
  const std::vector<LayerNode> nodes = infer_shapes(m);
  if (!run.inference) (void)gradient_flow(m, nodes);  // every layer reaches the loss
  ForwardStages out;
  for (const auto& [first, last] : pipeline_stages(nodes, m, run)) {
    out.ipu.push_back(stage_ipu(run, out.layers.size()));
    auto& layers = out.layers.emplace_back();
    for (std::size_t i = first; i < last; ++i)
      layers.push_back({nodes[i].op(), nodes[i].layer->name});
  }
  return out;
}

ForwardStages transformer_stages(const ModelDef& m, const RunConfig& run) {
  check_placement(m, run);
  ForwardStages out;
  out.recompute = Recompute::kEverySubLayer;
  const std::uint32_t p = run.ipus_per_replica;
  std::vector<Block> tied;  // IPU 0's blocks after its embedding, with heads tied to it
  for (std::uint32_t ipu = 0; ipu < p; ++ipu) {
    std::vector<Block> blocks = stage_blocks(m, run, ipu);
    if (ipu == 0 && p > 1 && !m.head_on_last_ipu()) {
      tied.assign(blocks.begin() + 1, blocks.end());
      blocks.resize(1);
    }
    out.ipu.push_back(ipu);
    out.layers.push_back(std::move(blocks));
  }
  if (!tied.empty() || (p > 1 && !m.head_on_last_ipu())) {
    out.ipu.push_back(0);
    out.layers.push_back(std::move(tied));
  }
  return out;
}

// An imported graph's layers (its nodes), split at run.pipeline_splits (node names) as a
// CNN's are.
ForwardStages graph_stages(const ModelDef& m, const RunConfig& run) {
  check_checkpoints(m, run);
  const auto bad = [&](const std::string& what) { return split_error(run, what); };
  check_split_count(run, "a replica");
  ForwardStages out;
  out.recompute = Recompute::kStashedCheckpoints;
  std::size_t split = 0;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    if (run.inference && l.op == Op::kSoftmaxLoss) continue;  // the loss is training's
    if (i == 0 || (split < run.pipeline_splits.size() && l.name == run.pipeline_splits[split])) {
      if (i > 0) ++split;
      out.ipu.push_back(stage_ipu(run, out.layers.size()));
      out.layers.emplace_back();
    }
    out.layers.back().push_back({l.op, l.name});
  }
  if (split != run.pipeline_splits.size())
    throw bad(
        fmt::format("'{}' is not a layer of {} after '{}' (splits name nodes of the graph, "
                    "in graph order, not its first)",
                    run.pipeline_splits[split], m.file,
                    split == 0 ? m.layers.front().name : run.pipeline_splits[split - 1]));
  return out;
}

}  // namespace

ForwardStages forward_stages(const ModelDef& m, const RunConfig& run) {
  switch (m.family) {
    case Family::kCnn:
      return cnn_stages(m, run);
    case Family::kTransformer:
      return transformer_stages(m, run);
    case Family::kGraph:
      return graph_stages(m, run);
  }
  throw Error("forward_stages: no front end for the model's family");
}

std::map<std::string, std::uint32_t> stage_of(const ForwardStages& stages) {
  std::map<std::string, std::uint32_t> out{{"", 0}};
  for (std::uint32_t s = 0; s < stages.layers.size(); ++s)
    for (const Block& blk : stages.layers[s]) out[blk.layer] = s;
  return out;
}

std::vector<std::vector<TensorId>> crossing(const TensorGraph& g, const ForwardStages& stages) {
  const std::map<std::string, std::uint32_t> of = stage_of(stages);
  const auto stage = [&](const std::string& layer) {
    const auto it = of.find(layer);
    if (it == of.end())
      throw Error(fmt::format("the model's graph has layer '{}', which no stage runs", layer));
    return it->second;
  };
  std::vector<std::vector<TensorId>> out(stages.layers.size());
  for (const Node& n : g.nodes()) {
    if (n.backward) continue;
    const std::uint32_t reader = stage(n.layer);
    for (const TensorId t : n.inputs) {
      const Tensor& x = g.tensor(t);
      if (x.role != Role::kActivation || !x.producer) continue;
      for (std::uint32_t k = stage(g.node(*x.producer).layer) + 1; k <= reader; ++k)
        if (std::find(out[k].begin(), out[k].end(), t) == out[k].end()) out[k].push_back(t);
    }
  }
  for (auto& c : out) std::sort(c.begin(), c.end());
  return out;
}

}  // namespace ipusim::compiler::graph
