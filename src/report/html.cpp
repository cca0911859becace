// SPDX-License-Identifier: Apache-2.0
#include "ipusim/report/html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <iterator>
#include <map>
#include <numbers>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <tuple>

#include "ipusim/config/field.hpp"
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

// `text` in at most `chars` characters: whole, or its start and end around "...".
std::string cut_middle(const std::string& text, std::size_t chars) {
  if (text.size() <= chars) return text;
  const std::size_t head = (chars - 3) / 2;
  return text.substr(0, head) + "..." + text.substr(text.size() - (chars - 3 - head));
}

// Horizontal bars, largest scale = the largest value.
std::string bar_chart(const std::string& id, const std::vector<Bar>& bars, const std::string& unit,
                      const std::string& colour) {
  const int label_w = 340, bar_w = 420, row_h = 20, h = static_cast<int>(bars.size()) * row_h + 10;
  double max = 0;
  for (const auto& b : bars) max = std::max(max, b.value);
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" role=\"img\">\n",
      id, label_w + bar_w + 140, h);
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const int y = static_cast<int>(i) * row_h + 5;
    const double w = max > 0 ? bars[i].value / max * bar_w : 0;
    const std::string label = cut_middle(bars[i].label, 48);
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
                             bool absolute = false, const std::string& unit = "cycles") {
  std::size_t longest_label = 0;
  for (const auto& r : rows) longest_label = std::max(longest_label, r.first.size());
  const int label_w = std::clamp(static_cast<int>(longest_label) * 7 + 12, 90, 420);
  const int bar_w = 640, row_h = 26;
  const int legend_y = static_cast<int>(rows.size()) * row_h + 12;
  double legend_w = label_w;
  for (const PhaseInfo& p : kPhases) legend_w += 28 + 8.0 * p.name.size();
  double longest = 0;
  for (const auto& r : rows) longest = std::max(longest, r.second.total());
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" "
      "height=\"{}\" role=\"img\">\n",
      id, std::max<double>(label_w + bar_w + (absolute ? 120 : 20), legend_w), legend_y + 30);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const double sum = rows[r].second.total();
    const double total = absolute ? longest : sum;
    const int y = static_cast<int>(r) * row_h + 4;
    // A label longer than the label column keeps its start and end, whole on hover.
    const std::string& full = rows[r].first;
    const std::string shown = cut_middle(full, static_cast<std::size_t>(label_w - 12) / 7);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\"><title>{}</title>{}</text>\n",
                     label_w - 6, y + 16, esc(full), esc(shown));
    double x = label_w;
    for (const PhaseInfo& p : kPhases) {
      const double v = rows[r].second[p.kind];
      if (v <= 0 || total <= 0) continue;
      const double w = v / total * bar_w;
      s += fmt::format(
          "<rect class=\"segment\" data-phase=\"{}\" x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" "
          "height=\"{}\" fill=\"{}\"><title>{}: {:.1f}% ({} {})</title></rect>\n",
          p.name, x, y, w, row_h - 6, p.colour, p.name, 100 * v / sum, num(v), esc(unit));
      x += w;
    }
    if (absolute && sum > 0)  // the row's total at the end of its bar
      s += fmt::format("<text class=\"total\" x=\"{:.1f}\" y=\"{}\">{}</text>\n", x + 4, y + 16,
                       unit == "s" ? human_seconds(sum) : num(sum) + " " + esc(unit));
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
      id, w + 10, h + 44, values.size());
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
  s += fmt::format(
      "<text x=\"210\" y=\"{}\">0 .. {} {}</text>\n<text class=\"legend\" x=\"0\" "
      "y=\"{}\">{}</text>\n</svg>\n",
      h + 17, num(scale), esc(unit), h + 33, esc(legend));
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
table.sortable th{cursor:pointer;white-space:nowrap}table.sortable th[data-dir=desc]::after{content:" \25BC"}
table.sortable th[data-dir=asc]::after{content:" \25B2"}td.layer{min-width:220px;max-width:320px}
#layers th,#layers td{padding:2px 6px;font-size:12px}#layers td.n{white-space:nowrap}
#plans th,#plans td{padding:2px 6px;font-size:12px}#plans td{white-space:nowrap}
.scroll{max-height:640px;overflow:auto}
#sweep-points th,#sweep-points td{padding:2px 6px;font-size:12px}#sweep-points td{white-space:nowrap}
#sweep-points th.path{overflow-wrap:anywhere;max-width:120px}
#sweep-points td.path{white-space:normal;overflow-wrap:anywhere;min-width:90px;max-width:190px}
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
  // Sortable tables: a click on a header sorts by its column (numbers by data-v), again
  // reverses.
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var heads = table.tHead.rows[0].cells, body = table.tBodies[0];
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener('click', function () {
        var desc = th.getAttribute('data-dir') !== 'desc';
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('data-dir'); });
        th.setAttribute('data-dir', desc ? 'desc' : 'asc');
        var numeric = th.classList.contains('n');
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          var d = numeric ? parseFloat(x.getAttribute('data-v')) - parseFloat(y.getAttribute('data-v'))
                          : x.textContent.localeCompare(y.textContent);
          return desc ? -d : d;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
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
      b += row("tile model", m->string == config::enum_name(kTileModelNames, TileModel::kIsa)
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
    if (auto first = find_stat(run, "workload.generation.time_to_first_token"))
      b += row("text generation",
               fmt::format("first token after {} ({} steps), then {} a token; {} new tokens in "
                           "{}; {:.1f} tokens/s",
                           human_seconds(*first),
                           num(stat(run, "workload.generation.steps_to_first_token")),
                           human_seconds(stat(run, "workload.generation.time_per_output_token")),
                           num(stat(run, "workload.generation.new_tokens")),
                           human_seconds(stat(run, "workload.generation.total_time")),
                           stat(run, "workload.generation.tokens_per_second")));
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

// The number at `path` under `v` (json_field: a quantity's value), or 0.
double number_at(const JsonValue& v, std::string_view path) {
  const JsonValue* f = json_field(v, path);
  return f ? f->number.d : 0;
}

// A pipelined training run's stages (stats.json "pipeline", docs/workloads.md "Where a
// pipeline waits"): each stage's work per micro-batch, and each IPU's waiting beside what
// PopART's schedule makes of these stage times. Empty without a pipeline.
std::string pipeline_section(const RunDir& run) {
  const JsonValue* p = run.stats.find("pipeline");
  const JsonValue* stages = p ? p->find("stages") : nullptr;
  if (stages == nullptr || stages->items.empty()) return "";
  const auto slowest = static_cast<std::size_t>(number_at(*p, "slowest_stage"));
  std::vector<Bar> bars;
  std::string table =
      "<table id=\"pipeline-stages\"><tr><th>stage</th><th>IPU</th><th>forward</th><th>"
      "backward</th><th>total</th></tr>\n";
  for (const JsonValue& st : stages->items) {
    const double fwd = number_at(st, "forward"), bwd = number_at(st, "backward");
    const auto stage = static_cast<std::size_t>(number_at(st, "stage"));
    const std::string label = fmt::format("stage {} (IPU {}){}", stage, num(number_at(st, "ipu")),
                                          stage == slowest ? ", the slowest" : "");
    bars.push_back(
        {label, fwd + bwd, fmt::format(" (forward {} + backward {})", num(fwd), num(bwd))});
    table += fmt::format(
        "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td "
        "class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
        stage, num(number_at(st, "ipu")), num(fwd), num(bwd), num(fwd + bwd));
  }
  std::string why;
  if (const JsonValue* excess = p->find("slowest_excess"))
    for (const JsonValue& e : excess->items)
      why += fmt::format("{}{} (+{})", why.empty() ? "" : ", ", esc(text_of(e, {"layers"})),
                         num(number_at(e, "cycles")));
  std::string b = fmt::format(
      "<h2 id=\"pipeline\">Pipeline stages</h2>\n<p class=\"note\">{} micro-batches in {} "
      "pipeline cycles (PopART's schedule). Each stage's work per micro-batch, in cycles: its "
      "layers' compute, syncs, exchanges and host transfers, not its waiting or copies. The "
      "slowest stage spends the most over the median of the others on: {}.</p>\n",
      num(number_at(*p, "micro_batches")), num(number_at(*p, "cycles")), why.empty() ? "-" : why);
  b += bar_chart("chart-pipeline", bars, "cycles", "#4e79a7") + table + "</table>\n";
  if (const JsonValue* waiting = p->find("waiting"); waiting && !waiting->items.empty()) {
    b += "<table id=\"pipeline-waiting\"><tr><th>IPU</th><th>waited</th><th>in the pipeline</th>"
         "<th>schedule: fill and drain</th><th>schedule: unequal stages</th><th>after it "
         "(collectives, weight update)</th></tr>\n";
    for (const JsonValue& w : waiting->items) {
      const double all = number_at(w, "simulated"), in = number_at(w, "in_pipeline");
      b += fmt::format(
          "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}"
          "</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
          num(number_at(w, "ipu")), num(all), num(in), num(number_at(w, "fill_and_drain")),
          num(number_at(w, "unequal_stages")), num(all - in));
    }
    b += "</table>\n";
  }
  return b;
}

// The memory of an IPU's tiles by category (tiles.csv since issue 13): the whole IPU, the mean
// tile and the fullest tile, with a bar of the fullest tile against the tile capacity.
std::string memory_breakdown(std::uint32_t ipu, const std::vector<TileRow>& tiles,
                             double capacity) {
  if (tiles.empty() || !std::all_of(tiles.begin(), tiles.end(),
                                    [](const TileRow& t) { return t.memory.has_value(); }))
    return "<p class=\"note\">No memory categories in tiles.csv (an older run directory).</p>\n";
  std::array<double, kMemoryCategories> sum{};
  std::size_t fullest = 0;
  for (std::size_t t = 0; t < tiles.size(); ++t) {
    for (std::size_t k = 0; k < kMemoryCategories; ++k)
      sum[k] += static_cast<double>((*tiles[t].memory)[k]);
    if (tiles[t].memory_bytes > tiles[fullest].memory_bytes) fullest = t;
  }
  double all = 0;
  for (double v : sum) all += v;
  static const std::array<const char*, kMemoryCategories> colours{
      "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
      "#ff9da7", "#9c755f", "#bab0ac", "#8cd17d", "#d4a6c8", "#86bcb6"};
  // The categories this IPU uses (a kind of tensor the program has none of is left out).
  std::vector<std::size_t> used;
  for (std::size_t k = 0; k < kMemoryCategories; ++k)
    if (sum[k] > 0) used.push_back(k);
  const auto& top = *tiles[fullest].memory;
  const int bar_w = 640, label_w = 130, width = label_w + bar_w + 150;
  // The legend, in as many rows as it needs.
  std::string legend;
  double lx = label_w;
  int ly = 36;
  for (const std::size_t k : used) {
    const double w =
        28 + 7.0 * static_cast<double>(std::string_view(kMemoryCategoryNames[k]).size());
    if (lx + w > width && lx > label_w) {
      lx = label_w;
      ly += 16;
    }
    legend += fmt::format(
        "<rect x=\"{:.0f}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text "
        "x=\"{:.0f}\" y=\"{}\">{}</text>\n",
        lx, ly, colours[k], lx + 14, ly + 10, kMemoryCategoryNames[k]);
    lx += w;
  }
  std::string s = fmt::format(
      "<p>Memory by category (tiles.csv: the tensors by kind, then the runtime's vertex state, "
      "code, exchange code and stack). The fullest tile, {}, against the tile capacity:</p>\n"
      "<svg id=\"chart-memory-ipu{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{}\" height=\"{}\" role=\"img\">\n<text x=\"{}\" y=\"18\" "
      "text-anchor=\"end\">tile {}</text>\n",
      fullest, ipu, width, ly + 20, label_w - 6, fullest);
  double x = label_w;
  for (const std::size_t k : used) {
    const double w = capacity > 0 ? static_cast<double>(top[k]) / capacity * bar_w : 0;
    if (w <= 0) continue;
    s += fmt::format(
        "<rect x=\"{:.2f}\" y=\"4\" width=\"{:.2f}\" height=\"20\" fill=\"{}\"><title>{}: {}"
        "</title></rect>\n",
        x, w, colours[k], kMemoryCategoryNames[k], human_bytes(static_cast<double>(top[k])));
    x += w;
  }
  s += fmt::format(
      "<rect x=\"{}\" y=\"4\" width=\"{}\" height=\"20\" fill=\"none\" stroke=\"#333\"/>"
      "<text x=\"{}\" y=\"18\">capacity {}</text>\n",
      label_w, bar_w, label_w + bar_w + 6, human_bytes(capacity));
  s += legend;
  s += "</svg>\n";
  s += fmt::format(
      "<table id=\"memory-breakdown-ipu{}\"><tr><th>category</th><th>whole IPU</th><th>share"
      "</th><th>mean tile</th><th>fullest tile ({})</th></tr>\n",
      ipu, fullest);
  const auto n = static_cast<double>(tiles.size());
  for (const std::size_t k : used)
    s += fmt::format(
        "<tr><td>{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\">{:.1f}%</td><td "
        "class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
        kMemoryCategoryNames[k], sum[k], human_bytes(sum[k]), all > 0 ? 100 * sum[k] / all : 0.0,
        human_bytes(sum[k] / n), human_bytes(static_cast<double>(top[k])));
  s += fmt::format(
      "<tr><th>total</th><th class=\"n\">{}</th><th class=\"n\">100%</th><th class=\"n\">{}"
      "</th><th class=\"n\">{}</th></tr>\n</table>\n",
      human_bytes(all), human_bytes(all / n),
      human_bytes(static_cast<double>(tiles[fullest].memory_bytes)));
  return s;
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
    // Coloured against the tile capacity: the top colour is a full tile, so headroom shows.
    const double mmax = mem.empty() ? 0 : *std::max_element(mem.begin(), mem.end());
    b += heat_map(fmt::format("heatmap-memory-ipu{}", ipu), mem, capacity, "B",
                  fmt::format("scale: 0 to the tile capacity of {} (chip.tile_memory); fullest "
                              "tile {}, {:.1f}% of capacity",
                              human_bytes(capacity), human_bytes(mmax),
                              capacity > 0 ? 100 * mmax / capacity : 0.0));
    b += fmt::format("<div class=\"note\" id=\"heatmap-memory-ipu{}-value\"></div>\n", ipu);
    b += memory_breakdown(ipu, tiles, capacity);
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
      for (std::size_t i = 0; i < list->items.size(); ++i) {
        // Named by the layers and pass it serves (the generated name in the tooltip), or by
        // its name when it has none (a hand-written trace, an older run directory).
        const JsonValue& item = list->items[i];
        const std::string name = text_of(item, {"name"});
        const JsonValue* layer = item.find("layer");
        const JsonValue* pass = item.find("pass");
        const bool named =
            layer && layer->kind == JsonValue::Kind::kString && !layer->string.empty();
        std::string label = named ? layer->string : name;
        if (named && pass && pass->kind == JsonValue::Kind::kString && !pass->string.empty())
          label += " " + pass->string;
        out.push_back({label, stat(run, fmt::format("ipu[0].{}[{}].cycles", key, i)),
                       fmt::format(" over {} executions{}",
                                   num(stat(run, fmt::format("ipu[0].{}[{}].executions", key, i))),
                                   named ? " (" + name + ")" : "")});
      }
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

// "#N", or for superstep -1 (the phases before the first compute set, supersteps.csv) what
// it is.
std::string superstep_label(std::int64_t index) {
  return index < 0 ? std::string("(before the first compute set)") : fmt::format("#{}", index);
}

// The phase kind with the most cycles (the first of equals, in kPhases order).
PhaseKind dominant_phase(const PhaseCycles& cycles) {
  PhaseKind most = PhaseKind::kCompute;
  for (const PhaseInfo& p : kPhases)
    if (cycles[p.kind] > cycles[most]) most = p.kind;
  return most;
}

std::string supersteps_section(const RunDir& run) {
  if (run.supersteps.empty()) return "";
  // The 20 longest supersteps of the first IPU, split into compute / sync / exchange / other.
  const std::uint32_t ipu = run.supersteps.front().ipu;
  std::vector<const SuperstepRow*> rows;
  for (const auto& r : run.supersteps)
    if (r.ipu == ipu) rows.push_back(&r);
  auto total = [](const SuperstepRow* r) { return r->cycles.total(); };
  // Everything but the on-chip BSP phases (the table's last time column).
  auto other = [](const SuperstepRow* r) {
    return r->cycles.total() - r->cycles[PhaseKind::kCompute] - r->cycles[PhaseKind::kSync] -
           r->cycles[PhaseKind::kExchange];
  };
  std::stable_sort(rows.begin(), rows.end(), [&](auto a, auto b) { return total(a) > total(b); });
  if (rows.size() > 20) rows.resize(20);
  std::vector<PhaseRow> chart;
  std::string table =
      "<table><tr><th>superstep</th><th>layer</th><th>pass</th><th>most time in</th>"
      "<th>executions</th><th>compute</th><th>sync</th><th>exchange</th><th>other</th><th>active "
      "tiles</th></tr>\n";
  for (const auto* r : rows) {
    // Every phase in its own colour (a streaming superstep is streaming, not "collective").
    PerPhase<double> split;
    for (const PhaseInfo& p : kPhases) split[p.kind] = static_cast<double>(r->cycles[p.kind]);
    const std::string label = superstep_label(r->index);
    chart.emplace_back(r->layer.empty() ? label : label + " " + r->layer + " " + r->pass, split);
    // The layer and pass it serves, the generated compute-set name on hover (an older run
    // directory names only the compute set).
    const std::string layer = r->layer.empty() ? r->step : r->layer;
    table += fmt::format(
        "<tr><td>{}</td><td title=\"{}\">{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
        esc(label), esc(r->step), esc(layer), esc(r->pass), phase_name(dominant_phase(r->cycles)),
        r->executions, r->cycles[PhaseKind::kCompute], r->cycles[PhaseKind::kSync],
        r->cycles[PhaseKind::kExchange], other(r), r->active_tiles);
  }
  return fmt::format(
             "<h2>Longest supersteps (IPU {})</h2>\n<p class=\"note\">Each bar is one superstep's "
             "split over all its executions, each phase in its colour ('other' in the table: "
             "host and streaming I/O, external sync, waiting, inter-IPU copies and collectives). "
             "Full data: supersteps.csv.</p>\n",
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

// A round step for about five ticks over `range`: the first of `mantissas` x 10^k that
// reaches range / 5, else 10 x 10^k.
double nice_step(double range, std::initializer_list<double> mantissas = {1.0, 2.0, 5.0}) {
  const double raw = range / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : mantissas)
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

// This run (`run`) against the run it is compared with (`other`): A is the other run, B this
// one, every delta B - A, so this run's page reads "faster" when this run is faster, as
// 'ipusim compare OTHER RUN' does (issue 27: the deltas read from this run to the other).
std::string compare_section(const RunDir& run, const RunDir& other) {
  const RunDir &a = other, &b = run;
  const ExplainedComparison e = explain_comparison(a, b);
  const std::size_t kLayers = 12;
  std::string s = fmt::format(
      "<h2 id=\"compared-with\">Compared with {}</h2>\n<div id=\"compare\">\n"
      "<p class=\"note\">This run against "
      "the run it is compared with: A = the other run ({}), B = this run ({}); every delta is "
      "B &minus; A, so \"faster\" means this run is faster.</p>\n<h3>Headline</h3>\n"
      "<table id=\"compare-headline\"><tr><th></th><th>A (other run)</th><th>B (this run)</th>"
      "<th>delta</th><th>change</th><th>direction</th></tr>\n",
      esc(a.path), esc(a.path), esc(b.path));
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
    s += "<h3 id=\"compare-plan-changes\">Plan changes</h3>\n";
    if (!e.have_plans) {
      s += "<p class=\"note\">No plan comparison: plan.csv (written by ipusim run --run ... --out) "
           "is missing in A or B.</p>\n";
    } else {
      const auto changes = plan_changes_of(e, kLayers);
      s += fmt::format(
          "<p class=\"note\">What the planner chose for the convs and matmuls of the layer rows "
          "above (plan.csv of the same IPUs), where A and B differ: {}. Cycles are one "
          "execution's.</p>\n",
          changes.empty() ? "none, every plan is the same"
                          : std::to_string(changes.size()) + " plans");
      if (!changes.empty()) {
        s += "<table id=\"compare-plans\"><tr><th>layer</th><th>pass</th><th>shape</th>"
             "<th>A &rarr; B</th></tr>\n";
        for (const PlanChange* c : changes) {
          const PlanRow& p = c->a ? *c->a : *c->b;
          std::string list;
          for (const auto& d : c->changes) list += (list.empty() ? "" : "<br>") + esc(d);
          s += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", esc(c->layer),
                           esc(c->pass), esc(p.shape), list);
        }
        s += "</table>\n";
      }
    }
  }

  s += fmt::format(
      "<h3>Settings that differ ({})</h3>\n<table id=\"compare-settings\"><tr><th>key</th>"
      "<th>A (other run)</th><th>B (this run)</th></tr>\n",
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
  std::string id, status, error, run_dir, workload, system, unit, samples_unit;
  double ipus = 0, step_time = 0;
  std::optional<double> throughput, samples, time_to_train;
  std::vector<std::pair<std::string, std::string>> overrides;  // key -> value, as in the spec
  PerPhase<double> breakdown;                                  // seconds per phase kind
  std::string report;  // the point's report, relative to the sweep directory ("": none)

  const std::string* value_of(const std::string& key) const {
    for (const auto& [k, v] : overrides)
      if (k == key) return &v;
    return nullptr;
  }
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

std::optional<double> number_member(const JsonValue& obj, std::string_view key) {
  const JsonValue* v = obj.find(key);
  if (v && v->kind == JsonValue::Kind::kNumber) return v->number.d;
  return std::nullopt;
}

// Round tick values from 0 to at least `max`: steps of 1, 2, 2.5 or 5 x 10^k, 3 to 6 ticks.
std::vector<double> round_ticks(double max) {
  if (!(max > 0) || !std::isfinite(max)) return {0, 1};
  const double step = nice_step(max, {1.0, 2.0, 2.5, 5.0});
  std::vector<double> ticks;
  for (int i = 0; ticks.empty() || ticks.back() < max * (1 - 1e-12); ++i) ticks.push_back(i * step);
  return ticks;
}

// A swept value such as "1.325GHz", "8B/cycle" or "736" as (number, unit text).
std::optional<std::pair<double, std::string>> numeric_value(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(v)) return std::nullopt;
  return std::make_pair(v, std::string(end));
}

// The x axis of the sweep charts: a swept numeric key (with its unit), or the IPU count.
struct XAxis {
  std::string key;   // "" for the IPU count
  std::string unit;  // of the key's values, e.g. "GHz"
  bool log2 = false;
  std::string title() const {
    const std::string scale = log2 ? ", log2 scale" : "";
    if (key.empty()) return log2 ? "IPUs (log2 scale)" : "IPUs";
    if (unit.empty()) return log2 ? key + " (log2 scale)" : key;
    return key + " (" + unit + scale + ")";
  }
  // "256 IPUs", "chip.clock 1.85GHz"
  std::string at(double x) const {
    return key.empty() ? num(x) + " IPUs" : key + " " + num(x) + unit;
  }
};

struct XY {
  double x = 0, y = 0;
  std::string note;  // drawn above the point (e.g. its global batch)
};
using SeriesMap = std::map<std::string, std::vector<XY>>;

// A line chart of y against the sweep's x axis (log2 for IPU counts), round y ticks from 0,
// one series per entry with a legend, and optionally a dashed reference line at `ideal`.
// `name` cut into lines of at most `width` characters, at ", " where it can, else anywhere.
std::vector<std::string> legend_lines(const std::string& name, std::size_t width) {
  std::vector<std::string> pieces;  // "k=v," pieces: split after each ", "
  for (std::size_t at = 0; at < name.size();) {
    const std::size_t next = name.find(", ", at);
    const std::size_t end = next == std::string::npos ? name.size() : next + 1;
    pieces.push_back(name.substr(at, end - at));
    at = next == std::string::npos ? name.size() : next + 2;
  }
  std::vector<std::string> out;
  for (std::string piece : pieces) {
    while (piece.size() > width) {  // a value longer than a line goes on over several
      out.push_back(piece.substr(0, width));
      piece.erase(0, width);
    }
    if (!out.empty() && out.back().size() + 1 + piece.size() <= width)
      out.back() += " " + piece;
    else
      out.push_back(piece);
  }
  if (out.empty()) out.emplace_back();
  return out;
}

std::string xy_chart(const std::string& id, const XAxis& xa, const std::string& y_title,
                     const SeriesMap& series, std::optional<double> ideal = std::nullopt) {
  const int w = 760, h = 340, l = 78, r = 230, t = 24, bt = 46;
  double xmin = 1e300, xmax = -1e300, ymax = ideal.value_or(0);
  std::vector<double> xs;
  for (const auto& [n, pts] : series)
    for (const XY& p : pts) {
      xmin = std::min(xmin, p.x);
      xmax = std::max(xmax, p.x);
      ymax = std::max(ymax, p.y);
      xs.push_back(p.x);
    }
  if (xmin > xmax) xmin = xmax = 1;
  const std::vector<double> yticks = round_ticks(ymax);
  const double ytop = yticks.back();
  const bool log2 = xa.log2 && xmin > 0;
  const auto fx = [&](double x) { return log2 ? std::log2(x) : x; };
  const double fx0 = fx(xmin), fx1 = fx(xmax);
  const double pad = 28;  // the first and last x values sit this far inside the plot
  auto px = [&](double x) {
    return fx1 > fx0 ? l + pad + (fx(x) - fx0) / (fx1 - fx0) * (w - l - r - 2 * pad)
                     : l + (w - l - r) / 2.0;
  };
  auto py = [&](double y) { return t + (1 - y / ytop) * (h - t - bt); };
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" role=\"img\">\n",
      id, w, h);
  for (const double y : yticks)
    s += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#eee\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        l, py(y), w - r, py(y), l - 4, py(y) + 4, num(y));
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/>", l, h - bt,
                   w - r, h - bt);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/>\n", l, t, l,
                   h - bt);
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  for (const double x : xs)
    s += fmt::format(
        "<text class=\"x-tick\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(x),
        h - bt + 16, num(x));
  s +=
      fmt::format("<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                  (l + w - r) / 2, h - 10, esc(xa.title()));
  s += fmt::format(
      "<text class=\"axis-title\" x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" "
      "text-anchor=\"middle\">{}</text>\n",
      (t + h - bt) / 2, (t + h - bt) / 2, esc(y_title));
  if (ideal)
    s += fmt::format(
        "<line class=\"ideal\" x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#555\" "
        "stroke-dasharray=\"6 4\"/><text x=\"{}\" y=\"{:.1f}\">ideal (linear)</text>\n",
        l, py(*ideal), w - r, py(*ideal), w - r + 4, py(*ideal) + 4);
  static const std::array<const char*, 6> colours{"#4e79a7", "#e15759", "#59a14f",
                                                  "#f28e2b", "#b07aa1", "#76b7b2"};
  const int legend_top = t + (ideal ? 40 : 16);  // below the ideal line's label
  int legend_y = legend_top;
  std::size_t k = 0;
  for (const auto& [name, pts] : series) {
    const char* c = colours[k % colours.size()];
    std::vector<XY> sorted = pts;
    std::sort(sorted.begin(), sorted.end(), [](const XY& a, const XY& b) { return a.x < b.x; });
    std::string poly;
    for (const XY& p : sorted) poly += fmt::format("{:.1f},{:.1f} ", px(p.x), py(p.y));
    s += fmt::format(
        "<polyline class=\"series\" data-series=\"{}\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"2\" points=\"{}\"/>\n",
        esc(name), c, poly);
    for (const XY& p : sorted) {
      s += fmt::format(
          "<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>{}: {}: "
          "{}</title></circle>\n",
          px(p.x), py(p.y), c, esc(name), esc(xa.at(p.x)), num(p.y));
      if (!p.note.empty())
        s += fmt::format(
            "<text class=\"point-note\" x=\"{:.1f}\" y=\"{:.1f}\" "
            "text-anchor=\"middle\">{}</text>\n",
            px(p.x), py(p.y) - 8, esc(p.note));
    }
    // The whole name, over as many lines as it needs (a series' values are never cut).
    const std::vector<std::string> lines = legend_lines(name, 30);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text>",
                     w - r + 20, legend_y, c);
    for (std::size_t i = 0; i < lines.size(); ++i)
      s += fmt::format("<tspan x=\"{}\" y=\"{}\">{}</tspan>", w - r + 34,
                       legend_y + 9 + 13 * static_cast<int>(i), esc(lines[i]));
    s += "</text>\n";
    legend_y += 13 * static_cast<int>(lines.size()) + 6;
    ++k;
  }
  return s + "</svg>\n";
}

