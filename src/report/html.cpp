// SPDX-License-Identifier: Apache-2.0
#include "ipusim/report/html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "ipusim/report/compare.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::report {
namespace {

// Heat maps are drawn for at most this many IPUs (an --all-replicas POD256 run has 256).
constexpr std::size_t kMaxHeatMaps = 16;
constexpr std::size_t kHeatColumns = 64;  // tiles per heat-map row

std::string esc(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
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
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v) {
  if (std::fabs(v) >= 1e9 || (v != 0 && std::fabs(v) < 1e-3)) return fmt::format("{:.4g}", v);
  if (v == std::floor(v) || std::fabs(v) >= 1000) return fmt::format("{:.0f}", v);
  return fmt::format("{:.4g}", v);
}

// Viridis-like colour for t in [0, 1].
std::string heat_colour(double t) {
  static const std::array<std::array<double, 3>, 5> stops{
      {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 4;
  const auto i = std::min<std::size_t>(3, static_cast<std::size_t>(t));
  const double f = t - static_cast<double>(i);
  auto ch = [&](int k) {
    return static_cast<int>(std::lround(stops[i][k] + f * (stops[i + 1][k] - stops[i][k])));
  };
  return fmt::format("#{:02x}{:02x}{:02x}", ch(0), ch(1), ch(2));
}

struct Bar {
  std::string label;
  double value = 0;
  std::string note;  // tooltip extra
};

// Horizontal bars, largest scale = the largest value.
std::string bar_chart(const std::string& id, const std::vector<Bar>& bars, const std::string& unit,
                      const std::string& colour) {
  const int label_w = 300, bar_w = 420, row_h = 20, h = static_cast<int>(bars.size()) * row_h + 10;
  double max = 0;
  for (const auto& b : bars) max = std::max(max, b.value);
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" role=\"img\">\n",
      id, label_w + bar_w + 140, h);
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const int y = static_cast<int>(i) * row_h + 5;
    const double w = max > 0 ? bars[i].value / max * bar_w : 0;
    std::string label =
        bars[i].label.size() > 44
            ? bars[i].label.substr(0, 20) + "..." + bars[i].label.substr(bars[i].label.size() - 21)
            : bars[i].label;
    s += fmt::format(
        "<g class=\"bar\"><title>{}: {} {}{}</title><text x=\"{}\" y=\"{}\" "
        "text-anchor=\"end\">{}</text>"
        "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{}\">{} {}</text></g>\n",
        esc(bars[i].label), num(bars[i].value), esc(unit), esc(bars[i].note), label_w - 6, y + 14,
        esc(label), label_w, y + 2, w, row_h - 4, colour, label_w + w + 4, y + 14,
        num(bars[i].value), esc(unit));
  }
  return s + "</svg>\n";
}

// One stacked horizontal bar per row (e.g. per IPU), segments in kPhases order, with a legend.
// Bars fill the width (shares) unless `absolute`: then the longest row fills it.
using PhaseRow = std::pair<std::string, PerPhase<double>>;  // (label, cycles per kind)

std::string time_split_chart(const std::string& id, const std::vector<PhaseRow>& rows,
                             bool absolute = false) {
  const int label_w = 90, bar_w = 640, row_h = 26;
  const int legend_y = static_cast<int>(rows.size()) * row_h + 12;
  double legend_w = label_w;
  for (const PhaseInfo& p : kPhases) legend_w += 28 + 8.0 * p.name.size();
  double longest = 0;
  for (const auto& r : rows) longest = std::max(longest, r.second.total());
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" "
      "height=\"{}\" role=\"img\">\n",
      id, std::max<double>(label_w + bar_w + 20, legend_w), legend_y + 30);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const double sum = rows[r].second.total();
    const double total = absolute ? longest : sum;
    const int y = static_cast<int>(r) * row_h + 4;
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", label_w - 6, y + 16,
                     esc(rows[r].first));
    double x = label_w;
    for (const PhaseInfo& p : kPhases) {
      const double v = rows[r].second[p.kind];
      if (v <= 0 || total <= 0) continue;
      const double w = v / total * bar_w;
      s += fmt::format(
          "<rect class=\"segment\" data-phase=\"{}\" x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" "
          "height=\"{}\" fill=\"{}\"><title>{}: {:.1f}% ({} cycles)</title></rect>\n",
          p.name, x, y, w, row_h - 6, p.colour, p.name, 100 * v / sum, num(v));
      x += w;
    }
  }
  double lx = label_w;
  for (const PhaseInfo& p : kPhases) {
    s += fmt::format(
        "<rect x=\"{:.0f}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{:.0f}\" y=\"{}\">{}</text>\n",
        lx, legend_y, p.colour, lx + 14, legend_y + 10, p.name);
    lx += 14 + 8.0 * p.name.size() + 14;
  }
  return s + "</svg>\n";
}

