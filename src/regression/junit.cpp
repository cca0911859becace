// SPDX-License-Identifier: Apache-2.0
#include "ipusim/regression/junit.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ipusim::regression {

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (c < 0x20 && ch != '\n' && ch != '\t' && ch != '\r') break;  // not allowed in XML 1.0
        out += ch;
    }
  }
  return out;
}

std::string junit_xml(const std::string& suite_name, const std::vector<CaseOutcome>& outcomes,
                      double total_seconds) {
  using S = CaseOutcome::Status;
  const auto failures = std::count_if(outcomes.begin(), outcomes.end(),
                                      [](const auto& o) { return o.status == S::kFailed; });
  const auto errors = std::count_if(outcomes.begin(), outcomes.end(),
                                    [](const auto& o) { return o.status == S::kError; });
  const std::string suite = xml_escape(suite_name);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format(
      "<testsuites name=\"ipusim check\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
      "time=\"{:.3f}\">\n",
      outcomes.size(), failures, errors, total_seconds);
  out += fmt::format(
      "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" "
      "time=\"{:.3f}\">\n",
      suite, outcomes.size(), failures, errors, total_seconds);
  for (const auto& o : outcomes) {
    const std::string head =
        fmt::format("    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3f}\"",
                    xml_escape(o.name), suite, o.seconds);
    if (o.status == S::kPassed) {
      out += head + "/>\n";
      continue;
    }
    out += head + ">\n";
    const std::string message = failure_message(o);
    if (o.status == S::kFailed) {
      std::string body;
      for (const auto& ch : o.changes)
        if (ch.old_value && !ch.within_tolerance)
          body += fmt::format("{}: old {} new {} delta {} ({})\n", ch.field, ch.old_value->text,
                              ch.new_value.text, delta_text(*ch.old_value, ch.new_value),
                              percent_text(*ch.old_value, ch.new_value));
      for (const auto& p : o.problems) body += p + "\n";
      out += fmt::format("      <failure type=\"regression\" message=\"{}\">{}</failure>\n",
                         xml_escape(message), xml_escape(body));
    } else {
      out += fmt::format("      <error type=\"error\" message=\"{}\">{}</error>\n",
                         xml_escape(message), xml_escape(o.output));
    }
    out += "    </testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace ipusim::regression
