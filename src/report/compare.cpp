// SPDX-License-Identifier: Apache-2.0
#include "ipusim/report/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <map>
#include <tuple>

#include "ipusim/util/error.hpp"
#include "ipusim/util/json.hpp"

namespace ipusim::report {
namespace {

// floor(log10(v)) for v > 0, as an int (0 for infinities: stats.json is input).
int floor_log10(double v) {
  const double l = std::floor(std::log10(v));
  return std::isfinite(l) ? static_cast<int>(std::clamp(l, -400.0, 400.0)) : 0;
}

// `v` rounded to `digits` significant digits, as a double (so that 9.99996 becomes 10).
double round_sig(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  return std::stod(fmt::format("{:.{}e}", v, digits - 1));
}

// `v` to `digits` significant digits in fixed notation, without exponent: 12.35, 1296, 0.0423.
std::string sig(double v, int digits, bool sign) {
  v = round_sig(v, digits);
  if (v == 0) return "0";
  const int e = floor_log10(std::fabs(v));
  const int decimals = std::max(0, digits - 1 - e);
  return fmt::format("{}{:.{}f}", sign && v > 0 ? "+" : "", v, decimals);
}

// k x 10^exp10 as decimal text: exact, no floating point. `strip` drops trailing zeros after
// the point (JSON); otherwise the text has exactly -exp10 decimals (aligned columns).
std::string decimal(std::int64_t k, int exp10, bool sign, bool strip) {
  std::string digits = std::to_string(k < 0 ? -static_cast<std::uint64_t>(k) : k);
  std::string out;
  if (exp10 >= 0) {
    out = k == 0 ? "0" : digits + std::string(static_cast<std::size_t>(exp10), '0');
  } else {
    const auto d = static_cast<std::size_t>(-exp10);
    if (digits.size() <= d) digits.insert(0, d + 1 - digits.size(), '0');
    out = digits.substr(0, digits.size() - d) + "." + digits.substr(digits.size() - d);
    if (strip) {
      while (out.back() == '0') out.pop_back();
      if (out.back() == '.') out.pop_back();
    }
  }
  if (k < 0) return "-" + out;
  return (sign && k > 0 ? "+" : "") + out;
}

// A stats.json number as `ipusim compare` has always printed it: whole numbers in full, others
// to 6 significant digits.
std::string plain(double v, bool sign) {
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    return sign ? fmt::format("{:+.0f}", v) : fmt::format("{:.0f}", v);
  return sign ? fmt::format("{:+.6g}", v) : fmt::format("{:.6g}", v);
}

// A double as an integer, clamped to the range (stats.json is input: never an undefined cast).
std::int64_t clamped(double v) {
  if (!(v > -9.2e18)) return v != v ? 0 : -9'200'000'000'000'000'000;
  if (v > 9.2e18) return 9'200'000'000'000'000'000;
  return static_cast<std::int64_t>(v);
}
std::int64_t rounded(double v) { return clamped(std::round(v)); }
std::uint64_t whole(double v) {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(0, clamped(v)));
}

std::string time_direction(double delta) {
  return delta < 0 ? "faster" : delta > 0 ? "slower" : "same";
}
std::string share_direction(double delta) {
  return delta < 0 ? "less time" : delta > 0 ? "more time" : "same";
}

const JsonValue& ipu_list(const RunDir& r) {
  const JsonValue* ipus = r.stats.find("ipu");
  if (!ipus || ipus->kind != JsonValue::Kind::kArray || ipus->items.empty())
    throw Error(fmt::format("{}/stats.json: key \"ipu\": expected a non-empty array, found {}",
                            r.path, ipus ? "another value" : "no such key"));
  return *ipus;
}

// The position in ipu[] of the IPU whose program sets the step time: the first that ran
// longest, as stats.json's "phases" (report.cpp: totals) choose it.
std::size_t critical_position(const RunDir& r) {
  const std::size_t n = ipu_list(r).items.size();
  std::size_t best = 0;
  double most = -1;
  for (std::size_t i = 0; i < n; ++i) {
    const double c = stat(r, fmt::format("ipu[{}].cycles", i));
    if (c > most) {
      most = c;
      best = i;
    }
  }
  return best;
}

std::string unit_of(const RunDir& r, std::initializer_list<std::string_view> path) {
  const JsonValue* v = &r.stats;
  for (auto k : path)
    if (!(v = v->find(k))) return "";
  const JsonValue* u = v->find("unit");
  return u && u->kind == JsonValue::Kind::kString ? u->string : "";
}

std::string text_at(const RunDir& r, std::initializer_list<std::string_view> path) {
  const JsonValue* v = &r.stats;
  for (auto k : path)
    if (!(v = v->find(k))) return "";
  return v->kind == JsonValue::Kind::kString ? v->string : "";
}

std::optional<double> peak_tile_memory(const RunDir& r) {
  std::optional<double> peak;
  const std::size_t n = ipu_list(r).items.size();
  for (std::size_t i = 0; i < n; ++i)
    if (auto m = find_stat(r, fmt::format("ipu[{}].tiles.memory.max", i)))
      peak = std::max(peak.value_or(0.0), *m);
  return peak;
}

// The time unit for a duration.
std::pair<std::string, double> time_unit(double seconds) {
  const double a = std::fabs(seconds);
  if (a >= 1) return {"s", 1};
  if (a >= 1e-3) return {"ms", 1e-3};
  if (a >= 1e-6) return {"us", 1e-6};
  return {"ns", 1e-9};
}

}  // namespace

