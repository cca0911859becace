// SPDX-License-Identifier: Apache-2.0
#include "ipusim/report/run_files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <iterator>
#include <map>
#include <ostream>
#include <unordered_map>

#include "ipusim/cost/program_costs.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/json.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::report {
namespace {

// The timeline category of a span: its phase kind's name, "loop" or "background_host".
std::string_view kind_name(SpanKind k) {
  if (const auto phase = phase_of(k)) return phase_name(*phase);
  return k == SpanKind::kLoop ? "loop" : "background_host";
}

template <class Array>
std::string_view name_at(const Array& names, std::uint32_t i) {
  return i < names.size() ? names[i] : std::string_view("?");
}

// CSV cells, each followed by a comma (the line's last one is replaced by its newline), numbers
// as fmt's "{}" writes them: no format string is parsed per cell, since a run directory's CSVs
// have hundreds of thousands of cells.
template <std::integral T>
void cell(std::string& out, T v) {
  const fmt::format_int digits(v);
  out.append(digits.data(), digits.size());
  out += ',';
}
void cell(std::string& out, std::string_view text) {
  out += text;
  out += ',';
}
template <class... Cells>
void cells(std::string& out, const Cells&... values) {
  (cell(out, values), ...);
}
void end_line(std::string& out) { out.back() = '\n'; }

}  // namespace

std::string tiles_csv(const RunStats& stats) {
  std::string out = std::string(kTilesHeader) + "\n";
  for (const auto& ipu : stats.ipus)
    for (std::size_t t = 0; t < ipu.tile_compute_cycles.size(); ++t) {
      const auto& m = ipu.memory.tiles[t];
      cells(out, ipu.ipu, t, ipu.tile_compute_cycles[t], ipu.tile_exchange_bytes[t], m.total());
      for (std::uint64_t b : m.tensor_kinds) cell(out, b);
      cells(out, m.vertex_state, m.code, m.exchange_code, m.stack);
      end_line(out);
    }
  return out;
}

namespace {

// Where the time of one step goes (layer_rows): a compute set's or exchange's provenance, or
// one of the fixed rows.
struct Target {
  enum Kind {
    kNone,
    kCompute,
    kExchange,
    kHost,
    kExternalSync,
    kCollective,
    kInterIpu
  } kind = kNone;
  std::uint32_t index = 0;
  // A compute or exchange step's own pass (trace format v4), if it runs its item in another.
  trace::Pass pass = trace::Pass::kNone;
};

Target target_of(const trace::Step& s) {
  switch (s.kind) {
    case trace::StepKind::kCompute:
      return {Target::kCompute, s.index, s.provenance.pass};
    case trace::StepKind::kExchange:
      return {Target::kExchange, s.index, s.provenance.pass};
    case trace::StepKind::kHost:
      return {Target::kHost, 0};
    case trace::StepKind::kCollective:
      return {Target::kCollective, 0};
    case trace::StepKind::kGlobalExchange:
      return {Target::kInterIpu, 0};
    case trace::StepKind::kSync:
      return s.group.kind == trace::GroupKind::kTile ? Target{} : Target{Target::kExternalSync, 0};
    case trace::StepKind::kRepeat:
      break;
  }
  return {};
}

// The first (or last) step of `steps` that is not an on-chip sync, looking into loops.
Target first_target(const std::vector<trace::Step>& steps, bool from_end) {
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const trace::Step& s = steps[from_end ? steps.size() - 1 - k : k];
    const Target t =
        s.kind == trace::StepKind::kRepeat ? first_target(s.body, from_end) : target_of(s);
    if (t.kind != Target::kNone) return t;
  }
  return {};
}

// One IPU's layer rows (layer_rows), from one walk over its program. Each item's rows are
// found by name once, the first time a step runs it in a pass, and by number after: the walk
// visits every step of the program once (loop bodies once, with their executions), and each
// step's cycles, FLOPs and bytes are the engine's numbers for its item (IpuRunStats::
// compute_sets, exchanges: one execution's), never costed here.
class LayerWalk {
 public:
  LayerWalk(const ChipSpec& chip, const IpuRunStats& ipu, const trace::IpuProgram& program,
            const LiveMemory& memory)
      : ipu_(ipu),
        program_(program),
        memory_(memory),
        sync_cycles_(chip.sync.internal_latency.count) {
    walk(program.steps, 1);
    add_dynamic_phases();
    name_groups();
  }