// Step time in a readable unit for a chart axis: (scale to multiply seconds by, unit).
std::pair<double, std::string> time_unit(double max_seconds) {
  if (max_seconds >= 1) return {1, "s"};
  if (max_seconds >= 1e-3) return {1e3, "ms"};
  if (max_seconds >= 1e-6) return {1e6, "us"};
  return {1e9, "ns"};
}

// Keys swept by the spec: those whose value differs between points, in first-seen order.
std::vector<std::string> swept_keys(const std::vector<Point>& pts) {
  std::vector<std::string> keys;
  for (const auto& p : pts)
    for (const auto& [k, v] : p.overrides)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  std::erase_if(keys, [&](const std::string& k) {
    const std::string* first = pts.front().value_of(k);
    return std::all_of(pts.begin(), pts.end(), [&](const Point& p) {
      const std::string* v = p.value_of(k);
      return v && first && *v == *first;
    });
  });
  return keys;
}

// What selects the workload and system rather than a parameter of them.
bool is_selector(const std::string& key) {
  return key == "run" || key == "system" || key == "model" || key == "kernel" || key == "chip" ||
         key == "trace";
}

// The x axis: the IPU count (log2) when it varies within a workload (a scaling sweep), else
// the first swept key whose values are numbers in one unit with at least two distinct values
// (log2 when they span a factor of 8 or more), else the IPU count. A log2 axis says so in its
// title.
XAxis choose_x_axis(const std::vector<Point>& pts, const std::vector<std::string>& keys) {
  std::map<std::string, std::set<double>> ipus;
  for (const auto& p : pts) ipus[p.workload].insert(p.ipus);
  for (const auto& [w, counts] : ipus)
    if (counts.size() > 1) return XAxis{"", "", true};
  for (const auto& k : keys) {
    if (is_selector(k)) continue;
    std::optional<std::string> unit;
    std::set<double> values;
    bool numeric = true;
    for (const auto& p : pts) {
      const std::string* v = p.value_of(k);
      const auto n = v ? numeric_value(*v) : std::nullopt;
      if (!n || (unit && *unit != n->second)) {
        numeric = false;
        break;
      }
      unit = n->second;
      values.insert(n->first);
    }
    // Values spanning a factor of 8 or more (tile counts, bytes, IPUs) are drawn on a log2
    // axis, as sweeps usually double them; a linear one would crowd the small values.
    if (numeric && values.size() >= 2) {
      const bool wide = *values.begin() > 0 && *values.rbegin() >= 8 * *values.begin();
      return XAxis{k, unit.value_or(""), wide};
    }
  }
  return XAxis{"", "", true};
}

