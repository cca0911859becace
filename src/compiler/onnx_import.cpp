// SPDX-License-Identifier: Apache-2.0
// The ONNX front end (docs/onnx.md): an ONNX graph becomes the model file that describes it,
// which the YAML front end then reads, so an imported model and its `ipusim import` file are
// the same model by construction. A CNN's nodes map one to one onto model-file layers (with
// layout-only nodes folded away); a transformer is recognised by its parts (token or patch
// embedding, attention blocks, FFN blocks, layer norms, one head) and written as the
// transformer's sizes. A node or pattern ipusim does not model is an error naming the node,
// never skipped.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/trace/program.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/strings.hpp"
#include "onnx.hpp"

namespace ipusim::compiler {
namespace {

using onnx::ElemType;
using onnx::Graph;
using onnx::Node;
using onnx::Tensor;

// Every op type the importer reads, by what it becomes.
const std::vector<std::string> kSupported = {"Conv",
                                             "Gemm",
                                             "MatMul",
                                             "BatchNormalization",
                                             "GroupNormalization",
                                             "InstanceNormalization",
                                             "LayerNormalization",
                                             "Relu",
                                             "Sigmoid",
                                             "Gelu",
                                             "Erf",
                                             "Tanh",
                                             "Pow",
                                             "Sqrt",
                                             "Add",
                                             "Mul",
                                             "Sub",
                                             "Div",
                                             "Softmax",
                                             "LogSoftmax",
                                             "MaxPool",
                                             "AveragePool",
                                             "GlobalAveragePool",
                                             "Reshape",
                                             "Flatten",
                                             "Transpose",
                                             "Squeeze",
                                             "Unsqueeze",
                                             "Concat",
                                             "Split",
                                             "Slice",
                                             "Expand",
                                             "Gather",
                                             "GatherElements",
                                             "Cast",
                                             "Where",
                                             "Dropout",
                                             "Identity",
                                             "Constant",
                                             "ReduceMean",
                                             "Shape"};

bool is(const Node& n, std::initializer_list<const char*> ops) {
  return std::any_of(ops.begin(), ops.end(), [&](const char* op) { return n.op_type == op; });
}

std::string dims_text(const std::vector<std::int64_t>& d) {
  std::string s;
  for (const auto v : d) s += (s.empty() ? "" : " x ") + std::to_string(v);
  return "[" + s + "]";
}

class Importer {
 public:
  // `check`: refuse ops the patterns do not read (else only index the graph, to ask
  // transformer()).
  explicit Importer(const Graph& g, bool check = true) : g_(g) {
    for (const auto& v : g_.inputs) inputs_.insert(v.name);
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (check) refuse_unread(n);
      for (const auto& in : n.inputs)
        if (!in.empty()) consumers_[in].push_back(i);
      for (const auto& out : n.outputs) produced_[out] = i;
      // Nodes are in topological order: a node's outputs are constant when all its inputs are.
      bool c = true;
      for (const auto& in : n.inputs) c = c && (in.empty() || constant(in));
      for (const auto& out : n.outputs) constant_[out] = c;
    }
  }

  // Refuses a node the patterns do not read: another domain, an op outside kSupported, no
  // output, too few inputs, an input that nothing before it makes.
  void refuse_unread(const Node& n) const {
    if (!n.domain.empty() && n.domain != "ai.onnx")
      fail(n, fmt::format("ops of domain '{}' are not supported (only the default ONNX domain)",
                          n.domain));
    if (std::find(kSupported.begin(), kSupported.end(), n.op_type) == kSupported.end())
      fail(n, fmt::format("op {} is not supported; ipusim imports {}", n.op_type,
                          fmt::join(kSupported, ", ")));
    if (n.outputs.empty() || n.outputs[0].empty()) fail(n, "a node without an output");
    if (n.inputs.size() < min_inputs(n.op_type) || (!n.inputs.empty() && n.inputs[0].empty()))
      fail(n, fmt::format("expected at least {} input(s), found {}", min_inputs(n.op_type),
                          n.inputs.size()));
    for (const auto& in : n.inputs)
      if (!in.empty() && !produced_.count(in) && !inputs_.count(in) && !g_.initializers.count(in))
        fail(n, fmt::format("input '{}' is not a graph input, an initializer or the output of "
                            "an earlier node (ONNX lists nodes in topological order)",
                            in));
  }

