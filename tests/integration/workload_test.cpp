// SPDX-License-Identifier: Apache-2.0
// The workload compiler end to end: ResNet-50 on IPU-POD16, out-of-memory errors, bad run
// configs, and what-if directions on reduced models (tests/data/workloads/).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_harness.hpp"

namespace ipusim::testing {
namespace {

std::string workload_dir() { return source_dir() + "/tests/data/workloads/"; }

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

double step_cycles(const std::string& stats) { return json_value_after(stats, "\"total\""); }
double step_seconds(const std::string& stats) {
  return json_value_after(stats.substr(stats.find("\"total\"")), "\"time\"");
}

// Compiles `run` with `sets` (applied to compile and, unless they are run.* keys, to the
// simulation) and returns stats.json.
std::string compile_and_run(const TempDir& dir, const std::string& run, const std::string& sets) {
  const std::string trace = dir.file("w.itb");
  const auto c = ipusim("compile --run " + run + " " + sets + " --out " + trace);
  EXPECT_EQ(c.status, 0) << c.err;
  const bool run_keys = sets.find("run.") != std::string::npos;
  const auto r = ipusim("run -q --system " + source_dir() + "/configs/systems/pod16.yaml " +
                        (run_keys ? "" : sets) + " --out " + dir.file("out") + " " + trace);
  EXPECT_EQ(r.status, 0) << r.err;
  return read_all(dir.file("out/stats.json"));
}

TEST(Workload, ResNet50OnPod16ReportsThroughputAndTimeToTrain) {
  TempDir dir;
  const std::string stats =
      compile_and_run(dir, source_dir() + "/configs/runs/resnet50-pod16.yaml", "");
  const double step = step_seconds(stats);
  const double throughput = json_value_after(stats, "\"throughput\"");
  // 16 replicas x 20 images x 10 micro-batches per step.
  EXPECT_NEAR(throughput * step, 3200.0, 1e-6);
  EXPECT_NE(stats.find("\"unit\": \"images/s\""), std::string::npos);
  // TTT: 38 epochs x ceil(1281167 / 3200) steps + 9 checkpoints x 2 s + 30 s of evaluation.
  const double ttt = json_value_after(stats, "\"time_to_train\"");
  EXPECT_NEAR(ttt, 38 * 401 * step + 18 + 30, 1e-6 * ttt);
  // Data-parallel structure: gradient all-reduce and batch-norm all-reduces ran.
  EXPECT_GT(json_value_after(stats, "\"collective\""), 0);
}

// Issue 51: a model file can concatenate and upsample feature maps. A DenseNet block and a
// small U-Net train on a POD16 with their by-hand parameter counts (the model files' headers).
TEST(Workload, DenseNetBlockAndUNetTrainWithConcatAndUpsample) {
  for (const auto& [run, parameters] : {std::pair{"densenet_block-pod16.yaml", 54250.0},
                                        std::pair{"unet_small-pod16.yaml", 81520.0}}) {
    TempDir dir;
    const auto r = ipusim("run -q --run " + workload_dir() + run + " --out " + dir.file("out"));
    ASSERT_EQ(r.status, 0) << run << ": " << r.err;
    const std::string stats = read_all(dir.file("out/stats.json"));
    EXPECT_EQ(json_value_after(stats, "\"parameters\""), parameters) << run;
    EXPECT_NE(stats.find("\"mode\": \"training\""), std::string::npos) << run;
    EXPECT_GT(json_value_after(stats, "\"backward\""), 0) << run;
    EXPECT_GT(step_cycles(stats), 0) << run;
  }
}

// Every shipped run config (configs/runs) compiles for its own system, with the replicas and
// pipeline its file gives, and cites its source (issue 26: the published configurations are run
// configs that compile, each with its source and simplifications).
TEST(Workload, EveryShippedRunConfigCompilesForItsSystem) {
  TempDir dir;
  int configs = 0;
  for (const auto& e : std::filesystem::directory_iterator(source_dir() + "/configs/runs")) {
    if (e.path().extension() != ".yaml") continue;
    ++configs;
    const auto c = ipusim("compile --run " + e.path().string() + " --out " + dir.file("t.itb"));
    EXPECT_EQ(c.status, 0) << e.path() << ": " << c.err;
    EXPECT_NE(c.out.find("compiled "), std::string::npos) << e.path();
    // Its header names where the configuration comes from and what is simplified
    // (tools/run-table.sh reads both into docs/workloads.md).
    const std::string text = read_all(e.path().string());
    EXPECT_NE(text.find("\n# Source: "), std::string::npos) << e.path();
    EXPECT_NE(text.find("\n# Simplifications: "), std::string::npos) << e.path();
  }
  EXPECT_GE(configs, 31);
  // Two of the published ones by hand: GPT-2 small on POD16 is 4 replicas of a 4-IPU pipeline,
  // BERT-Base phase 1 the same shape (graphcore/examples benchmarks.yml, configs_pretraining.yml).
  for (const char* run : {"gpt2-small-pod16", "bert-base-phase1-pod16"}) {
    const auto c = ipusim("compile --run " + source_dir() + "/configs/runs/" + run +
                          ".yaml --out " + dir.file("t.itb"));
    EXPECT_NE(c.out.find("for IPU-POD16: 4 replica(s) x 4 IPU(s)"), std::string::npos) << c.out;
  }
  // And the CNNs of vision/cnns/pytorch configs.yml: ResNet-50 data parallel, EfficientNet-B4
  // G16-GN as 8 replicas of a 2-IPU pipeline.
  for (const auto& [run, shape] :
       {std::pair{"resnet50-pytorch-pod16", "for IPU-POD16: 16 replica(s) x 1 IPU(s)"},
        std::pair{"efficientnet-b4-g16-gn-pod16", "for IPU-POD16: 8 replica(s) x 2 IPU(s)"}}) {
    const auto c = ipusim("compile --run " + source_dir() + "/configs/runs/" + run +
                          ".yaml --out " + dir.file("t.itb"));
    EXPECT_NE(c.out.find(shape), std::string::npos) << c.out;
  }
}

TEST(Workload, Gpt2MediumOnPod16CompilesRunsAndReportsThroughput) {
  // models/gpt2_medium.yaml with Graphcore's POD16 parallelism (2 replicas of an 8-IPU
  // pipeline, micro-batch 1, gradient accumulation 4096): 8,192 sequences per step, every IPU
  // of the POD16 used, gradients reduce-scattered and weights all-gathered across replicas.
  TempDir dir;
  const std::string stats =
      compile_and_run(dir, source_dir() + "/configs/runs/gpt2-medium-pod16.yaml", "");
  const double step = step_seconds(stats);
  EXPECT_GT(step, 0);
  const double throughput = json_value_after(stats, "\"throughput\"");
  EXPECT_NEAR(throughput * step, 8192.0, 1e-6 * 8192);
  EXPECT_NE(stats.find("\"unit\": \"sequences/s\""), std::string::npos);
  EXPECT_NE(stats.find("\"model\": \"GPT-2-medium\""), std::string::npos);
  EXPECT_GT(json_value_after(stats, "\"collective\""), 0);
}

TEST(Workload, VitB16OnPod16ReportsImagesAndTimeToTrain) {
  // models/vit_b16.yaml with the recipe's parallelism (4 replicas of a 4-IPU pipeline,
  // micro-batch 17, gradient accumulation 32): 2,176 images per step, 5,000 steps to train
  // (10,880,000 images), and every IPU of the POD16 used.
  TempDir dir;
  const std::string stats =
      compile_and_run(dir, source_dir() + "/configs/runs/vit-b16-pod16.yaml", "");
  const double step = step_seconds(stats);
  EXPECT_GT(step, 0);
  EXPECT_NEAR(json_value_after(stats, "\"throughput\"") * step, 2176.0, 1e-6 * 2176);
  EXPECT_NE(stats.find("\"unit\": \"images/s\""), std::string::npos);
  EXPECT_NE(stats.find("\"model\": \"ViT-B-16\""), std::string::npos);
  const double ttt = json_value_after(stats, "\"time_to_train\"");
  EXPECT_NEAR(ttt, 5000 * step, 1e-6 * ttt);
  EXPECT_GT(json_value_after(stats, "\"collective\""), 0);  // the gradient all-reduce
}

TEST(Workload, EfficientNetB0OnPod16ReportsImagesAndTimeToTrain) {
  // models/efficientnet_b0.yaml data parallel: 16 replicas x 10 images x 5 micro-batches per
  // step; 350 epochs of ceil(1,281,167 / 800) = 1,602 steps.
  TempDir dir;
  const std::string stats =
      compile_and_run(dir, source_dir() + "/configs/runs/efficientnet-b0-pod16.yaml", "");
  const double step = step_seconds(stats);
  EXPECT_GT(step, 0);
  EXPECT_NEAR(json_value_after(stats, "\"throughput\"") * step, 800.0, 1e-6 * 800);
  EXPECT_NE(stats.find("\"model\": \"EfficientNet-B0\""), std::string::npos);
  const double ttt = json_value_after(stats, "\"time_to_train\"");
  EXPECT_NEAR(ttt, 350 * 1602 * step, 1e-6 * ttt);
  EXPECT_GT(json_value_after(stats, "\"collective\""), 0);
}

TEST(Workload, ResNet50InferenceOnAC600CardStreamsItsImagesOverThePcieLink) {
  // configs/systems/c600.yaml: one Bow-clocked IPU (1.85 GHz) whose host transfers use the
  // chip's own PCIe Gen4 x16 link, 32 GB/s each way plus 2 us (chip.host.*). A step's 90 8-bit
  // 224 x 224 x 3 images are 90 x 150,528 = 13,547,520 B: ceil((13,547,520 / 32e9 + 2e-6) x
  // 1.85e9) = ceil(786,916.0) cycles of streaming, one transfer.
  TempDir dir;
  const auto r =
      ipusim("run -q --run " + source_dir() +
             "/configs/runs/resnet50-pytorch-inference-c600.yaml --out " + dir.file("out"));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string stats = read_all(dir.file("out/stats.json"));
  EXPECT_NE(stats.find("\"name\": \"C600\""), std::string::npos);
  const std::string streaming = stats.substr(stats.find("\"streaming\""));
  EXPECT_EQ(json_value_after(streaming, "\"value\""), 786916);
  EXPECT_EQ(json_value_after(streaming, "\"count\""), 1);
  EXPECT_NEAR(json_value_after(stats, "\"throughput\"") * step_seconds(stats), 90.0, 1e-6 * 90);
}

TEST(Workload, ChipThatCannotHoldTheModelFailsToCompile) {
  TempDir dir;
  const auto r = ipusim("compile --run " + source_dir() + "/configs/runs/bert-large-pod16.yaml " +
                        "--set chip.tile_memory=256KiB --out " + dir.file("x.itb"));
  EXPECT_EQ(r.status, 4);
  EXPECT_NE(r.err.find("out of memory on tile"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("largest tensors:"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.itb")));
}

TEST(Workload, TransformerWithOneIpuPerReplicaCompilesOrFailsWithOutOfMemory) {
  TempDir dir;
  // A replica of one IPU has no stage boundary, so no inter-IPU copy (once a self-copy).
  const std::string one = " --set run.ipus_per_replica=1 --set run.pipeline_placement=ipu0=2,2";
  const std::string stats = compile_and_run(dir, workload_dir() + "bert_tiny-pod16.yaml", one);
  EXPECT_GT(step_cycles(stats), 0);
  const auto inter_ipu = stats.find("\"inter_ipu\"");
  ASSERT_NE(inter_ipu, std::string::npos);
  EXPECT_EQ(json_value_after(stats.substr(inter_ipu), "\"cycles\""), 0)
      << "no inter-IPU copies expected";
  // BERT-Large does not fit on one IPU: the out-of-memory error, not a crash.
  const auto r =
      ipusim("compile --run " + source_dir() + "/configs/runs/bert-large-pod16.yaml" +
             " --set run.ipus_per_replica=1 --set run.replicas=16" +
             " --set run.pipeline_placement=ipu0=24,24 --set run.available_memory_proportion=0.23" +
             " --out " + dir.file("b.itb"));
  EXPECT_EQ(r.status, 4) << r.err;
  EXPECT_NE(r.err.find("out of memory on tile"), std::string::npos) << r.err;
}

TEST(Workload, FusionAndStatisticsCachingShortenTheStep) {
  TempDir dir;
  const std::string run = workload_dir() + "resnet_tiny-pod16.yaml";
  const std::string base = compile_and_run(dir, run, "");
  const std::string unfused = compile_and_run(dir, run, "--set run.fuse_elementwise=no");
  const std::string uncached = compile_and_run(dir, run, "--set run.batchnorm_statistics_cache=no");
  auto phases = [](const std::string& stats, const std::string& kind) {
    return json_value_after(stats.substr(stats.find("\"" + kind + "\"")), "\"count\"");
  };
  // Unfused chains run one compute set per op; recomputation without the cache reduces and
  // all-reduces the statistics again.
  EXPECT_GT(phases(unfused, "compute"), phases(base, "compute"));
  EXPECT_GT(step_cycles(unfused), step_cycles(base));
  EXPECT_GT(phases(uncached, "collective"), phases(base, "collective"));
  EXPECT_GT(step_cycles(uncached), step_cycles(base));
}

TEST(Workload, RunConfigSetsTheWeightLoadWidthOfEveryAmpVertex) {
  // run.conv_unit_load_bits: 64 by default (Poplar's), 128 on request, nothing else.
  TempDir dir;
  const std::string run = workload_dir() + "resnet_tiny-pod16.yaml";
  for (const char* bits : {"", "128"}) {
    const std::string out = dir.file(std::string("l") + bits + ".trace");
    const auto c = ipusim("compile --run " + run +
                          (*bits ? std::string(" --set run.conv_unit_load_bits=") + bits : "") +
                          " --out " + out);
    ASSERT_EQ(c.status, 0) << c.err;
    const std::string text = read_all(out);
    const std::string want = std::string("coeff_load_bits=") + (*bits ? bits : "64");
    std::size_t amp = 0, with = 0;
    for (std::size_t at = text.find(" amp_conv"); at != std::string::npos;
         at = text.find(" amp_conv", at + 1)) {
      ++amp;
      const std::size_t eol = text.find('\n', at);
      if (text.substr(at, eol - at).find(want) != std::string::npos) ++with;
    }
    EXPECT_GT(amp, 0u);
    EXPECT_EQ(with, amp) << want;
  }
  const auto bad = ipusim("compile --run " + run + " --set run.conv_unit_load_bits=96 --out " +
                          dir.file("bad.trace"));
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("run.conv_unit_load_bits: expected one of 64, 128, found \"96\""),
            std::string::npos)
      << bad.err;
}

TEST(Workload, Precision1632PlansEveryConvWithFloatPartials) {
  // run.precision 16.32 gives every AMP vertex float partials (8 engines per tile on GC200
  // instead of 16); 16.16 keeps half partials. (The step is not necessarily longer: with 16
  // output channels the 8-engine grain lets this tiny model's convs spread over more tiles.)
  TempDir dir;
  const std::string run = workload_dir() + "resnet_tiny-pod16.yaml";
  for (const char* precision : {"16.16", "16.32"}) {
    const auto c = ipusim("compile --run " + run + " --set run.precision=" + precision + " --out " +
                          dir.file(std::string(precision) + ".trace"));
    ASSERT_EQ(c.status, 0) << c.err;
  }
  const std::string half = read_all(dir.file("16.16.trace")),
                    flt = read_all(dir.file("16.32.trace"));
  EXPECT_NE(half.find("in=half partials=half"), std::string::npos);
  EXPECT_EQ(half.find("in=half partials=float"), std::string::npos);
  EXPECT_NE(flt.find("in=half partials=float"), std::string::npos);
  EXPECT_EQ(flt.find("in=half partials=half"), std::string::npos);
}

TEST(Workload, TinyAvailableMemoryProportionCompiles) {
  // Issue 16 D: 1e-7 of tile memory is a valid proportion; the planner doubles the budget
  // until a plan fits, which used to take minutes (ctest's timeout would fail this test).
  TempDir dir;
  const auto r = ipusim("compile --run " + source_dir() + "/configs/runs/resnet50-pod16.yaml" +
                        " --set run.available_memory_proportion=1e-7 --out " + dir.file("x.itb"));
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST(Workload, ModelFilesOfTheWrongShapeAreClearErrors) {
  // Found by the model-file fuzzer: a scalar where a map belongs threw yaml-cpp's BadSubscript
  // past the loader.
  TempDir dir;
  const std::string run = source_dir() + "/configs/runs/resnet50-pod16.yaml";
  write_file(dir.file("a.yaml"), "model: cnn\nlayers: []\n");
  auto r =
      ipusim("compile --run " + run + " --model " + dir.file("a.yaml") + " --out " + dir.file("x"));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("a.yaml:1:8: model: expected a map"), std::string::npos) << r.err;
  write_file(dir.file("b.yaml"), "model:\n  family: cnn\n  name: x\n  input: 5\nlayers: []\n");
  r = ipusim("compile --run " + run + " --model " + dir.file("b.yaml") + " --out " + dir.file("x"));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("b.yaml:4:10: model.input: expected a map"), std::string::npos) << r.err;
  write_file(dir.file("c.yaml"), "model:\n  ? [family]\n  : cnn\n");
  r = ipusim("compile --run " + run + " --model " + dir.file("c.yaml") + " --out " + dir.file("x"));
  EXPECT_EQ(r.status, 3) << r.err;
}

TEST(Workload, BadRunConfigsAreClearErrors) {
  TempDir dir;
  const std::string run = source_dir() + "/configs/runs/resnet50-pod16.yaml";
  auto r = ipusim("compile --run " + run + " --set run.recompute_checkpoints=b9/0/relu --out " +
                  dir.file("x"));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("run.recompute_checkpoints: 'b9/0/relu' is not a layer"), std::string::npos)
      << r.err;
  r = ipusim("compile --run " + run + " --set run.replicas=32 --out " + dir.file("x"));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("need 32 IPUs, but IPU-POD16 (run.system) has 16"), std::string::npos)
      << r.err;
  r = ipusim("compile --run " + run + " --set run.optimizer=sgd --out " + dir.file("x"));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("did you mean run.optimiser?"), std::string::npos) << r.err;
}

