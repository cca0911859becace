// SPDX-License-Identifier: Apache-2.0
// GPT-J's decoder (models/gptj_6b.yaml; docs/models.md "transformer"): a parallel block (one
// layer norm read by the attention and the FFN), no attention biases, rotary positions and an
// untied LM head with a bias. Every count is by hand from that layout. No SystemC.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "compile_helpers.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/compiler/graph/primitive.hpp"

namespace ipusim::compiler {
namespace {

using graph::Primitive;

std::string models(const std::string& f) { return std::string(IPUSIM_SOURCE_DIR) + "/models/" + f; }

std::size_t count(const graph::TensorGraph& g, Primitive op) {
  std::size_t n = 0;
  for (const graph::Node& node : g.nodes()) n += node.op == op && !node.backward ? 1 : 0;
  return n;
}

TEST(DecoderBlocks, GptJ6bHasTheParametersOfItsLayout) {
  // Token table V x h; per layer one layer norm (2h), Q, K, V and output projections without
  // bias (4h^2), fc_in and fc_out with biases (2hf + f + h); the final layer norm (2h); the LM
  // head's own weight and bias (V h + V). V = 50,400, h = 4,096, f = 16,384, 28 layers.
  const std::uint64_t v = 50400, h = 4096, f = 16384, layers = 28;
  const std::uint64_t by_hand =
      v * h + layers * (2 * h + 4 * h * h + 2 * h * f + f + h) + 2 * h + v * h + v;
  ASSERT_EQ(by_hand, 6'050'882'784u);
  EXPECT_EQ(parameter_count(load_model(models("gptj_6b.yaml"))), by_hand);
}

TEST(DecoderBlocks, Llama2_7bHasTheParametersOfItsLayout) {
  // Token table V x h; per layer two RMS norms (2h, gammas only), Q, K, V and output (4h^2),
  // SwiGLU's gate, up and down (3hf), no biases; the final RMS norm (h); the untied head
  // without bias (V h). V = 32,000, h = 4,096, f = 11,008, 32 layers.
  const std::uint64_t v = 32000, h = 4096, f = 11008, layers = 32;
  const std::uint64_t by_hand = v * h + layers * (2 * h + 4 * h * h + 3 * h * f) + h + v * h;
  ASSERT_EQ(by_hand, 6'738'415'616u);
  EXPECT_EQ(parameter_count(load_model(models("llama2_7b.yaml"))), by_hand);
  // RMS norms only, and SiLU gates.
  const graph::TensorGraph g = graph::build_graph(load_model(models("llama2_7b.yaml")));
  EXPECT_EQ(count(g, Primitive::kLayerNorm), 0u);
  EXPECT_EQ(count(g, Primitive::kRmsNorm), 2 * layers + 1);
  EXPECT_EQ(count(g, Primitive::kSilu), layers);
}

TEST(DecoderBlocks, Gpt3_175bHasTheParametersOfItsLayout) {
  // GPT-2's block: token table V x h, positions P x h; per layer QKV and output (4h^2 + 4h),
  // the FFN (2hf + f + h) and two layer norms (4h); the final norm (2h); the LM head tied.
  // V = 50,257, P = 2,048, h = 12,288, f = 49,152, 96 layers: Brown et al.'s 175B.
  const std::uint64_t v = 50257, p = 2048, h = 12288, f = 49152, layers = 96;
  const std::uint64_t by_hand =
      v * h + p * h + layers * (4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h) + 2 * h;
  ASSERT_EQ(by_hand, 174'604'259'328u);
  EXPECT_EQ(parameter_count(load_model(models("gpt3_175b.yaml"))), by_hand);
}

TEST(DecoderBlocks, AParallelBlockNormsOnceAndItsFfnReadsThatNorm) {
  const ModelDef m = load_model(models("gptj_6b.yaml"));
  const graph::TensorGraph g = graph::build_graph(m);
  // One layer norm per block and the final one (a sequential pre-norm block has two).
  EXPECT_EQ(count(g, Primitive::kLayerNorm), m.encoder_layers + 1);
  // Each FFN's first matmul reads its attention's layer norm.
  for (const graph::Node& n : g.nodes()) {
    if (n.backward || n.op != Primitive::kMatmul || !n.layer.ends_with("/ffn")) continue;
    const auto producer = g.tensor(n.inputs[0]).producer;
    ASSERT_TRUE(producer.has_value());
    const graph::Node& p = g.node(*producer);
    if (p.layer != n.layer) {  // the FFN's first matmul (its second reads the GELU)
      EXPECT_EQ(p.op, Primitive::kLayerNorm) << n.layer;
      EXPECT_EQ(p.layer.substr(0, p.layer.find('/')), n.layer.substr(0, n.layer.find('/')));
    }
  }
  // Rotary positions: no position table; each query and key times cosines plus its rotated
  // (negated) copy times sines: two negations a layer.
  for (const graph::Tensor& t : g.tensors())
    if (t.role == graph::Role::kWeight)
      EXPECT_EQ(t.name.find("position"), std::string::npos) << t.name;
  EXPECT_EQ(count(g, Primitive::kNeg), 2 * m.encoder_layers);
}

TEST(DecoderBlocks, KeysThatDoNotFitTheModelAreErrorsNamingThem) {
  const std::string base = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/gpt_tiny.yaml";
  std::ifstream in(base);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto error = [&](const std::string& from, const std::string& to) {
    const std::string file = ::testing::TempDir() + "decoder_blocks_model.yaml";
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    std::ofstream(file) << t;
    return ipusim::testing::config_error_of([&] { (void)load_model(file); });
  };
  EXPECT_NE(error("norm: pre", "norm: post\n  block: parallel").find("model.block"),
            std::string::npos);
  EXPECT_NE(error("head: lm", "head: masked_lm\n  masked_tokens: 4\n  tie_embeddings: false")
                .find("model.tie_embeddings: only an lm head"),
            std::string::npos);
  EXPECT_NE(error("causal: true", "causal: true\n  positions: rotary\n  max_positions: 256")
                .find("model.max_positions: rotary positions keep no position table"),
            std::string::npos);
}

}  // namespace
}  // namespace ipusim::compiler
