// SPDX-License-Identifier: Apache-2.0
// The ONNX front end of the tensor graph (docs/onnx.md): every node of an exported graph
// becomes tensor-graph nodes, in graph order. What depends on no graph input is evaluated here
// instead: shape arithmetic (Shape, Gather, Concat, Range, Equal, Where, ConstantOfShape, casts
// of integer tensors ...) is folded to its values, and a view of a weight (a transpose, a cast)
// is the weight as its reader reads it. Shapes come from the primitives' own shape rules as the
// nodes are added (TensorGraph::add_node), with the graph's batch dimension bound to the run's
// micro-batch. The run's precision, not the file's, gives every floating-point tensor its type.
// A node ipusim cannot lower (recurrent layers, control flow, sampling) is an error naming it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "ipusim/compiler/graph/primitive.hpp"
#include "ipusim/trace/program.hpp"
#include "ipusim/util/error.hpp"
#include "onnx.hpp"

namespace ipusim::compiler::onnx {
namespace {

using graph::Attrs;
using graph::Dims;
using graph::Primitive;
using graph::Role;
using graph::TensorGraph;
using graph::TensorId;
using P = Primitive;

// Ops ipusim cannot lower, with what they are (named in the error).
const std::map<std::string, std::string, std::less<>> kRefused = {
    {"LSTM", "a recurrent layer"},
    {"GRU", "a recurrent layer"},
    {"RNN", "a recurrent layer"},
    {"Loop", "control flow"},
    {"If", "control flow"},
    {"Scan", "control flow"},
    {"GridSample", "sampling at data-dependent positions"},
    {"NonMaxSuppression", "a data-dependent selection"},
    {"NonZero", "a data-dependent shape"},
    {"RoiAlign", "sampling at data-dependent positions"},
    {"TopK", "a data-dependent selection"},
};

// The ops a computed tensor may pass through (lower), and those folded on constants only (fold),
// for the error that names an op outside both.
const std::vector<std::string_view> kLowered = {"Add",
                                                "AveragePool",
                                                "BatchNormalization",
                                                "Cast",
                                                "CastLike",
                                                "Clip",
                                                "Concat",
                                                "Conv",
                                                "Div",
                                                "Dropout",
                                                "Erf",
                                                "Exp",
                                                "Expand",
                                                "Flatten",
                                                "Gather",
                                                "Gelu",
                                                "Gemm",
                                                "GlobalAveragePool",
                                                "GlobalMaxPool",
                                                "GroupNormalization",
                                                "Identity",
                                                "InstanceNormalization",
                                                "LayerNormalization",
                                                "LogSoftmax",
                                                "MatMul",
                                                "MaxPool",
                                                "Mul",
                                                "Neg",
                                                "Pad",
                                                "Pow",
                                                "ReduceMax",
                                                "ReduceMean",
                                                "ReduceSum",
                                                "Relu",
                                                "Reshape",
                                                "Resize",
                                                "Sigmoid",
                                                "Slice",
                                                "Softmax",
                                                "Split",
                                                "Sqrt",
                                                "Squeeze",
                                                "Sub",
                                                "Tanh",
                                                "Transpose",
                                                "Unsqueeze",
                                                "Upsample",
                                                "Where"};
const std::vector<std::string_view> kFolded = {"Abs",
                                               "And",
                                               "Ceil",
                                               "Constant",
                                               "ConstantOfShape",
                                               "Equal",
                                               "Floor",
                                               "Greater",
                                               "GreaterOrEqual",
                                               "Less",
                                               "LessOrEqual",
                                               "Log",
                                               "Max",
                                               "Min",
                                               "Mod",
                                               "Not",
                                               "Or",
                                               "Range",
                                               "Reciprocal",
                                               "Shape",
                                               "Size",
                                               "Cos",
                                               "Sin",
                                               "Trilu",
                                               "CumSum",
                                               "Sign",
                                               "Round",
                                               "IsNaN",
                                               "IsInf",
                                               "Einsum"};

bool floating(std::int32_t elem) {
  return elem == static_cast<std::int32_t>(ElemType::kFloat) ||
         elem == static_cast<std::int32_t>(ElemType::kFloat16) ||
         elem == static_cast<std::int32_t>(ElemType::kDouble) ||
         elem == static_cast<std::int32_t>(ElemType::kBfloat16);
}

std::string dims_text(const std::vector<std::int64_t>& d) {
  std::string s;
  for (const auto v : d) s += (s.empty() ? "" : ", ") + std::to_string(v);
  return "[" + s + "]";
}

// A value held as a double as an integer (clamped: a huge or NaN index is no crash).
std::int64_t to_int(double x) {
  constexpr double kLimit = 9.2e18;
  if (std::isnan(x)) return 0;
  if (x >= kLimit) return std::numeric_limits<std::int64_t>::max();
  if (x <= -kLimit) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(x);
}

// The largest dimension a constant shape may give (as the reader allows an initializer's).
constexpr std::int64_t kMaxDimension = std::int64_t{1} << 32;

// Elements of a shape, saturating at 2^62 (shapes are checked before they are used: set()).
std::int64_t product(const std::vector<std::int64_t>& d) {
  constexpr std::int64_t kMax = std::int64_t{1} << 62;
  std::int64_t p = 1;
  for (const auto v : d) {
    if (v <= 0) return v == 0 ? 0 : -1;
    p = p > kMax / v ? kMax : p * v;
  }
  return p;
}

// What an ONNX value is during import: a tensor of the graph, or a constant the graph does not
// compute (its shape, its values when they are integers or scalars, and the initializer it is
// a view of when it holds weights).
struct Value {
  std::optional<TensorId> tensor;
  std::vector<std::int64_t> dims;             // a constant's
  std::optional<std::vector<double>> values;  // known values (shape arithmetic, scalars)
  std::string source;                         // the initializer whose data it is a view of
  // A matrix view of `source` read transposed (its dims are the source's swapped): torch's
  // tied LM head exported without constant folding, Transpose(embedding table) into a MatMul.
  bool transposed = false;
  bool integer = false;
  // Computed from the graph's integer inputs alone (token ids, a padding mask from them): fed
  // from the host as an input when a computed tensor reads it, as Graphcore's BERT feeds its
  // mask. `input` names the graph input when it is one.
  bool host = false;
  std::string input;
  bool is_tensor() const { return tensor.has_value(); }
};

class GraphImporter {
 public:
  GraphImporter(const Graph& g, const GraphOptions& o, GraphImport* report)
      : g_(g), o_(o), report_(report) {}

  TensorGraph build() {
    for (const auto& [name, t] : g_.initializers) {
      Value v = constant_of(t);
      if (v.values && static_cast<std::int64_t>(v.values->size()) != product(v.dims))
        v.values.reset();
      values_[name] = std::move(v);
    }
    for (const Node& n : g_.nodes)
      for (const auto& in : n.inputs)
        if (!in.empty()) consumers_[in].push_back(&n);
    for (const Node& n : g_.nodes)
      for (const auto& out : n.outputs) producers_[out] = &n;
    find_gelus();
    inputs();
    for (const Node& n : g_.nodes) node(n);
    finish();
    return std::move(out_);
  }

 private:
  // ---- errors and names -----------------------------------------------------------------
  [[noreturn]] void unsupported(const Node& n) const {
    fail(n, fmt::format("op {} is not supported; ipusim imports {} (and folds {} where every "
                        "input is a constant)",
                        n.op_type, fmt::join(kLowered, ", "), fmt::join(kFolded, ", ")));
  }
  [[noreturn]] void fail(const Node& n, const std::string& what) const {
    throw ConfigError(fmt::format("{}: node '{}' ({}): {}", g_.file, display(n), n.op_type, what));
  }
  std::string display(const Node& n) const {
    if (!n.name.empty()) return n.name;
    const auto i = static_cast<std::size_t>(&n - g_.nodes.data());
    return "#" + std::to_string(i);
  }
  // The layer a node's graph nodes belong to: its name as a trace name, unique.
  std::string layer_name(const Node& n) {
    std::string base = sanitise_name(display(n));
    if (base.empty()) base = "node";
    std::uint64_t& next = next_suffix_[base];
    std::string name = base;
    if (next == 0) next = 2;
    while (layer_names_.count(name)) name = fmt::format("{}_{}", base, next++);
    layer_names_.insert(name);
    return name;
  }