class WorkloadWhatIf : public ::testing::TestWithParam<const char*> {};

// Faster clock, more tiles and a wider exchange each shorten the step of a reduced model.
TEST_P(WorkloadWhatIf, FasterHardwareShortensTheStep) {
  const std::string run = workload_dir() + GetParam();
  TempDir base_dir, clock_dir, tiles_dir, exchange_dir;
  // Baseline: half the tiles, so that "more tiles" can be tested against the full chip.
  const std::string base = compile_and_run(base_dir, run, "--set chip.tiles=736");
  const std::string clock =
      compile_and_run(clock_dir, run, "--set chip.tiles=736 --set chip.clock=1.85GHz");
  const std::string tiles = compile_and_run(tiles_dir, run, "");
  const std::string exchange = compile_and_run(
      exchange_dir, run, "--set chip.tiles=736 --set chip.exchange.bytes_per_cycle=8B/cycle");
  // Clock: on-chip cycles are unchanged, so time shrinks (link and host terms do not scale).
  EXPECT_LT(step_seconds(clock), step_seconds(base));
  EXPECT_GT(step_seconds(clock), step_seconds(base) * 1.325 / 1.85 * 0.99);
  EXPECT_LT(step_seconds(tiles), step_seconds(base));
  EXPECT_LT(step_cycles(exchange), step_cycles(base));
}