  // Appends the rows with time or executions, largest total first (ties in (layer, pass)
  // order).
  void rows_by_time(std::vector<LayerRow>& out) {
    std::vector<LayerRow> list;
    for (const auto& [key, id] : ids_)
      if (rows_[id].total() > 0 || rows_[id].executions > 0) list.push_back(std::move(rows_[id]));
    std::stable_sort(list.begin(), list.end(),
                     [](const LayerRow& a, const LayerRow& b) { return a.total() > b.total(); });
    for (auto& r : list) out.push_back(std::move(r));
  }

 private:
  // The rows a step's time goes to: one per layer its item serves, so that a row is the
  // model's (layer, pass) whatever the planner grouped into one compute set; a phase serving
  // several layers is split equally among them (issue 27: rows named by the group, such as
  // "b3/5/conv2+b3/4/conv2", changed with the plan), and `group` names them ("a+b").
  struct Served {
    std::vector<std::uint32_t> rows;
    std::uint32_t group = 0;  // the layers' names joined ("a+b"; group_names_), when several
    // With several rows, the cycles each of them got from the item (cycles / rows, rounded
    // down, on each step): what names a row's group (name_groups).
    std::uint64_t shared_cycles = 0;
  };

  std::uint32_t row(const std::string& layer, const std::string& pass) {
    const auto [it, added] =
        ids_.try_emplace({layer, pass}, static_cast<std::uint32_t>(rows_.size()));
    if (added) {
      LayerRow& r = rows_.emplace_back();
      r.ipu = ipu_.ipu;
      r.layer = layer;
      r.pass = pass;
    }
    return it->second;
  }

  Served of(const trace::Provenance& prov, trace::Pass step_pass) {
    if (prov.empty()) return {{row("(unattributed)", "")}};
    const trace::Pass kind = step_pass != trace::Pass::kNone ? step_pass : prov.pass;
    const std::string pass(trace::kPassNames[static_cast<std::size_t>(kind)]);
    if (prov.layers.empty()) return {{row("(" + pass + ")", pass)}};
    Served served;
    for (const auto& l : prov.layers) served.rows.push_back(row(l, pass));
    if (served.rows.size() > 1) {
      std::string name;
      for (const auto& l : prov.layers) name += (name.empty() ? "" : "+") + l;
      const auto [it, added] =
          group_ids_.try_emplace(name, static_cast<std::uint32_t>(group_names_.size()));
      if (added) group_names_.push_back(std::move(name));
      served.group = it->second;
    }
    return served;
  }

  Served of(const Target& t) {
    switch (t.kind) {
      case Target::kCompute:
        return t.index < program_.compute_sets.size()
                   ? of(program_.compute_sets[t.index].provenance, t.pass)
                   : Served{{row("(unattributed)", "")}};
      case Target::kExchange:
        return t.index < program_.exchanges.size()
                   ? of(program_.exchanges[t.index].provenance, t.pass)
                   : Served{{row("(unattributed)", "")}};
      case Target::kHost:
        return {{row("(host I/O)", "host_io")}};
      case Target::kExternalSync:
        return {{row("(external sync)", "")}};
      case Target::kCollective:
        return {{row("(collectives)", "")}};
      case Target::kInterIpu:
        return {{row("(pipeline copies)", "pipeline_copy")}};
      case Target::kNone:
        break;
    }
    return {{row("(unattributed)", "")}};
  }

  // The rows of a target, found once per (kind, item, pass).
  Served& served(const Target& t) {
    const std::uint64_t key = (static_cast<std::uint64_t>(t.kind) << 48) |
                              (static_cast<std::uint64_t>(t.index) << 8) |
                              static_cast<std::uint64_t>(t.pass);
    auto it = served_.find(key);
    if (it == served_.end()) it = served_.emplace(key, of(t)).first;
    return it->second;
  }

  // An amount split equally among the rows, the remainder to the first ones, so sums stay
  // exact.
  template <class Add>
  void split(const Served& among, std::uint64_t amount, Add&& add) {
    const std::uint64_t n = among.rows.size(), each = amount / n, extra = amount % n;
    for (std::uint64_t k = 0; k < n; ++k) add(rows_[among.rows[k]], each + (k < extra ? 1 : 0));
  }
  static void note_shared(Served& among, std::uint64_t cycles) {
    if (among.rows.size() > 1) among.shared_cycles += cycles / among.rows.size();
  }

