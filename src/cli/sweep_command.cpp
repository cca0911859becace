// SPDX-License-Identifier: Apache-2.0
// ipusim sweep: parses and checks its options into a sweep::SweepRequest, which
// sweep::run_sweep() carries out (src/sweep/run.cpp, docs/sweeps.md).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "common.hpp"
#include "ipusim/sweep/run.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::cli {

int sweep_command(int argc, char** argv) {
  CommonOptions common;
  sweep::SweepRequest r;
  bool quiet = false;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  r.jobs = cores;
  po::options_description desc("Options");
  add_common_options(desc, common);
  bool no_plan_cache = false;
  add_plan_cache_option(desc, no_plan_cache);
  desc.add_options()(
      "out,o", po::value(&r.out_dir)->value_name("DIR"),
      "write sweep.csv, sweep.json and each point's run directory (points/<id>/) into DIR; "
      "points already finished there with the same inputs are not run again")(
      "jobs,j", unsigned_value(&r.jobs)->default_value(cores)->value_name("N"),
      "points run in parallel (default: the number of cores); under mpirun each rank but rank 0 "
      "runs one point at a time instead")(
      "max-points",
      unsigned_value(&r.max_points)->default_value(sweep::kDefaultMaxPoints)->value_name("N"),
      "refuse a spec that expands to more than N points (counted before expanding)")(
      "list", po::bool_switch(&r.list),
      "print the expanded points (index, id, overrides) and exit")(
      "quiet,q", po::bool_switch(&quiet),
      "no progress line on stderr (it is shown only on a terminal anyway)")(
      "spec", po::value(&r.spec_file)->value_name("SPEC"), "the sweep spec (YAML, docs/sweeps.md)");
  po::positional_options_description pos;
  pos.add("spec", 1);
  parse("sweep", argc, argv, desc, &pos);
  if (common.help) {
    print_help(
        "ipusim sweep SPEC --out DIR [--jobs N]\n       mpirun -np N ipusim sweep SPEC --out DIR",
        "Runs every point of a sweep spec: a base run (a reference kernel, or a training\n"
        "step compiled from a run config) under each combination of the spec's axes\n"
        "(config keys as with --set, the system, chip, run or model file, kernel\n"
        "arguments), as a product or zipped, minus excluded points. Each point runs in\n"
        "its own ipusim processes ('kernel' then 'run --out', or one 'run --run --out'\n"
        "that compiles the training step in memory) and gets its own run directory\n"
        "DIR/points/<id>, where <id> is a hash of all its resolved\n"
        "inputs: re-running skips finished points and runs failed or changed ones.\n"
        "Writes DIR/sweep.csv and DIR/sweep.json, one row per point in spec order, the\n"
        "same bytes whatever --jobs or the MPI rank count. Under mpirun, rank 0 hands\n"
        "points to the other ranks (largest first) and writes the files.\n"
        "Exits 0 if every point ran, 5 if some failed (recorded with their error), 3 on\n"
        "a bad spec, 130 when interrupted (finished points are kept). See docs/sweeps.md.",
        desc);
    return 0;
  }
  apply_log_level(common.log_level);
  apply_plan_cache(no_plan_cache);
  if (r.spec_file.empty())
    throw UsageError("ipusim sweep: missing SPEC (see 'ipusim sweep --help')");
  if (r.jobs < 1 || r.jobs > 256)
    throw UsageError(fmt::format("--jobs: expected 1 to 256, found {}", r.jobs));

  r.progress = !quiet && ::isatty(STDERR_FILENO);
  return sweep::run_sweep(r, std::cout, std::cerr).exit_code();
}

}  // namespace ipusim::cli