std::optional<double> HeadlineRow::delta() const {
  if (!a || !b) return std::nullopt;
  return same_value(*a, *b) ? 0.0 : *b - *a;
}

std::optional<double> HeadlineRow::relative() const {
  const auto d = delta();
  if (!d || *a == 0) return std::nullopt;
  return *d / std::fabs(*a);
}

bool ExplainedComparison::identical() const { return settings.empty() && stats.stats.empty(); }

std::vector<std::int64_t> apportion(const std::vector<double>& values, double total,
                                    double quantum) {
  std::vector<std::int64_t> out(values.size(), 0);
  // Beyond 10^15 units (never for a run's own times) the values are only rounded: no integer
  // sum may overflow.
  constexpr double kLimit = 1e15;
  bool small = std::fabs(total / quantum) <= kLimit;
  for (double v : values) small = small && std::fabs(v / quantum) <= kLimit;
  if (!small || values.size() > 9000) {
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = rounded(values[i] / quantum);
    return out;
  }
  const std::int64_t target = rounded(total / quantum);
  std::int64_t sum = 0;
  std::vector<std::pair<double, std::size_t>> fractions;  // (fractional part, index)
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double r = values[i] / quantum, f = std::floor(r);
    out[i] = clamped(f);
    sum += out[i];
    if (r != f) fractions.push_back({r - f, i});
  }
  std::int64_t missing = target - sum;
  // Round up the largest fractional parts (or, when the values sum to a little more than the
  // total, down the smallest); exact values are never moved.
  std::stable_sort(fractions.begin(), fractions.end(),
                   [&](const auto& x, const auto& y) { return x.first > y.first; });
  if (missing > 0) {
    for (std::size_t j = 0; j < fractions.size() && missing > 0; ++j, --missing)
      ++out[fractions[j].second];
  } else {
    for (std::size_t j = fractions.size(); j-- > 0 && missing < 0; ++missing)
      --out[fractions[j].second];
  }
  return out;
}

std::string format_seconds(double s, int digits, bool sign) {
  if (s == 0) return "0 s";
  const double a = std::fabs(round_sig(s, digits));
  if (a >= 7200) return sig(s / 3600, digits, sign) + " h";
  if (a >= 120) return sig(s / 60, digits, sign) + " min";
  const auto [unit, per] = time_unit(a);
  return sig(s / per, digits, sign) + " " + unit;
}

std::string format_quantity(double v, const std::string& unit, int digits, bool sign) {
  if (unit == "s") return format_seconds(v, digits, sign);
  if (unit == "B") {
    static constexpr std::array<std::string_view, 5> kNames{"B", "KiB", "MiB", "GiB", "TiB"};
    std::size_t i = 0;
    double x = v;
    while (std::fabs(round_sig(x, digits)) >= 1024.0 && i + 1 < kNames.size()) {
      x /= 1024.0;
      ++i;
    }
    if (i == 0) return plain(std::round(x), sign) + " B";
    return sig(x, digits, sign) + " " + std::string(kNames[i]);
  }
  return unit.empty() ? sig(v, digits, sign) : sig(v, digits, sign) + " " + unit;
}

std::string format_percent(std::optional<double> relative) {
  if (!relative) return "-";
  if (*relative == 0) return "0%";
  return sig(100 * *relative, 3, true) + "%";
}

std::string plan_split_text(const PlanRow& p, std::string_view times) {
  return fmt::format("{1}{0}{2}{0}{3}{0}{4}", times, p.group_split, p.row_split, p.out_split,
                     p.in_split);
}
std::string plan_serial_text(const PlanRow& p) {
  return p.serial_in > 1    ? fmt::format("{} (in)", p.serial_in)
         : p.serial_out > 1 ? fmt::format("{} (out)", p.serial_out)
                            : "1";
}

