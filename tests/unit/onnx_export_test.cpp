// SPDX-License-Identifier: Apache-2.0
// The ONNX front end on real exporter output: the models of tests/data/onnx/torch/, written
// by torch.onnx.export (Debian's python3-torch 1.13) through tools/export-torch-models.py with
// their weight bytes stripped, and what torch said of each (exports.yaml: its parameter count
// and the FLOPs of its convolutions and matrix products in one sample's forward pass, counted
// on the aten ops torch ran). No torch and no SystemC here.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compile_helpers.hpp"
#include "compiler/onnx.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/compiler/graph/primitive.hpp"
#include "ipusim/config/config.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler {
namespace {

std::string torch_dir() { return std::string(IPUSIM_SOURCE_DIR) + "/tests/data/onnx/torch/"; }

// exports.yaml's entry `key` of `model`.
std::string recorded(const std::string& model, const std::string& key) {
  static const config::Document doc = config::load_document(torch_dir() + "exports.yaml");
  const auto it = doc.values.find(model + "." + key);
  return it == doc.values.end() ? "" : it->second.text;
}
std::uint64_t recorded_count(const std::string& model, const std::string& key) {
  return std::stoull(recorded(model, key));
}

// 2 FLOPs per multiply-add of the forward graph's convs and matmuls (their biases apart), for
// one sample: what torch's count covers.
std::uint64_t product_flops(const graph::TensorGraph& g) {
  std::uint64_t total = 0;
  for (const auto& n : g.nodes()) {
    if (n.op != graph::Primitive::kConv && n.op != graph::Primitive::kMatmul) continue;
    std::vector<const graph::Dims*> in, out;
    for (const auto t : n.inputs) in.push_back(&g.tensor(t).dims);
    for (const auto t : n.outputs) out.push_back(&g.tensor(t).dims);
    total += graph::info(n.op).flops(in, out, n.attrs);
    if (n.op == graph::Primitive::kConv && n.inputs.size() == 3)
      total -= graph::elements(*out[0]);  // (the bias add)
  }
  return total;
}

class TorchExport : public ::testing::TestWithParam<const char*> {};

// Each imports; its parameters are torch's (an export in eval mode folds each batch norm into
// the conv before it: then torch's count of the model so fused), and the FLOPs of its convs and
// matmuls are torch's.
TEST_P(TorchExport, ImportsWithTorchsParametersAndFlops) {
  const std::string name = GetParam();
  ASSERT_FALSE(recorded(name, "file").empty()) << name << " is not in exports.yaml";
  const ModelDef m = load_model(torch_dir() + recorded(name, "file"));
  EXPECT_EQ(m.family, graph::Family::kGraph);
  EXPECT_EQ(parameter_count(m), recorded_count(name, "exported_parameters"));
  if (recorded(name, "mode") == "training")
    EXPECT_EQ(parameter_count(m), recorded_count(name, "parameters"));
  graph::BuildOptions one;
  one.training = false;
  EXPECT_EQ(product_flops(graph::build_graph(m, one)), recorded_count(name, "forward_flops"));
}

INSTANTIATE_TEST_SUITE_P(Cnns, TorchExport,
                         ::testing::Values("resnet50_eval_opset13", "resnet50_train_opset17",
                                           "resnet50_dynamic_batch", "resnet18_opset11",
                                           "efficientnet_b0", "efficientnet_b0_train_opset17",
                                           "mobilenet_v2"));
// Transformers: ViT's classifier and the Llama-style decoder's LM head are their own weights;
// the BERT-Base-sized encoder and the GPT-2-small-sized decoder, exported in training mode
// (no constant folding), tie their LM head to the token embedding as Transpose(table): one
// table, as torch counts it.
INSTANTIATE_TEST_SUITE_P(Transformers, TorchExport,
                         ::testing::Values("vit_b_16", "vit_b_16_dynamic_batch",
                                           "bert_base_encoder", "gpt2_small_decoder",
                                           "llama_small"));

TEST(TorchExport, AHeadTiedByConstantFoldingIsCountedTwiceAndSaid) {
  // In eval mode with constant folding (torch's defaults) a tied head's transpose becomes a
  // copy of the table, which without the weights' data cannot be told from an untied head:
  // the graph counts the table twice, and says so.
  const std::string name = "gpt2_tiny_tied_eval";
  const ModelDef m = load_model(torch_dir() + recorded(name, "file"));
  EXPECT_EQ(parameter_count(m), recorded_count(name, "parameters") + 1000 * 64);
  const bool said = std::any_of(m.notes.begin(), m.notes.end(), [](const std::string& n) {
    return n.find("its 64000 parameters are counted twice") != std::string::npos;
  });
  EXPECT_TRUE(said);
  graph::BuildOptions one;
  one.training = false;
  EXPECT_EQ(product_flops(graph::build_graph(m, one)), recorded_count(name, "forward_flops"));
}

TEST(TorchExport, AHeadTiedByConstantFoldingIsCountedOnceWhenItsDataIsThere) {
  // The same fold with the weights kept, embedded or as external data beside the model: the
  // copy's data is the table transposed, so the head reads the table, as torch counts it.
  for (const char* name :
       {"gpt2_micro_tied_eval_weights", "gpt2_micro_tied_eval_external_weights"}) {
    const ModelDef m = load_model(torch_dir() + recorded(name, "file"));
    EXPECT_EQ(parameter_count(m), recorded_count(name, "parameters")) << name;
    const bool said = std::any_of(m.notes.begin(), m.notes.end(), [](const std::string& n) {
      return n.find("holds the embedding table 'tokens.weight' transposed") != std::string::npos;
    });
    EXPECT_TRUE(said) << name;
    graph::BuildOptions one;
    one.training = false;
    EXPECT_EQ(product_flops(graph::build_graph(m, one)), recorded_count(name, "forward_flops"))
        << name;
  }
}

// onnx::holds_transposed on hand-written external data: b [4, 3] is a [3, 4] transposed, or
// is not, or both are zeros (no evidence).
TEST(TorchExport, HoldsTransposedComparesTheDataWhereItIs) {
  const std::string dir = ::testing::TempDir() + "/holds-transposed";
  std::filesystem::create_directories(dir);
  std::vector<float> a(12), t(12), other(12, 1.0F), zeros(12, 0.0F);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      a[i * 4 + j] = static_cast<float>(1 + i * 4 + j);
      t[j * 3 + i] = a[i * 4 + j];
    }
  std::ofstream(dir + "/w.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(a.data()), 48)
      .write(reinterpret_cast<const char*>(t.data()), 48)
      .write(reinterpret_cast<const char*>(other.data()), 48)
      .write(reinterpret_cast<const char*>(zeros.data()), 48)
      .write(reinterpret_cast<const char*>(zeros.data()), 48);
  onnx::Graph g;
  g.file = dir + "/model.onnx";
  const auto tensor = [](std::vector<std::int64_t> dims, std::uint64_t at) {
    onnx::Tensor x;
    x.dims = std::move(dims);
    x.elem_type = static_cast<std::int32_t>(onnx::ElemType::kFloat);
    x.external = true;
    x.location = "w.bin";
    x.offset = at;
    x.length = 48;
    return x;
  };
  EXPECT_TRUE(onnx::holds_transposed(g, tensor({3, 4}, 0), tensor({4, 3}, 48)));
  EXPECT_FALSE(onnx::holds_transposed(g, tensor({3, 4}, 0), tensor({4, 3}, 96)));
  EXPECT_FALSE(onnx::holds_transposed(g, tensor({3, 4}, 144), tensor({4, 3}, 192)));
  // Absent data (a missing file, a range past its end) is no evidence either.
  onnx::Tensor missing = tensor({4, 3}, 48);
  missing.location = "absent.bin";
  EXPECT_FALSE(onnx::holds_transposed(g, tensor({3, 4}, 0), missing));
  EXPECT_FALSE(onnx::holds_transposed(g, tensor({3, 4}, 0), tensor({4, 3}, 240)));
}

TEST(TorchExport, GeluWrittenOutIsOneGelu) {
  // torch writes F.gelu at opset 17 as its formula: erf's five nodes (nn.TransformerEncoder's
  // and torchvision ViT's GELU) and the tanh form's ten (GPT-2's). Each layer's is one GELU.
  for (const char* name : {"bert_base_encoder", "vit_b_16", "gpt2_small_decoder"}) {
    const ModelDef m = load_model(torch_dir() + recorded(name, "file"));
    graph::BuildOptions one;
    one.training = false;
    const graph::TensorGraph g = graph::build_graph(m, one);
    const auto count = [&](graph::Primitive op) {
      return std::count_if(g.nodes().begin(), g.nodes().end(),
                           [&](const graph::Node& n) { return n.op == op; });
    };
    EXPECT_EQ(count(graph::Primitive::kGelu), 12) << name;
    EXPECT_EQ(count(graph::Primitive::kErf), 0) << name;
    EXPECT_EQ(count(graph::Primitive::kTanh), 0) << name;
  }
}

TEST(TorchExport, ADynamicBatchTakesTheRunsBatchAndAFixedOneIsRebound) {
  // resnet50_dynamic_batch.onnx has a symbolic batch ("batch"); resnet50_eval_opset13.onnx
  // was exported with a batch of 1. Either takes the batch it is built for: the same graph.
  for (const char* file : {"resnet50_dynamic_batch.onnx", "resnet50_eval_opset13.onnx"}) {
    const ModelDef m = load_model(torch_dir() + file);
    graph::BuildOptions five;
    five.batch = 5;
    five.training = false;
    const graph::TensorGraph g = graph::build_graph(m, five);
    const graph::Dims& logits = g.tensor(g.nodes().back().outputs[0]).dims;
    EXPECT_EQ(logits, (graph::Dims{5, 1000})) << file;
    graph::BuildOptions single = five;
    single.batch = 1;
    EXPECT_EQ(g.flops(true, false), 5 * graph::build_graph(m, single).flops(true, false)) << file;
  }
}

TEST(TorchExport, AnLstmAndAGridSampleAreNamedErrors) {
  const std::string e =
      ipusim::testing::config_error_of([] { load_model(torch_dir() + "lstm_classifier.onnx"); });
  EXPECT_NE(e.find("node '/lstm/LSTM' (LSTM): op LSTM is a recurrent layer, which ipusim does "
                   "not model"),
            std::string::npos)
      << e;
  const std::string g =
      ipusim::testing::config_error_of([] { load_model(torch_dir() + "grid_sample.onnx"); });
  EXPECT_NE(g.find("node '/GridSample' (GridSample): op GridSample is sampling at "
                   "data-dependent positions, which ipusim does not model"),
            std::string::npos)
      << g;
}

TEST(TorchExport, Fp32WeightsAreHeldAsTheRunsFloat16AndTheImportSaysSo) {
  const ModelDef m = load_model(torch_dir() + "mobilenet_v2.onnx");
  EXPECT_EQ(m.dtype, trace::DType::kHalf);
  ASSERT_FALSE(m.notes.empty());
  EXPECT_NE(m.notes.front().find("float32 weights are held as float16"), std::string::npos);
  const graph::TensorGraph g = graph::build_graph(m);
  for (const auto& t : g.tensors())
    if (t.role == graph::Role::kWeight) EXPECT_EQ(t.dtype, trace::DType::kHalf) << t.name;
}

}  // namespace
}  // namespace ipusim::compiler
