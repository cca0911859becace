// SPDX-License-Identifier: Apache-2.0
// Large and huge models are refused at load time in the model's own terms, or compile (issue
// 55, part 3): an ONNX graph of 20,000 layers, one of more than kMaxModelLayers, an ONNX file
// whose name holds a newline, a sample of more than 2^40 elements, a host-input suggestion
// past 2^64, and a compute set shared by more layers than a trace item may name. No SystemC.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include "compile_helpers.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/compiler/graph/primitive.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler {
namespace {

// --- a minimal protobuf writer for ONNX graphs ---
std::string varint(std::uint64_t v) {
  std::string out;
  do {
    out += static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    v >>= 7;
  } while (v != 0);
  return out;
}
std::string field_varint(int field, std::uint64_t v) { return varint(field << 3) + varint(v); }
std::string field_bytes(int field, const std::string& bytes) {
  return varint((field << 3) | 2) + varint(bytes.size()) + bytes;
}
std::string node(const std::string& op, const std::vector<std::string>& in, const std::string& out,
                 const std::string& name) {
  std::string n;
  for (const auto& i : in) n += field_bytes(1, i);
  return n + field_bytes(2, out) + field_bytes(3, name) + field_bytes(4, op);
}
// A float tensor initializer of `dims`, all zero.
std::string initializer(const std::string& name, const std::vector<std::uint64_t>& dims) {
  std::string t;
  std::uint64_t n = 1;
  for (auto d : dims) {
    t += field_varint(1, d);
    n *= d;
  }
  return t + field_varint(2, 1) + field_bytes(8, name) + field_bytes(9, std::string(4 * n, '\0'));
}
std::string value_info(const std::string& name, const std::vector<std::uint64_t>& dims) {
  std::string shape;
  for (auto d : dims) shape += field_bytes(1, field_varint(1, d));
  const std::string tensor = field_varint(1, 1) + field_bytes(2, shape);
  return field_bytes(1, name) + field_bytes(2, field_bytes(1, tensor));
}
// images [1, 3, 8, 8] -> 1x1 conv to 4 channels -> `relus` ReLUs -> global average pool ->
// flatten -> Gemm to 2 classes.
std::string relu_chain_onnx(std::size_t relus) {
  std::string g;
  g += field_bytes(1, node("Conv", {"images", "w"}, "t0", "conv"));
  for (std::size_t i = 0; i < relus; ++i)
    g += field_bytes(1, node("Relu", {"t" + std::to_string(i)}, "t" + std::to_string(i + 1),
                             "relu" + std::to_string(i)));
  const std::string last = "t" + std::to_string(relus);
  g += field_bytes(1, node("GlobalAveragePool", {last}, "pooled", "pool"));
  g += field_bytes(1, node("Flatten", {"pooled"}, "flat", "flatten"));
  g += field_bytes(1, node("Gemm", {"flat", "fc_w", "fc_b"}, "logits", "fc"));
  g += field_bytes(2, "chain");
  g += field_bytes(5, initializer("w", {4, 3, 1, 1}));
  g += field_bytes(5, initializer("fc_w", {4, 2}));  // [features, classes]: no transB
  g += field_bytes(5, initializer("fc_b", {2}));
  g += field_bytes(11, value_info("images", {1, 3, 8, 8}));
  g += field_bytes(12, value_info("logits", {1, 2}));
  return field_varint(1, 8) + field_bytes(7, g) + field_bytes(8, field_varint(2, 17));
}
std::string write(const std::string& name, const std::string& bytes) {
  const std::string file = ::testing::TempDir() + "/" + name;
  std::ofstream(file, std::ios::binary) << bytes;
  return file;
}
using ipusim::testing::config_error_of;

TEST(ModelLimits, AnOnnxGraphOf20000LayersLoadsAndOneOverTheLimitIsRefusedInItsTerms) {
  // Was refused at a line and column of the generated YAML (its node cap for hand-written
  // files).
  const ModelDef m = load_model(write("chain20k.onnx", relu_chain_onnx(20000)));
  // conv, the ReLUs, pool, flatten, fc, the loss ipusim adds
  EXPECT_EQ(m.layers.size(), 20000u + 5);
  EXPECT_EQ(parameter_count(m), 4u * 3 + 2 * 4 + 2);
  const std::string e = config_error_of(
      [&] { load_model(write("chain100k.onnx", relu_chain_onnx(kMaxModelLayers))); });
  EXPECT_NE(e.find("its nodes make 100005 layers, expected at most 100000 (a model's limit)"),
            std::string::npos)
      << e;
}

TEST(ModelLimits, AnOnnxFileNameIsEscapedInTheImportedHeader) {
  // A name with a newline was written raw into the generated YAML's header comment, where
  // "\nlayers: [...]" replaced the model's layers.
  const std::string file = write("x\nlayers: []\n.onnx", relu_chain_onnx(2));
  const std::string yaml = import_onnx(file);
  EXPECT_NE(yaml.find("from x\\nlayers: []\\n.onnx ("), std::string::npos) << yaml;
  EXPECT_EQ(load_model(file).layers.size(), 7u);
}

TEST(ModelLimits, AnOnnxConvWithAutoPadSameUpperPadsToCeilOfItsInputOverItsStride) {
  // (Built with this file's protobuf writer.) A 3x3 conv of stride 2 over 8 x 8 with auto_pad
  // SAME_UPPER, as exporters other than torch's write it: ceil(8 / 2) = 4 outputs each way,
  // the one padding row and column at the end ((4 - 1) x 2 + 3 - 8 = 1).
  const std::string attrs = field_bytes(5, field_bytes(1, "auto_pad") +
                                               field_bytes(4, "SAME_UPPER") + field_varint(20, 3)) +
                            field_bytes(5, field_bytes(1, "strides") + field_varint(8, 2) +
                                               field_varint(8, 2) + field_varint(20, 7));
  std::string g = field_bytes(1, node("Conv", {"images", "w"}, "y", "conv") + attrs);
  g += field_bytes(1, node("GlobalAveragePool", {"y"}, "pooled", "pool"));
  g += field_bytes(1, node("Flatten", {"pooled"}, "flat", "flatten"));
  g += field_bytes(1, node("Gemm", {"flat", "fc_w", "fc_b"}, "logits", "fc"));
  g += field_bytes(2, "same");
  g += field_bytes(5, initializer("w", {4, 3, 3, 3}));
  g += field_bytes(5, initializer("fc_w", {4, 2}));
  g += field_bytes(5, initializer("fc_b", {2}));
  g += field_bytes(11, value_info("images", {1, 3, 8, 8}));
  g += field_bytes(12, value_info("logits", {1, 2}));
  const std::string bytes =
      field_varint(1, 8) + field_bytes(7, g) + field_bytes(8, field_varint(2, 17));
  const ModelDef m = load_model(write("same_upper.onnx", bytes));
  const graph::TensorGraph graph = graph::build_graph(m);
  const auto conv = std::find_if(graph.nodes().begin(), graph.nodes().end(),
                                 [](const auto& n) { return n.op == graph::Primitive::kConv; });
  ASSERT_NE(conv, graph.nodes().end());
  EXPECT_EQ(graph.tensor(conv->outputs[0]).dims, (graph::Dims{1, 4, 4, 4}));
  EXPECT_EQ(conv->attrs.pad_begin, (graph::Dims{0, 0}));
  EXPECT_EQ(conv->attrs.pad_end, (graph::Dims{1, 1}));
}

TEST(ModelLimits, ASampleOfMoreThan2To40ElementsIsRefusedAtLoad) {
  // 2^32 x 2^32 x 3 gave only "64-bit arithmetic overflow" when compiled.
  const std::string file = write("huge_input.yaml",
                                 "model: {name: m, family: cnn, input: {height: 4294967296, width: "
                                 "4294967296, channels: 3}, classes: 2}\n"
                                 "layers:\n  - {name: c, op: conv, out: 4, kernel: 1}\n");
  const std::string e = config_error_of([&] { load_model(file); });
  EXPECT_NE(e.find("huge_input.yaml:1:38: model.input: 4294967296 x 4294967296 x 3 is more than "
                   "2^40 elements per sample, expected at most 1099511627776"),
            std::string::npos)
      << e;
}

TEST(ModelLimits, TheHostInputSuggestionDoesNotWrapPast2To64) {
  // 2^40 B per sample of a 3,072-element input, scaled to a 2^40-element one: 2^80 / 3,072 B,
  // ceil = 393,530,540,239,137,101,142 B (was printed wrapped modulo 2^64).
  RunConfig run;
  run.model_file = std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/resnet_tiny.yaml";
  run.input_bytes_per_sample = std::uint64_t{1} << 40;
  ModelDef big;
  big.file = "big.yaml";
  big.name = "big";
  big.height = big.width = 1 << 20;
  big.channels = 1;
  const auto m = input_mismatch(run, big, {});
  ASSERT_TRUE(m.has_value());
  EXPECT_NE(m->find("--set run.input_bytes_per_sample=393530540239137101142B"), std::string::npos)
      << *m;
}

TEST(ModelLimits, ACompiledItemNamesAtMostTheTracesLayersAndLaterLayersShareACopy) {
  // 4,100 ReLUs in place after one conv: each reuses the popnn ReLU compute set of its layout,
  // which named all 98,304 of a larger model and failed the trace check after 14 s.
  const std::string model = write(
      "relus.yaml",
      "model: {name: relus, family: cnn, input: {height: 8, width: 8, channels: 16}, classes: 16}\n"
      "layers:\n  - {name: c, op: conv, out: 16, kernel: 1}\n"
      "  - {repeat: 2050, as: \"r{i}\", layers: [{name: a, op: relu}, {name: b, op: relu}]}\n"
      "  - {name: pool, op: avgpool}\n  - {name: fc, op: fc, out: 16}\n"
      "  - {name: loss, op: softmax_loss}\n");
  LoadedRun run =
      load_run(std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/resnet_tiny-pod16.yaml",
               {"run.recompute_checkpoints=none", "run.batchnorm_group=1",
                "run.input_bytes_per_sample=1KiB"});
  const auto system = ipusim::load_system(run.run.system_file);
  const trace::Trace t = compile(load_model(model), run.run, system.spec);  // structure checked
  std::size_t most = 0;
  bool copied = false;
  for (const auto& cs : t.ipus[0].compute_sets) {
    most = std::max(most, cs.provenance.layers.size());
    copied = copied || cs.name.ends_with("/copy1");
  }
  EXPECT_EQ(most, trace::kMaxProvenanceLayers);
  EXPECT_TRUE(copied);
}

// The message of the ModelError compiling the reduced ResNet with `set` throws ("" if none).
std::string compile_error(const std::vector<std::string>& set) {
  try {
    (void)testing::compile_run(
        std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/resnet_tiny-pod16.yaml", set);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelLimits, MemoryErrorsNameTheLayerPassAndShapeAndTheKeysThatHelp) {
  // Issue 55, part 5: "no tile mapping fits" named neither the layer nor the shape, and an
  // out-of-memory error no key that helps.
  std::string e = compile_error({"run.micro_batch=200000"});
  EXPECT_NE(e.find("layer 'conv1', forward pass: a conv of 200000 samples of 32 x 32 x 3 to 16 "
                   "channels (conv2d_n200000_c3_32x32_k16_f3_s1_half): no tile mapping fits"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("; what makes it fit: fewer samples per micro-batch (run.micro_batch), or a "
                   "chip with more memory per tile (chip.tile_memory) or more tiles (chip.tiles)"),
            std::string::npos)
      << e;
  // 16 KiB tiles hold the plans' buffers but not the program.
  LoadedRun run =
      load_run(std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/resnet_tiny-pod16.yaml");
  auto system = ipusim::load_system(run.run.system_file, {"chip.tile_memory=16KiB"});
  try {
    (void)compile(load_model(run.run.model_file), run.run, system.spec);
    ADD_FAILURE() << "16 KiB tiles held the reduced ResNet";
  } catch (const ModelError& oom) {
    e = oom.what();
  }
  EXPECT_NE(e.find("out of memory on tile"), std::string::npos) << e;
  EXPECT_NE(e.find("; what makes it fit: fewer samples per micro-batch (run.micro_batch), "
                   "recomputation checkpoints (run.recompute_checkpoints), more IPUs per replica"),
            std::string::npos)
      << e;
}

TEST(ModelLimits, ATileFullOfSmallTensorsSaysHowManyOfEachKind) {
  // Issue 55, part 3: 98,304 conv and batch-norm layers of 16 channels failed after minutes on
  // tile 0, whose three "largest tensors" were a few hundred bytes: its memory is thousands of
  // small tensors, each layer's weights, gradient, momentum and activations mapped from tile 0
  // on. 1,024 such layers on 48 KiB tiles: the message counts each kind.
  const std::string model =
      write("narrow.yaml",
            "model: {name: narrow, family: cnn, input: {height: 4, width: 4, channels: 16}, "
            "classes: 16}\nlayers:\n"
            "  - {repeat: 512, as: \"b{i}\", layers: [{name: c, op: conv, out: 16, kernel: 3}, "
            "{name: n, op: batchnorm}]}\n"
            "  - {name: pool, op: avgpool}\n  - {name: fc, op: fc, out: 16}\n"
            "  - {name: loss, op: softmax_loss}\n");
  LoadedRun run = load_run(
      std::string(IPUSIM_SOURCE_DIR) + "/tests/data/workloads/resnet_tiny-pod16.yaml",
      {"run.recompute_checkpoints=none", "run.input_bytes_per_sample=256B", "run.micro_batch=1"});
  const auto system = ipusim::load_system(run.run.system_file, {"chip.tile_memory=48KiB"});
  std::string e;
  try {
    (void)compile(load_model(model), run.run, system.spec);
    ADD_FAILURE() << "1,024 layers' tensors fit tile 0 of 48 KiB";
  } catch (const ModelError& oom) {
    e = oom.what();
  }
  EXPECT_NE(e.find("out of memory on tile 0"), std::string::npos) << e;
  // Each of the 512 convs' kernels and the 512 batch norms' gamma and beta (1,536) has a weight
  // tensor, its gradient accumulator and its momentum on tile 0 (as have the fc's weights and
  // bias).
  for (const char* kinds : {" tensors on the tile: 1538 weight tensors", "1538 optimiser tensors"})
    EXPECT_NE(e.find(kinds), std::string::npos) << kinds << "\n" << e;
}

}  // namespace
}  // namespace ipusim::compiler
