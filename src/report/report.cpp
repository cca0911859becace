// SPDX-License-Identifier: Apache-2.0
#include "ipusim/report/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <ostream>

#include "ipusim/config/field.hpp"
#include "ipusim/report/pipeline.hpp"
#include "ipusim/report/run_files.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/json.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::report {
namespace {

constexpr std::size_t kWorstTiles = 5;
constexpr std::size_t kTopPhases = 10;

struct Summary {
  double min = 0, mean = 0, max = 0;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> worst;  // (tile, value), largest first
};

Summary summarise(const std::vector<std::uint64_t>& v) {
  Summary s;
  if (v.empty()) return s;
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  s.min = static_cast<double>(*lo);
  s.max = static_cast<double>(*hi);
  s.mean = static_cast<double>(std::accumulate(v.begin(), v.end(), std::uint64_t{0})) /
           static_cast<double>(v.size());
  std::vector<std::uint32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  const std::size_t k = std::min(kWorstTiles, v.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                    [&](auto a, auto b) { return v[a] != v[b] ? v[a] > v[b] : a < b; });
  for (std::size_t i = 0; i < k; ++i) s.worst.emplace_back(idx[i], v[idx[i]]);
  return s;
}

void write_summary(JsonWriter& w, std::string_view name, const std::vector<std::uint64_t>& v,
                   std::string_view unit, std::string_view description) {
  const Summary s = summarise(v);
  w.key(name).begin_object();
  w.key("description").value(description);
  w.key("unit").value(unit);
  w.key("min").value(s.min).key("mean").value(s.mean).key("max").value(s.max);
  w.key("worst_tiles").begin_array();
  for (auto [tile, value] : s.worst)
    w.begin_object().key("tile").value(tile).key("value").value(value).end_object();
  w.end_array();
  w.end_object();
}

std::vector<std::uint64_t> memory_totals(const cost::MemoryMap& m) {
  std::vector<std::uint64_t> out;
  out.reserve(m.tiles.size());
  for (const auto& t : m.tiles) out.push_back(t.total());
  return out;
}

void write_phase(JsonWriter& w, std::string_view name, std::uint64_t cycles, std::uint64_t count,
                 std::uint64_t total, const ChipSpec& chip) {
  w.key(name).begin_object();
  w.quantity("cycles", cycles, "cycles");
  w.quantity("time", (Cycles{cycles} / chip.clock).seconds, "s");
  w.quantity("share", total ? static_cast<double>(cycles) / static_cast<double>(total) : 0.0,
             "fraction of total");
  w.quantity("count", count, "phases");
  w.end_object();
}

// ipu[].memory_over_program: the fullest tile, the always-live bytes, the peaks, and the
// curve in at most kLiveSamples runs of consecutive positions (each run's largest value).
constexpr std::uint64_t kLiveSamples = 256;
void write_live_memory(JsonWriter& w, const LiveMemory& m) {
  const std::uint64_t n = m.ipu_bytes.size();
  w.key("memory_over_program").begin_object();
  w.key("tile").value(m.tile);
  w.quantity("positions", n, "program positions");
  w.key("always_live").begin_object();
  w.quantity("ipu", m.always_ipu, "B").quantity("tile", m.always_tile, "B");
  w.end_object();
  const auto most = [](const std::vector<std::uint64_t>& v, std::uint64_t fallback) {
    return v.empty() ? fallback : *std::max_element(v.begin(), v.end());
  };
  w.key("peak").begin_object();
  w.quantity("ipu", most(m.ipu_bytes, m.always_ipu), "B")
      .quantity("tile", most(m.tile_bytes, m.always_tile), "B");
  w.end_object();
  const std::uint64_t per = std::max<std::uint64_t>(1, (n + kLiveSamples - 1) / kLiveSamples);
  w.quantity("positions_per_sample", per, "program positions");
  w.key("samples").begin_array();
  for (std::uint64_t first = 0; first < n; first += per) {
    const std::uint64_t end = std::min(n, first + per);
    w.begin_object().key("first_position").value(first);
    w.key("ipu_bytes")
        .value(*std::max_element(m.ipu_bytes.begin() + static_cast<std::ptrdiff_t>(first),
                                 m.ipu_bytes.begin() + static_cast<std::ptrdiff_t>(end)));
    w.key("tile_bytes")
        .value(*std::max_element(m.tile_bytes.begin() + static_cast<std::ptrdiff_t>(first),
                                 m.tile_bytes.begin() + static_cast<std::ptrdiff_t>(end)));
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

void write_phases(JsonWriter& w, const PhaseCycles& p, const PhaseCounts& c, std::uint64_t total,
                  const ChipSpec& chip) {
  for (const PhaseInfo& k : kPhases) write_phase(w, k.name, p[k.kind], c[k.kind], total, chip);
}

std::vector<NamedPhase> top(std::vector<NamedPhase> v) {
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.cycles > b.cycles; });
  v.erase(std::remove_if(v.begin(), v.end(), [](const auto& p) { return p.executions == 0; }),
          v.end());
  if (v.size() > kTopPhases) v.resize(kTopPhases);
  return v;
}

// Aggregates over IPUs.
struct Totals {
  PhaseCycles phases;  // of the slowest IPU
  PhaseCounts counts;
  std::uint32_t slowest_ipu = 0;  // its system index
  std::uint64_t flops = 0;
  std::uint64_t exchange_bytes = 0;
  std::uint64_t host_bytes = 0;
};

Totals totals(const RunStats& stats) {
  Totals t;
  const IpuRunStats* slowest = nullptr;
  for (const auto& ipu : stats.ipus) {
    if (!slowest || ipu.cycles > slowest->cycles) slowest = &ipu;
    t.flops += ipu.flops;
    t.exchange_bytes += ipu.exchange_bytes;
    t.host_bytes += ipu.host_bytes;
  }
  if (slowest) {
    t.phases = slowest->phases;
    t.counts = slowest->counts;
    t.slowest_ipu = slowest->ipu;
  }
  return t;
}

double meta_value(const RunInfo& info, std::string_view key) {
  const std::string* v = trace::find_meta(info.meta, key);
  return v ? std::stod(*v) : 0;
}

// A whole-number meta entry (0 when absent).
std::uint64_t meta_count(const RunInfo& info, std::string_view key) {
  const std::string* v = trace::find_meta(info.meta, key);
  return v ? std::stoull(*v) : 0;
}

}  // namespace

