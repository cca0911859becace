// SPDX-License-Identifier: Apache-2.0
#include "ipusim/regression/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ipusim/util/error.hpp"

namespace ipusim::regression {
namespace {

std::string tolerance_label(const Tolerance& t) {
  return t.kind == Tolerance::Kind::kExact ? "exact" : "tolerance " + t.text;
}

}  // namespace

std::vector<std::pair<std::string, JsonNumber>> extract_fields(const Case& c,
                                                               const JsonValue& stats,
                                                               const std::string& stats_origin) {
  std::vector<std::pair<std::string, JsonNumber>> out;
  for (const auto& f : c.fields) {
    const JsonValue* v = json_field(stats, f.path);
    if (!v)
      throw Error(
          fmt::format("{}: expected a number at field {}, found none", stats_origin, f.path));
    out.emplace_back(f.path, v->number);
  }
  return out;
}

CaseOutcome compare_case(const Case& c, const std::optional<Golden>& golden,
                         const std::vector<std::pair<std::string, JsonNumber>>& now,
                         const std::string& golden_file) {
  CaseOutcome o;
  o.name = c.name;
  if (!golden) {
    o.new_golden = true;
    o.status = CaseOutcome::Status::kFailed;
    o.problems.push_back(
        fmt::format("no golden file {} (run 'ipusim check --update' to create it)", golden_file));
    return o;
  }
  if (golden->case_name != c.name)
    o.problems.push_back(
        fmt::format("{} belongs to case '{}', not '{}'", golden_file, golden->case_name, c.name));
  if (golden->definition != c.definition())
    o.problems.push_back(
        fmt::format("the case changed since its golden was written: golden '{}', manifest '{}'",
                    golden->definition, c.definition()));
  for (std::size_t i = 0; i < now.size() && i < c.fields.size(); ++i) {
    const auto& [path, value] = now[i];
    const JsonNumber* old = golden->find(path);
    FieldChange ch;
    ch.field = path;
    ch.new_value = value;
    ch.tolerance = c.fields[i].tolerance;
    if (!old) {
      o.problems.push_back(fmt::format("golden has no field {} (new value {})", path, value.text));
      o.changes.push_back(ch);
      continue;
    }
    if (*old == value) continue;
    ch.old_value = *old;
    ch.within_tolerance = ch.tolerance.allows(*old, value);
    o.changes.push_back(ch);
  }
  const bool moved = std::any_of(o.changes.begin(), o.changes.end(), [](const FieldChange& ch) {
    return ch.old_value && !ch.within_tolerance;
  });
  if (moved || !o.problems.empty()) o.status = CaseOutcome::Status::kFailed;
  return o;
}

std::string delta_text(const JsonNumber& a, const JsonNumber& b) {
  if (a.integral && b.integral) return fmt::format("{:+}", b.i - a.i);
  return fmt::format("{:+.6g}", b.d - a.d);
}

std::string percent_text(const JsonNumber& a, const JsonNumber& b) {
  if (a.d == 0) return "n/a";
  const double diff = a.integral && b.integral ? static_cast<double>(b.i - a.i) : b.d - a.d;
  const double pct = 100.0 * diff / std::fabs(a.d);
  // Two decimals, or two significant digits for moves smaller than 0.01%, so that no move
  // prints as "+0.00%".
  if (std::fabs(pct) >= 0.01 || pct == 0) return fmt::format("{:+.2f}%", pct);
  return fmt::format("{:+.2g}%", pct);
}

std::string failure_message(const CaseOutcome& o) {
  std::vector<std::string> parts;
  for (const auto& ch : o.changes) {
    if (!ch.old_value || ch.within_tolerance) continue;
    parts.push_back(fmt::format("{} {} -> {} ({}, {}; {})", ch.field, ch.old_value->text,
                                ch.new_value.text, delta_text(*ch.old_value, ch.new_value),
                                percent_text(*ch.old_value, ch.new_value),
                                tolerance_label(ch.tolerance)));
  }
  for (const auto& p : o.problems) parts.push_back(p);
  if (!o.error.empty()) parts.push_back(o.error);
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string moved_table(const std::vector<CaseOutcome>& outcomes, bool updating) {
  struct Row {
    std::string c[7];
  };
  std::vector<Row> rows;
  rows.push_back(Row{{"case", "field", "old", "new", "delta", "delta%", "verdict"}});
  for (const auto& o : outcomes) {
    for (const auto& ch : o.changes) {
      if (!ch.old_value) {
        rows.push_back(Row{{o.name, ch.field, "-", ch.new_value.text, "", "",
                            updating ? "added" : "FAIL (not in golden)"}});
        continue;
      }
      std::string verdict = updating              ? "updated"
                            : ch.within_tolerance ? "ok (within " + ch.tolerance.text + ")"
                                                  : "FAIL (" + tolerance_label(ch.tolerance) + ")";
      rows.push_back(Row{{o.name, ch.field, ch.old_value->text, ch.new_value.text,
                          delta_text(*ch.old_value, ch.new_value),
                          percent_text(*ch.old_value, ch.new_value), verdict}});
    }
  }
  if (rows.size() == 1) return "";
  std::size_t w[7] = {};
  for (const auto& r : rows)
    for (int i = 0; i < 7; ++i) w[i] = std::max(w[i], r.c[i].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line =
        fmt::format("  {:<{}}  {:<{}}  {:>{}}  {:>{}}  {:>{}}  {:>{}}  {}", r.c[0], w[0], r.c[1],
                    w[1], r.c[2], w[2], r.c[3], w[3], r.c[4], w[4], r.c[5], w[5], r.c[6]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace ipusim::regression
