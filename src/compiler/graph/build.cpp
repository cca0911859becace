// SPDX-License-Identifier: Apache-2.0
// The model-file front ends of the tensor graph (graph/build.hpp).
#include "ipusim/compiler/graph/build.hpp"

#include <fmt/format.h>

#include <map>

#include "../onnx.hpp"
#include "ipusim/compiler/graph/primitive.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"
#include "shapes.hpp"

namespace ipusim::compiler::graph {
namespace {

using P = Primitive;
constexpr trace::DType kIndex = trace::DType::kInt;

// The stride and "same" padding of a window of `k` at `stride` over each of `spatial`:
// out = ceil(in / stride), the padding split with the odd element at the end (the CNN model
// files' convention).
void same_pads(Attrs& a, const Dims& spatial, std::uint64_t k, std::uint64_t stride) {
  for (std::uint64_t in : spatial) {
    const std::uint64_t out = ceil_div(in, stride);
    const std::uint64_t reach = (out - 1) * stride + k;
    const std::uint64_t total = reach > in ? reach - in : 0;
    a.stride.push_back(stride);
    a.pad_begin.push_back(total / 2);
    a.pad_end.push_back(total - total / 2);
  }
}

Dims spatial_of(const TensorGraph& g, TensorId x) {
  const Dims& d = g.tensor(x).dims;
  return Dims(d.begin() + 2, d.end());
}

Attrs reshaped(Dims dims) {
  Attrs a;
  a.dims = std::move(dims);
  return a;
}

// A batch of `n` images as the host streams them, 8-bit values, cast and normalised on the IPU,
// (x - mean) / std per channel (workloads.md), before the first layer.
TensorId normalised_images(TensorGraph& g, const ModelDef& m, std::uint64_t n) {
  const trace::DType dt = m.dtype;
  Attrs cast;
  cast.dtype = dt;
  TensorId x = g.add(
      P::kCast, {g.input("images", {n, m.channels, m.height, m.width}, trace::DType::kChar)}, cast);
  x = g.add(P::kSub, {x, g.input("mean", {m.channels, 1, 1}, dt, Role::kConstant)});
  return g.add(P::kMul, {x, g.input("1/std", {m.channels, 1, 1}, dt, Role::kConstant)});
}

// A CNN model file's layers (docs/models.md), NCHW, as torchvision builds them: convs with
// "same" padding and no bias, fc as a linear layer ([out, in] weights read transposed, a bias).
TensorGraph build_cnn(const ModelDef& m, const BuildOptions& o) {
  (void)infer_shapes(m);  // the model file's own shape errors, naming file:line
  TensorGraph g;
  const trace::DType dt = m.dtype;
  const std::uint64_t n = o.batch;
  std::map<std::string, TensorId> by_layer;
  TensorId previous = normalised_images(g, m, n);
  for (const Layer& l : m.layers) {
    g.set_layer(l.name, l.at);
    const TensorId x = l.input.empty() ? previous : by_layer.at(l.input);
    const std::uint64_t c = g.tensor(x).dims[1];
    TensorId y = x;
    switch (l.op) {
      case Op::kConv:
      case Op::kDwconv: {
        const std::uint64_t filters = l.out > 0 ? l.out : c;
        const std::uint64_t per_group = l.group_size > 0 ? l.group_size : c;
        const TensorId w =
            g.weight(l.name + ".weight", {filters, per_group, l.kernel, l.kernel}, dt);
        Attrs a;
        same_pads(a, spatial_of(g, x), l.kernel, l.stride);  // the window is w's
        a.groups = c / per_group;
        y = g.add(P::kConv, {x, w}, a);
        break;
      }
      case Op::kBatchNorm:
      case Op::kGroupNorm: {
        const TensorId gamma = g.weight(l.name + ".weight", {c}, dt);
        const TensorId beta = g.weight(l.name + ".bias", {c}, dt);
        Attrs a;
        a.groups = m.norm_groups;
        y = g.add(l.op == Op::kBatchNorm ? P::kBatchNorm : P::kGroupNorm, {x, gamma, beta}, a);
        break;
      }
      case Op::kRelu:
        y = g.add(P::kRelu, {x});
        break;
      case Op::kSwish:
        y = g.add(P::kSilu, {x});
        break;
      case Op::kSigmoid:
        y = g.add(P::kSigmoid, {x});
        break;
      case Op::kMaxPool: {
        Attrs a;
        a.kernel = {l.kernel, l.kernel};
        same_pads(a, spatial_of(g, x), l.kernel, l.stride);
        y = g.add(P::kMaxPool, {x}, a);
        break;
      }
      case Op::kAdd:
        y = g.add(P::kAdd, {x, by_layer.at(l.other)});
        break;
      case Op::kConcat: {
        Attrs a;
        a.axis = 1;
        y = g.add(P::kConcat, {x, by_layer.at(l.other)}, a);
        break;
      }
      case Op::kUpsample: {
        Attrs a;
        a.dims = {1, 1, l.factor, l.factor};
        y = g.add(P::kResize, {x}, a);
        break;
      }
      case Op::kScale:  // per-channel factors [N, C, 1, 1], broadcast over the positions
        y = g.add(P::kMul, {x, by_layer.at(l.other)});
        break;
      case Op::kAvgPool: {  // global: [N, C, H, W] -> [N, C, 1, 1]
        Attrs a;
        a.axes = {2, 3};
        y = g.add(P::kReduceMean, {x}, a);
        break;
      }
      case Op::kFc: {
        const TensorId flat =
            g.add(P::kReshape, {x}, reshaped({n, elements(g.tensor(x).dims) / n}));
        const TensorId w = g.weight(l.name + ".weight", {l.out, c}, dt);
        Attrs a;
        a.transpose_b = true;
        y = g.add(P::kAdd,
                  {g.add(P::kMatmul, {flat, w}, a), g.weight(l.name + ".bias", {l.out}, dt)});
        // a model file's fc output is a 1x1 image of `out` channels, as a 1x1 conv makes it
        y = g.add(P::kReshape, {y}, reshaped({n, l.out, 1, 1}));
        break;
      }
      case Op::kSoftmaxLoss: {
        // Over the channels of each position: [N, C] logits after an fc (its 1x1 image
        // flattened), or [N, C, H, W] with a label per pixel (segmentation).
        const Dims& d = g.tensor(x).dims;
        const bool per_pixel = elements(d) / n != c;
        const TensorId logits = per_pixel ? x : g.add(P::kReshape, {x}, reshaped({n, c}));
        if (o.training) {
          Dims labels = g.tensor(logits).dims;
          labels.erase(labels.begin() + 1);
          y = g.add(P::kSoftmaxCrossEntropy, {logits, g.input("labels", labels, kIndex)});
        } else {
          Attrs a;
          a.axis = 1;
          y = g.add(P::kSoftmax, {logits}, a);
        }
        break;
      }
      case Op::kEmbedding:
      case Op::kAttention:
      case Op::kFfn:
      case Op::kFinalNorm:
      case Op::kHeads:
      case Op::kView:
      case Op::kElementwise:
      case Op::kNode:
      case Op::kCount:
        throw Error(fmt::format("layer '{}': {} is not a CNN layer", l.name, name(l.op)));
    }
    by_layer[l.name] = y;
    previous = y;
  }
  return g;
}

// A transformer's sizes (docs/models.md, "Transformers") as its PyTorch model builds it:
// BERT (post-norm, masked-LM head tied to the token embedding), GPT-2 (pre-norm, causal, tied
// LM head), ViT (patch conv with bias, class token, classifier) and BERT for SQuAD (span head).
// One [3h, h] QKV projection per layer (three [h, h] ones count the same).
class TransformerBuilder {
 public:
  TransformerBuilder(const ModelDef& m, const BuildOptions& o) : m_(m), o_(o) {}

