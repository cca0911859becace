// SPDX-License-Identifier: Apache-2.0
#include "ipusim/sweep/spec.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/config.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/config/yaml_reader.hpp"
#include "ipusim/kernels/catalogue.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::sweep {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kFormat = "ipusim-sweep/1";

using Reader = config::YamlReader;

// A kernel option `ipusim kernel` knows (issue 16, defect K: unknown ones failed every point).
void check_kernel_option(const Reader& r, const YAML::Node& node, const std::string& what,
                         const std::string& option) {
  using kernels::kKernelOptions;
  if (std::find(kKernelOptions.begin(), kKernelOptions.end(), option) == kKernelOptions.end()) {
    const std::vector<std::string> known(kKernelOptions.begin(), kKernelOptions.end());
    r.fail(node, fmt::format(
                     "{}: expected an option of 'ipusim kernel' ({}), found unknown option '{}'{}",
                     what, fmt::join(known, ", "), option, did_you_mean(option, known)));
  }
}

bool valid_option_name(std::string_view name) {
  if (name.empty() || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

const std::vector<std::string> kFileKeys{"run", "model", "system", "chip"};

// Every key an override (base set: or an axis) may name: the system schema (chip.*, machine.*,
// fabric.*, system.*) and the run schema (run.*).
std::vector<std::string> config_keys() {
  std::vector<std::string> out;
  for (const auto& p : system_schema().params()) out.push_back(p.path);
  for (const auto& p : compiler::run_schema().params()) out.push_back(p.path);
  return out;
}

bool known_config_key(const std::string& key) {
  return system_schema().find(key) || compiler::run_schema().find(key);
}

// Checks an axis or exclude key; `what` names it in messages.
void check_key(const Reader& r, const YAML::Node& node, const std::string& what,
               const std::string& key, const Base& base) {
  if (key.starts_with("args.")) {
    if (!base.is_kernel())
      r.fail(node,
             fmt::format("{}: expected args.NAME only with a base kernel, found '{}'", what, key));
    if (!valid_option_name(key.substr(5)) || key == "args.out" || key == "args.chip" ||
        key == "args.set" || key == "args.format")
      r.fail(node,
             fmt::format("{}: expected a kernel option such as args.m, found '{}'", what, key));
    check_kernel_option(r, node, what, key.substr(5));
    return;
  }
  if (std::find(kFileKeys.begin(), kFileKeys.end(), key) != kFileKeys.end()) {
    if ((key == "run" || key == "model") && base.is_kernel())
      r.fail(node,
             fmt::format(
                 "{}: expected '{}' only with a base run (a workload), found it with a base kernel",
                 what, key));
    return;
  }
  if (known_config_key(key)) {
    if (key.starts_with("run.") && base.is_kernel())
      r.fail(node,
             fmt::format("{}: expected run.* keys only with a base run (a workload), found '{}'",
                         what, key));
    return;
  }
  std::vector<std::string> candidates = config_keys();
  candidates.insert(candidates.end(), kFileKeys.begin(), kFileKeys.end());
  r.fail(node, fmt::format(
                   "{}: expected a config key (chip.*, machine.*, fabric.*, system.*, run.*), run, "
                   "model, system, chip or args.NAME, found unknown key '{}'{}",
                   what, key, did_you_mean(key, candidates)));
}

void check_set(const Reader& r, const YAML::Node& node, const std::string& what,
               const std::string& s, const Base& base) {
  const auto o = config::parse_override(s);
  if (!o) r.fail(node, fmt::format("{}: {}", what, config::override_form_error(s)));
  const std::string& key = o->key;
  if (!known_config_key(key) || (key.starts_with("run.") && base.is_kernel()))
    check_key(r, node, what, key, base);
  if (!known_config_key(key))
    r.fail(node, fmt::format("{}: expected a config key, found '{}'", what, key));
}

Base read_base(const Reader& r, const YAML::Node& node) {
  Base b;
  r.each_member(
      node, "base", {"kernel", "args", "run", "model", "system", "chip", "set"},
      [&](const std::string& key, const YAML::Node& k, const YAML::Node& v) {
        const std::string kw = "base." + key;
        if (key == "kernel") {
          b.kernel = r.scalar(v, kw, "a kernel name (see 'ipusim kernel --help')");
          if (!valid_option_name(b.kernel))
            r.fail(v, fmt::format("{}: expected a kernel name such as matmul, found \"{}\"", kw,
                                  b.kernel));
          using kernels::kKernelNames;
          if (std::find(kKernelNames.begin(), kKernelNames.end(), b.kernel) == kKernelNames.end()) {
            const std::vector<std::string> known(kKernelNames.begin(), kKernelNames.end());
            r.fail(v,
                   fmt::format(
                       "{}: expected a kernel of 'ipusim kernel' ({}), found unknown kernel '{}'{}",
                       kw, fmt::join(known, ", "), b.kernel, did_you_mean(b.kernel, known)));
          }
        } else if (key == "args") {
          r.each_member(
              v, kw, {}, [&](const std::string& arg, const YAML::Node& ak, const YAML::Node& av) {
                if (!valid_option_name(arg) || arg == "out" || arg == "chip" || arg == "set" ||
                    arg == "format")
                  r.fail(ak, fmt::format("{}: expected a kernel option of [a-z0-9_-] such as m or "
                                         "dtype (sweep supplies "
                                         "--out, --chip and --set), found '{}'",
                                         kw, arg));
                check_kernel_option(r, ak, kw, arg);
                b.args.emplace_back(
                    arg, av.IsNull() ? std::string() : r.scalar(av, kw + "." + arg, "a value"));
              });
        } else if (key == "run") {
          b.run = r.scalar(v, kw, "a run config name (configs/runs/) or path");
        } else if (key == "model") {
          b.model = r.scalar(v, kw, "a model file path");
        } else if (key == "system") {
          b.system = r.scalar(v, kw, "a system config name (configs/systems/) or path");
        } else if (key == "chip") {
          b.chip = r.scalar(v, kw, "a chip config name (configs/chips/) or path");
        } else {
          b.sets = r.string_list(v, kw, "KEY=VALUE overrides");
        }
        (void)k;
      });
  if (b.is_kernel() == !b.run.empty())
    r.fail(node, fmt::format("base: expected exactly one of kernel or run, found {}",
                             b.is_kernel() ? "both" : "neither"));
  if (!b.args.empty() && !b.is_kernel())
    r.fail(node, "base: expected args only with kernel, found args with a run");
  if (!b.model.empty() && b.is_kernel())
    r.fail(node, "base: expected model only with run, found model with a kernel");
  return b;
}

Axis read_axis(const Reader& r, const YAML::Node& node, std::size_t index, const Base& base,
               std::set<std::string>& seen) {
  Axis a;
  a.line = node.Mark().line + 1;
  const std::string what = fmt::format("axes[{}]", index);
  if (!node.IsMap() || node.size() == 0)
    r.fail(node, fmt::format(
                     "{}: expected a map of KEY: [values] (keys in one axis are zipped), found {}",
                     what, Reader::kind_of(node)));
  r.each_member(
      node, what, {}, [&](const std::string& key, const YAML::Node& k, const YAML::Node& v) {
        check_key(r, k, what, key, base);
        if (!seen.insert(key).second)
          r.fail(k, fmt::format("{}: key '{}' is already swept by another axis", what, key));
        std::vector<std::string> values = r.string_list(v, what + "." + key, "values");
        if (values.empty())
          r.fail(v,
                 fmt::format("{}.{}: expected at least one value, found an empty list", what, key));
        if (!a.values.empty() && values.size() != a.size())
          r.fail(v, fmt::format("{}.{}: expected {} values (keys of one axis are zipped), found {}",
                                what, key, a.size(), values.size()));
        a.keys.push_back(key);
        a.values.push_back(std::move(values));
      });
  return a;
}

}  // namespace

bool is_file_key(const std::string& key) {
  return key.starts_with("args.") ||
         std::find(kFileKeys.begin(), kFileKeys.end(), key) != kFileKeys.end();
}

std::vector<std::string> Spec::axis_keys() const {
  std::vector<std::string> out;
  for (const auto& a : axes) out.insert(out.end(), a.keys.begin(), a.keys.end());
  return out;
}

std::string Point::label() const {
  if (values.empty()) return "base";
  std::vector<std::string> parts;
  for (const auto& [k, v] : values) parts.push_back(k + "=" + v);
  return fmt::format("{}", fmt::join(parts, ", "));
}

Spec parse_spec(const std::string& text, const std::string& path) {
  Reader r(path);
  const YAML::Node root = r.load(text);
  if (!root.IsMap())
    throw ConfigError(
        fmt::format("{}: expected a sweep spec (a map with format, name, base, axes, combine and "
                    "exclude), found {}",
                    path, Reader::kind_of(root)));
  Spec s;
  s.file = path;
  const fs::path parent = fs::path(path).parent_path();
  s.dir = parent.empty() ? "." : parent.string();
  std::optional<YAML::Node> base_node, axes_node, exclude_node, format_node;
  r.each_member(
      root, "sweep", {"format", "name", "description", "base", "axes", "combine", "exclude"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& v) {
        if (key == "format") {
          format_node.emplace(v);
          const std::string f = r.scalar(v, key, std::string(kFormat));
          if (f != kFormat)
            r.fail(v,
                   fmt::format(
                       "format: expected {} (the only spec version this build reads), found \"{}\"",
                       kFormat, f));
        } else if (key == "name") {
          s.name = r.scalar(v, key, "a sweep name");
        } else if (key == "description") {
          r.scalar(v, key, "a sentence");
        } else if (key == "base") {
          base_node.emplace(v);
        } else if (key == "axes") {
          axes_node.emplace(v);
        } else if (key == "combine") {
          const std::string c = r.scalar(v, key, "product or zip");
          if (c != "product" && c != "zip")
            r.fail(v, fmt::format("combine: expected product or zip, found \"{}\"{}", c,
                                  did_you_mean(c, {"product", "zip"})));
          s.zip = c == "zip";
        } else {
          exclude_node.emplace(v);
        }
      });
  if (!format_node)
    throw ConfigError(
        fmt::format("{}: format: missing required key (expected format: {})", path, kFormat));
  if (!base_node)
    throw ConfigError(fmt::format("{}: base: missing required key (a kernel or a run)", path));
  s.base = read_base(r, *base_node);
  for (const auto& set : s.base.sets) check_set(r, *base_node, "base.set", set, s.base);
  if (axes_node) {
    if (!axes_node->IsSequence())
      r.fail(*axes_node,
             fmt::format("axes: expected a list of axes (maps of KEY: [values]), found {}",
                         Reader::kind_of(*axes_node)));
    std::set<std::string> seen;
    for (std::size_t i = 0; i < axes_node->size(); ++i)
      s.axes.push_back(
          read_axis(r, static_cast<const YAML::Node&>(*axes_node)[i], i, s.base, seen));
    if (s.zip)
      for (std::size_t i = 1; i < s.axes.size(); ++i)
        if (s.axes[i].size() != s.axes[0].size())
          r.fail(static_cast<const YAML::Node&>(*axes_node)[i],
                 fmt::format("axes[{}]: expected {} values as axes[0] (combine: zip), found {}", i,
                             s.axes[0].size(), s.axes[i].size()));
  }
  if (exclude_node) {
    if (!exclude_node->IsSequence())
      r.fail(*exclude_node, fmt::format("exclude: expected a list of maps of KEY: value, found {}",
                                        Reader::kind_of(*exclude_node)));
    const std::vector<std::string> keys = s.axis_keys();
    for (std::size_t i = 0; i < exclude_node->size(); ++i) {
      const YAML::Node item = static_cast<const YAML::Node&>(*exclude_node)[i];
      const std::string what = fmt::format("exclude[{}]", i);
      std::vector<Assignment> match;
      r.each_member(item, what, {},
                    [&](const std::string& key, const YAML::Node& k, const YAML::Node& v) {
                      if (std::find(keys.begin(), keys.end(), key) == keys.end())
                        r.fail(k, fmt::format("{}: expected an axis key ({}), found '{}'{}", what,
                                              fmt::join(keys, ", "), key, did_you_mean(key, keys)));
                      match.emplace_back(key, r.scalar(v, what + "." + key, "a value"));
                    });
      s.exclude.push_back(std::move(match));
      s.exclude_lines.push_back(item.Mark().line + 1);
    }
  }
  return s;
}

Spec load_spec(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw ConfigError(fmt::format("{}: expected a sweep spec file, found none", path));
  return parse_spec(read_input_file(path, kMaxDocumentBytes, "sweep spec"), path);
}

std::uint64_t combination_count(const Spec& spec) {
  if (spec.axes.empty()) return 1;
  if (spec.zip) return spec.axes[0].size();
  std::uint64_t n = 1;
  for (const auto& a : spec.axes)
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(a.size()), &n))
      return std::numeric_limits<std::uint64_t>::max();
  return n;
}

