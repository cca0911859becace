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
  bool external = false;           // data_location EXTERNAL
  std::uint64_t elements() const;
};

struct Attribute {
  std::string name;
  std::optional<std::int64_t> i;
  std::optional<float> f;
  std::vector<std::int64_t> ints;
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

}  // namespace ipusim::compiler::onnx