  TensorGraph build() {
    TensorId x = embeddings();
    for (std::uint64_t i = 0; i < m_.encoder_layers; ++i) {
      x = attention(x, fmt::format("encoder{}/attention", i));
      x = ffn(x, fmt::format("encoder{}/ffn", i));
    }
    if (m_.pre_norm) {
      g_.set_layer("final_norm");
      x = layer_norm(x, "final_norm");
    }
    heads(x);
    return std::move(g_);
  }

 private:
  TensorId weight(const std::string& name, Dims dims) {
    return g_.weight(name, std::move(dims), m_.dtype);
  }
  // A linear layer: x [..., in] times w [out, in] read transposed (kept as `parts` equal
  // tensors), plus a bias. Split by rows (`row_split`: x and w are this IPU's share of the
  // features), the partial products are summed over the head group before it; else over the
  // hidden group (2-D tensor parallelism: `in` is this IPU's share of the hidden features).
  TensorId linear(TensorId x, std::uint64_t in, std::uint64_t out, const std::string& name,
                  std::uint32_t parts = 1, bool bias = true, bool row_split = false) {
    Attrs a;
    a.transpose_b = true;
    const TensorId w = weight(name + ".weight", {out, in});
    g_.tensor(w).parts = parts;
    TensorId y =
        all_reduce(g_.add(P::kMatmul, {x, w}, a), row_split ? Over::kHeads : Over::kHidden);
    return bias ? g_.add(P::kAdd, {y, weight(name + ".bias", {out})}) : y;
  }
  // Tensor parallelism (BuildOptions::tensor_parallel, Megatron's f and g): a value entering
  // split work, and the sum of split work's partial results, over the IPUs splitting the heads,
  // FFN and vocabulary (tp1) or, 2-D, the hidden dimension (tp2); nothing over one IPU.
  enum class Over : std::uint8_t { kHeads, kHidden };
  std::uint32_t tp() const { return o_.tensor_parallel; }
  std::uint32_t tp2() const { return o_.hidden_parallel; }
  std::uint32_t tp1() const { return tp() / tp2(); }
  std::uint64_t hidden_shard() const { return m_.hidden / tp2(); }
  Attrs group(Over o) const {
    const ReplicaIpus g = tensor_parallel_group(tp(), tp2(), o == Over::kHeads);
    Attrs a;
    a.group_size = g.size;
    a.group_stride = g.stride;
    return a;
  }
  std::uint32_t ipus(Over o) const { return o == Over::kHeads ? tp1() : tp2(); }
  TensorId shard_input(TensorId x, Over o = Over::kHeads) {
    return ipus(o) > 1 ? g_.add(P::kShardInput, {x}, group(o)) : x;
  }
  TensorId all_reduce(TensorId x, Over o = Over::kHeads) {
    return ipus(o) > 1 ? g_.add(P::kAllReduce, {x}, group(o)) : x;
  }
  // A linear layer split by rows (the second of a Megatron pair), its whole bias after the sum.
  TensorId row_linear(TensorId x, std::uint64_t in, std::uint64_t out, const std::string& name,
                      bool bias = true) {
    return linear(x, in, out, name, 1, bias, /*row_split=*/true);
  }
  // Learned positions split by rows with the token table (popxl GPT-3's embedding.py).
  bool positions_split() const { return tp1() > 1 && !m_.rotary && !m_.classifier; }
  // Tokens per sequence the graph computes: one when decoding with a KV cache.
  std::uint64_t tokens() const { return o_.decode ? 1 : m_.sequence; }
  // This IPU's share of the vocabulary (stored: of the padded vocabulary).
  std::uint64_t vocabulary_shard() const { return ceil_div(m_.vocabulary, tp1()); }
  std::uint64_t padded_shard() const { return ceil_div(m_.padded_vocabulary(), tp1()); }
  // Over this IPU's share of the hidden features (2-D: each row's statistics all-reduced over
  // the hidden group).
  TensorId layer_norm(TensorId x, const std::string& name) {
    const std::uint64_t h = hidden_shard();
    Attrs a = group(Over::kHidden);
    a.shards = tp2();
    if (m_.rms_norm) return g_.add(P::kRmsNorm, {x, weight(name + ".weight", {h})}, a);
    return g_.add(P::kLayerNorm, {x, weight(name + ".weight", {h}), weight(name + ".bias", {h})},
                  a);
  }
  // Hidden dropout (model.dropout), and dropout of any tensor in training.
  TensorId dropout(TensorId x) { return m_.hidden_dropout ? dropped(x) : x; }
  TensorId dropped(TensorId x) {
    if (!o_.training) return x;
    Attrs a;
    a.ratio = 0.1;
    return g_.add(P::kDropout, {x}, a);
  }
  TensorId reshape(TensorId x, Dims dims) { return g_.add(P::kReshape, {x}, reshaped(dims)); }
  TensorId transpose(TensorId x, std::vector<std::uint32_t> perm) {
    Attrs a;
    a.axes = std::move(perm);
    return g_.add(P::kTranspose, {x}, a);
  }
  // x [B, S, h] -> its first `count` positions.
  TensorId first_positions(TensorId x, std::uint64_t count) {
    Attrs a;
    a.axes = {1};
    a.starts = {0};
    a.ends = {count};
    return g_.add(P::kSlice, {x}, a);
  }