  // Cycles of one execution of a compute set or exchange, from the engine's total: every
  // on-chip phase costs the same on each execution, so the share is exact.
  static std::uint64_t per_execution(const std::vector<NamedPhase>& named, std::uint32_t i) {
    return i < named.size() && named[i].executions > 0 ? named[i].cycles / named[i].executions
                                                       : std::uint64_t{0};
  }

  void note_memory(const Served& among, std::uint64_t at) {
    if (at >= memory_.ipu_bytes.size()) return;
    for (std::uint32_t id : among.rows) {
      LayerRow& r = rows_[id];
      r.peak_live_bytes = std::max(r.peak_live_bytes, memory_.ipu_bytes[at]);
      r.peak_tile_live_bytes = std::max(r.peak_tile_live_bytes, memory_.tile_bytes[at]);
    }
  }

  // The program's on-chip phases, each execution counted (the product of its loops): an
  // on-chip sync goes with the next step of its list that is not one (looking into a loop
  // that follows), or else the last before it, so that the attribution does not depend on how
  // loops are run. Host copies and group steps are dynamic: their phase totals go to their
  // fixed rows (add_dynamic_phases). Each step's program position (pre-order) gives its rows'
  // peak live memory.
  void walk(const std::vector<trace::Step>& steps, std::uint64_t times) {
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const trace::Step& s = steps[i];
      const std::uint64_t here = position_++;  // a loop's body follows it
      if (s.kind == trace::StepKind::kRepeat) {
        walk(s.body, times * s.count);
        continue;
      }
      const Target target = target_of(s);
      if (target.kind != Target::kNone) note_memory(served(target), here);
      if (s.kind == trace::StepKind::kCompute) {
        Served& rows = served(target);
        const std::uint64_t cycles = per_execution(ipu_.compute_sets, s.index) * times;
        split(rows, cycles,
              [](LayerRow& r, std::uint64_t c) { r.cycles[PhaseKind::kCompute] += c; });
        note_shared(rows, cycles);
        split(rows, times, [](LayerRow& r, std::uint64_t n) { r.executions += n; });
        if (s.index < ipu_.compute_sets.size())
          split(rows, ipu_.compute_sets[s.index].flops * times,
                [](LayerRow& r, std::uint64_t f) { r.flops += f; });
      } else if (s.kind == trace::StepKind::kExchange) {
        Served& rows = served(target);
        const std::uint64_t cycles = per_execution(ipu_.exchanges, s.index) * times;
        split(rows, cycles,
              [](LayerRow& r, std::uint64_t c) { r.cycles[PhaseKind::kExchange] += c; });
        note_shared(rows, cycles);
        if (s.index < ipu_.exchanges.size())
          split(rows, ipu_.exchanges[s.index].bytes * times,
                [](LayerRow& r, std::uint64_t b) { r.exchange_bytes += b; });
      } else if (s.kind == trace::StepKind::kSync && s.group.kind == trace::GroupKind::kTile) {
        split(served(sync_target(steps, i)), sync_cycles_ * times,
              [](LayerRow& r, std::uint64_t c) { r.cycles[PhaseKind::kSync] += c; });
      }
    }
  }

  // What the on-chip sync steps[i] goes with: the next step of its list that is not one
  // (looking into a loop that follows), else the last before it.
  static Target sync_target(const std::vector<trace::Step>& steps, std::size_t i) {
    Target t;
    for (std::size_t j = i + 1; j < steps.size() && t.kind == Target::kNone; ++j)
      t = steps[j].kind == trace::StepKind::kRepeat ? first_target(steps[j].body, false)
                                                    : target_of(steps[j]);
    for (std::size_t j = i; j-- > 0 && t.kind == Target::kNone;)
      t = steps[j].kind == trace::StepKind::kRepeat ? first_target(steps[j].body, true)
                                                    : target_of(steps[j]);
    return t;
  }

  // Host and streaming copies to "(host I/O)"; each kind of group step, with its waiting and
  // external sync, to its fixed row.
  void add_dynamic_phases() {
    LayerRow& host = rows_[row("(host I/O)", "host_io")];
    host.cycles[PhaseKind::kHost] += ipu_.phases[PhaseKind::kHost];
    host.cycles[PhaseKind::kStreaming] += ipu_.phases[PhaseKind::kStreaming];
    const std::pair<const PhaseCycles*, Target::Kind> groups[] = {
        {&ipu_.group_steps.external_sync, Target::kExternalSync},
        {&ipu_.group_steps.collective, Target::kCollective},
        {&ipu_.group_steps.inter_ipu, Target::kInterIpu}};
    for (const auto& [cycles, kind] : groups)
      if (cycles->total() > 0) {
        LayerRow& r = rows_[served({kind, 0}).rows.front()];
        for (std::size_t k = 0; k < kPhaseKinds; ++k) r.cycles.values[k] += cycles->values[k];
      }
  }

  // Each row's group: of the groups of layers whose shared items gave it cycles, the one that
  // gave the most (ties: the first name).
  void name_groups() {
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> shared;  // (row, group)
    for (const auto& [key, among] : served_)
      if (among.rows.size() > 1)
        for (std::uint32_t r : among.rows) shared[{r, among.group}] += among.shared_cycles;
    std::vector<std::uint64_t> most(rows_.size(), 0);
    for (const auto& [key, cycles] : shared) {
      LayerRow& r = rows_[key.first];
      const std::string& name = group_names_[key.second];
      if (r.group.empty() || cycles > most[key.first] ||
          (cycles == most[key.first] && name < r.group)) {
        most[key.first] = cycles;
        r.group = name;
      }
    }
  }

  const IpuRunStats& ipu_;
  const trace::IpuProgram& program_;
  const LiveMemory& memory_;
  const std::uint64_t sync_cycles_;
  std::map<std::pair<std::string, std::string>, std::uint32_t> ids_;  // (layer, pass) -> row
  std::vector<LayerRow> rows_;
  std::unordered_map<std::uint64_t, Served> served_;  // (kind, item, pass) -> its rows
  std::map<std::string, std::uint32_t> group_ids_;    // "a+b" -> its index in group_names_
  std::vector<std::string> group_names_;
  std::uint64_t position_ = 0;
};

}  // namespace

