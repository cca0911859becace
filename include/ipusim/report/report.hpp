// SPDX-License-Identifier: Apache-2.0
// Formatting of measurements: stats.json (hierarchical, every value with its unit), the short
// human summary printed on stdout, and the run directory. Collection lives in model/.
#pragma once

#include <string>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/model/run_stats.hpp"

namespace ipusim::report {

struct RunInfo {
  std::string trace_file;
  std::string trace_name;
  std::string trace_identity;  // trace::identity()
  std::string chip_file;
};

std::string stats_json(const ChipSpec& chip, const RunStats& stats, const RunInfo& info);
std::string summary_text(const ChipSpec& chip, const RunStats& stats, const RunInfo& info);

// Writes stats.json, config.resolved.yaml and trace.id into `dir` (created if missing), each
// file atomically.
void write_run_dir(const std::string& dir, const ChipSpec& chip, const RunStats& stats,
                   const RunInfo& info, const std::string& resolved_config_yaml);

}  // namespace ipusim::report