// Tiles as a grid of squares, coloured by value / scale (PopVision-like tile map).
std::string heat_map(const std::string& id, const std::vector<double>& values, double scale,
                     const std::string& unit, const std::string& legend) {
  const int cell = 11;
  const std::size_t rows = (values.size() + kHeatColumns - 1) / kHeatColumns;
  const int w = static_cast<int>(kHeatColumns) * cell, h = static_cast<int>(rows) * cell;
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" role=\"img\" data-tiles=\"{}\">\n",
      id, w + 10, h + 40, values.size());
  for (std::size_t t = 0; t < values.size(); ++t) {
    const auto x = static_cast<int>(t % kHeatColumns) * cell;
    const auto y = static_cast<int>(t / kHeatColumns) * cell;
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>tile {}: "
        "{} {}</title></rect>\n",
        x, y, cell - 1, cell - 1, heat_colour(scale > 0 ? values[t] / scale : 0), t, num(values[t]),
        esc(unit));
  }
  // Colour scale.
  for (int i = 0; i < 10; ++i)
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"20\" height=\"10\" fill=\"{}\"/>", i * 20,
                     h + 8, heat_colour(i / 9.0));
  s += fmt::format("<text x=\"210\" y=\"{}\">0 .. {} {} ({})</text>\n</svg>\n", h + 17, num(scale),
                   esc(unit), esc(legend));
  return s;
}

const JsonValue* member(const JsonValue& v, std::string_view key) { return v.find(key); }
std::string text_of(const JsonValue& root, std::initializer_list<std::string_view> path) {
  const JsonValue* v = &root;
  for (auto k : path) {
    v = v->find(k);
    if (!v) return "";
  }
  return v->kind == JsonValue::Kind::kString ? v->string : "";
}

std::string row(const std::string& k, const std::string& v) {
  return fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", esc(k), esc(v));
}

constexpr const char* kStyle = R"(<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}th,td{padding:3px 10px;text-align:left;border-bottom:1px solid #eee;font-size:13px}
td.n{text-align:right;font-variant-numeric:tabular-nums}
svg text{font-size:11px;fill:#333}svg.heatmap rect:hover,g.bar:hover rect{stroke:#000}
.note{color:#666;font-size:12px}.failed{color:#b00}
td.better{color:#1a7f37}td.worse{color:#b00}svg text.axis-title{font-size:12px}
#js-errors{color:#b00}
</style>
)";

// Records script errors into the page (the headless test reads them back) and marks the page
// ready; highlights a heat-map tile's value under the pointer.
constexpr const char* kScript = R"(<script>
window.addEventListener('error', function (e) {
  var d = document.getElementById('js-errors');
  if (d) d.textContent += 'error: ' + e.message + '\n';
});
document.addEventListener('DOMContentLoaded', function () {
  document.querySelectorAll('svg.heatmap').forEach(function (svg) {
    var out = document.getElementById(svg.id + '-value');
    svg.addEventListener('mouseover', function (e) {
      var t = e.target.querySelector && e.target.querySelector('title');
      if (t && out) out.textContent = t.textContent;
    });
  });
  document.body.setAttribute('data-ready', '1');
});
</script>
)";

std::string page(const std::string& title, const std::string& body) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>{}</title>\n"
      "{}{}</head>\n<body>\n<h1>{}</h1>\n<pre id=\"js-errors\"></pre>\n{}"
      "<p class=\"note\">Generated by ipusim {}; self-contained (no network access "
      "needed).</p>\n</body></html>\n",
      esc(title), kStyle, kScript, esc(title), body, IPUSIM_VERSION);
}

std::string summary_section(const RunDir& run) {
  const auto& s = run.stats;
  std::string b = "<h2>Summary</h2>\n<table id=\"summary\">\n";
  b += row("run directory", run.path);
  b += row("trace", text_of(s, {"trace", "name"}));
  b += row("system",
           fmt::format("{}: {} IPU(s) = {} replica(s); {} simulated",
                       text_of(s, {"system", "name"}), num(stat(run, "system.ipus")),
                       num(stat(run, "system.replicas")), num(stat(run, "system.simulated_ipus"))));
  b += row("chip",
           fmt::format("{}: {} tiles at {}, {} per tile", text_of(s, {"chip", "name"}),
                       num(stat(run, "chip.tiles")), human_frequency(stat(run, "chip.clock")),
                       human_bytes(stat(run, "chip.tile_memory"))));
  // Which vertex timing model the run used (issue 18); older run directories have none.
  if (const JsonValue* chip = member(s, "chip"))
    if (const JsonValue* m = chip->find("tile_model"); m && m->kind == JsonValue::Kind::kString)
      b += row("tile model", m->string == "isa"
                                 ? "instruction-level (chip.tile_model=isa)"
                                 : "closed-form codelet models (chip.tile_model=closed_form)");
  b += row("step time", fmt::format("{} ({} cycles)", human_seconds(stat(run, "total.time")),
                                    num(stat(run, "total.cycles"))));
  if (const JsonValue* w = member(s, "workload")) {
    b += row("workload", text_of(*w, {"model"}));
    const JsonValue* tp = w->find("throughput");
    b += row("throughput", fmt::format("{:.1f} {}", stat(run, "workload.throughput"),
                                       tp ? text_of(*tp, {"unit"}) : ""));
    if (auto latency = find_stat(run, "workload.latency"))
      b += row("latency", human_seconds(*latency) + " per batch");
    if (find_stat(run, "workload.time_to_train.total"))
      b += row("time to train",
               fmt::format("{:.1f} min ({} steps)", stat(run, "workload.time_to_train.total") / 60,
                           num(stat(run, "workload.time_to_train.steps"))));
  }
  if (auto u = find_stat(run, "throughput.utilisation"))
    b += row("FP16 utilisation", fmt::format("{:.1f}% of peak", 100 * *u));
  return b + "</table>\n";
}