  // ---- values ---------------------------------------------------------------------------
  // An initializer's value: floating-point ones are weights (their data the source) when a
  // computed tensor reads them; a Constant node's is a constant (`weight` false).
  Value constant_of(const Tensor& t, bool weight = true) const {
    Value v;
    v.dims = t.dims;
    v.integer = !floating(t.elem_type);
    if (v.integer && !t.ints.empty())
      v.values = std::vector<double>(t.ints.begin(), t.ints.end());
    else if (v.integer && t.elements() == 0)
      v.values = std::vector<double>{};
    if (!t.floats.empty()) v.values = std::vector<double>(t.floats.begin(), t.floats.end());
    if (!v.integer && weight) v.source = t.name;
    return v;
  }
  const Value& value(const Node& n, const std::string& name) const {
    const auto it = values_.find(name);
    if (it == values_.end())
      fail(n, fmt::format("input '{}' is not a graph input, an initializer or the output of an "
                          "earlier node (ONNX lists nodes in topological order)",
                          name));
    return it->second;
  }
  const Value& in(const Node& n, std::size_t i) const {
    if (i >= n.inputs.size() || n.inputs[i].empty())
      fail(n, fmt::format("expected input {} ({} given)", i + 1, n.inputs.size()));
    return value(n, n.inputs[i]);
  }
  bool has_in(const Node& n, std::size_t i) const {
    return i < n.inputs.size() && !n.inputs[i].empty();
  }
  // The dims of any value.
  std::vector<std::int64_t> dims(const Value& v) const {
    if (!v.is_tensor()) return v.dims;
    const Dims& d = out_.tensor(*v.tensor).dims;
    return {d.begin(), d.end()};
  }
  // A constant's known integer values (shape arithmetic), or an error.
  std::vector<std::int64_t> ints(const Node& n, std::size_t i, const char* what) const {
    const Value& v = in(n, i);
    if (v.is_tensor() || !v.values)
      fail(n, fmt::format("its {} (input {}) must be a constant known at import (computed from "
                          "shapes and initializers, not from the data)",
                          what, i + 1));
    std::vector<std::int64_t> out;
    // (Values are held as doubles: exact below 2^53; INT64_MAX and MIN, a slice's "to the
    // end", come back as themselves.)
    for (const double x : *v.values) out.push_back(to_int(x));
    return out;
  }
  double scalar(const Node& n, std::size_t i, double fallback) const {
    if (!has_in(n, i)) return fallback;
    const Value& v = in(n, i);
    if (v.is_tensor() || !v.values || v.values->size() != 1) return fallback;
    return v.values->front();
  }
  void set(const Node& n, std::size_t i, Value v) {
    if (!v.is_tensor()) {
      // A constant's shape is a shape (0 to 2^32 per dimension), and its known values are as
      // many as it has elements (else unknown: an inline tensor of another count).
      for (const auto d : v.dims)
        if (d < 0 || d > kMaxDimension)
          fail(n,
               fmt::format("a constant of shape {}: dimensions are 0 to 2^32", dims_text(v.dims)));
      if (v.values && static_cast<std::int64_t>(v.values->size()) != product(v.dims))
        v.values.reset();
    }
    if (i < n.outputs.size() && !n.outputs[i].empty()) values_[n.outputs[i]] = std::move(v);
  }
  void set_tensor(const Node& n, TensorId t, std::size_t i = 0) {
    Value v;
    v.tensor = t;
    set(n, i, std::move(v));
  }

  // A value as a graph tensor: a computed one, a weight (a floating-point initializer of more
  // than one element, as its reader reads it), or a constant (a scalar, a mask).
  TensorId tensor(const Node& n, std::size_t i, Role constant_role = Role::kConstant) {
    const Value& v = in(n, i);
    if (v.is_tensor()) return *v.tensor;
    const Dims d = to_dims(n, v.dims);
    const trace::DType dt = v.integer ? trace::DType::kInt : o_.dtype;
    if (v.host) {
      const std::string& name = n.inputs[i];
      if (const auto it = host_.find(name); it != host_.end()) return it->second;
      const std::string tensor_name =
          v.input.empty() ? fmt::format("{}.host{}", current_, constants_++) : v.input;
      const TensorId t = out_.input(sanitise_name(tensor_name), d, dt, Role::kInput);
      host_.emplace(name, t);
      return t;
    }
    if (!v.source.empty() && !v.integer && graph::elements(d) > 1) {
      const auto key = std::make_pair(v.source, d);
      const auto it = weights_.find(key);
      if (it != weights_.end()) return it->second;
      const TensorId w = out_.weight(sanitise_name(v.source), d, dt);
      weights_.emplace(key, w);
      return w;
    }
    return out_.input(fmt::format("{}.constant{}", current_, constants_++), d, dt, constant_role);
  }
  // A weight value read with other dims (the same elements).
  TensorId weight_as(const Node& n, const Value& v, const std::vector<std::int64_t>& d) {
    if (v.is_tensor() || v.source.empty()) fail(n, "the weight is not an initializer");
    const Dims dd = to_dims(n, d);
    const auto key = std::make_pair(v.source, dd);
    if (const auto it = weights_.find(key); it != weights_.end()) return it->second;
    const TensorId w = out_.weight(sanitise_name(v.source), dd, o_.dtype);
    weights_.emplace(key, w);
    return w;
  }
  Dims to_dims(const Node& n, const std::vector<std::int64_t>& d) const {
    Dims out;
    for (const auto x : d) {
      if (x < 0) fail(n, fmt::format("a negative dimension in {}", dims_text(d)));
      out.push_back(static_cast<std::uint64_t>(x));
    }
    return out;
  }
  // Adds a graph node for ONNX node `n`, its layer the node's; shape errors name the node.
  std::vector<TensorId> add_all(const Node& n, P op, std::vector<TensorId> ins, Attrs a = {}) {
    try {
      return out_.add_node(op, std::move(ins), std::move(a));
    } catch (const ConfigError& e) {
      fail(n, e.what() + batch_hint());
    }
  }
  // For a shape error of a graph exported with another batch than the run's: why, likely.
  std::string batch_hint() const {
    if (!exported_batch_ || *exported_batch_ == o_.batch) return "";
    return fmt::format(
        " (the graph was exported with a fixed batch of {}, which its constant shapes keep; "
        "this run's batch is {}: export with a dynamic batch, torch.onnx.export(..., "
        "dynamic_axes={{'input': {{0: 'batch'}}}}), or run it with micro-batch {})",
        *exported_batch_, o_.batch, *exported_batch_);
  }
  TensorId add(const Node& n, P op, std::vector<TensorId> ins, Attrs a = {}) {
    return add_all(n, op, std::move(ins), std::move(a)).front();
  }

  // ---- graph inputs ---------------------------------------------------------------------
  void inputs() {
    out_.set_layer("");
    for (const auto& v : g_.inputs) {
      Dims d;
      for (std::size_t i = 0; i < v.dims.size(); ++i) {
        if (v.dims[i]) {
          d.push_back(static_cast<std::uint64_t>(*v.dims[i]));
          continue;
        }
        if (i != 0)
          throw ConfigError(fmt::format(
              "{}: graph input '{}': dimension {} is symbolic; only the batch (the first) may "
              "be: export with fixed sizes for the others",
              g_.file, v.name, i));
        d.push_back(o_.batch);
      }
      // The exported batch (a fixed first dimension) is the run's: shapes computed from the
      // inputs follow it; constant shapes that name it are rebound where they are read.
      if (!d.empty() && v.dims[0]) {
        if (!exported_batch_) exported_batch_ = d[0];
        d[0] = o_.batch;
      }
      Value val;
      if (floating(v.elem_type) && d.size() == 4) {
        // Images: streamed from the host as 8-bit values, cast and normalised on the IPU, as
        // Graphcore's examples feed them (a model file's CNN does the same).
        Attrs cast;
        cast.dtype = o_.dtype;
        TensorId x =
            out_.add(P::kCast, {out_.input(sanitise_name(v.name), d, trace::DType::kChar)}, cast);
        x = out_.add(P::kSub, {x, out_.input("mean", {d[1], 1, 1}, o_.dtype, Role::kConstant)});
        val.tensor =
            out_.add(P::kMul, {x, out_.input("1/std", {d[1], 1, 1}, o_.dtype, Role::kConstant)});
        if (report_) report_->images = {d[1], d[2], d[3]};
      } else if (!floating(v.elem_type)) {
        // Token ids and the like: what the graph computes from them alone is the host's.
        val.integer = true;
        val.host = true;
        val.input = v.name;
        for (const auto x : d) val.dims.push_back(static_cast<std::int64_t>(x));
      } else {
        val.tensor = out_.input(sanitise_name(v.name), d, o_.dtype);
      }
      values_[v.name] = val;
    }
  }

  // ---- nodes ----------------------------------------------------------------------------
  void node(const Node& n) {
    if (!n.domain.empty() && n.domain != "ai.onnx")
      fail(n, fmt::format("ops of domain '{}' are not supported (only the default ONNX domain)",
                          n.domain));
    if (const auto it = kRefused.find(n.op_type); it != kRefused.end())
      fail(n, fmt::format("op {} is {}, which ipusim does not model", n.op_type, it->second));
    if (n.outputs.empty()) fail(n, "a node without an output");
    if (gelu_parts_.count(&n)) return;  // (computed by its GELU's last node)
    if (const auto it = gelus_.find(&n); it != gelus_.end()) return gelu(n, it->second);
    // Computed: it reads a computed tensor, or host data with weights (an embedding lookup).
    const auto reads = [&](auto pred) {
      return std::any_of(n.inputs.begin(), n.inputs.end(),
                         [&](const auto& name) { return !name.empty() && pred(value(n, name)); });
    };
    const bool computed = reads([](const Value& v) { return v.is_tensor(); }) ||
                          (reads([](const Value& v) { return v.host; }) &&
                           reads([](const Value& v) { return !v.source.empty(); }));
    // Constants fold, and so does the shape of a computed tensor (known at import).
    if (!computed || n.op_type == "Shape" || n.op_type == "Size") return fold(n);
    current_ = layer_name(n);
    out_.set_layer(current_, display(n));
    const std::size_t before = out_.nodes().size();
    lower(n);
    if (out_.nodes().size() > before) {
      // Its op: the first node that is not a view (a 1x1 conv's matmul after its reshape).
      std::size_t first = before;
      for (std::size_t i = before; i < out_.nodes().size(); ++i) {
        const P op = out_.nodes()[i].op;
        if (op != P::kReshape && op != P::kTranspose) {
          first = i;
          break;
        }
      }
      const graph::Node& main = out_.nodes()[first];
      // An add of two computed tensors (a residual), not of a weight (a bias).
      const bool residual = (main.op == P::kAdd || main.op == P::kSub) &&
                            std::all_of(main.inputs.begin(), main.inputs.end(), [&](TensorId t) {
                              return out_.tensor(t).role == Role::kActivation;
                            });
      layers_.push_back({current_, n.op_type, main.op, residual});
    }
  }