  // The model file of a transformer graph (transformer() is true).
  std::string import() { return import_transformer(); }
  // Whether the graph has attention (a Softmax over Q K^T): read by the transformer patterns.
  bool transformer() const {
    return std::any_of(g_.nodes.begin(), g_.nodes.end(), [&](const Node& n) {
      return n.op_type == "Softmax" && scores_matmul(n).has_value();
    });
  }

 private:
  // --- graph queries -------------------------------------------------------------------------
  [[noreturn]] void fail(const Node& n, const std::string& what) const {
    const std::size_t index = static_cast<std::size_t>(&n - g_.nodes.data());
    throw ConfigError(fmt::format("{}: node '{}' ({}): {}", g_.file,
                                  n.name.empty() ? "#" + std::to_string(index) : n.name, n.op_type,
                                  what));
  }
  [[noreturn]] void fail_graph(const std::string& what) const {
    throw ConfigError(fmt::format("{}: {}", g_.file, what));
  }
  const Node* producer(const std::string& t) const {
    const auto it = produced_.find(t);
    return it == produced_.end() ? nullptr : &g_.nodes[it->second];
  }
  std::vector<const Node*> consumers(const std::string& t) const {
    std::vector<const Node*> out;
    if (const auto it = consumers_.find(t); it != consumers_.end())
      for (const std::size_t i : it->second) out.push_back(&g_.nodes[i]);
    return out;
  }
  const Tensor* initializer(const std::string& t) const {
    const auto it = g_.initializers.find(t);
    return it == g_.initializers.end() ? nullptr : &it->second;
  }
  static std::size_t min_inputs(const std::string& op) {
    if (op == "Constant") return 0;
    if (op == "Where") return 3;
    for (const char* binary :
         {"Conv", "Gemm", "MatMul", "Add", "Mul", "Sub", "Div", "Pow", "Reshape", "Expand",
          "Gather", "GatherElements", "LayerNormalization", "BatchNormalization",
          "InstanceNormalization", "GroupNormalization"})
      if (op == binary) return 2;
    return 1;
  }
  // True if `t` depends on no graph input (initializers and Constant nodes only).
  bool constant(const std::string& t) const {
    if (const auto it = constant_.find(t); it != constant_.end()) return it->second;
    return !inputs_.count(t);  // an initializer
  }
  // Follows a chain of `through` nodes back from `t` (at most 64) until `stop(t)`.
  template <typename Stop>
  std::string back(std::string t, std::initializer_list<const char*> through, Stop stop,
                   bool* transposed = nullptr) const {
    for (int depth = 0; depth < 64 && !stop(t); ++depth) {
      const Node* p = producer(t);
      if (!p || !is(*p, through)) break;
      if (p->op_type == "Transpose" && transposed) *transposed = !*transposed;
      t = p->inputs[0];
    }
    return t;
  }
  // The weight initializer behind a constant operand (through Transpose, Cast and Identity).
  const Tensor* weight(const std::string& t, bool* transposed = nullptr) const {
    return initializer(back(
        t, {"Transpose", "Cast", "Identity"},
        [&](const std::string& x) { return initializer(x) != nullptr; }, transposed));
  }
  // The graph input an integer operand comes from (through Cast, Unsqueeze, Expand, Reshape).
  const onnx::Value* input_behind(const std::string& t) const {
    const std::string from = back(t, {"Cast", "Unsqueeze", "Expand", "Reshape", "Identity"},
                                  [&](const std::string& x) { return inputs_.count(x) != 0; });
    for (const auto& v : g_.inputs)
      if (v.name == from) return &v;
    return nullptr;
  }
  std::string dtype_of(std::int32_t elem) const {
    if (elem == static_cast<std::int32_t>(ElemType::kFloat16)) return "half";
    if (elem == static_cast<std::int32_t>(ElemType::kFloat)) return "float";
    fail_graph(
        fmt::format("weights of ONNX element type {} are not supported (float16 or float)", elem));
  }
  std::string model_name() const {
    std::string n = onnx::sanitise_name(g_.name);
    if (n.empty() || n == "main_graph" || n == "torch_jit" || n == "torch-jit-export")
      n = onnx::sanitise_name(std::filesystem::path(g_.file).stem().string());
    return n.empty() ? "onnx-model" : n;
  }
  std::string header(const std::string& family) const {
    return fmt::format(
        "# Imported by `ipusim import` from {} ({} ONNX nodes, opset {}) as a {} model.\n"
        "model:\n  name: {}\n  family: {}\n",
        printable(std::filesystem::path(g_.file).filename().string()), g_.nodes.size(), g_.opset,
        family, model_name(), family);
  }

