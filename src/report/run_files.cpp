// SPDX-License-Identifier: Apache-2.0
#include "ipusim/report/run_files.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <iterator>
#include <ostream>

#include "ipusim/util/fs.hpp"
#include "ipusim/util/json.hpp"

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

}  // namespace

std::string tiles_csv(const RunStats& stats) {
  std::string out = std::string(kTilesHeader) + "\n";
  auto it = std::back_inserter(out);
  for (const auto& ipu : stats.ipus)
    for (std::size_t t = 0; t < ipu.tile_compute_cycles.size(); ++t)
      fmt::format_to(it, "{},{},{},{},{}\n", ipu.ipu, t, ipu.tile_compute_cycles[t],
                     ipu.tile_exchange_bytes[t], ipu.memory.tiles[t].total());
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
      return (p && s.index < p->compute_sets.size() ? p->compute_sets[s.index].name : "compute") + suffix;
    case PhaseKind::kExchange:
      return (p && s.index < p->exchanges.size() ? p->exchanges[s.index].name : "exchange") + suffix;
    case PhaseKind::kSync: return "sync" + suffix;
    case PhaseKind::kHost: return host("host");
    case PhaseKind::kStreaming: return host("streaming");
    case PhaseKind::kExternalSync:
      return fmt::format("external sync ({}){}", name_at(trace::kGroupKindNames, s.index), suffix);
    case PhaseKind::kInterIpu:
      return (s.index < trace.global_exchanges.size() ? trace.global_exchanges[s.index].name
                                                      : std::string("inter-IPU copy")) + suffix;
    case PhaseKind::kCollective:
      return std::string(name_at(trace::kCollectiveOpNames, s.index)) + suffix;
  }
  return "?";
}

std::string supersteps_header() {
  std::string out = "ipu,superstep,step,executions,start_cycle,";
  for (const PhaseInfo& k : kPhases) out += fmt::format("{}_cycles,", k.name);
  return out + "active_tiles";
}

std::string supersteps_csv(const RunStats& stats, const trace::Trace& trace) {
  bool any = false;
  for (const auto& ipu : stats.ipus) any = any || !ipu.spans.empty();
  if (!any) return {};
  std::string out = supersteps_header() + "\n";
  auto it = std::back_inserter(out);
  for (const auto& ipu : stats.ipus) {
    struct Row {
      std::int64_t index = -1;
      std::string step;
      std::uint64_t executions = 0, start = 0, active = 0;
      PhaseCycles cycles;
      bool used = false;
    } row;
    auto flush = [&] {
      if (!row.used) return;
      fmt::format_to(it, "{},{},{},{},{}", ipu.ipu, row.index, row.step, row.executions, row.start);
      for (auto c : row.cycles.values) fmt::format_to(it, ",{}", c);
      fmt::format_to(it, ",{}\n", row.active);
    };
    std::int64_t next = 0;
    for (const auto& s : ipu.spans) {
      const auto phase = phase_of(s.kind);
      if (!phase) continue;  // loops and background transfers
      if (*phase == PhaseKind::kCompute) {
        flush();
        row = Row{};
        row.index = next++;
        row.step = span_name(Span{0, 0, 1, s.index, 0, s.kind}, trace, ipu.program);
        row.executions = s.times;
        row.start = s.start;
        row.active = s.active_tiles;
      } else if (!row.used) {
        row.start = s.start;
      }
      row.used = true;
      row.cycles[*phase] += s.cycles;
    }
    flush();
  }
  return out;
}

std::uint64_t write_timeline(const std::string& path, const ChipSpec& chip, const RunStats& stats,
                             const trace::Trace& trace) {
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
    auto meta = [&](std::uint32_t pid, std::int64_t tid, std::string_view what, std::string_view key,
                    const std::string& value) {
      sep();
      fmt::format_to(it, R"({{"ph":"M","pid":{},"tid":{},"name":"{}","args":{{"{}":{}}}}})", pid,
                     tid, what, key, value);
    };
    fmt::format_to(it, "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"generator\":\"ipusim {}\","
                       "\"trace\":{},\"clock_hz\":{},\"system_ipus\":{},\"replicas\":{},"
                       "\"simulated_ipus\":{}}},\n\"traceEvents\":[",
                   IPUSIM_VERSION, JsonWriter::escape(trace.name), chip.clock.hz, stats.system_ipus,
                   stats.replicas, stats.ipus.size());
    for (const auto& ipu : stats.ipus) {
      const std::uint32_t pid = ipu.ipu;
      std::string label = fmt::format("IPU {} (program {}, replica {})", ipu.ipu, ipu.program, ipu.replica);
      if (stats.replica_symmetric)
        label += fmt::format("; replicas 1..{} identical, not simulated", stats.replicas - 1);
      meta(pid, 0, "process_name", "name", JsonWriter::escape(label));
      meta(pid, 0, "process_sort_index", "sort_index", std::to_string(pid));
      meta(pid, 0, "thread_name", "name", "\"program\"");
      meta(pid, 0, "thread_sort_index", "sort_index", "0");
      meta(pid, 1, "thread_name", "name", "\"background host I/O\"");
      meta(pid, 1, "thread_sort_index", "sort_index", "1");
      for (const auto& s : ipu.spans) {
        sep();
        const std::uint32_t tid = s.kind == SpanKind::kBackgroundHost ? 1 : 0;
        fmt::format_to(it,
                       R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"{}",)"
                       R"("args":{{"cycles":{},"times":{}}}}})",
                       pid, tid, us(ps(s.start)), us(ps(s.start + s.cycles) - ps(s.start)),
                       JsonWriter::escape(span_name(s, trace, ipu.program)), kind_name(s.kind),
                       s.cycles, s.times);
        drain();
      }
      // Tile tracks: thread 100 + tile, in start order (spans were recorded in start order).
      std::vector<bool> named(chip.tiles, false);
      for (const auto& s : ipu.tile_spans) {
        if (s.tile < named.size() && !named[s.tile]) {
          named[s.tile] = true;
          meta(pid, 100 + s.tile, "thread_name", "name", fmt::format("\"tile {:04d}\"", s.tile));
          meta(pid, 100 + s.tile, "thread_sort_index", "sort_index", std::to_string(100 + s.tile));
        }
        sep();
        const std::string name =
            (s.exchange ? (s.index < trace.ipus[ipu.program].exchanges.size()
                               ? trace.ipus[ipu.program].exchanges[s.index].name : std::string("exchange"))
                        : (s.index < trace.ipus[ipu.program].compute_sets.size()
                               ? trace.ipus[ipu.program].compute_sets[s.index].name : std::string("compute")));
        fmt::format_to(it,
                       R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"{}",)"
                       R"("args":{{"superstep":{},"{}":{}}}}})",
                       pid, 100 + s.tile, us(ps(s.start)), us(ps(s.start + s.cycles) - ps(s.start)), JsonWriter::escape(name),
                       s.exchange ? "tile_exchange" : "tile_compute", s.superstep,
                       s.exchange ? "bytes" : "cycles", s.value);
        drain();
      }
    }
    fmt::format_to(it, "\n]}}\n");
    o.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  });
  return events;
}

}  // namespace ipusim::report