std::string time_section(const RunDir& run) {
  std::vector<PhaseRow> rows;
  PerPhase<double> total;
  for (const PhaseInfo& p : kPhases)
    total[p.kind] = stat(run, fmt::format("phases.{}.cycles", p.name));
  rows.emplace_back("slowest IPU", total);
  const JsonValue* ipus = run.stats.find("ipu");
  const std::size_t n = ipus ? ipus->items.size() : 0;
  for (std::size_t i = 0; i < n && n > 1 && i < kMaxHeatMaps; ++i) {
    PerPhase<double> m;
    for (const PhaseInfo& p : kPhases)
      m[p.kind] = stat(run, fmt::format("ipu[{}].phases.{}.cycles", i, p.name));
    rows.emplace_back(fmt::format("IPU {}", num(stat(run, fmt::format("ipu[{}].index", i)))), m);
  }
  std::string b = "<h2>Where the time goes</h2>\n" + time_split_chart("chart-time-split", rows);
  b += "<table><tr><th>phase</th><th>cycles</th><th>share</th><th>count</th></tr>\n";
  for (const PhaseInfo& p : kPhases)
    b += fmt::format(
        "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1f}%</td><td "
        "class=\"n\">{}</td></tr>\n",
        p.name, num(total[p.kind]), 100 * stat(run, fmt::format("phases.{}.share", p.name)),
        num(stat(run, fmt::format("phases.{}.count", p.name))));
  return b + "</table>\n";
}

std::string tiles_section(const RunDir& run) {
  std::string b = "<h2>Tiles</h2>\n";
  if (run.tiles.empty())
    return b +
           "<p class=\"note\">No tiles.csv in the run directory (written by ipusim run --out since "
           "the reports were added): per-tile maps unavailable.</p>\n";
  const double capacity = stat(run, "chip.tile_memory");
  std::size_t drawn = 0;
  for (const auto& [ipu, tiles] : run.tiles) {
    if (drawn++ == kMaxHeatMaps) {
      b += fmt::format("<p class=\"note\">Maps of the other {} IPUs omitted.</p>\n",
                       run.tiles.size() - kMaxHeatMaps);
      break;
    }
    std::vector<double> mem, cmp;
    double cmax = 0, csum = 0, msum = 0;
    for (const auto& t : tiles) {
      mem.push_back(static_cast<double>(t.memory_bytes));
      cmp.push_back(static_cast<double>(t.compute_cycles));
      cmax = std::max(cmax, cmp.back());
      csum += cmp.back();
      msum += mem.back();
    }
    const double cmean = tiles.empty() ? 0 : csum / static_cast<double>(tiles.size());
    b += fmt::format("<h3>IPU {}</h3>\n<p>Memory per tile (of {} each; mean {:.1f}%):</p>\n", ipu,
                     human_bytes(capacity),
                     tiles.empty() || capacity <= 0
                         ? 0.0
                         : 100 * msum / static_cast<double>(tiles.size()) / capacity);
    // Coloured against the fullest tile, so that imbalance shows even when memory is mostly free.
    const double mmax = mem.empty() ? 0 : *std::max_element(mem.begin(), mem.end());
    b += heat_map(fmt::format("heatmap-memory-ipu{}", ipu), mem, mmax, "B",
                  fmt::format("fullest tile = top, {:.1f}% of capacity",
                              capacity > 0 ? 100 * mmax / capacity : 0.0));
    b += fmt::format("<div class=\"note\" id=\"heatmap-memory-ipu{}-value\"></div>\n", ipu);
    b += fmt::format(
        "<p>Compute balance: busy cycles per tile (mean {} / max {}, balance {:.1f}%):</p>\n",
        num(cmean), num(cmax), cmax > 0 ? 100 * cmean / cmax : 100.0);
    b += heat_map(fmt::format("heatmap-compute-ipu{}", ipu), cmp, cmax, "cycles",
                  "busiest tile = top");
    b += fmt::format("<div class=\"note\" id=\"heatmap-compute-ipu{}-value\"></div>\n", ipu);
    std::vector<std::uint32_t> idx(tiles.size());
    for (std::uint32_t i = 0; i < idx.size(); ++i) idx[i] = i;
    const std::size_t k = std::min<std::size_t>(10, idx.size());
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                      [&](auto x, auto y) { return mem[x] != mem[y] ? mem[x] > mem[y] : x < y; });
    b += fmt::format(
        "<table id=\"worst-tiles-ipu{}\"><tr><th>tile</th><th>memory</th><th>of capacity</th>"
        "<th>busy cycles</th><th>exchange bytes</th></tr>\n",
        ipu);
    for (std::size_t i = 0; i < k; ++i) {
      const auto& t = tiles[idx[i]];
      b += fmt::format(
          "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1f}%</td><td "
          "class=\"n\">{}</td>"
          "<td class=\"n\">{}</td></tr>\n",
          idx[i], human_bytes(mem[idx[i]]), capacity > 0 ? 100 * mem[idx[i]] / capacity : 0.0,
          t.compute_cycles, t.exchange_bytes);
    }
    b += "</table>\n";
  }
  return b;
}

