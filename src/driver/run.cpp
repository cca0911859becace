// SPDX-License-Identifier: Apache-2.0
#include "ipusim/driver/run.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <time.h>

#include <chrono>
#include <cmath>
#include <future>
#include <optional>
#include <ostream>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/chip.hpp"
#include "ipusim/config/config.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/driver/unused_keys.hpp"
#include "ipusim/model/simulation.hpp"
#include "ipusim/plan/cache.hpp"
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

// "n=20 c=64 h=56 w=56 k=64 kernel=3 stride=1 groups=1" (a conv) or "m=.. k=.. n=.. groups=.."
// (a matmul, as IpuBuilder::matmul plans it: a 1x1 conv of one image one column wide whose
// height is its rows; a conv's weight gradient is one).
std::string shape_text(const plan::ConvArgs& a) {
  if (a.matmul_shaped())
    return fmt::format("m={} k={} n={} groups={}", a.height, a.in_chans, a.out_chans, a.groups);
  return fmt::format("n={} c={} h={} w={} k={} kernel={} stride={} groups={}", a.batch, a.in_chans,
                     a.height, a.width, a.out_chans, plan::to_string(a.kernel),
                     plan::to_string(a.stride), a.groups);
}

}  // namespace

std::vector<report::PlanRow> plan_rows(const ChipSpec& chip, const RunStats& stats,
                                       const trace::Trace& trace,
                                       const std::vector<compiler::PlannedConv>& plans) {
  // The first simulated IPU of each program (replica 0's, or the lowest replica simulated).
  std::vector<const IpuRunStats*> ran(trace.ipus.size(), nullptr);
  for (const auto& ipu : stats.ipus)
    if (ipu.program < ran.size() && (!ran[ipu.program] || ipu.replica < ran[ipu.program]->replica))
      ran[ipu.program] = &ipu;
  // Cycles of one execution of the items, exact to the cycle (each item's mean over its
  // executions, in the program's integer cycles, times how often one execution runs it).
  const auto cycles_of = [&](const IpuRunStats& ipu, const compiler::PlannedConv::Items& items) {
    double total = static_cast<double>(items.syncs * chip.sync.internal_latency.count);
    const auto add = [&](const std::vector<NamedPhase>& phases, std::uint32_t index,
                         std::uint64_t times) {
      if (index >= phases.size() || phases[index].executions == 0) return;
      total += static_cast<double>(phases[index].cycles) /
               static_cast<double>(phases[index].executions) * static_cast<double>(times);
    };
    for (const auto& [index, times] : items.compute_sets) add(ipu.compute_sets, index, times);
    for (const auto& [index, times] : items.exchanges) add(ipu.exchanges, index, times);
    return static_cast<std::uint64_t>(std::llround(total));
  };
  // Bytes each exchange of a program moves, as the engine costed it.
  const auto bytes_of = [&](const IpuRunStats& ipu, std::uint32_t index) {
    return index < ipu.exchanges.size() ? ipu.exchanges[index].bytes : std::uint64_t{0};
  };
  std::vector<report::PlanRow> rows;
  for (const auto& p : plans) {
    if (p.ipu >= ran.size() || !ran[p.ipu]) continue;
    const IpuRunStats& ipu = *ran[p.ipu];
    const trace::IpuProgram& program = trace.ipus[p.ipu];
    report::PlanRow r;
    r.ipu = ipu.ipu;
    r.pass = trace::kPassNames[static_cast<std::size_t>(p.provenance.pass)];
    r.op = trace::kOpKindNames[static_cast<std::size_t>(p.provenance.op)];
    r.name = p.name;
    r.shape = shape_text(p.args);
    r.dtype = trace::kDTypeNames[static_cast<std::size_t>(p.args.dtype)];
    r.partials = trace::kDTypeNames[static_cast<std::size_t>(plan::partials_of(p.args))];
    r.vertex = trace::codelet_spec(plan::plan_codelet(p.args, p.plan)).name;
    r.tiles = p.plan.tiles_used();
    r.group_split = p.plan.group_split;
    r.row_split = p.plan.row_split;
    r.out_split = p.plan.out_split;
    r.in_split = p.plan.in_split;
    r.serial_in = p.plan.serial_in;
    r.serial_out = p.plan.serial_out;
    r.weight_height = p.plan.weight_height;
    r.swapped = p.plan.swapped;
    r.expanded = plan::expansion_name(p.plan);
    r.joint = p.plan.joint;
    r.available_memory = p.available_memory;
    r.budget_bytes = p.budget_bytes;
    r.temporary_bytes = p.plan.bytes_per_tile.count;
    for (const auto& [index, times] : p.rearrangement.exchanges)
      if (index < program.exchanges.size()) r.rearranged_bytes += bytes_of(ipu, index) * times;
    r.estimated_cycles = p.plan.estimated_cycles.count;
    r.rearrangement_cycles = cycles_of(ipu, p.rearrangement);
    r.simulated_cycles = cycles_of(ipu, p.conv) + r.rearrangement_cycles;
    const std::vector<std::string> layers = p.provenance.layers.empty()
                                                ? std::vector<std::string>{"(" + r.pass + ")"}
                                                : p.provenance.layers;
    for (const auto& layer : layers) {
      r.layer = layer;
      rows.push_back(r);
    }
  }
  return rows;
}