double x_of(const Point& p, const XAxis& xa) {
  if (xa.key.empty()) return p.ipus;
  const std::string* v = p.value_of(xa.key);
  const auto n = v ? numeric_value(*v) : std::nullopt;
  return n ? n->first : 0;
}

// Whether swept key `k` moves along the x axis, one value per x value and one x value per
// value (e.g. run and system in a scaling sweep): it names no series then.
bool along_x(const std::vector<Point>& pts, const XAxis& xa, const std::string& k) {
  if (k == xa.key) return true;
  std::map<std::pair<std::string, double>, std::string> by_x;  // per workload
  std::map<std::pair<std::string, std::string>, double> by_value;
  for (const auto& p : pts) {
    const std::string* v = p.value_of(k);
    const std::string value = v ? *v : "";
    const double x = x_of(p, xa);
    const auto [i, new_x] = by_x.emplace(std::make_pair(p.workload, x), value);
    const auto [j, new_value] = by_value.emplace(std::make_pair(p.workload, value), x);
    if ((!new_x && i->second != value) || (!new_value && j->second != x)) return false;
  }
  return true;
}

// The series a point belongs to: its values of the swept keys that do not move along x, each
// key by its last part ("micro_batch" for run.micro_batch) unless two keys share it; the
// values whole.
std::string series_of(const Point& p, const std::vector<std::string>& series_keys) {
  const auto last_part = [](const std::string& k) {
    const auto dot = k.rfind('.');
    return dot == std::string::npos ? k : k.substr(dot + 1);
  };
  std::string name;
  for (const auto& k : series_keys) {
    const bool shared = std::count_if(series_keys.begin(), series_keys.end(), [&](const auto& o) {
                          return last_part(o) == last_part(k);
                        }) > 1;
    const std::string* v = p.value_of(k);
    name += (name.empty() ? "" : ", ") + (shared ? k : last_part(k)) + "=" +
            (v ? *v : std::string("-"));
  }
  return name.empty() ? p.workload : name;
}