INSTANTIATE_TEST_SUITE_P(ReducedModels, WorkloadWhatIf,
                         ::testing::Values("resnet_tiny-pod16.yaml", "bert_tiny-pod16.yaml",
                                           "vit_tiny-pod16.yaml", "effnet_tiny-pod16.yaml",
                                           "gpt_tiny-pod16.yaml"));

}  // namespace
}  // namespace ipusim::testing

namespace ipusim::testing {
namespace {

TEST(RunTarget, ATraceOnAnotherChipOrALargerSystemWarnsAndStrictFails) {
  // The reduced ResNet compiled for IPU-POD16 (16 GC200s of 1,472 tiles, 638,976 B each).
  TempDir dir;
  const std::string trace = dir.file("t.itb");
  const std::string pod16 = source_dir() + "/configs/systems/pod16.yaml";
  const std::string pod64 = source_dir() + "/configs/systems/pod64.yaml";
  ASSERT_EQ(
      ipusim("compile --run " + workload_dir() + "resnet_tiny-pod16.yaml --out " + trace).status,
      0);
  // On its own target: no warning, and stats.json says so.
  auto r = ipusim("run -q --system " + pod16 + " --out " + dir.file("same") + " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  EXPECT_NE(read_all(dir.file("same/stats.json")).find("\"warnings\": []"), std::string::npos);
  // On a 2,000-tile chip: it runs (528 tiles idle) with a warning on stderr and in stats.json.
  r = ipusim("run -q --system " + pod16 + " --set chip.tiles=2000 --out " + dir.file("wide") + " " +
             trace);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning: " + trace +
                       ": the trace was planned for another chip than this run's GC200: "
                       "a GC200 with 1472 tiles (here 2000); recompile it"),
            std::string::npos)
      << r.err;
  EXPECT_NE(read_all(dir.file("wide/stats.json")).find("1472 tiles (here 2000)"),
            std::string::npos);
  // More memory per tile and another AMP are differences too.
  r = ipusim("run -q --system " + pod16 +
             " --set chip.tile_memory=1MiB --set chip.amp.engines_half_float=16 " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(
      r.err.find("638976 B of memory per tile (here 1048576 B); AMP engines half/half, half/float, "
                 "float/float 16/8/16 (here 16/16/16)"),
      std::string::npos)
      << r.err;
  // On a POD64: 48 of its IPUs would idle.
  r = ipusim("run -q --system " + pod64 + " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(
      r.err.find("the trace uses 16 of the 64 IPUs of IPU-POD64 (it was compiled for IPU-POD16)"),
      std::string::npos)
      << r.err;
  // --strict makes each of them an error (bad input), before anything is simulated or written.
  r = ipusim("run -q --strict --system " + pod64 + " --out " + dir.file("strict") + " " + trace);
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("uses 16 of the 64 IPUs"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("strict/stats.json")));
}

