// SPDX-License-Identifier: Apache-2.0
// `ipusim kernel conv2d|matmul --pass training --partials --available-memory`: single-layer
// training programs written by the CLI and run through the SystemC model. Expected FLOPs are
// the layer's MACs worked out from its shape (an AMP MAC counts 2 FLOP).
#include <gtest/gtest.h>

#include "cli_harness.hpp"

namespace ipusim::testing {
namespace {

std::string run_kernel(const TempDir& dir, const std::string& args) {
  const std::string trace = dir.file("k.trace");
  const auto k = ipusim("kernel " + args + " --out " + trace);
  EXPECT_EQ(k.status, 0) << k.err;
  const auto r = ipusim("run --out " + dir.file("out") + " " + trace);
  EXPECT_EQ(r.status, 0) << r.err;
  return read_all(dir.file("out/stats.json"));
}

double flops(const std::string& stats) {
  return json_value_after(stats.substr(stats.find("\"throughput\"")), "\"flops\"");
}
double compute_cycles(const std::string& stats) {
  return json_value_after(stats.substr(stats.find("\"phases\"")), "\"compute\"");
}

struct Layer {
  std::string args;
  double macs;
};

// 1x1, 3x3 and 7x7/2 convs and a BERT-Large matmul.
const Layer kLayers[] = {
    // 4 x 28 x 28 output positions x 512 in x 128 out
    {"conv2d --batch 4 --channels 512 --height 28 --width 28 --filters 128 --kernel 1",
     4.0 * 28 * 28 * 512 * 128},
    // 4 x 14 x 14 x 9 x 256 x 256
    {"conv2d --batch 4 --channels 256 --height 14 --width 14 --filters 256 --kernel 3",
     4.0 * 14 * 14 * 9 * 256 * 256},
    // stride 2 at 224: 112 x 112 outputs; 2 x 112 x 112 x 49 x 3 x 64
    {"conv2d --batch 2 --channels 3 --height 224 --width 224 --filters 64 --kernel 7 --stride 2",
     2.0 * 112 * 112 * 49 * 3 * 64},
    // attention output projection over 2 x 512 tokens
    {"matmul --m 1024 --n 1024 --k 1024", 1024.0 * 1024 * 1024},
};

TEST(LayerTraining, TrainingIsThreeTimesTheForwardFlops) {
  for (const auto& l : kLayers) {
    TempDir fdir, tdir;
    const double fwd = flops(run_kernel(fdir, l.args));
    const double train = flops(
        run_kernel(tdir, l.args + " --pass training --partials float --available-memory 0.6"));
    // Forward: the conv's MACs, plus the adds reducing partials over the input-channel blocks:
    // (blocks - 1) adds per output against 2 x in_chans FLOP of MACs, and a block holds at
    // least 16 input channels, so at most 1/32 more.
    EXPECT_GE(fwd, 2 * l.macs) << l.args;
    EXPECT_LE(fwd, 2 * l.macs * (1 + 1.0 / 32)) << l.args;
    // Training: forward, data gradient and weight gradient have the same MACs, each with at
    // most 1/32 more for its reductions; the SGD update adds 2 FLOP per weight (under 0.1%).
    EXPECT_GE(train, 3 * 2 * l.macs) << l.args;
    EXPECT_LE(train, 3 * 2 * l.macs * (1 + 1.0 / 32) * 1.001) << l.args;
  }
}

TEST(LayerTraining, DefaultsKeepTheForwardKernel) {
  TempDir dir;
  const std::string args =
      "conv2d --batch 2 --channels 64 --height 28 --width 28 --filters 64 --kernel 3";
  ASSERT_EQ(ipusim("kernel " + args + " --out " + dir.file("a.trace")).status, 0);
  ASSERT_EQ(
      ipusim("kernel " + args + " --pass forward --partials half --out " + dir.file("b.trace"))
          .status,
      0);
  EXPECT_EQ(read_all(dir.file("a.trace")), read_all(dir.file("b.trace")));
}

TEST(LayerTraining, FloatPartialsUseTheFloatAmpPathAndTakeLonger) {
  TempDir hdir, fdir;
  const std::string args =
      "conv2d --batch 4 --channels 256 --height 28 --width 28 --filters 256 --kernel 1";
  const std::string half = run_kernel(hdir, args);
  const std::string flt = run_kernel(fdir, args + " --partials float");
  // The same MACs (4 x 28 x 28 x 256 x 256; the plans may differ in their reductions, at
  // most 1/32 more), at 8 instead of 16 engines per tile.
  const double macs = 4.0 * 28 * 28 * 256 * 256;
  for (const auto* s : {&half, &flt}) {
    EXPECT_GE(flops(*s), 2 * macs);
    EXPECT_LE(flops(*s), 2 * macs * (1 + 1.0 / 32));
  }
  EXPECT_GT(compute_cycles(flt), compute_cycles(half));
  // The AMP vertices accumulate in float, and the trace's name says so.
  const std::string trace = read_all(fdir.file("k.trace"));
  EXPECT_NE(trace.find("_pfloat"), std::string::npos);
  EXPECT_NE(trace.find("amp_conv1x1 in=half partials=float"), std::string::npos);
  EXPECT_EQ(trace.find("partials=half"), std::string::npos);
  EXPECT_EQ(read_all(hdir.file("k.trace")).find("partials=float"), std::string::npos);
}

TEST(LayerTraining, LessAvailableMemoryNeverNeedsMoreTileMemory) {
  for (const auto& l : kLayers) {
    TempDir small, big;
    const std::string base = l.args + " --pass training --partials float --available-memory ";
    ASSERT_EQ(ipusim("kernel " + base + "0.05 --out " + small.file("k.trace")).status, 0);
    ASSERT_EQ(ipusim("kernel " + base + "0.6 --out " + big.file("k.trace")).status, 0);
    // conv_temporaries (bytes per tile) is the one tensor that depends on the budget.
    auto temp = [](const std::string& trace) {
      const auto at = trace.find("conv_temporaries");
      EXPECT_NE(at, std::string::npos);
      const auto line = trace.substr(at, trace.find('\n', at) - at);
      return std::stod(line.substr(line.find("bytes=") + 6));
    };
    EXPECT_LE(temp(read_all(small.file("k.trace"))), temp(read_all(big.file("k.trace")))) << l.args;
  }
}

TEST(LayerTraining, BadValuesAreClearErrors) {
  const std::string mm = "kernel matmul --m 64 --n 64 --k 64 --out /dev/null ";
  struct Bad {
    std::string option, message;
  };
  const Bad bad[] = {
      {"--pass backward", "--pass: expected forward or training"},
      {"--partials int", "--partials: expected half or float"},
      {"--available-memory 0",
       "--available-memory: expected a proportion of tile memory in (0, 1]"},
      {"--available-memory 1.5",
       "--available-memory: expected a proportion of tile memory in (0, 1]"},
      {"--available-memory -0.2",
       "--available-memory: expected a proportion of tile memory in (0, 1]"},
      {"--conv-unit-load-bits 96", "--conv-unit-load-bits: expected 64 or 128, found \"96\""},
      {"--conv-unit-load-bits -64", "--conv-unit-load-bits: expected 64 or 128, found \"-64\""},
      {"--pass training --fully-connected-pass maybe",
       "--fully-connected-pass: expected yes or no, found \"maybe\""},
      {"--fully-connected-pass no",
       "--fully-connected-pass applies to matmul with --pass training only"},
  };
  for (const auto& b : bad) {
    const auto r = ipusim(mm + b.option);
    EXPECT_NE(r.status, 0) << b.option;
    EXPECT_NE(r.err.find(b.message), std::string::npos) << b.option << ": " << r.err;
  }
  const auto other =
      ipusim("kernel reduce --outputs 10 --inputs 4 --pass training --out /dev/null");
  EXPECT_NE(other.status, 0);
  EXPECT_NE(other.err.find("apply to matmul and conv2d only"), std::string::npos) << other.err;
}

// Every AMP vertex of a planned kernel carries the weight-load width: 64 (Poplar's default)
// unless --conv-unit-load-bits 128 asks for the chip's full rate.
TEST(LayerTraining, EveryAmpVertexCarriesTheWeightLoadWidth) {
  TempDir dir;
  for (const char* bits : {"", " --conv-unit-load-bits 128"}) {
    for (const char* pass : {"forward", "training"}) {
      const std::string trace = dir.file("w.trace");
      const auto k = ipusim(std::string("kernel conv2d --batch 2 --channels 64 --height 14 "
                                        "--width 14 --filters 64 --kernel 3 --pass ") +
                            pass + bits + " --out " + trace);
      ASSERT_EQ(k.status, 0) << k.err;
      const std::string text = read_all(trace);
      const std::string want = *bits ? "coeff_load_bits=128" : "coeff_load_bits=64";
      std::size_t amp = 0, with = 0;
      for (std::size_t at = text.find("amp_conv"); at != std::string::npos;
           at = text.find("amp_conv", at + 1)) {
        ++amp;
        const std::size_t eol = text.find('\n', at);
        if (text.substr(at, eol - at).find(want) != std::string::npos) ++with;
      }
      EXPECT_GT(amp, 0u) << pass << bits;
      EXPECT_EQ(with, amp) << pass << bits;
    }
  }
}

TEST(LayerTraining, HelpDocumentsTheOptions) {
  const auto r = ipusim("kernel --help");
  EXPECT_EQ(r.status, 0);
  for (const char* s : {"--pass forward|training (=forward)", "--partials half|float (=half)",
                        "--available-memory P", "(0, 1]", "0.6", "tile memory"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

}  // namespace
}  // namespace ipusim::testing
