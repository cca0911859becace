// SPDX-License-Identifier: Apache-2.0
#include "ipusim/cost/program_costs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
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

void StridedSums::reset(std::uint32_t tiles) {
  tiles_ = tiles;
  slot_.assign(tiles, 0);
  strides_.clear();
}

void StridedSums::add(std::uint32_t k, std::uint32_t first, std::uint32_t count, std::uint64_t v) {
  std::uint32_t& slot = slot_[k];
  if (slot == 0) {
    strides_.push_back({k, std::vector<std::uint64_t>(tiles_, 0)});
    slot = static_cast<std::uint32_t>(strides_.size());
  }
  Stride& s = strides_[slot - 1];
  s.used = true;
  s.diff[first] += v;
  if (const std::uint64_t end = first + std::uint64_t{count} * k; end < tiles_) s.diff[end] -= v;
}

void StridedSums::drain_into(std::vector<std::uint64_t>& diff) {
  for (Stride& s : strides_) {
    if (!s.used) continue;
    for (std::uint32_t t = s.k; t < tiles_; ++t) s.diff[t] += s.diff[t - s.k];
    for (std::uint32_t t = 0; t < tiles_; ++t) {
      diff[t] += s.diff[t];
      diff[t + 1] -= s.diff[t];
      s.diff[t] = 0;
    }
    s.used = false;
  }
}

ExchangeCost exchange_cost(const ChipSpec& chip, const trace::Exchange& ex,
                           MemoryMap* exchange_code) {
  ExchangeScratch scratch;
  return exchange_cost(chip, ex, exchange_code, scratch);
}

ExchangeCost exchange_cost(const ChipSpec& chip, const trace::Exchange& ex,
                           MemoryMap* exchange_code, ExchangeScratch& scratch) {
  if (!exchange_code) return exchange_cost_and_code(chip, ex, nullptr, scratch);
  ExchangeCost out = exchange_cost_and_code(chip, ex, &scratch.code_, scratch);
  for (std::size_t t = 0; t < scratch.code_.size(); ++t)
    exchange_code->tiles[t].exchange_code += scratch.code_[t];
  return out;
}