LiveMemory live_memory(const trace::IpuProgram& program, const cost::MemoryMap& map) {
  LiveMemory out;
  for (std::uint32_t t = 0; t < map.tiles.size(); ++t) {
    const cost::TileMemoryUse& use = map.tiles[t];
    out.always_ipu += use.total() - use.scoped_peak;
    if (use.total() > map.tiles[out.tile].total()) out.tile = t;
  }
  if (!map.tiles.empty())
    out.always_tile = map.tiles[out.tile].total() - map.tiles[out.tile].scoped_peak;
  const std::uint64_t positions = trace::program_positions(program.steps);
  // Differences at each lifetime's ends, summed once (unsigned, so exact).
  std::vector<std::uint64_t> ipu(positions + 1, 0), tile(positions + 1, 0);
  for (const auto& t : program.tensors) {
    if (!t.live || t.live->last >= positions) continue;
    const std::uint64_t all = t.bytes_per_tile * t.tiles.size();
    ipu[t.live->first] += all;
    ipu[t.live->last + 1] -= all;
    if (t.tiles.contains(out.tile)) {
      tile[t.live->first] += t.bytes_per_tile;
      tile[t.live->last + 1] -= t.bytes_per_tile;
    }
  }
  out.ipu_bytes.resize(positions);
  out.tile_bytes.resize(positions);
  std::uint64_t a = out.always_ipu, b = out.always_tile;
  for (std::uint64_t p = 0; p < positions; ++p) {
    out.ipu_bytes[p] = a += ipu[p];
    out.tile_bytes[p] = b += tile[p];
  }
  return out;
}

LiveMemories live_memories(const RunStats& stats, const trace::Trace& trace) {
  LiveMemories out;
  for (const auto& ipu : stats.ipus)
    if (ipu.program < trace.ipus.size())
      out.emplace_back(ipu.ipu, live_memory(trace.ipus[ipu.program], ipu.memory));
  return out;
}

