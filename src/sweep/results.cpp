// SPDX-License-Identifier: Apache-2.0
#include "ipusim/sweep/results.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "ipusim/util/error.hpp"
#include "ipusim/util/json.hpp"
#include "ipusim/util/json_reader.hpp"

namespace ipusim::sweep {
namespace {

constexpr std::string_view kRecordFormat = "ipusim-sweep-point-result/1";

std::string number_at(const JsonValue& root, std::string_view path) {
  const JsonValue* v = json_field(root, path);
  return v ? v->number.text : std::string();
}

// "256.0" -> "256" (a count written as a double); other text unchanged.
std::string integral_text(const std::string& text) {
  const auto n = JsonNumber::parse(text);
  if (n && !n->integral && n->d == std::floor(n->d) && std::fabs(n->d) < 1e15)
    return fmt::format("{:.0f}", n->d);
  return text;
}

std::string string_at(const JsonValue& root, std::string_view key) {
  const JsonValue* v = root.find(key);
  return v && v->kind == JsonValue::Kind::kString ? v->string : std::string();
}

// Writes a number given as JSON text: integers exactly, others through the writer's double
// format (the format stats.json was written in, so the text round-trips); "" -> null.
void number(JsonWriter& w, const std::string& text) {
  const auto n = JsonNumber::parse(text);
  if (!n) {
    w.value(std::numeric_limits<double>::quiet_NaN());  // null
  } else if (n->integral) {
    w.value(n->i);
  } else {
    w.value(n->d);
  }
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

PointResult result_from_stats(const PointPlan& plan, const JsonValue& stats,
                              const std::string& origin) {
  PointResult r = failed_result(plan, "");
  r.ok = true;
  r.cycles = number_at(stats, "total.cycles");
  r.step_time_s = number_at(stats, "total.time");
  if (r.step_time_s.empty())
    throw Error(fmt::format("{}: expected total.time, found none", origin));
  r.throughput = number_at(stats, "workload.throughput");
  if (!r.throughput.empty()) {
    const JsonValue* wl = stats.find("workload");
    const JsonValue* t = wl ? wl->find("throughput") : nullptr;
    r.throughput_unit = t ? string_at(*t, "unit") : "";
    r.samples_per_step = integral_text(number_at(stats, "workload.samples_per_step"));
    const JsonValue* s = wl ? wl->find("samples_per_step") : nullptr;
    r.samples_unit = s ? string_at(*s, "unit") : "";
    r.time_to_train_s = number_at(stats, "workload.time_to_train.total");
  }
  for (const PhaseInfo& p : kPhases)
    r.breakdown_s[p.kind] = number_at(stats, fmt::format("phases.{}.time", p.name));
  r.flop_utilisation = number_at(stats, "throughput.utilisation");
  double peak = -1;
  if (const JsonValue* ipus = stats.find("ipu"))
    for (const JsonValue& ipu : ipus->items)
      if (const JsonValue* m = json_field(ipu, "tiles.memory.max"); m && m->number.d > peak) {
        peak = m->number.d;
        r.peak_tile_memory_b = integral_text(m->number.text);
      }
  r.tile_memory_b = number_at(stats, "chip.tile_memory");
  return r;
}

PointResult failed_result(const PointPlan& plan, const std::string& error) {
  PointResult r;
  r.id = plan.id;
  r.index = plan.index;
  r.values = plan.values;
  r.ok = false;
  r.error = error;
  r.workload = plan.workload;
  r.system = plan.system;
  r.ipus = plan.ipus;
  return r;
}

// The fields a point record and a sweep.json point share: what ran and what it measured.
static void write_outcome(JsonWriter& w, const PointResult& r) {
  w.key("workload").value(r.workload);
  w.key("system").value(r.system);
  w.key("ipus").value(r.ipus);
  w.key("cycles");
  number(w, r.cycles);
  w.key("step_time_s");
  number(w, r.step_time_s);
  w.key("throughput");
  number(w, r.throughput);
  w.key("throughput_unit").value(r.throughput_unit);
  w.key("samples_per_step");
  number(w, r.samples_per_step);
  w.key("samples_unit").value(r.samples_unit);
  w.key("time_to_train_s");
  number(w, r.time_to_train_s);
  w.key("breakdown_s").begin_object();
  for (const PhaseInfo& p : kPhases) {
    w.key(p.name);
    number(w, r.breakdown_s[p.kind]);
  }
  w.end_object();
  w.key("flop_utilisation");
  number(w, r.flop_utilisation);
  w.key("peak_tile_memory_B");
  number(w, r.peak_tile_memory_b);
  w.key("tile_memory_B");
  number(w, r.tile_memory_b);
}

std::string point_record(const PointResult& r) {
  JsonWriter w;
  w.begin_object();
  w.key("format").value(kRecordFormat);
  w.key("id").value(r.id);
  w.key("status").value(r.ok ? "ok" : "failed");
  w.key("error").value(r.error);
  write_outcome(w, r);
  w.end_object();
  return w.str() + "\n";
}

PointResult parse_point_record(const std::string& text, const std::string& origin) {
  const JsonValue root = parse_json(text, origin);
  if (root.kind != JsonValue::Kind::kObject || string_at(root, "format") != kRecordFormat)
    throw Error(fmt::format("{}: expected a point record of format {}", origin, kRecordFormat));
  // A record is what point_record() wrote: each measurement a number, or null where the point
  // has none (a kernel has no throughput). Anything else is a damaged record, never an empty
  // column of sweep.csv.
  const auto measured = [&](std::string_view path) {
    const JsonValue* v = json_find(root, path);
    if (!v || v->kind == JsonValue::Kind::kNull) return std::string();
    if (v->kind != JsonValue::Kind::kNumber)
      throw Error(fmt::format("{}: {}: expected a number or null, found a {}", origin, path,
                              json_kind(*v)));
    return v->number.text;
  };
  PointResult r;
  r.id = string_at(root, "id");
  r.ok = string_at(root, "status") == "ok";
  r.error = string_at(root, "error");
  r.workload = string_at(root, "workload");
  r.system = string_at(root, "system");
  const std::string ipus = measured("ipus");
  if (!ipus.empty()) {
    const auto n = JsonNumber::parse(ipus);
    if (!n || !n->integral || n->i < 0)
      throw Error(fmt::format("{}: ipus: expected a whole number, found {}", origin, ipus));
    r.ipus = static_cast<std::uint64_t>(n->i);
  }
  r.cycles = measured("cycles");
  r.step_time_s = measured("step_time_s");
  r.throughput = measured("throughput");
  r.throughput_unit = string_at(root, "throughput_unit");
  r.samples_per_step = measured("samples_per_step");
  r.samples_unit = string_at(root, "samples_unit");
  r.time_to_train_s = measured("time_to_train_s");
  for (const PhaseInfo& p : kPhases)
    r.breakdown_s[p.kind] = measured(fmt::format("breakdown_s.{}", p.name));
  r.flop_utilisation = measured("flop_utilisation");
  r.peak_tile_memory_b = measured("peak_tile_memory_B");
  r.tile_memory_b = measured("tile_memory_B");
  if (r.id.empty() || (r.ok && (r.step_time_s.empty() || r.cycles.empty())))
    throw Error(fmt::format("{}: expected id, cycles and step_time_s in a point record", origin));
  return r;
}

std::string sweep_csv(const std::vector<std::string>& axis_keys,
                      const std::vector<PointResult>& results) {
  std::string out = "index,id";
  for (const auto& k : axis_keys) out += "," + csv_field(k);
  out +=
      ",status,workload,system_name,ipus,cycles,step_time_s,throughput,throughput_unit,"
      "global_batch,global_batch_unit,time_to_train_s";
  for (const PhaseInfo& p : kPhases) out += fmt::format(",{}_s", p.name);
  out += ",flop_utilisation,peak_tile_memory_B,tile_memory_B,error\n";
  for (const auto& r : results) {
    out += fmt::format("{},{}", r.index, r.id);
    for (const auto& k : axis_keys) {
      std::string v;
      for (const auto& [key, value] : r.values)
        if (key == k) v = value;
      out += "," + csv_field(v);
    }
    out += fmt::format(",{},{},{},{},{},{},{},{},{},{},{}", r.ok ? "ok" : "failed",
                       csv_field(r.workload), csv_field(r.system), r.ipus, r.cycles, r.step_time_s,
                       r.throughput, csv_field(r.throughput_unit), r.samples_per_step,
                       csv_field(r.samples_unit), r.time_to_train_s);
    for (const PhaseInfo& p : kPhases) out += "," + r.breakdown_s[p.kind];
    out += "," + r.flop_utilisation + "," + r.peak_tile_memory_b + "," + r.tile_memory_b + "," +
           csv_field(r.error) + "\n";
  }
  return out;
}

std::string sweep_json(const std::string& spec_file, const std::string& name,
                       const std::vector<PointResult>& results) {
  JsonWriter w;
  w.begin_object();
  w.key("format").value("ipusim-sweep/1");
  w.key("spec").value(spec_file);
  w.key("name").value(name);
  w.key("points").begin_array();
  for (const auto& r : results) {
    w.begin_object();
    w.key("index").value(static_cast<std::uint64_t>(r.index));
    w.key("id").value(r.id);
    w.key("overrides").begin_object();
    for (const auto& [k, v] : r.values) w.key(k).value(v);
    w.end_object();
    w.key("status").value(r.ok ? "ok" : "failed");
    w.key("error").value(r.error);
    w.key("run_dir").value("points/" + r.id);
    write_outcome(w, r);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.str() + "\n";
}

std::string point_error(const std::string& child_stderr, const std::string& fallback,
                        const std::string& work_dir, const std::string& run_dir) {
  std::string line;
  const std::size_t end = child_stderr.find_last_not_of("\n\r ");
  if (end != std::string::npos) {
    const std::size_t start = child_stderr.rfind('\n', end);
    line = child_stderr.substr(start == std::string::npos ? 0 : start + 1,
                               end - (start == std::string::npos ? 0 : start + 1) + 1);
  }
  if (line.starts_with("error: ")) line = line.substr(7);
  if (line.empty()) line = fallback;
  for (std::size_t pos = 0;
       !work_dir.empty() && (pos = line.find(work_dir, pos)) != std::string::npos;) {
    line.replace(pos, work_dir.size(), run_dir);
    pos += run_dir.size();
  }
  return line;
}

}  // namespace ipusim::sweep
