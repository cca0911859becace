// SPDX-License-Identifier: Apache-2.0
#include "ipusim/report/run_dir.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string_view>
#include <type_traits>

#include "ipusim/config/yaml_reader.hpp"
#include "ipusim/report/run_files.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::report {
namespace {

// A CSV of unsigned integers (and a few text columns) with a fixed header.
class Csv {
 public:
  // `older`: other headers accepted (older run directories').
  Csv(const std::string& path, std::size_t max_bytes, const std::string& header,
      std::initializer_list<std::string_view> older = {})
      : path_(path) {
    std::istringstream in(read_input_file(path, max_bytes, "run-directory CSV"));
    std::string line;
    if (!std::getline(in, line) ||
        (line != header && std::find(older.begin(), older.end(), line) == older.end())) {
      if (line.ends_with('\r'))
        throw Error(fmt::format(
            "{}:1: expected lines ending in LF (as ipusim writes them), found CR LF (a Windows "
            "line ending)",
            path));
      throw Error(
          fmt::format("{}:1: expected the header \"{}\", found \"{}\"", path, header, line));
    }
    columns_ = split(line, ',');
    std::size_t n = 1;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty()) continue;
      auto cells = split(line, ',');
      if (cells.size() != columns_.size())
        throw Error(fmt::format("{}:{}: expected {} columns, found {}", path, n, columns_.size(),
                                cells.size()));
      rows_.push_back({n, std::move(cells)});
    }
  }
  std::size_t size() const { return rows_.size(); }
  std::size_t columns() const { return columns_.size(); }
  const std::string& text(std::size_t row, std::size_t col) const { return rows_[row].second[col]; }
  template <class T>
  T number(std::size_t row, std::size_t col) const {
    const std::string& s = rows_[row].second[col];
    T v{};
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size())
      throw Error(fmt::format("{}:{}: column {}: expected {}, found \"{}\"", path_,
                              rows_[row].first, columns_[col],
                              std::is_floating_point_v<T> ? "a number" : "an integer", s));
    return v;
  }

 private:
  std::string path_;
  std::vector<std::string> columns_;
  std::vector<std::pair<std::size_t, std::vector<std::string>>> rows_;
};

void flatten_yaml(const YAML::Node& node, const std::string& prefix,
                  std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node)
      flatten_yaml(
          kv.second,
          prefix.empty() ? kv.first.as<std::string>() : prefix + "." + kv.first.as<std::string>(),
          out);
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i)
      flatten_yaml(node[i], fmt::format("{}[{}]", prefix, i), out);
  } else if (node.IsScalar()) {
    out[prefix] = node.Scalar();
  } else {
    out[prefix] = "";
  }
}

void flatten(const JsonValue& v, const std::string& path, const std::string& unit,
             std::vector<StatField>& out) {
  switch (v.kind) {
    case JsonValue::Kind::kNumber:
      out.push_back({path, v.number.d, unit});
      break;
    case JsonValue::Kind::kObject: {
      const JsonValue* value = v.find("value");
      const JsonValue* u = v.find("unit");
      if (value && u && value->kind == JsonValue::Kind::kNumber && v.members.size() == 2) {
        out.push_back({path, value->number.d, u->string});
        break;
      }
      const std::string inner_unit = u && u->kind == JsonValue::Kind::kString ? u->string : unit;
      for (const auto& [k, m] : v.members)
        flatten(m, path.empty() ? k : path + "." + k, inner_unit, out);
      break;
    }
    case JsonValue::Kind::kArray:
      // Items are keyed by what they are, so two runs match them however they are ordered
      // (issue 27: layer rows matched by position read a reordering as new layers): a name, a
      // layer row's layer and pass, a tile; else the position.
      for (std::size_t i = 0; i < v.items.size(); ++i) {
        const JsonValue& item = v.items[i];
        const auto text = [&](const char* k) -> const std::string* {
          const JsonValue* f = item.find(k);
          return f && f->kind == JsonValue::Kind::kString ? &f->string : nullptr;
        };
        const JsonValue* tile = item.find("tile");
        std::string key = std::to_string(i);
        if (const std::string* name = text("name")) {
          key = *name;
        } else if (const std::string* layer = text("layer")) {
          const std::string* pass = text("pass");
          key = pass && !pass->empty() ? *layer + " " + *pass : *layer;
        } else if (tile && tile->kind == JsonValue::Kind::kNumber) {
          key = "tile " + tile->number.text;
        }
        flatten(item, fmt::format("{}[{}]", path, key), unit, out);
      }
      break;
    default:
      break;
  }
}

}  // namespace

