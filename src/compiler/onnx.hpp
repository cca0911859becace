// SPDX-License-Identifier: Apache-2.0
// ONNX models as the importer reads them (docs/onnx.md): the parts of an ONNX ModelProto that
// say what a model computes (nodes, attributes, initializer shapes, input and output shapes),
// decoded from the protobuf wire format by onnx_reader.cpp. Weight data is never read (a
// weight's shape is all the compiler needs), so models saved with external data import without
// their data files.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/tensor_graph.hpp"

namespace ipusim::compiler::onnx {

// TensorProto.DataType values used here.
enum class ElemType : std::int32_t {
  kUndefined = 0,
  kFloat = 1,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kBfloat16 = 16,
};

struct Tensor {
  std::string name;
  std::vector<std::int64_t> dims;
  std::int32_t elem_type = 0;
  std::vector<std::int64_t> ints;  // the values of an inline integer tensor (shapes, indices)
  std::vector<float> floats;       // the values of a small inline float tensor (scalars)
  bool external = false;           // data_location EXTERNAL
  // Where its bytes are (not read): raw_data at `offset` of the model file, or external data
  // at `offset` of `location` (relative to the model's folder); `length` 0: none recorded (for
  // external data, to the tensor's end).
  std::string location;
  std::uint64_t offset = 0, length = 0;
  std::uint64_t elements() const;
};

struct Attribute {
  std::string name;
  std::optional<std::int64_t> i;
  std::optional<float> f;
  std::vector<std::int64_t> ints;
  std::string s;
  std::optional<Tensor> t;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;
  std::vector<std::string> inputs;  // "" for an omitted optional input
  std::vector<std::string> outputs;
  std::vector<Attribute> attributes;
  const Attribute* attribute(const std::string& name) const;
  std::int64_t int_attr(const std::string& name, std::int64_t fallback) const;
  std::vector<std::int64_t> ints_attr(const std::string& name) const;
};

// A graph input or output: its element type and shape (nullopt for a symbolic dimension).
struct Value {
  std::string name;
  std::int32_t elem_type = 0;
  std::vector<std::optional<std::int64_t>> dims;
};

struct Graph {
  std::string file;
  std::string name;
  std::int64_t opset = 0;  // of the default domain
  std::vector<Node> nodes;
  std::map<std::string, Tensor> initializers;
  std::vector<Value> inputs;  // graph inputs that are not initializers
  std::vector<Value> outputs;
};

// Reads an ONNX model file. Throws ConfigError naming the file, the byte offset and the field
// path for a file that is not a well-formed ModelProto.
Graph read_model(const std::string& file);

// Whether float tensor `b` [n, m] holds `a` [m, n] transposed, by `samples` positions spread
// over it (both float32 or both float16, their bytes embedded in the model file or in external
// data that is present); false when either's data is absent, the types differ, or the sampled
// values are all equal (zeros: no evidence). Reads only the sampled elements.
bool holds_transposed(const Graph& g, const Tensor& a, const Tensor& b, std::size_t samples = 4096);

// How a graph is built from an ONNX graph: the batch its dynamic (or exported) batch dimension
// takes, whether it is trained (dropouts kept, a loss added after the scores), and the run's
// floating-point type, which every floating-point tensor takes whatever the file's.
struct GraphOptions {
  std::uint64_t batch = 1;
  bool training = true;
  trace::DType dtype = trace::DType::kHalf;
  // Steps a tied LM head's matmul (one reading an embedding table transposed) is serialised
  // into over the vocabulary (run.embedding_serialisation); > 1 without one is a ConfigError.
  std::uint32_t vocabulary_serial = 1;
};

// A layer of the imported graph: the ONNX node its graph nodes come from (its name as a trace
// name) and the node's op type.
struct GraphLayer {
  std::string name;
  std::string op_type;
  graph::Primitive first = graph::Primitive::kCount;  // its first graph node's op (not a view)
  bool residual = false;  // that node adds two computed tensors (not a weight: a bias)
};

// What an import found, for its summary.
struct GraphImport {
  std::vector<GraphLayer> layers;           // in graph order, the loss last
  std::vector<std::uint64_t> images;        // [channels, height, width] of an image input
  graph::Dims output;                       // the scores (training) or the output
  std::vector<std::string> approximations;  // nodes lowered approximately, each said
};

// The tensor graph of an ONNX graph (onnx_graph.cpp). A node ipusim does not model is a
// ConfigError naming the file and the node.
graph::TensorGraph build_graph(const Graph& g, const GraphOptions& options,
                               GraphImport* report = nullptr);

}  // namespace ipusim::compiler::onnx

namespace ipusim::compiler {
// An ONNX model as it is imported, the file read once: the model file the transformer patterns
// of onnx_import.cpp write for a graph they read, or else (every other graph) a model of
// family kGraph, its tensor graph imported node by node.
struct ImportedOnnx {
  std::string model_file;         // the patterns' model file (YAML); empty for a graph
  std::optional<ModelDef> graph;  // the imported graph
};
ImportedOnnx import_onnx_model(const std::string& file);
}  // namespace ipusim::compiler

namespace ipusim::compiler::onnx {

// A trace name from an ONNX name: torch's "/layer1/layer1.0/conv1/Conv" loses its leading
// slash; characters outside [A-Za-z0-9_.:/-] become '_'.
std::string sanitise_name(std::string name);

}  // namespace ipusim::compiler::onnx
