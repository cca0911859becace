// SPDX-License-Identifier: Apache-2.0
// JUnit XML, the report format CI systems (GitLab, Jenkins, GitHub actions, Buildkite) read: one
// <testsuite> per manifest, one <testcase> per case, a <failure> naming each moved field with
// its old and new value, an <error> for a case that could not be run.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ipusim/regression/compare.hpp"

namespace ipusim::regression {

// Escapes &, <, >, " and ' and drops characters XML 1.0 does not allow.
std::string xml_escape(std::string_view s);

std::string junit_xml(const std::string& suite_name, const std::vector<CaseOutcome>& outcomes,
                      double total_seconds);

}  // namespace ipusim::regression