bool same_value(double a, double b) {
  if (a == b) return true;
  // Whole numbers (cycles, bytes, counts) compare exactly; others up to a relative 1e-9, so
  // that the last bits of a double computed two ways never show as a change.
  if (a == std::floor(a) && b == std::floor(b)) return false;
  return std::fabs(b - a) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

namespace {

void check_positive_stat(const RunDir& r, const std::string& path) {
  const double v = stat(r, path);
  if (!(v > 0) || !std::isfinite(v))
    throw Error(fmt::format("{}/stats.json: key \"{}\": expected a positive number, found {}",
                            r.path, path, v));
}

}  // namespace

RunDir load_run_dir(const std::string& dir) {
  RunDir r;
  r.path = dir;
  const std::string stats_path = dir + "/stats.json";
  std::error_code ec;
  if (!std::filesystem::exists(stats_path, ec))
    throw Error(
        fmt::format("{}: not a run directory: expected {} (written by 'ipusim run --out "
                    "DIR'), found none",
                    dir, stats_path));
  r.stats = parse_json(read_input_file(stats_path, kMaxStatsBytes, "stats.json"), stats_path);
  const JsonValue* format = r.stats.find("format");
  if (!format || format->kind != JsonValue::Kind::kString || format->string != "ipusim-stats/1")
    throw Error(fmt::format("{}: key \"format\": expected \"ipusim-stats/1\", found {}", stats_path,
                            !format ? "no such key"
                            : format->kind == JsonValue::Kind::kString
                                ? "\"" + format->string + "\""
                                : "a " + json_kind(*format)));
  // What every reader (report, compare) divides by or takes the logarithm of, checked once.
  check_positive_stat(r, "chip.clock");
  const std::string config_path = dir + "/config.resolved.yaml";
  if (std::filesystem::exists(config_path, ec)) {
    try {
      const std::string text = read_input_file(config_path, kMaxDocumentBytes, "resolved config");
      const YAML::Node root = YAML::Load(text);
      config::check_expanded_size(root, config_path, text);
      flatten_yaml(root, "", r.config);
    } catch (const YAML::Exception& e) {
      throw Error(fmt::format("{}:{}: {}", config_path, e.mark.line + 1, config::yaml_problem(e)));
    }
  }
  const std::string tiles_path = dir + "/tiles.csv";
  if (std::filesystem::exists(tiles_path, ec)) {
    Csv csv(tiles_path, kMaxTilesCsvBytes, kTilesHeader,
            {kTilesHeaderTensorsTogether, kTilesHeaderTotalsOnly});
    const bool together = csv.columns() == 10;  // the older categories: tensors in one
    for (std::size_t i = 0; i < csv.size(); ++i) {
      auto& tiles = r.tiles[csv.number<std::uint32_t>(i, 0)];
      const auto t = csv.number<std::uint32_t>(i, 1);
      if (t != tiles.size())
        throw Error(fmt::format("{}: row {}: column tile: expected {}, found {}", tiles_path, i + 2,
                                tiles.size(), t));
      tiles.push_back({csv.number<std::uint64_t>(i, 2), csv.number<std::uint64_t>(i, 3),
                       csv.number<std::uint64_t>(i, 4), std::nullopt});
      if (csv.columns() > 5) {
        std::array<std::uint64_t, kMemoryCategories> m{};
        if (together) {  // tensors, vertex state, code, exchange code, stack
          m[kMemoryCategories - 1] = csv.number<std::uint64_t>(i, 5);
          for (std::size_t k = 0; k < 4; ++k) m[8 + k] = csv.number<std::uint64_t>(i, 6 + k);
        } else {
          for (std::size_t k = 0; k + 1 < m.size(); ++k) m[k] = csv.number<std::uint64_t>(i, 5 + k);
        }
        tiles.back().memory = m;
      }
    }
  }
  const std::string steps_path = dir + "/supersteps.csv";
  if (std::filesystem::exists(steps_path, ec)) {
    Csv csv(steps_path, kMaxSuperstepsCsvBytes, supersteps_header(),
            {supersteps_header_without_layer()});
    for (std::size_t i = 0; i < csv.size(); ++i) {
      SuperstepRow row;
      row.ipu = csv.number<std::uint32_t>(i, 0);
      row.index = csv.number<std::int64_t>(i, 1);
      row.step = csv.text(i, 2);
      row.executions = csv.number<std::uint64_t>(i, 3);
      row.start = csv.number<std::uint64_t>(i, 4);
      for (std::size_t k = 0; k < kPhaseKinds; ++k)
        row.cycles.values[k] = csv.number<std::uint64_t>(i, 5 + k);
      row.active_tiles = csv.number<std::uint64_t>(i, 5 + kPhaseKinds);
      if (csv.columns() > 6 + kPhaseKinds) {
        row.layer = csv.text(i, 6 + kPhaseKinds);
        row.pass = csv.text(i, 7 + kPhaseKinds);
      }
      r.supersteps.push_back(std::move(row));
    }
  }
  const std::string layers_path = dir + "/layers.csv";
  if (std::filesystem::exists(layers_path, ec)) {
    Csv csv(layers_path, kMaxLayersCsvBytes, layers_header(),
            {layers_header_without_group(), layers_header_without_memory()});
    for (std::size_t i = 0; i < csv.size(); ++i) {
      LayerCsvRow row;
      row.ipu = csv.number<std::uint32_t>(i, 0);
      row.layer = csv.text(i, 1);
      row.pass = csv.text(i, 2);
      row.executions = csv.number<std::uint64_t>(i, 3);
      for (std::size_t k = 0; k < kPhaseKinds; ++k)
        row.cycles.values[k] = csv.number<std::uint64_t>(i, 4 + k);
      // total_cycles (column 4 + kPhaseKinds) is the sum of the phase columns.
      row.flops = csv.number<std::uint64_t>(i, 5 + kPhaseKinds);
      row.exchange_bytes = csv.number<std::uint64_t>(i, 6 + kPhaseKinds);
      if (csv.columns() > 7 + kPhaseKinds) {
        row.peak_live_bytes = csv.number<std::uint64_t>(i, 7 + kPhaseKinds);
        row.peak_tile_live_bytes = csv.number<std::uint64_t>(i, 8 + kPhaseKinds);
      }
      if (csv.columns() > 9 + kPhaseKinds) row.group = csv.text(i, 9 + kPhaseKinds);
      r.layers.push_back(std::move(row));
    }
  }
  const std::string plan_path = dir + "/plan.csv";
  if (std::filesystem::exists(plan_path, ec)) {
    // Before weight_height and swapped (issue 28).
    constexpr std::string_view kPlanHeaderBeforeSwap =
        "ipu,layer,pass,op,name,shape,dtype,partials,vertex,amp,tiles,group_split,row_split,"
        "out_split,in_split,serial_in,serial_out,available_memory_proportion,budget_bytes,"
        "temporary_bytes,rearranged_bytes,estimated_cycles,simulated_cycles,rearrangement_cycles";
    // Before expanded (issue 28).
    const std::string header_before_expanded =
        std::string(kPlanHeaderBeforeSwap) + ",weight_height,swapped";
    // Before joint (issue 28).
    const std::string header_before_joint = header_before_expanded + ",expanded";
    Csv csv(plan_path, kMaxPlanCsvBytes, plan_header(),
            {kPlanHeaderBeforeSwap, header_before_expanded, header_before_joint});
    for (std::size_t i = 0; i < csv.size(); ++i) {
      PlanRow p;
      std::size_t c = 0;
      p.ipu = csv.number<std::uint32_t>(i, c++);
      for (std::string* text :
           {&p.layer, &p.pass, &p.op, &p.name, &p.shape, &p.dtype, &p.partials, &p.vertex})
        *text = csv.text(i, c++);
      const std::string& amp = csv.text(i, c++);
      if (amp != "yes" && amp != "no")
        throw Error(fmt::format("{}:{}: column amp: expected yes or no, found \"{}\"", plan_path,
                                i + 2, amp));
      p.amp = amp == "yes";
      for (std::uint32_t* n : {&p.tiles, &p.group_split, &p.row_split, &p.out_split, &p.in_split,
                               &p.serial_in, &p.serial_out})
        *n = csv.number<std::uint32_t>(i, c++);
      p.available_memory = csv.number<double>(i, c++);
      for (std::uint64_t* n : {&p.budget_bytes, &p.temporary_bytes, &p.rearranged_bytes,
                               &p.estimated_cycles, &p.simulated_cycles, &p.rearrangement_cycles})
        *n = csv.number<std::uint64_t>(i, c++);
      if (csv.columns() > c) {
        p.weight_height = csv.number<std::uint32_t>(i, c++);
        const std::string& swapped = csv.text(i, c++);
        if (swapped != "yes" && swapped != "no")
          throw Error(fmt::format("{}:{}: column swapped: expected yes or no, found \"{}\"",
                                  plan_path, i + 2, swapped));
        p.swapped = swapped == "yes";
      }
      if (csv.columns() > c) {
        p.expanded = csv.text(i, c++);
        if (p.expanded != "no" && p.expanded != "rows" && p.expanded != "columns" &&
            p.expanded != "both")
          throw Error(fmt::format(
              "{}:{}: column expanded: expected no, rows, columns or both, found \"{}\"", plan_path,
              i + 2, p.expanded));
      }
      if (csv.columns() > c) {
        const std::string& joint = csv.text(i, c++);
        if (joint != "yes" && joint != "no")
          throw Error(fmt::format("{}:{}: column joint: expected yes or no, found \"{}\"",
                                  plan_path, i + 2, joint));
        p.joint = joint == "yes";
      }
      r.plans.push_back(std::move(p));
    }
  }
  return r;
}

std::optional<double> find_stat(const RunDir& run, const std::string& path) {
  const JsonValue* v = json_field(run.stats, path);
  if (!v) return std::nullopt;
  return v->number.d;
}

double stat(const RunDir& run, const std::string& path) {
  if (auto v = find_stat(run, path)) return *v;
  throw Error(
      fmt::format("{}/stats.json: key \"{}\": expected a number, found none", run.path, path));
}

std::vector<StatField> flatten_stats(const JsonValue& stats) {
  std::vector<StatField> out;
  flatten(stats, "", "", out);
  return out;
}

double Comparison::StatDiff::relative() const {
  if (a == 0) return b == 0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), b);
  return (b - a) / std::fabs(a);
}