Point parse_point(const JsonValue& p, const std::string& where, const std::string& file) {
  if (p.kind != JsonValue::Kind::kObject)
    throw Error(fmt::format("{}: {}: expected an object", file, where));
  Point q;
  q.id = need(p, "id", JsonValue::Kind::kString, where, file).string;
  q.status = need(p, "status", JsonValue::Kind::kString, where, file).string;
  if (q.status != "ok" && q.status != "failed")
    throw Error(fmt::format("{}: key \"{}.status\": expected \"ok\" or \"failed\", found \"{}\"",
                            file, where, q.status));
  const auto text = [&](std::string_view key) {
    const JsonValue* e = p.find(key);
    return e && e->kind == JsonValue::Kind::kString ? e->string : std::string();
  };
  q.error = text("error");
  q.run_dir = text("run_dir");
  q.workload = need(p, "workload", JsonValue::Kind::kString, where, file).string;
  q.system = text("system");
  q.ipus = need(p, "ipus", JsonValue::Kind::kNumber, where, file).number.d;
  if (q.status == "ok") {
    q.step_time = need(p, "step_time_s", JsonValue::Kind::kNumber, where, file).number.d;
    q.throughput = number_member(p, "throughput");
    q.samples = number_member(p, "samples_per_step");
    q.time_to_train = number_member(p, "time_to_train_s");
  }
  q.unit = text("throughput_unit");
  q.samples_unit = text("samples_unit");
  if (const JsonValue* o = p.find("overrides"); o && o->kind == JsonValue::Kind::kObject)
    for (const auto& m : o->members)
      q.overrides.emplace_back(
          m.key, m.value.kind == JsonValue::Kind::kString ? m.value.string : std::string());
  if (const JsonValue* b = p.find("breakdown_s"); b && b->kind == JsonValue::Kind::kObject)
    for (const PhaseInfo& k : kPhases) q.breakdown[k.kind] = number_member(*b, k.name).value_or(0);
  return q;
}

// Writes DIR/<run_dir>/report.html for an ok point whose run directory is complete; returns
// the link ("" when there is none, e.g. a point whose run directory was removed).
std::string point_report(const std::string& dir, const Point& p) {
  if (p.status != "ok" || p.run_dir.empty() || p.run_dir.find("..") != std::string::npos) return "";
  const std::string run = dir + "/" + p.run_dir;
  if (!std::filesystem::is_regular_file(run + "/stats.json")) return "";
  try {
    const std::string html = html_report(load_run_dir(run));
    write_file_atomically(run + "/report.html", [&](std::ostream& o) { o << html; });
  } catch (const Error&) {
    return "";  // an incomplete run directory: the point is listed without a report
  }
  return p.run_dir + "/report.html";
}

// --- per-layer views (layers.csv), the roofline and the BSP strip -------------------------

// 279.2 G, 63.34 T: a value with an SI prefix (for FLOP and FLOP/s).
std::string si(double v) {
  static const std::array<const char*, 6> kPrefix{"", "k", "M", "G", "T", "P"};
  std::size_t i = 0;
  while (std::fabs(v) >= 1000 && i + 1 < kPrefix.size()) {
    v /= 1000;
    ++i;
  }
  return fmt::format("{:.4g} {}", v, kPrefix[i]);
}

// The FP16 AMP peak of one chip: stats.json's is that of all the simulated IPUs.
std::optional<double> chip_peak(const RunDir& run) {
  const std::optional<double> all = find_stat(run, "throughput.peak_flop_rate_fp16");
  const double ipus = find_stat(run, "system.simulated_ipus").value_or(1);
  if (!all || !(ipus >= 1)) return all;
  return *all / ipus;
}

// Each simulated IPU's step cycles by system IPU index, in stats.json order.
std::vector<std::pair<std::uint32_t, double>> ipu_cycles(const RunDir& run) {
  std::vector<std::pair<std::uint32_t, double>> out;
  const JsonValue* ipus = run.stats.find("ipu");
  for (std::size_t i = 0; ipus && i < ipus->items.size(); ++i)
    out.emplace_back(static_cast<std::uint32_t>(stat(run, fmt::format("ipu[{}].index", i))),
                     stat(run, fmt::format("ipu[{}].cycles", i)));
  return out;
}

// The layer rows drawn: those of the first kMaxHeatMaps simulated IPUs, with each row's IPU
// step cycles.
struct LayerView {
  const LayerCsvRow* row = nullptr;
  double ipu_cycles = 0;
};
std::vector<LayerView> layer_views(const RunDir& run, std::size_t* ipus_shown) {
  std::map<std::uint32_t, double> cycles;
  for (const auto& [ipu, c] : ipu_cycles(run))
    if (cycles.size() < kMaxHeatMaps) cycles.emplace(ipu, c);
  std::vector<LayerView> out;
  for (const auto& l : run.layers)
    if (auto it = cycles.find(l.ipu); it != cycles.end()) out.push_back({&l, it->second});
  *ipus_shown = cycles.size();
  return out;
}

std::string short_label(const std::string& s, std::size_t max = 48) {
  if (s.size() <= max) return s;
  const std::size_t head = (max - 3) / 2, tail = max - 3 - head;
  return s.substr(0, head) + "..." + s.substr(s.size() - tail);
}