  // --- transformer ---------------------------------------------------------------------------
  struct Scores {
    const Node* matmul = nullptr;
    bool causal = false, mask = false;
  };
  // The attention-score MatMul behind a Softmax (Q K^T, then scale, masks), if there is one.
  std::optional<Scores> scores_matmul(const Node& softmax) const {
    Scores s;
    // (Unchecked graphs are read here too, to tell a transformer: every operand is counted.)
    if (softmax.inputs.empty()) return std::nullopt;
    std::string t = softmax.inputs[0];
    for (int depth = 0; depth < 16; ++depth) {
      const Node* p = producer(t);
      if (!p || p->inputs.empty()) return std::nullopt;
      if (p->op_type == "MatMul" && p->inputs.size() < 2) return std::nullopt;
      if (p->op_type == "MatMul")
        return constant(p->inputs[0]) || constant(p->inputs[1])
                   ? std::nullopt
                   : std::optional(Scores{p, s.causal, s.mask});
      if (p->op_type == "Where" && p->inputs.size() == 3) {
        (constant(p->inputs[0]) ? s.causal : s.mask) = true;
        t = p->inputs[1];
      } else if (is(*p, {"Add", "Sub", "Mul", "Div"}) && p->inputs.size() == 2) {
        const std::string& other = p->inputs[1];
        if (p->op_type == "Add" && !constant(other)) s.mask = true;
        if (p->op_type == "Add" && constant(other)) {
          const Tensor* c = initializer(other);
          if (!c || c->elements() > 1) s.causal = true;
        }
        t = p->inputs[0];
      } else if (is(*p, {"Cast", "Identity"})) {
        t = p->inputs[0];
      } else {
        return std::nullopt;
      }
    }
    return std::nullopt;
  }
  // The heads of an attention block: the constant shape of the Reshape that splits Q.
  std::uint64_t heads_of(const Node& scores) const {
    std::string t = scores.inputs[0];
    for (int depth = 0; depth < 8; ++depth) {
      const Node* p = producer(t);
      if (!p) break;
      if (p->op_type == "Reshape" && p->inputs.size() == 2) {
        const Tensor* shape = initializer(p->inputs[1]);
        if (shape && shape->ints.size() == 4 && shape->ints[2] > 0)
          return static_cast<std::uint64_t>(shape->ints[2]);
        fail(*p,
             "the reshape that splits Q into heads needs a constant 4-d shape with the heads "
             "third ([batch, sequence, heads, head size]); export with constant folding");
      }
      if (!is(*p, {"Transpose", "Identity", "Cast"})) break;
      t = p->inputs[0];
    }
    fail(scores, "could not find the reshape that splits Q into heads before the scores' MatMul");
  }
  // The input of the projection that makes Q: back from the scores through the head split,
  // a Split of a fused QKV, the bias add and the MatMul with its weight.
  std::string projection_input(const Node& scores) const {
    std::string t = scores.inputs[0];
    for (int depth = 0; depth < 12; ++depth) {
      const Node* p = producer(t);
      if (!p) break;
      if (p->op_type == "MatMul" && weight(p->inputs[1])) return p->inputs[0];
      if (p->op_type == "Add" && p->inputs.size() == 2)
        t = constant(p->inputs[0]) ? p->inputs[1] : p->inputs[0];
      else if (is(*p, {"Reshape", "Transpose", "Split", "Identity", "Cast"}))
        t = p->inputs[0];
      else
        break;
    }
    fail(scores, "could not find the Q projection (a MatMul with a weight) behind the scores");
  }

