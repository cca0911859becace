// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "common.hpp"
#include "ipusim/model/simulation.hpp"
#include "ipusim/report/report.hpp"
#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::cli {

int run_command(int argc, char** argv) {
  CommonOptions common;
  ChipOptions chip_opts;
  std::string out_dir;
  std::string trace_file;
  bool full_loops = false;
  bool quiet = false;
  po::options_description desc("Options");
  add_common_options(desc, common);
  add_chip_options(desc, chip_opts);
  desc.add_options()("out,o", po::value(&out_dir)->value_name("DIR"),
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
               "Simulates a compiled BSP program trace on the SystemC model of the chip and\n"
               "prints total cycles, the compute / sync / exchange / host split, the achieved\n"
               "FLOP rate and per-tile balance and memory. With --out, writes stats.json (every\n"
               "value with its unit), config.resolved.yaml and trace.id; files are written\n"
               "whole or not at all.",
               desc);
    return 0;
  }
  apply_log_level(common.log_level);
  if (trace_file.empty()) throw UsageError("ipusim run: missing TRACE (see 'ipusim run --help')");

  const LoadedChip chip = load_chip_options(chip_opts);
  spdlog::info("chip {} from {}", chip.spec.name, chip_opts.chip_file);
  const trace::Trace trace = trace::read_file(trace_file);
  trace::check_structure(trace, trace_file);
  spdlog::info("trace {}: {} IPU program(s)", trace.name, trace.ipus.size());

  model::ModelOptions options;
  options.memoise_loops = !full_loops;
  const RunStats stats = model::simulate(chip.spec, trace, options);
  spdlog::info("simulated {} cycles in {:.3f} s of wall time", stats.cycles, stats.wall_seconds);

  report::RunInfo info{trace_file, trace.name, trace::identity(trace), chip_opts.chip_file};
  if (!out_dir.empty())
    report::write_run_dir(out_dir, chip.spec, stats, info, chip.resolved.to_yaml());
  if (!quiet) {
    std::cout << report::summary_text(chip.spec, stats, info);
    if (!out_dir.empty()) std::cout << "  results    " << out_dir << "/stats.json\n";
  }
  return 0;
}

}  // namespace ipusim::cli
