// SPDX-License-Identifier: Apache-2.0
#include "ipusim/regression/manifest.hpp"

#include <fmt/format.h>
#include <fnmatch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>

#include "ipusim/config/chip.hpp"
#include "ipusim/config/config.hpp"
#include "ipusim/config/yaml_reader.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::regression {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kFormat = "ipusim-suite/1";

using Reader = config::YamlReader;

bool valid_case_name(std::string_view name) {
  if (name.empty() || name.size() > 200) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = std::min(name.find('/', start), name.size());
    const std::string_view seg = name.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    for (char c : seg)
      if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '_' || c == '.' || c == '-'))
        return false;
    if (end == name.size()) return true;
    start = end + 1;
  }
}

bool valid_option_name(std::string_view name) {
  if (name.empty() || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

std::vector<std::string> config_names(const std::string& folder) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(data_dir() + "/configs/" + folder, ec))
    if (e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string resolve(const std::string& dir, const std::string& path) {
  if (fs::path(path).is_absolute()) return path;
  return (fs::path(dir) / path).lexically_normal().string();
}

std::vector<Field> read_fields(const Reader& r, const YAML::Node& node, const std::string& what,
                               std::vector<Field> base) {
  r.each_member(
      node, what, {}, [&](const std::string& key, const YAML::Node& k, const YAML::Node& v) {
        if (!valid_field_path(key))
          r.fail(k, fmt::format("{}: expected a stats.json field path such as total.cycles or "
                                "ipu[0].tiles.memory.max, found '{}'",
                                what, key));
        const std::string text =
            r.scalar(v, what + "." + key, "a tolerance (exact, an amount or a percentage)");
        Tolerance tol;
        try {
          tol = Tolerance::parse(text);
        } catch (const ParseError& e) {
          r.fail(v, fmt::format("{}.{}: {}", what, key, e.what()));
        }
        auto it =
            std::find_if(base.begin(), base.end(), [&](const Field& f) { return f.path == key; });
        if (it != base.end())
          it->tolerance = tol;
        else
          base.push_back(Field{key, tol});
      });
  return base;
}

struct Defaults {
  std::string chip = "gc200";
  std::optional<YAML::Node> chip_node;
  std::vector<std::string> overrides;
  std::vector<Field> fields;
};

void check_overrides(const Reader& r, const YAML::Node& node,
                     const std::vector<std::string>& sets) {
  for (const auto& s : sets)
    if (!config::parse_override(s)) r.fail(node, "set: " + config::override_form_error(s));
}

// Resolves a config named in the manifest: a name under configs/<folder>/ or a path (with a
// '/' or ending in .yaml) relative to the manifest. `what` names the kind ("chip config").
std::string resolve_config(const Reader& r, const std::string& dir, const YAML::Node& node,
                           const std::string& key, const std::string& what,
                           const std::string& folder, const std::string& value) {
  const bool is_path =
      value.find('/') != std::string::npos || value.ends_with(".yaml") || value.ends_with(".yml");
  const std::string file =
      is_path ? resolve(dir, value) : data_dir() + "/configs/" + folder + "/" + value + ".yaml";
  if (fs::is_regular_file(file)) return file;
  if (is_path)
    r.fail(node, fmt::format("{}: expected a readable {}, found no file {}", key, what, file));
  const auto names = config_names(folder);
  r.fail(node,
         fmt::format("{}: expected the name of a {} in {}/configs/{} ({}) or a path ending in "
                     ".yaml, found \"{}\"{}",
                     key, what, data_dir(), folder, fmt::join(names, ", "), value,
                     did_you_mean(value, names)));
}

// The file that `file` names under <section>.<key> (a path relative to `file`): the chip of a
// system config, the system of a run config.
std::string named_file(const Reader& r, const YAML::Node& node, const std::string& manifest_key,
                       const std::string& file, const std::string& section,
                       const std::string& key) {
  try {
    const YAML::Node root = YAML::Load(read_input_file(file, kMaxDocumentBytes, "config file"));
    const YAML::Node value = root[section][key];
    if (value && value.IsScalar())
      return resolve(fs::path(file).parent_path().string(), value.Scalar());
  } catch (const YAML::Exception&) {
    // Reported below; the full error comes when the file is loaded.
  }
  r.fail(node, fmt::format("{}: expected a config with a {}.{} key, found none in {}", manifest_key,
                           section, key, file));
}

Case read_case(const Reader& r, const std::string& dir, const YAML::Node& node, const Defaults& d,
               std::size_t index) {
  Case c;
  c.line = node.Mark().line + 1;
  c.chip = d.chip;
  c.overrides = d.overrides;
  c.fields = d.fields;
  const std::string what = fmt::format("cases[{}]", index);
  // Held in optionals: assigning one YAML::Node to another rebinds the node it refers to.
  std::optional<YAML::Node> chip_node = d.chip_node, name_node, kernel_node, trace_node,
                            system_node, compile_node;
  bool own_chip = false;
  r.each_member(
      node, what,
      {"name", "description", "kernel", "args", "trace", "compile", "chip", "system", "set",
       "fields"},
      [&](const std::string& key, const YAML::Node& k, const YAML::Node& v) {
        const std::string kw = what + "." + key;
        if (key == "name") {
          c.name = r.scalar(v, kw, "a case name");
          name_node.emplace(v);
        } else if (key == "description") {
          c.description = r.scalar(v, kw, "a sentence");
        } else if (key == "kernel") {
          c.kernel = r.scalar(v, kw, "a kernel name (see 'ipusim kernel --help')");
          kernel_node.emplace(k);
        } else if (key == "args") {
          r.each_member(
              v, kw, {}, [&](const std::string& arg, const YAML::Node& ak, const YAML::Node& av) {
                if (!valid_option_name(arg))
                  r.fail(ak, fmt::format("{}: expected an option name of [a-z0-9_-] such as m or "
                                         "dtype, found '{}'",
                                         kw, arg));
                if (arg == "out" || arg == "chip" || arg == "set" || arg == "format")
                  r.fail(ak,
                         fmt::format(
                             "{}: expected a kernel option, found '{}' (check supplies --out and "
                             "--format; use the case's chip: and set: keys)",
                             kw, arg));
                std::string value;
                if (!av.IsNull()) value = r.scalar(av, kw + "." + arg, "a value");
                c.args.emplace_back(arg, value);
              });
        } else if (key == "trace") {
          c.trace = r.scalar(v, kw, "a trace file path");
          trace_node.emplace(v);
        } else if (key == "compile") {
          c.compile = r.scalar(v, kw, "a run config name or path");
          compile_node.emplace(v);
        } else if (key == "chip") {
          c.chip = r.scalar(v, kw, "a chip config name or path");
          chip_node.emplace(v);
          own_chip = true;
        } else if (key == "system") {
          c.system = r.scalar(v, kw, "a system config name or path");
          system_node.emplace(v);
        } else if (key == "set") {
          const auto sets = r.string_list(v, kw, "KEY=VALUE overrides");
          check_overrides(r, v, sets);
          c.overrides.insert(c.overrides.end(), sets.begin(), sets.end());
        } else if (key == "fields") {
          c.fields = read_fields(r, v, kw, c.fields);
        }
      });
  if (!name_node) r.fail(node, fmt::format("{}: expected a name, found none", what));
  if (!valid_case_name(c.name))
    r.fail(*name_node,
           fmt::format("{}.name: expected '/'-separated segments of letters, digits, '_', "
                       "'.' and '-' (at most 200 characters), found \"{}\"",
                       what, c.name));
  const int kinds = !c.kernel.empty() + !c.trace.empty() + !c.compile.empty();
  if (kinds != 1)
    r.fail(node,
           fmt::format("case '{}': expected exactly one of kernel, trace or compile, found {}",
                       c.name, kinds == 0 ? "none" : "several"));
  if (!c.args.empty() && c.kernel.empty())
    r.fail(node,
           fmt::format("case '{}': expected args only with kernel, found args without a kernel",
                       c.name));
  if (!c.kernel.empty() && !valid_option_name(c.kernel))
    r.fail(*kernel_node,
           fmt::format("case '{}': expected a kernel name such as matmul, found \"{}\"", c.name,
                       c.kernel));
  if (!c.trace.empty()) {
    c.trace_path = resolve(dir, c.trace);
    if (!fs::is_regular_file(c.trace_path))
      r.fail(*trace_node,
             fmt::format("case '{}': trace: expected a readable trace file, found no file {}",
                         c.name, c.trace_path));
  }
  if (c.fields.empty())
    r.fail(node, fmt::format("case '{}': expected at least one compared field (defaults.fields or "
                             "fields), found none",
                             c.name));
  if (!c.system.empty())
    c.system_file =
        resolve_config(r, dir, *system_node, "system", "system config", "systems", c.system);
  if (c.is_compile()) {
    c.compile_path =
        resolve_config(r, dir, *compile_node, "compile", "run config", "runs", c.compile);
    if (c.system_file.empty())
      c.system_file = named_file(r, *compile_node, "compile", c.compile_path, "run", "system");
  }
  if (c.is_system() && !own_chip) {
    // The system's own chip: what a kernel is planned for. Compile cases need none.
    c.chip.clear();
    if (c.is_kernel())
      c.chip_file = named_file(r, *system_node, "system", c.system_file, "system", "chip");
    return c;
  }
  c.chip_file =
      resolve_config(r, dir, chip_node ? *chip_node : node, "chip", "chip config", "chips", c.chip);
  return c;
}

}  // namespace

Tolerance Tolerance::parse(std::string_view text) {
  Tolerance t;
  t.text = std::string(text);
  if (text == "exact") return t;
  const bool percent = !text.empty() && text.back() == '%';
  const std::string number(percent ? text.substr(0, text.size() - 1) : text);
  char* end = nullptr;
  errno = 0;
  const double v = number.empty() ? -1 : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(v) || v < 0 ||
      !(number.front() >= '0' && number.front() <= '9'))
    throw ParseError(
        fmt::format("expected a tolerance: exact, a non-negative amount such as 100 or a "
                    "percentage such as 0.5%, found \"{}\"",
                    text));
  if (v == 0) {
    t.kind = Kind::kExact;
    return t;
  }
  t.kind = percent ? Kind::kRelative : Kind::kAbsolute;
  t.amount = v;
  return t;
}