  TensorId embeddings() {
    const std::uint64_t b = o_.batch, s = tokens(), h = hidden_shard();
    g_.set_layer("embedding");
    TensorId x;
    if (m_.classifier) {
      // Patches by a conv of kernel and stride `patch` with a bias, flattened to [B, N, h],
      // and the class token in front.
      // The images arrive as 8-bit values and are cast and normalised on the IPU, (x - mean) /
      // std per channel, as Graphcore's ViT example feeds them.
      const std::uint64_t p = m_.patch, c = m_.channels;
      Attrs cast;
      cast.dtype = m_.dtype;
      TensorId images = g_.add(
          P::kCast, {g_.input("images", {b, c, m_.height, m_.width}, trace::DType::kChar)}, cast);
      images = g_.add(P::kSub, {images, g_.input("mean", {c, 1, 1}, m_.dtype, Role::kConstant)});
      images = g_.add(P::kMul, {images, g_.input("1/std", {c, 1, 1}, m_.dtype, Role::kConstant)});
      Attrs a;
      a.stride = {p, p};
      const TensorId patches = g_.add(
          P::kConv,
          {images, weight("conv_proj.weight", {h, c, p, p}), weight("conv_proj.bias", {h})}, a);
      const std::uint64_t n = elements(spatial_of(g_, patches));
      const TensorId tokens = transpose(reshape(patches, {b, h, n}), {0, 2, 1});
      Attrs e;
      e.dims = {b, 1, h};
      const TensorId cls = g_.add(P::kExpand, {weight("class_token", {1, 1, h})}, e);
      Attrs rows;
      rows.axis = 1;
      x = g_.add(P::kConcat, {cls, tokens}, rows);
    } else {
      // Split by rows of the vocabulary: each IPU looks up the ids in its share (zeros for the
      // others), and the rows are summed over the group.
      table_ = weight("word_embeddings.weight", {vocabulary_shard(), h});
      g_.tensor(table_).stored = {padded_shard(), h};
      x = g_.add(P::kGather, {table_, g_.input("input_ids", {b, s}, kIndex)});
      // Learned positions split the same way and added before the one sum.
      if (positions_split())
        x = g_.add(P::kAdd, {x, positions(ceil_div(m_.max_positions, tp1()), s)});
      x = all_reduce(x);
      if (m_.token_types > 0)
        x = g_.add(P::kAdd, {x, g_.add(P::kGather,
                                       {weight("token_type_embeddings.weight", {m_.token_types, h}),
                                        g_.input("token_type_ids", {b, s}, kIndex)})});
    }
    // (rotary positions are applied to each attention's queries and keys)
    if (!m_.rotary && !positions_split()) x = g_.add(P::kAdd, {x, positions(m_.max_positions, s)});
    if (!m_.pre_norm) x = layer_norm(x, "embeddings.LayerNorm");
    return dropout(x);
  }