ExchangeCost exchange_cost_and_code(const ChipSpec& chip, const trace::Exchange& ex,
                                    std::vector<std::uint64_t>* exchange_code,
                                    ExchangeScratch& scratch) {
  const std::uint32_t n = chip.tiles;
  const std::uint32_t group = chip.exchange.tiles_per_shared_bus;
  const double rate = chip.exchange.bytes_per_cycle.value;
  // Per-tile sums, all zero on entry and left zero on return, each held as differences at the
  // ends of the tile ranges it is added over (a tile's sum is the prefix sum up to it), so that
  // a transfer to a range of tiles costs O(1), not O(tiles): bytes sent; bytes received at the
  // tile's own rate ("alone") and at its super-tile group's ("shared"); all bytes received;
  // transfers (for the exchange code). The sums are integers (modulo 2^64, which differences
  // need), and each tile's receive time, alone / rate + shared / (rate x group), is formed once
  // at the end: exactly the sum of the per-transfer times when the rates are powers of two.
  auto& transfers_at = scratch.transfers_at_;
  auto& sent = scratch.sent_;
  auto& alone = scratch.alone_;
  auto& shared = scratch.shared_;
  auto& received = scratch.received_;
  auto& ranges = scratch.ranges_;
  if (!scratch.clean_ || sent.size() != n + 1) {
    for (auto* v : {&transfers_at, &sent, &alone, &shared, &received}) v->assign(n + 1, 0);
    scratch.strided_sent_.reset(n);
    scratch.strided_transfers_.reset(n);
  }
  scratch.clean_ = false;
  // Column and first tile of the super-tile group of every tile, looked up instead of divided
  // per transfer (compiled programs have millions of small transfers).
  auto& column = scratch.column_;
  auto& group_start = scratch.group_start_;
  if (scratch.tiles_ != n || scratch.tiles_per_column_ != chip.exchange.tiles_per_column ||
      scratch.group_ != group || column.size() != n) {
    column.resize(n);
    group_start.resize(n);
    for (std::uint32_t t = 0; t < n; ++t) {
      column[t] = column_of(chip, t);
      group_start[t] = t - t % group;
    }
    scratch.tiles_ = n;
    scratch.tiles_per_column_ = chip.exchange.tiles_per_column;
    scratch.group_ = group;
  }
  const auto check = [&](trace::TileRange r) {
    if (r.last >= n)
      throw TraceError(fmt::format("exchange '{}' uses tiles {}..{} but the chip has {} tiles",
                                   ex.name, r.first, r.last, n));
    if (exchange_code) {
      ++transfers_at[r.first];
      --transfers_at[r.last + 1];
    }
  };
  // `bytes` added to (or, negated, taken from) every tile of [first, last] in the sum `d`.
  const auto add = [](std::vector<std::uint64_t>& d, std::uint32_t first, std::uint32_t last,
                      std::uint64_t bytes) {
    d[first] += bytes;
    d[last + 1] -= bytes;
  };
  ExchangeCost out;
  std::uint64_t total_bytes = 0;
  std::uint64_t max_distance = 0;
  const auto distance = [&](trace::TileRange a, trace::TileRange b) -> std::uint64_t {
    const std::int64_t forward = column[b.last] - column[a.first];
    const std::int64_t backward = column[a.last] - column[b.first];
    const std::int64_t most = forward > backward ? forward : backward;
    return most > 0 ? static_cast<std::uint64_t>(most) : 0;
  };
  // A multicast of `bytes` from tile `s` to the range `d` (none of whose tiles is a destination
  // of the same transfer outside it: its neighbours are not destinations, or belong to it):
  // every tile but the sender receives the bytes, at the group's rate when its whole super-tile
  // group lies in the range and is not the sender's, else at its own. `full_first` and
  // `full_last` bound the whole groups in `d` (empty when full_first > full_last).
  const auto multicast = [&](std::uint32_t s, trace::TileRange d, std::int64_t full_first,
                             std::int64_t full_last, std::uint64_t bytes) {
    const std::uint32_t s0 = group_start[s];
    if (full_first <= full_last && s0 >= full_first && s0 <= full_last) {
      add(shared, s0, s0 + group - 1, 0 - bytes);
      add(alone, s0, s0 + group - 1, bytes);
    }
    if (d.contains(s)) {
      add(received, s, s, 0 - bytes);
      add(alone, s, s, 0 - bytes);
    }
    total_bytes += bytes * (std::uint64_t{d.size()} - (d.contains(s) ? 1 : 0));
  };
  // What multicast() adds to every tile of `d` for the transfers of `bytes` to it (whatever
  // their senders): alone everywhere, then shared instead over the whole groups.
  const auto multicast_base = [&](trace::TileRange d, std::int64_t full_first,
                                  std::int64_t full_last, std::uint64_t bytes) {
    add(received, d.first, d.last, bytes);
    add(alone, d.first, d.last, bytes);
    if (full_first <= full_last) {
      const auto f = static_cast<std::uint32_t>(full_first);
      const auto l = static_cast<std::uint32_t>(full_last);
      add(alone, f, l, 0 - bytes);
      add(shared, f, l, bytes);
    }
  };
  // `bytes` sent from, and one transfer's exchange code on, each of the `count` tiles
  // first, first + k, ...: added along the stride, turned into the per-tile sums at the end.
  auto& strided_sent = scratch.strided_sent_;
  auto& strided_transfers = scratch.strided_transfers_;
  const auto strided = [&](std::uint32_t k, std::uint32_t first, std::uint32_t count,
                           std::uint64_t bytes, bool code) {
    strided_sent.add(k, first, count, bytes);
    if (code) strided_transfers.add(k, first, count, 1);
  };
  // The first and last tile of the whole super-tile groups inside `d`.
  const auto whole_groups = [&](trace::TileRange d) -> std::pair<std::int64_t, std::int64_t> {
    const std::int64_t first =
        group_start[d.first] == d.first ? d.first : std::int64_t{group_start[d.first]} + group;
    const std::int64_t end = std::int64_t{d.last} + 1;
    return {first, end - end % group - 1};
  };

  // Any transfer, by the rule.
  const auto general = [&](const trace::TransferView& tr) {
    const auto dsts = tr.dst;
    check(tr.src);
    for (const auto& d : dsts) check(d);
    for (const auto& d : dsts) max_distance = std::max(max_distance, distance(tr.src, d));
    if (tr.mode == trace::TransferMode::kPersonalised) {
      // Each source sends a block to every destination but itself; each destination receives
      // one from every source but itself.
      std::uint64_t dst_count = 0;
      for (const auto& d : dsts) dst_count += d.size();
      add(sent, tr.src.first, tr.src.last, tr.bytes * dst_count);
      for (const auto& d : dsts) {
        add(received, d.first, d.last, tr.bytes * tr.src.size());
        add(alone, d.first, d.last, tr.bytes * tr.src.size());
        total_bytes += tr.bytes * tr.src.size() * d.size();
        const std::uint32_t lo = std::max(d.first, tr.src.first);
        const std::uint32_t hi = std::min(d.last, tr.src.last);
        if (lo > hi) continue;
        add(sent, lo, hi, 0 - tr.bytes);
        add(received, lo, hi, 0 - tr.bytes);
        add(alone, lo, hi, 0 - tr.bytes);
        total_bytes -= tr.bytes * (hi - lo + 1);
      }
      return;
    }
    // Multicast: each source tile sends its data once. Destination ranges that touch are one
    // range (a super-tile group may span both); ranges with a gap between them are apart.
    ranges.assign(dsts.begin(), dsts.end());
    if (ranges.size() > 1) {
      std::sort(ranges.begin(), ranges.end(),
                [](trace::TileRange x, trace::TileRange y) { return x.first < y.first; });
      std::size_t k = 0;
      for (std::size_t i = 1; i < ranges.size(); ++i) {
        if (ranges[i].first == ranges[k].last + 1)
          ranges[k].last = ranges[i].last;
        else
          ranges[++k] = ranges[i];
      }
      ranges.resize(k + 1);
    }
    const std::uint64_t sources = tr.src.size();
    add(sent, tr.src.first, tr.src.last, tr.bytes);
    for (const auto& d : ranges) {
      const auto [full_first, full_last] = whole_groups(d);
      multicast_base(d, full_first, full_last, tr.bytes * sources);
      for (std::uint32_t s = tr.src.first; s <= tr.src.last; ++s)
        multicast(s, d, full_first, full_last, tr.bytes);
    }
  };

  std::vector<trace::TileRange> shifted;  // destinations of a run with a destination step
  for (const trace::Transfer& t : ex.transfers) {
    const auto dsts = ex.destinations(t);
    if (t.count > 1 && t.src_step == 0 && t.dst_step == 0) {
      // A run of `count` copies between the same tiles: every sum of the rule is linear in the
      // bytes, so it costs as one transfer of all their bytes (closed form: a run of 2^32 - 1
      // copies spun for minutes when each copy was costed). The exchange code is per copy.
      __extension__ typedef __int128 Wide;
      const Wide c = t.count;
      const Wide all =
          c * static_cast<Wide>(t.bytes) + static_cast<Wide>(t.bytes_step) * c * (c - 1) / 2;
      Wide tiles = t.src.size();
      for (const auto& d : dsts) tiles += d.size();
      if (all < 0 || all * tiles > static_cast<Wide>(std::numeric_limits<std::int64_t>::max()))
        throw ModelError(fmt::format(
            "exchange '{}': a run of {} transfers of {} bytes each between {} tiles moves more "
            "than 2^63 bytes",
            ex.name, t.count, t.bytes, static_cast<std::uint64_t>(tiles)));
      general(trace::TransferView{t.src, dsts, static_cast<std::uint64_t>(all), t.mode});
      if (exchange_code) {  // general() counted one copy of each range
        transfers_at[t.src.first] += t.count - 1;
        transfers_at[t.src.last + 1] -= t.count - 1;
        for (const auto& d : dsts) {
          transfers_at[d.first] += t.count - 1;
          transfers_at[d.last + 1] -= t.count - 1;
        }
      }
      continue;
    }
    if (t.mode == trace::TransferMode::kMulticast && t.src.first == t.src.last &&
        dsts.size() == 1 && (t.count == 1 || t.dst_step == 0)) {
      // The common case in compiled programs, one tile copying to one range of tiles (a run of
      // them, from shifted sources to the same range): the multicast rule above, specialised,
      // with the bytes every copy adds to the whole range added once.
      const trace::TileRange d = dsts[0];
      if (d.last >= n) check(d);  // throws
      const auto [full_first, full_last] = whole_groups(d);
      const std::int64_t first_column = column[d.first], last_column = column[d.last];
      const std::int64_t c = t.count;
      const std::int64_t s_end = std::int64_t{t.src.first} + (c - 1) * t.src_step;
      const std::int64_t lo = std::min<std::int64_t>(t.src.first, s_end);
      const std::int64_t hi = std::max<std::int64_t>(t.src.first, s_end);
      if (t.count > 1 && t.bytes_step == 0 && lo >= 0 && hi < n) {
        // A run of equal copies from sources s, s + k, s + 2k, ... (in either direction) on the
        // chip: the sources' sums are strided additions (strided()), the column distance is
        // largest at an end of the run, and only the copies sent from inside the range differ
        // from the others (multicast()).
        const auto k = static_cast<std::uint32_t>(t.src_step < 0 ? -t.src_step : t.src_step);
        const auto first = static_cast<std::uint32_t>(lo);
        strided(k, first, t.count, t.bytes, exchange_code != nullptr);
        const std::int64_t most = std::max(last_column - column[first],
                                           column[static_cast<std::uint32_t>(hi)] - first_column);
        if (most > 0) max_distance = std::max(max_distance, static_cast<std::uint64_t>(most));
        // The copies whose source lies in the range: i in [in_first, in_last] from `first`.
        const std::int64_t in_first =
            d.first <= first ? 0 : (std::int64_t{d.first} - first + k - 1) / k;
        const std::int64_t in_last =
            std::min<std::int64_t>(c - 1, (std::int64_t{d.last} - first) / k);
        const std::int64_t inside =
            d.last < first ? 0 : std::max<std::int64_t>(0, in_last - in_first + 1);
        for (std::int64_t i = in_first; i < in_first + inside; ++i)
          multicast(static_cast<std::uint32_t>(first + i * k), d, full_first, full_last, t.bytes);
        total_bytes += t.bytes * std::uint64_t{d.size()} * static_cast<std::uint64_t>(c - inside);
        multicast_base(d, full_first, full_last, t.bytes * t.count);
        if (exchange_code) {
          transfers_at[d.first] += t.count;
          transfers_at[d.last + 1] -= t.count;
        }
        continue;
      }
      std::uint64_t all = 0;
      for (std::uint32_t i = 0; i < t.count; ++i) {
        const std::uint32_t s = trace::Transfer::shift(t.src.first, t.src_step, i);
        const std::uint64_t bytes = t.bytes_at(i);
        check({s, s});
        const std::int64_t forward = last_column - column[s];
        const std::int64_t backward = column[s] - first_column;
        const std::int64_t most = forward > backward ? forward : backward;
        if (most > 0) max_distance = std::max(max_distance, static_cast<std::uint64_t>(most));
        add(sent, s, s, bytes);
        multicast(s, d, full_first, full_last, bytes);
        all += bytes;
      }
      multicast_base(d, full_first, full_last, all);
      if (exchange_code) {  // the destination range's exchange code, once per transfer
        transfers_at[d.first] += t.count;
        transfers_at[d.last + 1] -= t.count;
      }
      continue;
    }
    if (t.count == 1) {
      general(trace::TransferView{t.src, dsts, t.bytes, t.mode});
      continue;
    }
    if (t.dst_step != 0) shifted.resize(dsts.size());
    for (std::uint32_t i = 0; i < t.count; ++i) {
      std::span<const trace::TileRange> d = dsts;
      if (t.dst_step != 0) {
        for (std::size_t k = 0; k < dsts.size(); ++k)
          shifted[k] = {trace::Transfer::shift(dsts[k].first, t.dst_step, i),
                        trace::Transfer::shift(dsts[k].last, t.dst_step, i)};
        d = shifted;
      }
      general(trace::TransferView{t.src_at(i), d, t.bytes_at(i), t.mode});
    }
  }
  // The pieces of moves and reduce-scatters: single-tile transfers, costed by the multicast rule
  // above specialised to one source and one destination tile (other than the source): the
  // destination receives at the group's rate only when its super-tile group is the one tile.
  // The sums are added tile by tile (Move::for_each_tile, ReduceScatter::for_each_tile), not
  // transfer by transfer: a tile receives `bytes` in `transfers` transfers whose senders lie
  // between `lowest` and `highest` (its largest column distance is to one of them), and sends
  // `bytes` in `transfers`.
  auto& receive_rate = group == 1 ? shared : alone;
  const auto receive_at = [&](std::uint32_t t, std::uint64_t bytes, std::uint64_t transfers,
                              std::uint32_t lowest, std::uint32_t highest) {
    if (transfers == 0) return;
    add(received, t, t, bytes);
    add(receive_rate, t, t, bytes);
    total_bytes += bytes;
    const std::int64_t most = std::max(column[t] - column[lowest], column[highest] - column[t]);
    if (most > 0) max_distance = std::max(max_distance, static_cast<std::uint64_t>(most));
    if (exchange_code) add(transfers_at, t, t, transfers);
  };
  const auto send_from = [&](std::uint32_t s, std::uint64_t bytes, std::uint64_t transfers) {
    add(sent, s, s, bytes);
    if (exchange_code) add(transfers_at, s, s, transfers);
  };
  // The grids' and groups' tiles are checked once.
  for (const trace::Move& m : ex.moves) {
    if (const std::uint64_t last = m.last_tile(); last >= n)
      throw TraceError(
          fmt::format("exchange '{}' moves a tensor over tiles up to {} but the chip "
                      "has {} tiles",
                      ex.name, last, n));
    m.for_each_tile(receive_at, send_from);
  }
  for (const trace::ReduceScatter& r : ex.reduce_scatters) {
    if (const std::uint64_t last = r.last_tile(); last >= n)
      throw TraceError(fmt::format(
          "exchange '{}' reduces over tiles up to {} but the chip has {} tiles", ex.name, last, n));
    r.for_each_tile([&](std::uint32_t t, std::uint64_t bytes, std::uint64_t transfers,
                        std::uint32_t lowest, std::uint32_t highest, std::uint64_t sent_bytes,
                        std::uint64_t sent_transfers) {
      receive_at(t, bytes, transfers, lowest, highest);
      send_from(t, sent_bytes, sent_transfers);
    });
  }
  out.total_bytes = total_bytes;

  strided_sent.drain_into(sent);
  strided_transfers.drain_into(transfers_at);
  // Divisions by the rates as products with their inverses when both are powers of two (the
  // chips' are): the same doubles, since both scale exactly.
  const auto power_of_two = [](double r) {
    int exponent = 0;
    return std::frexp(r, &exponent) == 0.5;
  };
  const bool scale = power_of_two(rate) && power_of_two(rate * group);
  const double per_rate = 1.0 / rate, per_group_rate = 1.0 / (rate * group);
  // Each tile's sums from their differences; the busiest tile; the differences cleared for the
  // next exchange as they are read.
  std::uint64_t tile_sent = 0, tile_alone = 0, tile_shared = 0, tile_received = 0;
  out.tile_bytes.resize(n);
  // A tile is busier than the busiest so far, T cycles, when ceil_cycles(busy) > T, that is
  // when busy - 1e-9 (what ceil_cycles rounds up) > T: T came from a double, so it is one.
  double busiest = 0;
  for (std::uint32_t t = 0; t < n; ++t) {
    tile_sent += sent[t];
    tile_alone += alone[t];
    tile_shared += shared[t];
    tile_received += received[t];
    sent[t] = alone[t] = shared[t] = received[t] = 0;
    out.tile_bytes[t] = tile_received + tile_sent;
    if ((tile_sent | tile_alone | tile_shared) == 0) continue;  // an idle tile: 0 cycles
    const auto a = static_cast<double>(tile_alone), b = static_cast<double>(tile_shared);
    const auto c = static_cast<double>(tile_sent);
    const double receive =
        scale ? a * per_rate + b * per_group_rate : a / (rate * 1u) + b / (rate * group);
    const double busy = std::max(scale ? c * per_rate : c / rate, receive);
    if (busy - 1e-9 <= busiest) continue;  // (a NaN goes on to ceil_cycles, which throws)
    out.transfer_cycles = ceil_cycles(busy).count;
    out.busiest_tile = t;
    busiest = static_cast<double>(out.transfer_cycles);
  }
  sent[n] = alone[n] = shared[n] = received[n] = 0;
  out.latency_cycles = max_distance * chip.exchange.column_hop_latency.count;
  out.cycles = chip.exchange.fixed_overhead.count + out.transfer_cycles + out.latency_cycles;
  if (exchange_code) {
    const std::uint64_t per_transfer = chip.runtime.exchange_code_bytes_per_transfer.count;
    std::uint64_t count = 0;
    exchange_code->resize(n);
    for (std::uint32_t t = 0; t < n; ++t) {
      (*exchange_code)[t] = (count += transfers_at[t]) * per_transfer;
      transfers_at[t] = 0;
    }
    transfers_at[n] = 0;
  }
  scratch.clean_ = true;
  return out;
}

