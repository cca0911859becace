// SPDX-License-Identifier: Apache-2.0
// Golden results: one small YAML file per case with a fixed key order (format, case,
// definition, then the compared fields in manifest order), numbers exactly as stats.json wrote
// them. Written only by 'ipusim check --update'.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipusim/util/json_reader.hpp"

namespace ipusim::regression {

struct Golden {
  std::string case_name;
  std::string definition;  // Case::definition() when the golden was written
  std::vector<std::pair<std::string, JsonNumber>> fields;

  const JsonNumber* find(std::string_view field) const;
};

// The file's text; parse_golden(golden_text(g)) == g.
std::string golden_text(const Golden& golden);

// Throws ConfigError "<path>:<line>:<column>: expected ..., found ..." on a malformed file.
Golden parse_golden(const std::string& text, const std::string& path);
Golden read_golden(const std::string& path);

}  // namespace ipusim::regression
