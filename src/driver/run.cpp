// SPDX-License-Identifier: Apache-2.0
#include "ipusim/driver/run.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <time.h>

#include <cmath>
#include <future>
#include <optional>
#include <ostream>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/chip.hpp"
#include "ipusim/config/config.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/model/simulation.hpp"
#include "ipusim/report/report.hpp"
#include "ipusim/report/run_files.hpp"
#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/progress.hpp"

namespace ipusim::driver {
namespace {

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

RunStats run(const RunRequest& request, std::ostream& out, std::ostream& err) {
  const RunRequest& r = request;
  const bool compiling = !r.run_file.empty();
  const std::optional<std::uint32_t>& tile_ipu = r.timeline_tile_ipu;

  // Lock the run directory before anything else (a concurrent run into the same --out fails
  // here, not after its simulation), and create the directories of every output file now:
  // a timeline inside a new --out directory used to fail after the simulation (issue 16, H, I).
  std::optional<DirectoryLock> out_lock;
  if (!r.out_dir.empty()) out_lock.emplace(r.out_dir);
  if (!r.timeline_file.empty()) create_parent_directories(r.timeline_file);
  if (!r.tile_stats_file.empty()) create_parent_directories(r.tile_stats_file);

  // With --run, overrides go to the file they belong to (as with 'ipusim compile'), and the
  // system is the run config's unless --system names another.
  std::vector<std::string> system_overrides = r.overrides;
  std::string system_file = r.system_file;
  std::optional<compiler::LoadedRun> run;
  std::optional<compiler::ModelDef> model;
  std::string input_warning;  // --model with another input than the run config's model
  if (compiling) {
    std::vector<std::string> run_overrides;
    system_overrides.clear();
    for (const auto& o : r.overrides)
      (o.starts_with("run.") ? run_overrides : system_overrides).push_back(o);
    run = compiler::load_run(r.run_file, run_overrides);
    model = compiler::load_model(r.model_file.empty() ? run->run.model_file : r.model_file);
    if (system_file.empty()) system_file = run->run.system_file;
    if (!r.model_file.empty())
      if (auto m = compiler::input_mismatch(run->run, *model, run_overrides)) input_warning = *m;
  }

  // A system brings its own chip; an explicit --chip replaces it.
  std::optional<LoadedSystem> system;
  std::optional<LoadedChip> chip;
  if (!system_file.empty()) {
    system = load_system(system_file, system_overrides,
                         r.chip_given ? std::optional(r.chip_file) : std::nullopt);
    spdlog::info("system {} ({} IPUs) from {}", system->spec.name, system->spec.ipus(),
                 system_file);
  } else {
    chip = load_chip(r.chip_file, r.overrides);
    spdlog::info("chip {} from {}", chip->spec.name, r.chip_file);
  }
  const ChipSpec& chip_spec = system ? system->spec.chip : chip->spec;
  Progress progress("ipusim run", "phases", !r.quiet);
  // The trace's identity (a hash of its binary serialisation) is only written to the run
  // directory, so it is computed only with --out: from the bytes as they are read, from the
  // bytes of --save-trace as they are written, or else by serialising the compiled trace.
  const bool want_identity = !r.out_dir.empty();
  std::string identity;
  const trace::Trace trace = [&] {
    if (compiling) {
      progress.message(fmt::format("compiling {} ({})", model->name, run->run.name));
      // compile() checks the structure of its result.
      return compiler::compile(*model, run->run, system->spec);
    }
    progress.message("reading " + r.trace_file);
    // read_file checks the structure (check_structure) before returning.
    return trace::read_file(r.trace_file, want_identity ? &identity : nullptr);
  }();
  spdlog::info("trace {}: {} IPU program(s) x {} replica(s)", trace.name, trace.ipus.size(),
               trace.replicas);
  // A compiled trace records its target; running it elsewhere is allowed (what-if studies
  // sometimes want exactly that) but never silent.
  std::vector<std::string> mismatches =
      compiler::target_mismatches(trace, chip_spec, system ? &system->spec : nullptr);
  if (!input_warning.empty()) mismatches.insert(mismatches.begin(), input_warning);
  if (!mismatches.empty() && r.strict) {
    std::string all;
    for (const auto& m : mismatches)
      all += (all.empty() ? "" : "; ") + (compiling ? r.run_file : r.trace_file) + ": " + m;
    throw ConfigError(all + " (--strict turns these warnings into errors)");
  }
  for (const auto& m : mismatches)
    err << fmt::format("ipusim run: warning: {}: {}\n",
                       printable(compiling ? r.run_file : r.trace_file), printable(m));
  // A compiled trace is saved (--save-trace) or hashed on a second thread while the
  // simulation runs (it only reads the trace); both are done before the run directory is.
  std::future<void> saving;
  if (compiling && (!r.save_trace.empty() || want_identity)) {
    if (!r.save_trace.empty()) create_parent_directories(r.save_trace);
    saving = std::async(std::launch::async, [&] {
      if (!r.save_trace.empty())
        trace::write_file(trace, r.save_trace, trace::format_for_path(r.save_trace),
                          trace::Checked::kYes, want_identity ? &identity : nullptr);
      else
        identity = trace::identity(trace);
    });
  }

  model::ModelOptions options;
  options.engine = r.engine;
  options.origin = compiling ? (r.save_trace.empty() ? r.run_file : r.save_trace) : r.trace_file;
  options.memoise_loops = !r.full_loops;
  // Spans feed the timeline, superstep totals supersteps.csv (fast engine); each recorded only
  // when asked for.
  options.record_spans = r.engine == model::Engine::kFast && !r.timeline_file.empty();
  options.record_supersteps = r.engine == model::Engine::kFast && !r.out_dir.empty();
  if (tile_ipu) {
    const std::uint32_t ipus = trace.replicas * trace.ipus_per_replica();
    if (*tile_ipu >= ipus)
      throw UsageError(fmt::format("--timeline-tiles: IPU {} does not exist (the run has {} IPUs)",
                                   *tile_ipu, ipus));
    options.record_tiles = true;
    options.tile_ipu = *tile_ipu;
    options.tile_steps_first = r.timeline_steps_first;
    options.tile_steps_last = r.timeline_steps_last;
  }
  progress.message("building the model (costing every compute set and exchange)");
  if (progress.active())
    options.progress = [&](std::uint64_t done, std::uint64_t total) {
      progress.update(done, total);
    };
  const double cpu_start = cpu_seconds();
  RunStats stats = system ? model::simulate(system->spec, trace, options, r.all_replicas)
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
      model::engine_name(r.engine), stats.wall_seconds, engine_cpu, stats.seconds,
      stats.ipus.size(), chip_spec.tiles, compute_phases, supersteps,
      stats.wall_seconds > 0 ? supersteps / stats.wall_seconds : 0.0, peak_rss_kib());
  if (!r.tile_stats_file.empty())
    write_file_atomically(r.tile_stats_file,
                          [&](std::ostream& o) { o << report::tiles_csv(stats); });

