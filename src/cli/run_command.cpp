// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <time.h>

#include <future>
#include <iostream>
#include <optional>
#include <ostream>

#include "common.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/model/simulation.hpp"
#include "ipusim/report/report.hpp"
#include "ipusim/report/run_files.hpp"
#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/progress.hpp"

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

// CPU time this process has used so far (user + system), in seconds.
double cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Peak resident set size of this process so far, in KiB.
long peak_rss_kib() {
  rusage usage{};
  return ::getrusage(RUSAGE_SELF, &usage) == 0 ? usage.ru_maxrss : 0;
}

}  // namespace

int run_command(int argc, char** argv) {
  CommonOptions common;
  ChipOptions chip_opts;
  std::string out_dir;
  std::string trace_file;
  std::string run_file, model_file, save_trace;
  std::string system_file;
  std::string engine_name = "fast";
  std::string tile_stats_file;
  bool full_loops = false;
  bool all_replicas = false;
  bool quiet = false;
  bool strict = false;
  std::string timeline_file;
  std::string timeline_tiles;
  std::string timeline_steps;
  po::options_description desc("Options");
  add_common_options(desc, common);
  add_chip_options(desc, chip_opts);
  desc.add_options()(
      "system", po::value(&system_file)->value_name("FILE"),
      "system config (configs/systems/*.yaml): runs the trace's replicas on that system's IPUs, "
      "links and gateways; --chip then replaces the system's chip; with --run, default: the "
      "run config's")(
      "run", po::value(&run_file)->value_name("FILE"),
      "instead of TRACE: a run config (configs/runs/*.yaml) whose training step is compiled in "
      "memory, as 'ipusim compile' does, and simulated on the system; --set run.* keys go to "
      "the run config, all others to the system; no trace file is written")(
      "model", po::value(&model_file)->value_name("FILE"),
      "with --run: the model (models/*.yaml); default: the run config's")(
      "save-trace", po::value(&save_trace)->value_name("TRACE"),
      "with --run: also write the compiled trace (.itb binary, .trace text), as 'ipusim "
      "compile --out TRACE' would")(
      "all-replicas", po::bool_switch(&all_replicas),
      "simulate every replica in full instead of replica 0 only (identical results for "
      "symmetric programs, slower)")(
      "out,o", po::value(&out_dir)->value_name("DIR"),
      "write stats.json, config.resolved.yaml and trace.id into DIR")(
      "full-loops", po::bool_switch(&full_loops),
      "simulate every iteration of repeat loops instead of timing the body once")(
      "engine", po::value(&engine_name)->value_name("fast|reference")->default_value("fast"),
      "fast: one process per IPU, phases costed once and cached, loops timed once; reference: "
      "one process per tile, every phase costed on every execution, every loop iteration run "
      "(the naive model, for checking and speed comparisons; identical results)")(
      "tile-stats", po::value(&tile_stats_file)->value_name("FILE"),
      "write per-tile compute cycles, exchange bytes and memory of every simulated IPU as CSV")(
      "timeline", po::value(&timeline_file)->value_name("FILE"),
      "write a Chrome/Perfetto trace-event JSON timeline (open in ui.perfetto.dev): one "
      "process per simulated IPU with its compute, sync, exchange, host I/O, external sync, "
      "inter-IPU and collective spans named after the program step; a memoised loop is one "
      "'loop xN' span with its body's spans once, each lasting N iterations (fast engine only)")(
      "timeline-tiles", po::value(&timeline_tiles)->value_name("IPU"),
      "with --timeline: add one track per tile of system IPU IPU (compute busy time and "
      "exchange participation) for the supersteps chosen by --timeline-steps")(
      "timeline-steps", po::value(&timeline_steps)->value_name("FIRST:LAST")->default_value("0:9"),
      "supersteps (compute phases, numbered as in supersteps.csv) that get tile tracks")(
      "strict", po::bool_switch(&strict),
      "fail (exit 3) instead of warning when a compiled trace does not match the chip or system it "
      "runs on (other tile count, tile memory or AMP, or a system with more IPUs than it uses)")(
      "quiet,q", po::bool_switch(&quiet),
      "do not print the summary or the progress line (progress is shown on stderr only when "
      "it is a terminal)")("trace", po::value(&trace_file)->value_name("TRACE"),
                           "program trace (.trace text or .itb binary)");
  po::positional_options_description pos;
  pos.add("trace", 1);
  parse("run", argc, argv, desc, &pos);
  if (common.help) {
    print_help(
        "ipusim run [options] TRACE\n"
        "       ipusim run --run FILE [--model FILE] [--system FILE] [--save-trace TRACE] "
        "[options]",
        "Simulates a compiled BSP program trace on the SystemC model of a chip (--chip)\n"
        "or of a whole system (--system: IPUs, IPU-Links, GW-Links, gateways), or, with\n"
        "--run, compiles a training step in memory and simulates it in the same process\n"
        "(the results are those of 'ipusim compile' then 'ipusim run' on its trace), and\n"
        "prints total cycles, the split over compute, on-chip sync and exchange, host\n"
        "and streaming I/O, external sync, inter-IPU copies and collectives, the\n"
        "achieved FLOP rate and per-tile balance and memory. With --out, writes\n"
        "stats.json (every value with its unit), config.resolved.yaml, trace.id,\n"
        "tiles.csv and supersteps.csv (docs/stats-reference.md), the input of\n"
        "'ipusim report' and 'ipusim compare'; with --timeline, a Perfetto timeline\n"
        "(docs/reports.md). Files are written whole or not at all.",
        desc);
    return 0;
  }
  apply_log_level(common.log_level);
  const bool compiling = !run_file.empty();
  if (compiling && !trace_file.empty())
    throw UsageError(
        fmt::format("ipusim run: give a TRACE or --run FILE, not both (found {} and --run {})",
                    trace_file, run_file));
  if (!compiling && !model_file.empty()) throw UsageError("--model: needs --run FILE");
  if (!compiling && !save_trace.empty()) throw UsageError("--save-trace: needs --run FILE");
  if (!compiling && trace_file.empty())
    throw UsageError("ipusim run: missing TRACE or --run FILE (see 'ipusim run --help')");
  const auto engine = model::engine_by_name(engine_name);
  if (!engine)
    throw UsageError(
        fmt::format("--engine: expected fast or reference, found \"{}\"", engine_name));
  if (!timeline_file.empty() && *engine == model::Engine::kReference)
    throw UsageError(
        "--timeline: the timeline is recorded by the fast engine only; drop "
        "--engine reference (both engines give identical stats)");
  if (timeline_file.empty() && !timeline_tiles.empty())
    throw UsageError("--timeline-tiles: needs --timeline FILE");
  std::optional<std::uint32_t> tile_ipu;
  if (!timeline_tiles.empty()) {
    std::uint64_t v = 0;
    if (!parse_uint(timeline_tiles, v) || v > 0xffffffffu)
      throw UsageError(fmt::format(
          "--timeline-tiles: expected an IPU index (0, 1, ...), found \"{}\"", timeline_tiles));
    tile_ipu = static_cast<std::uint32_t>(v);
  }
  std::uint64_t steps_first = 0, steps_last = 0;
  {
    const auto colon = timeline_steps.find(':');
    if (colon == std::string::npos || !parse_uint(timeline_steps.substr(0, colon), steps_first) ||
        !parse_uint(timeline_steps.substr(colon + 1), steps_last) || steps_last < steps_first)
      throw UsageError(fmt::format(
          "--timeline-steps: expected FIRST:LAST superstep indices with FIRST <= LAST (e.g. 0:9), "
          "found \"{}\"",
          timeline_steps));
  }

  // Lock the run directory before anything else (a concurrent run into the same --out fails
  // here, not after its simulation), and create the directories of every output file now:
  // a timeline inside a new --out directory used to fail after the simulation (issue 16, H, I).
  std::optional<DirectoryLock> out_lock;
  if (!out_dir.empty()) out_lock.emplace(out_dir);
  if (!timeline_file.empty()) create_parent_directories(timeline_file);
  if (!tile_stats_file.empty()) create_parent_directories(tile_stats_file);

  // With --run, overrides go to the file they belong to (as with 'ipusim compile'), and the
  // system is the run config's unless --system names another.
  std::vector<std::string> system_overrides = chip_opts.overrides;
  std::optional<compiler::LoadedRun> run;
  std::optional<compiler::ModelDef> model;
  if (compiling) {
    std::vector<std::string> run_overrides;
    system_overrides.clear();
    for (const auto& o : chip_opts.overrides)
      (o.starts_with("run.") ? run_overrides : system_overrides).push_back(o);
    run = compiler::load_run(run_file, run_overrides);
    model = compiler::load_model(model_file.empty() ? run->run.model_file : model_file);
    if (system_file.empty()) system_file = run->run.system_file;
  }

  // A system brings its own chip; an explicit --chip replaces it.
  std::optional<LoadedSystem> system;
  std::optional<LoadedChip> chip;
  if (!system_file.empty()) {
    const bool chip_given = vm_has_chip(argc, argv);
    system = load_system(system_file, system_overrides,
                         chip_given ? std::optional(chip_opts.chip_file) : std::nullopt);
    spdlog::info("system {} ({} IPUs) from {}", system->spec.name, system->spec.ipus(),
                 system_file);
  } else {
    chip = load_chip_options(chip_opts);
    spdlog::info("chip {} from {}", chip->spec.name, chip_opts.chip_file);
  }
  const ChipSpec& chip_spec = system ? system->spec.chip : chip->spec;
  Progress progress("ipusim run", "phases", !quiet);
  // The trace's identity (a hash of its binary serialisation) is only written to the run
  // directory, so it is computed only with --out: from the bytes as they are read, from the
  // bytes of --save-trace as they are written, or else by serialising the compiled trace.
  const bool want_identity = !out_dir.empty();
  std::string identity;
  const trace::Trace trace = [&] {
    if (compiling) {
      progress.message(fmt::format("compiling {} ({})", model->name, run->run.name));
      // compile() checks the structure of its result.
      return compiler::compile(*model, run->run, system->spec);
    }
    progress.message("reading " + trace_file);
    // read_file checks the structure (check_structure) before returning.
    return trace::read_file(trace_file, want_identity ? &identity : nullptr);
  }();
  spdlog::info("trace {}: {} IPU program(s) x {} replica(s)", trace.name, trace.ipus.size(),
               trace.replicas);
  // A compiled trace records its target; running it elsewhere is allowed (what-if studies
  // sometimes want exactly that) but never silent.
  const std::vector<std::string> mismatches =
      compiler::target_mismatches(trace, chip_spec, system ? &system->spec : nullptr);
  if (!mismatches.empty() && strict) {
    std::string all;
    for (const auto& m : mismatches)
      all += (all.empty() ? "" : "\n") + (compiling ? run_file : trace_file) + ": " + m;
    throw ConfigError(all + "\n(--strict turns these warnings into errors)");
  }
  for (const auto& m : mismatches)
    std::cerr << fmt::format("ipusim run: warning: {}: {}\n", compiling ? run_file : trace_file, m);
  // A compiled trace is saved (--save-trace) or hashed on a second thread while the
  // simulation runs (it only reads the trace); both are done before the run directory is.
  std::future<void> saving;
  if (compiling && (!save_trace.empty() || want_identity)) {
    if (!save_trace.empty()) create_parent_directories(save_trace);
    saving = std::async(std::launch::async, [&] {
      if (!save_trace.empty())
        trace::write_file(trace, save_trace, trace::format_for_path(save_trace),
                          trace::Checked::kYes, want_identity ? &identity : nullptr);
      else
        identity = trace::identity(trace);
    });
  }

  model::ModelOptions options;
  options.engine = *engine;
  options.origin = compiling ? (save_trace.empty() ? run_file : save_trace) : trace_file;
  options.memoise_loops = !full_loops;
  // Spans feed the timeline and supersteps.csv (fast engine); recorded only when asked for.
  options.record_spans =
      *engine == model::Engine::kFast && (!timeline_file.empty() || !out_dir.empty());
  if (tile_ipu) {
    const std::uint32_t ipus = trace.replicas * trace.ipus_per_replica();
    if (*tile_ipu >= ipus)
      throw UsageError(fmt::format("--timeline-tiles: IPU {} does not exist (the run has {} IPUs)",
                                   *tile_ipu, ipus));
    options.record_tiles = true;
    options.tile_ipu = *tile_ipu;
    options.tile_steps_first = steps_first;
    options.tile_steps_last = steps_last;
  }
  progress.message("building the model (costing every compute set and exchange)");
  if (progress.active())
    options.progress = [&](std::uint64_t done, std::uint64_t total) {
      progress.update(done, total);
    };
  const double cpu_start = cpu_seconds();
  const RunStats stats = system ? model::simulate(system->spec, trace, options, all_replicas)
                                : model::simulate(chip_spec, trace, options);
  progress.finish();
  if (tile_ipu) {
    bool simulated = false;
    for (const auto& ipu : stats.ipus) simulated = simulated || ipu.ipu == *tile_ipu;
    if (!simulated)
      throw UsageError(fmt::format(
          "--timeline-tiles: IPU {} was not simulated (replica symmetry simulates replica 0 "
          "only; pick one of its IPUs or add --all-replicas)",
          *tile_ipu));
  }
  const double engine_cpu = cpu_seconds() - cpu_start;
  spdlog::info("simulated {} cycles in {:.3f} s of wall time", stats.cycles, stats.wall_seconds);
  // One machine-readable line for tools/benchmark.sh (docs/performance.md): a tile-superstep
  // is one tile taking part in one compute phase.
  std::uint64_t compute_phases = 0;
  for (const auto& ipu : stats.ipus) compute_phases += ipu.counts[PhaseKind::kCompute];
  const double supersteps = static_cast<double>(compute_phases) * chip_spec.tiles;
  spdlog::info(
      "perf engine={} wall_s={:.6f} cpu_s={:.6f} simulated_s={:.9g} ipus={} tiles={} "
      "compute_phases={} tile_supersteps={:.0f} tile_supersteps_per_s={:.4g} peak_rss_kib={}",
      model::engine_name(*engine), stats.wall_seconds, engine_cpu, stats.seconds, stats.ipus.size(),
      chip_spec.tiles, compute_phases, supersteps,
      stats.wall_seconds > 0 ? supersteps / stats.wall_seconds : 0.0, peak_rss_kib());
  if (!tile_stats_file.empty())
    write_file_atomically(tile_stats_file, [&](std::ostream& o) { o << report::tiles_csv(stats); });

  if (saving.valid()) saving.get();  // rethrows a failed write
  // The trace file is the one simulated, or the one saved; none for a trace compiled in
  // memory and not saved.
  report::RunInfo info{compiling ? save_trace : trace_file, trace.name, identity,
                       system ? system_file : chip_opts.chip_file};
  info.meta = trace.meta;
  info.warnings = mismatches;
  if (options.record_spans) info.layers = report::layer_rows(chip_spec, stats, trace);
  if (!timeline_file.empty()) {
    const auto events = report::write_timeline(timeline_file, chip_spec, stats, trace);
    spdlog::info("timeline: {} events written to {}", events, timeline_file);
  }
  if (!out_dir.empty()) {
    // config.resolved.yaml: the chip or system, and with --run the run config's keys (run.*),
    // so that 'ipusim compare' can list every setting that differs.
    std::string resolved = system ? system->resolved.to_yaml() : chip->resolved.to_yaml();
    if (run) resolved += run->resolved.to_yaml();
    report::write_run_dir(out_dir, chip_spec, stats, info, resolved, &trace);
  }
  if (!quiet) {
    std::cout << report::summary_text(chip_spec, stats, info);
    std::cout << report::top_layers_text(chip_spec, stats, info.layers, 5);
    if (!out_dir.empty()) std::cout << "  results       " << out_dir << "/stats.json\n";
  }
  return 0;
}

}  // namespace ipusim::cli