RunStats run(const RunRequest& request, std::ostream& out, std::ostream& err) {
  RunRequest r = request;
  // --model with no --run: a run chosen for the model on the system (compiler::choose_run).
  const bool choosing = r.run_file.empty() && r.trace_file.empty() && !r.model_file.empty();
  if (choosing && r.system_file.empty())
    throw UsageError(
        "--model without --run: give the system it runs on (--system "
        "configs/systems/pod16.yaml): the run is chosen for it");
  const bool compiling = !r.run_file.empty() || choosing;
  if (r.fit && !compiling)
    throw UsageError("--fit searches what a generation run compiles to: give it --run RUN.yaml");
  const std::optional<std::uint32_t>& tile_ipu = r.timeline_tile_ipu;
  // Where a run's wall time goes, logged (info) at the end: loading, compiling or reading the
  // trace, the model, and the reports (docs/performance.md "A plan cache").
  using Clock = std::chrono::steady_clock;
  const Clock::time_point started = Clock::now();
  Clock::time_point loaded, translated, modelled;
  const auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };

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
  std::optional<LoadedSystem> system;
  std::optional<LoadedChip> chip;
  std::vector<std::string> chosen;  // what choose_run chose, and why
  std::string input_warning;        // --model with another input than the run config's model
  if (compiling) {
    std::vector<std::string> run_overrides;
    system_overrides.clear();
    for (const auto& o : r.overrides)
      (o.starts_with("run.") ? run_overrides : system_overrides).push_back(o);
    if (choosing) {
      model = compiler::load_model(r.model_file);
      system = load_system(system_file, system_overrides,
                           r.chip_given ? std::optional(r.chip_file) : std::nullopt);
      Progress choosing_progress("ipusim run", "runs", !r.quiet);
      choosing_progress.message(
          fmt::format("choosing a run for {} on {}", model->name, system->spec.name));
      run = compiler::choose_run(*model, r.model_file, system_file, system->spec, run_overrides,
                                 chosen);
      r.run_file = run->run.file;
    } else {
      run = compiler::load_run(r.run_file, run_overrides);
      model = compiler::load_model(r.model_file.empty() ? run->run.model_file : r.model_file);
      if (system_file.empty()) system_file = run->run.system_file;
      if (!r.model_file.empty())
        if (auto m = compiler::input_mismatch(run->run, *model, run_overrides)) input_warning = *m;
    }
  }

  // A system brings its own chip; an explicit --chip replaces it. (A run chosen for its
  // system has loaded it.)
  if (!system_file.empty()) {
    if (!system)
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
  std::vector<compiler::PlannedConv> plans;  // what the compiler planned (compiling only)
  loaded = Clock::now();
  const trace::Trace trace = [&] {
    if (compiling) {
      progress.message(fmt::format("compiling {} ({})", model->name, run->run.name));
      // The model checks each program's memory as it builds it, and the structure is checked
      // below while it does (compiler::CompileChecks).
      return compiler::compile(*model, run->run, system->spec, &plans,
                               {.memory = false, .structure = false});
    }
    progress.message("reading " + r.trace_file);
    // read_file checks the structure (check_structure) before returning.
    return trace::read_file(r.trace_file, want_identity ? &identity : nullptr);
  }();
  // --fit: the largest micro-batch and context a generation run fits (compiled at other sizes).
  std::vector<std::pair<std::string, std::string>> fit_meta;
  if (r.fit) {
    if (run->run.new_tokens == 0)
      throw UsageError(fmt::format(
          "--fit applies to a text generation run (run.new_tokens above 0); {} generates nothing",
          r.run_file));
    progress.message("finding the largest micro-batch and context that fit");
    const compiler::GenerationFit fit = compiler::generation_fit(*model, run->run, system->spec);
    fit_meta = {{"generation.largest_micro_batch", std::to_string(fit.micro_batch)},
                {"generation.largest_context", std::to_string(fit.context)},
                {"generation.fit_limit_micro_batch", std::to_string(fit.micro_batch_limit)},
                {"generation.fit_limit_context", std::to_string(fit.context_limit)}};
  }
  translated = Clock::now();
  spdlog::info("trace {}: {} IPU program(s) x {} replica(s)", trace.name, trace.ipus.size(),
               trace.replicas);
  if (compiling) plan::log_plan_store_use();
  // A compiled trace records its target; running it elsewhere is allowed (what-if studies
  // sometimes want exactly that) but never silent.
  std::vector<std::string> mismatches =
      compiler::target_mismatches(trace, chip_spec, system ? &system->spec : nullptr);
  if (!input_warning.empty()) mismatches.insert(mismatches.begin(), input_warning);
  const std::vector<std::string>& unused = system ? system->warnings : chip->warnings;
  mismatches.insert(mismatches.begin(), unused.begin(), unused.end());
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
  // A compiled trace's structure is checked on a second thread while the model is built (it
  // only reads the trace); the simulation starts once the check has passed.
  std::future<void> structure;
  if (compiling) {
    structure =
        std::async(std::launch::async, [&] { trace::check_structure(trace, run->run.name); });
    options.before_run = [&] { structure.get(); };
  }
  options.engine = r.engine;
  options.origin = compiling ? (r.save_trace.empty() ? r.run_file : r.save_trace) : r.trace_file;
  options.memoise_loops = !r.full_loops;
  options.fast_forward = !r.no_fast_forward;  // off with full loops or a timeline too
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
  modelled = Clock::now();
  if (tile_ipu) {
    bool simulated = false;
    for (const auto& ipu : stats.ipus) simulated = simulated || ipu.ipu == *tile_ipu;
    if (!simulated)
      throw UsageError(fmt::format(
          "--timeline-tiles: IPU {} was not simulated (replica symmetry simulates replica 0 "
          "only; pick one of its IPUs or add --all-replicas)",
          *tile_ipu));
  }
  // --set keys whose resource the run did not use (no IPU-Link traffic, no float AMP vertex).
  for (const std::string& m :
       unused_by_run(r.overrides, chip_spec, system ? &system->spec : nullptr, trace, stats)) {
    if (r.strict)
      throw ConfigError(fmt::format("{}: {} (--strict turns these warnings into errors)",
                                    compiling ? r.run_file : r.trace_file, m));
    err << fmt::format("ipusim run: warning: {}: {}\n",
                       printable(compiling ? r.run_file : r.trace_file), printable(m));
    mismatches.push_back(m);
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
  info.meta.insert(info.meta.end(), fit_meta.begin(), fit_meta.end());
  info.warnings = mismatches;
  if (!r.model_file.empty()) info.model_file = r.model_file;
  info.chosen = chosen;
  if (model) info.model_notes = model->notes;
  for (const auto& o : r.overrides)
    if (const auto parsed = config::parse_override(o))  // all were parsed when loading
      info.overrides.push_back(parsed->key + "=" + parsed->value);
  // Per-layer time (both engines: it needs only the trace and each phase's totals), also for
  // the summary's pipeline lines (report::pipeline_analysis).
  // The summary reads no memory of them: live memory only for the files.
  const bool files = !r.timeline_file.empty() || !r.out_dir.empty();
  const bool pipelined = trace::find_meta(trace.meta, "pipeline.stage_ipus") != nullptr;
  if (files) info.live_memory = report::live_memories(stats, trace);
  if (files || (pipelined && !r.quiet))
    info.layers = report::layer_rows(chip_spec, stats, trace, info.live_memory);
  if (!r.out_dir.empty()) info.plans = plan_rows(chip_spec, stats, trace, plans);
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
    report::write_run_dir(r.out_dir, chip_spec, stats, info, resolved);
  }
  if (!r.quiet) {
    out << report::summary_text(chip_spec, stats, info);
    out << report::top_layers_text(chip_spec, stats, info.layers, 5);
    if (!r.out_dir.empty()) out << "  results       " << r.out_dir << "/stats.json\n";
  }
  spdlog::info("timing wall_ms: configs={:.1f} {}={:.1f} model={:.1f} outputs={:.1f}",
               ms(started, loaded), compiling ? "compile" : "read", ms(loaded, translated),
               ms(translated, modelled), ms(modelled, Clock::now()));
  return stats;
}

}  // namespace ipusim::driver