std::uint64_t host_transfer_cycles(const ChipSpec& chip, const trace::Step& step, Bandwidth link,
                                   Duration latency) {
  const double total = static_cast<double>(step.bytes) * static_cast<double>(step.tiles.size());
  const double on_link = total / link.bytes_per_second * chip.clock.hz;
  const double tile = static_cast<double>(step.bytes) / chip.exchange.bytes_per_cycle.value;
  return (latency * chip.clock + ceil_cycles(std::max(on_link, tile))).count;
}

HostCopyCost host_copy_cost(const ChipSpec& chip, const trace::Step& step) {
  HostCopyCost out;
  out.total_bytes = step.bytes * step.tiles.size();
  out.cycles = host_transfer_cycles(chip, step, chip.host.bandwidth, chip.host.latency);
  return out;
}

namespace {

// Tensors with a lifetime (trace-format §4.3) add, on each tile, their peak over program
// positions: the largest sum of those live at one position, split by kind as at that
// position. Tiles between consecutive ends of these tensors' tile ranges hold the same
// tensors, so each such segment is swept once over the lifetimes' start and end events
// (starts before ends at one position, as both are inclusive).
void add_peak_live(const trace::IpuProgram& program, MemoryMap& map) {
  std::vector<const trace::Tensor*> scoped;
  std::vector<std::uint64_t> cuts{0, map.tiles.size()};
  for (const auto& t : program.tensors)
    if (t.live && t.bytes_per_tile > 0) {
      scoped.push_back(&t);
      cuts.push_back(t.tiles.first);
      cuts.push_back(std::uint64_t{t.tiles.last} + 1);
    }
  if (scoped.empty()) return;
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  struct Event {
    std::uint64_t position;
    bool end;  // after the position
    const trace::Tensor* tensor;
  };
  std::vector<Event> events;
  events.reserve(2 * scoped.size());
  for (const trace::Tensor* t : scoped) {
    events.push_back({t->live->first, false, t});
    events.push_back({t->live->last, true, t});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.position != b.position ? a.position < b.position : a.end < b.end;
  });
  constexpr std::size_t kKinds = trace::kTensorKindNames.size();
  for (std::size_t c = 0; c + 1 < cuts.size() && cuts[c] < map.tiles.size(); ++c) {
    const auto tile = static_cast<std::uint32_t>(cuts[c]);
    std::uint64_t live = 0, peak = 0, peak_position = 0;
    std::array<std::uint64_t, kKinds> live_kinds{}, peak_kinds{};
    for (const Event& e : events) {
      if (!e.tensor->tiles.contains(tile)) continue;
      const auto k = static_cast<std::size_t>(e.tensor->kind);
      if (e.end) {
        live -= e.tensor->bytes_per_tile;
        live_kinds[k] -= e.tensor->bytes_per_tile;
        continue;
      }
      live += e.tensor->bytes_per_tile;
      live_kinds[k] += e.tensor->bytes_per_tile;
      if (live > peak) {
        peak = live;
        peak_kinds = live_kinds;
        peak_position = e.position;
      }
    }
    if (peak == 0) continue;
    for (std::uint64_t t = cuts[c]; t < cuts[c + 1] && t < map.tiles.size(); ++t) {
      TileMemoryUse& use = map.tiles[t];
      use.tensors += peak;
      use.scoped_peak = peak;
      use.peak_position = peak_position;
      for (std::size_t k = 0; k < kKinds; ++k) use.tensor_kinds[k] += peak_kinds[k];
    }
  }
}

}  // namespace

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
  constexpr std::size_t kKinds = trace::kTensorKindNames.size();
  std::array<std::vector<std::uint64_t>, kKinds> kinds;
  for (const auto& tensor : program.tensors) {
    if (tensor.live) {                // not always live: add_peak_live below
      add(tensors, tensor.tiles, 0);  // (checks the range)
      continue;
    }
    add(tensors, tensor.tiles, tensor.bytes_per_tile);
    auto& diff = kinds[std::min<std::size_t>(static_cast<std::size_t>(tensor.kind), kKinds - 1)];
    if (diff.empty()) diff.assign(n + 1, 0);
    add(diff, tensor.tiles, tensor.bytes_per_tile);
  }
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
  // Runs whose ranges step add along the step: one difference array per step used in the
  // program (difference at a range tile's first copy, and after its last, then summed along the
  // step once at the end), when every copy lies on the chip; else copy by copy, to name the
  // first that does not.
  StridedSums strided;
  strided.reset(n);
  const auto along = [&](trace::TileRange r, std::int64_t step, std::uint32_t count) {
    const std::int64_t shift = (std::int64_t{count} - 1) * step;
    const auto k = static_cast<std::uint32_t>(step < 0 ? -step : step);
    for (std::uint32_t t = r.first; t <= r.last; ++t)
      strided.add(k, static_cast<std::uint32_t>(std::min<std::int64_t>(t, t + shift)), count,
                  per_transfer);
  };
  const auto on_chip = [&](trace::TileRange r, std::int64_t step, std::uint32_t count) {
    const std::int64_t shift = (std::int64_t{count} - 1) * step;
    return step != 0 && std::min<std::int64_t>(r.first, r.first + shift) >= 0 &&
           std::max<std::int64_t>(r.last, r.last + shift) < n;
  };
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
      const auto dsts = ex.destinations(tr);
      bool fits = tr.src_step == 0 || on_chip(tr.src, tr.src_step, tr.count);
      for (const auto& d : dsts)
        fits = fits && (tr.dst_step == 0 || on_chip(d, tr.dst_step, tr.count));
      if (fits) {
        if (tr.src_step == 0)
          add(exchange_code, tr.src, per_transfer * tr.count);
        else
          along(tr.src, tr.src_step, tr.count);
        for (const auto& d : dsts) {
          if (tr.dst_step == 0)
            add(exchange_code, d, per_transfer * tr.count);
          else
            along(d, tr.dst_step, tr.count);
        }
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
    for (const trace::Move& m : ex.moves) {
      const auto code = [&](std::uint32_t t, std::uint64_t, std::uint64_t transfers, auto...) {
        add(exchange_code, {t, t}, per_transfer * transfers);
      };
      m.for_each_tile(code, code);
    }
    for (const trace::ReduceScatter& r : ex.reduce_scatters)
      r.for_each_tile([&](std::uint32_t t, std::uint64_t, std::uint64_t transfers, std::uint32_t,
                          std::uint32_t, std::uint64_t, std::uint64_t sent_transfers) {
        add(exchange_code, {t, t}, per_transfer * (transfers + sent_transfers));
      });
  }
  strided.drain_into(exchange_code);

  MemoryMap map;
  map.tiles.assign(n, TileMemoryUse{});
  std::vector<std::uint64_t> used(trace::kCodeletCount, 0);  // running vertex counts
  std::uint64_t t_tensors = 0, t_state = 0, t_exchange = 0;
  std::array<std::uint64_t, kKinds> t_kinds{};
  for (std::uint32_t t = 0; t < n; ++t) {
    TileMemoryUse& use = map.tiles[t];
    use.tensors = t_tensors += tensors[t];
    for (std::size_t k = 0; k < kKinds; ++k)
      if (!kinds[k].empty()) use.tensor_kinds[k] = t_kinds[k] += kinds[k][t];
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
  add_peak_live(program, map);
  return map;
}