std::string phases_section(const RunDir& run) {
  const JsonValue* ipus = run.stats.find("ipu");
  if (!ipus || ipus->items.empty()) return "";
  auto bars = [&](const char* key) {
    std::vector<Bar> out;
    if (const JsonValue* list = ipus->items[0].find(key))
      for (std::size_t i = 0; i < list->items.size(); ++i)
        out.push_back(
            {text_of(list->items[i], {"name"}),
             stat(run, fmt::format("ipu[0].{}[{}].cycles", key, i)),
             fmt::format(" over {} executions",
                         num(stat(run, fmt::format("ipu[0].{}[{}].executions", key, i))))});
    return out;
  };
  std::string b = fmt::format("<h2>Top compute sets and exchanges (IPU {})</h2>\n",
                              num(stat(run, "ipu[0].index")));
  b += "<h3>Compute sets by total time</h3>\n" +
       bar_chart("chart-top-compute-sets", bars("top_compute_sets"), "cycles", "#4e79a7");
  b += "<h3>Exchanges by total time</h3>\n" +
       bar_chart("chart-top-exchanges", bars("top_exchanges"), "cycles", "#e15759");
  return b;
}

std::string supersteps_section(const RunDir& run) {
  if (run.supersteps.empty()) return "";
  // The 20 longest supersteps of the first IPU, split into compute / sync / exchange / other.
  const std::uint32_t ipu = run.supersteps.front().ipu;
  std::vector<const SuperstepRow*> rows;
  for (const auto& r : run.supersteps)
    if (r.ipu == ipu) rows.push_back(&r);
  auto total = [](const SuperstepRow* r) { return r->cycles.total(); };
  // Everything but the on-chip BSP phases, drawn in the collective colour.
  auto other = [](const SuperstepRow* r) {
    return r->cycles.total() - r->cycles[PhaseKind::kCompute] - r->cycles[PhaseKind::kSync] -
           r->cycles[PhaseKind::kExchange];
  };
  std::stable_sort(rows.begin(), rows.end(), [&](auto a, auto b) { return total(a) > total(b); });
  if (rows.size() > 20) rows.resize(20);
  std::vector<PhaseRow> chart;
  std::string table =
      "<table><tr><th>superstep</th><th>step</th><th>executions</th><th>compute</th><th>sync</th>"
      "<th>exchange</th><th>other</th><th>active tiles</th></tr>\n";
  for (const auto* r : rows) {
    PerPhase<double> split;
    for (auto k : {PhaseKind::kCompute, PhaseKind::kSync, PhaseKind::kExchange})
      split[k] = static_cast<double>(r->cycles[k]);
    split[PhaseKind::kCollective] = static_cast<double>(other(r));
    chart.emplace_back(fmt::format("#{}", r->index), split);
    table += fmt::format(
        "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td "
        "class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
        r->index, esc(r->step), r->executions, r->cycles[PhaseKind::kCompute],
        r->cycles[PhaseKind::kSync], r->cycles[PhaseKind::kExchange], other(r), r->active_tiles);
  }
  return fmt::format(
             "<h2>Longest supersteps (IPU {})</h2>\n<p class=\"note\">Each bar is one superstep's "
             "split (all its executions; 'collective' colour = host, external sync, inter-IPU "
             "and collective time). Full data: supersteps.csv.</p>\n",
             ipu) +
         time_split_chart("chart-supersteps", chart, /*absolute=*/true) + table + "</table>\n";
}

// A diverging horizontal bar chart of changes (B - A): zero at its place in the range, round
// ticks on a labelled axis, each bar's value at its end.
struct DeltaBar {
  std::string label;
  double value = 0;  // in the axis unit
  std::string text;  // the value as printed
  std::string colour;
};