std::vector<Point> expand(const Spec& spec, std::uint64_t max_points) {
  const std::uint64_t count = combination_count(spec);
  if (count > max_points) {
    std::vector<std::string> sizes;
    for (const auto& a : spec.axes) sizes.push_back(std::to_string(a.size()));
    throw ConfigError(fmt::format(
        "{}: expected at most {} points, found {}{} ({} axes of {} values); raise the cap with "
        "--max-points if you mean it",
        spec.file, max_points,
        count == std::numeric_limits<std::uint64_t>::max() ? "more than " : "", count,
        spec.axes.size(), fmt::join(sizes, " x ")));
  }
  std::vector<std::vector<std::size_t>> combos;  // per combination, the value index of each axis
  if (spec.axes.empty()) {
    combos.emplace_back();
  } else if (spec.zip) {
    for (std::size_t i = 0; i < spec.axes[0].size(); ++i) combos.emplace_back(spec.axes.size(), i);
  } else {
    std::vector<std::size_t> idx(spec.axes.size(), 0);
    bool more = true;
    while (more) {
      combos.push_back(idx);
      more = false;
      for (std::size_t a = spec.axes.size(); a-- > 0;) {  // odometer: the last axis fastest
        if (++idx[a] < spec.axes[a].size()) {
          more = true;
          break;
        }
        idx[a] = 0;
      }
    }
  }
  std::vector<Point> out;
  std::map<std::vector<Assignment>, std::size_t> seen;  // combination -> its number (1-based)
  for (std::size_t ci = 0; ci < combos.size(); ++ci) {
    const auto& c = combos[ci];
    Point p;
    for (std::size_t ax = 0; ax < spec.axes.size(); ++ax)
      for (std::size_t k = 0; k < spec.axes[ax].keys.size(); ++k)
        p.values.emplace_back(spec.axes[ax].keys[k], spec.axes[ax].values[k][c[ax]]);
    // Duplicate values would make two points with one result directory, and a summary that
    // does not add up ("2 point(s): 1 ran"): refuse them (issue 16, defect P).
    if (const auto [it, inserted] = seen.emplace(p.values, ci + 1); !inserted)
      throw ConfigError(fmt::format(
          "{}:{}: expected distinct axis values, found combination {} ({}) twice (combinations "
          "{} and {})",
          spec.file, spec.axes.empty() ? 0 : spec.axes[0].line, ci + 1, p.label(), it->second,
          ci + 1));
    const bool excluded =
        std::any_of(spec.exclude.begin(), spec.exclude.end(), [&](const auto& ex) {
          return std::all_of(ex.begin(), ex.end(), [&](const Assignment& m) {
            return std::find(p.values.begin(), p.values.end(), m) != p.values.end();
          });
        });
    if (excluded) continue;
    p.index = out.size();
    p.line = spec.axes.empty() ? 0 : spec.axes[0].line;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace ipusim::sweep
