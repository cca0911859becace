// SPDX-License-Identifier: Apache-2.0
// `ipusim report`: one self-contained HTML page (inline CSS, inline SVG charts generated here,
// a few lines of inline script; nothing fetched from the network) for a run directory or a
// sweep directory (docs/reports.md). Element ids the tests and users can rely on:
//   summary, chart-time-split, heatmap-memory-ipuN, heatmap-compute-ipuN, worst-tiles-ipuN,
//   chart-top-compute-sets, chart-top-exchanges, chart-supersteps, compare (with --compare),
//   chart-sweep-throughput-N, chart-sweep-efficiency-N (per workload N), chart-sweep-breakdown,
//   sweep-points; js-errors collects script
//   errors and <body data-ready="1"> is set once the script has run.
#pragma once

#include <string>

#include "ipusim/report/run_dir.hpp"

namespace ipusim::report {

std::string html_report(const RunDir& run, const RunDir* compare = nullptr);

// True if `dir` holds a sweep.json (the sweep contract in docs/reports.md).
bool is_sweep_dir(const std::string& dir);
// Reads DIR/sweep.json; throws Error naming the key path, expected and found on bad input.
// Also writes each point's own report to DIR/<run_dir>/report.html (linked from the page).
std::string sweep_html_report(const std::string& dir);

}  // namespace ipusim::report