std::string layers_section(const RunDir& run) {
  std::string b = "<h2 id=\"by-layer\">By layer</h2>\n";
  if (run.layers.empty())
    return b +
           "<p class=\"note\">No layers.csv in the run directory (written by ipusim run --out with "
           "the fast engine): per-layer views unavailable.</p>\n";
  const double clock = stat(run, "chip.clock");
  const std::optional<double> peak = chip_peak(run);
  std::size_t ipus = 0;
  const std::vector<LayerView> rows = layer_views(run, &ipus);
  double longest = 0;
  for (const auto& [ipu, c] : ipu_cycles(run)) longest = std::max(longest, c);
  const auto [scale, unit] = time_unit(longest / clock);
  // Phase kinds that any row spends time in (the others would be columns of zeros).
  std::vector<const PhaseInfo*> kinds;
  for (const PhaseInfo& p : kPhases)
    if (std::any_of(rows.begin(), rows.end(),
                    [&](const LayerView& v) { return v.row->cycles[p.kind] > 0; }))
      kinds.push_back(&p);
  const bool multi = ipus > 1;

  // The stacked time chart: the 20 rows with the most time.
  std::vector<const LayerView*> top;
  for (const auto& v : rows) top.push_back(&v);
  std::stable_sort(top.begin(), top.end(), [](const LayerView* x, const LayerView* y) {
    return x->row->cycles.total() > y->row->cycles.total();
  });
  if (top.size() > 20) top.resize(20);
  std::vector<PhaseRow> chart;
  for (const LayerView* v : top) {
    PerPhase<double> t;
    for (const PhaseInfo& p : kPhases)
      t[p.kind] = static_cast<double>(v->row->cycles[p.kind]) / clock;
    chart.emplace_back((multi ? fmt::format("IPU {}: ", v->row->ipu) : std::string()) +
                           short_label(v->row->layer) + " " + v->row->pass,
                       t);
  }
  b += fmt::format(
      "<h3>The {} layers with the most time</h3>\n<p class=\"note\">Each bar is one layer and "
      "pass (layers.csv row), split by phase kind, to scale; the time of all its executions in "
      "the step{}.</p>\n",
      top.size(), multi ? ", on its IPU" : "");
  b += time_split_chart("chart-layers", chart, /*absolute=*/true, "s");

  // The sortable table of every row.
  b += fmt::format(
      "<h3>Every layer</h3>\n<p class=\"note\">{} rows (layers.csv{}); click a column header to "
      "sort. Times in {}; each IPU's rows add up to its step time. Share = of the IPU's step. "
      "Shared with = the other layers of the row's largest shared compute set or exchange "
      "(its time is split equally among them; hover for their names). "
      "Achieved FLOP/s = the row's FLOPs over its time{}. Peak live = the most memory live on "
      "the IPU's fullest tile at any step of the row (memory over the program, below).</p>\n",
      rows.size(), multi ? fmt::format(", {} IPUs", ipus) : std::string(), unit,
      peak ? fmt::format("; AMP utilisation = achieved / one chip's FP16 peak of {}FLOP/s",
                         si(*peak))
           : std::string());
  b += "<div class=\"scroll\"><table id=\"layers\" class=\"sortable\"><thead><tr>";
  if (multi) b += "<th class=\"n\">IPU</th>";
  b += "<th>layer</th><th>pass</th><th class=\"n\">executions</th>";
  for (const PhaseInfo* p : kinds)
    b += fmt::format("<th class=\"n\">{}<br>[{}]</th>", p->name, unit);
  b += fmt::format(
      "<th class=\"n\" data-dir=\"desc\">total<br>[{}]</th><th class=\"n\">share</th>"
      "<th class=\"n\">shared<br>with</th>"
      "<th class=\"n\">FLOPs</th><th class=\"n\">achieved FLOP/s</th><th class=\"n\">exchange "
      "bytes</th>{}<th class=\"n\">peak live<br>(fullest tile)</th></tr></thead>\n<tbody>\n",
      unit, peak ? "<th class=\"n\">AMP utilisation</th>" : "");
  std::vector<const LayerView*> sorted;
  for (const auto& v : rows) sorted.push_back(&v);
  std::stable_sort(sorted.begin(), sorted.end(), [](const LayerView* x, const LayerView* y) {
    return x->row->cycles.total() > y->row->cycles.total();
  });
  auto cell = [](double v, const std::string& text) {
    return fmt::format("<td class=\"n\" data-v=\"{}\">{}</td>", v, text);
  };
  for (const LayerView* v : sorted) {
    const LayerCsvRow& l = *v->row;
    const double total = static_cast<double>(l.cycles.total());
    const double seconds = total / clock;
    const double flops = static_cast<double>(l.flops);
    b += fmt::format("<tr data-ipu=\"{}\">", l.ipu);
    if (multi) b += cell(l.ipu, std::to_string(l.ipu));
    // Fused layers ("b3/1/conv2+b3/2/conv2+...") may break after each '+'.
    std::string shown;
    for (char c : esc(short_label(l.layer, 90)))
      shown += c == '+' ? std::string("+<wbr>") : std::string(1, c);
    b += fmt::format("<td class=\"layer\" title=\"{}\">{}</td><td>{}</td>", esc(l.layer), shown,
                     esc(l.pass));
    b += cell(static_cast<double>(l.executions), std::to_string(l.executions));
    for (const PhaseInfo* p : kinds) {
      const double c = static_cast<double>(l.cycles[p->kind]);
      b += cell(c, fmt::format("{:.3f}", c / clock * scale));
    }
    b += fmt::format("<td class=\"n total\" data-v=\"{}\">{:.3f}</td>", total, seconds * scale);
    const double share = v->ipu_cycles > 0 ? total / v->ipu_cycles : 0;
    b += cell(share, fmt::format("{:.2f}%", 100 * share));
    // The layers of its largest shared compute set or exchange (layers.csv's group).
    const auto members = l.group.empty()
                             ? 0.0
                             : static_cast<double>(std::count(l.group.begin(), l.group.end(), '+'));
    b += fmt::format("<td class=\"n\" data-v=\"{}\" title=\"{}\">{}</td>", members, esc(l.group),
                     members > 0 ? fmt::format("{:.0f} layers", members) : "");
    b += cell(flops, flops > 0 ? si(flops) : "0");
    const double rate = seconds > 0 ? flops / seconds : 0;
    b += cell(rate, rate > 0 ? si(rate) + "FLOP/s" : "");
    b += cell(static_cast<double>(l.exchange_bytes),
              l.exchange_bytes ? human_bytes(static_cast<double>(l.exchange_bytes)) : "0");
    if (peak) {
      const double u = *peak > 0 ? rate / *peak : 0;
      b += cell(u, flops > 0 ? fmt::format("{:.1f}%", 100 * u) : "");
    }
    const auto live = static_cast<double>(l.peak_tile_live_bytes);
    b += cell(live, live > 0 ? human_bytes(live) : "");
    b += "</tr>\n";
  }
  return b + "</tbody></table></div>\n";
}

// A plan row's shape as its name says it: "20x56x56x256 &rarr; 128, 3x3/2" for a conv (batch x
// height x width x input channels, output channels, kernel and stride; "32 groups of" in
// front when grouped), "1024x1024 &middot; 1024x3072" for a matmul (m x k times k x n).
std::string plan_shape(const PlanRow& p) {
  std::map<std::string, std::string> v;
  std::istringstream in(p.shape);
  for (std::string part; in >> part;)
    if (const auto eq = part.find('='); eq != std::string::npos)
      v[part.substr(0, eq)] = esc(part.substr(eq + 1));
  const std::string groups =
      v["groups"].empty() || v["groups"] == "1" ? std::string() : v["groups"] + " groups of ";
  if (v.count("m"))
    return groups + fmt::format("{}&times;{} &middot; {}&times;{}", v["m"], v["k"], v["k"], v["n"]);
  return groups + fmt::format("{}&times;{}&times;{}&times;{} &rarr; {}, {}&times;{}/{}", v["n"],
                              v["h"], v["w"], v["c"], v["k"], v["kernel"], v["kernel"],
                              v["stride"]);
}

// Each layer row's total cycles by (IPU, layer, pass), to rank plan rows by their layer's time.
std::map<std::tuple<std::uint32_t, std::string, std::string>, std::uint64_t> layer_totals(
    const RunDir& run) {
  std::map<std::tuple<std::uint32_t, std::string, std::string>, std::uint64_t> out;
  for (const auto& l : run.layers) out[{l.ipu, l.layer, l.pass}] = l.cycles.total();
  return out;
}

std::string plan_section(const RunDir& run) {
  std::string b = "<h2 id=\"plan\">Plan</h2>\n";
  if (run.plans.empty())
    return b +
           "<p class=\"note\">No plan.csv in the run directory (written by ipusim run --run "
           "... --out, when the run compiles its workload): the plan view is unavailable.</p>\n";
  const double clock = stat(run, "chip.clock");
  const auto totals = layer_totals(run);
  std::set<std::uint32_t> ipus;
  for (const auto& p : run.plans) ipus.insert(p.ipu);
  const bool multi = ipus.size() > 1;
  std::vector<std::pair<const PlanRow*, std::uint64_t>> rows;
  for (const auto& p : run.plans) {
    const auto it = totals.find({p.ipu, p.layer, p.pass});
    rows.emplace_back(&p, it == totals.end() ? 0 : it->second);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& x, const auto& y) { return x.second > y.second; });
  const auto [scale, unit] =
      time_unit(rows.empty() ? 0.0 : static_cast<double>(rows.front().second) / clock);
  b += fmt::format(
      "<p class=\"note\">What the planner chose for each of the {} convs and matmuls (plan.csv), "
      "the rows of the layers with the most time first; click a column header to sort. Split = "
      "the tiles' partition of conv groups &times; output rows &times; output channels &times; "
      "input channels; serial = iterations of a serial split. The vertex names the form the "
      "product was planned in where it is not the plain one: operands swapped (C<sup>T</sup> = "
      "B<sup>T</sup>A<sup>T</sup>), the kernel's rows, columns or both expanded into the input "
      "channels, AMP weights of several kernel rows, or a pass of a fully connected layer planned "
      "jointly with its other two (each weight on one tile in all three). Budget = the "
      "available-memory "
      "proportion of tile memory the plan had to fit; temporaries = what the plan's buffers take "
      "on its busiest tile; rearranged = bytes its operands were regrouped or transposed with "
      "first. Estimated and simulated cycles are one execution's, the rearrangement "
      "included (simulated: its compute and exchange phases and on-chip syncs). Layer time = the "
      "layer row's (layers.csv) total in {}.</p>\n",
      rows.size(), unit);
  b += "<div class=\"scroll\"><table id=\"plans\" class=\"sortable\"><thead><tr>";
  if (multi) b += "<th class=\"n\">IPU</th>";
  b += fmt::format(
      "<th>layer</th><th>pass</th><th>op</th><th>shape</th><th class=\"n\">tiles</th>"
      "<th>split</th><th>serial</th><th>vertex</th><th class=\"n\">budget</th>"
      "<th class=\"n\">temporaries<br>per tile</th><th class=\"n\">rearranged</th>"
      "<th class=\"n\">estimated<br>[cycles]</th><th class=\"n\">simulated<br>[cycles]</th>"
      "<th class=\"n\">simulated /<br>estimated</th><th class=\"n\" data-dir=\"desc\">layer "
      "time<br>[{}]</th></tr></thead>\n<tbody>\n",
      unit);
  auto cell = [](double v, const std::string& text) {
    return fmt::format("<td class=\"n\" data-v=\"{}\">{}</td>", v, text);
  };
  for (const auto& [p, total] : rows) {
    b += "<tr>";
    if (multi) b += cell(p->ipu, std::to_string(p->ipu));
    b += fmt::format(
        "<td class=\"layer\" title=\"{}\">{}</td><td>{}</td><td>{}</td><td title=\"{}\">{}</td>",
        esc(p->layer), esc(short_label(p->layer, 60)), esc(p->pass), esc(p->op), esc(p->shape),
        plan_shape(*p));
    b += cell(p->tiles, std::to_string(p->tiles));
    // The form the product was planned in: swapped operands, an expanded kernel, taller weights.
    std::string form;
    if (p->swapped) form += ", swapped";
    if (p->expanded != "no")
      form += p->expanded == "both" ? ", kernel rows and columns expanded"
                                    : ", kernel " + esc(p->expanded) + " expanded";
    if (p->weight_height > 1) form += fmt::format(", weight height {}", p->weight_height);
    if (p->joint) form += ", planned jointly";
    b += fmt::format("<td>{}</td><td>{}</td><td>{}{}{}</td>", plan_split_text(*p, "&times;"),
                     plan_serial_text(*p), esc(p->vertex), p->amp ? "" : " (no AMP)", form);
    b += cell(p->available_memory, fmt::format("{:.2f} ({})", p->available_memory,
                                               human_bytes(static_cast<double>(p->budget_bytes))));
    b += cell(static_cast<double>(p->temporary_bytes),
              human_bytes(static_cast<double>(p->temporary_bytes)));
    b += cell(static_cast<double>(p->rearranged_bytes),
              p->rearranged_bytes ? human_bytes(static_cast<double>(p->rearranged_bytes)) : "0");
    b += cell(static_cast<double>(p->estimated_cycles), std::to_string(p->estimated_cycles));
    b += cell(static_cast<double>(p->simulated_cycles), std::to_string(p->simulated_cycles));
    const double ratio = p->estimated_cycles > 0 ? static_cast<double>(p->simulated_cycles) /
                                                       static_cast<double>(p->estimated_cycles)
                                                 : 0;
    b += cell(ratio, p->estimated_cycles > 0 ? fmt::format("{:.2f}", ratio) : "");
    b += cell(static_cast<double>(total),
              fmt::format("{:.3f}", static_cast<double>(total) / clock * scale));
    b += "</tr>\n";
  }
  return b + "</tbody></table></div>\n";
}