namespace {

// "what: A -> B" for each field of two plans that differs; a conv only one side has is
// "... only in A" (or B).
std::vector<std::string> plan_differences(const std::optional<PlanRow>& a,
                                          const std::optional<PlanRow>& b) {
  if (!a || !b) {
    const PlanRow& p = a ? *a : *b;
    return {fmt::format("{} {} (tiles {}, split {}): {}", p.op, p.shape, p.tiles,
                        plan_split_text(p), a ? "only in A" : "only in B")};
  }
  std::vector<std::string> out;
  const auto diff = [&](const char* what, const std::string& x, const std::string& y) {
    if (x != y) out.push_back(fmt::format("{} {} -> {}", what, x, y));
  };
  const auto bytes = [](std::uint64_t v) { return format_quantity(static_cast<double>(v), "B"); };
  diff("shape", a->shape, b->shape);
  diff("tiles", std::to_string(a->tiles), std::to_string(b->tiles));
  diff("split", plan_split_text(*a), plan_split_text(*b));
  diff("serial", plan_serial_text(*a), plan_serial_text(*b));
  diff("vertex", a->vertex, b->vertex);
  diff("weight height", std::to_string(a->weight_height), std::to_string(b->weight_height));
  diff("operands", a->swapped ? "swapped" : "as given", b->swapped ? "swapped" : "as given");
  diff("kernel expanded", a->expanded, b->expanded);
  diff("planned jointly", a->joint ? "yes" : "no", b->joint ? "yes" : "no");
  diff("budget", bytes(a->budget_bytes), bytes(b->budget_bytes));
  diff("temporaries", bytes(a->temporary_bytes), bytes(b->temporary_bytes));
  diff("rearranged", bytes(a->rearranged_bytes), bytes(b->rearranged_bytes));
  diff("estimated cycles", std::to_string(a->estimated_cycles),
       std::to_string(b->estimated_cycles));
  diff("simulated cycles", std::to_string(a->simulated_cycles),
       std::to_string(b->simulated_cycles));
  return out;
}

}  // namespace