Comparison compare_runs(const RunDir& a, const RunDir& b) {
  Comparison c;
  std::map<std::string, std::pair<std::string, std::string>> keys;
  for (const auto& [k, v] : a.config) keys[k].first = v;
  for (const auto& [k, v] : b.config) keys[k].second = v;
  for (const auto& [k, v] : keys) {
    const std::string va = a.config.count(k) ? v.first : "(absent)";
    const std::string vb = b.config.count(k) ? v.second : "(absent)";
    if (va != vb) c.config.push_back({k, va, vb});
  }
  const auto fa = flatten_stats(a.stats), fb = flatten_stats(b.stats);
  std::map<std::string, const StatField*> in_a, in_b;
  for (const auto& f : fa) in_a[f.path] = &f;
  for (const auto& f : fb) in_b[f.path] = &f;
  // A compute set several layers share has its FLOPs split among them, so a layer's FLOPs can
  // move to another while the IPU's work is the same: where an IPU's layer FLOPs add up to the
  // same in both runs, a layer row's FLOPs (and the utilisation computed from them, when its
  // compute time is the same) are not reported as changed.
  std::map<std::string, std::pair<double, double>> ipu_flops;  // "ipu[k]" -> A, B
  const auto layer_field = [](const std::string& path, const std::string& field) {
    const auto at = path.find(".layers[");
    const bool match = at != std::string::npos && path.ends_with("]." + field);
    return match ? path.substr(0, at) : std::string();
  };
  for (const auto& f : fa)
    if (const std::string ipu = layer_field(f.path, "flops"); !ipu.empty())
      ipu_flops[ipu].first += f.value;
  for (const auto& f : fb)
    if (const std::string ipu = layer_field(f.path, "flops"); !ipu.empty())
      ipu_flops[ipu].second += f.value;
  const auto attribution_only = [&](const std::string& path) {
    for (const char* field : {"flops", "compute_phase_utilisation"}) {
      const std::string ipu = layer_field(path, field);
      if (ipu.empty()) continue;
      const auto& [sa, sb] = ipu_flops[ipu];
      if (!same_value(sa, sb)) return false;
      if (std::string_view(field) == "flops") return true;
      // The utilisation moved with the FLOPs only if the row's compute time did not.
      const std::string row = path.substr(0, path.size() - std::string(field).size());
      const std::string cycles = row + "cycles.compute";
      const auto a_it = in_a.find(cycles), b_it = in_b.find(cycles);
      return a_it != in_a.end() && b_it != in_b.end() &&
             same_value(a_it->second->value, b_it->second->value);
    }
    return false;
  };
  for (const auto& f : fa) {
    auto it = in_b.find(f.path);
    if (it == in_b.end()) continue;
    ++c.fields;
    if (!same_value(f.value, it->second->value) && !attribution_only(f.path))
      c.stats.push_back({f.path, f.unit, f.value, it->second->value});
  }
  std::stable_sort(c.stats.begin(), c.stats.end(), [](const auto& x, const auto& y) {
    return std::fabs(x.relative()) > std::fabs(y.relative());
  });
  return c;
}

}  // namespace ipusim::report