  if (saving.valid()) saving.get();  // rethrows a failed write
  // The trace file is the one simulated, or the one saved; none for a trace compiled in
  // memory and not saved.
  report::RunInfo info{compiling ? r.save_trace : r.trace_file, trace.name, identity,
                       system ? system_file : r.chip_file};
  info.meta = trace.meta;
  info.warnings = mismatches;
  if (!r.model_file.empty()) info.model_file = r.model_file;
  for (const auto& o : r.overrides)
    if (const auto parsed = config::parse_override(o))  // all were parsed when loading
      info.overrides.push_back(parsed->key + "=" + parsed->value);
  // Per-layer time (both engines: it needs only the trace and each phase's totals).
  if (!r.timeline_file.empty() || !r.out_dir.empty()) {
    info.live_memory = report::live_memories(stats, trace);
    info.layers = report::layer_rows(chip_spec, stats, trace, info.live_memory);
  }
  if (!r.timeline_file.empty()) {
    report::TimelineOptions timeline;
    timeline.detail = r.timeline_detail;
    if (r.timeline_window) {
      // Cycles of the tile clock: the window's ends rounded outwards.
      const double hz = chip_spec.clock.hz;
      timeline.first_cycle =
          static_cast<std::uint64_t>(std::floor(r.timeline_window->first.seconds * hz));
      timeline.last_cycle =
          static_cast<std::uint64_t>(std::ceil(r.timeline_window->second.seconds * hz));
    }
    const auto events = report::write_timeline(r.timeline_file, chip_spec, stats, trace, timeline);
    spdlog::info("timeline: {} events written to {}", events, r.timeline_file);
  }
  if (!r.out_dir.empty()) {
    // config.resolved.yaml: the chip or system, and with --run the run config's keys (run.*),
    // so that 'ipusim compare' can list every setting that differs.
    std::string resolved = system ? system->resolved.to_yaml() : chip->resolved.to_yaml();
    if (run) resolved += run->resolved.to_yaml();
    report::write_run_dir(r.out_dir, chip_spec, stats, info, resolved, &trace);
  }
  if (!r.quiet) {
    out << report::summary_text(chip_spec, stats, info);
    out << report::top_layers_text(chip_spec, stats, info.layers, 5);
    if (!r.out_dir.empty()) out << "  results       " << r.out_dir << "/stats.json\n";
  }
  return stats;
}

}  // namespace ipusim::driver