void check_memory(const ChipSpec& chip, const trace::IpuProgram& program, const MemoryMap& map,
                  std::string_view advice) {
  const std::uint64_t capacity = chip.tile_memory.count;
  std::uint32_t worst = 0;
  std::uint32_t over = 0;
  for (std::uint32_t t = 0; t < map.tiles.size(); ++t) {
    if (map.tiles[t].total() > capacity) ++over;
    if (map.tiles[t].total() > map.tiles[worst].total()) worst = t;
  }
  if (over == 0) return;
  const TileMemoryUse& use = map.tiles[worst];
  // Largest tensors on the worst tile: those live throughout, and those with a lifetime live
  // where the tile's memory peaks.
  std::vector<std::pair<std::uint64_t, std::string>> consumers;
  constexpr std::size_t kKinds = trace::kTensorKindNames.size();
  std::array<std::uint64_t, kKinds> kind_bytes{}, kind_count{};
  for (const auto& tensor : program.tensors)
    if (tensor.tiles.contains(worst) &&
        (!tensor.live || (use.scoped_peak > 0 && tensor.live->contains(use.peak_position)))) {
      consumers.emplace_back(tensor.bytes_per_tile, tensor.name);
      const auto k = std::min<std::size_t>(static_cast<std::size_t>(tensor.kind), kKinds - 1);
      kind_bytes[k] += tensor.bytes_per_tile;
      ++kind_count[k];
    }
  std::sort(consumers.begin(), consumers.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::string top;
  std::uint64_t top_bytes = 0;
  for (std::size_t i = 0; i < consumers.size() && i < 3; ++i) {
    top += fmt::format("{}{} {}", i ? ", " : "", consumers[i].second,
                       human_bytes(static_cast<double>(consumers[i].first)));
    top_bytes += consumers[i].first;
  }
  // Many small tensors (a deep model's activations, each mapped from tile 0 on) fill a tile
  // that no large one explains: say how many of each kind there are.
  if (2 * top_bytes < use.tensors) {
    std::string kinds;
    for (std::size_t k = 0; k < kKinds; ++k)
      if (kind_count[k] > 0)
        kinds += fmt::format("{}{} {} tensors {}", kinds.empty() ? "" : ", ", kind_count[k],
                             trace::kTensorKindNames[k],
                             human_bytes(static_cast<double>(kind_bytes[k])));
    top += fmt::format(" (of {} tensors on the tile: {})", consumers.size(), kinds);
  }
  throw TileMemoryError(fmt::format(
      "IPU {}: out of memory on tile {}: needs {} of {} (tensors {}, vertex state {}, code {}, "
      "exchange code {}, stack {}); largest tensors: {}; {} tile(s) over capacity{}",
      program.ipu, worst, human_bytes(static_cast<double>(use.total())),
      human_bytes(static_cast<double>(capacity)), human_bytes(static_cast<double>(use.tensors)),
      human_bytes(static_cast<double>(use.vertex_state)),
      human_bytes(static_cast<double>(use.code)),
      human_bytes(static_cast<double>(use.exchange_code)),
      human_bytes(static_cast<double>(use.stack)), top.empty() ? "none" : top, over, advice));
}

}  // namespace ipusim::cost
