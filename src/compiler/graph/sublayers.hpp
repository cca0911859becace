// SPDX-License-Identifier: Apache-2.0
// The sub-layers each IPU of a pipelined transformer replica runs (docs/workloads.md,
// "Transformers"). A transformer is a chain of sub-layers, ops of graph::kOps (family
// kTransformer): the embedding, `layers` attention and FFN sub-layers, the final layer norm of
// a pre-norm model and the heads; the run's pipeline placement cuts the chain into stages.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/op.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::compiler::graph {

// One sub-layer of a stage, with the name its steps carry ("encoder3/attention").
struct Block {
  Op kind;
  std::string layer;
  bool operator==(const Block&) const = default;
};

// The sub-layers IPU `ipu` of a replica runs, in forward order: the embedding on IPU 0; its
// placement's attention and FFN sub-layers in the model's order (layer j's attention, then its
// FFN), numbered over the whole model in the order the layers run through the IPUs (with heads
// tied to the embedding, IPU 0's layers are the last); the final norm of a pre-norm model on
// the IPU holding the model's last layer; the heads with the embedding (tied) or, for a classifier
// or a span head, on the last IPU.
std::vector<Block> stage_blocks(const ModelDef& m, const RunConfig& run, std::uint32_t ipu);

// Refuses a placement whose IPUs do not each hold the next run of the model's chain of
// sub-layers (a ConfigError naming run.pipeline_placement and the IPU).
void check_stage_chain(const ModelDef& m, const RunConfig& run);

}  // namespace ipusim::compiler::graph