  // What the transformer importer reads from the graph, part by part.
  struct Found {
    std::vector<Scores> blocks;  // one per attention block, in graph order
    std::uint64_t heads = 0;
    bool dropout = false;  // on the attention probabilities
    const Node* patch = nullptr;
    const Tensor* tokens = nullptr;
    const onnx::Value* token_input = nullptr;
    std::uint64_t positions = 0, token_types = 0, hidden = 0;
    std::string dtype;
    std::uint64_t ffn = 0, square = 0, fused = 0, ffn_in = 0, ffn_out = 0, tied = 0;
    std::uint64_t classes = 0, span = 0;
    std::string head;
    std::uint64_t masked = 0;
    bool post = false;
    std::uint64_t layers() const { return blocks.size(); }
  };

  std::string import_transformer() {
    if (!transformer()) fail_graph("not a transformer (no Softmax over Q K^T)");
    Found f;
    find_attention(f);
    find_embeddings(f);
    find_projections(f);
    find_head(f);
    find_norms(f);
    return transformer_yaml(f);
  }

  // Attention blocks: one Softmax over Q K^T each, in graph order, all alike.
  void find_attention(Found& f) const {
    for (const Node& n : g_.nodes)
      if (n.op_type == "Softmax" || n.op_type == "LogSoftmax") {
        if (auto s = scores_matmul(n))
          f.blocks.push_back(*s);
        else
          fail(n,
               "a softmax that is not an attention block's (over Q K^T); a transformer's "
               "loss is added by the compiler, export the logits");
      }
    const Scores& first = f.blocks.front();
    f.heads = heads_of(*first.matmul);
    for (const Scores& b : f.blocks)
      if (heads_of(*b.matmul) != f.heads || b.causal != first.causal || b.mask != first.mask)
        fail(*b.matmul,
             "attention blocks differ (heads or masks); ipusim's transformer layers "
             "are all alike");
    for (const Node* c : consumers(producer_output_of_softmax(*first.matmul)))
      f.dropout = f.dropout || c->op_type == "Dropout";
  }

  // Embeddings: token (and segment and position) tables gathered, or a patch conv.
  void find_embeddings(Found& f) const {
    for (const Node& n : g_.nodes) {
      if (n.op_type == "Conv") {
        if (f.patch)
          fail(n, "a second conv in a transformer (only a ViT's patch embedding is one)");
        f.patch = &n;
      }
      if (n.op_type != "Gather") continue;
      const Tensor* table = initializer(n.inputs.at(0));
      if (!table || table->dims.size() != 2) continue;
      const onnx::Value* in = input_behind(n.inputs.at(1));
      if (!in) {
        if (!constant(n.inputs.at(1)))
          fail(n,
               "a gather from a table with computed indices (ipusim gathers token, segment "
               "and position embeddings)");
        f.positions = static_cast<std::uint64_t>(table->dims[0]);
      } else if (!f.tokens || table->dims[0] > f.tokens->dims[0]) {
        if (f.tokens) f.token_types = static_cast<std::uint64_t>(f.tokens->dims[0]);
        f.tokens = table;
        f.token_input = in;
      } else {
        f.token_types = static_cast<std::uint64_t>(table->dims[0]);
      }
      f.dtype = dtype_of(table->elem_type);
    }
    if (f.patch) {
      const Tensor* w = initializer(f.patch->inputs.at(1));
      if (!w || w->dims.size() != 4)
        fail(*f.patch, "the patch embedding's weight is not a 4-d initializer");
      const auto strides = f.patch->ints_attr("strides");
      if (w->dims[2] != w->dims[3] || strides.size() != 2 || strides[0] != w->dims[2] ||
          strides[1] != w->dims[3])
        fail(*f.patch, "a patch embedding is a conv with square kernel equal to its stride");
      f.hidden = static_cast<std::uint64_t>(w->dims[0]);
      f.dtype = dtype_of(w->elem_type);
    } else if (f.tokens) {
      f.hidden = static_cast<std::uint64_t>(f.tokens->dims[1]);
    } else {
      fail_graph(
          "transformer graph: no token embedding (a Gather from a [vocabulary, hidden] "
          "initializer with token ids from a graph input) and no patch embedding (a Conv)");
    }
  }