ExplainedComparison explain_comparison(const RunDir& a, const RunDir& b) {
  ExplainedComparison e;
  e.path_a = a.path;
  e.path_b = b.path;
  e.trace_a = text_at(a, {"trace", "name"});
  e.trace_b = text_at(b, {"trace", "name"});
  e.clock_a = stat(a, "chip.clock");  // positive: load_run_dir checks it
  e.clock_b = stat(b, "chip.clock");
  e.step = {stat(a, "total.time"), stat(b, "total.time")};
  e.cycles_a = whole(stat(a, "total.cycles"));
  e.cycles_b = whole(stat(b, "total.cycles"));
  const std::size_t pos_a = critical_position(a), pos_b = critical_position(b);
  e.critical_a = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(whole(stat(a, fmt::format("ipu[{}].index", pos_a))), 0xffffffffu));
  e.critical_b = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(whole(stat(b, fmt::format("ipu[{}].index", pos_b))), 0xffffffffu));

  // Headline.
  const bool workload = a.stats.find("workload") || b.stats.find("workload");
  HeadlineRow step{"step_time", workload ? "step time" : "run time", "s", e.step.a, e.step.b, ""};
  step.direction = time_direction(step.delta().value_or(0));
  e.headline.push_back(step);
  HeadlineRow thr{"throughput",
                  "throughput",
                  unit_of(a, {"workload", "throughput"}),
                  find_stat(a, "workload.throughput"),
                  find_stat(b, "workload.throughput"),
                  ""};
  if (thr.unit.empty()) thr.unit = unit_of(b, {"workload", "throughput"});
  HeadlineRow ttt{"time_to_train",
                  "time to train",
                  "s",
                  find_stat(a, "workload.time_to_train.total"),
                  find_stat(b, "workload.time_to_train.total"),
                  ""};
  HeadlineRow mem{"peak_tile_memory",  "peak tile memory",  "B",
                  peak_tile_memory(a), peak_tile_memory(b), ""};
  for (HeadlineRow* h : {&thr, &ttt, &mem}) {
    if (!h->a && !h->b) continue;
    if (!h->a || !h->b) {
      h->direction = h->a ? "only in A" : "only in B";
    } else {
      const double d = *h->delta();
      if (h == &thr)
        h->direction = d > 0 ? "higher" : d < 0 ? "lower" : "same";
      else if (h == &ttt)
        h->direction = time_direction(d);
      else
        h->direction = d > 0 ? "more memory" : d < 0 ? "less memory" : "same memory";
    }
    e.headline.push_back(*h);
  }

  // By phase kind: the critical IPU's phase cycles (stats.json "phases") add up to its program
  // time, which is total.cycles; in seconds at each run's clock.
  for (const PhaseInfo& p : kPhases) {
    PhaseAttribution pa;
    pa.kind = p.kind;
    const std::string key = fmt::format("phases.{}.cycles", p.name);
    pa.a_cycles = whole(stat(a, key));
    pa.b_cycles = whole(stat(b, key));
    pa.time = {static_cast<double>(pa.a_cycles) / e.clock_a,
               static_cast<double>(pa.b_cycles) / e.clock_b};
    pa.direction = share_direction(same_value(pa.time.a, pa.time.b) ? 0 : pa.time.delta());
    e.phases.push_back(pa);
  }

  // By layer: layers.csv rows of each run's critical IPU, matched by (layer, pass).
  auto rows_of = [](const RunDir& r, std::uint32_t ipu) {
    std::vector<const LayerCsvRow*> out;
    for (const auto& row : r.layers)
      if (row.ipu == ipu) out.push_back(&row);
    return out;
  };
  const auto la = rows_of(a, e.critical_a), lb = rows_of(b, e.critical_b);
  e.have_layers = !la.empty() && !lb.empty();
  if (e.have_layers) {
    std::map<std::pair<std::string, std::string>, LayerAttribution> rows;
    std::map<std::pair<std::string, std::string>, int> sides;  // 1: A, 2: B, 3: both
    auto add = [&](const LayerCsvRow& row, double clock, bool is_b) {
      LayerAttribution& l = rows[{row.layer, row.pass}];
      l.layer = row.layer;
      l.pass = row.pass;
      const double t = static_cast<double>(row.cycles.total()) / clock;
      (is_b ? l.time.b : l.time.a) += t;
      for (std::size_t k = 0; k < kPhaseKinds; ++k)
        l.phase_delta.values[k] +=
            (is_b ? 1 : -1) * static_cast<double>(row.cycles.values[k]) / clock;
      sides[{row.layer, row.pass}] |= is_b ? 2 : 1;
    };
    for (const auto* row : la) add(*row, e.clock_a, false);
    for (const auto* row : lb) add(*row, e.clock_b, true);
    for (auto& [key, l] : rows) {
      const int side = sides[key];
      l.direction = side == 1 ? "only in A"
                    : side == 2
                        ? "only in B"
                        : share_direction(same_value(l.time.a, l.time.b) ? 0 : l.time.delta());
      e.layers.push_back(std::move(l));
    }
    std::stable_sort(e.layers.begin(), e.layers.end(), [](const auto& x, const auto& y) {
      return std::fabs(x.time.delta()) > std::fabs(y.time.delta());
    });
    // Per phase kind, the row that moved most in the direction the kind moved (the one that
    // explains it), or in either direction when the kind did not move.
    for (auto& p : e.phases) {
      const auto k = static_cast<std::size_t>(p.kind);
      const double sign = p.time.delta() > 0 ? 1 : p.time.delta() < 0 ? -1 : 0;
      for (const auto& l : e.layers)
        if (const double d = l.phase_delta.values[k];
            (sign == 0 || d * sign > 0) && std::fabs(d) > std::fabs(p.top_delta)) {
          p.top_delta = l.phase_delta.values[k];
          p.top_layer = l.layer;
          p.top_pass = l.pass;
        }
      if (std::fabs(p.top_delta) <= 1e-9 * std::max(e.step.a, e.step.b)) p.top_layer.clear();
    }
  }

  // The plans of the layer rows' convs and matmuls (plan.csv of the same IPUs).
  e.have_plans = !a.plans.empty() && !b.plans.empty();
  if (e.have_plans) {
    using Key = std::pair<std::string, std::string>;
    std::map<Key, std::vector<const PlanRow*>> pa, pb;
    for (const auto& p : a.plans)
      if (p.ipu == e.critical_a) pa[{p.layer, p.pass}].push_back(&p);
    for (const auto& p : b.plans)
      if (p.ipu == e.critical_b) pb[{p.layer, p.pass}].push_back(&p);
    for (const auto& l : e.layers) {
      const Key key{l.layer, l.pass};
      const auto& xa = pa[key];
      const auto& xb = pb[key];
      for (std::size_t k = 0; k < std::max(xa.size(), xb.size()); ++k) {
        PlanChange c;
        c.layer = l.layer;
        c.pass = l.pass;
        if (k < xa.size()) c.a = *xa[k];
        if (k < xb.size()) c.b = *xb[k];
        c.changes = plan_differences(c.a, c.b);
        if (!c.changes.empty()) e.plans.push_back(std::move(c));
      }
    }
  }

  // Settings and stats.
  e.stats = compare_runs(a, b);
  e.settings = e.stats.config;
  const std::string id_a = text_at(a, {"trace", "identity"}),
                    id_b = text_at(b, {"trace", "identity"});
  if (id_a != id_b)
    e.settings.push_back({"trace", fmt::format("{} ({})", e.trace_a, id_a.substr(0, 12)),
                          fmt::format("{} ({})", e.trace_b, id_b.substr(0, 12))});
  return e;
}

std::string AttributionView::in_unit(double seconds, bool sign) const {
  const double q = std::pow(10.0, -decimals);
  return decimal(rounded(seconds / unit_seconds / q), -decimals, sign, false);
}

