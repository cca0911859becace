// SPDX-License-Identifier: Apache-2.0
#include "ipusim/cost/program_costs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/util/checked.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::cost {

ComputeSetCost compute_set_cost(const ChipSpec& chip, const trace::ComputeSet& cs) {
  ComputeSetCost out;
  out.tile_cycles.assign(chip.tiles, 0);
  for (std::size_t i = 0; i < cs.vertices.size(); ++i) {
    const trace::Vertex& v = cs.vertices[i];
    try {
      const VertexCost vc = vertex_cost(chip, v);
      for (std::uint32_t c = 0; c < v.count; ++c) {
        const trace::TileRange r = v.tiles_at(c);
        for (std::uint32_t t = r.first; t <= r.last; ++t)
          out.tile_cycles[t] = (Checked(out.tile_cycles[t]) + vc.cycles).get();
        out.flops = (Checked(out.flops) + Checked(vc.flops) * r.size()).get();
      }
    } catch (const ArithmeticOverflow& e) {
      // vertex_cost names the vertex; the sums here name it too (issue 16, defect C).
      const std::string what = e.what();
      throw ModelError(fmt::format("compute set '{}' vertex {}: {}", cs.name, i,
                                   what.starts_with("vertex ")
                                       ? what.substr(7)
                                       : describe_vertex(v) + ": the compute set's cycle or FLOP "
                                                              "count overflows 64 bits"));
    }
  }
  for (std::uint32_t t = 0; t < chip.tiles; ++t) {
    if (out.tile_cycles[t] == 0) {
      // A tile with no vertex (or only zero-cost ones) still runs the compute set's control
      // code if any vertex was placed on it; a tile with nothing placed is idle.
      continue;
    }
    out.tile_cycles[t] += chip.runtime.compute_set_overhead.count;
    ++out.active_tiles;
    out.cycles = std::max(out.cycles, out.tile_cycles[t]);
  }
  return out;
}

namespace {

std::uint32_t column_of(const ChipSpec& chip, std::uint32_t tile) {
  return tile / chip.exchange.tiles_per_column;
}

}  // namespace

