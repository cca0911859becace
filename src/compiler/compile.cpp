// SPDX-License-Identifier: Apache-2.0
// compiler::compile: checks the run against the system, lowers the model (stage_lowering.cpp),
// records what reports need, and checks memory and structure.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "ipu_builder.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/graph/build.hpp"
#include "ipusim/compiler/graph/primitive.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"
#include "lowering.hpp"

namespace ipusim::compiler {

void check_streaming_memory(const RunConfig& run, const SystemSpec& system,
                            const std::vector<std::uint64_t>& per_program) {
  const MachineSpec& m = system.machine;
  if (m.host_attach == HostAttach::kPcie || per_program.empty()) return;
  const std::uint64_t ipus = static_cast<std::uint64_t>(run.replicas) * per_program.size();
  for (std::uint64_t first = 0; first < ipus; first += m.ipus) {
    std::uint64_t kept = 0;
    for (std::uint64_t i = first; i < std::min(ipus, first + m.ipus); ++i)
      kept += per_program[i % per_program.size()];
    if (kept > m.streaming_memory.count)
      throw ConfigError(fmt::format(
          "{}: machine {}'s IPUs keep {} in its Streaming Memory (input buffers, streamed "
          "optimiser state and weights), more than machine.gateway.streaming_memory {}",
          run.file, first / m.ipus, human_bytes(static_cast<double>(kept)),
          human_bytes(static_cast<double>(m.streaming_memory.count))));
  }
}

namespace {

std::string meta_number(double v) {
  std::string s = fmt::format("{:.9g}", v);
  return s;
}

// AMP engines of the half->half, half->float and float->float paths, e.g. "16/8/16".
std::string amp_engines(const ChipSpec& c) {
  return fmt::format("{}/{}/{}", c.amp.half_half.engines, c.amp.half_float.engines,
                     c.amp.float_float.engines);
}

}  // namespace

void pend(const IpuBuilder& b, Value& v, std::initializer_list<trace::Op> ops) {
  v.pending.insert(v.pending.end(), ops);
  for (const auto& layer : b.provenance().layers)
    if (std::find(v.pending_layers.begin(), v.pending_layers.end(), layer) ==
        v.pending_layers.end())
      v.pending_layers.push_back(layer);
}

void flush(IpuBuilder& b, std::vector<trace::Step>& out, Value& v) {
  if (!v.pending.empty()) {
    const auto scope = b.scope_layers(v.pending_layers);
    for (std::uint32_t i = 0; i < v.slices; ++i) b.elementwise(out, v.layout, v.pending);
  }
  v.pending.clear();
  v.pending_layers.clear();
}

namespace {

// `stats` statistics of each row of `l`, reduced among the tiles holding the row and brought
// back to them; shared with the row's other IPUs in between when `share` is given.
void row_statistics(IpuBuilder& b, std::vector<trace::Step>& out, const Layout& l,
                    std::uint64_t stats, const ShareStatistics& share) {
  if (!share) return b.reduce(out, l, Axis::kChannels, stats, /*broadcast=*/true);
  b.reduce(out, l, Axis::kChannels, stats, /*broadcast=*/false);
  share(out);
  b.broadcast(out, l, Axis::kChannels, stats);
}

}  // namespace

void layer_norm(IpuBuilder& b, std::vector<trace::Step>& out, Value& x,
                const ShareStatistics& share) {
  flush(b, out, x);
  row_statistics(b, out, x.layout, 2, share);
  pend(b, x, {trace::Op::kSub, trace::Op::kMul, trace::Op::kMul, trace::Op::kAdd});
}

void layer_norm_gradient(IpuBuilder& b, std::vector<trace::Step>& out, Value& g, const Layout& x,
                         const ShareStatistics& share) {
  using trace::Op;
  flush(b, out, g);
  b.rearrange(out, x, g.layout);
  const std::array<Op, 3> whiten_mul{Op::kSub, Op::kMul, Op::kMul};
  b.elementwise(out, g.layout, whiten_mul);
  row_statistics(b, out, g.layout, 2, share);
  b.reduce(out, g.layout, Axis::kPositions, 2, /*broadcast=*/false);
  pend(b, g, {Op::kMul, Op::kSub, Op::kMul, Op::kSub, Op::kMul});
}

void rms_norm(IpuBuilder& b, std::vector<trace::Step>& out, Value& x,
              const ShareStatistics& share) {
  flush(b, out, x);
  row_statistics(b, out, x.layout, 1, share);
  pend(b, x, {trace::Op::kMul, trace::Op::kMul});
}

void rms_norm_gradient(IpuBuilder& b, std::vector<trace::Step>& out, Value& g, const Layout& x,
                       const ShareStatistics& share) {
  using trace::Op;
  flush(b, out, g);
  b.rearrange(out, x, g.layout);
  const std::array<Op, 2> scaled{Op::kMul, Op::kMul};  // g gamma, times x
  b.elementwise(out, g.layout, scaled);
  row_statistics(b, out, g.layout, 1, share);
  b.reduce(out, g.layout, Axis::kPositions, 1, /*broadcast=*/false);
  pend(b, g, {Op::kMul, Op::kSub, Op::kMul});
}

ChipSpec compute_chip(const RunConfig& run, const ChipSpec& chip) {
  if (run.io_tiles >= chip.tiles)
    throw ConfigError(
        fmt::format("{}: run.io_tiles: expected fewer I/O tiles than the chip's {} tiles, found {}",
                    run.file, chip.tiles, run.io_tiles));
  ChipSpec c = chip;
  c.tiles -= run.io_tiles;
  return c;
}

void stream_input(IpuBuilder& b, std::vector<trace::Step>& out, const RunConfig& run, Layout layout,
                  std::uint64_t bytes, std::uint32_t all_tiles) {
  if (bytes == 0) return;
  using trace::HostDirection, trace::HostMemory;
  layout.dtype = trace::DType::kChar;
  if (run.io_tiles == 0) {
    b.keep_in_streaming_memory(2 * bytes);  // this micro-batch and the next, prefetched
    b.host(out, bytes, HostDirection::kToIpu, HostMemory::kStreaming, /*overlap=*/false,
           layout.range());
    b.host(out, bytes, HostDirection::kToIpu, HostMemory::kHost, /*overlap=*/true);
    return;
  }
  ChipSpec io = b.chip();
  io.tiles = run.io_tiles;
  Layout buffer = linear_layout(io, trace::DType::kChar, layout.positions, layout.channels);
  buffer.first_tile = all_tiles - run.io_tiles;
  b.host(out, bytes, HostDirection::kToIpu, HostMemory::kHost, /*overlap=*/true, buffer.range());
  b.rearrange(out, buffer, layout);
}

namespace {

// A model's sample as the host streams it: an image (height x width x channels) or a
// sequence of tokens; `elements` counts it.
struct SampleInput {
  std::string text;
  std::uint64_t elements = 0;
};

SampleInput sample_input(const ModelDef& m) {
  if (m.height > 0 && m.width > 0 && m.channels > 0)
    return {fmt::format("{}x{}x{} input", m.height, m.width, m.channels),
            m.height * m.width * m.channels};
  return {fmt::format("{}-token input", m.sequence), m.sequence};
}

}  // namespace

std::optional<std::string> input_mismatch(const RunConfig& run, const ModelDef& model,
                                          const std::vector<std::string>& run_overrides) {
  const bool sized = std::any_of(run_overrides.begin(), run_overrides.end(), [](auto& o) {
    return o.starts_with("run.input_bytes_per_sample");
  });
  if (sized || run.input_bytes_per_sample == 0) return std::nullopt;
  const ModelDef run_model = load_model(run.model_file);
  const SampleInput was = sample_input(run_model), now = sample_input(model);
  if (was.text == now.text || was.elements == 0) return std::nullopt;
  // In 128 bits: the product may pass 2^64 (the suggestion must not wrap).
  __extension__ using Wide = unsigned __int128;
  const Wide product = static_cast<Wide>(run.input_bytes_per_sample) * now.elements;
  const Wide scaled = (product + was.elements - 1) / was.elements;
  return fmt::format(
      "run.input_bytes_per_sample is {} B, set for {}'s {}, but {} ({}) takes a {}: its host "
      "input would be sized for the other model; set it with --set "
      "run.input_bytes_per_sample={}B (scaled by the inputs' sizes) or to what one sample is",
      run.input_bytes_per_sample, run_model.name, was.text, model.file, model.name, now.text,
      scaled);
}

std::vector<std::pair<std::string, std::string>> chip_target_meta(const ChipSpec& chip) {
  return {{"target.chip", chip.name},
          {"target.chip.tiles", std::to_string(chip.tiles)},
          {"target.chip.tile_memory", std::to_string(chip.tile_memory.count)},
          {"target.chip.amp_engines", amp_engines(chip)}};
}

std::vector<std::string> target_mismatches(const trace::Trace& trace, const ChipSpec& chip,
                                           const SystemSpec* system) {
  std::vector<std::string> out;
  const std::string* run = trace::find_meta(trace.meta, "target.run");
  const std::string* name = trace::find_meta(trace.meta, "target.chip");
  if (!name) return out;
  const std::string again =
      run ? fmt::format(
                "recompile it for this target ('ipusim run --run {}' or "
                "'ipusim compile --run {}' with the same --system, --chip and --set)",
                *run, *run)
          : std::string(
                "generate it again for this chip ('ipusim kernel' with the same --chip "
                "and --set)");
  auto differs = [&](const char* key, const std::string& here) {
    const std::string* there = trace::find_meta(trace.meta, key);
    return there && *there != here ? there : nullptr;
  };
  std::vector<std::string> chip_diffs;
  if (auto v = differs("target.chip.tiles", std::to_string(chip.tiles)))
    chip_diffs.push_back(fmt::format("{} tiles (here {})", *v, chip.tiles));
  if (auto v = differs("target.chip.tile_memory", std::to_string(chip.tile_memory.count)))
    chip_diffs.push_back(
        fmt::format("{} B of memory per tile (here {} B)", *v, chip.tile_memory.count));
  if (auto v = differs("target.chip.amp_engines", amp_engines(chip)))
    chip_diffs.push_back(fmt::format("AMP engines half/half, half/float, float/float {} (here {})",
                                     *v, amp_engines(chip)));
  if (!chip_diffs.empty()) {
    std::string list;
    for (const auto& d : chip_diffs) list += (list.empty() ? "" : "; ") + d;
    out.push_back(
        fmt::format("the trace was planned for another chip than this run's {}: a {} with {}; {}",
                    chip.name, *name, list, again));
  }
  if (system && run) {
    const std::uint64_t used =
        static_cast<std::uint64_t>(trace.replicas) * trace.ipus_per_replica();
    if (system->ipus() > used) {
      const std::string* planned = trace::find_meta(trace.meta, "target.system");
      out.push_back(
          fmt::format("the trace uses {} of the {} IPUs of {} (it was compiled for {}): the others "
                      "stay idle; for this system, compile a run config made for it",
                      used, system->ipus(), system->name, planned ? *planned : "another system"));
    }
  }
  return out;
}

std::string_view family_name(graph::Family family) {
  switch (family) {
    case graph::Family::kCnn:
      return "cnn";
    case graph::Family::kTransformer:
      return "transformer";
    case graph::Family::kGraph:
      return "graph";
  }
  return "?";
}

namespace {

// The model's size and work from its tensor graph (reports: workload.parameters and
// model_flops): its parameters, and the FLOPs of one step's forward and backward passes over
// every replica. The graph is built for one input row (an image, or a sequence or pack of
// sequences) and its FLOPs are linear in the rows.
std::vector<std::pair<std::string, std::string>> model_meta(const ModelDef& model,
                                                            const RunConfig& run) {
  graph::BuildOptions options;
  options.training = !run.inference;
  options.decode = run.kv_cache != KvCache::kNone;  // (a step's work: one token a sequence)
  if (model.masked_tokens > 0)
    options.masked_tokens = model.masked_tokens + run.max_sequences_per_pack - 1;
  graph::TensorGraph g = graph::build_graph(model, options);
  const std::uint64_t forward = g.flops(true, false);
  std::uint64_t backward = 0;
  if (!run.inference) {
    (void)graph::add_backward(g, graph::loss_of(g));
    backward = g.flops(false, true);
  }
  const std::uint64_t rows =
      static_cast<std::uint64_t>(run.replicas) * run.micro_batch * run.gradient_accumulation;
  return {{"model.parameters", std::to_string(g.parameters())},
          {"model.flops.forward", std::to_string(forward * rows)},
          {"model.flops.backward", std::to_string(backward * rows)},
          {"model.ipus",
           std::to_string(static_cast<std::uint64_t>(run.replicas) * run.ipus_per_replica)}};
}

}  // namespace

std::uint64_t parameter_count(const ModelDef& model) {
  return graph::build_graph(model).parameters();
}

trace::Trace compile(const ModelDef& model, const RunConfig& run, const SystemSpec& system,
                     std::vector<PlannedConv>* plans, CompileChecks checks) {
  const std::uint64_t needed = static_cast<std::uint64_t>(run.replicas) * run.ipus_per_replica;
  if (needed > system.ipus())
    throw ConfigError(fmt::format(
        "{}: {} replicas x {} IPUs need {} IPUs, but {} (run.system) has {} (run.replicas x "
        "run.ipus_per_replica; system.racks {} x system.machines_per_rack {} x machine.ipus {})",
        run.file, run.replicas, run.ipus_per_replica, needed, system.name, system.ipus(),
        system.racks, system.machines_per_rack, system.machine.ipus));
  check_run_applies(model, run);
  trace::Trace t = compile_replica(model, run, system, plans);
  const trace::Meta lowering_meta = std::move(t.meta);  // (a pipeline's stages)
  // What reports need to turn a step time into throughput and time to train.
  t.meta = {
      {"model", model.name},
      {"mode", run.inference ? "inference" : "training"},
      {"samples_per_step", std::to_string(run.samples_per_step())},
      {"sample_unit", std::string(sample_unit_name(run.sample_unit))},
      {"ttt.epochs", meta_number(run.epochs)},
      {"ttt.samples_per_epoch", std::to_string(run.samples_per_epoch)},
      {"ttt.samples_to_train", std::to_string(run.samples_to_train)},
      {"ttt.lead_in_s", meta_number(run.lead_in_seconds)},
      {"ttt.checkpoint_s", meta_number(run.checkpoint_seconds)},
      {"ttt.checkpoints", std::to_string(run.checkpoints_taken)},
      {"ttt.evaluation_s", meta_number(run.evaluation_seconds)},
      {"ttt.evaluations", std::to_string(run.evaluations)},
      // Run-time options the program was compiled with, as Poplar engine options.
      {"engine.sync_replicas_independently", run.sync_replicas_independently ? "true" : "false"},
      // The target it was planned for (target_mismatches).
      {"target.run", run.file}};
  for (const auto& entry : model_meta(model, run)) t.meta.push_back(entry);
  // Tensor parallelism as the PopXL examples run it: every IPU its own Poplar replica (their
  // replication factor is data parallel x tensor parallel; the tensor-parallel groups are
  // replica groupings), so the IPUs' group steps run side by side.
  if (run.tensor_parallel > 1) t.meta.emplace_back("engine.single_ipu_replicas", "true");
  if (run.new_tokens > 0) {
    // Text generation (report: time to first token and per output token): with a KV cache the
    // prompt is fed one token a step (popxl Llama's pipeline.py), so the first output token
    // comes after prompt_tokens steps; without one, after one step of the whole sequence.
    const std::uint64_t prefill =
        run.kv_cache == KvCache::kNone ? 1 : std::max<std::uint64_t>(1, run.prompt_tokens);
    t.meta.emplace_back("generation.prompt_tokens", std::to_string(run.prompt_tokens));
    t.meta.emplace_back("generation.new_tokens", std::to_string(run.new_tokens));
    t.meta.emplace_back("generation.steps_to_first_token", std::to_string(prefill));
  }
  t.meta.insert(t.meta.end(), lowering_meta.begin(), lowering_meta.end());
  for (auto& entry : chip_target_meta(system.chip)) t.meta.push_back(std::move(entry));
  t.meta.emplace_back("target.system", system.name);
  t.meta.emplace_back("target.system.ipus", std::to_string(system.ipus()));
  // Vertices into runs (exchanges are coalesced as their transfers are added).
  for (auto& program : t.ipus)
    for (auto& cs : program.compute_sets) trace::coalesce(cs);
  if (checks.memory)
    for (const auto& program : t.ipus)
      cost::check_memory(system.chip, program, cost::memory_map(system.chip, program),
                         cost::kCompiledWorkloadAdvice);
  if (checks.structure) trace::check_structure(t, run.name);
  return t;
}

}  // namespace ipusim::compiler
