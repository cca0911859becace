// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <optional>

#include "common.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/model/simulation.hpp"
#include "ipusim/report/report.hpp"
#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"

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

}  // namespace

int run_command(int argc, char** argv) {
  CommonOptions common;
  ChipOptions chip_opts;
  std::string out_dir;
  std::string trace_file;
  std::string system_file;
  bool full_loops = false;
  bool all_replicas = false;
  bool quiet = false;
  po::options_description desc("Options");
  add_common_options(desc, common);
  add_chip_options(desc, chip_opts);
  desc.add_options()(
      "system", po::value(&system_file)->value_name("FILE"),
      "system config (configs/systems/*.yaml): runs the trace's replicas on that system's IPUs, "
      "links and gateways; --chip then replaces the system's chip")(
      "all-replicas", po::bool_switch(&all_replicas),
      "simulate every replica in full instead of replica 0 only (identical results for "
      "symmetric programs, slower)")(
      "out,o", po::value(&out_dir)->value_name("DIR"),
                     "write stats.json, config.resolved.yaml and trace.id into DIR")(
      "full-loops", po::bool_switch(&full_loops),
      "simulate every iteration of repeat loops instead of timing the body once")(
      "quiet,q", po::bool_switch(&quiet), "do not print the summary")(
      "trace", po::value(&trace_file)->value_name("TRACE"), "program trace (.trace text or .itb binary)");
  po::positional_options_description pos;
  pos.add("trace", 1);
  parse("run", argc, argv, desc, &pos);
  if (common.help) {
    print_help("ipusim run [options] TRACE",
               "Simulates a compiled BSP program trace on the SystemC model of a chip (--chip)\n"
               "or of a whole system (--system: IPUs, IPU-Links, GW-Links, gateways) and\n"
               "prints total cycles, the split over compute, on-chip sync and exchange, host\n"
               "and streaming I/O, external sync, inter-IPU copies and collectives, the\n"
               "achieved FLOP rate and per-tile balance and memory. With --out, writes\n"
               "stats.json (every value with its unit), config.resolved.yaml and trace.id;\n"
               "files are written whole or not at all.",
               desc);
    return 0;
  }
  apply_log_level(common.log_level);
  if (trace_file.empty()) throw UsageError("ipusim run: missing TRACE (see 'ipusim run --help')");

  // A system brings its own chip; an explicit --chip replaces it.
  std::optional<LoadedSystem> system;
  std::optional<LoadedChip> chip;
  if (!system_file.empty()) {
    const bool chip_given = vm_has_chip(argc, argv);
    system = load_system(system_file, chip_opts.overrides,
                         chip_given ? std::optional(chip_opts.chip_file) : std::nullopt);
    spdlog::info("system {} ({} IPUs) from {}", system->spec.name, system->spec.ipus(), system_file);
  } else {
    chip = load_chip_options(chip_opts);
    spdlog::info("chip {} from {}", chip->spec.name, chip_opts.chip_file);
  }
  const ChipSpec& chip_spec = system ? system->spec.chip : chip->spec;
  const trace::Trace trace = trace::read_file(trace_file);
  trace::check_structure(trace, trace_file);
  spdlog::info("trace {}: {} IPU program(s) x {} replica(s)", trace.name, trace.ipus.size(),
               trace.replicas);

  model::ModelOptions options;
  options.memoise_loops = !full_loops;
  const RunStats stats = system ? model::simulate(system->spec, trace, options, all_replicas)
                                : model::simulate(chip_spec, trace, options);
  spdlog::info("simulated {} cycles in {:.3f} s of wall time", stats.cycles, stats.wall_seconds);

  report::RunInfo info{trace_file, trace.name, trace::identity(trace),
                       system ? system_file : chip_opts.chip_file};
  info.meta = trace.meta;
  if (!out_dir.empty())
    report::write_run_dir(out_dir, chip_spec, stats, info,
                          system ? system->resolved.to_yaml() : chip->resolved.to_yaml());
  if (!quiet) {
    std::cout << report::summary_text(chip_spec, stats, info);
    if (!out_dir.empty()) std::cout << "  results       " << out_dir << "/stats.json\n";
  }
  return 0;
}

}  // namespace ipusim::cli