  // ---- GELU written out ------------------------------------------------------------------
  // torch (before opset 20) exports GELU as its formula: 0.5 x (1 + erf(x / sqrt 2)), or the
  // tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). PopTorch runs F.gelu as one
  // op (popnn's GELU nonlinearity), so each match is one GELU: its last node computes it, and
  // the others, read by the match only, are skipped.
  // (Nodes of another arity than the pattern's are not matched: the op's own check reports
  // them.)
  void find_gelus() {
    for (const Node& n : g_.nodes)
      if ((n.op_type == "Erf" || n.op_type == "Tanh") && n.inputs.size() == 1 &&
          n.outputs.size() == 1)
        match_gelu(n);
  }
  const Node* producer_of(const std::string& name) const {
    const auto it = producers_.find(name);
    return it == producers_.end() ? nullptr : it->second;
  }
  // The node that alone reads `name`, if it is a `op_type`.
  const Node* only_reader(const std::string& name, std::string_view op_type) const {
    const auto it = consumers_.find(name);
    if (it == consumers_.end() || it->second.size() != 1) return nullptr;
    const Node* r = it->second.front();
    const bool binary = op_type == "Mul" || op_type == "Add";  // (two inputs, or no match)
    return r->op_type == op_type && (!binary || r->inputs.size() == 2) ? r : nullptr;
  }
  // A scalar constant's value (a one-element initializer or Constant).
  std::optional<double> scalar_constant(const std::string& name) const {
    std::optional<Value> v;
    if (const auto it = g_.initializers.find(name); it != g_.initializers.end())
      v = constant_of(it->second);
    else if (const Node* p = producer_of(name); p && p->op_type == "Constant")
      if (const Attribute* a = p->attribute("value"); a && a->t) v = constant_of(*a->t, false);
    if (!v || !v->values || v->values->size() != 1) return std::nullopt;
    return v->values->front();
  }
  bool is_scalar(const std::string& name, double want) const {
    const auto v = scalar_constant(name);
    return v && std::abs(*v - want) <= 1e-3 * std::abs(want);
  }
  // The operand of a two-input node other than `name` (empty when both or neither are it).
  static std::string other_operand(const Node& n, const std::string& name) {
    if (n.inputs[0] == name && n.inputs[1] != name) return n.inputs[1];
    if (n.inputs[1] == name && n.inputs[0] != name) return n.inputs[0];
    return {};
  }
  // The operand of a two-input node that is not the scalar `c`, when the other is.
  std::string times_scalar(const Node* n, double c) const {
    if (n == nullptr || n->inputs.size() != 2) return {};
    if (is_scalar(n->inputs[1], c)) return n->inputs[0];
    if (is_scalar(n->inputs[0], c)) return n->inputs[1];
    return {};
  }
  void match_gelu(const Node& f) {
    std::vector<const Node*> parts{&f};
    // The argument: x / sqrt 2 (erf), or sqrt(2/pi) (x + 0.044715 x^3) (tanh).
    const Node* arg = producer_of(f.inputs[0]);
    if (arg == nullptr || arg->inputs.size() != 2 || only_reader(arg->outputs[0], f.op_type) != &f)
      return;
    std::string x;
    if (f.op_type == "Erf") {
      if (arg->op_type == "Div" && is_scalar(arg->inputs[1], std::sqrt(2.0))) x = arg->inputs[0];
      if (arg->op_type == "Mul") x = times_scalar(arg, 1 / std::sqrt(2.0));
      if (x.empty()) return;
      parts.push_back(arg);
    } else {
      if (arg->op_type != "Mul") return;
      const std::string inner = times_scalar(arg, std::sqrt(2 / std::acos(-1.0)));
      const Node* sum = producer_of(inner);
      if (sum == nullptr || sum->op_type != "Add" || sum->inputs.size() != 2 ||
          only_reader(inner, "Mul") != arg)
        return;
      for (std::size_t i = 0; i < 2 && x.empty(); ++i) {
        const Node* term = producer_of(sum->inputs[1 - i]);
        if (term == nullptr || term->op_type != "Mul" ||
            only_reader(term->outputs[0], "Add") != sum)
          continue;
        const std::string cube = times_scalar(term, 0.044715);
        if (is_cube(cube, sum->inputs[i], parts)) {
          x = sum->inputs[i];
          parts.insert(parts.end(), {arg, sum, term});
        }
      }
      if (x.empty()) return;
    }
    // 1 + f, then the product with x and 0.5 in either order.
    const Node* one = only_reader(f.outputs[0], "Add");
    if (one == nullptr || !is_scalar(other_operand(*one, f.outputs[0]), 1.0)) return;
    parts.push_back(one);
    std::string at = one->outputs[0];
    bool has_x = false, has_half = false;
    const Node* last = nullptr;
    while (!(has_x && has_half)) {
      const Node* m = only_reader(at, "Mul");
      if (m == nullptr) return;
      const std::string other = other_operand(*m, at);
      const Node* half_x = producer_of(other);
      if (other == x && !has_x) {
        has_x = true;
      } else if (is_scalar(other, 0.5) && !has_half) {
        has_half = true;
      } else if (!has_x && !has_half && half_x && half_x->op_type == "Mul" &&
                 times_scalar(half_x, 0.5) == x && only_reader(other, "Mul") == m) {
        has_x = has_half = true;
        parts.push_back(half_x);
      } else {
        return;
      }
      if (last) parts.push_back(last);
      last = m;
      at = m->outputs[0];
    }
    for (const Node* p : parts) gelu_parts_.insert(p);
    gelus_.emplace(last, x);
  }
  // Whether `cube` is x^3: Pow(x, 3), or x * (x * x) in any order (its parts read by the
  // match only, added to `parts`).
  bool is_cube(const std::string& cube, const std::string& x, std::vector<const Node*>& parts) {
    const Node* c = producer_of(cube);
    if (c == nullptr || c->inputs.size() != 2) return false;
    if (c->op_type == "Pow") {
      if (c->inputs[0] != x || !is_scalar(c->inputs[1], 3)) return false;
      parts.push_back(c);
      return true;
    }
    if (c->op_type != "Mul") return false;
    const std::string sq = other_operand(*c, x);
    const Node* s = producer_of(sq);
    if (s == nullptr || s->op_type != "Mul" || s->inputs.size() != 2 || s->inputs[0] != x ||
        s->inputs[1] != x || only_reader(sq, "Mul") != c)
      return false;
    parts.insert(parts.end(), {c, s});
    return true;
  }
  void gelu(const Node& n, const std::string& x) {
    const Value& v = value(n, x);
    if (!v.is_tensor()) fail(n, "a GELU of a constant");
    current_ = layer_name(n);
    out_.set_layer(current_, display(n));
    layers_.push_back({current_, n.op_type, P::kGelu, false});
    set_tensor(n, add(n, P::kGelu, {*v.tensor}));
  }