std::optional<Workload> workload(const RunInfo& info, double step_seconds) {
  Workload w;
  if (const std::string* v = trace::find_meta(info.meta, "model")) w.model = *v;
  if (const std::string* v = trace::find_meta(info.meta, "sample_unit")) w.sample_unit = *v;
  if (const std::string* v = trace::find_meta(info.meta, "mode")) w.inference = *v == "inference";
  w.samples_per_step = meta_value(info, "samples_per_step");
  w.parameters = meta_count(info, "model.parameters");
  w.forward_flops = meta_count(info, "model.flops.forward");
  w.backward_flops = meta_count(info, "model.flops.backward");
  w.model_ipus = meta_count(info, "model.ipus");
  if (w.samples_per_step <= 0 || step_seconds <= 0) return std::nullopt;
  if (const std::uint64_t n = meta_count(info, "generation.new_tokens"); n > 0) {
    Workload::Generation g;
    g.prompt_tokens = meta_count(info, "generation.prompt_tokens");
    g.new_tokens = n;
    g.steps_to_first_token =
        std::max<std::uint64_t>(1, meta_count(info, "generation.steps_to_first_token"));
    g.time_to_first_token = static_cast<double>(g.steps_to_first_token) * step_seconds;
    g.time_per_output_token = step_seconds;
    g.total_time = g.time_to_first_token + static_cast<double>(n - 1) * step_seconds;
    g.tokens_per_second = w.samples_per_step / step_seconds;
    g.largest_micro_batch = meta_count(info, "generation.largest_micro_batch");
    g.largest_context = meta_count(info, "generation.largest_context");
    g.micro_batch_limit = meta_count(info, "generation.fit_limit_micro_batch");
    g.context_limit = meta_count(info, "generation.fit_limit_context");
    w.generation = g;
  }
  w.throughput = w.samples_per_step / step_seconds;
  w.model_rate = static_cast<double>(w.model_flops()) / step_seconds;
  const double epochs = meta_value(info, "ttt.epochs");
  w.steps = epochs > 0
                ? epochs * std::ceil(meta_value(info, "ttt.samples_per_epoch") / w.samples_per_step)
                : std::ceil(meta_value(info, "ttt.samples_to_train") / w.samples_per_step);
  w.lead_in = meta_value(info, "ttt.lead_in_s");
  w.checkpoints = meta_value(info, "ttt.checkpoints") * meta_value(info, "ttt.checkpoint_s");
  w.evaluations = meta_value(info, "ttt.evaluations") * meta_value(info, "ttt.evaluation_s");
  w.time_to_train = w.lead_in + w.steps * step_seconds + w.checkpoints + w.evaluations;
  w.has_time_to_train = !w.inference && w.steps > 0;
  return w;
}

