// SPDX-License-Identifier: Apache-2.0
#include "ipusim/report/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "ipusim/report/run_files.hpp"
#include "ipusim/util/strings.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::report {
namespace {

// A whole number of at most 9 digits (a meta value the compiler wrote); nullopt otherwise (a
// hand-edited trace: then there is no analysis).
std::optional<std::uint32_t> count(std::string_view text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != text.npos)
    return std::nullopt;
  return static_cast<std::uint32_t>(std::stoul(std::string(text)));
}

// What a row's pass is part of: 1 the forward, 2 the backward, 0 neither (copies, the weight
// update, collectives).
int part_of(const std::string& pass) {
  if (pass == "forward" || pass == "host_io") return 1;
  if (pass == "recompute" || pass == "data_gradient" || pass == "weight_gradient") return 2;
  return 0;
}

// A layer's kind: its name with each run of digits as N ("encoder3/ffn" -> "encoderN/ffn");
// the steps between layers by their pass ("(host input)" for host_io).
std::string kind_of(const std::string& layer, const std::string& pass) {
  if (layer.empty()) return pass == "host_io" ? "(host input)" : "(between layers)";
  std::string out;
  for (std::size_t i = 0; i < layer.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(layer[i])) == 0) {
      out += layer[i];
      continue;
    }
    out += 'N';
    while (i + 1 < layer.size() && std::isdigit(static_cast<unsigned char>(layer[i + 1])) != 0) ++i;
  }
  return out;
}

// A row's own work: not waiting, inter-IPU copies, external syncs or collectives.
double busy(const PhaseCycles& c) {
  return static_cast<double>(c[PhaseKind::kCompute] + c[PhaseKind::kSync] +
                             c[PhaseKind::kExchange] + c[PhaseKind::kHost] +
                             c[PhaseKind::kStreaming]);
}

