// SPDX-License-Identifier: Apache-2.0
// ipusim run: parses and checks its options into a driver::RunRequest, which driver::run()
// carries out (src/driver/run.cpp).
#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <utility>
#include <vector>

#include "common.hpp"
#include "ipusim/driver/run.hpp"
#include "ipusim/model/engine.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"

namespace ipusim::cli {
namespace {

// True if --chip was given explicitly (its default must not replace a system's chip).
bool vm_has_chip(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--chip" || a.starts_with("--chip=")) return true;
  }
  return false;
}

bool parse_uint(const std::string& text, std::uint64_t& out) {
  if (text.empty() || text.size() > 18) return false;
  out = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return true;
}

}  // namespace

int run_command(int argc, char** argv) {
  CommonOptions common;
  ChipOptions chip_opts;
  driver::RunRequest r;
  std::string engine_name = "fast";
  std::string timeline_tiles;
  std::string timeline_steps, timeline_detail, timeline_window;
  po::options_description desc("Options");
  add_common_options(desc, common);
  bool no_plan_cache = false;
  add_plan_cache_option(desc, no_plan_cache);
  add_chip_options(desc, chip_opts);
  desc.add_options()(
      "system", po::value(&r.system_file)->value_name("FILE"),
      "system config (configs/systems/*.yaml): runs the trace's replicas on that system's IPUs, "
      "links and gateways; --chip then replaces the system's chip; with --run, default: the "
      "run config's")(
      "run", po::value(&r.run_file)->value_name("FILE"),
      "instead of TRACE: a run config (configs/runs/*.yaml) whose training step is compiled in "
      "memory, as 'ipusim compile' does, and simulated on the system; --set run.* keys go to "
      "the run config, all others to the system; no trace file is written")(
      "model", po::value(&r.model_file)->value_name("FILE"),
      "with --run: the model (models/*.yaml or .onnx); default: the run config's. The run "
      "config's other keys stay: a model with another input than its own warns that "
      "run.input_bytes_per_sample needs setting. Without --run (and with --system): a run is "
      "chosen for the model on the system (replicas, micro-batch, recomputation, pipeline; "
      "docs/onnx.md), said in the summary and stats.json; --set run.* fixes any of it")(
      "save-trace", po::value(&r.save_trace)->value_name("TRACE"),
      "with --run: also write the compiled trace (.itb binary, .trace text), as 'ipusim "
      "compile --out TRACE' would")(
      "all-replicas", po::bool_switch(&r.all_replicas),
      "simulate every replica in full instead of replica 0 only (identical results for "
      "symmetric programs, slower)")(
      "out,o", po::value(&r.out_dir)->value_name("DIR"),
      "write stats.json, config.resolved.yaml and trace.id into DIR")(
      "full-loops", po::bool_switch(&r.full_loops),
      "simulate every iteration of repeat loops instead of timing the body once (implies "
      "--no-fast-forward)")(
      "fit", po::bool_switch(&r.fit),
      "a text generation run (run.new_tokens): also find the largest micro-batch (at its "
      "sequence) and the largest sequence or KV cache length (at its micro-batch) that fit tile "
      "memory and Streaming Memory, by compiling it at other sizes (seconds); in the summary "
      "and stats.json")(
      "no-fast-forward", po::bool_switch(&r.no_fast_forward),
      "simulate every iteration of loops with group steps or background host transfers; by "
      "default such a loop runs until its state at a group step of every simulated IPU (or at "
      "an iteration's start) has repeated exactly twice, one period apart, and the remaining "
      "whole periods are added up instead of simulated (identical results; off with "
      "--timeline, which records every iteration)")(
      "engine", po::value(&engine_name)->value_name("fast|reference")->default_value("fast"),
      "fast: one process per IPU, phases costed once and cached, loops timed once; reference: "
      "one process per tile, every phase costed on every execution, every loop iteration run "
      "(the naive model, for checking and speed comparisons; identical results)")(
      "tile-stats", po::value(&r.tile_stats_file)->value_name("FILE"),
      "write per-tile compute cycles, exchange bytes and memory of every simulated IPU as CSV")(
      "timeline", po::value(&r.timeline_file)->value_name("FILE"),
      "write a Chrome/Perfetto trace-event JSON timeline (open in ui.perfetto.dev): one "
      "process per simulated IPU with its compute, sync, exchange, host I/O, external sync, "
      "inter-IPU and collective spans named after the program step; a memoised loop is one "
      "'loop xN' span with its body's spans once, each lasting N iterations; loops with group "
      "steps are simulated and recorded iteration by iteration, never fast-forwarded (fast "
      "engine only)")(
      "timeline-tiles", po::value(&timeline_tiles)->value_name("IPU"),
      "with --timeline: add one track per tile of system IPU IPU (compute busy time and "
      "exchange participation) for the supersteps chosen by --timeline-steps")(
      "timeline-steps", po::value(&timeline_steps)->value_name("FIRST:LAST")->default_value("0:9"),
      "supersteps that get tile tracks: compute phases in the order they run, from 0 (as "
      "supersteps.csv numbers them when every loop is memoised)")(
      "timeline-detail",
      po::value(&timeline_detail)->value_name("LEVEL")->default_value("supersteps"),
      "with --timeline: supersteps (a compute phase and the on-chip sync and exchange after it "
      "are one span, its args giving each part; other phases and loops their own) or phases "
      "(every phase its own span: about three times the events)")(
      "timeline-window", po::value(&timeline_window)->value_name("FROM:TO"),
      "with --timeline: only the spans that overlap this window of simulated time, e.g. "
      "0ms:2.5ms (durations with a unit: s, ms, us, ns)")(
      "strict", po::bool_switch(&r.strict),
      "fail (exit 3) instead of warning when a compiled trace does not match the chip or system it "
      "runs on (other tile count, tile memory or AMP, or a system with more IPUs than it uses)")(
      "quiet,q", po::bool_switch(&r.quiet),
      "do not print the summary or the progress line (progress is shown on stderr only when "
      "it is a terminal)")("trace", po::value(&r.trace_file)->value_name("TRACE"),
                           "program trace (.trace text or .itb binary)");
  po::positional_options_description pos;
  pos.add("trace", 1);
  parse("run", argc, argv, desc, &pos);
  if (common.help) {
    print_help(
        "ipusim run [options] TRACE\n"
        "       ipusim run --run FILE [--model FILE] [--system FILE] [--save-trace TRACE] "
        "[options]\n"
        "       ipusim run --model MODEL.onnx --system FILE [--set run.KEY=VALUE] [options]",
        "Simulates a compiled BSP program trace on the SystemC model of a chip (--chip)\n"
        "or of a whole system (--system: IPUs, IPU-Links, GW-Links, gateways), or, with\n"
        "--run, compiles a model's step in memory and simulates it in the same process\n"
        "(the results are those of 'ipusim compile' then 'ipusim run' on its trace), or,\n"
        "with --model and no --run, chooses a run for the model on the system first, and\n"
        "prints total cycles, the split over compute, on-chip sync and exchange, host\n"
        "and streaming I/O, external sync, inter-IPU copies and collectives, the\n"
        "achieved FLOP rate and per-tile balance and memory. With --out, writes\n"
        "stats.json (every value with its unit), config.resolved.yaml, trace.id,\n"
        "tiles.csv, supersteps.csv, layers.csv and, with --run, plan.csv (what the\n"
        "compiler planned for each conv and matmul; docs/stats-reference.md), the input of\n"
        "'ipusim report' and 'ipusim compare'; with --timeline, a Perfetto timeline\n"
        "(docs/reports.md). Files are written whole or not at all.",
        desc);
    return 0;
  }
  apply_log_level(common.log_level);
  apply_plan_cache(no_plan_cache);
  const bool compiling = !r.run_file.empty();
  if (compiling && !r.trace_file.empty())
    throw UsageError(
        fmt::format("ipusim run: give a TRACE or --run FILE, not both (found {} and --run {})",
                    r.trace_file, r.run_file));
  if (!compiling && !r.model_file.empty() && !r.trace_file.empty())
    throw UsageError("--model: needs --run FILE, or no TRACE (a run chosen for the model)");
  if (!compiling && !r.model_file.empty() && r.system_file.empty())
    throw UsageError(
        "--model without --run: give the system it runs on (--system FILE): the run is chosen "
        "for the model on it");
  if (!compiling && !r.save_trace.empty() && r.model_file.empty())
    throw UsageError("--save-trace: needs --run FILE or --model FILE");
  if (!compiling && r.trace_file.empty() && r.model_file.empty())
    throw UsageError("ipusim run: missing TRACE or --run FILE (see 'ipusim run --help')");
  const auto engine = model::engine_by_name(engine_name);
  if (!engine)
    throw UsageError(
        fmt::format("--engine: expected fast or reference, found \"{}\"", engine_name));
  if (!r.timeline_file.empty() && *engine == model::Engine::kReference)
    throw UsageError(
        "--timeline: the timeline is recorded by the fast engine only; drop "
        "--engine reference (both engines give identical stats)");
  if (r.timeline_file.empty() && !timeline_tiles.empty())
    throw UsageError("--timeline-tiles: needs --timeline FILE");
  if (!timeline_tiles.empty()) {
    std::uint64_t v = 0;
    if (!parse_uint(timeline_tiles, v) || v > 0xffffffffu)
      throw UsageError(fmt::format(
          "--timeline-tiles: expected an IPU index (0, 1, ...), found \"{}\"", timeline_tiles));
    r.timeline_tile_ipu = static_cast<std::uint32_t>(v);
  }
  {
    std::uint64_t& first = r.timeline_steps_first;
    std::uint64_t& last = r.timeline_steps_last;
    const auto colon = timeline_steps.find(':');
    if (colon == std::string::npos || !parse_uint(timeline_steps.substr(0, colon), first) ||
        !parse_uint(timeline_steps.substr(colon + 1), last) || last < first)
      throw UsageError(fmt::format(
          "--timeline-steps: expected FIRST:LAST superstep indices with FIRST <= LAST (e.g. 0:9), "
          "found \"{}\"",
          timeline_steps));
  }

  if (timeline_detail == "phases")
    r.timeline_detail = report::TimelineOptions::Detail::kPhases;
  else if (timeline_detail != "supersteps")
    throw UsageError(fmt::format("--timeline-detail: expected supersteps or phases, found \"{}\"",
                                 timeline_detail));
  if (!timeline_window.empty()) {
    if (r.timeline_file.empty()) throw UsageError("--timeline-window: needs --timeline FILE");
    const auto colon = timeline_window.find(':');
    std::optional<std::pair<Duration, Duration>> w;
    if (colon != std::string::npos) {
      try {
        w = std::pair{parse_duration(timeline_window.substr(0, colon)),
                      parse_duration(timeline_window.substr(colon + 1))};
      } catch (const Error&) {
        w.reset();
      }
    }
    if (!w || w->first.seconds < 0 || w->second.seconds < w->first.seconds)
      throw UsageError(fmt::format(
          "--timeline-window: expected FROM:TO durations with FROM <= TO (e.g. 0ms:2.5ms), "
          "found \"{}\"",
          timeline_window));
    r.timeline_window = w;
  }

  r.chip_file = chip_opts.chip_file;
  r.chip_given = vm_has_chip(argc, argv);
  // No output replaces an input or a file of the run directory (issue 55, part 2).
  const std::vector<NamedInput> inputs{{"the trace", r.trace_file},
                                       {"the run config", r.run_file},
                                       {"the model", r.model_file},
                                       {"the system config", r.system_file},
                                       {"the chip config", r.chip_file}};
  for (const auto& [option, file] :
       {std::pair{"--save-trace", &r.save_trace}, std::pair{"--tile-stats", &r.tile_stats_file},
        std::pair{"--timeline", &r.timeline_file}}) {
    check_output_is_not_an_input(*file, option, inputs);
    check_not_in_run_dir(*file, option, r.out_dir);
  }
  r.overrides = chip_opts.overrides;
  r.engine = *engine;
  driver::run(r, std::cout, std::cerr);
  return 0;
}

}  // namespace ipusim::cli