ExchangeCost exchange_cost(const ChipSpec& chip, const trace::Exchange& ex,
                           MemoryMap* exchange_code) {
  const std::uint32_t n = chip.tiles;
  // Transfers per tile (as differences at range ends) for the exchange code, when asked for.
  std::vector<std::uint64_t> transfers_at(exchange_code ? n + 1 : 0, 0);
  const auto check = [&](trace::TileRange r) {
    if (r.last >= n)
      throw TraceError(fmt::format("exchange '{}' uses tiles {}..{} but the chip has {} tiles",
                                   ex.name, r.first, r.last, n));
    if (exchange_code) {
      ++transfers_at[r.first];
      --transfers_at[r.last + 1];
    }
  };
  const std::uint32_t group = chip.exchange.tiles_per_shared_bus;
  const double rate = chip.exchange.bytes_per_cycle.value;
  std::vector<std::uint64_t> sent(n, 0);
  std::vector<double> receive_cycles(n, 0.0);
  ExchangeCost out;
  out.tile_bytes.assign(n, 0);
  std::uint64_t max_distance = 0;
  std::vector<std::uint8_t> is_dst(n, 0);
  // Column and first tile of the super-tile group of every tile, looked up instead of divided
  // per transfer (compiled programs have millions of small transfers).
  std::vector<std::int64_t> column(n);
  std::vector<std::uint32_t> group_start(n);
  for (std::uint32_t t = 0; t < n; ++t) {
    column[t] = column_of(chip, t);
    group_start[t] = t - t % group;
  }
  const auto distance = [&](trace::TileRange a, trace::TileRange b) -> std::uint64_t {
    const std::int64_t forward = column[b.last] - column[a.first];
    const std::int64_t backward = column[a.last] - column[b.first];
    const std::int64_t most = forward > backward ? forward : backward;
    return most > 0 ? static_cast<std::uint64_t>(most) : 0;
  };

  ex.for_each([&](const trace::TransferView& tr) {
    if (tr.mode == trace::TransferMode::kMulticast && tr.src.first == tr.src.last &&
        tr.dst.size() == 1) {
      // The common case in compiled programs, one tile copying to one range of tiles: the
      // general multicast rule below, specialised.
      const std::uint32_t s = tr.src.first;
      const trace::TileRange d = tr.dst[0];
      check(tr.src);
      check(d);
      max_distance = std::max(max_distance, distance(tr.src, d));
      sent[s] += tr.bytes;
      const std::uint32_t s0 = group_start[s];
      for (std::uint32_t t = d.first; t <= d.last; ++t) {
        if (t == s) continue;
        const std::uint32_t g0 = group_start[t];
        const bool whole_group =
            g0 != s0 && g0 + group <= n && d.first <= g0 && g0 + group - 1 <= d.last;
        receive_cycles[t] += whole_group ? static_cast<double>(tr.bytes) / (rate * group)
                                         : static_cast<double>(tr.bytes) / (rate * 1u);
        out.tile_bytes[t] += tr.bytes;
        out.total_bytes += tr.bytes;
      }
      return;
    }
    const auto dsts = tr.dst;
    check(tr.src);
    for (const auto& d : dsts) check(d);
    for (const auto& d : dsts) max_distance = std::max(max_distance, distance(tr.src, d));
    if (tr.mode == trace::TransferMode::kPersonalised) {
      std::uint64_t dst_count = 0;
      for (const auto& d : dsts) dst_count += d.size();
      for (std::uint32_t s = tr.src.first; s <= tr.src.last; ++s) {
        bool self = std::any_of(dsts.begin(), dsts.end(), [&](auto d) { return d.contains(s); });
        sent[s] += tr.bytes * (dst_count - (self ? 1 : 0));
      }
      for (const auto& d : dsts)
        for (std::uint32_t t = d.first; t <= d.last; ++t) {
          const std::uint64_t senders = tr.src.size() - (tr.src.contains(t) ? 1 : 0);
          receive_cycles[t] += static_cast<double>(tr.bytes * senders) / rate;
          out.tile_bytes[t] += tr.bytes * senders;
          out.total_bytes += tr.bytes * senders;
        }
      return;
    }
    // Multicast: each source tile sends its data once; every destination except the sender
    // itself receives it, at group x the rate when every tile of its super-tile group receives
    // it and none of them is the sender. A group lies in the destinations when it lies in
    // their only range, or, with several ranges, when all its tiles are marked.
    const bool one_range = dsts.size() == 1;
    if (!one_range)
      for (const auto& d : dsts)
        for (std::uint32_t t = d.first; t <= d.last; ++t) is_dst[t] = 1;
    const auto group_receives = [&](std::uint32_t g0) {
      if (g0 + group > n) return false;
      if (one_range) return dsts[0].first <= g0 && g0 + group - 1 <= dsts[0].last;
      for (std::uint32_t g = g0; g < g0 + group; ++g)
        if (!is_dst[g]) return false;
      return true;
    };
    // Receive time of one copy, alone or shared by the group (the same expressions as the
    // rule: bytes / (rate x 1) and bytes / (rate x group)).
    const double alone = static_cast<double>(tr.bytes) / (rate * 1u);
    const double shared = static_cast<double>(tr.bytes) / (rate * group);
    for (std::uint32_t s = tr.src.first; s <= tr.src.last; ++s) {
      sent[s] += tr.bytes;
      const std::uint32_t s0 = group_start[s];
      for (const auto& d : dsts)
        for (std::uint32_t t = d.first; t <= d.last; ++t) {
          if (t == s) continue;
          const std::uint32_t g0 = group_start[t];
          const bool whole_group = g0 != s0 && group_receives(g0);
          receive_cycles[t] += whole_group ? shared : alone;
          out.tile_bytes[t] += tr.bytes;
          out.total_bytes += tr.bytes;
        }
    }
    if (!one_range)
      for (const auto& d : dsts)
        for (std::uint32_t t = d.first; t <= d.last; ++t) is_dst[t] = 0;
  });

  for (std::uint32_t t = 0; t < n; ++t) {
    out.tile_bytes[t] += sent[t];
    const double busy = std::max(static_cast<double>(sent[t]) / rate, receive_cycles[t]);
    const std::uint64_t cycles = ceil_cycles(busy).count;
    if (cycles > out.transfer_cycles) {
      out.transfer_cycles = cycles;
      out.busiest_tile = t;
    }
  }
  out.latency_cycles = max_distance * chip.exchange.column_hop_latency.count;
  out.cycles = chip.exchange.fixed_overhead.count + out.transfer_cycles + out.latency_cycles;
  if (exchange_code) {
    const std::uint64_t per_transfer = chip.runtime.exchange_code_bytes_per_transfer.count;
    std::uint64_t count = 0;
    for (std::uint32_t t = 0; t < n; ++t)
      exchange_code->tiles[t].exchange_code += (count += transfers_at[t]) * per_transfer;
  }
  return out;
}

HostCopyCost host_copy_cost(const ChipSpec& chip, const trace::Step& step) {
  HostCopyCost out;
  out.total_bytes = step.bytes * step.tiles.size();
  const double link =
      static_cast<double>(out.total_bytes) / chip.host.bandwidth.bytes_per_second * chip.clock.hz;
  const double tile = static_cast<double>(step.bytes) / chip.exchange.bytes_per_cycle.value;
  out.cycles = (chip.host.latency * chip.clock + ceil_cycles(std::max(link, tile))).count;
  return out;
}