double nice_step(double range) {
  const double raw = range / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

std::string delta_chart(const std::string& id, const std::vector<DeltaBar>& bars,
                        const std::string& axis_title) {
  const int label_w = 250, pad = 90, plot_w = 520, row_h = 22, top = 8;
  const int plot_h = static_cast<int>(bars.size()) * row_h;
  double lo = 0, hi = 0;
  for (const auto& b : bars) {
    lo = std::min(lo, b.value);
    hi = std::max(hi, b.value);
  }
  if (hi - lo <= 0) hi = lo + 1;
  const double step = nice_step(hi - lo);
  // Whole ticks around the bars; zero stays an end when nothing passes it.
  lo = lo < 0 ? std::floor(lo / step) * step : 0.0;
  hi = hi > 0 ? std::ceil(hi / step) * step : 0.0;
  const double x0 = label_w + pad;
  auto x = [&](double v) { return x0 + (v - lo) / (hi - lo) * plot_w; };
  const int w = label_w + 2 * pad + plot_w, h = top + plot_h + 48;
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" role=\"img\">\n",
      id, w, h);
  // Grid and tick labels.
  for (double t = lo; t <= hi + step / 2; t += step) {
    const double v = std::fabs(t) < step / 1e6 ? 0.0 : t;
    s += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#e4e4e4\"/>"
        "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        x(v), top, x(v), top + plot_h, x(v), top + plot_h + 14, fmt::format("{:g}", v));
  }
  s += fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#999\"/>\n"
      "<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#333\"/>\n",
      x(lo), top + plot_h, x(hi), top + plot_h, x(0), top - 4, x(0), top + plot_h);
  s += fmt::format(
      "<text class=\"axis-title\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
      x0 + plot_w / 2.0, top + plot_h + 36, esc(axis_title));
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const auto& b = bars[i];
    const int y = top + static_cast<int>(i) * row_h;
    const double x1 = x(std::min(0.0, b.value)), x2 = x(std::max(0.0, b.value));
    const std::string label =
        b.label.size() > 38 ? b.label.substr(0, 17) + "..." + b.label.substr(b.label.size() - 18)
                            : b.label;
    s += fmt::format(
        "<g class=\"bar\"><title>{}: {}</title><text x=\"{}\" y=\"{}\" "
        "text-anchor=\"end\">{}</text><rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" "
        "height=\"{}\" fill=\"{}\"/><text x=\"{:.1f}\" y=\"{}\" text-anchor=\"{}\">{}</text></g>\n",
        esc(b.label), esc(b.text), label_w - 6, y + 15, esc(label), x1, y + 3,
        std::max(x2 - x1, 0.5), row_h - 6, b.colour, b.value < 0 ? x1 - 4 : x2 + 4, y + 15,
        b.value < 0 ? "end" : "start", esc(b.text));
  }
  return s + "</svg>\n";
}

// better / worse for a direction label (the colour of its cell).
std::string direction_cell(const std::string& d) {
  static const std::array<std::string_view, 4> kBetter{"faster", "higher", "less memory",
                                                       "less time"};
  static const std::array<std::string_view, 4> kWorse{"slower", "lower", "more memory",
                                                      "more time"};
  const bool better = std::find(kBetter.begin(), kBetter.end(), d) != kBetter.end();
  const bool worse = std::find(kWorse.begin(), kWorse.end(), d) != kWorse.end();
  return fmt::format("<td{}>{}</td>",
                     better  ? " class=\"better\""
                     : worse ? " class=\"worse\""
                             : "",
                     esc(d));
}

