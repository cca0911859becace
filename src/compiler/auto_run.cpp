// SPDX-License-Identifier: Apache-2.0
// choose_run: a run config for a model that comes without one (docs/onnx.md, "Without a run
// config"). What a user of Graphcore's public examples would set: data parallelism over every
// IPU of the system (replication, one IPU per replica); the largest micro-batch of 32, 16, ...,
// 1 that fits in tile memory (found by compiling, as a user finds it by running out of
// memory), recomputing at the model's block outputs (residual adds) when that lets a larger
// micro-batch fit; and only when no micro-batch fits one IPU, a pipeline of 2, 4, 8 or 16
// stages split where the forward FLOPs are balanced. The rest are the public examples' defaults:
// FP16.16, Poplar's available memory proportion 0.6, gradient accumulation to a global batch
// of at least 1,024 samples, SGD with momentum for image models and AdamW otherwise, 8-bit
// images and 32-bit token ids from the host.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/compiler/graph/primitive.hpp"
#include "ipusim/config/config.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/util/error.hpp"
#include "onnx.hpp"

namespace ipusim::compiler {
namespace {

constexpr std::uint64_t kGlobalBatch = 1024;  // at least, by gradient accumulation
const std::vector<std::uint64_t> kMicroBatches = {32, 16, 8, 4, 2, 1};
const std::vector<std::uint32_t> kPipelines = {1, 2, 4, 8, 16};

// Where the optimiser state lives and the convs' and matmuls' share of tile memory, in the
// order tried at each pipeline depth.
struct MemoryOption {
  bool streamed_state = false;  // run.optimiser_state streaming (sharded when replicated)
  double available = 0.6;       // run.available_memory_proportion
};
constexpr double kAvailableMemory = 0.6;  // Poplar's availableMemoryProportion default
const std::vector<MemoryOption> kMemoryOptions = {
    {false, kAvailableMemory}, {true, kAvailableMemory}, {true, 0.3}};

struct Choice {
  std::uint32_t ipus_per_replica = 1;
  std::uint64_t micro_batch = 1;
  std::vector<std::string> checkpoints, splits;
  MemoryOption memory;
};

// One sample of the model's host input (bytes), and whether it is images.
std::pair<std::uint64_t, bool> sample_bytes(const ModelDef& m) {
  if (m.height > 0 && m.width > 0 && m.channels > 0)
    return {m.height * m.width * m.channels, true};  // 8-bit images, normalised on the IPU
  if (m.onnx) {
    std::uint64_t total = 0;
    for (const auto& v : m.onnx->inputs) {
      std::uint64_t n = 1;
      for (std::size_t i = 1; i < v.dims.size(); ++i) n *= v.dims[i].value_or(1);
      const bool integer = v.elem_type == static_cast<std::int32_t>(onnx::ElemType::kInt64) ||
                           v.elem_type == static_cast<std::int32_t>(onnx::ElemType::kInt32);
      total += n * (integer ? 4 : 2);  // token ids as 32-bit values; other inputs FP16
    }
    return {total, false};
  }
  return {m.sequence * 4, false};
}

// Layers after which recomputation may checkpoint: the model's block outputs, its residual
// adds (a CNN's; none for a chain without them).
std::vector<std::string> block_outputs(const ModelDef& m) {
  std::vector<std::string> out;
  for (const Layer& l : m.layers)
    if (l.op == graph::Op::kAdd) out.push_back(l.name);
  return out;
}

// Splits of the layers into `stages` runs of about equal forward FLOPs: the layers that begin
// stages 1, 2, ..., each right after one of `blocks` (a block output: stages hand on one
// tensor, as the public examples split at layer boundaries) or, when there are none, anywhere.
std::vector<std::string> balanced_splits(const ModelDef& m, std::uint32_t stages,
                                         const std::vector<std::string>& blocks) {
  graph::BuildOptions options;
  options.training = false;
  const graph::TensorGraph g = graph::build_graph(m, options);
  std::map<std::string, std::uint64_t> per_layer;
  std::uint64_t total = 0;
  for (const auto& n : g.nodes()) {
    std::vector<const graph::Dims*> in, out;
    for (const auto t : n.inputs) in.push_back(&g.tensor(t).dims);
    for (const auto t : n.outputs) out.push_back(&g.tensor(t).dims);
    const std::uint64_t f = graph::info(n.op).flops(in, out, n.attrs);
    per_layer[n.layer] += f;
    total += f;
  }
  std::vector<std::string> splits;
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i + 1 < m.layers.size() && splits.size() + 1 < stages; ++i) {
    sum += per_layer[m.layers[i].name];
    const bool boundary =
        blocks.empty() || std::find(blocks.begin(), blocks.end(), m.layers[i].name) != blocks.end();
    if (boundary && sum * stages >= total * (splits.size() + 1))
      splits.push_back(m.layers[i + 1].name);
  }
  return splits;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

// One line per choice of `run` (choose_run's reasons).
void explain(const RunConfig& run, const Choice& c, std::uint64_t ipus,
             const std::string& why_batch, std::pair<std::uint64_t, bool> sample,
             std::vector<std::string>& reasons) {
  const std::uint32_t p = c.ipus_per_replica;
  const bool images = sample.second;
  reasons.push_back(
      fmt::format("data parallel: {} replica(s) of {} IPU(s) over the system's {} IPUs",
                  run.replicas, p, ipus));
  reasons.push_back(fmt::format("micro-batch {}: {}", run.micro_batch, why_batch));
  reasons.push_back(c.checkpoints.empty()
                        ? std::string("no recomputation: the activations fit")
                        : fmt::format("recomputation with a checkpoint at each of the {} block "
                                      "outputs (residual adds): without it the micro-batch does "
                                      "not fit",
                                      c.checkpoints.size()));
  if (p > 1)
    reasons.push_back(fmt::format(
        "a pipeline of {} stages split at {} (forward FLOPs balanced): no micro-batch fits one "
        "IPU",
        p, join(c.splits)));
  reasons.push_back(fmt::format("gradient accumulation {}: a global batch of {} (at least {}{})",
                                run.gradient_accumulation, run.samples_per_step(), kGlobalBatch,
                                p > 1 ? ", and twice the pipeline's stages" : ""));
  if (run.optimiser_state_streaming)
    reasons.push_back(
        fmt::format("optimiser state in streaming memory{}: {}",
                    run.replicated_tensor_sharding ? ", sharded over the replicas" : "",
                    c.memory.streamed_state ? "with it on chip nothing fits" : "as --set"));
  const double available = run.available_memory.empty() ? 0 : run.available_memory.front();
  reasons.push_back(fmt::format(
      "{}, FP16.16, available memory proportion {} ({}), {} B of host input per sample ({})",
      images ? "SGD with momentum (an image model)" : "AdamW", available,
      available != c.memory.available ? "as --set"
      : available == kAvailableMemory ? "Poplar's default"
                                      : "with Poplar's default 0.6 nothing fits",
      sample.first, images ? "8-bit images" : "32-bit token ids"));
}

std::string absolute(const std::string& file) {
  return std::filesystem::absolute(file).lexically_normal().string();
}

// The run config of choice `c` for `model` on a system of `ipus` IPUs (YAML).
std::string run_text(const ModelDef& model, const std::string& model_file,
                     const std::string& system_file, std::uint64_t ipus, const Choice& c,
                     std::pair<std::uint64_t, bool> sample) {
  const bool images = sample.second;
  const std::uint64_t replicas = ipus / c.ipus_per_replica;
  const std::uint64_t per_step = replicas * c.micro_batch;
  std::uint64_t ga = std::max<std::uint64_t>(1, (kGlobalBatch + per_step - 1) / per_step);
  if (c.ipus_per_replica > 1) ga = std::max<std::uint64_t>(ga, 2 * c.ipus_per_replica);
  std::ostringstream y;
  y << "run:\n";
  y << fmt::format("  name: \"{}-auto\"\n  model: \"{}\"\n  system: \"{}\"\n", model.name,
                   absolute(model_file), absolute(system_file));
  y << fmt::format("  replicas: {}\n  ipus_per_replica: {}\n", replicas, c.ipus_per_replica);
  y << fmt::format("  micro_batch: {}\n  gradient_accumulation: {}\n", c.micro_batch, ga);
  y << fmt::format("  precision: \"16.16\"\n  optimiser: {}\n", images ? "sgd" : "adamw");
  y << fmt::format("  available_memory_proportion: \"{}\"\n", c.memory.available);
  if (c.memory.streamed_state) {
    y << "  optimiser_state: streaming\n";
    if (replicas > 1) y << "  replicated_tensor_sharding: \"yes\"\n";
  }
  if (!c.checkpoints.empty())
    y << fmt::format("  recompute_checkpoints: \"{}\"\n", join(c.checkpoints));
  if (!c.splits.empty()) y << fmt::format("  pipeline_splits: \"{}\"\n", join(c.splits));
  y << fmt::format("  input_bytes_per_sample: {}B\n  sample_unit: {}\n", sample.first,
                   images ? "images" : "sequences");
  return y.str();
}

}  // namespace

LoadedRun choose_run(const ModelDef& model, const std::string& model_file,
                     const std::string& system_file, const SystemSpec& system,
                     const std::vector<std::string>& run_overrides,
                     std::vector<std::string>& reasons) {
  if (model.family == graph::Family::kTransformer)
    throw ConfigError(fmt::format(
        "{}: a transformer model file needs a run config that places its layers on the IPUs "
        "(run.pipeline_placement): give one with --run (configs/runs/ has examples)",
        model.file));
  const std::pair<std::uint64_t, bool> sample = sample_bytes(model);
  const std::uint64_t ipus = system.ipus();
  const auto given = [&](std::string_view key) {
    return std::any_of(run_overrides.begin(), run_overrides.end(),
                       [&](const std::string& o) { return o.starts_with(std::string(key) + "="); });
  };
  const auto text = [&](const Choice& c) {
    return run_text(model, model_file, system_file, ipus, c, sample);
  };
  // Where errors and the trace's target.run say the run comes from (a trace name).
  const std::string origin = "run-chosen-for:" + onnx::sanitise_name(absolute(model_file));
  const auto load = [&](const Choice& c) {
    return load_run(config::parse_document(text(c), origin), origin, run_overrides);
  };
  // Whether a choice fits: compiled, every tile's memory checked.
  std::string last_error;    // why the last choice tried did not fit
  bool fixed_batch = false;  // a larger micro-batch did not build (a graph's fixed batch)
  // A graph exported with a fixed batch may build at its own batch only: a shape error at a
  // larger micro-batch is a choice that does not fit (the error of the smallest is raised).
  const auto fits = [&](const Choice& c) {
    const LoadedRun run = load(c);
    try {
      (void)compile(model, run.run, system, nullptr, {.memory = true, .structure = false});
      return true;
    } catch (const cost::TileMemoryError& e) {  // (not another ModelError: those are raised)
      last_error = e.what();
      return false;
    } catch (const ConfigError& e) {
      if (c.micro_batch == 1) throw;
      last_error = e.what();
      fixed_batch = true;
      return false;
    }
  };

  const std::vector<std::string> blocks = block_outputs(model);
  const RunConfig fixed = load(Choice{}).run;  // what the overrides set
  std::vector<std::uint64_t> batches = kMicroBatches;
  if (given("run.micro_batch")) batches = {fixed.micro_batch};
  // The largest micro-batch that fits `c` at its depth and memory option, without and then
  // with recomputation; false when none does (a micro-batch of 1 with recomputation is tried
  // first: when it does not fit, no larger one does).
  const auto largest = [&](Choice& c) {
    const auto fits_with = [&](std::uint64_t mb, bool recompute) {
      c.micro_batch = mb;
      c.checkpoints = recompute ? blocks : std::vector<std::string>{};
      return fits(c);
    };
    if (given("run.recompute_checkpoints")) {
      for (const std::uint64_t mb : batches)
        if (fits_with(mb, false)) return true;
      return false;
    }
    if (!fits_with(batches.back(), !blocks.empty())) return false;
    for (const std::uint64_t mb : batches) {
      if (fits_with(mb, false)) return true;
      if (!blocks.empty() && fits_with(mb, true)) return true;
    }
    return false;
  };
  for (const std::uint32_t p : kPipelines) {
    if (p > ipus || ipus % p != 0 || p > model.layers.size()) break;
    if (given("run.ipus_per_replica") && p != fixed.ipus_per_replica) continue;
    Choice c;
    c.ipus_per_replica = p;
    if (p > 1) c.splits = balanced_splits(model, p, blocks);
    if (c.splits.size() + 1 != p) continue;
    for (const MemoryOption& memory : kMemoryOptions) {
      if ((given("run.optimiser_state") || given("run.available_memory_proportion")) &&
          &memory != &kMemoryOptions.front())
        break;  // (what --set fixes, the first option's run has)
      c.memory = memory;
      if (!largest(c)) continue;
      LoadedRun run = load(c);
      const std::uint64_t mb = c.micro_batch;
      const std::string why_batch =
          given("run.micro_batch") ? "as --set"
          : fixed_batch            ? std::string(
                                         "larger ones do not build: the graph keeps its exported batch in "
                                                    "constant shapes (export it with a dynamic batch)")
          : mb == batches.front()
              ? fmt::format("the largest tried ({})", batches.front())
              : fmt::format("the largest of 32, 16, ... that fits in tile memory ({} did not{})",
                            mb * 2, blocks.empty() ? "" : ", with or without recomputation");
      explain(run.run, c, ipus, why_batch, sample, reasons);
      return run;
    }
  }
  throw ModelError(fmt::format(
      "{}: no run fits: neither one IPU nor a pipeline of up to {} IPUs holds a micro-batch of "
      "1 (with recomputation where the model has block outputs); the model needs more memory "
      "than the system's tiles have. The last tried: {}",
      model.file, std::min<std::uint64_t>(ipus, kPipelines.back()), last_error));
}

}  // namespace ipusim::compiler