  // Projections, by weight shape ([in, out] as the MatMul reads it).
  void find_projections(Found& f) const {
    for (const Node& n : g_.nodes) {
      if (!is(n, {"MatMul", "Gemm"}) || n.inputs.size() < 2 || !constant(n.inputs[1])) continue;
      bool transposed = n.op_type == "Gemm" && n.int_attr("transB", 0) != 0;
      const Tensor* w = weight(n.inputs[1], &transposed);
      if (!w || w->dims.size() != 2) fail(n, "a matmul whose constant operand is not a 2-d weight");
      if (w == f.tokens) {
        ++f.tied;
        continue;
      }
      const auto in = static_cast<std::uint64_t>(w->dims[transposed ? 1 : 0]);
      const auto out = static_cast<std::uint64_t>(w->dims[transposed ? 0 : 1]);
      if (in == f.hidden && out == f.hidden) {
        ++f.square;
      } else if (in == f.hidden && out == 3 * f.hidden) {
        ++f.fused;
      } else if (in == f.hidden && out == 2 && !f.patch) {
        ++f.span;
      } else if (in == f.hidden && f.patch && is_output(n)) {
        f.classes = out;
      } else if (in == f.hidden && (f.ffn == 0 || out == f.ffn)) {
        f.ffn = out;
        ++f.ffn_in;
      } else if (out == f.hidden && in == f.ffn) {
        ++f.ffn_out;
      } else {
        fail(n, fmt::format("a matmul with a {} weight, which is none of the transformer's "
                            "projections for hidden size {}",
                            dims_text(w->dims), f.hidden));
      }
    }
    if (f.ffn_in != f.layers() || f.ffn_out != f.layers())
      fail_graph(
          fmt::format("transformer graph: {} attention blocks but {} FFN input and {} FFN "
                      "output matmuls ([{} x {}] and [{} x {}] weights)",
                      f.layers(), f.ffn_in, f.ffn_out, f.hidden, f.ffn, f.ffn, f.hidden));
  }

  // The head: a classifier (patch models), a span head, the tied LM head over every token, or
  // the masked-LM head (a dense layer, GELU and layer norm on the gathered masked tokens).
  void find_head(Found& f) const {
    const std::uint64_t attention = f.square + 3 * f.fused, layers = f.layers();
    if (f.patch) {
      if (f.classes == 0)
        fail_graph(
            "image transformer graph: no classifier matmul ([hidden x classes] weight producing "
            "a graph output)");
      f.head = "classifier";
    } else if (f.span == 1 && f.tied == 0) {
      f.head = "span";
    } else if (f.tied == 1 && attention == 4 * layers) {
      f.head = "lm";
    } else if (f.tied == 1 && attention == 4 * layers + 1) {
      f.head = "masked_lm";
      for (const Node& n : g_.nodes)
        if (is(n, {"Gather", "GatherElements"}) && n.inputs.size() == 2 && !constant(n.inputs[0]))
          if (const onnx::Value* in = input_behind(n.inputs[1]); in && in != f.token_input) {
            if (in->dims.size() != 2 || !in->dims[1])
              fail(n,
                   "the masked positions input needs a fixed second dimension (the masked "
                   "tokens of a sequence)");
            f.masked = static_cast<std::uint64_t>(*in->dims[1]);
          }
      if (f.masked == 0)
        fail_graph(
            "transformer graph with a masked-LM head: no gather of the masked positions "
            "(a Gather or GatherElements on the encoder output with indices from a graph "
            "input)");
    } else {
      fail_graph(fmt::format(
          "transformer graph: no head ipusim models ({} tied decoder matmul(s), {} [hidden x "
          "hidden] and {} fused QKV projections for {} attention blocks); supported: a "
          "masked-LM head, an LM head tied to the token embedding, a span head, an image "
          "classifier",
          f.tied, f.square, f.fused, layers));
    }
    if (attention != 4 * layers + (f.head == "masked_lm" ? 1 : 0))
      fail_graph(
          fmt::format("transformer graph: {} [hidden x hidden] and {} fused QKV "
                      "projections do not make Q, K, V and the output of {} attention blocks",
                      f.square, f.fused, layers));
  }

