// SPDX-License-Identifier: Apache-2.0
// ipusim report and ipusim compare (docs/reports.md).
#include <fmt/format.h>

#include <iostream>
#include <ostream>

#include "common.hpp"
#include "ipusim/report/html.hpp"
#include "ipusim/report/run_dir.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"

namespace ipusim::cli {

int report_command(int argc, char** argv) {
  CommonOptions common;
  std::string dir, out, other;
  po::options_description desc("Options");
  add_common_options(desc, common);
  desc.add_options()("out,o", po::value(&out)->value_name("FILE"),
                     "HTML file to write (default: DIR/report.html)")(
      "compare", po::value(&other)->value_name("RUN_DIR"),
      "add a section comparing DIR with this run directory (as 'ipusim compare DIR RUN_DIR')")(
      "dir", po::value(&dir)->value_name("DIR"), "run directory or sweep directory");
  po::positional_options_description pos;
  pos.add("dir", 1);
  parse("report", argc, argv, desc, &pos);
  if (common.help) {
    print_help("ipusim report RUN_DIR [--out FILE] [--compare RUN_DIR]",
               "Writes one self-contained HTML page (inline SVG charts, no network access) for a\n"
               "run directory written by 'ipusim run --out DIR': summary (system, workload, step\n"
               "time, throughput, time to train), the time split, per-tile memory and compute\n"
               "heat maps per IPU with the worst tiles, top compute sets and exchanges and the\n"
               "longest supersteps. For a sweep directory (one holding sweep.json from\n"
               "'ipusim sweep'), draws throughput and scaling efficiency against the IPU count\n"
               "per workload and lists every point, failed ones with their error\n"
               "(docs/reports.md). The file is written atomically.",
               desc);
    return 0;
  }
  apply_log_level(common.log_level);
  if (dir.empty()) throw UsageError("ipusim report: missing RUN_DIR (see 'ipusim report --help')");
  if (out.empty()) out = dir + "/report.html";
  std::string html;
  if (report::is_sweep_dir(dir)) {
    if (!other.empty())
      throw UsageError("--compare: works on run directories, not on a sweep directory");
    html = report::sweep_html_report(dir);
  } else {
    const report::RunDir run = report::load_run_dir(dir);
    if (other.empty()) {
      html = report::html_report(run);
    } else {
      const report::RunDir b = report::load_run_dir(other);
      html = report::html_report(run, &b);
    }
  }
  write_file_atomically(out, [&](std::ostream& o) { o << html; });
  std::cout << out << "\n";
  return 0;
}

int compare_command(int argc, char** argv) {
  CommonOptions common;
  std::vector<std::string> dirs;
  std::size_t top = 25;
  po::options_description desc("Options");
  add_common_options(desc, common);
  desc.add_options()("top", unsigned_value(&top)->value_name("N")->default_value(25),
                     "show the N stats that moved most (by relative change)")(
      "dirs", po::value(&dirs)->composing()->value_name("RUN_DIR"), "the two run directories");
  po::positional_options_description pos;
  pos.add("dirs", 2);
  parse("compare", argc, argv, desc, &pos);
  if (common.help) {
    print_help("ipusim compare RUN_A RUN_B [--top N]",
               "Prints the differences between two run directories ('ipusim run --out DIR'):\n"
               "first the keys of config.resolved.yaml that differ, then the numeric fields of\n"
               "stats.json that moved most (largest relative change first) with old (A), new\n"
               "(B), delta and percent. 'ipusim report RUN_A --compare RUN_B' puts the same\n"
               "into the HTML report.",
               desc);
    return 0;
  }
  apply_log_level(common.log_level);
  if (dirs.size() != 2)
    throw UsageError(fmt::format(
        "ipusim compare: expected two run directories, found {} (see 'ipusim compare --help')",
        dirs.size()));
  const report::RunDir a = report::load_run_dir(dirs[0]);
  const report::RunDir b = report::load_run_dir(dirs[1]);
  std::cout << report::comparison_text(a, b, report::compare_runs(a, b), top);
  return 0;
}

}  // namespace ipusim::cli
