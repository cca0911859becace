// SPDX-License-Identifier: Apache-2.0
// Loading of model files (models/*.yaml): strict, every error naming file:line (docs/models.md).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <set>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/yaml_reader.hpp"
#include "ipusim/trace/program.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/strings.hpp"
#include "onnx.hpp"
#include "trace_names.hpp"

namespace ipusim::compiler {
namespace {

std::string at(const std::string& file, const YAML::Node& n) {
  const auto m = n.Mark();
  return m.line < 0 ? file : fmt::format("{}:{}:{}", file, m.line + 1, m.column + 1);
}

// Reads the keys of a map, rejecting any not in `allowed`.
void check_keys(const std::string& file, const YAML::Node& map, const std::string& where,
                const std::vector<std::string>& allowed) {
  if (!map.IsMap()) throw ConfigError(fmt::format("{}: {}: expected a map", at(file, map), where));
  std::set<std::string> seen;
  for (const auto& kv : map) {
    if (!kv.first.IsScalar())
      throw ConfigError(fmt::format("{}: {}: expected key names, found a {}", at(file, kv.first),
                                    where, kv.first.IsMap() ? "map" : "list"));
    const std::string key = kv.first.as<std::string>();
    // yaml-cpp's lookup finds a repeated key's first value: a second one is refused, as run
    // and chip configs refuse it.
    if (!seen.insert(key).second)
      throw ConfigError(fmt::format("{}: {}.{}: duplicate key", at(file, kv.first), where, key));
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      throw ConfigError(fmt::format("{}: {}.{}: unknown key{}", at(file, kv.first), where, key,
                                    did_you_mean(key, allowed)));
  }
}

std::uint64_t count(const std::string& file, const YAML::Node& map, const std::string& key,
                    const std::string& where,
                    std::optional<std::uint64_t> fallback = std::nullopt) {
  if (!map.IsMap()) throw ConfigError(fmt::format("{}: {}: expected a map", at(file, map), where));
  const YAML::Node n = map[key];
  if (!n) {
    if (fallback) return *fallback;
    throw ConfigError(fmt::format("{}: {}.{}: missing required key", at(file, map), where, key));
  }
  // A model's counts multiply into sizes and FLOPs; 12 digits keep every product in 64 bits.
  constexpr std::uint64_t kMaxModelCount = 999'999'999'999;
  const auto refuse = [&](const std::string& found) {
    return ConfigError(fmt::format("{}: {}.{}: expected a whole number from 1 to {}, found {}",
                                   at(file, n), where, key, kMaxModelCount, found));
  };
  const std::string text = n.IsScalar() ? n.Scalar() : std::string();
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw refuse(config::YamlReader::kind_of(n));
  if (text.size() > 12) throw refuse(config::YamlReader::kind_of(n) + " (too large)");
  const std::uint64_t v = std::stoull(text);
  if (v == 0) throw refuse("0");
  return v;
}

std::string text(const std::string& file, const YAML::Node& map, const std::string& key,
                 const std::string& where, std::optional<std::string> fallback = std::nullopt) {
  if (!map.IsMap()) throw ConfigError(fmt::format("{}: {}: expected a map", at(file, map), where));
  const YAML::Node n = map[key];
  if (!n) {
    if (fallback) return *fallback;
    throw ConfigError(fmt::format("{}: {}.{}: missing required key", at(file, map), where, key));
  }
  if (!n.IsScalar())
    throw ConfigError(fmt::format("{}: {}.{}: expected a value", at(file, n), where, key));
  return n.Scalar();
}

// The names of the ops whose row satisfies `pred`, "a, b or c".
template <class Pred>
std::string ops_where(Pred pred) {
  std::vector<std::string_view> names;
  for (const graph::OpInfo& row : graph::kOps)
    if (row.family == graph::Family::kCnn && pred(row)) names.push_back(row.name);
  if (names.size() < 2) return fmt::format("{}", fmt::join(names, ""));
  return fmt::format("{} or {}", fmt::join(names.begin(), names.end() - 1, ", "), names.back());
}

std::string with_article(const std::string& op) {
  return (std::string("aeiou").find(op.front()) != std::string::npos ? "an " : "a ") + op;
}

}  // namespace

namespace {
ModelDef parse_model(const std::string& file, const YAML::Node& root);
}  // namespace

ModelDef load_model(const std::string& file) {
  // Read by the one input reader (capped, regular files and FIFOs only) and parsed with the
  // shared reader, which bounds alias expansion. An ONNX model is its imported graph, or the
  // model file the transformer patterns write for it (`ipusim import` writes it).
  std::string content;
  try {
    if (is_onnx_file(file)) {
      ImportedOnnx imported = import_onnx_model(file);
      if (imported.graph) return std::move(*imported.graph);
      content = std::move(imported.model_file);
    } else {
      content = read_input_file(file, kMaxModelBytes, "model file");
    }
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
  // An imported model's text is generated, bounded by its layers (at most kMaxModelLayers,
  // each a map of at most 9 keys and values), not by what a hand-written file needs.
  const YAML::Node root =
      config::YamlReader(
          file, is_onnx_file(file) ? 20 * kMaxModelLayers + 1000 : config::kMaxExpandedYamlNodes)
          .load(content);
  // Every shape problem is a ConfigError naming file:line; a yaml-cpp exception reaching here
  // (a node used as a map that is not one) is reported the same way, never as a crash.
  try {
    return parse_model(file, root);
  } catch (const YAML::Exception& e) {
    const std::string where =
        e.mark.line < 0 ? file : fmt::format("{}:{}:{}", file, e.mark.line + 1, e.mark.column + 1);
    throw ConfigError(fmt::format("{}: invalid model file: {}", where, e.msg));
  }
}

namespace {

// The CNN layer list: entries and repeated blocks, each layer checked against its op's row.
class CnnLayerReader {
 public:
  CnnLayerReader(const std::string& file, ModelDef& def) : file_(file), def_(def) {}

  void read(const YAML::Node& layers) {
    if (!layers || !layers.IsSequence() || layers.size() == 0)
      throw ConfigError(fmt::format("{}: layers: expected a list of layers", file_));
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const YAML::Node l = layers[i];
      const std::string where = fmt::format("layers[{}]", i);
      if (l.IsMap() && l["repeat"])
        add_block(l, where);
      else
        add_layer(l, where, Block{});
    }
  }

 private:
  // One iteration of a repeated block. Inside it a layer's name gets the iteration's prefix,
  // and its `input`/`other` name a layer of the same iteration if the block defines that name,
  // the iteration's input if they are "{in}", else a layer defined above the block.
  struct Block {
    std::string prefix;           // "b2/1/" in an iteration, "" at the top
    std::set<std::string> local;  // the block's own layer names
    std::string input;            // the layer before the iteration's first
  };

  std::string resolve(const YAML::Node& l, const std::string& where, const Block& block,
                      const std::string& ref) const {
    if (ref == "{in}") {
      if (block.prefix.empty())
        throw ConfigError(
            fmt::format("{}: {}: \"{{in}}\" (the input of a repeated block) used outside a "
                        "repeated block",
                        at(file_, l), where));
      return block.input;
    }
    return block.local.count(ref) ? block.prefix + ref : ref;
  }

  // The layer's operands: `input` (default: the layer before) and `other`, as its op takes.
  void read_operands(const YAML::Node& l, const std::string& where, const Block& block,
                     const std::string& op, Layer& layer) const {
    const graph::OpInfo& info = graph::info(layer.op);
    layer.input = def_.layers.empty() ? "" : def_.layers.back().name;
    if (l["input"]) layer.input = resolve(l, where, block, text(file_, l, "input", where));
    if (l["other"] && info.other.empty())
      throw ConfigError(fmt::format(
          "{}: {}.other: {} takes one operand (only {} take 'other')", at(file_, l["other"]), where,
          op, ops_where([](const graph::OpInfo& r) { return !r.other.empty(); })));
    layer.other = l["other"] ? resolve(l, where, block, text(file_, l, "other", where)) : "";
    if (!info.other.empty() && layer.other.empty())
      throw ConfigError(fmt::format("{}: {}: {} needs 'other' ({})", at(file_, l), where,
                                    with_article(op), info.other));
    for (const auto* ref : {&layer.input, &layer.other})
      if (!ref->empty() && !names_.count(*ref))
        throw ConfigError(
            fmt::format("{}: {}: '{}' refers to layer '{}', which is not defined "
                        "above",
                        at(file_, l), where, layer.name, *ref));
  }

  void add_layer(const YAML::Node& l, const std::string& where, const Block& block) {
    check_keys(file_, l, where,
               {"name", "op", "input", "other", "out", "kernel", "stride", "group_size", "factor"});
    Layer layer;
    layer.at = at(file_, l);
    layer.name = block.prefix + text(file_, l, "name", where);
    check_trace_name(at(file_, l["name"]), where + ".name", layer.name);
    const std::string op = text(file_, l, "op", where);
    const auto known = graph::op_named(op);
    if (!known)
      throw ConfigError(fmt::format("{}: {}.op: unknown op \"{}\"{}", at(file_, l["op"]), where, op,
                                    did_you_mean(op, graph::op_names())));
    layer.op = *known;
    const graph::OpInfo& info = graph::info(layer.op);
    read_operands(l, where, block, op, layer);
    // A parameter the op does not use is refused, not ignored (an avgpool is global: its
    // kernel and stride would change nothing).
    if (l["out"] && info.out == graph::OutChannels::kNone)
      throw ConfigError(fmt::format(
          "{}: {}.out: {} keeps its input's channels (only {} take "
          "'out')",
          at(file_, l["out"]), where, op,
          ops_where([](const graph::OpInfo& r) { return r.out != graph::OutChannels::kNone; })));
    for (const char* key : {"kernel", "stride"})
      if (l[key] && !info.windowed)
        throw ConfigError(fmt::format(
            "{}: {}.{}: {} has no window{} (only {} take a kernel and a stride)", at(file_, l[key]),
            where, key, op, layer.op == graph::Op::kAvgPool ? ": an avgpool is global" : "",
            ops_where([](const graph::OpInfo& r) { return r.windowed; })));
    if (l["factor"] && !info.scaled)
      throw ConfigError(fmt::format("{}: {}.factor: {} has no factor (only {} take one)",
                                    at(file_, l["factor"]), where, op,
                                    ops_where([](const graph::OpInfo& r) { return r.scaled; })));
    if (info.scaled) layer.factor = count(file_, l, "factor", where);
    layer.out = info.out == graph::OutChannels::kRequired ||
                        (info.out == graph::OutChannels::kOptional && l["out"])
                    ? count(file_, l, "out", where)
                    : 0;
    layer.kernel = count(file_, l, "kernel", where, 1);
    layer.stride = count(file_, l, "stride", where, 1);
    if (l["group_size"] && !info.grouped)
      throw ConfigError(fmt::format("{}: {}.group_size: only a {} has groups",
                                    at(file_, l["group_size"]), where,
                                    ops_where([](const graph::OpInfo& r) { return r.grouped; })));
    layer.group_size = l["group_size"]                  ? count(file_, l, "group_size", where)
                       : layer.op == graph::Op::kDwconv ? def_.depthwise_group_size
                                                        : 0;
    if (!names_.insert(layer.name).second)
      throw ConfigError(
          fmt::format("{}: {}: layer name '{}' used twice", at(file_, l), where, layer.name));
    def_.layers.push_back(std::move(layer));
  }

  // A block written once and repeated: {repeat: N, from: F, as: "b2/{i}", layers: [...]} gives
  // iterations F .. F+N-1, each layer named "<as with {i} = iteration>/<name>".
  void add_block(const YAML::Node& l, const std::string& where) {
    check_keys(file_, l, where, {"repeat", "from", "as", "layers"});
    const std::uint64_t n = count(file_, l, "repeat", where);
    const YAML::Node from_node = l["from"];
    std::uint64_t from = 0;
    if (from_node) {
      const std::string t = from_node.Scalar();
      if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos || t.size() > 9)
        throw ConfigError(fmt::format("{}: {}.from: expected a whole number, found \"{}\"",
                                      at(file_, from_node), where, t));
      from = std::stoull(t);
    }
    const std::string as = text(file_, l, "as", where);
    if (as.find("{i}") == std::string::npos)
      throw ConfigError(
          fmt::format("{}: {}.as: expected a name pattern with {{i}} (e.g. \"b2/{{i}}\"), found "
                      "\"{}\"",
                      at(file_, l["as"]), where, as));
    const YAML::Node body = l["layers"];
    if (!body || !body.IsSequence() || body.size() == 0)
      throw ConfigError(
          fmt::format("{}: {}.layers: expected a list of layers", at(file_, l), where));
    if (n > 4096 || def_.layers.size() + n * body.size() > kMaxModelLayers)
      throw ConfigError(
          fmt::format("{}: {}.repeat: expected at most 4096 iterations and {} layers in all, "
                      "found {} x {}",
                      at(file_, l), where, kMaxModelLayers, n, body.size()));
    Block block;
    for (const auto& b : body) {
      if (b.IsMap() && b["repeat"])
        throw ConfigError(
            fmt::format("{}: {}.layers: repeated blocks do not nest", at(file_, b), where));
      if (b.IsMap() && b["name"] && b["name"].IsScalar()) block.local.insert(b["name"].Scalar());
    }
    for (std::uint64_t it = from; it < from + n; ++it) {
      std::string prefix = as;
      for (std::size_t at_i = prefix.find("{i}"); at_i != std::string::npos;
           at_i = prefix.find("{i}"))
        prefix.replace(at_i, 3, std::to_string(it));
      block.prefix = prefix + "/";
      block.input = def_.layers.empty() ? "" : def_.layers.back().name;
      for (std::size_t j = 0; j < body.size(); ++j)
        add_layer(body[j], fmt::format("{}.layers[{}] (iteration {})", where, j, it), block);
    }
  }

  const std::string& file_;
  ModelDef& def_;
  std::set<std::string> names_;
};

// model.input: the image's height, width and channels.
void read_image(const std::string& file, const YAML::Node& m, ModelDef& def,
                const std::string& missing) {
  const YAML::Node in = m["input"];
  if (!in)
    throw ConfigError(fmt::format("{}: model.input: missing required key{}", at(file, m), missing));
  check_keys(file, in, "model.input", {"height", "width", "channels"});
  def.height = count(file, in, "height", "model.input");
  def.width = count(file, in, "width", "model.input");
  def.channels = count(file, in, "channels", "model.input");
  // Every tensor of the model is a multiple of its input: a sample of more than 2^40 elements
  // (a terabyte) is refused here, in the model's terms, before anything multiplies it.
  __extension__ using Wide = unsigned __int128;
  constexpr Wide kMaxSampleElements = std::uint64_t{1} << 40;
  const Wide elements = static_cast<Wide>(def.height) * def.width * def.channels;
  if (elements > kMaxSampleElements)
    throw ConfigError(fmt::format(
        "{}: model.input: {} x {} x {} is more than 2^40 elements per sample, expected at most "
        "{}",
        at(file, in), def.height, def.width, def.channels,
        static_cast<std::uint64_t>(kMaxSampleElements)));
}

void parse_cnn(const std::string& file, const YAML::Node& root, const YAML::Node& m,
               ModelDef& def) {
  check_keys(
      file, m, "model",
      {"name", "family", "dtype", "input", "classes", "depthwise_group_size", "norm_groups"});
  read_image(file, m, def, "");
  def.classes = count(file, m, "classes", "model");
  def.depthwise_group_size = count(file, m, "depthwise_group_size", "model", 1);
  def.norm_groups = count(file, m, "norm_groups", "model", 0);
  CnnLayerReader(file, def).read(root["layers"]);
  for (const Layer& l : def.layers)
    if (l.op == graph::Op::kGroupNorm && def.norm_groups == 0)
      throw ConfigError(fmt::format(
          "{}: model.norm_groups: missing required key: layer '{}' is a groupnorm, and a model "
          "with groupnorm layers gives their number of groups (popnn's numGroups)",
          at(file, m), l.name));
}

// A classifier (ViT) reads an image cut into patches, not token ids: its sequence is the
// patches plus the class token.
void parse_patches(const std::string& file, const YAML::Node& m, ModelDef& def) {
  for (const char* key : {"vocabulary", "masked_tokens", "pad_vocabulary_to"})
    if (m[key])
      throw ConfigError(
          fmt::format("{}: model.{}: a classifier reads image patches, not tokens (remove the key)",
                      at(file, m[key]), key));
  read_image(file, m, def, " (the image size)");
  def.patch = count(file, m, "patch", "model");
  def.classes = count(file, m, "classes", "model");
  if (def.height % def.patch != 0 || def.width % def.patch != 0)
    throw ConfigError(
        fmt::format("{}: layer 'patch_embedding': model.patch ({}) must divide the image ({}x{})",
                    at(file, m["patch"]), def.patch, def.height, def.width));
  const std::uint64_t tokens = def.patches() + 1;
  def.sequence = count(file, m, "sequence", "model", tokens);
  if (def.sequence != tokens)
    throw ConfigError(
        fmt::format("{}: model.sequence: {}x{} patches of a {}x{} image and the class token make "
                    "{} tokens, found {}",
                    at(file, m["sequence"]), def.height / def.patch, def.width / def.patch,
                    def.height, def.width, tokens, def.sequence));
}

// The token counts: masked tokens, positions, token types and the padded vocabulary.
void parse_tokens(const std::string& file, const YAML::Node& m, ModelDef& def) {
  if (def.lm_head && m["masked_tokens"])
    throw ConfigError(fmt::format(
        "{}: model.masked_tokens: an lm head predicts every token (remove the key, or use "
        "head: masked_lm)",
        at(file, m["masked_tokens"])));
  if (def.span_head && m["masked_tokens"])
    throw ConfigError(fmt::format(
        "{}: model.masked_tokens: a span head scores every token (remove the key, or use "
        "head: masked_lm)",
        at(file, m["masked_tokens"])));
  def.masked_tokens =
      def.lm_head || def.classifier || def.span_head ? 0 : count(file, m, "masked_tokens", "model");
  if (def.masked_tokens > def.sequence)
    throw ConfigError(fmt::format(
        "{}: model.masked_tokens: expected at most model.sequence ({}) predicted tokens a "
        "sequence, found {}",
        at(file, m["masked_tokens"]), def.sequence, def.masked_tokens));
  def.max_positions = count(file, m, "max_positions", "model", def.sequence);
  if (const YAML::Node tt = m["token_types"]; tt && tt.IsScalar() && tt.Scalar() == "0")
    def.token_types = 0;
  else
    def.token_types = count(file, m, "token_types", "model", def.classifier ? 0 : 2);
  def.vocabulary_multiple = count(file, m, "pad_vocabulary_to", "model", 1);
  if (def.max_positions < def.sequence)
    throw ConfigError(
        fmt::format("{}: model.max_positions: {} position embeddings cannot cover a sequence of {}",
                    at(file, m), def.max_positions, def.sequence));
}

void parse_transformer(const std::string& file, const YAML::Node& root, const YAML::Node& m,
                       ModelDef& def) {
  check_keys(file, m, "model",
             {"name",
              "family",
              "dtype",
              "layers",
              "hidden",
              "heads",
              "ffn",
              "vocabulary",
              "sequence",
              "masked_tokens",
              "max_positions",
              "causal",
              "norm",
              "head",
              "token_types",
              "pad_vocabulary_to",
              "input",
              "patch",
              "classes",
              "attention_dropout",
              "attention_mask",
              "block",
              "attention_bias",
              "positions",
              "tie_embeddings",
              "dropout",
              "normalisation",
              "ffn_activation",
              "ffn_bias",
              "head_bias"});
  const auto choice = [&](const std::string& key, const std::vector<std::string>& allowed) {
    const std::string v = text(file, m, key, "model", allowed.front());
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end())
      throw ConfigError(fmt::format("{}: model.{}: expected {}, found \"{}\"{}", at(file, m[key]),
                                    key, fmt::join(allowed, " or "), v, did_you_mean(v, allowed)));
    return v;
  };
  def.encoder_layers = count(file, m, "layers", "model");
  def.hidden = count(file, m, "hidden", "model");
  def.heads = count(file, m, "heads", "model");
  def.ffn = count(file, m, "ffn", "model");
  def.causal = choice("causal", {"false", "true"}) == "true";
  def.attention_dropout = choice("attention_dropout", {"true", "false"}) == "true";
  def.hidden_dropout = choice("dropout", {"true", "false"}) == "true";
  def.attention_mask = choice("attention_mask", {"false", "true"}) == "true";
  def.pre_norm = choice("norm", {"post", "pre"}) == "pre";
  const std::string head = choice("head", {"masked_lm", "lm", "classifier", "span"});
  def.lm_head = head == "lm";
  def.classifier = head == "classifier";
  def.span_head = head == "span";
  def.parallel_block = choice("block", {"sequential", "parallel"}) == "parallel";
  def.attention_bias = choice("attention_bias", {"true", "false"}) == "true";
  def.rotary = choice("positions", {"learned", "rotary"}) == "rotary";
  def.tied_head = choice("tie_embeddings", {"true", "false"}) == "true";
  def.head_bias = choice("head_bias", {"true", "false"}) == "true";
  def.rms_norm = choice("normalisation", {"layer_norm", "rms_norm"}) == "rms_norm";
  def.swiglu = choice("ffn_activation", {"gelu", "swiglu"}) == "swiglu";
  def.ffn_bias = choice("ffn_bias", {"true", "false"}) == "true";
  if (m["head_bias"] && def.tied_head)
    throw ConfigError(
        fmt::format("{}: model.head_bias: only an untied lm head has its own bias (add "
                    "tie_embeddings: false)",
                    at(file, m["head_bias"])));
  if (def.parallel_block && !def.pre_norm)
    throw ConfigError(fmt::format(
        "{}: model.block: a parallel block reads one layer norm before its attention and FFN "
        "(GPT-J); it needs norm: pre, found norm: post",
        at(file, m["block"])));
  if (!def.tied_head && !def.lm_head)
    throw ConfigError(
        fmt::format("{}: model.tie_embeddings: only an lm head has its own vocabulary matmul "
                    "(head: lm); found head: {}",
                    at(file, m["tie_embeddings"]), head));
  if (def.rotary && def.classifier)
    throw ConfigError(
        fmt::format("{}: model.positions: rotary positions rotate a language model's queries "
                    "and keys; an image classifier has learned positions",
                    at(file, m["positions"])));
  for (const char* key : {"input", "patch", "classes"})
    if (m[key] && !def.classifier)
      throw ConfigError(
          fmt::format("{}: model.{}: only an image classifier reads images (add head: classifier)",
                      at(file, m[key]), key));
  if (def.classifier) {
    parse_patches(file, m, def);
  } else {
    def.vocabulary = count(file, m, "vocabulary", "model");
    def.sequence = count(file, m, "sequence", "model");
  }
  parse_tokens(file, m, def);
  if (def.rotary && m["max_positions"])
    throw ConfigError(fmt::format(
        "{}: model.max_positions: rotary positions keep no position table (remove the key, or "
        "use positions: learned)",
        at(file, m["max_positions"])));
  // The attention layer splits its width among its heads.
  if (def.hidden % def.heads != 0)
    throw ConfigError(fmt::format(
        "{}: layer 'attention': model.heads ({}) must divide model.hidden ({}): each head takes "
        "hidden / heads channels",
        at(file, m["heads"]), def.heads, def.hidden));
  if (root["layers"])
    throw ConfigError(fmt::format("{}: a transformer takes no 'layers' list", file));
}