  // Pre-norm: the Q projection reads a layer norm that the residual add does not.
  void find_norms(Found& f) const {
    const std::string x = projection_input(*f.blocks.front().matmul);
    for (const Node* c : consumers(x)) f.post = f.post || c->op_type == "Add";
    std::uint64_t norms = 0;
    // A layer norm is a LayerNormalization node (opset 17), or written out as exporters do
    // below opset 17, each with one Sqrt of a variance computed from the activations.
    for (const Node& n : g_.nodes)
      norms += n.op_type == "LayerNormalization" || (n.op_type == "Sqrt" && !constant(n.inputs[0]));
    const std::uint64_t expected = 2 * f.layers() + 1 + (f.head == "masked_lm" ? 1 : 0);
    if (norms != expected)
      fail_graph(
          fmt::format("transformer graph: {} layer norms, expected {} for a {}-norm model "
                      "of {} layers with a {} head",
                      norms, expected, f.post ? "post" : "pre", f.layers(), f.head));
  }

  std::string transformer_yaml(const Found& f) const {
    std::ostringstream y;
    y << header("transformer");
    y << fmt::format("  dtype: {}\n  layers: {}\n  hidden: {}\n  heads: {}\n  ffn: {}\n", f.dtype,
                     f.layers(), f.hidden, f.heads, f.ffn);
    if (f.patch) {
      if (g_.inputs.size() != 1) fail_graph("an image transformer graph has one input, the images");
      const auto& in = g_.inputs[0];
      if (in.dims.size() != 4 || !in.dims[1] || !in.dims[2] || !in.dims[3])
        fail_graph(
            "image transformer graph: the image input needs a fixed [batch, channels, "
            "height, width] shape");
      y << fmt::format(
          "  input: {{height: {}, width: {}, channels: {}}}\n  patch: {}\n"
          "  classes: {}\n",
          *in.dims[2], *in.dims[3], *in.dims[1], initializer(f.patch->inputs[1])->dims[2],
          f.classes);
    } else {
      if (f.token_input->dims.size() != 2 || !f.token_input->dims[1])
        fail_graph(
            fmt::format("graph input '{}' (token ids) needs a fixed [batch, sequence] "
                        "shape",
                        f.token_input->name));
      y << fmt::format("  vocabulary: {}\n  sequence: {}\n", f.tokens->dims[0],
                       *f.token_input->dims[1]);
      if (f.head == "masked_lm") y << fmt::format("  masked_tokens: {}\n", f.masked);
      if (f.positions != 0) y << fmt::format("  max_positions: {}\n", f.positions);
      y << fmt::format("  token_types: {}\n", f.token_types);
    }
    y << fmt::format(
        "  causal: {}\n  attention_mask: {}\n  attention_dropout: {}\n  norm: {}\n"
        "  head: {}\n",
        f.blocks.front().causal, f.blocks.front().mask, f.dropout, f.post ? "post" : "pre", f.head);
    return y.str();
  }
  bool is_output(const Node& n) const {
    // Through layout-only nodes to a graph output.
    std::string t = n.outputs.at(0);
    for (int depth = 0; depth < 8; ++depth) {
      for (const auto& o : g_.outputs)
        if (o.name == t) return true;
      const auto c = consumers(t);
      if (c.size() != 1 || !is(*c[0], {"Add", "Reshape", "Flatten", "Identity", "Squeeze"}))
        return false;
      t = c[0]->outputs.at(0);
    }
    return false;
  }
  std::string producer_output_of_softmax(const Node& scores) const {
    // The softmax's output: the first Softmax downstream of the scores' MatMul.
    std::string t = scores.outputs.at(0);
    for (int depth = 0; depth < 16; ++depth) {
      const auto c = consumers(t);
      if (c.empty()) break;
      if (c[0]->op_type == "Softmax") return c[0]->outputs.at(0);
      t = c[0]->outputs.at(0);
    }
    return t;
  }

