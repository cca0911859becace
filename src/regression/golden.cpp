// SPDX-License-Identifier: Apache-2.0
#include "ipusim/regression/golden.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <set>

#include "ipusim/config/yaml_reader.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/json.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::regression {
namespace {

constexpr std::string_view kFormat = "ipusim-golden/1";

}  // namespace

const JsonNumber* Golden::find(std::string_view field) const {
  for (const auto& [k, v] : fields)
    if (k == field) return &v;
  return nullptr;
}

std::string golden_text(const Golden& g) {
  std::string out;
  // The comment shows the name printably: a raw line break in it would end the comment.
  out += fmt::format("# Golden result of regression case {}.\n", printable(g.case_name));
  out += "# Written by 'ipusim check --update' (docs/regression.md); review changes like code.\n";
  out += fmt::format("format: {}\n", kFormat);
  out += fmt::format("case: {}\n", JsonWriter::escape(g.case_name));
  out += fmt::format("definition: {}\n", JsonWriter::escape(g.definition));
  out += "fields:\n";
  // Field paths are plain YAML scalars: they start with a letter and hold only [A-Za-z0-9_.[\]].
  for (const auto& [k, v] : g.fields) out += fmt::format("  {}: {}\n", k, v.text);
  return out;
}

Golden parse_golden(const std::string& text, const std::string& path) {
  const config::YamlReader r(path);
  const YAML::Node root = r.load(text);
  if (!root.IsMap())
    throw ConfigError(
        fmt::format("{}: expected a golden file (format, case, definition, fields), found {}", path,
                    r.kind_of(root)));
  Golden g;
  bool have_format = false, have_case = false, have_fields = false;
  std::set<std::string> seen;
  for (const auto& kv : root) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (!seen.insert(key).second)
      throw ConfigError(fmt::format("{}: duplicate key '{}'", r.loc(kv.first), key));
    const YAML::Node& v = kv.second;
    if (key == "format") {
      if (!v.IsScalar() || v.Scalar() != kFormat)
        throw ConfigError(
            fmt::format("{}: format: expected {}, found {}", r.loc(v), kFormat, r.kind_of(v)));
      have_format = true;
    } else if (key == "case" || key == "definition") {
      if (!v.IsScalar())
        throw ConfigError(
            fmt::format("{}: {}: expected a string, found {}", r.loc(v), key, r.kind_of(v)));
      (key == "case" ? g.case_name : g.definition) = v.Scalar();
      have_case = have_case || key == "case";
    } else if (key == "fields") {
      if (!v.IsMap())
        throw ConfigError(fmt::format("{}: fields: expected a map of field: number, found {}",
                                      r.loc(v), r.kind_of(v)));
      std::set<std::string> names;
      for (const auto& f : v) {
        if (!f.first.IsScalar() || !valid_field_path(f.first.Scalar()))
          throw ConfigError(fmt::format("{}: fields: expected a field path, found {}",
                                        r.loc(f.first), r.kind_of(f.first)));
        if (!names.insert(f.first.Scalar()).second)
          throw ConfigError(
              fmt::format("{}: fields: duplicate field '{}'", r.loc(f.first), f.first.Scalar()));
        std::optional<JsonNumber> n;
        if (f.second.IsScalar()) n = JsonNumber::parse(f.second.Scalar());
        if (!n)
          throw ConfigError(fmt::format("{}: fields.{}: expected a number, found {}",
                                        r.loc(f.second), f.first.Scalar(), r.kind_of(f.second)));
        g.fields.emplace_back(f.first.Scalar(), *n);
      }
      have_fields = true;
    } else {
      throw ConfigError(
          fmt::format("{}: expected one of the keys format, case, definition, fields, found '{}'",
                      r.loc(kv.first), key));
    }
  }
  if (!have_format || !have_case || !have_fields)
    throw ConfigError(fmt::format("{}: expected the keys format, case and fields, found {} missing",
                                  path,
                                  !have_format ? "format"
                                  : !have_case ? "case"
                                               : "fields"));
  return g;
}

Golden read_golden(const std::string& path) {
  std::string text;
  try {
    text = read_input_file(path, kMaxDocumentBytes, "golden");
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
  return parse_golden(text, path);
}

}  // namespace ipusim::regression