// A choice key of a model file: its value by the table's names (`fallback` when absent), an
// error listing them otherwise.
template <class E, std::size_t N>
E model_choice(const std::string& file, const YAML::Node& m, const char* key,
               const std::array<std::pair<std::string_view, E>, N>& table,
               std::optional<std::string> fallback = std::nullopt) {
  const std::string value = text(file, m, key, "model", std::move(fallback));
  std::string names;
  for (const auto& [name, e] : table) {
    if (name == value) return e;
    names += fmt::format("{}{}", names.empty() ? "" : " or ", name);
  }
  throw ConfigError(fmt::format("{}: model.{}: expected {}, found \"{}\"",
                                at(file, m[key] ? m[key] : m), key, names, value));
}

constexpr std::array<std::pair<std::string_view, graph::Family>, 2> kFamilies{
    {{"cnn", graph::Family::kCnn}, {"transformer", graph::Family::kTransformer}}};
constexpr std::array<std::pair<std::string_view, trace::DType>, 2> kModelDTypes{
    {{"half", trace::DType::kHalf}, {"float", trace::DType::kFloat}}};

ModelDef parse_model(const std::string& file, const YAML::Node& root) {
  if (!root.IsMap()) throw ConfigError(fmt::format("{}: expected a map with 'model'", file));
  check_keys(file, root, "(top)", {"model", "layers"});
  const YAML::Node m = root["model"];
  if (!m) throw ConfigError(fmt::format("{}: missing 'model'", file));
  ModelDef def;
  def.file = file;
  def.family = model_choice(file, m, "family", kFamilies);
  switch (def.family) {
    case graph::Family::kCnn:
      parse_cnn(file, root, m, def);
      break;
    case graph::Family::kTransformer:
      parse_transformer(file, root, m, def);
      break;
    case graph::Family::kGraph:  // not a model file's (kFamilies): imported graphs only
      break;
  }
  def.name = text(file, m, "name", "model");
  check_trace_name(at(file, m["name"]), "model.name", def.name);
  def.dtype = model_choice(file, m, "dtype", kModelDTypes, "half");
  return def;
}

}  // namespace

}  // namespace ipusim::compiler