  const Graph& g_;
  std::set<std::string> inputs_;
  std::map<std::string, std::size_t> produced_;
  std::map<std::string, std::vector<std::size_t>> consumers_;
  std::map<std::string, bool> constant_;  // node outputs: no graph input behind them
};

}  // namespace

bool is_onnx_file(const std::string& file) {
  return std::filesystem::path(file).extension() == ".onnx";
}

namespace {

// What `ipusim import` writes for an imported graph: what was read, for eyes and for naming
// layers in a run config (not a model file: the graph is the model).
std::string graph_summary(const ModelDef& m) {
  const onnx::Graph& g = *m.onnx;
  graph::BuildOptions options;
  options.training = false;
  const graph::TensorGraph forward = graph::build_graph(m, options);
  std::ostringstream y;
  y << fmt::format(
      "# Imported by `ipusim import` from {} ({} ONNX nodes, opset {}) as a tensor graph.\n"
      "# `ipusim run --model` compiles the .onnx file itself; this is what was read. The layer\n"
      "# names are what run.recompute_checkpoints and run.pipeline_splits name.\n",
      printable(std::filesystem::path(g.file).filename().string()), g.nodes.size(), g.opset);
  y << fmt::format("graph:\n  name: {}\n  nodes: {}\n  opset: {}\n", m.name, g.nodes.size(),
                   g.opset);
  y << "  inputs:\n";
  for (const auto& v : g.inputs) {
    std::string dims;
    for (const auto& d : v.dims)
      dims += (dims.empty() ? "" : ", ") + (d ? std::to_string(*d) : std::string("batch"));
    y << fmt::format("    - {{name: \"{}\", dims: [{}]}}\n", printable(v.name), dims);
  }
  y << fmt::format("  parameters: {}\n  forward_flops_per_sample: {}\n", forward.parameters(),
                   forward.flops(true, false));
  y << "notes:\n";
  if (m.notes.empty()) y << "  []\n";
  for (const auto& n : m.notes) y << fmt::format("  - \"{}\"\n", printable(n));
  y << "layers:\n";
  for (const Layer& l : m.layers)
    y << fmt::format("  - {{name: \"{}\", op: {}}}\n", l.name, graph::name(l.op));
  return y.str();
}

}  // namespace

std::string import_onnx(const std::string& file) {
  const ImportedOnnx imported = import_onnx_model(file);
  return imported.graph ? graph_summary(*imported.graph) : imported.model_file;
}

