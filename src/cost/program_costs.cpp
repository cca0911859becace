// SPDX-License-Identifier: Apache-2.0
#include "ipusim/cost/program_costs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::cost {

ComputeSetCost compute_set_cost(const ChipSpec& chip, const trace::ComputeSet& cs) {
  ComputeSetCost out;
  out.tile_cycles.assign(chip.tiles, 0);
  for (const auto& v : cs.vertices) {
    const VertexCost vc = vertex_cost(chip, v);
    for (std::uint32_t t = v.tiles.first; t <= v.tiles.last; ++t) out.tile_cycles[t] += vc.cycles;
    out.flops += vc.flops * v.tiles.size();
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

std::uint64_t column_distance(const ChipSpec& chip, trace::TileRange a, trace::TileRange b) {
  const std::int64_t a0 = column_of(chip, a.first), a1 = column_of(chip, a.last);
  const std::int64_t b0 = column_of(chip, b.first), b1 = column_of(chip, b.last);
  return static_cast<std::uint64_t>(std::max<std::int64_t>({b1 - a0, a1 - b0, 0}));
}

}  // namespace

ExchangeCost exchange_cost(const ChipSpec& chip, const trace::Exchange& ex) {
  const std::uint32_t n = chip.tiles;
  const std::uint32_t group = chip.exchange.tiles_per_shared_bus;
  const double rate = chip.exchange.bytes_per_cycle.value;
  std::vector<std::uint64_t> sent(n, 0);
  std::vector<double> receive_cycles(n, 0.0);
  ExchangeCost out;
  out.tile_bytes.assign(n, 0);
  std::uint64_t max_distance = 0;
  std::vector<std::uint8_t> is_dst(n, 0);

  for (const auto& tr : ex.transfers) {
    const auto dsts = ex.destinations(tr);
    for (const auto& d : dsts) max_distance = std::max(max_distance, column_distance(chip, tr.src, d));
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
      continue;
    }
    // Multicast: each source tile sends its data once; every destination except the sender
    // itself receives it. Mark destinations to detect super-tile groups receiving together.
    for (std::uint32_t s = tr.src.first; s <= tr.src.last; ++s) {
      sent[s] += tr.bytes;
      for (const auto& d : dsts)
        for (std::uint32_t t = d.first; t <= d.last; ++t) is_dst[t] = (t != s);
      for (const auto& d : dsts)
        for (std::uint32_t t = d.first; t <= d.last; ++t) {
          if (!is_dst[t]) continue;
          const std::uint32_t g0 = t - t % group;
          bool whole_group = g0 + group <= n;
          for (std::uint32_t g = g0; whole_group && g < g0 + group; ++g) whole_group = is_dst[g];
          receive_cycles[t] += static_cast<double>(tr.bytes) / (rate * (whole_group ? group : 1));
          out.tile_bytes[t] += tr.bytes;
          out.total_bytes += tr.bytes;
        }
      for (const auto& d : dsts)
        for (std::uint32_t t = d.first; t <= d.last; ++t) is_dst[t] = 0;
    }
  }

  for (std::uint32_t t = 0; t < n; ++t) {
    out.tile_bytes[t] += sent[t];
    const double busy = std::max(static_cast<double>(sent[t]) / rate, receive_cycles[t]);
    // Round up, tolerating floating-point noise from summing exact fractions.
    const auto cycles = static_cast<std::uint64_t>(std::ceil(busy - 1e-9));
    if (cycles > out.transfer_cycles) {
      out.transfer_cycles = cycles;
      out.busiest_tile = t;
    }
  }
  out.latency_cycles = max_distance * chip.exchange.column_hop_latency.count;
  out.cycles = chip.exchange.fixed_overhead.count + out.transfer_cycles + out.latency_cycles;
  return out;
}

HostCopyCost host_copy_cost(const ChipSpec& chip, const trace::Step& step) {
  HostCopyCost out;
  out.total_bytes = step.bytes * step.tiles.size();
  const double link = static_cast<double>(out.total_bytes) / chip.host.bandwidth.bytes_per_second *
                      chip.clock.hz;
  const double tile = static_cast<double>(step.bytes) / chip.exchange.bytes_per_cycle.value;
  const double latency = chip.host.latency.seconds * chip.clock.hz;
  out.cycles = static_cast<std::uint64_t>(std::ceil(latency - 1e-9)) +
               static_cast<std::uint64_t>(std::ceil(std::max(link, tile) - 1e-9));
  return out;
}

MemoryMap memory_map(const ChipSpec& chip, const trace::IpuProgram& program) {
  MemoryMap map;
  map.tiles.assign(chip.tiles, TileMemoryUse{});
  for (auto& t : map.tiles) t.stack = chip.runtime.stack_bytes.count;
  for (const auto& tensor : program.tensors)
    for (std::uint32_t t = tensor.tiles.first; t <= tensor.tiles.last; ++t)
      map.tiles[t].tensors += tensor.bytes_per_tile;
  // Code: one copy per distinct codelet per tile.
  std::vector<std::uint32_t> codelets(chip.tiles, 0);  // bit mask of codelets used
  for (const auto& cs : program.compute_sets)
    for (const auto& v : cs.vertices)
      for (std::uint32_t t = v.tiles.first; t <= v.tiles.last; ++t) {
        map.tiles[t].vertex_state += chip.runtime.vertex_state_bytes.count;
        codelets[t] |= 1u << static_cast<unsigned>(v.codelet);
      }
  for (std::uint32_t t = 0; t < chip.tiles; ++t)
    map.tiles[t].code = static_cast<std::uint64_t>(std::popcount(codelets[t])) *
                        chip.runtime.codelet_code_bytes.count;
  const std::uint64_t per_transfer = chip.runtime.exchange_code_bytes_per_transfer.count;
  for (const auto& ex : program.exchanges)
    for (const auto& tr : ex.transfers) {
      for (std::uint32_t s = tr.src.first; s <= tr.src.last; ++s)
        map.tiles[s].exchange_code += per_transfer;
      for (const auto& d : ex.destinations(tr))
        for (std::uint32_t t = d.first; t <= d.last; ++t) map.tiles[t].exchange_code += per_transfer;
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
    if (tensor.tiles.contains(worst))
      consumers.emplace_back(tensor.bytes_per_tile, tensor.name);
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
      human_bytes(static_cast<double>(use.vertex_state)), human_bytes(static_cast<double>(use.code)),
      human_bytes(static_cast<double>(use.exchange_code)),
      human_bytes(static_cast<double>(use.stack)), top.empty() ? "none" : top, over));
}

}  // namespace ipusim::cost