AttributionView attribution_view(const ExplainedComparison& e, std::size_t layers) {
  AttributionView v;
  // The unit of the shorter step (of the longer if one is 0): 898.5 us -> 1.134 ms is in us.
  const double shorter = std::min(e.step.a, e.step.b);
  std::tie(v.unit, v.unit_seconds) =
      time_unit(shorter > 0 ? shorter : std::max(e.step.a, e.step.b));
  // Four significant digits of the largest change (step, phase kind or layer row), at most
  // picoseconds.
  double largest = std::fabs(e.step.delta());
  for (const auto& p : e.phases) largest = std::max(largest, std::fabs(p.time.delta()));
  for (const auto& l : e.layers) largest = std::max(largest, std::fabs(l.time.delta()));
  const int max_decimals = static_cast<int>(std::lround(std::log10(v.unit_seconds / 1e-12)));
  if (largest > 0) {
    const int exp = floor_log10(largest / v.unit_seconds);
    v.decimals = std::clamp(3 - exp, 0, max_decimals);
  } else {
    v.decimals =
        std::clamp(3 - floor_log10(std::max(e.step.a, 1e-300) / v.unit_seconds), 0, max_decimals);
  }
  const double q = std::pow(10.0, -v.decimals) * v.unit_seconds;  // seconds per printed unit
  const double step_delta = e.step_delta();
  v.step_a = v.in_unit(e.step.a);
  v.step_b = v.in_unit(e.step.b);
  v.step_delta = decimal(rounded(step_delta / q), -v.decimals, true, false);
  std::vector<double> deltas;
  for (const auto& p : e.phases) {
    v.phase_a.push_back(v.in_unit(p.time.a));
    v.phase_b.push_back(v.in_unit(p.time.b));
    deltas.push_back(p.time.delta());
  }
  const auto phase_units = apportion(deltas, step_delta, q);
  for (std::size_t k = 0; k < e.phases.size(); ++k) {
    v.phase_delta.push_back(decimal(phase_units[k], -v.decimals, true, false));
    const std::string& d = e.phases[k].direction;
    v.phase_direction.push_back(phase_units[k] == 0 && d != "same" ? "about the same" : d);
  }
  if (e.have_layers) {
    deltas.clear();
    for (const auto& l : e.layers) deltas.push_back(l.time.delta());
    const auto ks = apportion(deltas, step_delta, q);
    std::int64_t other = 0;
    for (std::size_t i = 0; i < e.layers.size(); ++i) {
      if (i < layers) {
        v.layer_a.push_back(v.in_unit(e.layers[i].time.a));
        v.layer_b.push_back(v.in_unit(e.layers[i].time.b));
        v.layer_delta.push_back(decimal(ks[i], -v.decimals, true, false));
        const std::string& d = e.layers[i].direction;
        v.layer_direction.push_back(ks[i] == 0 && d.ends_with(" time") ? "about the same" : d);
      } else {
        other += ks[i];
        ++v.other_layers;
      }
    }
    v.other_delta = decimal(other, -v.decimals, true, false);
  }
  return v;
}

namespace {

std::string truncated(const std::string& s, std::size_t n) {
  return s.size() > n ? s.substr(0, n - 3) + "..." : s;
}

}  // namespace

std::string attribution_equation(const ExplainedComparison& e) {
  const AttributionView v = attribution_view(e, 0);
  std::string out = fmt::format("step {} {} =", v.step_delta, v.unit);
  // Terms in order of size, largest first; zero terms left out.
  std::vector<std::size_t> order;
  for (std::size_t k = 0; k < e.phases.size(); ++k)
    if (std::strtod(v.phase_delta[k].c_str(), nullptr) != 0) order.push_back(k);
  std::stable_sort(order.begin(), order.end(), [&](auto x, auto y) {
    return std::fabs(std::strtod(v.phase_delta[x].c_str(), nullptr)) >
           std::fabs(std::strtod(v.phase_delta[y].c_str(), nullptr));
  });
  if (order.empty()) return out + " 0 (no phase kind moved)";
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto& p = e.phases[order[i]];
    out += fmt::format("{} {} {} {}", i ? " +" : "", phase_name(p.kind), v.phase_delta[order[i]],
                       v.unit);
    if (!p.top_layer.empty() && i < 3 && std::strtod(v.in_unit(p.top_delta).c_str(), nullptr) != 0)
      out += fmt::format(" (top: {}{} {} {})", truncated(p.top_layer, 32),
                         p.top_pass.empty() ? "" : " " + p.top_pass, v.in_unit(p.top_delta, true),
                         v.unit);
  }
  return out;
}