const LiveMemory* find_live_memory(const LiveMemories& memories, std::uint32_t ipu) {
  for (const auto& [index, m] : memories)
    if (index == ipu) return &m;
  return nullptr;
}

std::vector<LayerRow> layer_rows(const ChipSpec& chip, const RunStats& stats,
                                 const trace::Trace& trace, const LiveMemories& memories) {
  static const LiveMemory kNoMemory;
  std::vector<LayerRow> out;
  for (const auto& ipu : stats.ipus) {
    if (ipu.program >= trace.ipus.size()) continue;
    const LiveMemory* memory = find_live_memory(memories, ipu.ipu);
    LayerWalk walk(chip, ipu, trace.ipus[ipu.program], memory ? *memory : kNoMemory);
    walk.rows_by_time(out);
  }
  return out;
}

std::string layers_header_without_memory() {
  std::string out = "ipu,layer,pass,executions,";
  for (const PhaseInfo& k : kPhases) out += fmt::format("{}_cycles,", k.name);
  return out + "total_cycles,flops,exchange_bytes";
}

std::string layers_header_without_group() {
  return layers_header_without_memory() + ",peak_live_bytes,peak_tile_live_bytes";
}

std::string layers_header() { return layers_header_without_group() + ",group"; }

std::string layers_csv(const std::vector<LayerRow>& rows) {
  if (rows.empty()) return {};
  std::string out = layers_header() + "\n";
  for (const auto& r : rows) {
    // Layer names are [A-Za-z0-9_.:/-] and '+': no quoting needed.
    cells(out, r.ipu, r.layer, r.pass, r.executions);
    for (auto c : r.cycles.values) cell(out, c);
    cells(out, r.total(), r.flops, r.exchange_bytes, r.peak_live_bytes, r.peak_tile_live_bytes,
          r.group);
    end_line(out);
  }
  return out;
}

std::string plan_header() {
  return "ipu,layer,pass,op,name,shape,dtype,partials,vertex,amp,tiles,group_split,row_split,"
         "out_split,in_split,serial_in,serial_out,available_memory_proportion,budget_bytes,"
         "temporary_bytes,rearranged_bytes,estimated_cycles,simulated_cycles,"
         "rearrangement_cycles,weight_height,swapped,expanded,joint";
}

std::string plan_csv(const std::vector<PlanRow>& rows) {
  if (rows.empty()) return {};
  std::string out = plan_header() + "\n";
  const auto yes_no = [](bool b) { return std::string_view(b ? "yes" : "no"); };
  for (const auto& r : rows) {
    // Names and shapes hold no commas or quotes: no quoting needed.
    cells(out, r.ipu, r.layer, r.pass, r.op, r.name, r.shape, r.dtype, r.partials, r.vertex,
          yes_no(r.amp), r.tiles, r.group_split, r.row_split, r.out_split, r.in_split, r.serial_in,
          r.serial_out);
    fmt::format_to(std::back_inserter(out), "{},", r.available_memory);
    cells(out, r.budget_bytes, r.temporary_bytes, r.rearranged_bytes, r.estimated_cycles,
          r.simulated_cycles, r.rearrangement_cycles, r.weight_height, yes_no(r.swapped),
          r.expanded, yes_no(r.joint));
    end_line(out);
  }
  return out;
}

// Why a layer row costs what it does, from its phase split: the phase kind that takes the
// largest share names the bound; compute-bound rows give their AMP use against the chip's
// FP16.16 peak (the layer's FLOPs over its compute time).
double compute_phase_utilisation(const ChipSpec& chip, const LayerRow& r) {
  const double seconds = static_cast<double>(r.cycles[PhaseKind::kCompute]) / chip.clock.hz;
  const double peak = chip.peak_flops(true, false);
  return seconds > 0 && peak > 0 ? static_cast<double>(r.flops) / seconds / peak : 0;
}