std::string compare_section(const RunDir& a, const RunDir& b) {
  const ExplainedComparison e = explain_comparison(a, b);
  const std::size_t kLayers = 12;
  std::string s = fmt::format(
      "<h2>Compared with {}</h2>\n<div id=\"compare\">\n<p class=\"note\">A = this run ({}), "
      "B = the other run ({}); every delta is B &minus; A.</p>\n<h3>Headline</h3>\n"
      "<table id=\"compare-headline\"><tr><th></th><th>A (this run)</th><th>B (other run)</th>"
      "<th>delta</th><th>change</th><th>direction</th></tr>\n",
      esc(b.path), esc(a.path), esc(b.path));
  for (const auto& h : e.headline) {
    const auto d = h.delta();
    s += fmt::format(
        "<tr><th>{}</th><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td>{}</tr>\n",
        esc(h.label), h.a ? esc(format_quantity(*h.a, h.unit)) : "-",
        h.b ? esc(format_quantity(*h.b, h.unit)) : "-",
        d ? (*d == 0 ? "0" : esc(format_quantity(*d, h.unit, 4, true))) : "-",
        esc(format_percent(h.relative())), direction_cell(h.direction));
  }
  s += "</table>\n";
  if (e.identical())
    return s + fmt::format(
                   "<p id=\"compare-none\">No differences: the same settings and the same {} "
                   "stats.json fields.</p>\n</div>\n",
                   e.stats.fields);

  const AttributionView v = attribution_view(e, kLayers);
  s += fmt::format(
      "<h3>Where the step-time change comes from</h3>\n<p id=\"compare-equation\"><code>{}</code>"
      "</p>\n<p class=\"note\">By phase kind, on the IPU that sets the step time (IPU {} in A, "
      "IPU {} in B); the terms add up to the step-time change.</p>\n",
      esc(attribution_equation(e)), e.critical_a, e.critical_b);
  std::vector<DeltaBar> bars;
  std::string table = fmt::format(
      "<table id=\"compare-phases\"><tr><th>phase</th><th>A [{0}]</th><th>B [{0}]</th>"
      "<th>delta [{0}]</th><th>direction</th><th>layer that moved most in it</th></tr>\n",
      esc(v.unit));
  for (std::size_t k = 0; k < e.phases.size(); ++k) {
    const auto& p = e.phases[k];
    if (p.a_cycles == 0 && p.b_cycles == 0) continue;
    bars.push_back({std::string(phase_name(p.kind)), std::strtod(v.phase_delta[k].c_str(), nullptr),
                    v.phase_delta[k] + " " + v.unit, std::string(phase_info(p.kind).colour)});
    table += fmt::format(
        "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>{}"
        "<td>{}</td></tr>\n",
        phase_name(p.kind), v.phase_a[k], v.phase_b[k], v.phase_delta[k],
        direction_cell(v.phase_direction[k]),
        p.top_layer.empty() || std::strtod(v.in_unit(p.top_delta).c_str(), nullptr) == 0
            ? ""
            : esc(fmt::format("{} {} ({} {})", p.top_layer, p.top_pass,
                              v.in_unit(p.top_delta, true), v.unit)));
  }
  bars.push_back({"step time (total)", std::strtod(v.step_delta.c_str(), nullptr),
                  v.step_delta + " " + v.unit, "#555"});
  table += fmt::format(
      "<tr><th>step time</th><th class=\"n\">{}</th><th class=\"n\">{}</th><th "
      "class=\"n\">{}</th>{}<td></td></tr>\n</table>\n",
      v.step_a, v.step_b, v.step_delta, direction_cell(e.headline.front().direction));
  s += delta_chart("chart-compare-phases", bars,
                   fmt::format("change in step time by phase kind, B \u2212 A [{}]", v.unit));
  s += table;

  s += "<h3>By layer</h3>\n";
  if (!e.have_layers) {
    s += "<p class=\"note\">No layer attribution: layers.csv (written by ipusim run --out with "
         "the fast engine) is missing in A or B.</p>\n";
  } else {
    bars.clear();
    table = fmt::format(
        "<table id=\"compare-layers\"><tr><th>layer</th><th>pass</th><th>A [{0}]</th><th>B "
        "[{0}]</th><th>delta [{0}]</th><th>direction</th></tr>\n",
        esc(v.unit));
    for (std::size_t i = 0; i < v.layer_delta.size(); ++i) {
      const auto& l = e.layers[i];
      const double d = std::strtod(v.layer_delta[i].c_str(), nullptr);
      bars.push_back({l.pass.empty() ? l.layer : l.layer + " " + l.pass, d,
                      v.layer_delta[i] + " " + v.unit, d > 0 ? "#e15759" : "#59a14f"});
      table += fmt::format(
          "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td "
          "class=\"n\">{}</td>{}</tr>\n",
          esc(l.layer), esc(l.pass), v.layer_a[i], v.layer_b[i], v.layer_delta[i],
          direction_cell(v.layer_direction[i]));
    }
    if (v.other_layers) {
      bars.push_back({fmt::format("{} other rows", v.other_layers),
                      std::strtod(v.other_delta.c_str(), nullptr), v.other_delta + " " + v.unit,
                      "#bab0ac"});
      table += fmt::format(
          "<tr><td>({} other rows)</td><td></td><td></td><td></td><td class=\"n\">{}</td><td></td>"
          "</tr>\n",
          v.other_layers, v.other_delta);
    }
    s += fmt::format(
        "<p class=\"note\">The layer rows (layers.csv) of the same IPUs whose time moved most; "
        "with the other rows they add up to the step-time change ({} {}).</p>\n",
        v.step_delta, esc(v.unit));
    s += delta_chart("chart-compare-layers", bars,
                     fmt::format("change in step time by layer, B \u2212 A [{}]", v.unit));
    s += table + "</table>\n";
  }

  s += fmt::format(
      "<h3>Settings that differ ({})</h3>\n<table id=\"compare-settings\"><tr><th>key</th>"
      "<th>A (this run)</th><th>B (other run)</th></tr>\n",
      e.settings.size());
  for (const auto& d : e.settings)
    s +=
        fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", esc(d.key), esc(d.a), esc(d.b));
  if (e.settings.empty()) s += "<tr><td colspan=\"3\">(none)</td></tr>\n";
  const Comparison& c = e.stats;
  s += fmt::format(
      "</table>\n<h3>Stats that moved most ({} changed of {})</h3>\n<table id=\"compare-stats\">"
      "<tr><th>field</th><th>unit</th><th>A</th><th>B</th><th>delta</th><th>%</th>"
      "<th>direction</th></tr>\n",
      c.stats.size(), c.fields);
  for (std::size_t i = 0; i < c.stats.size() && i < 40; ++i) {
    const auto& d = c.stats[i];
    const double rel = d.relative();
    s += fmt::format(
        "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td "
        "class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>\n",
        esc(d.path), esc(d.unit), num(d.a), num(d.b), num(d.delta()),
        std::isfinite(rel) ? format_percent(rel) : "new", d.delta() > 0 ? "up" : "down");
  }
  return s + "</table>\n</div>\n";
}