MemoryMap memory_map(const ChipSpec& chip, const trace::IpuProgram& program, bool exchanges) {
  // Every item adds a constant over a tile range: accumulate differences at the range ends and
  // sum them once over the tiles (unsigned arithmetic, so the totals are exact), instead of
  // walking every tile of every range.
  const std::uint32_t n = chip.tiles;
  const auto add = [&](std::vector<std::uint64_t>& diff, trace::TileRange r, std::uint64_t v) {
    if (r.last >= n)
      throw TraceError(fmt::format("IPU {} uses tiles {}..{} but the chip has {} tiles",
                                   program.ipu, r.first, r.last, n));
    diff[r.first] += v;
    diff[r.last + 1] -= v;
  };
  std::vector<std::uint64_t> tensors(n + 1, 0), state(n + 1, 0), exchange_code(n + 1, 0);
  for (const auto& tensor : program.tensors) add(tensors, tensor.tiles, tensor.bytes_per_tile);
  // Code: one copy per distinct codelet per tile (vertices of each codelet counted per tile).
  std::vector<std::vector<std::uint64_t>> codelet_vertices(trace::kCodeletCount);
  const std::uint64_t vertex_state = chip.runtime.vertex_state_bytes.count;
  for (const auto& cs : program.compute_sets)
    for (const auto& v : cs.vertices) {
      auto& count = codelet_vertices[static_cast<std::size_t>(v.codelet)];
      if (count.empty()) count.assign(n + 1, 0);
      for (std::uint32_t i = 0; i < v.count; ++i) {
        add(state, v.tiles_at(i), vertex_state);
        add(count, v.tiles_at(i), 1);
      }
    }
  const std::uint64_t per_transfer = chip.runtime.exchange_code_bytes_per_transfer.count;
  for (std::size_t e = 0; exchanges && e < program.exchanges.size(); ++e) {
    const trace::Exchange& ex = program.exchanges[e];
    // Every source range and every destination range (the pool holds exactly the transfers'
    // destinations, back to back) costs one transfer's exchange code on each of its tiles.
    for (const auto& tr : ex.transfers) {
      if (tr.count == 1 || (tr.src_step == 0 && tr.dst_step == 0)) {
        const std::uint64_t all = per_transfer * tr.count;
        add(exchange_code, tr.src, all);
        for (const auto& d : ex.destinations(tr)) add(exchange_code, d, all);
        continue;
      }
      for (std::uint32_t i = 0; i < tr.count; ++i) {
        add(exchange_code, tr.src_at(i), per_transfer);
        for (const auto& d : ex.destinations(tr))
          add(exchange_code,
              {trace::Transfer::shift(d.first, tr.dst_step, i),
               trace::Transfer::shift(d.last, tr.dst_step, i)},
              per_transfer);
      }
    }
  }

  MemoryMap map;
  map.tiles.assign(n, TileMemoryUse{});
  std::vector<std::uint64_t> used(trace::kCodeletCount, 0);  // running vertex counts
  std::uint64_t t_tensors = 0, t_state = 0, t_exchange = 0;
  for (std::uint32_t t = 0; t < n; ++t) {
    TileMemoryUse& use = map.tiles[t];
    use.tensors = t_tensors += tensors[t];
    use.vertex_state = t_state += state[t];
    use.exchange_code = t_exchange += exchange_code[t];
    std::uint64_t distinct = 0;
    for (std::size_t c = 0; c < trace::kCodeletCount; ++c) {
      if (codelet_vertices[c].empty()) continue;
      used[c] += codelet_vertices[c][t];
      distinct += used[c] != 0 ? 1 : 0;
    }
    use.code = distinct * chip.runtime.codelet_code_bytes.count;
    use.stack = chip.runtime.stack_bytes.count;
  }
  return map;
}

void check_memory(const ChipSpec& chip, const trace::IpuProgram& program, const MemoryMap& map) {
  const std::uint64_t capacity = chip.tile_memory.count;
  std::uint32_t worst = 0;
  std::uint32_t over = 0;
  for (std::uint32_t t = 0; t < map.tiles.size(); ++t) {
    if (map.tiles[t].total() > capacity) ++over;
    if (map.tiles[t].total() > map.tiles[worst].total()) worst = t;
  }
  if (over == 0) return;
  const TileMemoryUse& use = map.tiles[worst];
  // Largest tensors on the worst tile.
  std::vector<std::pair<std::uint64_t, std::string>> consumers;
  for (const auto& tensor : program.tensors)
    if (tensor.tiles.contains(worst)) consumers.emplace_back(tensor.bytes_per_tile, tensor.name);
  std::sort(consumers.begin(), consumers.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::string top;
  for (std::size_t i = 0; i < consumers.size() && i < 3; ++i)
    top += fmt::format("{}{} {}", i ? ", " : "", consumers[i].second,
                       human_bytes(static_cast<double>(consumers[i].first)));
  throw ModelError(fmt::format(
      "IPU {}: out of memory on tile {}: needs {} of {} (tensors {}, vertex state {}, code {}, "
      "exchange code {}, stack {}); largest tensors: {}; {} tile(s) over capacity",
      program.ipu, worst, human_bytes(static_cast<double>(use.total())),
      human_bytes(static_cast<double>(capacity)), human_bytes(static_cast<double>(use.tensors)),
      human_bytes(static_cast<double>(use.vertex_state)),
      human_bytes(static_cast<double>(use.code)),
      human_bytes(static_cast<double>(use.exchange_code)),
      human_bytes(static_cast<double>(use.stack)), top.empty() ? "none" : top, over));
}

}  // namespace ipusim::cost