  // Multi-head self-attention with the residual and (post- or pre-) layer norm.
  TensorId attention(TensorId x, const std::string& layer) {
    // Under tensor parallelism each IPU runs 1/T of the heads: Q, K and V split by columns,
    // the output projection by rows.
    // 2-D, x and the output are this IPU's share of the hidden features (its hidden group's
    // IPUs hold the rest), the projections' contractions summed over that group.
    const std::uint64_t b = o_.batch, s = tokens(), h = hidden_shard();
    const std::uint64_t d = m_.hidden / m_.heads, heads = m_.heads / tp1(), hl = heads * d;
    // Decoding, the new token attends to every cached position (the cache's fixed length, the
    // later ones masked: popxl Llama's per-token causal mask).
    const std::uint64_t keys = o_.decode ? m_.sequence : s;
    g_.set_layer(layer);
    const TensorId normed = m_.pre_norm ? layer_norm(x, layer + ".norm") : x;
    normed_ = normed;
    const TensorId in = shard_input(normed);
    Attrs split;
    split.axis = 2;
    split.dims = {hl, hl, hl};
    // Split, three [h, h] weights concatenated for the one matmul (MLPerf v1.1 Graphcore
    // bert_model.py qkv_weights).
    const std::vector<TensorId> qkv = g_.add_node(
        P::kSplit, {linear(in, h, 3 * hl, layer + ".qkv", o_.split_qkv ? 3 : 1, m_.attention_bias)},
        split);
    // [B, S, h] -> [B, heads, S, d]
    auto per_head = [&](TensorId t) {
      return transpose(reshape(t, {b, s, heads, d}), {0, 2, 1, 3});
    };
    Attrs qk;
    qk.transpose_b = true;
    // Decoding: the new token's K and V are written into the cache (not charged: heads x d
    // values a sequence) and the query reads the cache.
    const TensorId k =
        o_.decode ? cache(layer + ".k_cache", b, heads, keys, d) : rotated(per_head(qkv[1]));
    const TensorId v = o_.decode ? cache(layer + ".v_cache", b, heads, keys, d) : per_head(qkv[2]);
    TensorId scores = g_.add(P::kMatmul, {rotated(per_head(qkv[0])), k}, qk);
    scores =
        g_.add(P::kMul, {scores, g_.input("1/sqrt(d)", {}, trace::DType::kFloat, Role::kConstant)});
    if (m_.causal)
      scores =
          g_.add(P::kAdd, {scores, g_.input("causal_mask", {s, keys}, m_.dtype, Role::kConstant)});
    if (m_.attention_mask)
      scores = g_.add(P::kAdd, {scores, g_.input("attention_mask", {b, 1, s, s}, m_.dtype)});
    Attrs last;
    last.axis = 3;
    TensorId probs = g_.add(P::kSoftmax, {scores}, last);
    if (m_.attention_dropout) probs = dropped(probs);
    const TensorId context = g_.add(P::kMatmul, {probs, v});
    TensorId y = row_linear(
        shard_input(reshape(transpose(context, {0, 2, 1, 3}), {b, s, hl}), Over::kHidden), hl, h,
        layer + ".out", m_.attention_bias);
    y = g_.add(P::kAdd, {dropout(y), x});
    return m_.pre_norm ? y : layer_norm(y, layer + ".norm");
  }