  // A node whose inputs are all constants: its outputs are constants (values where they can
  // be computed: integers and scalars; a view of a weight keeps its source).
  void fold(const Node& n) {
    if (!fold_source(n) && !fold_view(n) && !fold_data(n)) fold_elementwise(n);
  }
  // Constants made from attributes and shapes only.
  bool fold_source(const Node& n) {
    const std::string& op = n.op_type;
    if (op == "Constant") {
      const Attribute* a = n.attribute("value");
      if (a && a->t) {
        set(n, 0, constant_of(*a->t, /*weight=*/false));
        return true;
      }
      Value v;
      if (const Attribute* f = n.attribute("value_float"); f && f->f) {
        v.values = std::vector<double>{*f->f};
      } else if (const Attribute* i = n.attribute("value_int"); i && i->i) {
        v.values = std::vector<double>{static_cast<double>(*i->i)};
        v.integer = true;
      } else if (const Attribute* is = n.attribute("value_ints")) {
        v.values = std::vector<double>(is->ints.begin(), is->ints.end());
        v.dims = {static_cast<std::int64_t>(is->ints.size())};
        v.integer = true;
      } else {
        fail(n,
             "a Constant without a value this importer reads (value, value_float, value_int "
             "or value_ints)");
      }
      set(n, 0, std::move(v));
      return true;
    }
    if (op == "Shape") {
      auto d = dims(in(n, 0));
      const auto rank = static_cast<std::int64_t>(d.size());
      std::int64_t start = n.int_attr("start", 0), end = n.int_attr("end", rank);
      start = std::clamp(start < 0 ? start + rank : start, std::int64_t{0}, rank);
      end = std::clamp(end < 0 ? end + rank : end, std::int64_t{0}, rank);
      Value v;
      v.integer = true;
      v.values = std::vector<double>(d.begin() + start, d.begin() + std::max(start, end));
      v.dims = {static_cast<std::int64_t>(v.values->size())};
      set(n, 0, std::move(v));
      return true;
    }
    if (op == "Size") {
      Value v;
      v.integer = true;
      v.values = std::vector<double>{static_cast<double>(product(dims(in(n, 0))))};
      set(n, 0, std::move(v));
      return true;
    }
    if (op == "ConstantOfShape") {
      Value y;
      const auto shape = ints(n, 0, "shape");
      y.dims = shape;
      y.source.clear();
      double fill = 0;
      y.integer = false;
      if (const Attribute* a = n.attribute("value"); a && a->t) {
        y.integer = !floating(a->t->elem_type);
        if (!a->t->ints.empty()) fill = static_cast<double>(a->t->ints.front());
        if (!a->t->floats.empty()) fill = a->t->floats.front();
      }
      const std::int64_t count = product(shape);
      if (count >= 0 && count <= (1 << 16))
        y.values = std::vector<double>(static_cast<std::size_t>(count), fill);
      set(n, 0, std::move(y));
      return true;
    }
    if (op == "Range") {
      Value y;
      const double start = scalar(n, 0, 0), limit = scalar(n, 1, 0), delta = scalar(n, 2, 1);
      if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta))
        fail(n, "a range needs a finite start, limit and a step other than 0");
      y.values = std::vector<double>{};
      for (double v = start; delta > 0 ? v < limit : v > limit; v += delta) {
        y.values->push_back(v);
        if (y.values->size() > (1 << 20)) fail(n, "a range of more than 2^20 values");
      }
      y.dims = {static_cast<std::int64_t>(y.values->size())};
      y.integer = in(n, 0).integer;
      set(n, 0, std::move(y));
      return true;
    }
    return false;
  }
  // A constant made from `x`: its kind (integer, host data, the weight it views), no shape or
  // values yet.
  static Value derived(const Value& x) {
    Value y;
    y.integer = x.integer;
    y.source = x.source;
    y.host = x.host;
    return y;
  }
  // A view of one constant: its shape changed, its values kept.
  bool fold_view(const Node& n) {
    const std::string& op = n.op_type;
    const Value& x = in(n, 0);
    Value y = derived(x);
    if (op == "Identity" || op == "Dropout" || op == "Cast" || op == "CastLike") {
      y = x;
      // torch writes a parameter equal in value to another as an Identity of it: its own
      // weight, not a second read of the other.
      if (op == "Identity" && !y.source.empty()) y.source = n.outputs[0];
      if (op == "Cast") {
        const std::int32_t to = static_cast<std::int32_t>(n.int_attr("to", 1));
        y.integer = !floating(to);
        if (y.integer && y.values)
          for (double& e : *y.values) e = std::trunc(e);
      }
      set(n, 0, std::move(y));
      return true;
    }
    if (op == "Reshape") {
      y.dims = reshape_dims(n, dims(x), ints(n, 1, "shape"));
      y.values = x.values;
      set(n, 0, std::move(y));
      return true;
    }
    if (op == "Flatten") {
      const auto d = dims(x);
      const std::int64_t axis = normalise_axis(n, n.int_attr("axis", 1), d.size() + 1);
      y.dims = {product({d.begin(), d.begin() + axis}), product({d.begin() + axis, d.end()})};
      y.values = x.values;
      set(n, 0, std::move(y));
      return true;
    }
    if (op == "Unsqueeze" || op == "Squeeze") {
      y.dims = squeezed(n, dims(x), op == "Unsqueeze");
      y.values = x.values;
      set(n, 0, std::move(y));
      return true;
    }
    if (op == "Transpose") {
      const auto d = dims(x);
      const auto perm = permutation(n, d.size());
      for (const auto p : perm) y.dims.push_back(d[p]);
      if (x.values && product(d) > 1) y.values.reset();  // (values are not permuted)
      y.transposed = !y.source.empty() && d.size() == 2 && perm[0] == 1 && !x.transposed;
      set(n, 0, std::move(y));
      return true;
    }
    return false;
  }
  // Constants made of parts of others.
  bool fold_data(const Node& n) {
    const std::string& op = n.op_type;
    const Value& x = in(n, 0);
    Value y = derived(x);
    if (op == "Concat") {
      const auto d0 = dims(x);
      const std::int64_t axis = normalise_axis(n, n.int_attr("axis", 0), d0.size());
      y.dims = d0;
      y.values = std::vector<double>{};
      y.dims[axis] = 0;
      for (std::size_t i = 0; i < n.inputs.size(); ++i) {
        const Value& v = in(n, i);
        y.dims[axis] += dims(v)[axis];
        y.host = y.host || v.host;
        if (v.values && y.values)
          y.values->insert(y.values->end(), v.values->begin(), v.values->end());
        else
          y.values.reset();
      }
      if (d0.size() != 1) y.values.reset();
      y.source.clear();
      set(n, 0, std::move(y));
      return true;
    }
    if (op == "Gather") {
      const auto d = dims(x);
      const Value& idx = in(n, 1);
      const std::int64_t axis = normalise_axis(n, n.int_attr("axis", 0), d.size());
      const auto id = dims(idx);
      y.dims.assign(d.begin(), d.begin() + axis);
      y.dims.insert(y.dims.end(), id.begin(), id.end());
      y.dims.insert(y.dims.end(), d.begin() + axis + 1, d.end());
      if (x.values && idx.values && d.size() == 1) {
        y.values = std::vector<double>{};
        for (double i : *idx.values) {
          auto k = to_int(i);
          if (k < 0) k += d[0];
          if (k < 0 || k >= d[0] || k >= static_cast<std::int64_t>(x.values->size()))
            fail(n, fmt::format("index {} of {} values", i, d[0]));
          y.values->push_back((*x.values)[static_cast<std::size_t>(k)]);
        }
      } else {
        y.values.reset();
      }
      set(n, 0, std::move(y));
      return true;
    }
    if (op == "Slice") {
      const auto d = dims(x);
      const auto starts = ints(n, 1, "starts"), ends = ints(n, 2, "ends");
      std::vector<std::int64_t> axes(starts.size()), steps(starts.size(), 1);
      std::iota(axes.begin(), axes.end(), 0);
      if (has_in(n, 3)) axes = ints(n, 3, "axes");
      if (has_in(n, 4)) steps = ints(n, 4, "steps");
      y.dims = d;
      std::vector<std::int64_t> from(d.size(), 0), step(d.size(), 1);
      for (std::size_t i = 0; i < axes.size() && i < starts.size() && i < ends.size(); ++i) {
        if (i >= steps.size() || steps[i] == 0) fail(n, "a slice with a step of 0");
        const std::int64_t a = normalise_axis(n, axes[i], d.size());
        const auto [b, e] = slice_range(starts[i], ends[i], steps[i], d[a]);
        from[a] = b;
        step[a] = steps[i];
        y.dims[a] = steps[i] > 0 ? std::max<std::int64_t>(0, (e - b + steps[i] - 1) / steps[i])
                                 : std::max<std::int64_t>(0, (b - e - steps[i] - 1) / -steps[i]);
      }
      if (x.values && d.size() == 1) {
        std::vector<double> v;
        for (std::int64_t i = 0; i < y.dims[0]; ++i) {
          const std::int64_t at = from[0] + i * step[0];
          if (at < 0 || at >= static_cast<std::int64_t>(x.values->size())) break;
          v.push_back((*x.values)[static_cast<std::size_t>(at)]);
        }
        y.values = std::move(v);
      } else {
        y.values.reset();
      }
      set(n, 0, std::move(y));
      return true;
    }
    if (op == "Expand") {
      const auto shape = ints(n, 1, "shape");
      y.dims = broadcast(n, dims(x), shape);
      if (x.values && x.values->size() == 1 && product(y.dims) >= 0 && product(y.dims) <= (1 << 16))
        y.values = std::vector<double>(static_cast<std::size_t>(product(y.dims)), x.values->at(0));
      else
        y.values.reset();
      set(n, 0, std::move(y));
      return true;
    }
    if (op == "Split") {
      const auto d = dims(x);
      const std::int64_t axis = normalise_axis(n, n.int_attr("axis", 0), d.size());
      const auto sizes = split_sizes(n, d[axis]);
      std::size_t from = 0;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        Value part = y;
        part.dims = d;
        part.dims[axis] = sizes[i];
        // A vector's parts keep their values (shape arithmetic split into its dimensions).
        const auto to = from + static_cast<std::size_t>(sizes[i]);
        if (d.size() == 1 && x.values && to <= x.values->size())
          part.values = std::vector<double>(x.values->begin() + static_cast<std::ptrdiff_t>(from),
                                            x.values->begin() + static_cast<std::ptrdiff_t>(to));
        from = to;
        set(n, i, std::move(part));
      }
      return true;
    }
    return false;
  }
  // Elementwise ops of constants, or an error.
  void fold_elementwise(const Node& n) {
    const std::string& op = n.op_type;
    const Value& x = in(n, 0);
    // Elementwise ops of constants: the broadcast shape; values where all are known.
    static const std::map<std::string, double (*)(double, double), std::less<>> kBinary = {
        {"Add", [](double a, double b) { return a + b; }},
        {"Sub", [](double a, double b) { return a - b; }},
        {"Mul", [](double a, double b) { return a * b; }},
        {"Div", [](double a, double b) { return b == 0 ? 0 : a / b; }},
        {"Pow", [](double a, double b) { return std::pow(a, b); }},
        {"Max", [](double a, double b) { return std::max(a, b); }},
        {"Min", [](double a, double b) { return std::min(a, b); }},
        {"Mod", [](double a, double b) { return b == 0 ? 0 : std::fmod(a, b); }},
        {"Equal", [](double a, double b) { return a == b ? 1.0 : 0.0; }},
        {"Less", [](double a, double b) { return a < b ? 1.0 : 0.0; }},
        {"LessOrEqual", [](double a, double b) { return a <= b ? 1.0 : 0.0; }},
        {"Greater", [](double a, double b) { return a > b ? 1.0 : 0.0; }},
        {"GreaterOrEqual", [](double a, double b) { return a >= b ? 1.0 : 0.0; }},
        {"And", [](double a, double b) { return a != 0 && b != 0 ? 1.0 : 0.0; }},
        {"Or", [](double a, double b) { return a != 0 || b != 0 ? 1.0 : 0.0; }},
    };
    static const std::map<std::string, double (*)(double), std::less<>> kUnary = {
        {"Neg", [](double a) { return -a; }},
        {"Sqrt", [](double a) { return std::sqrt(a); }},
        {"Floor", [](double a) { return std::floor(a); }},
        {"Ceil", [](double a) { return std::ceil(a); }},
        {"Not", [](double a) { return a == 0 ? 1.0 : 0.0; }},
        {"Abs", [](double a) { return std::abs(a); }},
        {"Reciprocal", [](double a) { return a == 0 ? 0 : 1 / a; }},
        {"Exp", [](double a) { return std::exp(a); }},
        {"Log", [](double a) { return a <= 0 ? 0 : std::log(a); }},
        {"Sigmoid", [](double a) { return 1 / (1 + std::exp(-a)); }},
        {"Tanh", [](double a) { return std::tanh(a); }},
        {"Erf", [](double a) { return std::erf(a); }},
        {"Relu", [](double a) { return std::max(a, 0.0); }},
        {"Cos", [](double a) { return std::cos(a); }},
        {"Sin", [](double a) { return std::sin(a); }},
    };
    const bool comparison = op == "Equal" || op == "Less" || op == "LessOrEqual" ||
                            op == "Greater" || op == "GreaterOrEqual" || op == "And" ||
                            op == "Or" || op == "Not";
    if (const auto b = kBinary.find(op); b != kBinary.end()) {
      return set(n, 0, elementwise(n, {&in(n, 0), &in(n, 1)}, comparison, [&](auto v) {
                   return b->second(v[0], v[1]);
                 }));
    }
    if (const auto u = kUnary.find(op); u != kUnary.end())
      return set(n, 0, elementwise(n, {&x}, comparison, [&](auto v) { return u->second(v[0]); }));
    if (op == "Where")
      return set(n, 0, elementwise(n, {&in(n, 0), &in(n, 1), &in(n, 2)}, false, [](auto v) {
                   return v[0] != 0 ? v[1] : v[2];
                 }));
    // Ops of constants whose result has their operand's shape (a causal mask's Trilu): the
    // shape, its values unknown.
    if (op == "Trilu" || op == "CumSum" || op == "Sign" || op == "Round" || op == "IsNaN" ||
        op == "IsInf") {
      Value y = x;
      y.values.reset();
      y.integer = x.integer || op == "IsNaN" || op == "IsInf";
      return set(n, 0, std::move(y));
    }
    if (op == "Einsum") return set(n, 0, einsum(n));
    if (std::find(kLowered.begin(), kLowered.end(), op) == kLowered.end()) unsupported(n);
    // Any other op of constants (a weight computed at load, a reduction of constants): its
    // result's shape is the node's, which only computing it would give; say so.
    fail(n, fmt::format("op {} on constants only is not folded by the importer; export with "
                        "constant folding (do_constant_folding=True)",
                        op));
  }

  // An Einsum of constants (torch.outer of two ranges: rotary embedding angles): the shape
  // its equation gives, the values unknown. Each letter takes the size of the first operand
  // dimension it names; "..." is not read.
  Value einsum(const Node& n) const {
    const Attribute* eq = n.attribute("equation");
    if (!eq || eq->s.find("...") != std::string::npos || eq->s.find("->") == std::string::npos)
      fail(n, "an Einsum without an explicit equation (\"ij,jk->ik\") is not read");
    std::string text;
    for (const char c : eq->s)
      if (c != ' ') text += c;
    const std::string lhs = text.substr(0, text.find("->")), rhs = text.substr(text.find("->") + 2);
    std::map<char, std::int64_t> size;
    std::size_t operand = 0, axis = 0;
    Value y;
    for (const char c : lhs) {
      if (c == ',') {
        ++operand;
        axis = 0;
        continue;
      }
      const auto d = dims(in(n, operand));
      if (axis >= d.size())
        fail(n, fmt::format("equation {} for operand {} of rank {}", eq->s, operand, d.size()));
      size.emplace(c, d[axis++]);
      y.integer = y.integer || in(n, operand).integer;
      y.host = y.host || in(n, operand).host;
    }
    for (const char c : rhs) {
      const auto it = size.find(c);
      if (it == size.end())
        fail(n, fmt::format("output letter '{}' of {} names no input dimension", c, eq->s));
      y.dims.push_back(it->second);
    }
    return y;
  }

  template <typename F>
  Value elementwise(const Node& n, std::vector<const Value*> args, bool comparison, F f) const {
    Value y;
    y.integer = comparison ||
                std::all_of(args.begin(), args.end(), [](const Value* v) { return v->integer; });
    if (args.size() == 3) y.integer = args[1]->integer && args[2]->integer;
    std::vector<std::int64_t> shape;
    for (const Value* v : args) shape = broadcast(n, shape, dims(*v));
    y.dims = shape;
    y.host = std::any_of(args.begin(), args.end(), [](const Value* v) { return v->host; });
    const bool known =
        std::all_of(args.begin(), args.end(), [](const Value* v) { return v->values.has_value(); });
    const std::int64_t count = product(shape);
    if (known && count >= 0 && count <= (1 << 20)) {
      std::vector<double> out(static_cast<std::size_t>(count));
      for (std::int64_t i = 0; i < count; ++i) {
        std::vector<double> at;
        for (const Value* v : args) at.push_back(broadcast_at(*v->values, dims(*v), shape, i));
        double r = f(at);
        if (y.integer) r = std::trunc(r);  // integer arithmetic truncates (ONNX's Div)
        out[static_cast<std::size_t>(i)] = r;
      }
      y.values = std::move(out);
    } else {
      // Unknown values: a view of the first operand's weight, if it has one (a weight scaled
      // at export).
      for (const Value* v : args)
        if (!v->source.empty() && product(dims(*v)) == count) {
          y.source = v->source;
          break;
        }
    }
    return y;
  }
  static double broadcast_at(const std::vector<double>& v, const std::vector<std::int64_t>& d,
                             const std::vector<std::int64_t>& shape, std::int64_t flat) {
    if (v.size() == 1) return v[0];
    std::int64_t index = 0, stride = 1;
    for (std::size_t k = shape.size(); k-- > 0;) {
      const std::int64_t coord = flat % shape[k];
      flat /= shape[k];
      const std::size_t off = shape.size() - d.size();
      if (k >= off && d[k - off] != 1) index += coord * stride;
      if (k >= off) stride *= d[k - off];
    }
    return index < static_cast<std::int64_t>(v.size()) ? v[static_cast<std::size_t>(index)] : 0;
  }

  // ---- shape helpers --------------------------------------------------------------------
  std::int64_t normalise_axis(const Node& n, std::int64_t axis, std::size_t rank) const {
    const auto r = static_cast<std::int64_t>(rank);
    if (axis < -r || axis >= r) fail(n, fmt::format("axis {} of a rank-{} tensor", axis, r));
    return axis < 0 ? axis + r : axis;
  }
  std::vector<std::int64_t> broadcast(const Node& n, std::vector<std::int64_t> a,
                                      const std::vector<std::int64_t>& b) const {
    if (b.size() > a.size()) a.insert(a.begin(), b.size() - a.size(), 1);
    for (std::size_t i = 0; i < b.size(); ++i) {
      std::int64_t& x = a[a.size() - b.size() + i];
      const std::int64_t y = b[i];
      if (x == 1)
        x = y;
      else if (y != 1 && y != x)
        fail(n, fmt::format("shapes that do not broadcast ({} against {})", x, y));
    }
    return a;
  }
  static std::pair<std::int64_t, std::int64_t> slice_range(std::int64_t b, std::int64_t e,
                                                           std::int64_t step, std::int64_t size) {
    if (b < 0) b += size;
    if (e < 0) e += size;
    if (step > 0)
      return {std::clamp(b, std::int64_t{0}, size), std::clamp(e, std::int64_t{0}, size)};
    return {std::clamp(b, std::int64_t{-1}, size - 1), std::clamp(e, std::int64_t{-1}, size - 1)};
  }
  // A Reshape's target: 0 copies the input's dimension (unless allowzero), -1 takes the rest.
  // A target that names the exported batch where the input has the run's is rebound to it.
  std::vector<std::int64_t> reshape_dims(const Node& n, const std::vector<std::int64_t>& in,
                                         std::vector<std::int64_t> shape) const {
    std::int64_t known = 1;
    std::optional<std::size_t> rest;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && n.int_attr("allowzero", 0) == 0 && i < in.size()) shape[i] = in[i];
      if (shape[i] == -1) {
        if (rest) fail(n, "two -1 dimensions in the target shape");
        rest = i;
      } else if (shape[i] < 0 || shape[i] > kMaxDimension ||
                 __builtin_mul_overflow(known, shape[i], &known)) {
        fail(n, fmt::format("target shape {}", dims_text(shape)));
      }
    }
    const std::int64_t total = product(in);
    const auto batch = static_cast<std::int64_t>(o_.batch);
    if (!shape.empty() && exported_batch_ &&
        shape[0] == static_cast<std::int64_t>(*exported_batch_) && shape[0] != batch &&
        !in.empty() && in[0] == batch &&
        (rest ? known == 0 || total % known != 0 || true : known != total)) {
      // The exported batch named as a number: the run's batch here.
      known = known / shape[0] * batch;
      shape[0] = batch;
    }
    if (rest) {
      if (known == 0 || total % known != 0)
        fail(n, fmt::format("cannot reshape {} elements to {}", total, dims_text(shape)));
      shape[*rest] = total / known;
    } else if (known != total) {
      fail(n, fmt::format("cannot reshape {} ({} elements) to {}{}", dims_text(in), total,
                          dims_text(shape), batch_hint()));
    }
    return shape;
  }
  std::vector<std::int64_t> squeezed(const Node& n, std::vector<std::int64_t> d,
                                     bool unsqueeze) const {
    std::vector<std::int64_t> axes = n.ints_attr("axes");
    if (axes.empty() && has_in(n, 1)) axes = ints(n, 1, "axes");
    if (unsqueeze) {
      const std::size_t rank = d.size() + axes.size();
      std::vector<std::int64_t> norm;
      for (const auto a : axes) norm.push_back(normalise_axis(n, a, rank));
      std::sort(norm.begin(), norm.end());
      for (const auto a : norm) d.insert(d.begin() + a, 1);
      return d;
    }
    if (axes.empty()) {
      d.erase(std::remove(d.begin(), d.end(), 1), d.end());
      return d;
    }
    std::vector<std::int64_t> norm;
    for (const auto a : axes) norm.push_back(normalise_axis(n, a, d.size()));
    std::sort(norm.rbegin(), norm.rend());
    for (const auto a : norm) {
      if (d[a] != 1) fail(n, fmt::format("squeezes axis {} of size {}", a, d[a]));
      d.erase(d.begin() + a);
    }
    return d;
  }
  std::vector<std::int64_t> permutation(const Node& n, std::size_t rank) const {
    std::vector<std::int64_t> perm = n.ints_attr("perm");
    if (perm.empty()) {
      for (std::size_t i = rank; i-- > 0;) perm.push_back(static_cast<std::int64_t>(i));
    }
    if (perm.size() != rank)
      fail(n, fmt::format("a permutation of {} axes for rank {}", perm.size(), rank));
    for (auto& p : perm) p = normalise_axis(n, p, rank);
    return perm;
  }
  std::vector<std::int64_t> split_sizes(const Node& n, std::int64_t size) const {
    std::vector<std::int64_t> sizes = n.ints_attr("split");
    if (sizes.empty() && has_in(n, 1)) sizes = ints(n, 1, "split");
    if (sizes.empty()) {
      const auto parts = static_cast<std::int64_t>(
          n.int_attr("num_outputs", static_cast<std::int64_t>(n.outputs.size())));
      if (parts <= 0) fail(n, "a split into no parts");
      const std::int64_t each = (size + parts - 1) / parts;
      for (std::int64_t left = size; left > 0; left -= each) sizes.push_back(std::min(each, left));
    }
    if (std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}) != size)
      fail(n, fmt::format("split sizes {} do not add up to {}", dims_text(sizes), size));
    return sizes;
  }

  // ---- lowering of computed nodes -------------------------------------------------------
  void unary(const Node& n, P op) { set_tensor(n, add(n, op, {tensor(n, 0)})); }

  void lower(const Node& n) {
    const std::string& op = n.op_type;
    if (op == "Identity" || op == "Cast" || op == "CastLike" || (op == "Dropout" && !o_.training))
      return set_tensor(n, tensor(n, 0));  // precision is the run's; eval drops nothing
    if (op == "Dropout") {
      Attrs a;
      a.ratio = scalar(n, 1, 0.5);
      if (const Attribute* r = n.attribute("ratio"); r && r->f) a.ratio = *r->f;
      return set_tensor(n, add(n, P::kDropout, {tensor(n, 0)}, a));
    }
    if (op == "Conv") return conv(n);
    if (op == "BatchNormalization") {
      const TensorId x = tensor(n, 0);
      return set_tensor(n, add(n, P::kBatchNorm, {x, tensor(n, 1), tensor(n, 2)}));
    }
    if (op == "InstanceNormalization" || op == "GroupNormalization") {
      const TensorId x = tensor(n, 0);
      Attrs a;
      a.groups = op == "InstanceNormalization"
                     ? out_.tensor(x).dims.at(1)
                     : static_cast<std::uint64_t>(n.int_attr("num_groups", 1));
      TensorId gamma = tensor(n, 1), beta = tensor(n, 2);
      return set_tensor(n, add(n, P::kGroupNorm, {x, gamma, beta}, a));
    }
    if (op == "LayerNormalization") {
      const TensorId x = tensor(n, 0);
      const auto rank = out_.tensor(x).dims.size();
      if (normalise_axis(n, n.int_attr("axis", -1), rank) + 1 != static_cast<std::int64_t>(rank))
        fail(n, "a layer norm over more than the last axis");
      const TensorId gamma = tensor(n, 1);
      const TensorId beta = has_in(n, 2) ? tensor(n, 2) : zeros_like(gamma);
      return set_tensor(n, add(n, P::kLayerNorm, {x, gamma, beta}));
    }
    if (lower_layout(n)) return;
    if (op == "Relu") return unary(n, P::kRelu);
    if (op == "Sigmoid") {
      // x * sigmoid(x) is SiLU (torch's nn.SiLU exports as the pair): the Mul adds it.
      if (const Node* mul = only_reader(n.outputs[0], "Mul");
          mul && other_operand(*mul, n.outputs[0]) == n.inputs[0]) {
        silu_.insert(n.outputs[0]);
        return set_tensor(n, tensor(n, 0));  // (read by the Mul only, as its SiLU)
      }
      return unary(n, P::kSigmoid);
    }
    if (op == "Tanh") return unary(n, P::kTanh);
    if (op == "Exp") return unary(n, P::kExp);
    if (op == "Erf") {
      if (report_ && !erf_said_) {
        report_->approximations.push_back(
            "Erf (the exact GELU) is costed as one transcendental elementwise op, as a tanh "
            "(popops has no erf vertex: an approximation)");
        erf_said_ = true;
      }
      return unary(n, P::kErf);
    }
    if (op == "Sqrt") return unary(n, P::kSqrt);
    if (op == "Neg") return unary(n, P::kNeg);
    if (op == "Gelu") return unary(n, P::kGelu);
    if (op == "Clip") return unary(n, P::kClip);
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow") return binary(n);
    if (op == "MatMul" || op == "Gemm") return matmul(n);
    if (op == "MaxPool" || op == "AveragePool") return pool(n);
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
      const TensorId x = tensor(n, 0);
      Attrs a;
      for (std::uint32_t i = 2; i < out_.tensor(x).dims.size(); ++i) a.axes.push_back(i);
      return set_tensor(n,
                        add(n, op == "GlobalAveragePool" ? P::kReduceMean : P::kReduceMax, {x}, a));
    }
    if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax") return reduce(n);
    if (op == "Softmax" || op == "LogSoftmax") {
      const TensorId x = tensor(n, 0);
      Attrs a;
      a.axis = static_cast<std::uint32_t>(
          normalise_axis(n, n.int_attr("axis", -1), out_.tensor(x).dims.size()));
      return set_tensor(n, add(n, P::kSoftmax, {x}, a));
    }
    if (op == "Slice") return slice(n);
    if (op == "Pad") return pad(n);
    if (op == "Gather") return gather(n);
    if (op == "Where") {
      return set_tensor(n, add(n, P::kWhere, {tensor(n, 0), tensor(n, 1), tensor(n, 2)}));
    }
    if (op == "Resize" || op == "Upsample") return resize(n);
    unsupported(n);
  }

  // Nodes that move or view data: reshapes, transposes, concats, splits, expands.
  bool lower_layout(const Node& n) {
    const std::string& op = n.op_type;
    if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      const TensorId x = tensor(n, 0);
      const auto d = dims(in(n, 0));
      std::vector<std::int64_t> to;
      if (op == "Reshape") {
        to = reshape_dims(n, d, ints(n, 1, "shape"));
      } else if (op == "Flatten") {
        const std::int64_t axis = normalise_axis(n, n.int_attr("axis", 1), d.size() + 1);
        to = {product({d.begin(), d.begin() + axis}), product({d.begin() + axis, d.end()})};
      } else {
        to = squeezed(n, d, op == "Unsqueeze");
      }
      Attrs a;
      a.dims = to_dims(n, to);
      set_tensor(n, add(n, P::kReshape, {x}, a));
      return true;
    }
    if (op == "Transpose") {
      const TensorId x = tensor(n, 0);
      Attrs a;
      for (const auto p : permutation(n, out_.tensor(x).dims.size()))
        a.axes.push_back(static_cast<std::uint32_t>(p));
      set_tensor(n, add(n, P::kTranspose, {x}, a));
      return true;
    }
    if (op == "Concat") {
      std::vector<TensorId> parts;
      for (std::size_t i = 0; i < n.inputs.size(); ++i) parts.push_back(tensor(n, i));
      Attrs a;
      a.axis = static_cast<std::uint32_t>(
          normalise_axis(n, n.int_attr("axis", 0), out_.tensor(parts[0]).dims.size()));
      set_tensor(n, add(n, P::kConcat, parts, a));
      return true;
    }
    if (op == "Split") {
      const TensorId x = tensor(n, 0);
      const auto d = dims(in(n, 0));
      Attrs a;
      a.axis = static_cast<std::uint32_t>(normalise_axis(n, n.int_attr("axis", 0), d.size()));
      for (const auto s : split_sizes(n, d[a.axis]))
        a.dims.push_back(static_cast<std::uint64_t>(s));
      const auto outs = add_all(n, P::kSplit, {x}, a);
      for (std::size_t i = 0; i < outs.size(); ++i) set_tensor(n, outs[i], i);
      return true;
    }
    if (op == "Expand") {
      const TensorId x = tensor(n, 0);
      Attrs a;
      a.dims = to_dims(n, broadcast(n, dims(in(n, 0)), ints(n, 1, "shape")));
      if (a.dims == out_.tensor(x).dims) {
        set_tensor(n, x);
        return true;
      }
      set_tensor(n, add(n, P::kExpand, {x}, a));
      return true;
    }
    return false;
  }

  // Zeros of `t`'s shape (a layer norm without a bias).
  TensorId zeros_like(TensorId t) {
    return out_.input(fmt::format("{}.zeros", current_), out_.tensor(t).dims, o_.dtype,
                      Role::kConstant);
  }

  void conv(const Node& n) {
    const TensorId x = tensor(n, 0);
    const Value& wv = in(n, 1);
    const auto wd = dims(wv);
    const Dims xd = out_.tensor(x).dims;
    if (wd.size() != xd.size() || wd.size() < 3)
      fail(n, fmt::format("its input is a {} tensor, not a feature map [batch, channels, "
                          "spatial...] for its weight {}",
                          graph::to_string(xd), dims_text(wd)));
    const std::size_t spatial = xd.size() - 2;
    // A 1x1 conv over a 1x1 map (squeeze-and-excitation as torchvision writes it) is a matrix
    // product, as Poplar plans it: [N, C] times the [F, C] weight read transposed, and its bias.
    const auto ones = [](auto first, auto last) {
      return std::all_of(first, last, [](auto d) { return d == 1; });
    };
    const auto pads = n.ints_attr("pads");
    const bool pointwise = ones(xd.begin() + 2, xd.end()) && ones(wd.begin() + 2, wd.end()) &&
                           n.int_attr("group", 1) == 1 &&
                           std::all_of(pads.begin(), pads.end(), [](auto p) { return p == 0; });
    if (pointwise) {
      Attrs flat;
      flat.dims = {xd[0], xd[1]};
      Attrs t;
      t.transpose_b = true;
      TensorId y =
          add(n, P::kMatmul, {add(n, P::kReshape, {x}, flat), weight_as(n, wv, {wd[0], wd[1]})}, t);
      if (has_in(n, 2)) y = add(n, P::kAdd, {y, tensor(n, 2)});
      Attrs back;
      back.dims = xd;
      back.dims[1] = static_cast<std::uint64_t>(wd[0]);
      return set_tensor(n, add(n, P::kReshape, {y}, back));
    }
    Attrs a;
    a.groups = static_cast<std::uint64_t>(n.int_attr("group", 1));
    for (const auto d : n.ints_attr("dilations"))
      if (d != 1)
        fail(n, fmt::format("dilations {}: dilated convolutions are not modelled",
                            dims_text(n.ints_attr("dilations"))));
    window(n, a, spatial, {wd.begin() + 2, wd.end()});
    std::vector<TensorId> ins{x, tensor(n, 1)};
    if (has_in(n, 2)) ins.push_back(tensor(n, 2));
    set_tensor(n, add(n, P::kConv, ins, a));
  }

  // Strides and pads of a window (auto_pad's SAME_UPPER / SAME_LOWER computed as ONNX does).
  void window(const Node& n, Attrs& a, std::size_t spatial, std::vector<std::int64_t> kernel) {
    const Dims xd = out_.tensor(tensor(n, 0)).dims;
    auto strides = n.ints_attr("strides");
    if (strides.empty()) strides.assign(spatial, 1);
    auto pads = n.ints_attr("pads");
    if (pads.empty()) pads.assign(2 * spatial, 0);
    if (strides.size() != spatial || pads.size() != 2 * spatial || kernel.size() != spatial ||
        xd.size() != spatial + 2)
      fail(n, fmt::format("kernel {}, strides {} and pads {} for {} spatial dimensions",
                          dims_text(kernel), dims_text(strides), dims_text(pads), spatial));
    // auto_pad (exporters other than torch's): SAME_* pads to ceil(in / stride) outputs, the odd
    // element at the end (UPPER) or the beginning (LOWER); VALID pads nothing.
    const Attribute* auto_pad = n.attribute("auto_pad");
    const std::string mode = auto_pad ? auto_pad->s : "NOTSET";
    if (mode != "NOTSET" && mode != "VALID" && mode != "SAME_UPPER" && mode != "SAME_LOWER")
      fail(n, fmt::format("auto_pad '{}': expected NOTSET, VALID, SAME_UPPER or SAME_LOWER", mode));
    for (std::size_t i = 0; i < spatial; ++i) {
      if (strides[i] < 1 || kernel[i] < 1 || pads[i] < 0 || pads[i + spatial] < 0 ||
          kernel[i] > kMaxDimension || strides[i] > kMaxDimension)
        fail(n, fmt::format("kernel {}, strides {}, pads {}", dims_text(kernel), dims_text(strides),
                            dims_text(pads)));
      if (mode == "VALID") pads[i] = pads[i + spatial] = 0;
      if (mode.starts_with("SAME")) {
        const auto in = static_cast<std::int64_t>(xd[2 + i]);
        const std::int64_t out = (in + strides[i] - 1) / strides[i];
        const std::int64_t total =
            std::max<std::int64_t>(0, (out - 1) * strides[i] + kernel[i] - in);
        pads[i] = mode == "SAME_UPPER" ? total / 2 : total - total / 2;
        pads[i + spatial] = total - pads[i];
      }
      a.kernel.push_back(static_cast<std::uint64_t>(kernel[i]));
      a.stride.push_back(static_cast<std::uint64_t>(strides[i]));
      a.pad_begin.push_back(static_cast<std::uint64_t>(pads[i]));
      a.pad_end.push_back(static_cast<std::uint64_t>(pads[i + spatial]));
    }
  }

  void pool(const Node& n) {
    const TensorId x = tensor(n, 0);
    if (out_.tensor(x).dims.size() < 3)
      fail(n, fmt::format("pools a {} tensor: expected [batch, channels, spatial...]",
                          graph::to_string(out_.tensor(x).dims)));
    const std::size_t spatial = out_.tensor(x).dims.size() - 2;
    if (n.int_attr("ceil_mode", 0) != 0) fail(n, "ceil_mode pooling is not modelled");
    Attrs a;
    window(n, a, spatial, n.ints_attr("kernel_shape"));
    set_tensor(n, add(n, n.op_type == "MaxPool" ? P::kMaxPool : P::kAvgPool, {x}, a));
  }

  void reduce(const Node& n) {
    const TensorId x = tensor(n, 0);
    const auto rank = out_.tensor(x).dims.size();
    std::vector<std::int64_t> axes = n.ints_attr("axes");
    if (axes.empty() && has_in(n, 1)) axes = ints(n, 1, "axes");
    Attrs a;
    for (const auto ax : axes)
      a.axes.push_back(static_cast<std::uint32_t>(normalise_axis(n, ax, rank)));
    std::sort(a.axes.begin(), a.axes.end());
    a.keep_dims = n.int_attr("keepdims", 1) != 0;
    const P op = n.op_type == "ReduceMean"  ? P::kReduceMean
                 : n.op_type == "ReduceSum" ? P::kReduceSum
                                            : P::kReduceMax;
    set_tensor(n, add(n, op, {x}, a));
  }

  void binary(const Node& n) {
    const std::string& op = n.op_type;
    if (op == "Mul" && (silu_.count(n.inputs[0]) || silu_.count(n.inputs[1]))) {
      const std::size_t x = silu_.count(n.inputs[0]) ? 1 : 0;
      return set_tensor(n, add(n, P::kSilu, {tensor(n, x)}));
    }
    // A scalar exponent of 2 or 0.5 is a square or a square root.
    if (op == "Pow") {
      const double e = scalar(n, 1, std::numeric_limits<double>::quiet_NaN());
      if (e == 0.5) return set_tensor(n, add(n, P::kSqrt, {tensor(n, 0)}));
      if (e == 2 || e == 3) {  // x * x (* x): the tanh form of GELU's cube
        const TensorId x = tensor(n, 0);
        TensorId y = add(n, P::kMul, {x, x});
        if (e == 3) y = add(n, P::kMul, {y, x});
        return set_tensor(n, y);
      }
    }
    const P p = op == "Add"   ? P::kAdd
                : op == "Sub" ? P::kSub
                : op == "Mul" ? P::kMul
                : op == "Div" ? P::kDiv
                              : P::kPow;
    set_tensor(n, add(n, p, {tensor(n, 0), tensor(n, 1)}));
  }
  void matmul(const Node& n) {
    Attrs a;
    if (n.op_type == "Gemm") {
      if (n.int_attr("transA", 0) != 0) fail(n, "transA: the input read transposed");
      a.transpose_b = n.int_attr("transB", 0) != 0;
    }
    const TensorId x = tensor(n, 0);
    // A transposed view of a matrix weight is that weight read transposed: one parameter; so
    // is a weight whose data holds an embedding table transposed (torch's constant folding
    // writes a tied head's transpose as a copy).
    Value wv = in(n, 1);
    if (!wv.is_tensor() && !wv.transposed) {
      if (const std::string table = tied_table(wv); !table.empty()) {
        wv.source = table;
        wv.transposed = true;
      }
    }
    const bool view = !wv.is_tensor() && wv.transposed;
    if (view) a.transpose_b = !a.transpose_b;
    if (view && tables_.count(wv.source) && o_.vocabulary_serial > 1) {
      a.serial = o_.vocabulary_serial;  // a tied LM head
      ++serialised_;
    }
    const TensorId w = view ? weight_as(n, wv, {dims(wv)[1], dims(wv)[0]}) : tensor(n, 1);
    TensorId y = add(n, P::kMatmul, {x, w}, a);
    if (n.op_type == "Gemm" && has_in(n, 2)) y = add(n, P::kAdd, {y, tensor(n, 2)});
    set_tensor(n, y);
  }

  void slice(const Node& n) {
    const TensorId x = tensor(n, 0);
    const auto d = dims(in(n, 0));
    const auto starts = ints(n, 1, "starts"), ends = ints(n, 2, "ends");
    std::vector<std::int64_t> axes(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
    if (has_in(n, 3)) axes = ints(n, 3, "axes");
    std::vector<std::int64_t> steps(starts.size(), 1);
    if (has_in(n, 4)) steps = ints(n, 4, "steps");
    Attrs a;
    for (std::size_t i = 0; i < axes.size() && i < starts.size() && i < ends.size(); ++i) {
      if (steps[i] != 1) fail(n, fmt::format("a slice with step {} is not modelled", steps[i]));
      const std::int64_t axis = normalise_axis(n, axes[i], d.size());
      const auto [b, e] = slice_range(starts[i], ends[i], 1, d[axis]);
      if (b == 0 && e == d[axis]) continue;  // the whole axis
      if (b >= e) fail(n, fmt::format("an empty slice [{}, {}) of axis {}", b, e, axis));
      a.axes.push_back(static_cast<std::uint32_t>(axis));
      a.starts.push_back(static_cast<std::uint64_t>(b));
      a.ends.push_back(static_cast<std::uint64_t>(e));
    }
    if (a.axes.empty()) return set_tensor(n, x);
    set_tensor(n, add(n, P::kSlice, {x}, a));
  }

  void pad(const Node& n) {
    const TensorId x = tensor(n, 0);
    const std::size_t rank = out_.tensor(x).dims.size();
    std::vector<std::int64_t> pads = n.ints_attr("pads");
    if (pads.empty() && has_in(n, 1)) pads = ints(n, 1, "pads");
    if (const Attribute* m = n.attribute("mode"); m && !m->s.empty() && m->s != "constant")
      fail(n, fmt::format("pad mode '{}' is not modelled (constant only)", m->s));
    if (pads.size() != 2 * rank) fail(n, fmt::format("pads {} for rank {}", dims_text(pads), rank));
    if (std::all_of(pads.begin(), pads.end(), [](std::int64_t p) { return p == 0; }))
      return set_tensor(n, x);
    Attrs a;
    for (std::size_t i = 0; i < rank; ++i) {
      if (pads[i] < 0 || pads[i + rank] < 0) fail(n, "negative pads (a crop) are not modelled");
      a.pad_begin.push_back(static_cast<std::uint64_t>(pads[i]));
      a.pad_end.push_back(static_cast<std::uint64_t>(pads[i + rank]));
    }
    set_tensor(n, add(n, P::kPad, {x}, a));
  }

  void gather(const Node& n) {
    const Value& table = in(n, 0);
    const Value& idx = in(n, 1);
    const std::int64_t axis = normalise_axis(n, n.int_attr("axis", 0), dims(table).size());
    if (!table.is_tensor() && axis == 0) {
      // Rows of a weight table (an embedding) by computed or constant indices.
      const TensorId w = tensor(n, 0, Role::kWeight);
      if (!table.source.empty()) tables_.insert(table.source);
      return set_tensor(n, add(n, P::kGather, {w, tensor(n, 1)}));
    }
    // Positions of a computed tensor at constant indices (a class token: x[:, 0]).
    if (!table.is_tensor() || idx.is_tensor() || !idx.values)
      fail(n, "a gather of a computed tensor at computed indices is not modelled");
    const TensorId x = *table.tensor;
    const auto d = dims(table);
    if (idx.values->size() != 1)
      fail(n, "a gather of more than one position of a computed tensor is not modelled");
    auto k = to_int(idx.values->front());
    if (k < 0) k += d[axis];
    Attrs a;
    a.axes = {static_cast<std::uint32_t>(axis)};
    a.starts = {static_cast<std::uint64_t>(k)};
    a.ends = {static_cast<std::uint64_t>(k + 1)};
    TensorId y = add(n, P::kSlice, {x}, a);
    if (dims(idx).empty()) {
      Attrs r;
      r.dims = out_.tensor(y).dims;
      r.dims.erase(r.dims.begin() + axis);
      y = add(n, P::kReshape, {y}, r);
    }
    set_tensor(n, y);
  }

  void resize(const Node& n) {
    const TensorId x = tensor(n, 0);
    const Dims xd = out_.tensor(x).dims;
    std::vector<double> scales;
    // Resize(x, roi, scales[, sizes]) (opset 11+); Upsample(x, scales).
    const std::size_t at = n.op_type == "Upsample" ? 1 : 2;
    if (has_in(n, at) && in(n, at).values && !in(n, at).values->empty()) scales = *in(n, at).values;
    if (scales.empty() && has_in(n, 3) && in(n, 3).values) {
      for (std::size_t i = 0; i < xd.size() && i < in(n, 3).values->size(); ++i)
        scales.push_back((*in(n, 3).values)[i] / static_cast<double>(xd[i]));
    }
    if (scales.size() != xd.size()) fail(n, "a resize without constant scales or sizes");
    Attrs a;
    bool exact = true;
    for (const double s : scales) {
      const double whole = std::round(s);
      if (!std::isfinite(s) || whole < 1 || whole > 1 << 16 || std::abs(s - whole) > 1e-6)
        fail(n, fmt::format("a resize by {}: only whole upsampling factors are modelled", s));
      a.dims.push_back(static_cast<std::uint64_t>(whole));
    }
    if (const Attribute* m = n.attribute("mode"); m && !m->s.empty() && m->s != "nearest")
      exact = false;
    if (!exact && report_)
      report_->approximations.push_back(fmt::format(
          "node '{}' ({}): {} interpolation lowered as nearest-neighbour copies (the same data "
          "movement, without the weighted sums)",
          display(n), n.op_type, n.attribute("mode")->s));
    set_tensor(n, add(n, P::kResize, {x}, a));
  }

  // The embedding table (an initializer a Gather read) whose data `w`, a [h, V] initializer,
  // holds transposed (onnx::holds_transposed: sampled), V > h; "" for none or absent data.
  std::string tied_table(const Value& w) {
    const auto head = g_.initializers.find(w.source);
    if (w.source.empty() || w.dims.size() != 2 || head == g_.initializers.end()) return {};
    for (const std::string& table : tables_) {
      const auto t = g_.initializers.find(table);
      if (table == w.source || t == g_.initializers.end() || t->second.dims.size() != 2 ||
          t->second.dims[0] != w.dims[1] || t->second.dims[1] != w.dims[0] ||
          t->second.dims[0] <= t->second.dims[1] || !holds_transposed(g_, t->second, head->second))
        continue;
      if (report_)
        report_->approximations.push_back(fmt::format(
            "weight '{}' {} holds the embedding table '{}' transposed (compared at up to 4096 "
            "positions): the tied LM head, read as the table transposed and counted once",
            w.source, dims_text(w.dims), table));
      return table;
    }
    return {};
  }

  // ---- the end of the graph -------------------------------------------------------------
  // An embedding table [V, h] and a matmul weight of its shape transposed, V > h: an LM head
  // that may be tied to the embedding. torch's constant folding turns a tied head's transpose
  // into a copy, which the graph cannot tell from an untied head without the weights' data:
  // counted twice, and said. (Without folding the head is Transpose(table): one weight.)
  void note_possible_tie() {
    if (!report_) return;
    std::set<std::uint32_t> tables;
    for (const auto& node : out_.nodes())
      if (node.op == P::kGather && out_.tensor(node.inputs[0]).role == Role::kWeight)
        tables.insert(graph::index(node.inputs[0]));
    for (const auto& node : out_.nodes()) {
      if (node.op != P::kMatmul || out_.tensor(node.inputs[1]).role != Role::kWeight) continue;
      Dims w = out_.tensor(node.inputs[1]).dims;
      if (w.size() != 2) continue;
      if (node.attrs.transpose_b) std::swap(w[0], w[1]);  // as read: [h, V]
      for (const std::uint32_t t : tables) {
        const Dims& table = out_.tensors()[t].dims;
        if (table.size() == 2 && table[0] == w[1] && table[1] == w[0] && table[0] > table[1] &&
            graph::index(node.inputs[1]) != t) {
          report_->approximations.push_back(fmt::format(
              "weight '{}' {} is the embedding table '{}' {} transposed: if the LM head is tied "
              "to the embedding (torch folds the tie into a copy), its {} parameters are "
              "counted twice (an export with do_constant_folding=False, or in training mode, "
              "keeps the tie: one table read transposed)",
              out_.tensor(node.inputs[1]).name, graph::to_string(out_.tensor(node.inputs[1]).dims),
              out_.tensors()[t].name, graph::to_string(table), graph::elements(table)));
          return;
        }
      }
    }
  }

  void finish() {
    note_possible_tie();
    if (o_.vocabulary_serial > 1 && serialised_ == 0)
      throw ConfigError(fmt::format(
          "{}: run.embedding_serialisation {}: the graph has no tied LM head to serialise (a "
          "matmul reading an embedding table transposed; an export with constant folding writes "
          "the tie as a copy: export with do_constant_folding=False)",
          g_.file, o_.vocabulary_serial));
    if (g_.outputs.empty()) throw ConfigError(fmt::format("{}: the graph has no outputs", g_.file));
    const auto it = values_.find(g_.outputs[0].name);
    if (it == values_.end() || !it->second.is_tensor())
      throw ConfigError(fmt::format("{}: graph output '{}' is not computed from the inputs",
                                    g_.file, g_.outputs[0].name));
    TensorId y = *it->second.tensor;
    out_.set_layer("loss");
    if (!o_.training) {
      if (report_) report_->output = out_.tensor(y).dims;
      return;
    }
    // A trailing softmax is the loss's: the logits are its input.
    if (const auto p = out_.tensor(y).producer; p && out_.node(*p).op == P::kSoftmax)
      y = out_.node(*p).inputs[0];
    Dims d = out_.tensor(y).dims;
    if (report_) report_->output = d;
    if (d.size() < 2)
      throw ConfigError(fmt::format(
          "{}: graph output '{}' of shape {}: a model trained here returns scores [batch, "
          "classes] or [batch, positions..., classes]",
          g_.file, g_.outputs[0].name, graph::to_string(d)));
    if (d.size() > 2) {
      // [batch, sequence, vocabulary]: every position's scores, as rows.
      Attrs a;
      a.dims = {graph::elements(d) / d.back(), d.back()};
      y = out_.add(P::kReshape, {y}, a);
      d = a.dims;
    }
    (void)out_.add(P::kSoftmaxCrossEntropy, {y, out_.input("labels", {d[0]}, trace::DType::kInt)});
    layers_.push_back({"loss", "SoftmaxCrossEntropy", P::kSoftmaxCrossEntropy});
  }

 public:
  std::vector<GraphLayer> layers_;

 private:
  const Graph& g_;
  const GraphOptions& o_;
  GraphImport* report_;
  TensorGraph out_;
  std::map<std::string, Value> values_;
  std::map<std::pair<std::string, Dims>, TensorId> weights_;
  std::map<std::string, TensorId> host_;  // host values read by computed tensors, by name
  std::set<std::string> silu_;            // Sigmoid outputs read only as x * sigmoid(x): SiLU
  std::map<std::string, const Node*> producers_;  // each value's node
  std::set<std::string> tables_;                  // initializers read by a Gather (embeddings)
  std::uint32_t serialised_ = 0;                  // tied LM heads serialised
  std::set<const Node*> gelu_parts_;              // nodes of a GELU's formula but its last
  std::map<const Node*, std::string> gelus_;      // a GELU's last node: its input
  std::map<std::string, std::vector<const Node*>> consumers_;  // each value's reading nodes
  std::optional<std::uint64_t> exported_batch_;
  bool erf_said_ = false;
  std::string current_;
  std::uint64_t constants_ = 0;
  std::set<std::string> layer_names_;
  std::map<std::string, std::uint64_t> next_suffix_;
};

}  // namespace

std::string sanitise_name(std::string name) {
  while (!name.empty() && name.front() == '/') name.erase(0, 1);
  for (char& c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' ||
          c == '/' || c == '-'))
      c = '_';
  if (name.size() > trace::kMaxNameLength) name.resize(trace::kMaxNameLength);
  return name;
}

graph::TensorGraph build_graph(const Graph& g, const GraphOptions& options, GraphImport* report) {
  GraphImporter importer(g, options, report);
  graph::TensorGraph out = importer.build();
  if (report) report->layers = std::move(importer.layers_);
  return out;
}

}  // namespace ipusim::compiler::onnx
