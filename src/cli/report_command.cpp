// SPDX-License-Identifier: Apache-2.0
// ipusim report and ipusim compare (docs/reports.md).
#include <fmt/format.h>

#include <iostream>
#include <ostream>

#include "common.hpp"
#include "ipusim/report/compare.hpp"
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
      "add a section comparing DIR against this run directory, right after the summary and "
      "linked from it: deltas are DIR minus RUN_DIR, as 'ipusim compare RUN_DIR DIR' gives them")(
      "dir", po::value(&dir)->value_name("DIR"), "run directory or sweep directory");
  po::positional_options_description pos;
  pos.add("dir", 1);
  parse("report", argc, argv, desc, &pos);
  if (common.help) {
    print_help("ipusim report RUN_DIR [--out FILE] [--compare RUN_DIR]",
               "Writes one self-contained HTML page (inline SVG charts, no network access) for a\n"
               "run directory written by 'ipusim run --out DIR', in this order: the summary\n"
               "(system, workload, step time, throughput, time to train), with\n"
               "--compare the comparison, where the time goes (per phase kind and IPU), the\n"
               "time by layer and pass (layers.csv), the plan of each conv and matmul\n"
               "(plan.csv), a roofline of the layers, a BSP timeline of one step, per-tile\n"
               "memory and compute heat maps with the worst tiles, memory over the program,\n"
               "the top compute sets and exchanges and the longest supersteps, each named by\n"
               "the layer and pass it serves. For a sweep directory (one holding sweep.json\n"
               "from 'ipusim sweep'), draws throughput (and scaling efficiency over IPUs)\n"
               "against the IPU count or the first numeric swept key per workload, where each\n"
               "point's time goes, and lists every point, failed ones with their error\n"
               "(docs/reports.md). Writes only the HTML file, atomically; sections whose\n"
               "input file is missing from the directory are left out.",
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
  std::size_t top = 25, layers = 10;
  bool json = false;
  po::options_description desc("Options");
  add_common_options(desc, common);
  desc.add_options()("top", unsigned_value(&top)->value_name("N")->default_value(25),
                     "show the N stats that moved most (by relative change)")(
      "layers", unsigned_value(&layers)->value_name("N")->default_value(10),
      "show the N layer rows whose time moved most")("json", po::bool_switch(&json),
                                                     "print one JSON document instead of text")(
      "dirs", po::value(&dirs)->composing()->value_name("RUN_DIR"), "the two run directories");
  po::positional_options_description pos;
  pos.add("dirs", 2);
  parse("compare", argc, argv, desc, &pos);
  if (common.help) {
    print_help("ipusim compare RUN_A RUN_B [--top N] [--layers N] [--json]",
               "Explains the differences between two run directories ('ipusim run --out DIR'):\n"
               "the headline (step time, throughput, time to train, peak tile memory: A, B,\n"
               "delta, percent and direction), the step-time change attributed to phase kinds\n"
               "and to layers (layers.csv) of the IPU that sets the step time, adding up to the\n"
               "change, the plan changes of those layers' convs and matmuls (plan.csv: tiles,\n"
               "split, vertices), the settings that differ (config.resolved.yaml: chip, system\n"
               "and run keys; the trace), and the stats.json fields that moved most (a layer's\n"
               "FLOPs only when the IPU's total moved, not when they moved between layers that\n"
               "share a compute set). Writes nothing; --json prints the\n"
               "same as one JSON document (docs/reports.md). 'ipusim report RUN_B --compare\n"
               "RUN_A' puts the same into RUN_B's HTML report.",
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
  const report::ExplainedComparison e = report::explain_comparison(a, b);
  std::cout << (json ? report::explained_json(e, top, layers)
                     : report::explained_text(e, top, layers));
  return 0;
}

}  // namespace ipusim::cli