namespace {

std::string headline_text(const ExplainedComparison& e) {
  std::vector<std::array<std::string, 6>> rows{{"", "A", "B", "delta", "change", "direction"}};
  for (const auto& h : e.headline) {
    const auto d = h.delta();
    rows.push_back({h.label, h.a ? format_quantity(*h.a, h.unit) : "-",
                    h.b ? format_quantity(*h.b, h.unit) : "-",
                    d ? (*d == 0 ? "0" : format_quantity(*d, h.unit, 4, true)) : "-",
                    format_percent(h.relative()), h.direction});
  }
  std::array<std::size_t, 6> w{};
  for (const auto& r : rows)
    for (std::size_t i = 0; i < 6; ++i) w[i] = std::max(w[i], r[i].size());
  std::string out = "headline (B against A):\n";
  for (const auto& r : rows)
    out += fmt::format("  {:<{}}  {:>{}}  {:>{}}  {:>{}}  {:>{}}  {}\n", r[0], w[0], r[1], w[1],
                       r[2], w[2], r[3], w[3], r[4], w[4], r[5]);
  return out;
}

}  // namespace

std::vector<const PlanChange*> plan_changes_of(const ExplainedComparison& e, std::size_t layers) {
  std::vector<const PlanChange*> out;
  const std::size_t shown = std::min(layers, e.layers.size());
  for (const auto& c : e.plans)
    for (std::size_t i = 0; i < shown; ++i)
      if (e.layers[i].layer == c.layer && e.layers[i].pass == c.pass) {
        out.push_back(&c);
        break;
      }
  return out;
}

namespace {

std::string plan_changes_text(const ExplainedComparison& e, std::size_t layers) {
  if (!e.have_plans)
    return "\nplan changes: unavailable (plan.csv, written by 'ipusim run --run ... --out', is "
           "missing in A or B)\n";
  const auto changes = plan_changes_of(e, layers);
  std::string out = fmt::format(
      "\nplan changes of those rows (plan.csv: what the planner chose for their convs and "
      "matmuls, A -> B): {}\n",
      changes.empty() ? "none, every plan is the same" : std::to_string(changes.size()));
  for (const PlanChange* c : changes) {
    const PlanRow& p = c->a ? *c->a : *c->b;
    out += fmt::format("  {} {} ({} {})\n", c->layer, c->pass, p.op, p.shape);
    for (const auto& d : c->changes) out += "      " + d + "\n";
  }
  return out;
}

}  // namespace

std::string explained_text(const ExplainedComparison& e, std::size_t top, std::size_t layers) {
  auto trace = [](const std::string& name) {
    return name.empty() ? std::string() : "  (trace " + name + ")";
  };
  std::string out = fmt::format("ipusim compare\n  A  {}{}\n  B  {}{}\n\n", e.path_a,
                                trace(e.trace_a), e.path_b, trace(e.trace_b));
  out += headline_text(e);
  if (e.identical()) {
    out += fmt::format(
        "\nno differences: the same settings and the same {} stats.json fields (the step time "
        "has nothing to attribute)\n",
        e.stats.fields);
    return out;
  }
  const AttributionView v = attribution_view(e, layers);
  out += fmt::format(
      "\nstep time change by phase kind (of the IPU that sets the step time: IPU {} in A, IPU {} "
      "in B):\n  {}\n",
      e.critical_a, e.critical_b, attribution_equation(e));
  const std::string ua = "A [" + v.unit + "]", ub = "B [" + v.unit + "]",
                    ud = "delta [" + v.unit + "]";
  std::size_t w = std::max({ud.size(), v.step_a.size(), v.step_b.size()});
  for (std::size_t k = 0; k < e.phases.size(); ++k)
    w = std::max({w, v.phase_a[k].size(), v.phase_b[k].size()});
  out += fmt::format("  {:<14}  {:>{}}  {:>{}}  {:>{}}  {}\n", "phase", ua, w, ub, w, ud, w,
                     "direction");
  for (std::size_t k = 0; k < e.phases.size(); ++k) {
    const auto& p = e.phases[k];
    if (p.a_cycles == 0 && p.b_cycles == 0) continue;
    out += fmt::format("  {:<14}  {:>{}}  {:>{}}  {:>{}}  {}\n", phase_name(p.kind), v.phase_a[k],
                       w, v.phase_b[k], w, v.phase_delta[k], w, v.phase_direction[k]);
  }
  out += fmt::format("  {:<14}  {:>{}}  {:>{}}  {:>{}}  {}\n", "step (total)", v.step_a, w,
                     v.step_b, w, v.step_delta, w, e.headline.front().direction);

  if (!e.have_layers) {
    out +=
        "\nstep time change by layer: unavailable (layers.csv, written by 'ipusim run --out' with "
        "the fast engine, is missing in A or B or has no rows for the IPU that sets the step)\n";
  } else {
    const std::size_t shown = std::min(layers, e.layers.size());
    out += fmt::format(
        "\nstep time change by layer (layers.csv of the same IPUs; the {} rows that moved most, of "
        "{}):\n",
        shown, e.layers.size());
    std::size_t lw = 5, pw = 4, nw = std::max(w, v.other_delta.size());
    for (std::size_t i = 0; i < shown; ++i) {
      lw = std::max(lw, std::min<std::size_t>(40, e.layers[i].layer.size()));
      pw = std::max(pw, e.layers[i].pass.size());
      nw = std::max({nw, v.layer_a[i].size(), v.layer_b[i].size()});
    }
    out += fmt::format("  {:<{}}  {:<{}}  {:>{}}  {:>{}}  {:>{}}  {}\n", "layer", lw, "pass", pw,
                       ua, nw, ub, nw, ud, nw, "direction");
    for (std::size_t i = 0; i < shown; ++i) {
      const auto& l = e.layers[i];
      out += fmt::format("  {:<{}}  {:<{}}  {:>{}}  {:>{}}  {:>{}}  {}\n", truncated(l.layer, 40),
                         lw, l.pass, pw, v.layer_a[i], nw, v.layer_b[i], nw, v.layer_delta[i], nw,
                         v.layer_direction[i]);
    }
    if (v.other_layers)
      out += fmt::format("  {:<{}}  {:<{}}  {:>{}}  {:>{}}  {:>{}}\n",
                         fmt::format("({} other rows)", v.other_layers), lw, "", pw, "", nw, "", nw,
                         v.other_delta, nw);
    out += plan_changes_text(e, shown);
  }

  out += fmt::format("\nsettings that differ (config.resolved.yaml and the trace, A -> B: {}):\n",
                     e.settings.size());
  std::size_t kw = 3;
  for (const auto& d : e.settings) kw = std::max(kw, d.key.size());
  for (const auto& d : e.settings)
    out += fmt::format("  {:<{}}  {}  ->  {}\n", d.key, kw, d.a, d.b);
  if (e.settings.empty()) out += "  (none)\n";

  const auto& c = e.stats;
  const std::size_t shown = std::min(top, c.stats.size());
  out += fmt::format("\nstats that moved most ({} of {} changed, of {} compared):\n", shown,
                     c.stats.size(), c.fields);
  std::size_t fw = 5;
  for (std::size_t i = 0; i < shown; ++i)
    fw = std::max(fw, c.stats[i].path.size() + c.stats[i].unit.size() + 3);
  out += fmt::format("  {:<{}}  {:>14}  {:>14}  {:>14}  {:>9}  {}\n", "field", fw, "A", "B",
                     "delta", "%", "direction");
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& s = c.stats[i];
    const double rel = s.relative();
    out += fmt::format("  {:<{}}  {:>14}  {:>14}  {:>14}  {:>9}  {}\n",
                       s.unit.empty() ? s.path : fmt::format("{} [{}]", s.path, s.unit), fw,
                       plain(s.a, false), plain(s.b, false), plain(s.delta(), true),
                       std::isfinite(rel) ? format_percent(rel) : "new",
                       s.delta() > 0 ? "up" : "down");
  }
  if (c.stats.empty()) out += "  (no stat changed)\n";
  return out;
}

