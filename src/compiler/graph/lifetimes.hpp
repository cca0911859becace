// SPDX-License-Identifier: Apache-2.0
// Memory accounting of a training micro-batch on one IPU, a pass over the layers and where the
// lowering put each layer's steps: the activations it keeps, each with its lifetime in program
// positions (trace-format §4.3). No layouts and no SystemC: the lowering gives each tensor the
// layout of the layer it names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ipusim/trace/program.hpp"
#include "recompute.hpp"
#include "sublayers.hpp"

namespace ipusim::compiler::graph {

// Where a layer's forward, recomputation and backward steps sit in the micro-batch body.
struct Spans {
  std::pair<std::size_t, std::size_t> fwd, rec, bwd;  // [begin, end) step indices
  bool recomputed = false;
};

// The body the lowering built: each node's spans (in node order), the step of the images' cast
// (none without a host input) and the body's length in steps.
struct Body {
  std::vector<Spans> spans;
  std::optional<std::size_t> images_at;
  std::size_t steps = 0;
};

// A tensor kept, on the layout of `layer`'s forward output ("" for the images).
struct KeptTensor {
  std::string name;
  trace::TensorKind kind;
  std::string layer;
  trace::Lifetime live;
};

// The images from their cast to the first conv's weight gradient; each checkpoint from its
// forward to its consumers' backward; the outputs of the ops that keep theirs
// (OpInfo::keeps_output) from the forward to the consumers' forward where the segment is
// recomputed, and again from the recomputation, else to the consumers' (and their own)
// backward; each layer's output gradient from its first consumer's backward to its own. At
// positions `offset` + the step index in the body; none for an empty body.
// Which layers read each layer's output (by index in the layers' list; "" the images).
using Consumers = std::map<std::string, std::vector<std::size_t>>;
std::vector<KeptTensor> kept_tensors(const std::vector<Block>& layers, const Consumers& consumers,
                                     const std::vector<Segment>& segments, const Body& body,
                                     std::uint64_t offset);

}  // namespace ipusim::compiler::graph