// --model replaces the run config's model but not its input_bytes_per_sample: a model with
// another input would stream the old model's bytes per sample (issue 27: a 32x32x3 model with
// ResNet-50's 150,528 B spent 96.7% of its step in host I/O). So it warns, with the value
// scaled by the inputs' sizes (3,072 B x 64x64x3 / 32x32x3 = 12,288 B), --strict fails, and
// the summary names the model that ran.
TEST(RunTarget, AModelWithAnotherInputThanTheRunConfigsWarnsAndStrictFails) {
  TempDir dir;
  std::string model = read_all(workload_dir() + "resnet_tiny.yaml");
  const std::string shape = "input: {height: 32, width: 32, channels: 3}";
  model.replace(model.find(shape), shape.size(), "input: {height: 64, width: 64, channels: 3}");
  const std::string wide = dir.file("resnet_tiny64.yaml");
  std::ofstream(wide) << model;
  const std::string run = workload_dir() + "resnet_tiny-pod16.yaml";
  const std::string warning =
      "warning: " + run +
      ": run.input_bytes_per_sample is 3072 B, set for ResNet-tiny's 32x32x3 input, but " + wide +
      " (ResNet-tiny) takes a 64x64x3 input: its host input would be sized for the other model; "
      "set it with --set run.input_bytes_per_sample=12288B";
  auto r = ipusim("run --run " + run + " --model " + wide + " --out " + dir.file("a"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("ipusim run: " + warning), std::string::npos) << r.err;
  EXPECT_NE(read_all(dir.file("a/stats.json")).find("set it with --set"), std::string::npos);
  EXPECT_NE(r.out.find(": resnet-tiny-pod16 with model ResNet-tiny (" + wide + ") on IPU-POD16"),
            std::string::npos)
      << r.out;
  r = ipusim("compile --run " + run + " --model " + wide + " --out " + dir.file("t.itb"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("ipusim compile: " + warning), std::string::npos) << r.err;
  r = ipusim("run -q --strict --run " + run + " --model " + wide + " --out " + dir.file("b"));
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("b/stats.json")));
  // Sized by hand, or the run's own model: no warning.
  r = ipusim("run -q --strict --run " + run + " --model " + wide +
             " --set run.input_bytes_per_sample=12288B");
  EXPECT_EQ(r.status, 0) << r.err;
  r = ipusim("run -q --strict --run " + run + " --model " + workload_dir() + "resnet_tiny.yaml");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
}

