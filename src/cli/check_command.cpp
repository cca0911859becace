// SPDX-License-Identifier: Apache-2.0
// ipusim check: parses and checks its options into a regression::CheckRequest, which
// regression::check() carries out (src/regression/check.cpp, docs/regression.md).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "common.hpp"
#include "ipusim/config/config.hpp"
#include "ipusim/regression/check.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::cli {

int check_command(int argc, char** argv) {
  CommonOptions common;
  regression::CheckRequest r;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  r.jobs = cores;
  po::options_description desc("Options");
  add_common_options(desc, common);
  bool no_plan_cache = false;
  add_plan_cache_option(desc, no_plan_cache);
  desc.add_options()("suite", po::value(&r.suite)->value_name("MANIFEST"),
                     "the suite manifest (tests/regression/suite.yaml)")(
      "filter", po::value(&r.filters)->composing()->value_name("PATTERN"),
      "run only cases whose name matches the glob PATTERN, e.g. 'matmul/*' (repeatable)")(
      "junit", po::value(&r.junit)->value_name("FILE"),
      "also write the results as JUnit XML to FILE")(
      "update", po::bool_switch(&r.update),
      "rewrite the goldens of the selected cases with the new results (prints the same diff)")(
      "jobs,j", unsigned_value(&r.jobs)->default_value(cores)->value_name("N"),
      "cases run in parallel (default: the number of cores)")(
      "set", po::value(&r.overrides)->composing()->value_name("KEY=VALUE"),
      "override a config key in every case, e.g. --set chip.sync.internal_latency=91cycles "
      "(repeatable; chip.* keys apply to every case, machine.*, fabric.* and system.* keys to "
      "system cases, run.* keys to compile cases)")(
      "list", po::bool_switch(&r.list), "print the selected cases and what each runs, then exit")(
      "work-dir", po::value(&r.work_dir)->value_name("DIR"),
      "keep each case's trace, logs and stats.json in DIR (default: a temporary folder, removed)")(
      "verbose,v", po::bool_switch(&r.verbose), "print one line per case");
  parse("check", argc, argv, desc);
  if (common.help) {
    print_help(
        "ipusim check --suite MANIFEST [--filter PATTERN] [--junit FILE] [--update] [--jobs N]",
        "Runs a regression suite: each case (a reference kernel, a trace or a compiled\n"
        "training step, on a chip or a system, with overrides) in its own ipusim\n"
        "processes, then compares the named stats.json fields with the case's golden\n"
        "file under the tolerances of the manifest (exact by default). Prints a table\n"
        "of every field that moved (old, new, delta, delta%)\n"
        "and ends with 'check: N passed, N failed'. Exits 0 if every case passed, 5 if a\n"
        "case moved beyond its tolerance, has no golden or could not run, 3 on a bad\n"
        "manifest. --update rewrites the goldens instead and prints the same diff.\n"
        "See docs/regression.md.",
        desc);
    return 0;
  }
  apply_log_level(common.log_level);
  apply_plan_cache(no_plan_cache);
  if (r.suite.empty())
    throw UsageError("ipusim check: missing --suite MANIFEST (see 'ipusim check --help')");
  if (r.jobs < 1 || r.jobs > 256)
    throw UsageError(fmt::format("--jobs: expected 1 to 256, found {}", r.jobs));
  for (const auto& s : r.overrides)
    if (!config::parse_override(s)) throw UsageError("--set: " + config::override_form_error(s));

  const regression::CheckResult result = regression::check(r, std::cout, std::cerr);
  return result.exit_code();
}

}  // namespace ipusim::cli