  TensorId ffn(TensorId x, const std::string& layer) {
    // Under tensor parallelism: the first matmul split by columns, the second by rows.
    const std::uint64_t h = hidden_shard(), f = m_.ffn / tp1();
    g_.set_layer(layer);
    // A parallel block's FFN reads its attention's layer norm (of the block's input, not of
    // x, the input plus the attention's output).
    const TensorId normed = m_.parallel_block ? normed_
                            : m_.pre_norm     ? layer_norm(x, layer + ".norm")
                                              : x;
    const TensorId in = shard_input(normed);
    TensorId y;
    if (m_.swiglu) {  // Llama: down(silu(gate x) * up x)
      const TensorId gate = g_.add(P::kSilu, {linear(in, h, f, layer + ".gate", 1, m_.ffn_bias)});
      y = g_.add(P::kMul, {gate, linear(in, h, f, layer + ".up", 1, m_.ffn_bias)});
    } else {
      y = g_.add(P::kGelu, {linear(in, h, f, layer + ".in", 1, m_.ffn_bias)});
    }
    y = g_.add(
        P::kAdd,
        {dropout(row_linear(shard_input(y, Over::kHidden), f, h, layer + ".out", m_.ffn_bias)), x});
    return m_.pre_norm ? y : layer_norm(y, layer + ".norm");
  }