std::string stats_json(const ChipSpec& chip, const RunStats& stats, const RunInfo& info) {
  const Totals t = totals(stats);
  const double peak = chip.peak_flops(true, false) * static_cast<double>(stats.ipus.size());
  JsonWriter w;
  // Throughput figures cover the simulated IPUs; with replica symmetry the other replicas do
  // the same work in the same time.
  w.begin_object();
  w.key("format").value("ipusim-stats/1");
  w.key("ipusim_version").value(IPUSIM_VERSION);
  w.key("trace").begin_object();
  w.key("file").value(info.trace_file).key("name").value(info.trace_name);
  w.key("identity").value(info.trace_identity);
  w.end_object();
  w.key("warnings").begin_array();
  for (const auto& m : info.warnings) w.value(m);
  w.end_array();
  w.key("overrides").begin_array();
  for (const auto& o : info.overrides) w.value(o);
  w.end_array();
  // A run chosen without a run config, and what importing the model changed (only then).
  for (const auto& [key, lines] :
       {std::pair{"chosen", &info.chosen}, std::pair{"model_notes", &info.model_notes}}) {
    if (lines->empty()) continue;
    w.key(key).begin_array();
    for (const auto& l : *lines) w.value(l);
    w.end_array();
  }
  w.key("chip").begin_object();
  w.key("name").value(chip.name).key("file").value(info.chip_file);
  w.quantity("clock", chip.clock.hz, "Hz");
  w.quantity("tiles", chip.tiles, "tiles");
  w.quantity("tile_memory", chip.tile_memory.count, "B");
  w.key("tile_model").value(config::enum_name(kTileModelNames, chip.tile_model));  // issue 18
  w.end_object();
  w.key("system").begin_object();
  w.key("name").value(stats.system_name.empty() ? chip.name : stats.system_name);
  if (!stats.machine_name.empty()) w.key("machine").value(stats.machine_name);
  w.quantity("ipus", static_cast<std::uint64_t>(stats.system_ipus), "IPUs");
  if (!stats.system_name.empty())
    w.quantity("ipus_in_system", static_cast<std::uint64_t>(stats.ipus_in_system), "IPUs");
  w.quantity("replicas", static_cast<std::uint64_t>(stats.replicas), "replicas");
  w.quantity("simulated_ipus", static_cast<std::uint64_t>(stats.ipus.size()), "IPUs");
  w.key("replica_symmetric").value(stats.replica_symmetric);
  w.end_object();
  w.key("total").begin_object();
  w.quantity("cycles", stats.cycles, "cycles");
  w.quantity("time", stats.seconds, "s");
  w.end_object();
  if (const auto wl = workload(info, stats.seconds)) {
    w.key("workload").begin_object();
    w.key("model").value(wl->model);
    w.quantity("samples_per_step", wl->samples_per_step, wl->sample_unit);
    w.quantity("step_time", stats.seconds, "s");
    w.quantity("throughput", wl->throughput, wl->sample_unit + "/s");
    w.key("mode").value(wl->inference ? "inference" : "training");
    if (wl->inference) w.quantity("latency", stats.seconds, "s");
    if (const auto& g = wl->generation) {
      w.key("generation").begin_object();
      w.quantity("prompt_tokens", g->prompt_tokens, "tokens");
      w.quantity("new_tokens", g->new_tokens, "tokens");
      w.quantity("steps_to_first_token", g->steps_to_first_token, "steps");
      w.quantity("time_to_first_token", g->time_to_first_token, "s");
      w.quantity("time_per_output_token", g->time_per_output_token, "s");
      w.quantity("total_time", g->total_time, "s");
      w.quantity("tokens_per_second", g->tokens_per_second, "tokens/s");
      if (g->largest_micro_batch > 0) {
        w.quantity("largest_micro_batch", g->largest_micro_batch, "sequences");
        w.quantity("largest_context", g->largest_context, "tokens");
      }
      w.end_object();
    }
    if (wl->has_model()) {
      w.quantity("parameters", wl->parameters, "parameters");
      w.key("model_flops").begin_object();
      w.quantity("forward", wl->forward_flops, "FLOP");
      w.quantity("backward", wl->backward_flops, "FLOP");
      w.quantity("total", wl->model_flops(), "FLOP");
      w.quantity("per_sample", static_cast<double>(wl->model_flops()) / wl->samples_per_step,
                 "FLOP");
      w.quantity("rate", wl->model_rate, "FLOP/s");
      w.quantity("utilisation", wl->model_rate / wl->model_peak(chip), "fraction of FP16.16 peak");
      w.end_object();
    }
    if (wl->has_time_to_train) {
      w.key("time_to_train").begin_object();
      w.quantity("total", wl->time_to_train, "s");
      w.quantity("steps", wl->steps, "steps");
      w.quantity("training", wl->steps * stats.seconds, "s");
      w.quantity("lead_in", wl->lead_in, "s");
      w.quantity("checkpoints", wl->checkpoints, "s");
      w.quantity("evaluations", wl->evaluations, "s");
      w.end_object();
    }
    w.end_object();
  }
  w.key("phases").begin_object();
  write_phases(w, t.phases, t.counts, stats.cycles, chip);
  w.end_object();
  if (const auto pipeline = pipeline_analysis(stats, info)) write_pipeline_json(w, *pipeline);
  w.key("throughput").begin_object();
  w.quantity("flops", t.flops, "FLOP");
  w.quantity("flop_rate", stats.seconds > 0 ? static_cast<double>(t.flops) / stats.seconds : 0.0,
             "FLOP/s");
  w.quantity("peak_flop_rate_fp16", peak, "FLOP/s");
  w.quantity("utilisation",
             stats.seconds > 0 ? static_cast<double>(t.flops) / stats.seconds / peak : 0.0,
             "fraction of FP16.16 peak");
  const double compute_s = (Cycles{t.phases[PhaseKind::kCompute]} / chip.clock).seconds;
  w.quantity("compute_phase_utilisation",
             compute_s > 0 ? static_cast<double>(t.flops) / compute_s / peak : 0.0,
             "fraction of FP16.16 peak while in compute phases");
  w.quantity("exchange_bytes", t.exchange_bytes, "B");
  w.quantity("host_bytes", t.host_bytes, "B");
  w.end_object();
  w.key("links").begin_array();
  for (std::size_t i = 0; i < stats.links.size() && i < kTopPhases; ++i) {
    const LinkUse& l = stats.links[i];
    w.begin_object()
        .key("name")
        .value(l.name)
        .quantity("bytes", l.bytes, "B")
        .quantity("busy", l.busy_cycles, "cycles")
        .quantity("utilisation",
                  stats.cycles ? static_cast<double>(l.busy_cycles) / stats.cycles : 0.0,
                  "fraction of total")
        .end_object();
  }
  w.end_array();
  w.key("ipu").begin_array();
  for (const auto& ipu : stats.ipus) {
    w.begin_object();
    w.key("index").value(ipu.ipu);
    w.key("program").value(ipu.program);
    w.key("replica").value(ipu.replica);
    w.quantity("cycles", ipu.cycles, "cycles");
    w.key("phases").begin_object();
    write_phases(w, ipu.phases, ipu.counts, ipu.cycles, chip);
    w.end_object();
    w.key("tiles").begin_object();
    write_summary(w, "compute_cycles", ipu.tile_compute_cycles, "cycles",
                  "cycles each tile spent executing vertices, over the whole run");
    write_summary(w, "exchange_bytes", ipu.tile_exchange_bytes, "B",
                  "bytes each tile sent plus received on the exchange, over the whole run");
    write_summary(
        w, "memory", memory_totals(ipu.memory), "B",
        "bytes allocated on each tile: tensors, vertex state, code, exchange code, stack");
    w.quantity("memory_capacity", chip.tile_memory.count, "B");
    w.end_object();
    w.key("top_compute_sets").begin_array();
    for (const auto& p : top(ipu.compute_sets))
      w.begin_object()
          .key("name")
          .value(p.name)
          .key("layer")
          .value(p.layers)
          .key("pass")
          .value(p.pass)
          .quantity("cycles", p.cycles, "cycles")
          .quantity("executions", p.executions, "times")
          .end_object();
    w.end_array();
    w.key("top_exchanges").begin_array();
    for (const auto& p : top(ipu.exchanges))
      w.begin_object()
          .key("name")
          .value(p.name)
          .key("layer")
          .value(p.layers)
          .key("pass")
          .value(p.pass)
          .quantity("cycles", p.cycles, "cycles")
          .quantity("executions", p.executions, "times")
          .end_object();
    w.end_array();
    // Time per layer and pass (layers.csv's rows of this IPU), when attributed (--out).
    if (!info.layers.empty()) {
      w.key("layers").begin_array();
      for (const auto& row : info.layers) {
        if (row.ipu != ipu.ipu) continue;
        w.begin_object().key("layer").value(row.layer).key("pass").value(row.pass);
        w.quantity("executions", row.executions, "compute phases");
        w.key("cycles").begin_object();
        for (const PhaseInfo& k : kPhases) w.quantity(k.name, row.cycles[k.kind], "cycles");
        w.quantity("total", row.total(), "cycles");
        w.end_object();
        w.quantity("flops", row.flops, "FLOP");
        w.quantity("compute_phase_utilisation", compute_phase_utilisation(chip, row),
                   "fraction of FP16.16 peak while in its compute phases");
        w.quantity("exchange_bytes", row.exchange_bytes, "B");
        w.key("peak_live").begin_object();
        w.quantity("ipu", row.peak_live_bytes, "B");
        w.quantity("tile", row.peak_tile_live_bytes, "B");
        w.end_object();
        w.end_object();
      }
      w.end_array();
    }
    if (const LiveMemory* m = find_live_memory(info.live_memory, ipu.ipu)) write_live_memory(w, *m);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.str();
}

std::string summary_text(const ChipSpec& chip, const RunStats& stats, const RunInfo& info) {
  const Totals t = totals(stats);
  const double total = static_cast<double>(std::max<std::uint64_t>(stats.cycles, 1));
  const double peak = chip.peak_flops(true, false) * static_cast<double>(stats.ipus.size());
  const double rate = stats.seconds > 0 ? static_cast<double>(t.flops) / stats.seconds : 0.0;
  std::string out;
  // With --model the run config's name no longer says what ran: name the model too.
  std::string name = info.trace_name;
  if (!info.model_file.empty())
    if (const auto wl = workload(info, stats.seconds))
      name = fmt::format("{} with model {} ({})", info.trace_name, wl->model, info.model_file);
  if (stats.system_name.empty())
    out += fmt::format("ipusim {}: {} on {} x {} ({} tiles at {})\n", IPUSIM_VERSION, name,
                       stats.ipus.size(), chip.name, chip.tiles, human_frequency(chip.clock.hz));
  else
    out += fmt::format("ipusim {}: {} on {} ({}{} IPU(s) = {} replica(s) x {}; {} simulated{})\n",
                       IPUSIM_VERSION, name, stats.system_name, stats.system_ipus,
                       stats.system_ipus < stats.ipus_in_system
                           ? fmt::format(" of its {}", stats.ipus_in_system)
                           : "",
                       stats.replicas, stats.system_ipus / stats.replicas, stats.ipus.size(),
                       stats.replica_symmetric ? ", replica-symmetric" : "");
  if (!info.overrides.empty()) {
    std::string list;
    for (const auto& o : info.overrides) list += (list.empty() ? "" : ", ") + o;
    out += fmt::format("  overrides     {}\n", list);
  }
  for (std::size_t i = 0; i < info.chosen.size(); ++i)
    out += fmt::format("  {:<13} {}\n", i == 0 ? "chosen" : "", info.chosen[i]);
  for (std::size_t i = 0; i < info.model_notes.size(); ++i)
    out += fmt::format("  {:<13} {}\n", i == 0 ? "model notes" : "", info.model_notes[i]);
  if (chip.tile_model == TileModel::kIsa)
    out += "  tile model    instruction-level (chip.tile_model=isa; docs/tile-model.md)\n";
  out += fmt::format("  {:<13} {:>14} cycles  {}\n", "total", stats.cycles,
                     human_seconds(stats.seconds));
  if (const auto wl = workload(info, stats.seconds)) {
    out += fmt::format("  throughput    {:.0f} {}/s ({} {} per step of {})\n", wl->throughput,
                       wl->sample_unit, wl->samples_per_step, wl->sample_unit,
                       human_seconds(stats.seconds));
    if (wl->inference)
      out += fmt::format(
          "  latency       {} per batch ({} {} per replica, inputs from and outputs to the host)\n",
          human_seconds(stats.seconds), wl->samples_per_step / std::max(1u, stats.replicas),
          wl->sample_unit);
    if (const auto& g = wl->generation)
      out += fmt::format(
          "  generation    time to first token {} ({} step{}{}), per output token {}; {} new "
          "tokens in {}; {:.1f} tokens/s\n",
          human_seconds(g->time_to_first_token), g->steps_to_first_token,
          g->steps_to_first_token == 1 ? "" : "s",
          g->steps_to_first_token > 1
              ? fmt::format(": the {}-token prompt fed one token a step", g->prompt_tokens)
              : "",
          human_seconds(g->time_per_output_token), g->new_tokens, human_seconds(g->total_time),
          g->tokens_per_second);
    if (const auto& g = wl->generation; g && g->largest_micro_batch > 0)
      out += fmt::format(
          "  fits          micro-batch up to {}{} at this sequence; sequence up to {} tokens{} at "
          "this micro-batch (tile memory and Streaming Memory; --fit)\n",
          g->largest_micro_batch,
          g->largest_micro_batch == g->micro_batch_limit ? " (the search's limit)" : "",
          g->largest_context,
          g->largest_context == g->context_limit ? " (the search's limit)" : "");
    else if (wl->has_time_to_train)
      out += fmt::format(
          "  time to train {:.1f} min ({:.0f} steps x {} + lead-in {:.0f} s + checkpoints "
          "{:.0f} s + evaluations {:.0f} s; host-side terms from the run config)\n",
          wl->time_to_train / 60, wl->steps, human_seconds(stats.seconds), wl->lead_in,
          wl->checkpoints, wl->evaluations);
    if (wl->has_model()) {
      const double flops = static_cast<double>(wl->model_flops());
      std::string unit = wl->sample_unit;
      if (unit.ends_with('s')) unit.pop_back();
      const std::string passes =
          wl->inference
              ? std::string("forward")
              : fmt::format(
                    "forward {} + backward {}",
                    human_rate(static_cast<double>(wl->forward_flops) / wl->samples_per_step,
                               "FLOP"),
                    human_rate(static_cast<double>(wl->backward_flops) / wl->samples_per_step,
                               "FLOP"));
      out += fmt::format(
          "  model         {} parameters; {} per {} ({}, from its graph); {} over {} IPU{} = "
          "{:.1f}% of {} FP16.16 peak\n",
          human_rate(static_cast<double>(wl->parameters), ""),
          human_rate(flops / wl->samples_per_step, "FLOP"), unit, passes,
          human_rate(wl->model_rate, "FLOP/s"), wl->model_ipus, wl->model_ipus == 1 ? "" : "s",
          100.0 * wl->model_rate / wl->model_peak(chip), wl->model_ipus == 1 ? "its" : "their");
    }
  }
  auto line = [&](std::string_view phase, std::uint64_t c, std::uint64_t n, std::string_view what) {
    out += fmt::format("  {:<13} {:>14} cycles  {:5.1f}%  ({} {})\n", phase, c,
                       100.0 * static_cast<double>(c) / total, n, what);
  };
  // With several IPUs the phases are one IPU's, the one whose step ends last (the first of
  // them): say which (every IPU's are in stats.json ipu[]).
  if (stats.ipus.size() > 1)
    out += fmt::format(
        "  phases of ipu{} (the IPU whose program ends last; each IPU's: stats.json ipu[])\n",
        t.slowest_ipu);
  for (const PhaseInfo& k : kPhases) {
    const std::uint64_t cycles = t.phases[k.kind], count = t.counts[k.kind];
    if (!k.on_chip && cycles == 0 && count == 0) continue;  // keep single-chip output short
    line(k.name, cycles, count, k.counted);
  }
  if (t.flops > 0) {
    const double compute_s = (Cycles{t.phases[PhaseKind::kCompute]} / chip.clock).seconds;
    const double in_compute = compute_s > 0 ? static_cast<double>(t.flops) / compute_s : 0.0;
    // Over the simulated IPUs (with replica symmetry, one replica of several), so against
    // their peak: say which.
    const std::size_t n = stats.ipus.size();
    std::string over = n == 1 ? "the simulated IPU" : fmt::format("the {} simulated IPUs", n);
    if (stats.replica_symmetric && stats.replicas > 1) over += " (one replica)";
    out += fmt::format("  achieved      {} on {} = {:.1f}% of {} {} FP16.16 peak\n",
                       human_rate(rate, "FLOP/s"), over, 100.0 * rate / peak,
                       n == 1 ? "its" : "their", human_rate(peak, "FLOP/s"));
    out += fmt::format(
        "  the gap       {:.1f}% of the time is not compute; within compute phases the AMP units "
        "run at {:.1f}% of peak\n",
        100.0 * (1.0 - static_cast<double>(t.phases[PhaseKind::kCompute]) / total),
        100.0 * in_compute / peak);
  }
  if (const auto pipeline = pipeline_analysis(stats, info))
    out += pipeline_text(*pipeline, t.slowest_ipu);
  if (!stats.links.empty()) {
    const LinkUse& busiest = stats.links.front();
    out +=
        fmt::format("  busiest link  {} carried {} in {} cycles ({:.1f}% of the time)\n",
                    busiest.name, human_bytes(static_cast<double>(busiest.bytes)),
                    busiest.busy_cycles, 100.0 * static_cast<double>(busiest.busy_cycles) / total);
  }
  // One pair of lines per IPU for a few; for more, the first and the one with the fullest
  // tile.
  const IpuRunStats* fullest = nullptr;
  double fullest_bytes = 0;
  for (const auto& ipu : stats.ipus) {
    const double m = summarise(memory_totals(ipu.memory)).max;
    if (fullest && m <= fullest_bytes) continue;
    fullest = &ipu;
    fullest_bytes = m;
  }
  for (const auto& ipu : stats.ipus) {
    if (stats.ipus.size() > 4 && &ipu != &stats.ipus.front() && &ipu != fullest) continue;
    const Summary cmp = summarise(ipu.tile_compute_cycles);
    const Summary mem = summarise(memory_totals(ipu.memory));
    const std::string prefix = stats.ipus.size() > 1 ? fmt::format("ipu{} ", ipu.ipu) : "";
    out += fmt::format("  {}tile busy     mean {:.0f} / max {:.0f} cycles (balance {:.1f}%)\n",
                       prefix, cmp.mean, cmp.max, cmp.max > 0 ? 100.0 * cmp.mean / cmp.max : 100.0);
    const bool only_fullest = stats.ipus.size() > 4 && &ipu != &stats.ipus.front();
    // In the capacity's unit, so that they compare at a glance.
    const auto capacity = static_cast<double>(chip.tile_memory.count);
    out += fmt::format("  {}tile mem      min {} / mean {} / max {} of {} (tile {}{})\n", prefix,
                       human_bytes_as(mem.min, capacity), human_bytes_as(mem.mean, capacity),
                       human_bytes_as(mem.max, capacity), human_bytes(capacity),
                       mem.worst.empty() ? 0 : mem.worst.front().first,
                       only_fullest ? "; the fullest IPU" : "");
  }
  return out;
}

void write_run_dir(const std::string& dir, const ChipSpec& chip, const RunStats& stats,
                   const RunInfo& info, const std::string& resolved_config_yaml) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError(fmt::format("{}: cannot create output directory: {}", dir, ec.message()));
  const std::string json = stats_json(chip, stats, info);
  // The small files first, tiles.csv (one row per tile) last before stats.json.
  std::vector<FileWriter> files{
      {dir + "/config.resolved.yaml", [&](std::ostream& o) { o << resolved_config_yaml; }},
      {dir + "/trace.id", [&](std::ostream& o) {
         o << "file: " << info.trace_file << "\nname: " << info.trace_name
           << "\nidentity: " << info.trace_identity << "\n";
       }}};
  // An earlier run's files this run does not write: its report (`ipusim report` writes
  // report.html from the files it would no longer match) and whichever CSVs this run has none of.
  // Only an earlier ipusim run's (the directory holds its stats.json and trace.id): files of the
  // same names in a directory that holds no run are the user's and stay.
  const bool earlier_run = std::filesystem::is_regular_file(dir + "/stats.json", ec) &&
                           std::filesystem::is_regular_file(dir + "/trace.id", ec);
  std::vector<std::string> stale;
  const auto stale_if_earlier = [&](const std::string& path) {
    if (earlier_run) stale.push_back(path);
  };
  stale_if_earlier(dir + "/report.html");
  const std::string steps = supersteps_csv(stats);
  if (!steps.empty())
    files.push_back({dir + "/supersteps.csv", [&](std::ostream& o) { o << steps; }});
  else
    stale_if_earlier(dir + "/supersteps.csv");
  const std::string layers = layers_csv(info.layers);
  if (!layers.empty())
    files.push_back({dir + "/layers.csv", [&](std::ostream& o) { o << layers; }});
  else
    stale_if_earlier(dir + "/layers.csv");
  const std::string plan = plan_csv(info.plans);
  if (!plan.empty())
    files.push_back({dir + "/plan.csv", [&](std::ostream& o) { o << plan; }});
  else
    stale_if_earlier(dir + "/plan.csv");
  files.push_back({dir + "/tiles.csv", [&](std::ostream& o) { o << tiles_csv(stats); }});
  // stats.json last: its presence means the run directory is complete. All files or none are
  // replaced, and the stale ones go only with them (write_files_atomically).
  files.push_back({dir + "/stats.json", [&](std::ostream& o) { o << json; }});
  write_files_atomically(files, stale);
}

}  // namespace ipusim::report