// Decades from 10^floor(log10 lo) to 10^ceil(log10 hi).
// The decades [a, z] a log axis spans from lo to hi. A value that is not a positive finite
// number is taken as the nearest end of the doubles' range, so an axis has at most about 630
// decades whatever a run directory holds.
std::pair<int, int> decades(double lo, double hi) {
  const auto exponent = [](double v, bool up) {
    if (!(v > 0)) return -324;
    const double e = up ? std::ceil(std::log10(v)) : std::floor(std::log10(v));
    return static_cast<int>(std::clamp(e, -324.0, 309.0));
  };
  const int a = exponent(lo, false);
  return {a, std::max(exponent(hi, true), a + 1)};
}

std::string roofline_section(const RunDir& run) {
  if (run.layers.empty()) return "";
  const double clock = stat(run, "chip.clock"), tiles = stat(run, "chip.tiles");
  const std::optional<double> peak = chip_peak(run);
  double link = 0;  // exchange bytes per tile cycle
  if (auto it = run.config.find("chip.exchange.bytes_per_cycle"); it != run.config.end())
    link = std::strtod(it->second.c_str(), nullptr);
  const double bandwidth = tiles * link * clock;  // B/s, every tile sending at once
  std::size_t ipus = 0;
  const std::vector<LayerView> rows = layer_views(run, &ipus);
  struct Pt {
    double x, y;
    const LayerCsvRow* row;
  };
  std::vector<Pt> pts;
  std::size_t no_flops = 0, no_bytes = 0;
  for (const auto& v : rows) {
    const LayerCsvRow& l = *v.row;
    if (l.exchange_bytes == 0) {
      ++no_bytes;
      continue;
    }
    if (l.flops == 0 || l.cycles.total() == 0) {
      ++no_flops;
      continue;
    }
    pts.push_back({static_cast<double>(l.flops) / static_cast<double>(l.exchange_bytes),
                   static_cast<double>(l.flops) / (static_cast<double>(l.cycles.total()) / clock),
                   &l});
  }
  std::string b =
      "<h2 id=\"roofline\">Roofline</h2>\n<p class=\"note\">Each point is one layer and pass: "
      "its FLOPs per byte it exchanged (arithmetic intensity against the on-chip exchange) and "
      "its achieved FLOP/s (FLOPs over all of its time, exchange and sync included). The roofs: "
      "the chip's FP16 AMP peak and the exchange bandwidth (tiles &times; exchange bytes per "
      "cycle &times; clock). Points far below both roofs lose their time elsewhere (sync, "
      "waiting, imbalance, or vertices that do not use the AMP).";
  b += fmt::format(" Not drawn: {} rows without exchanged bytes, {} without FLOPs.</p>\n", no_bytes,
                   no_flops);
  if (pts.empty()) return b;
  double xlo = 1e300, xhi = 0, ylo = 1e300, yhi = peak.value_or(0);
  for (const Pt& p : pts) {
    xlo = std::min(xlo, p.x);
    xhi = std::max(xhi, p.x);
    ylo = std::min(ylo, p.y);
    yhi = std::max(yhi, p.y);
  }
  // Where the two roofs meet (0: no exchange roof).
  const double ridge = peak && bandwidth > 0 ? *peak / bandwidth : 0;
  if (ridge > 0) {
    xlo = std::min(xlo, ridge / 10);
    xhi = std::max(xhi, ridge * 10);
  }
  const std::pair<int, int> xd = decades(xlo, xhi), yd = decades(ylo, yhi * 1.5);
  const int x0 = xd.first, x1 = xd.second, y0 = yd.first, y1 = yd.second;
  const int w = 1000, h = 460, l = 90, r = 200, t = 20, bt = 50;
  auto px = [&](double x) { return l + (std::log10(x) - x0) / (x1 - x0) * (w - l - r); };
  auto py = [&](double y) { return t + (1 - (std::log10(y) - y0) / (y1 - y0)) * (h - t - bt); };
  std::string s = fmt::format(
      "<svg id=\"chart-roofline\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{}\" height=\"{}\" role=\"img\" data-points=\"{}\">\n",
      w, h, pts.size());
  for (int d = x0; d <= x1; ++d) {
    const double x = px(std::pow(10.0, d));
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#eee\"/><text "
        "class=\"x-tick\" x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        x, t, h - bt, h - bt + 16, si(std::pow(10.0, d)));
  }
  for (int d = y0; d <= y1; ++d) {
    const double y = py(std::pow(10.0, d));
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#eee\"/><text "
        "class=\"y-tick\" x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}FLOP/s</text>\n",
        l, y, w - r, l - 4, y + 4, si(std::pow(10.0, d)));
  }
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", l, t,
      w - l - r, h - t - bt);
  s += fmt::format(
      "<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">arithmetic intensity: "
      "FLOP per exchanged byte (FLOP/B, log scale)</text>\n",
      (l + w - r) / 2, h - 12);
  s += fmt::format(
      "<text class=\"axis-title\" x=\"16\" y=\"{0}\" transform=\"rotate(-90 16 {0})\" "
      "text-anchor=\"middle\">achieved FLOP/s (log scale)</text>\n",
      (t + h - bt) / 2);
  const double xmin = std::pow(10.0, x0), xmax = std::pow(10.0, x1), ymin = std::pow(10.0, y0);
  if (ridge > 0) {
    // Exchange roof y = bandwidth * x up to the ridge (from where it enters the plot), then
    // the AMP peak.
    const double xs = std::max(xmin, ymin / bandwidth);
    s += fmt::format(
        "<polyline class=\"roof\" fill=\"none\" stroke=\"#333\" stroke-width=\"2\" "
        "points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\"/>\n",
        px(xs), py(xs * bandwidth), px(ridge), py(*peak), px(xmax), py(*peak));
    s += fmt::format(
        "<text class=\"roof-label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">AMP peak "
        "{}FLOP/s (FP16)</text>\n",
        px(xmax) - 4, py(*peak) - 6, si(*peak));
    // The exchange roof's label along its slope, halfway along the drawn part.
    const double xm = std::sqrt(xs * ridge);
    const double angle =
        std::atan2(py(xs * bandwidth) - py(ridge * bandwidth), px(ridge) - px(xs)) * 180 /
        std::numbers::pi;
    s += fmt::format(
        "<text class=\"roof-label\" x=\"{0:.1f}\" y=\"{1:.1f}\" text-anchor=\"middle\" "
        "transform=\"rotate({2:.1f} {0:.1f} {1:.1f})\">exchange {3}B/s = {4} tiles &times; {5} "
        "B/cycle &times; {6}</text>\n",
        px(xm), py(xm * bandwidth) - 6, -angle, si(bandwidth), num(tiles), num(link),
        human_frequency(clock));
  } else if (peak) {
    s += fmt::format(
        "<line class=\"roof\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#333\" "
        "stroke-width=\"2\"/><text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">AMP peak "
        "{5}FLOP/s</text>\n",
        l, py(*peak), w - r, w - r - 4, py(*peak) - 6, si(*peak));
  }
  // Points coloured by pass, with a legend.
  static const std::array<const char*, 8> colours{"#4e79a7", "#e15759", "#59a14f", "#f28e2b",
                                                  "#b07aa1", "#76b7b2", "#edc948", "#9c755f"};
  std::vector<std::string> passes;
  for (const Pt& p : pts)
    if (std::find(passes.begin(), passes.end(), p.row->pass) == passes.end())
      passes.push_back(p.row->pass);
  for (const Pt& p : pts) {
    const auto k = static_cast<std::size_t>(std::find(passes.begin(), passes.end(), p.row->pass) -
                                            passes.begin());
    s += fmt::format(
        "<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\" "
        "fill-opacity=\"0.75\"><title>{}{} {}: {} FLOP/B, {}FLOP/s{}</title></circle>\n",
        px(p.x), py(p.y), colours[k % colours.size()],
        ipus > 1 ? fmt::format("IPU {}: ", p.row->ipu) : std::string(), esc(p.row->layer),
        esc(p.row->pass), num(p.x), si(p.y),
        peak ? fmt::format(" ({:.1f}% of the AMP peak)", 100 * p.y / *peak) : std::string());
  }
  for (std::size_t k = 0; k < passes.size(); ++k)
    s += fmt::format(
        "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
        w - r + 20, t + 10 + 18 * static_cast<int>(k), colours[k % colours.size()], w - r + 30,
        t + 14 + 18 * static_cast<int>(k), esc(passes[k]));
  return b + s + "</svg>\n";
}