// Stage work from the layer rows: each row to its IPU's first stage, or to the later stage
// whose layers the trace lists (pipeline.stage_layers.S). Fills p.stages and the slowest's
// layers.
void stage_work(const RunInfo& info, const std::vector<std::uint32_t>& ipus, PipelineAnalysis& p) {
  std::map<std::uint32_t, std::uint32_t> first;  // IPU -> its first stage
  std::map<std::pair<std::uint32_t, std::string>, std::uint32_t> later;
  for (std::uint32_t s = 0; s < ipus.size(); ++s) {
    p.stages.push_back({s, ipus[s], 0, 0});
    first.emplace(ipus[s], s);
  }
  for (const auto& [key, value] : info.meta) {
    const auto colon = value.find(':');
    if (!key.starts_with("pipeline.stage_layer.") || colon == std::string::npos) continue;
    const auto s = count(std::string_view(value).substr(0, colon));
    if (s && *s < ipus.size()) later[{ipus[*s], value.substr(colon + 1)}] = *s;
  }
  const auto ga = static_cast<double>(p.micro_batches);
  std::vector<std::map<std::string, double>> per_kind(p.stages.size());
  for (const LayerRow& row : info.layers) {
    const int part = part_of(row.pass);
    const auto f = first.find(row.ipu);
    if (part == 0 || f == first.end()) continue;
    const auto l = later.find({row.ipu, row.layer});
    const std::uint32_t s = l == later.end() ? f->second : l->second;
    const double cycles = busy(row.cycles) / ga;
    (part == 1 ? p.stages[s].forward : p.stages[s].backward) += cycles;
    per_kind[s][kind_of(row.layer, row.pass)] += cycles;
  }
  for (std::size_t s = 0; s < p.stages.size(); ++s)
    if (p.stages[s].total() > p.stages[p.slowest].total()) p.slowest = s;
  // Each kind's excess over the median of the other stages.
  std::vector<std::size_t> others;
  for (std::size_t s = 0; s < p.stages.size(); ++s)
    if (s != p.slowest) others.push_back(s);
  std::stable_sort(others.begin(), others.end(), [&](std::size_t a, std::size_t b) {
    return p.stages[a].total() < p.stages[b].total();
  });
  p.reference = others[others.size() / 2];
  std::map<std::string, double> excess = per_kind[p.slowest];
  for (const auto& [kind, c] : per_kind[p.reference]) excess[kind] -= c;
  std::vector<std::pair<std::string, double>> top;
  for (const auto& [kind, c] : excess)
    if (c > 0) top.emplace_back(kind, c);
  std::stable_sort(top.begin(), top.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  top.resize(std::min<std::size_t>(top.size(), 3));
  p.slowest_excess = std::move(top);
}

// The schedule's waiting of each IPU with stages: cycle by cycle (in runs of equal cycles), the
// cycle lasts as long as its busiest IPU; an IPU waits for the rest.
void schedule(const RunStats& stats, PipelineAnalysis& p) {
  const std::uint64_t ga = p.micro_batches;
  const std::uint64_t loss = p.stages.size() - 1;
  std::set<std::uint64_t> cuts{0, p.cycles, std::min(2 * loss, p.cycles), std::min(ga, p.cycles)};
  for (std::uint64_t s = 0; s <= loss; ++s)
    for (const std::uint64_t c : {s, s + ga, 2 * loss - s, 2 * loss - s + ga})
      cuts.insert(std::min(c, p.cycles));
  std::map<std::uint32_t, double> fill, unequal;
  for (auto it = cuts.begin(); std::next(it) != cuts.end(); ++it) {
    const std::uint64_t c = *it, runs = *std::next(it) - c;
    std::map<std::uint32_t, double> work;
    for (const StageWork& st : p.stages) {
      work[st.ipu] += 0;
      const std::uint64_t s = st.stage;
      if (c >= s && c < s + ga) work[st.ipu] += st.forward + (s == loss ? st.backward : 0);
      if (s != loss && c >= 2 * loss - s && c < 2 * loss - s + ga) work[st.ipu] += st.backward;
    }
    double longest = 0;
    for (const auto& [ipu, w] : work) longest = std::max(longest, w);
    const bool steady = c >= 2 * loss && c < ga;
    for (const auto& [ipu, w] : work)
      (steady ? unequal : fill)[ipu] += static_cast<double>(runs) * (longest - w);
  }
  for (const IpuRunStats& ipu : stats.ipus) {
    if (!fill.contains(ipu.ipu)) continue;
    p.waiting.push_back(
        {ipu.ipu, ipu.phases[PhaseKind::kWaiting], 0, fill[ipu.ipu], unequal[ipu.ipu]});
  }
}

// Each IPU's simulated waiting at the pipeline's copies and in its stages (the rest is at the
// collectives and the weight update after it).
void waiting_in_pipeline(const RunInfo& info, PipelineAnalysis& p) {
  for (const LayerRow& row : info.layers) {
    if (row.pass != "pipeline_copy" && part_of(row.pass) == 0) continue;
    for (PipelineWaiting& w : p.waiting)
      if (w.ipu == row.ipu) w.in_pipeline += row.cycles[PhaseKind::kWaiting];
  }
}

// Cycles as "6.39 M" (no trailing space for units of one).
std::string cycles_text(double c) {
  std::string out = human_rate(c, "");
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

std::optional<PipelineAnalysis> pipeline_analysis(const RunStats& stats, const RunInfo& info) {
  const std::string* ga = trace::find_meta(info.meta, "pipeline.micro_batches");
  const std::string* ipus = trace::find_meta(info.meta, "pipeline.stage_ipus");
  if (ga == nullptr || ipus == nullptr || info.layers.empty()) return std::nullopt;
  std::vector<std::uint32_t> stage_ipus;
  for (const std::string& v : split(*ipus, ':')) {
    const auto ipu = count(v);
    if (!ipu) return std::nullopt;
    stage_ipus.push_back(*ipu);
  }
  const auto micro_batches = count(*ga);
  if (stage_ipus.size() < 2 || stage_ipus.size() > 4096 || !micro_batches || *micro_batches == 0)
    return std::nullopt;
  PipelineAnalysis p;
  p.micro_batches = *micro_batches;
  p.cycles = p.micro_batches + 2 * (stage_ipus.size() - 1);
  stage_work(info, stage_ipus, p);
  schedule(stats, p);
  waiting_in_pipeline(info, p);
  return p;
}

std::string pipeline_text(const PipelineAnalysis& p, std::uint32_t ipu) {
  std::string out = fmt::format(
      "  pipeline      {} stages, {} micro-batches in {} cycles (PopART's schedule); cycles per "
      "micro-batch:\n",
      p.stages.size(), p.micro_batches, p.cycles);
  const double median = p.stages[p.reference].total();
  for (const StageWork& st : p.stages) {
    std::string why;
    if (st.stage == p.slowest) {
      why = fmt::format("; the slowest, {:+.1f}% on the median of the others (stage {}), most by",
                        median > 0 ? 100.0 * (st.total() / median - 1) : 0.0, p.reference);
      for (std::size_t i = 0; i < p.slowest_excess.size(); ++i)
        why += fmt::format("{} {} +{}", i == 0 ? "" : ",", p.slowest_excess[i].first,
                           cycles_text(p.slowest_excess[i].second));
    }
    out += fmt::format("                stage {} on ipu{}: forward {} + backward {} = {}{}\n",
                       st.stage, st.ipu, cycles_text(st.forward), cycles_text(st.backward),
                       cycles_text(st.total()), why);
  }
  const auto it = std::find_if(p.waiting.begin(), p.waiting.end(),
                               [&](const PipelineWaiting& w) { return w.ipu == ipu; });
  if (it != p.waiting.end())
    out += fmt::format(
        "                ipu{} waited {} cycles: {} in the pipeline (by these stage times: fill "
        "and drain {}, unequal stages {}), {} after it (collectives, weight update)\n",
        ipu, cycles_text(static_cast<double>(it->simulated)),
        cycles_text(static_cast<double>(it->in_pipeline)), cycles_text(it->fill_and_drain),
        cycles_text(it->unequal_stages),
        cycles_text(static_cast<double>(it->simulated - std::min(it->simulated, it->in_pipeline))));
  return out;
}

void write_pipeline_json(JsonWriter& w, const PipelineAnalysis& p) {
  w.key("pipeline").begin_object();
  w.quantity("micro_batches", p.micro_batches, "micro-batches");
  w.quantity("cycles", p.cycles, "pipeline cycles");
  w.key("stages").begin_array();
  for (const StageWork& st : p.stages) {
    w.begin_object();
    w.key("stage").value(static_cast<std::uint64_t>(st.stage));
    w.key("ipu").value(static_cast<std::uint64_t>(st.ipu));
    w.quantity("forward", st.forward, "cycles per micro-batch");
    w.quantity("backward", st.backward, "cycles per micro-batch");
    w.end_object();
  }
  w.end_array();
  w.key("slowest_stage").value(static_cast<std::uint64_t>(p.slowest));
  w.key("reference_stage").value(static_cast<std::uint64_t>(p.reference));
  w.key("slowest_excess").begin_array();
  for (const auto& [kind, c] : p.slowest_excess) {
    w.begin_object();
    w.key("layers").value(kind);
    w.quantity("cycles", c, "cycles per micro-batch");
    w.end_object();
  }
  w.end_array();
  w.key("waiting").begin_array();
  for (const PipelineWaiting& wt : p.waiting) {
    w.begin_object();
    w.key("ipu").value(static_cast<std::uint64_t>(wt.ipu));
    w.quantity("simulated", wt.simulated, "cycles");
    w.quantity("in_pipeline", wt.in_pipeline, "cycles");
    w.quantity("fill_and_drain", wt.fill_and_drain, "cycles");
    w.quantity("unequal_stages", wt.unequal_stages, "cycles");
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

}  // namespace ipusim::report