std::string layer_bound(const ChipSpec& chip, const LayerRow& r) {
  const double total = static_cast<double>(std::max<std::uint64_t>(r.total(), 1));
  const auto share = [&](PhaseKind k) { return static_cast<double>(r.cycles[k]) / total; };
  const double waiting = share(PhaseKind::kWaiting) + share(PhaseKind::kExternalSync);
  const double io = share(PhaseKind::kHost) + share(PhaseKind::kStreaming) +
                    share(PhaseKind::kInterIpu) + share(PhaseKind::kCollective);
  const double compute = share(PhaseKind::kCompute), exchange = share(PhaseKind::kExchange),
               sync = share(PhaseKind::kSync);
  const double top = std::max({compute, exchange, sync, waiting, io});
  if (top == compute)
    return fmt::format(
        "compute-bound ({:.0f}% of its time): the AMP units at {:.1f}% of the FP16.16 peak while "
        "it computes",
        100 * compute, 100 * compute_phase_utilisation(chip, r));
  if (top == exchange)
    return fmt::format("exchange-bound ({:.0f}% of its time exchanging {} on-chip)", 100 * exchange,
                       human_bytes(static_cast<double>(r.exchange_bytes)));
  if (top == sync)
    return fmt::format("sync-bound ({:.0f}% of its time in on-chip syncs: many small supersteps)",
                       100 * sync);
  if (top == waiting)
    return fmt::format("waiting for peers ({:.0f}% of its time at external syncs)", 100 * waiting);
  return fmt::format(
      "I/O and collectives ({:.0f}% of its time: host, streaming, inter-IPU, collective)",
      100 * io);
}

std::string top_layers_text(const ChipSpec& chip, const RunStats& stats,
                            const std::vector<LayerRow>& rows, std::size_t n) {
  const IpuRunStats* longest = nullptr;
  for (const auto& ipu : stats.ipus)
    if (!longest || ipu.cycles > longest->cycles) longest = &ipu;
  if (!longest) return {};
  std::string out;
  std::size_t shown = 0;
  for (const auto& r : rows) {
    if (r.ipu != longest->ipu || shown == n) continue;
    if (shown++ == 0)
      out += fmt::format("  top layers    of IPU {} (layers.csv has them all)\n", longest->ipu);
    out += fmt::format(
        "    {:<28} {:<16} {:>14} cycles  {:5.1f}%\n",
        r.layer.size() > 28 ? r.layer.substr(0, 25) + "..." : r.layer, r.pass, r.total(),
        longest->cycles
            ? 100.0 * static_cast<double>(r.total()) / static_cast<double>(longest->cycles)
            : 0.0);
    if (shown == 1) out += "      why: " + layer_bound(chip, r) + "\n";
  }
  return out;
}

std::string span_name(const Span& s, const trace::Trace& trace, std::uint32_t program) {
  const trace::IpuProgram* p = program < trace.ipus.size() ? &trace.ipus[program] : nullptr;
  const std::string suffix = s.times > 1 ? fmt::format(" x{}", s.times) : "";
  const auto host = [&](std::string_view what) {
    return fmt::format("{} {}{}", what, name_at(trace::kHostDirectionNames, s.index), suffix);
  };
  if (s.kind == SpanKind::kLoop) return fmt::format("loop x{}", s.times);
  if (s.kind == SpanKind::kBackgroundHost) return host("host");
  const auto phase = phase_of(s.kind);
  if (!phase) return "?";
  switch (*phase) {
    case PhaseKind::kCompute:
      return (p && s.index < p->compute_sets.size() ? p->compute_sets[s.index].name : "compute") +
             suffix;
    case PhaseKind::kExchange:
      return (p && s.index < p->exchanges.size() ? p->exchanges[s.index].name : "exchange") +
             suffix;
    case PhaseKind::kSync:
      return "sync" + suffix;
    case PhaseKind::kHost:
      return host("host");
    case PhaseKind::kStreaming:
      return host("streaming");
    case PhaseKind::kExternalSync:
      return fmt::format("external sync ({}){}", name_at(trace::kGroupKindNames, s.index), suffix);
    case PhaseKind::kWaiting:
      return fmt::format("waiting at external sync ({}){}",
                         name_at(trace::kGroupKindNames, s.index), suffix);
    case PhaseKind::kInterIpu:
      return (s.index < trace.global_exchanges.size() ? trace.global_exchanges[s.index].name
                                                      : std::string("inter-IPU copy")) +
             suffix;
    case PhaseKind::kCollective:
      return std::string(name_at(trace::kCollectiveOpNames, s.index)) + suffix;
  }
  return "?";
}

std::string supersteps_header_without_layer() {
  std::string out = "ipu,superstep,step,executions,start_cycle,";
  for (const PhaseInfo& k : kPhases) out += fmt::format("{}_cycles,", k.name);
  return out + "active_tiles";
}