// --- sweep.json -----------------------------------------------------------------------------

struct Point {
  std::string id, status, error, run_dir, workload, system, unit;
  double ipus = 0, step_time = 0;
  std::optional<double> throughput;
};

const JsonValue& need(const JsonValue& obj, std::string_view key, JsonValue::Kind kind,
                      const std::string& where, const std::string& file) {
  static constexpr std::array<std::string_view, 6> kNames{"null",     "a boolean", "a number",
                                                          "a string", "an array",  "an object"};
  const JsonValue* v = obj.find(key);
  if (!v)
    throw Error(fmt::format("{}: key \"{}.{}\": expected {}, found no such key", file, where, key,
                            kNames[static_cast<std::size_t>(kind)]));
  if (v->kind != kind)
    throw Error(fmt::format("{}: key \"{}.{}\": expected {}, found {}", file, where, key,
                            kNames[static_cast<std::size_t>(kind)],
                            kNames[static_cast<std::size_t>(v->kind)]));
  return *v;
}

std::string line_chart(
    const std::string& id, const std::string& y_label,
    const std::map<std::string, std::vector<std::pair<double, double>>>& series) {
  const int w = 640, h = 320, l = 70, r = 160, t = 20, bt = 40;
  double xmin = 1e300, xmax = -1e300, ymax = 0;
  for (const auto& [n, pts] : series)
    for (auto [x, y] : pts) {
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymax = std::max(ymax, y);
    }
  if (xmin > xmax) xmin = xmax = 1;
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  // x on a log2 scale (IPU counts double); a single point sits in the middle.
  const double lx0 = std::log2(std::max(xmin, 1e-9)), lx1 = std::log2(std::max(xmax, 1e-9));
  auto px = [&](double x) {
    return lx1 > lx0 ? l + (std::log2(x) - lx0) / (lx1 - lx0) * (w - l - r) : l + (w - l - r) / 2.0;
  };
  auto py = [&](double y) { return t + (1 - y / ymax) * (h - t - bt); };
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" role=\"img\">\n",
      id, w, h);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/>", l, h - bt,
                   w - r, h - bt);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/>\n", l, t, l,
                   h - bt);
  for (int i = 0; i <= 4; ++i) {
    const double y = ymax * i / 4;
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", l - 4,
                     py(y) + 4, num(y));
  }
  std::vector<double> xs;
  for (const auto& [n, pts] : series)
    for (auto [x, y] : pts) xs.push_back(x);
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  for (double x : xs)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(x),
                     h - bt + 16, num(x));
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">IPUs</text>\n", (l + w - r) / 2,
                   h - 6);
  s += fmt::format(
      "<text x=\"12\" y=\"{}\" transform=\"rotate(-90 12 {})\" text-anchor=\"middle\">{}</text>\n",
      (t + h - bt) / 2, (t + h - bt) / 2, esc(y_label));
  static const std::array<const char*, 6> colours{"#4e79a7", "#e15759", "#59a14f",
                                                  "#f28e2b", "#b07aa1", "#76b7b2"};
  std::size_t k = 0;
  for (const auto& [name, pts] : series) {
    const char* c = colours[k % colours.size()];
    std::string poly;
    for (auto [x, y] : pts) poly += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    s += fmt::format(
        "<polyline class=\"series\" data-series=\"{}\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"2\" points=\"{}\"/>\n",
        esc(name), c, poly);
    for (auto [x, y] : pts)
      s += fmt::format(
          "<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>{}: {} "
          "IPUs: {}</title></circle>\n",
          px(x), py(y), c, esc(name), num(x), num(y));
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" "
        "y=\"{}\">{}</text>\n",
        w - r + 10, t + 16 * static_cast<int>(k), c, w - r + 24, t + 16 * static_cast<int>(k) + 9,
        esc(name));
    ++k;
  }
  return s + "</svg>\n";
}

}  // namespace

std::string html_report(const RunDir& run, const RunDir* compare) {
  std::string body = summary_section(run);
  body += time_section(run);
  body += tiles_section(run);
  body += phases_section(run);
  body += supersteps_section(run);
  if (compare) body += compare_section(run, *compare);
  return page("ipusim report: " + text_of(run.stats, {"trace", "name"}), body);
}

bool is_sweep_dir(const std::string& dir) {
  return std::filesystem::is_regular_file(dir + "/sweep.json");
}