std::string explained_json(const ExplainedComparison& e, std::size_t top, std::size_t layers) {
  // Seconds on one grid: 12 significant digits of the longer step. Changes are apportioned on
  // it, so the phase kinds' (and the layer rows') changes add up exactly to the step's.
  const double longest = std::max({e.step.a, e.step.b, 1e-300});
  const int exp = floor_log10(longest) - 11;
  const double q = std::pow(10.0, exp);
  auto seconds = [&](double s) { return decimal(rounded(s / q), exp, false, true); };
  // Other numbers to 12 significant digits: the text of a double, without its noise.
  auto num = [](double v) { return fmt::format("{:.12g}", v); };
  JsonWriter w;
  w.begin_object();
  w.key("format").value("ipusim-compare/1");
  auto side = [&](const char* key, const std::string& path, const std::string& trace,
                  std::uint32_t ipu, double clock) {
    w.key(key).begin_object();
    w.key("path").value(path).key("trace").value(trace);
    w.key("critical_ipu").value(ipu);
    w.key("clock").begin_object().key("value").number_text(num(clock));
    w.key("unit").value("Hz").end_object();
    w.end_object();
  };
  side("a", e.path_a, e.trace_a, e.critical_a, e.clock_a);
  side("b", e.path_b, e.trace_b, e.critical_b, e.clock_b);
  w.key("identical").value(e.identical());

  w.key("headline").begin_array();
  for (const auto& h : e.headline) {
    w.begin_object().key("name").value(h.key).key("label").value(h.label);
    w.key("unit").value(h.unit);
    auto opt = [&](const char* k, std::optional<double> v) {
      w.key(k);
      if (v)
        w.number_text(num(*v));
      else
        w.null();
    };
    opt("a", h.a);
    opt("b", h.b);
    opt("delta", h.delta());
    opt("relative", h.relative());
    w.key("direction").value(h.direction).end_object();
  }
  w.end_array();

  const double step_delta = e.step_delta();
  w.key("attribution").begin_object();
  w.key("unit").value("s");
  w.key("step").begin_object();
  w.key("a").number_text(seconds(e.step.a)).key("b").number_text(seconds(e.step.b));
  w.key("delta").number_text(seconds(step_delta));
  w.key("direction").value(e.headline.front().direction).end_object();
  std::vector<double> deltas;
  for (const auto& p : e.phases) deltas.push_back(p.time.delta());
  auto ks = apportion(deltas, step_delta, q);
  w.key("phases").begin_array();
  for (std::size_t k = 0; k < e.phases.size(); ++k) {
    const auto& p = e.phases[k];
    w.begin_object().key("phase").value(phase_name(p.kind));
    w.key("a_cycles").value(p.a_cycles).key("b_cycles").value(p.b_cycles);
    w.key("a").number_text(seconds(p.time.a)).key("b").number_text(seconds(p.time.b));
    w.key("delta").number_text(decimal(ks[k], exp, false, true));
    w.key("direction").value(p.direction);
    w.key("top_layer");
    if (p.top_layer.empty()) {
      w.null();
    } else {
      w.begin_object().key("layer").value(p.top_layer).key("pass").value(p.top_pass);
      w.key("delta").number_text(seconds(p.top_delta)).end_object();
    }
    w.end_object();
  }
  w.end_array();
  w.key("layers_available").value(e.have_layers);
  w.key("layers").begin_array();
  if (e.have_layers) {
    deltas.clear();
    for (const auto& l : e.layers) deltas.push_back(l.time.delta());
    ks = apportion(deltas, step_delta, q);
    std::int64_t other = 0;
    for (std::size_t i = 0; i < e.layers.size(); ++i) {
      if (i >= layers) {
        other += ks[i];
        continue;
      }
      const auto& l = e.layers[i];
      w.begin_object().key("layer").value(l.layer).key("pass").value(l.pass);
      w.key("a").number_text(seconds(l.time.a)).key("b").number_text(seconds(l.time.b));
      w.key("delta").number_text(decimal(ks[i], exp, false, true));
      w.key("direction").value(l.direction);
      w.key("phases").begin_object();
      for (const PhaseInfo& p : kPhases)
        if (const double d = l.phase_delta[p.kind]; d != 0) w.key(p.name).number_text(seconds(d));
      w.end_object().end_object();
    }
    w.end_array();
    w.key("other_layers").begin_object();
    w.key("rows").value(
        static_cast<std::uint64_t>(e.layers.size() > layers ? e.layers.size() - layers : 0));
    w.key("delta").number_text(decimal(other, exp, false, true)).end_object();
  } else {
    w.end_array();
  }
  w.end_object();

  w.key("plans_available").value(e.have_plans);
  w.key("plans").begin_array();
  const auto plan_json = [&](const std::optional<PlanRow>& p) {
    if (!p) {
      w.null();
      return;
    }
    w.begin_object().key("op").value(p->op).key("shape").value(p->shape);
    w.key("tiles").value(static_cast<std::uint64_t>(p->tiles));
    w.key("split").value(plan_split_text(*p)).key("serial").value(plan_serial_text(*p));
    w.key("vertex").value(p->vertex).key("budget_bytes").value(p->budget_bytes);
    w.key("temporary_bytes").value(p->temporary_bytes);
    w.key("rearranged_bytes").value(p->rearranged_bytes);
    w.key("estimated_cycles").value(p->estimated_cycles);
    w.key("simulated_cycles").value(p->simulated_cycles).end_object();
  };
  for (const PlanChange* c : plan_changes_of(e, layers)) {
    w.begin_object().key("layer").value(c->layer).key("pass").value(c->pass);
    w.key("a");
    plan_json(c->a);
    w.key("b");
    plan_json(c->b);
    w.key("changes").begin_array();
    for (const auto& d : c->changes) w.value(d);
    w.end_array().end_object();
  }
  w.end_array();

  w.key("settings").begin_array();
  for (const auto& d : e.settings)
    w.begin_object().key("key").value(d.key).key("a").value(d.a).key("b").value(d.b).end_object();
  w.end_array();

  w.key("stats").begin_object();
  w.key("compared").value(static_cast<std::uint64_t>(e.stats.fields));
  w.key("changed").value(static_cast<std::uint64_t>(e.stats.stats.size()));
  w.key("fields").begin_array();
  for (std::size_t i = 0; i < e.stats.stats.size() && i < top; ++i) {
    const auto& s = e.stats.stats[i];
    const double rel = s.relative();
    w.begin_object().key("path").value(s.path).key("unit").value(s.unit);
    w.key("a").number_text(num(s.a)).key("b").number_text(num(s.b));
    w.key("delta").number_text(num(s.delta())).key("relative");
    if (std::isfinite(rel))
      w.number_text(num(rel));
    else
      w.null();
    w.key("direction").value(s.delta() > 0 ? "up" : "down").end_object();
  }
  w.end_array().end_object();
  w.end_object();
  return w.str() + "\n";
}

}  // namespace ipusim::report