namespace {

// An imported layer's op as the compiler's passes see it (its kind in provenance, whether it
// keeps its output), from its first graph node.
graph::Op layer_op(graph::Primitive p) {
  using P = graph::Primitive;
  using graph::Op;
  switch (p) {
    case P::kConv:
      return Op::kConv;
    case P::kBatchNorm:
      return Op::kBatchNorm;
    case P::kGroupNorm:
      return Op::kGroupNorm;
    case P::kRelu:
    case P::kClip:
      return Op::kRelu;
    case P::kSilu:
      return Op::kSwish;
    case P::kSigmoid:
      return Op::kSigmoid;
    case P::kMaxPool:
      return Op::kMaxPool;
    case P::kAvgPool:
    case P::kReduceMean:
      return Op::kAvgPool;
    case P::kAdd:
    case P::kSub:
      return Op::kAdd;
    case P::kMul:
      return Op::kScale;
    case P::kConcat:
      return Op::kConcat;
    case P::kResize:
      return Op::kUpsample;
    case P::kMatmul:
      return Op::kFc;
    case P::kSoftmaxCrossEntropy:
      return Op::kSoftmaxLoss;
    case P::kReshape:
    case P::kTranspose:
    case P::kSlice:
    case P::kExpand:
      return Op::kView;
    case P::kGelu:
    case P::kTanh:
    case P::kExp:
    case P::kErf:
    case P::kSqrt:
    case P::kRsqrt:
    case P::kNeg:
    case P::kCast:
    case P::kDropout:
    case P::kDiv:
    case P::kPow:
    case P::kWhere:
      return Op::kElementwise;
    default:
      return Op::kNode;
  }
}

// The model of family kGraph that ONNX graph `g` (read from `file`) is.
ModelDef graph_model(std::shared_ptr<onnx::Graph> g, const std::string& file) {
  ModelDef m;
  m.file = file;
  m.family = graph::Family::kGraph;
  std::string name = onnx::sanitise_name(g->name);
  if (name.empty() || name == "main_graph" || name == "torch_jit" || name == "torch-jit-export")
    name = onnx::sanitise_name(std::filesystem::path(file).stem().string());
  m.name = name.empty() ? "onnx-model" : name;
  m.dtype = trace::DType::kHalf;
  // Built once here, for one sample in training, so that a graph ipusim cannot import fails on
  // load, naming the node, and the layers are known.
  onnx::GraphImport report;
  onnx::GraphOptions options;
  options.dtype = m.dtype;
  (void)onnx::build_graph(*g, options, &report);
  for (const auto& l : report.layers) {
    Layer layer;
    layer.name = l.name;
    layer.op = layer_op(l.first);
    if (layer.op == graph::Op::kAdd && !l.residual) layer.op = graph::Op::kElementwise;  // a bias
    layer.at = fmt::format("{}: node '{}' ({})", file, l.name, l.op_type);
    m.layers.push_back(std::move(layer));
  }
  if (m.layers.size() > kMaxModelLayers)
    throw ConfigError(
        fmt::format("{}: its nodes make {} layers, expected at most {} (a model's "
                    "limit)",
                    file, m.layers.size(), kMaxModelLayers));
  if (report.images.size() == 3) {
    m.channels = report.images[0];
    m.height = report.images[1];
    m.width = report.images[2];
  }
  if (!report.output.empty()) m.classes = report.output.back();
  bool wide = false;
  for (const auto& [n, t] : g->initializers)
    wide = wide || t.elem_type == static_cast<std::int32_t>(ElemType::kFloat) ||
           t.elem_type == static_cast<std::int32_t>(ElemType::kDouble);
  if (wide)
    m.notes.push_back(
        "the file's float32 weights are held as float16, the run's precision (as PopTorch's "
        "model.half() and PopART's float16 graphs hold them)");
  for (auto& a : report.approximations) m.notes.push_back(std::move(a));
  m.onnx = std::move(g);
  return m;
}

}  // namespace

ImportedOnnx import_onnx_model(const std::string& file) {
  auto g = std::make_shared<onnx::Graph>(onnx::read_model(file));
  // A graph the transformer patterns read becomes their model file; one they refuse (a real
  // export's attention in another layout) is imported as its graph.
  if (Importer(*g, /*check=*/false).transformer()) {
    try {
      return {Importer(*g).import(), std::nullopt};
    } catch (const ConfigError&) {
    }
  }
  return {"", graph_model(std::move(g), file)};
}

std::uint64_t onnx_weight_elements(const std::string& file) {
  const onnx::Graph g = onnx::read_model(file);
  // Trainable weights: floating-point initializers of more than one element, less batch norm's
  // running statistics (its inputs 3 and 4).
  std::set<std::string> statistics;
  for (const auto& n : g.nodes)
    if (n.op_type == "BatchNormalization")
      for (std::size_t i = 3; i < n.inputs.size(); ++i) statistics.insert(n.inputs[i]);
  std::uint64_t total = 0;
  for (const auto& [name, t] : g.initializers) {
    const bool floating = t.elem_type == static_cast<std::int32_t>(ElemType::kFloat16) ||
                          t.elem_type == static_cast<std::int32_t>(ElemType::kFloat) ||
                          t.elem_type == static_cast<std::int32_t>(ElemType::kBfloat16);
    if (floating && t.elements() > 1 && !statistics.count(name)) total += t.elements();
  }
  return total;
}

}  // namespace ipusim::compiler