// A kernel trace records the chip it was mapped for (issue 27: on a 2,000-tile chip it ran
// silently, its utilisation reported against the bigger chip's peak). It names no system, so
// a system larger than the kernel's replicas is not a difference.
TEST(RunTarget, AKernelTraceOnAnotherChipWarnsAndStrictFails) {
  TempDir dir;
  const std::string mm = dir.file("mm.trace");
  ASSERT_EQ(ipusim("kernel matmul --m 64 --n 64 --k 64 --out " + mm).status, 0);
  auto r = ipusim("run -q --strict " + mm);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  r = ipusim("run -q --strict --system " + source_dir() + "/configs/systems/pod64.yaml " + mm);
  EXPECT_EQ(r.status, 0) << r.err;
  r = ipusim("run -q --set chip.tiles=2000 " + mm);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning: " + mm +
                       ": the trace was planned for another chip than this run's GC200: a GC200 "
                       "with 1472 tiles (here 2000); generate it again for this chip ('ipusim "
                       "kernel' with the same --chip and --set)"),
            std::string::npos)
      << r.err;
  r = ipusim("run -q --strict --set chip.tiles=2000 --out " + dir.file("strict") + " " + mm);
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("1472 tiles (here 2000)"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("strict/stats.json")));
  // Generated for the bigger chip, it runs there without a word.
  ASSERT_EQ(ipusim("kernel matmul --m 64 --n 64 --k 64 --set chip.tiles=2000 --out " + mm).status,
            0);
  r = ipusim("run -q --strict --set chip.tiles=2000 " + mm);
  EXPECT_EQ(r.status, 0) << r.err;
}

}  // namespace
}  // namespace ipusim::testing

namespace ipusim::testing {
namespace {

TEST(Workload, TheWorkedExampleOfDocsModelsCompilesAndRuns) {
  // docs/models.md's ResNet-18 block, trained with the reduced ResNet's run settings.
  std::string doc = read_all(source_dir() + "/docs/models.md");
  const auto at = doc.find("<!-- example: resnet18");
  ASSERT_NE(at, std::string::npos);
  const auto begin = doc.find("```yaml\n", at) + 8;
  const std::string yaml = doc.substr(begin, doc.find("```\n", begin) - begin);
  TempDir dir;
  write_file(dir.file("resnet18.yaml"), yaml);
  const auto r = ipusim("run -q --run " + workload_dir() + "resnet_tiny-pod16.yaml --model " +
                        dir.file("resnet18.yaml") +
                        " --set run.recompute_checkpoints=b2/1/relu --out " + dir.file("out"));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string stats = read_all(dir.file("out/stats.json"));
  EXPECT_NE(stats.find("\"model\": \"ResNet-18\""), std::string::npos);
  EXPECT_GT(step_seconds(stats), 0);
}

}  // namespace
}  // namespace ipusim::testing