// One step of the slowest IPU as a strip of its supersteps in program order, width
// proportional to cycles, one lane per kind (compute / sync / exchange / waiting / other).
// Supersteps narrower than a pixel share its column: each lane shows its kind's share of it.
std::string bsp_strip_section(const RunDir& run) {
  if (run.supersteps.empty()) return "";
  const auto cycles = ipu_cycles(run);
  std::uint32_t ipu = run.supersteps.front().ipu;
  double most = -1;
  for (const auto& [i, c] : cycles)
    if (c > most) {
      most = c;
      ipu = i;
    }
  std::vector<const SuperstepRow*> steps;
  for (const auto& r : run.supersteps)
    if (r.ipu == ipu) steps.push_back(&r);
  std::stable_sort(steps.begin(), steps.end(),
                   [](auto* a, auto* b) { return a->index < b->index; });
  double total = 0;
  for (const auto* r : steps) total += static_cast<double>(r->cycles.total());
  if (steps.empty() || total <= 0) return "";
  const double clock = stat(run, "chip.clock");
  constexpr std::size_t kCats = 5;
  constexpr int kBins = 1000, kLane = 18, kStripH = kLane * static_cast<int>(kCats);
  const int l = 70, t = 10, w = l + kBins + 30, h = t + kStripH + 86;
  const std::array<std::string, kCats> names{"compute", "sync", "exchange", "waiting", "other"};
  const std::array<std::string_view, kCats> colours{
      phase_info(PhaseKind::kCompute).colour, phase_info(PhaseKind::kSync).colour,
      phase_info(PhaseKind::kExchange).colour, phase_info(PhaseKind::kWaiting).colour,
      phase_info(PhaseKind::kInterIpu).colour};
  struct BinData {
    std::array<double, kCats> c{};
    std::int64_t first = -2, last = -2;  // supersteps in the bin
  };
  std::vector<BinData> bins(kBins);
  const double per_bin = total / kBins;
  double at = 0;
  for (const auto* r : steps) {
    const double comp = static_cast<double>(r->cycles[PhaseKind::kCompute]),
                 sync = static_cast<double>(r->cycles[PhaseKind::kSync]),
                 exch = static_cast<double>(r->cycles[PhaseKind::kExchange]);
    const double wait = static_cast<double>(r->cycles[PhaseKind::kWaiting]);
    const std::array<double, kCats> parts{
        comp, sync, exch, wait, static_cast<double>(r->cycles.total()) - comp - sync - exch - wait};
    for (std::size_t c = 0; c < kCats; ++c) {
      double s = at;
      const double e = at + parts[c];
      while (s < e) {
        auto bi = std::min<std::size_t>(kBins - 1, static_cast<std::size_t>(s / per_bin));
        while (bi + 1 < kBins && static_cast<double>(bi + 1) * per_bin <= s) ++bi;  // rounding
        const double end = bi + 1 == kBins ? e : std::min(e, static_cast<double>(bi + 1) * per_bin);
        bins[bi].c[c] += end - s;
        if (bins[bi].first == -2) bins[bi].first = r->index;
        bins[bi].last = r->index;
        s = end;
      }
      at = e;
    }
  }
  std::string s = fmt::format(
      "<svg id=\"chart-bsp-strip\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{}\" height=\"{}\" role=\"img\" data-supersteps=\"{}\" data-ipu=\"{}\">\n",
      w, h, steps.size(), ipu);
  const auto tu = time_unit(total / clock);
  const double scale = tu.first;
  const std::string unit = tu.second;
  auto title = [&](std::size_t bin) {
    double all = 0;
    for (double v : bins[bin].c) all += v;
    std::string parts;
    for (std::size_t c = 0; c < kCats; ++c)
      if (bins[bin].c[c] > 0)
        parts += fmt::format(", {} {:.0f}%", names[c], 100 * bins[bin].c[c] / all);
    return fmt::format(
        "{:.3f}-{:.3f} {}: superstep{} {}{}{}", static_cast<double>(bin) * per_bin / clock * scale,
        static_cast<double>(bin + 1) * per_bin / clock * scale, unit,
        bins[bin].first == bins[bin].last ? "" : "s", superstep_label(bins[bin].first),
        bins[bin].first == bins[bin].last ? std::string() : ".." + superstep_label(bins[bin].last),
        parts);
  };
  // One lane per category: in each pixel column a bar as tall as the category's share of
  // the column (runs of full columns as one rectangle).
  for (std::size_t k = 0; k < kCats; ++k) {
    const int top = t + static_cast<int>(k) * kLane;
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", l - 6,
                     top + kLane - 6, names[k]);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f4f4f4\"/>\n", l,
                     top, kBins, kLane - 2);
    auto full = [&](std::size_t i) { return bins[i].c[k] >= per_bin * (1 - 1e-9); };
    for (std::size_t i = 0; i < bins.size();) {
      if (full(i)) {
        std::size_t j = i + 1;
        while (j < bins.size() && full(j)) ++j;
        s += fmt::format(
            "<rect class=\"segment\" data-kind=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" "
            "height=\"{}\" fill=\"{}\"/>\n",
            names[k], l + static_cast<int>(i), top, static_cast<int>(j - i), kLane - 2, colours[k]);
        i = j;
        continue;
      }
      if (bins[i].c[k] > 0) {
        const double hh = std::max(0.5, bins[i].c[k] / per_bin * (kLane - 2));
        s += fmt::format(
            "<rect class=\"segment\" data-kind=\"{}\" x=\"{}\" y=\"{:.2f}\" width=\"1\" "
            "height=\"{:.2f}\" fill=\"{}\"/>",
            names[k], l + static_cast<int>(i), top + kLane - 2 - hh, hh, colours[k]);
      }
      ++i;
    }
    s += "\n";
  }
  // Hover targets: one per pixel column, over every lane.
  for (std::size_t i = 0; i < bins.size(); ++i)
    s += fmt::format(
        "<rect class=\"hover\" x=\"{}\" y=\"{}\" width=\"1\" height=\"{}\" "
        "fill-opacity=\"0\"><title>{}</title></rect>\n",
        l + static_cast<int>(i), t, kStripH, title(i));
  // Time axis with round ticks.
  const double span = total / clock * scale;
  for (const double v : round_ticks(span)) {
    if (v > span * (1 + 1e-9)) break;
    const double x = l + v / span * kBins;
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#999\"/><text "
        "x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        x, t + kStripH, t + kStripH + 5, t + kStripH + 18, num(v));
  }
  s += fmt::format(
      "<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">time in the step "
      "({}), supersteps in program order</text>\n",
      l + kBins / 2, t + kStripH + 36, unit);
  double lx = l;
  const int ly = t + kStripH + 54;
  const std::array<std::string, kCats> legend{
      "compute", "sync", "exchange", "waiting (for other IPUs)",
      "other (host, streaming, external sync, inter-IPU, collective)"};
  for (std::size_t c = 0; c < kCats; ++c) {
    s += fmt::format(
        "<rect x=\"{:.0f}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.0f}\" "
        "y=\"{}\">{}</text>\n",
        lx, ly, colours[c], lx + 14, ly + 10, legend[c]);
    lx += 28 + 6.5 * static_cast<double>(legend[c].size());
  }
  s += "</svg>\n";
  return fmt::format(
             "<h2 id=\"bsp-strip\">BSP timeline of one step (IPU {})</h2>\n<p class=\"note\">The "
             "IPU that sets the step time: its {} supersteps in program order (each with all of "
             "its executions), time running left to right, one lane per kind of phase. Each "
             "pixel column is a slice of the step; a lane's bar is as tall as that kind's share "
             "of the slice (full: the slice is all that kind). Hover for the supersteps and "
             "shares (supersteps.csv).</p>\n",
             ipu, steps.size()) +
         s;
}

// --- memory over the program (stats.json ipu[].memory_over_program) ---------------------

// The fullest tile's live memory over program positions, against the tile capacity, with
// what is always live (docs/reports.md "Memory over the program").
std::string liveness_chart(std::uint32_t ipu, const JsonValue& m, double capacity) {
  const JsonValue* samples = m.find("samples");
  const double positions = number_at(m, "positions.value");
  if (!samples || samples->kind != JsonValue::Kind::kArray || samples->items.empty() ||
      !(positions > 0))
    return "";
  const double per = std::max(1.0, number_at(m, "positions_per_sample.value"));
  const double tile = number_at(m, "tile"), always = number_at(m, "always_live.tile.value");
  const double peak = number_at(m, "peak.tile.value");
  const double kib = 1024;
  const std::vector<double> yticks = round_ticks(std::max(capacity, peak) / kib);
  const std::vector<double> xticks = round_ticks(positions);
  const int w = 760, h = 300, l = 78, r = 150, t = 20, bt = 46;
  const double ytop = yticks.back(), xtop = xticks.back();
  const auto px = [&](double x) { return l + x / xtop * (w - l - r); };
  const auto py = [&](double y) { return t + (1 - y / kib / ytop) * (h - t - bt); };
  std::string s = fmt::format(
      "<p>Fullest tile {}: peak {}; whole IPU: peak {}, of which {} always live (each point the "
      "largest of {} positions).</p>\n"
      "<svg id=\"chart-liveness-ipu{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{}\" height=\"{}\" role=\"img\">\n",
      num(tile), human_bytes(peak), human_bytes(number_at(m, "peak.ipu.value")),
      human_bytes(number_at(m, "always_live.ipu.value")), num(per), ipu, w, h);
  for (const double y : yticks)
    s += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#eee\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        l, py(y * kib), w - r, py(y * kib), l - 4, py(y * kib) + 4, num(y));
  for (const double x : xticks)
    s += fmt::format(
        "<text class=\"x-tick\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(x),
        h - bt + 16, num(x));
  s += fmt::format(
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/><line x1=\"{}\" "
      "y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/>\n",
      l, h - bt, w - r, h - bt, l, t, l, h - bt);
  s += fmt::format(
      "<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">program "
      "position</text>\n<text class=\"axis-title\" x=\"14\" y=\"{}\" transform=\"rotate(-90 "
      "14 {})\" text-anchor=\"middle\">live on tile {} (KiB)</text>\n",
      (l + w - r) / 2, h - 10, (t + h - bt) / 2, (t + h - bt) / 2, num(tile));
  // A step line: each sample holds from its first position to the next sample's.
  std::string poly;
  for (std::size_t i = 0; i < samples->items.size(); ++i) {
    const JsonValue& p = samples->items[i];
    const double x0 = number_at(p, "first_position"), y = number_at(p, "tile_bytes");
    const double x1 = std::min(positions, x0 + per);
    poly += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", px(x0), py(y), px(x1), py(y));
  }
  s += fmt::format(
      "<polyline class=\"series\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"2\" "
      "points=\"{}\"><title>live on tile {}: peak {}</title></polyline>\n",
      poly, num(tile), human_bytes(peak));
  const auto level = [&](double bytes, const char* dash, const std::string& label) {
    return fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#555\" "
        "stroke-dasharray=\"{}\"/><text x=\"{}\" y=\"{:.1f}\">{}</text>\n",
        l, py(bytes), w - r, py(bytes), dash, w - r + 4, py(bytes) + 4, esc(label));
  };
  if (capacity > 0) s += level(capacity, "6 4", "capacity " + human_bytes(capacity));
  s += level(always, "2 3", "always live " + human_bytes(always));
  return s + "</svg>\n";
}

