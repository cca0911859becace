// SPDX-License-Identifier: Apache-2.0
// Comparing a case's fresh results with its golden, field by field, and formatting what moved.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ipusim/regression/golden.hpp"
#include "ipusim/regression/manifest.hpp"
#include "ipusim/util/json_reader.hpp"

namespace ipusim::regression {

// The compared fields of `c` read from a parsed stats.json, in the case's field order. Throws
// Error naming the first field that stats.json lacks.
std::vector<std::pair<std::string, JsonNumber>> extract_fields(const Case& c,
                                                               const JsonValue& stats,
                                                               const std::string& stats_origin);

struct FieldChange {
  std::string field;
  std::optional<JsonNumber> old_value;  // nullopt: the golden lacks the field
  JsonNumber new_value;
  Tolerance tolerance;
  bool within_tolerance = false;
};

struct CaseOutcome {
  enum class Status { kPassed, kFailed, kError };
  std::string name;
  Status status = Status::kPassed;
  std::vector<FieldChange> changes;   // every compared field whose value differs
  std::vector<std::string> problems;  // failure reasons besides moved fields
  std::string error;                  // kError: why the case could not be run
  double seconds = 0;                 // wall time of its child processes
  bool new_golden = false;            // no golden existed
  std::string output;                 // children's stderr on error
};

// Compares `now` with `golden` (nullopt: no golden file). `golden_file` names it in messages.
CaseOutcome compare_case(const Case& c, const std::optional<Golden>& golden,
                         const std::vector<std::pair<std::string, JsonNumber>>& now,
                         const std::string& golden_file);

// "+12", "-3.5", "+0"; and "+1.11%", "n/a" when the old value is 0.
std::string delta_text(const JsonNumber& old_value, const JsonNumber& new_value);
std::string percent_text(const JsonNumber& old_value, const JsonNumber& new_value);

// A one-line summary of a failed case: "total.cycles 90000 -> 91000 (+1000, +1.11%); ...".
std::string failure_message(const CaseOutcome& outcome);

// The table of moved fields (case, field, old, new, delta, delta%, verdict) over all cases, or
// "" if nothing moved. `updating`: verdicts say "updated" instead of "FAIL".
std::string moved_table(const std::vector<CaseOutcome>& outcomes, bool updating);

}  // namespace ipusim::regression