std::string supersteps_header() { return supersteps_header_without_layer() + ",layer,pass"; }

std::string supersteps_csv(const RunStats& stats) {
  bool any = false;
  for (const auto& ipu : stats.ipus) any = any || !ipu.supersteps.empty();
  if (!any) return {};
  std::string out = supersteps_header() + "\n";
  for (const auto& ipu : stats.ipus)
    for (const SuperstepTotals& row : ipu.supersteps) {
      // The compute set that starts it, as the engine named it (its layers and pass).
      static const NamedPhase kNone;
      const NamedPhase& cs = row.index < 0 ? kNone : ipu.compute_sets[row.compute_set];
      cells(out, ipu.ipu, row.index, cs.name, row.executions, row.first_start);
      for (auto c : row.cycles.values) cell(out, c);
      cells(out, row.active_tiles, cs.layers, cs.pass);
      end_line(out);
    }
  return out;
}

std::uint64_t write_timeline(const std::string& path, const ChipSpec& chip, const RunStats& stats,
                             const trace::Trace& trace, const TimelineOptions& options) {
  const auto in_window = [&](std::uint64_t start, std::uint64_t cycles) {
    return start <= options.last_cycle && start + cycles >= options.first_cycle;
  };
  std::uint64_t events = 0;
  // Cycles to microseconds with 6 decimals (picosecond resolution; one cycle is ~0.75 ns).
  // Both ends of a span are rounded to whole picoseconds and dur = end - start, so adjacent
  // spans touch exactly and children never stick out of their parents by a rounding error.
  const double ps_per_cycle = chip.clock.period_ps();
  auto ps = [&](std::uint64_t c) {
    return static_cast<std::uint64_t>(std::llround(static_cast<double>(c) * ps_per_cycle));
  };
  auto us = [](std::uint64_t p) { return fmt::format("{}.{:06d}", p / 1000000, p % 1000000); };
  write_file_atomically(path, [&](std::ostream& o) {
    fmt::memory_buffer buf;
    auto it = std::back_inserter(buf);
    auto drain = [&] {
      if (buf.size() > (1u << 20)) {
        o.write(buf.data(), static_cast<std::streamsize>(buf.size()));
        buf.clear();
      }
    };
    bool first = true;
    auto sep = [&] {
      fmt::format_to(it, "{}\n", first ? "" : ",");
      first = false;
      ++events;
    };
    auto meta = [&](std::uint32_t pid, std::int64_t tid, std::string_view what,
                    std::string_view key, const std::string& value) {
      sep();
      fmt::format_to(it, R"({{"ph":"M","pid":{},"tid":{},"name":"{}","args":{{"{}":{}}}}})", pid,
                     tid, what, key, value);
    };
    fmt::format_to(it,
                   "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"generator\":\"ipusim {}\","
                   "\"trace\":{},\"clock_hz\":{},\"system_ipus\":{},\"replicas\":{},"
                   "\"simulated_ipus\":{}}},\n\"traceEvents\":[",
                   IPUSIM_VERSION, JsonWriter::escape(trace.name), chip.clock.hz, stats.system_ipus,
                   stats.replicas, stats.ipus.size());
    for (const auto& ipu : stats.ipus) {
      const std::uint32_t pid = ipu.ipu;
      std::string label =
          fmt::format("IPU {} (program {}, replica {})", ipu.ipu, ipu.program, ipu.replica);
      if (stats.replica_symmetric)
        label += fmt::format("; replicas 1..{} identical, not simulated", stats.replicas - 1);
      meta(pid, 0, "process_name", "name", JsonWriter::escape(label));
      meta(pid, 0, "process_sort_index", "sort_index", std::to_string(pid));
      meta(pid, 0, "thread_name", "name", "\"program\"");
      meta(pid, 0, "thread_sort_index", "sort_index", "0");
      meta(pid, 1, "thread_name", "name", "\"background host I/O\"");
      meta(pid, 1, "thread_sort_index", "sort_index", "1");
      auto emit = [&](const Span& s) {
        if (!in_window(s.start, s.cycles)) return;
        sep();
        const std::uint32_t tid = s.kind == SpanKind::kBackgroundHost ? 1 : 0;
        fmt::format_to(it,
                       R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"{}",)"
                       R"("args":{{"cycles":{},"times":{}}}}})",
                       pid, tid, us(ps(s.start)), us(ps(s.start + s.cycles) - ps(s.start)),
                       JsonWriter::escape(span_name(s, trace, ipu.program)), kind_name(s.kind),
                       s.cycles, s.times);
        drain();
      };
      // Superstep detail: a compute span absorbs the sync and exchange spans right after it
      // (contiguous, inside the same loops), emitted as one span when anything else comes.
      struct Pending {
        bool open = false;
        Span compute;
        std::uint64_t end = 0, sync = 0, exchange = 0;
      } pending;
      std::vector<std::uint64_t> loop_ends;  // of the loops open around the current span
      auto flush = [&] {
        if (!pending.open) return;
        pending.open = false;
        const Span& c = pending.compute;
        if (!in_window(c.start, pending.end - c.start)) return;
        sep();
        fmt::format_to(
            it,
            R"({{"ph":"X","pid":{},"tid":0,"ts":{},"dur":{},"name":{},"cat":"superstep",)"
            R"("args":{{"cycles":{},"times":{},"compute":{},"sync":{},"exchange":{}}}}})",
            pid, us(ps(c.start)), us(ps(pending.end) - ps(c.start)),
            JsonWriter::escape(span_name(c, trace, ipu.program)), pending.end - c.start, c.times,
            c.cycles, pending.sync, pending.exchange);
        drain();
      };
      const bool merge = options.detail == TimelineOptions::Detail::kSupersteps;
      for (const auto& s : ipu.spans) {
        if (!merge) {
          emit(s);
          continue;
        }
        bool closed = false;  // a loop ended: what follows is outside it
        while (!loop_ends.empty() && loop_ends.back() <= s.start) {
          loop_ends.pop_back();
          closed = true;
        }
        if (closed) flush();
        const auto phase = phase_of(s.kind);
        const bool on_chip = phase == PhaseKind::kSync || phase == PhaseKind::kExchange;
        if (on_chip && pending.open && s.start == pending.end) {
          pending.end += s.cycles;
          (phase == PhaseKind::kSync ? pending.sync : pending.exchange) += s.cycles;
          continue;
        }
        if (s.kind == SpanKind::kBackgroundHost) {  // another thread: nothing to interrupt
          emit(s);
          continue;
        }
        flush();
        if (phase == PhaseKind::kCompute) {
          pending = Pending{true, s, s.start + s.cycles, 0, 0};
          continue;
        }
        if (s.kind == SpanKind::kLoop) loop_ends.push_back(s.start + s.cycles);
        emit(s);
      }
      flush();
      // Tile tracks: thread 100 + tile, in start order (spans were recorded in start order).
      std::vector<bool> named(chip.tiles, false);
      for (const auto& s : ipu.tile_spans) {
        if (!in_window(s.start, s.cycles)) continue;
        if (s.tile < named.size() && !named[s.tile]) {
          named[s.tile] = true;
          meta(pid, 100 + s.tile, "thread_name", "name", fmt::format("\"tile {:04d}\"", s.tile));
          meta(pid, 100 + s.tile, "thread_sort_index", "sort_index", std::to_string(100 + s.tile));
        }
        sep();
        const std::string name =
            (s.exchange ? (s.index < trace.ipus[ipu.program].exchanges.size()
                               ? trace.ipus[ipu.program].exchanges[s.index].name
                               : std::string("exchange"))
                        : (s.index < trace.ipus[ipu.program].compute_sets.size()
                               ? trace.ipus[ipu.program].compute_sets[s.index].name
                               : std::string("compute")));
        fmt::format_to(it,
                       R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"{}",)"
                       R"("args":{{"superstep":{},"{}":{}}}}})",
                       pid, 100 + s.tile, us(ps(s.start)), us(ps(s.start + s.cycles) - ps(s.start)),
                       JsonWriter::escape(name), s.exchange ? "tile_exchange" : "tile_compute",
                       s.superstep, s.exchange ? "bytes" : "cycles", s.value);
        drain();
      }
    }
    fmt::format_to(it, "\n]}}\n");
    o.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  });
  return events;
}

}  // namespace ipusim::report