std::string liveness_section(const RunDir& run) {
  const JsonValue* ipus = run.stats.find("ipu");
  if (!ipus || ipus->kind != JsonValue::Kind::kArray) return "";
  const double capacity = find_stat(run, "chip.tile_memory").value_or(0);
  std::string b;
  std::size_t drawn = 0;
  for (const JsonValue& ipu : ipus->items) {
    const JsonValue* m = ipu.find("memory_over_program");
    if (!m || m->kind != JsonValue::Kind::kObject || drawn == kMaxHeatMaps) continue;
    const std::string chart =
        liveness_chart(static_cast<std::uint32_t>(number_at(ipu, "index")), *m, capacity);
    if (chart.empty()) continue;
    if (drawn++ == 0)
      b += "<h2>Memory over the program</h2>\n<p class=\"note\">Live bytes on each IPU's fullest "
           "tile at each program position (the program's steps in order, loop bodies once), "
           "against the tile capacity (dashed) and what is live throughout (dotted: tensors "
           "without a lifetime, vertex state, code, exchange code, stack).</p>\n";
    b += fmt::format("<h3>IPU {}</h3>\n", num(number_at(ipu, "index"))) + chart;
  }
  return b;
}

}  // namespace

std::string html_report(const RunDir& run, const RunDir* compare) {
  std::string body = summary_section(run);
  // The comparison, when asked for, comes right after the summary, which links to it.
  if (compare) {
    body += fmt::format(
        "<p id=\"compare-link\"><a href=\"#compared-with\">Compared with {}</a>: the headline, "
        "where "
        "the step-time change comes from, and the settings that differ.</p>\n",
        esc(compare->path));
    body += compare_section(run, *compare);
  }
  body += time_section(run);
  body += pipeline_section(run);
  body += layers_section(run);
  body += plan_section(run);
  body += roofline_section(run);
  body += bsp_strip_section(run);
  body += tiles_section(run);
  body += liveness_section(run);
  body += phases_section(run);
  body += supersteps_section(run);
  return page("ipusim report: " + text_of(run.stats, {"trace", "name"}), body);
}

bool is_sweep_dir(const std::string& dir) {
  return std::filesystem::is_regular_file(dir + "/sweep.json");
}

std::string sweep_html_report(const std::string& dir) {
  const std::string file = dir + "/sweep.json";
  const JsonValue root = parse_json(read_input_file(file, kMaxStatsBytes, "sweep.json"), file);
  if (root.kind != JsonValue::Kind::kObject)
    throw Error(fmt::format("{}: expected an object at the top level", file));
  const JsonValue& points = need(root, "points", JsonValue::Kind::kArray, "sweep", file);
  std::vector<Point> pts;
  for (std::size_t i = 0; i < points.items.size(); ++i)
    pts.push_back(parse_point(points.items[i], fmt::format("points[{}]", i), file));
  for (auto& p : pts) p.report = point_report(dir, p);

  // Swept keys: of every point for the table; of the points that ran for the charts.
  const std::vector<std::string> keys = pts.empty() ? std::vector<std::string>{} : swept_keys(pts);
  std::vector<Point> ran;
  std::copy_if(pts.begin(), pts.end(), std::back_inserter(ran),
               [](const Point& p) { return p.status == "ok"; });
  const std::vector<std::string> ran_keys =
      ran.empty() ? std::vector<std::string>{} : swept_keys(ran);
  const XAxis xa = choose_x_axis(ran, ran_keys);
  std::vector<std::string> series_keys;
  for (const auto& k : ran_keys)
    if (!along_x(ran, xa, k)) series_keys.push_back(k);
  std::vector<std::string> workloads;
  for (const auto& p : pts)
    if (p.status == "ok" &&
        std::find(workloads.begin(), workloads.end(), p.workload) == workloads.end())
      workloads.push_back(p.workload);

  const auto failed =
      std::count_if(pts.begin(), pts.end(), [](const Point& p) { return p.status != "ok"; });
  std::string swept;
  for (const auto& k : keys) swept += (swept.empty() ? "" : ", ") + k;
  const JsonValue* spec = root.find("spec");
  std::string body = fmt::format(
      "<h2>Summary</h2>\n<table id=\"summary\">{}{}{}{}{}</table>\n", row("sweep directory", dir),
      row("spec", spec && spec->kind == JsonValue::Kind::kString ? spec->string : ""),
      row("points", fmt::format("{} ({} failed)", pts.size(), failed)),
      row("swept", swept.empty() ? "nothing" : swept), row("x axis of the charts", xa.title()));

  // One panel per workload: throughput (or, without one, step time) against the x axis, and
  // on an IPU axis the scaling efficiency with the ideal line and each point's global batch.
  body += "<h2>Results against " + esc(xa.title()) + "</h2>\n";
  for (std::size_t w = 0; w < workloads.size(); ++w) {
    SeriesMap values, efficiency;
    std::string unit, samples_unit;
    double longest = 0;
    bool has_throughput = true;
    for (const auto& p : pts)
      if (p.status == "ok" && p.workload == workloads[w]) {
        has_throughput = has_throughput && p.throughput.has_value();
        longest = std::max(longest, p.step_time);
      }
    const auto [scale, time_unit_name] = time_unit(longest);
    // A series' points are labelled with their global batch only when it changes along the
    // series (a scaling sweep that grows the batch with the IPUs).
    std::set<double> batches;
    std::map<std::string, std::set<double>> series_batches;
    for (const auto& p : pts)
      if (p.status == "ok" && p.workload == workloads[w] && p.samples) {
        batches.insert(*p.samples);
        series_batches[series_of(p, series_keys)].insert(*p.samples);
      }
    bool label_batches = false;
    for (const auto& [name, b] : series_batches) label_batches = label_batches || b.size() > 1;
    for (const auto& p : pts) {
      if (p.status != "ok" || p.workload != workloads[w]) continue;
      const std::string name = series_of(p, series_keys);
      const std::string batch = series_batches[name].size() > 1 && p.samples
                                    ? fmt::format("batch {}", num(*p.samples))
                                    : std::string();
      values[name].push_back(
          {x_of(p, xa), has_throughput ? *p.throughput : p.step_time * scale, batch});
      unit = p.unit;
      samples_unit = p.samples_unit;
    }
    const std::string y_title = has_throughput
                                    ? "throughput" + (unit.empty() ? "" : " (" + unit + ")")
                                    : "step time (" + time_unit_name + ")";
    body += fmt::format("<h3>{}: {}</h3>\n", esc(workloads[w]), esc(y_title));
    body += xy_chart(fmt::format("chart-sweep-throughput-{}", w), xa, y_title, values);
    if (xa.key.empty() && has_throughput) {
      // (throughput / IPUs) relative to the series' point with the fewest IPUs.
      bool scaling = false;
      for (auto& [name, v] : values) {
        std::sort(v.begin(), v.end(), [](const XY& a, const XY& b) { return a.x < b.x; });
        const XY& first = v.front();
        for (const XY& p : v)
          efficiency[name].push_back(
              {p.x, first.y > 0 && p.x > 0 ? (p.y / p.x) / (first.y / first.x) : 0.0, p.note});
        scaling = scaling || v.size() > 1;
      }
      if (scaling)
        body +=
            fmt::format(
                "<p class=\"note\">Scaling efficiency: (throughput / IPUs) relative to the "
                "point with the fewest IPUs; 1 = linear scaling. {}</p>\n",
                label_batches ? fmt::format("Labels: global batch ({} per step).",
                                            esc(samples_unit.empty() ? "samples" : samples_unit))
                : batches.size() == 1
                    ? fmt::format("Every point's global batch: {} {} per step.",
                                  num(*batches.begin()),
                                  esc(samples_unit.empty() ? "samples" : samples_unit))
                    : std::string()) +
            xy_chart(fmt::format("chart-sweep-efficiency-{}", w), xa, "scaling efficiency",
                     efficiency, 1.0);
    }
  }

  // Where each point's step goes (seconds per phase kind), points in sweep order.
  std::vector<PhaseRow> rows;
  for (const auto& p : pts) {
    if (p.status != "ok") continue;
    // A path's file name (one with an extension) stands for it; the points table below has
    // the whole value.
    std::string label = p.id.substr(0, 8);
    for (const auto& k : keys)
      if (const std::string* v = p.value_of(k)) {
        const std::string file_name = v->substr(v->rfind('/') + 1);  // all of it without '/'
        label += " " + (file_name.find('.') != std::string::npos ? file_name : *v);
      }
    rows.emplace_back(label, p.breakdown);
  }
  if (!rows.empty())
    body +=
        "<h2>Where the time goes, per point</h2>\n<p class=\"note\">Step time of each point "
        "by phase kind (seconds, the IPU that sets the step), to scale.</p>\n" +
        time_split_chart("chart-sweep-breakdown", rows, /*absolute=*/true, "s");

  // Every point, with its swept values and a link to its own report.
  body += "<h2>Points</h2>\n<table id=\"sweep-points\"><tr><th>id</th>";
  for (const auto& k : keys) body += "<th class=\"path\">" + esc(k) + "</th>";
  body +=
      "<th>workload</th><th>system name</th><th>IPUs</th><th>global batch</th><th>step time</th>"
      "<th>throughput</th><th>time to train</th><th>status</th><th>run directory / "
      "error</th></tr>\n";
  for (const auto& p : pts) {
    body += fmt::format("<tr class=\"{}\"><td>{}</td>", p.status == "ok" ? "ok" : "failed",
                        p.report.empty()
                            ? esc(p.id)
                            : fmt::format("<a href=\"{}\">{}</a>", esc(p.report), esc(p.id)));
    for (const auto& k : keys) {
      const std::string* v = p.value_of(k);
      body += "<td class=\"path\">" + esc(v ? *v : "") + "</td>";
    }
    body += fmt::format(
        "<td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td "
        "class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td "
        "class=\"path\">{}</td></tr>\n",
        esc(p.workload), esc(p.system), num(p.ipus),
        p.samples ? num(*p.samples) + " " + esc(p.samples_unit) : "",
        p.status == "ok" ? human_seconds(p.step_time) : "",
        p.throughput ? fmt::format("{} {}", num(*p.throughput), esc(p.unit)) : "",
        p.time_to_train
            ? (*p.time_to_train >= 120 ? fmt::format("{:.1f} min", *p.time_to_train / 60)
                                       : human_seconds(*p.time_to_train))
            : "",
        esc(p.status),
        p.status != "ok"   ? esc(p.error)
        : p.report.empty() ? esc(p.run_dir)
                           : fmt::format("<a href=\"{}\">{}</a>", esc(p.report), esc(p.run_dir)));
  }
  body += "</table>\n";
  return page("ipusim sweep report: " + dir, body);
}

}  // namespace ipusim::report