  // logits [N, K] against labels [N] (training), or the logits; the classes split over
  // `shards` IPUs.
  void loss(TensorId logits, std::uint32_t shards = 1) {
    if (!o_.training) return;
    const std::uint64_t rows = g_.tensor(logits).dims[0];
    Attrs a = shards > 1 ? group(Over::kHeads) : Attrs{};
    a.shards = shards;
    (void)g_.add(P::kSoftmaxCrossEntropy, {logits, g_.input("labels", {rows}, kIndex)}, a);
  }
  // A language model's over the vocabulary (split over the tensor-parallel IPUs): the loss
  // (training), or each row's predicted token id (inference: under tensor parallelism, each
  // IPU's best and its index combined over the group).
  void predict(TensorId logits) {
    if (o_.training) return loss(logits, tp1());
    const TensorId ids = g_.add(P::kArgMax, {logits});
    (void)all_reduce(ids);
  }

  void heads(TensorId x) {
    const std::uint64_t b = o_.batch, s = tokens(), h = hidden_shard();
    g_.set_layer("heads");
    Attrs tied;  // the token embedding, read transposed, serialised over the padded vocabulary
    tied.transpose_b = true;
    tied.serial = o_.vocabulary_serial;
    tied.padded_columns = padded_shard();
    if (m_.classifier) {
      loss(linear(reshape(first_positions(x, 1), {b, h}), h, m_.classes, "heads.classifier"));
    } else if (m_.span_head) {
      // A start and an end score per token, each a softmax over its sequence: the two losses
      // (BertForQuestionAnswering's start and end cross entropies) as one over [B x 2, S].
      // Without the loss the head ends at the scores, as the model returns them.
      const TensorId scores = linear(x, h, 2, "heads.qa_outputs");
      if (!o_.training) return;
      const TensorId rows = reshape(transpose(scores, {0, 2, 1}), {b * 2, s});
      (void)g_.add(P::kSoftmaxCrossEntropy,
                   {rows, g_.input("start_end_positions", {b * 2}, kIndex)});
    } else if (m_.lm_head) {
      TensorId logits;
      if (m_.tied_head) {
        logits = all_reduce(g_.add(P::kMatmul, {shard_input(x), table_}, tied), Over::kHidden);
      } else {  // its own weight and bias (GPT-J's lm_head), split by vocabulary rows as the table
        const TensorId w = weight("lm_head.weight", {vocabulary_shard(), h});
        g_.tensor(w).stored = {padded_shard(), h};
        logits = all_reduce(g_.add(P::kMatmul, {shard_input(x), w}, tied), Over::kHidden);
        if (m_.head_bias) {
          const TensorId bias = weight("lm_head.bias", {vocabulary_shard()});
          g_.tensor(bias).stored = {padded_shard()};
          logits = g_.add(P::kAdd, {logits, bias});
        }
      }
      predict(reshape(logits, {b * s, vocabulary_shard()}));
    } else {
      // The masked-LM head: the transform (dense, GELU, layer norm) on every token, then the
      // masked positions (first in each sequence, as the packed MLPerf data puts them) sliced
      // out for the tied vocabulary matmul and its bias (Graphcore's MLPerf BERT, bert_model.py
      // lm_prediction_head and projection).
      const std::uint64_t masked = o_.masked_tokens > 0 ? o_.masked_tokens : m_.masked_tokens;
      TensorId y = g_.add(P::kGelu, {linear(x, h, h, "heads.transform")});
      y = shard_input(first_positions(layer_norm(y, "heads.transform.LayerNorm"), masked));
      const TensorId bias = weight("heads.bias", {vocabulary_shard()});
      g_.tensor(bias).stored = {padded_shard()};
      y = g_.add(P::kAdd, {g_.add(P::kMatmul, {y, table_}, tied), bias});
      predict(reshape(y, {b * masked, vocabulary_shard()}));
    }
  }