std::string sweep_html_report(const std::string& dir) {
  const std::string file = dir + "/sweep.json";
  const JsonValue root = parse_json(read_file_text(file), file);
  if (root.kind != JsonValue::Kind::kObject)
    throw Error(fmt::format("{}: expected an object at the top level", file));
  const JsonValue& points = need(root, "points", JsonValue::Kind::kArray, "sweep", file);
  std::vector<Point> pts;
  for (std::size_t i = 0; i < points.items.size(); ++i) {
    const JsonValue& p = points.items[i];
    const std::string where = fmt::format("points[{}]", i);
    if (p.kind != JsonValue::Kind::kObject)
      throw Error(fmt::format("{}: {}: expected an object", file, where));
    Point q;
    q.id = need(p, "id", JsonValue::Kind::kString, where, file).string;
    q.status = need(p, "status", JsonValue::Kind::kString, where, file).string;
    if (q.status != "ok" && q.status != "failed")
      throw Error(fmt::format("{}: key \"{}.status\": expected \"ok\" or \"failed\", found \"{}\"",
                              file, where, q.status));
    if (const JsonValue* e = p.find("error"); e && e->kind == JsonValue::Kind::kString)
      q.error = e->string;
    if (const JsonValue* e = p.find("run_dir"); e && e->kind == JsonValue::Kind::kString)
      q.run_dir = e->string;
    q.workload = need(p, "workload", JsonValue::Kind::kString, where, file).string;
    if (const JsonValue* e = p.find("system"); e && e->kind == JsonValue::Kind::kString)
      q.system = e->string;
    q.ipus = need(p, "ipus", JsonValue::Kind::kNumber, where, file).number.d;
    if (q.status == "ok") {
      q.step_time = need(p, "step_time_s", JsonValue::Kind::kNumber, where, file).number.d;
      if (const JsonValue* t = p.find("throughput"); t && t->kind == JsonValue::Kind::kNumber)
        q.throughput = t->number.d;
    }
    if (const JsonValue* u = p.find("throughput_unit"); u && u->kind == JsonValue::Kind::kString)
      q.unit = u->string;
    pts.push_back(std::move(q));
  }
  // Per workload: throughput vs IPUs and scaling efficiency against the smallest-IPUs point.
  std::map<std::string, std::vector<std::pair<double, double>>> thr, eff;
  std::map<std::string, std::string> units;
  for (const auto& p : pts)
    if (p.status == "ok" && p.throughput) {
      thr[p.workload].emplace_back(p.ipus, *p.throughput);
      units[p.workload] = p.unit;
    }
  for (auto& [w, v] : thr) {
    std::sort(v.begin(), v.end());
    const auto [x0, y0] = v.front();
    for (auto [x, y] : v) eff[w].emplace_back(x, y0 > 0 && x > 0 ? (y / x) / (y0 / x0) : 0.0);
  }
  std::string unit_label = "throughput";
  if (!units.empty()) {
    bool same = true;
    for (const auto& [w, u] : units) same = same && u == units.begin()->second;
    if (same && !units.begin()->second.empty()) unit_label += " (" + units.begin()->second + ")";
  }
  std::string body = fmt::format(
      "<h2>Summary</h2>\n<table id=\"summary\">{}{}{}</table>\n", row("sweep directory", dir),
      row("spec", root.find("spec") && root.find("spec")->kind == JsonValue::Kind::kString
                      ? root.find("spec")->string
                      : ""),
      row("points", fmt::format("{} ({} failed)", pts.size(),
                                std::count_if(pts.begin(), pts.end(),
                                              [](const Point& p) { return p.status != "ok"; }))));
  body += "<h2>Scaling</h2>\n<h3>Throughput vs IPUs</h3>\n" +
          line_chart("chart-sweep-throughput", unit_label, thr);
  body +=
      "<h3>Scaling efficiency</h3>\n<p class=\"note\">(throughput / IPUs) relative to the point "
      "with the "
      "fewest IPUs of the same workload; 1 = perfect linear scaling.</p>\n" +
      line_chart("chart-sweep-efficiency", "efficiency", eff);
  body +=
      "<h2>Points</h2>\n<table "
      "id=\"sweep-points\"><tr><th>id</th><th>workload</th><th>system</th><th>IPUs</th>"
      "<th>step time</th><th>throughput</th><th>status</th><th>run directory / error</th></tr>\n";
  for (const auto& p : pts)
    body += fmt::format(
        "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td "
        "class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>\n",
        p.status == "ok" ? "ok" : "failed", esc(p.id), esc(p.workload), esc(p.system), num(p.ipus),
        p.status == "ok" ? human_seconds(p.step_time) : "",
        p.throughput ? fmt::format("{} {}", num(*p.throughput), esc(p.unit)) : "", esc(p.status),
        esc(p.status == "ok" ? p.run_dir : p.error));
  body += "</table>\n";
  return page("ipusim sweep report: " + dir, body);
}

}  // namespace ipusim::report
