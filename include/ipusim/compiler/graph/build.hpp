// SPDX-License-Identifier: Apache-2.0
// The model-file front ends of the tensor graph (docs/models.md): a CNN's layer list, or a
// transformer's sizes expanded into its matmuls, softmaxes, norms and elementwise ops, as the
// framework the model comes from builds it (PyTorch's layouts: NCHW images, [out, in] linear
// weights read transposed).
#pragma once

#include <cstdint>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/tensor_graph.hpp"

namespace ipusim::compiler::graph {

struct BuildOptions {
  std::uint64_t batch = 1;  // samples (images or sequences)
  bool training = true;     // dropouts and the loss (else the forward to the logits)
  // Tokens a masked-LM head predicts per sequence (0: the model's masked_tokens; a packed run
  // predicts masked_tokens + max_sequences_per_pack - 1 per pack).
  std::uint64_t masked_tokens = 0;
  // Steps the tied vocabulary matmul of a masked-LM or LM head is serialised into (its columns,
  // the vocabulary padded to the model's multiple; run.embedding_serialisation).
  std::uint32_t vocabulary_serial = 1;
  // Q, K and V as three weight tensors concatenated for one matmul (run.split_qkv), not one.
  bool split_qkv = false;
  // A transformer's share on one of this many IPUs (run.tensor_parallel): 1/T of each
  // attention's heads and FFN's hidden units and of the vocabulary, the all-reduces between.
  std::uint32_t tensor_parallel = 1;
  // 2-D tensor parallelism (run.hidden_parallel, popxl GPT-3 175B's TP2): of those IPUs, groups
  // of this many consecutive ones split the hidden dimension (the residual stream, layer norms
  // with all-reduced statistics, each matmul's contraction), the T / this groups of IPUs this
  // far apart the heads, FFN and vocabulary.
  std::uint32_t hidden_parallel = 1;
  // One decoding step of a causal language model (run.kv_cache): one new token per sequence,
  // attending to the keys and values of the model's `sequence` positions held in a cache (graph
  // inputs `<layer>.k_cache` and `.v_cache`, [batch, heads, sequence, head channels]).
  bool decode = false;
};

// The forward graph of `m` (no backward: add_backward). Its shape errors are ConfigErrors
// naming the layer's file:line.
TensorGraph build_graph(const ModelDef& m, const BuildOptions& options = {});

// The IPUs of a replica a tensor-parallel sum spans, as graph::Attrs group_size and
// group_stride: under 2-D tensor parallelism the head group (the tensor_parallel /
// hidden_parallel IPUs hidden_parallel apart, which split the heads, FFN and vocabulary and hold
// the same activations) or the hidden group (hidden_parallel consecutive IPUs); every IPU of the
// replica (0, 0) when hidden_parallel is 1.
struct ReplicaIpus {
  std::uint32_t size = 0, stride = 0;
};
ReplicaIpus tensor_parallel_group(std::uint32_t tensor_parallel, std::uint32_t hidden_parallel,
                                  bool heads);

// The loss of a graph built for training: its last node's output.
TensorId loss_of(const TensorGraph& g);

}  // namespace ipusim::compiler::graph