  // Rotary positions (model.positions rotary): q or k [B, heads, S, d] times each position's
  // cosines, plus its rotated copy (negated pairs: costed as a negation) times the sines; over
  // every head channel (GPT-J rotates 64 of its 256: an overcount of elementwise work only).
  TensorId rotated(TensorId t) {
    if (!m_.rotary) return t;
    const std::uint64_t s = tokens(), d = m_.hidden / m_.heads;
    const TensorId cos = g_.input("rotary_cos", {s, d}, m_.dtype, Role::kConstant);
    const TensorId sin = g_.input("rotary_sin", {s, d}, m_.dtype, Role::kConstant);
    return g_.add(P::kAdd,
                  {g_.add(P::kMul, {t, cos}), g_.add(P::kMul, {g_.add(P::kNeg, {t}), sin})});
  }

  // The learned position embeddings of `rows` positions, looked up for `s` tokens.
  TensorId positions(std::uint64_t rows, std::uint64_t s) {
    return g_.add(P::kGather, {weight("position_embeddings.weight", {rows, hidden_shard()}),
                               g_.input("position_ids", {s}, kIndex)});
  }
  // A layer's cached keys or values, [B, heads, positions, d] (this IPU's heads).
  TensorId cache(const std::string& name, std::uint64_t b, std::uint64_t heads,
                 std::uint64_t positions, std::uint64_t d) {
    return g_.input(name, {b, heads, positions, d}, m_.dtype);
  }

  const ModelDef& m_;
  const BuildOptions& o_;
  TensorGraph g_;
  TensorId table_{};   // the token embedding table
  TensorId normed_{};  // the last attention's layer norm (a parallel block's FFN reads it)
};

}  // namespace

TensorGraph build_graph(const ModelDef& m, const BuildOptions& options) {
  if (options.batch == 0) throw Error("build_graph: a batch of 0 samples");
  switch (m.family) {
    case Family::kCnn:
      return build_cnn(m, options);
    case Family::kTransformer:
      return TransformerBuilder(m, options).build();
    case Family::kGraph: {
      if (!m.onnx) throw Error("build_graph: an imported model without its graph");
      onnx::GraphOptions o;
      o.batch = options.batch;
      o.training = options.training;
      o.dtype = m.dtype;
      o.vocabulary_serial = options.vocabulary_serial;
      return onnx::build_graph(*m.onnx, o);
    }
  }
  throw Error("build_graph: no front end for the model's family");
}

ReplicaIpus tensor_parallel_group(std::uint32_t tensor_parallel, std::uint32_t hidden_parallel,
                                  bool heads) {
  if (hidden_parallel == 1) return {};
  if (heads) return {tensor_parallel / hidden_parallel, hidden_parallel};
  return {hidden_parallel, 1};
}

TensorId loss_of(const TensorGraph& g) {
  if (g.nodes().empty() || g.nodes().back().outputs.size() != 1 ||
      !g.tensor(g.nodes().back().outputs[0]).dims.empty())
    throw Error("loss_of: the graph's last node does not make a scalar loss");
  return g.nodes().back().outputs[0];
}

}  // namespace ipusim::compiler::graph