bool Tolerance::allows(const JsonNumber& golden, const JsonNumber& now) const {
  if (golden == now) return true;
  const double diff = golden.integral && now.integral
                          ? std::fabs(static_cast<double>(now.i - golden.i))
                          : std::fabs(now.d - golden.d);
  switch (kind) {
    case Kind::kExact:
      return false;
    case Kind::kAbsolute:
      return diff <= amount;
    case Kind::kRelative:
      return diff <= amount / 100.0 * std::fabs(golden.d);
  }
  return false;
}

std::string Case::definition() const {
  std::string out;
  if (is_kernel()) {
    out = "kernel " + kernel;
    for (const auto& [k, v] : args)
      out += v.empty() ? fmt::format(" --{}", k) : fmt::format(" --{} {}", k, v);
  } else if (is_compile()) {
    out = "compile " + compile;
  } else {
    out = "trace " + trace;
  }
  if (!system.empty()) out += "; system " + system;
  if (!chip.empty()) out += "; chip " + chip;
  if (!overrides.empty()) out += fmt::format("; set {}", fmt::join(overrides, " "));
  return out;
}

Manifest parse_manifest(const std::string& text, const std::string& path) {
  Reader r(path);
  const YAML::Node root = r.load(text);
  Manifest m;
  m.file = path;
  const fs::path parent = fs::path(path).parent_path();
  m.dir = parent.empty() ? "." : parent.string();
  if (!root.IsMap())
    throw ConfigError(
        fmt::format("{}: expected a suite manifest (a map with format, name, goldens, "
                    "defaults and cases), found {}",
                    path, Reader::kind_of(root)));
  Defaults d;
  std::string goldens = "golden";
  std::optional<YAML::Node> cases, format_node;
  r.each_member(root, "suite", {"format", "name", "description", "goldens", "defaults", "cases"},
                [&](const std::string& key, const YAML::Node&, const YAML::Node& v) {
                  if (key == "format") {
                    format_node.emplace(v);
                    const std::string f = r.scalar(v, key, std::string(kFormat));
                    if (f != kFormat)
                      r.fail(v, fmt::format("format: expected {} (the only manifest version this "
                                            "build reads), found \"{}\"",
                                            kFormat, f));
                  } else if (key == "name") {
                    m.name = r.scalar(v, key, "a suite name");
                  } else if (key == "description") {
                    r.scalar(v, key, "a sentence");
                  } else if (key == "goldens") {
                    goldens = r.scalar(v, key, "a folder relative to the manifest");
                  } else if (key == "defaults") {
                    r.each_member(
                        v, "defaults", {"chip", "set", "fields"},
                        [&](const std::string& dk, const YAML::Node&, const YAML::Node& dv) {
                          if (dk == "chip") {
                            d.chip = r.scalar(dv, "defaults.chip", "a chip config name or path");
                            d.chip_node.emplace(dv);
                          } else if (dk == "set") {
                            d.overrides = r.string_list(dv, "defaults.set", "KEY=VALUE overrides");
                            check_overrides(r, dv, d.overrides);
                          } else {
                            d.fields = read_fields(r, dv, "defaults.fields", {});
                          }
                        });
                  } else {
                    cases.emplace(v);
                  }
                });
  if (!format_node)
    throw ConfigError(
        fmt::format("{}: format: missing required key (expected format: {})", path, kFormat));
  if (!cases)
    throw ConfigError(fmt::format("{}: cases: missing required key (a list of cases)", path));
  if (!cases->IsSequence())
    r.fail(*cases,
           fmt::format("cases: expected a list of cases, found {}", Reader::kind_of(*cases)));
  m.goldens_dir = resolve(m.dir, goldens);
  std::set<std::string> names;
  for (std::size_t i = 0; i < cases->size(); ++i) {
    const YAML::Node item = static_cast<const YAML::Node&>(*cases)[i];
    Case c = read_case(r, m.dir, item, d, i);
    if (!names.insert(c.name).second)
      r.fail(item,
             fmt::format("case '{}': expected a unique name, found a second case of that name",
                         c.name));
    m.cases.push_back(std::move(c));
  }
  return m;
}

Manifest load_manifest(const std::string& path) {
  std::string text;
  try {
    text = read_input_file(path, kMaxDocumentBytes, "suite");
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
  return parse_manifest(text, path);
}

std::string golden_path(const Manifest& manifest, const Case& c) {
  return (fs::path(manifest.goldens_dir) / (c.name + ".yaml")).string();
}

bool matches_filter(const std::string& name, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return true;
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) {
    return ::fnmatch(p.c_str(), name.c_str(), 0) == 0;
  });
}

}  // namespace ipusim::regression
