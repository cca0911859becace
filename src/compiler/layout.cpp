// SPDX-License-Identifier: Apache-2.0
#include "ipusim/compiler/layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::compiler {
namespace {

constexpr std::uint64_t kMinBytesPerTile = 128;   // poplar-compiler.md §1.7 (linear mapping)
constexpr std::uint64_t kMaxTransfers = 1 << 18;  // per rearrangement, before coarsening

std::uint64_t round_up(std::uint64_t v, std::uint64_t grain) { return ceil_div(v, grain) * grain; }

}  // namespace

std::uint64_t Layout::position_blocks() const {
  return positions_per_tile == 0 ? 0 : ceil_div(positions, positions_per_tile);
}
std::uint64_t Layout::channel_blocks() const {
  return chans_per_tile == 0 ? 0 : ceil_div(channels, chans_per_tile);
}
std::uint32_t Layout::tiles() const {
  return static_cast<std::uint32_t>(position_blocks() * channel_blocks());
}
std::uint32_t Layout::tile(std::uint64_t p, std::uint64_t c) const {
  return tile(p, c, position_blocks(), channel_blocks());
}
trace::TileRange Layout::range() const {
  return trace::TileRange{first_tile, tile(position_blocks() - 1, channel_blocks() - 1)};
}

Layout channel_view(const Layout& grouped, std::uint64_t groups) {
  if (groups <= 1) return grouped;
  Layout v = grouped;
  const std::uint64_t per_group = grouped.positions / groups;  // positions of one group
  v.positions = per_group;
  v.channels = groups * grouped.channels;
  // A block of whole groups (a tile holding several groups' positions, all their channels)
  // becomes a channel block of those groups; a block within one group keeps its positions
  // and becomes one of that group's position blocks. Blocks that straddle groups are rounded
  // to whole groups, or to equal parts of one, never to more blocks than tiles.
  const std::uint64_t ppt = grouped.positions_per_tile;
  if (ppt >= per_group) {
    v.positions_per_tile = per_group;
    v.chans_per_tile = ceil_div(ppt, per_group) * grouped.chans_per_tile;
  } else {
    v.positions_per_tile = ceil_div(per_group, per_group / ppt);
    v.chans_per_tile = grouped.chans_per_tile;
  }
  v.channels_outer = true;
  return v;
}

namespace {

// A dimension in blocks of `block` elements, seen per part of `part` elements: the elements of
// one part a block holds and the parts it holds. A block within a part is widened to cut the
// part into equal blocks, never more of them than `block` made (so a view never needs more
// tiles than the layout has); a block of several parts holds whole ones.
std::pair<std::uint64_t, std::uint64_t> per_part(std::uint64_t block, std::uint64_t part) {
  if (block >= part) return {part, ceil_div(block, part)};
  return {ceil_div(part, part / block), 1};
}

}  // namespace

Layout group_norm_view(const Layout& x, std::uint64_t samples, std::uint64_t groups) {
  const auto [positions, samples_per_tile] = per_part(x.positions_per_tile, x.positions / samples);
  const auto [channels, groups_per_tile] = per_part(x.chans_per_tile, x.channels / groups);
  Layout v = x;
  v.channels = samples * groups;
  v.positions = (x.channels / groups) * (x.positions / samples);
  v.positions_per_tile = positions * channels;
  v.chans_per_tile = samples_per_tile * groups_per_tile;
  v.channels_outer = false;
  return v;
}

Layout linear_layout(const ChipSpec& chip, trace::DType dtype, std::uint64_t positions,
                     std::uint64_t channels) {
  if (positions == 0 || channels == 0) throw ModelError("linear_layout: empty tensor");
  const std::uint64_t eb = trace::dtype_bytes(dtype);
  const std::uint64_t grain = std::max<std::uint64_t>(1, chip.datapath_width.count / eb);
  const std::uint64_t elements = positions * channels;
  std::uint64_t per =
      round_up(std::max(ceil_div(elements, chip.tiles), ceil_div(kMinBytesPerTile, eb)), grain);
  Layout l;
  l.dtype = dtype;
  l.positions = positions;
  l.channels = channels;
  if (per >= channels) {
    l.chans_per_tile = channels;
    l.positions_per_tile = std::min(positions, ceil_div(per, channels));
  } else {
    // Pieces within a position; every position needs ceil(channels / per) tiles.
    if (positions * ceil_div(channels, per) > chip.tiles)
      per = std::min(
          channels,
          round_up(ceil_div(channels, std::max<std::uint64_t>(1, chip.tiles / positions)), grain));
    l.chans_per_tile = std::min(channels, per);
    l.positions_per_tile = 1;
  }
  return l;
}

Layout channel_slice(Layout l, std::uint64_t width) {
  l.channels = width;
  l.chans_per_tile = std::min(l.chans_per_tile, width);
  return l;
}

Layout viewed_as(const Layout& l, const Layout& as) {
  Layout v = as;
  v.first_tile = l.first_tile;
  v.tile_stride = l.tile_stride;
  v.positions_per_tile = ceil_div(as.positions, std::max<std::uint64_t>(1, l.position_blocks()));
  v.chans_per_tile = ceil_div(as.channels, std::max<std::uint64_t>(1, l.channel_blocks()));
  return v;
}

Layout transposed_view(const Layout& l) {
  Layout t = l;
  std::swap(t.positions, t.channels);
  std::swap(t.positions_per_tile, t.chans_per_tile);
  t.channels_outer = !l.channels_outer;
  return t;
}

Layout conv_output_layout(const ChipSpec& /*chip*/, const plan::ConvArgs& args,
                          const plan::ConvPlan& p) {
  const plan::ConvArgs a = plan::planned_product(args, p);
  const std::uint64_t out_h = ceil_div(a.height, a.stride.h), out_w = ceil_div(a.width, a.stride.w);
  Layout l;
  l.dtype = a.dtype;
  // Groups are the outermost index: a tile's block holds its groups' rows.
  l.positions = a.groups * a.batch * out_h * out_w;
  l.channels = a.out_chans;
  l.chans_per_tile = p.out_per_tile * p.serial_out;  // a serial split's slices stay together
  l.positions_per_tile = ceil_div(p.groups_per_tile * p.rows_per_tile * out_w, p.in_split);
  if (p.order == plan::TileOrder::kInputOuter) {
    // Input-channel blocks outside row blocks (a joint plan's data gradient: one group block,
    // one output-channel block): a row block's outputs cut into in_split chunks of its
    // channels, chunk k of row block r on tile k x row_split + r, channel block outermost.
    if (p.group_split != 1 || p.out_split != 1)
      throw ModelError(
          "conv_output_layout: an input-outer plan needs one group block and one "
          "output-channel block");
    l.positions_per_tile = p.groups_per_tile * p.rows_per_tile * out_w;
    l.chans_per_tile = ceil_div(l.chans_per_tile, p.in_split);
    l.channels_outer = true;
  }
  return p.swapped ? transposed_view(l) : l;  // a swapped plan's product is C^T
}

Layout conv_input_layout(const ChipSpec& /*chip*/, const plan::ConvArgs& a,
                         const plan::ConvPlan& p) {
  Layout l;
  l.dtype = a.dtype;
  l.positions = a.groups * a.batch * a.height * a.width;
  l.channels = a.in_chans;
  l.chans_per_tile = p.in_per_tile * p.serial_in;
  l.positions_per_tile = ceil_div(l.positions, std::uint64_t{p.group_split} * p.row_split);
  l.tile_stride = p.out_split;  // block (r, i) is held by tile (r, i, 0) of the plan
  return l;
}

namespace {

// The copy of a tensor from `from` into `to` as a trace move (its pieces are the transfers);
// blocks larger than the tensor are the one block they hold.
trace::Move move_between(const Layout& from, const Layout& to) {
  const auto grid = [](const Layout& l) {
    return trace::BlockGrid{l.first_tile, l.tile_stride,
                            std::min(l.positions_per_tile, l.positions),
                            std::min(l.chans_per_tile, l.channels), l.channels_outer};
  };
  return {from.positions, from.channels, trace::dtype_bytes(from.dtype), grid(from), grid(to)};
}

// The bytes each tile up to `to`'s last receives in the copy, and the number of transfers
// (from Move::for_each_tile: linear in the blocks, not the transfers).
std::uint64_t received_by_tile(const trace::Move& move, const Layout& to,
                               std::vector<std::uint64_t>& received) {
  received.assign(std::size_t{to.range().last} + 1, 0);
  std::uint64_t transfers = 0;
  move.for_each_tile(
      [&](std::uint32_t t, std::uint64_t bytes, std::uint64_t n, std::uint32_t, std::uint32_t) {
        received[t] += bytes;
        transfers += n;
      },
      [](std::uint32_t, std::uint64_t, std::uint64_t) {});
  return transfers;
}

void check_same_tensor(const Layout& from, const Layout& to) {
  if (from.positions != to.positions || from.channels != to.channels)
    throw ModelError(
        fmt::format("rearrangement between layouts of different shapes: {}x{} to {}x{}",
                    from.positions, from.channels, to.positions, to.channels));
}

}  // namespace

std::uint64_t rearrangement_receive_bytes(const Layout& from, const Layout& to) {
  check_same_tensor(from, to);
  if (from == to || from.per_tile() == 0 || to.per_tile() == 0) return 0;
  std::vector<std::uint64_t> received;
  received_by_tile(move_between(from, to), to, received);
  return *std::max_element(received.begin(), received.end());
}

trace::Exchange rearrangement(const std::string& name, const Layout& from, const Layout& to) {
  check_same_tensor(from, to);
  trace::Exchange ex{name, {}, {}};
  if (from == to || from.per_tile() == 0 || to.per_tile() == 0) return ex;
  // One move record, whose pieces are the transfers (trace::Move), when there are at most
  // kMaxTransfers of them.
  const trace::Move move = move_between(from, to);
  std::vector<std::uint64_t> received;
  const std::uint64_t transfers = received_by_tile(move, to, received);
  if (transfers == 0) return ex;
  if (transfers <= kMaxTransfers) {
    ex.moves.push_back(move);
    return ex;
  }
  // Too fragmented to list piece by piece: each destination tile receives its whole block
  // from one source tile (sources taken in turn), which keeps every tile's receive bytes.
  std::uint32_t next = 0;
  for (std::uint32_t dst = 0; dst < received.size(); ++dst) {
    if (received[dst] == 0) continue;
    std::uint32_t src = from.first_tile + (next++ % from.tiles()) * from.tile_stride;
    if (src == dst) src = from.first_tile + (next++ % from.tiles()) * from.tile_stride;
    if (src == dst) continue;
    const trace::TileRange d{dst, dst};
    ex.add(trace::TileRange{src, src}, {&d, 1}, received[dst]);
  }
  return ex;
}

trace::Exchange channel_move(const std::string& name, const Layout& from, std::uint64_t from_first,
                             const Layout& to, std::uint64_t to_first, std::uint64_t n) {
  if (from.positions != to.positions || from_first + n > from.channels ||
      to_first + n > to.channels)
    throw Error(fmt::format("channel_move: channels [{}, {}) of {} x {} into [{}, {}) of {} x {}",
                            from_first, from_first + n, from.positions, from.channels, to_first,
                            to_first + n, to.positions, to.channels));
  // Bytes per (source, destination) pair, in order, then one transfer each.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> moved;
  const std::uint64_t pblocks = to.position_blocks(), cblocks = to.channel_blocks();
  for (std::uint64_t p = 0; p < pblocks; ++p)
    for (std::uint64_t c = 0; c < cblocks; ++c) {
      const std::uint64_t ch0 = std::max(c * to.chans_per_tile, to_first);
      const std::uint64_t ch1 = std::min((c + 1) * to.chans_per_tile, to_first + n);
      if (ch0 >= ch1) continue;
      const std::uint32_t dst = to.tile(p, c, pblocks, cblocks);
      range_pieces(from, p * to.positions_per_tile, (p + 1) * to.positions_per_tile,
                   ch0 - to_first + from_first, ch1 - to_first + from_first,
                   [&](std::uint32_t src, std::uint64_t bytes) {
                     if (src != dst) moved[{src, dst}] += bytes;
                   });
    }
  trace::Exchange ex{name, {}, {}};
  for (const auto& [tiles, bytes] : moved) {
    const trace::TileRange d{tiles.second, tiles.second};
    ex.add(trace::TileRange{tiles.first, tiles.first}, {&d, 1}, bytes);
  }
  return ex;
}

trace::Exchange expansion(const std::string& name, const Layout& source, const Layout& home,
                          const plan::ConvArgs& a, const plan::ConvPlan& plan) {
  const plan::ConvArgs e = plan::planned_product(a, plan);
  const std::uint64_t pad = (a.kernel.h - 1) / 2, eb = trace::dtype_bytes(home.dtype);
  // Input rows [lo, hi) of the flattened batch x height that expanded row q is made of.
  const auto rows_of = [&](std::uint64_t q) {
    const std::uint64_t n = q / e.height, y = q % e.height;
    if (!plan.expand_h) return std::pair{n * a.height + y, n * a.height + y + 1};
    // The window [y s - pad, y s - pad + k), clipped to the image's rows.
    const std::uint64_t top = y * a.stride.h + a.kernel.h;  // its end, shifted up by pad
    const std::uint64_t lo = y * a.stride.h > pad ? y * a.stride.h - pad : 0;
    const std::uint64_t hi = std::min(a.height, top > pad ? top - pad : 0);
    return std::pair{n * a.height + lo, n * a.height + std::max(lo, hi)};
  };
  trace::Exchange ex{name, {}, {}};
  const std::uint64_t pblocks = home.position_blocks(), cblocks = home.channel_blocks();
  std::vector<std::pair<std::uint32_t, std::uint64_t>> pieces;
  for (std::uint64_t pb = 0; pb < pblocks; ++pb) {
    const std::uint64_t p0 = pb * home.positions_per_tile;
    const std::uint64_t p1 = std::min(home.positions, p0 + home.positions_per_tile);
    if (p0 >= p1) continue;
    const std::uint64_t lo = rows_of(p0 / e.width).first, hi = rows_of((p1 - 1) / e.width).second;
    for (std::uint64_t cb = 0; cb < cblocks; ++cb) {
      const std::uint64_t c0 = cb * home.chans_per_tile;
      const std::uint64_t c1 = std::min(home.channels, c0 + home.chans_per_tile);
      if (c0 >= c1) continue;
      const std::uint32_t dst = home.tile(pb, cb, pblocks, cblocks);
      pieces.clear();
      std::uint64_t held = 0;
      range_pieces(source, lo * a.width, hi * a.width, 0, source.channels,
                   [&](std::uint32_t src, std::uint64_t bytes) {
                     pieces.emplace_back(src, bytes);
                     held += bytes;
                   });
      // The block's bytes shared in proportion, the last piece taking the remainder.
      const std::uint64_t bytes = (p1 - p0) * (c1 - c0) * eb;
      std::uint64_t given = 0;
      for (std::size_t k = 0; k < pieces.size(); ++k) {
        const std::uint64_t share =
            k + 1 == pieces.size()
                ? bytes - given
                : static_cast<std::uint64_t>(static_cast<double>(bytes) *
                                             static_cast<double>(pieces[k].second) /
                                             static_cast<double>(held));
        given += share;
        const trace::TileRange d{dst, dst};
        if (pieces[k].first != dst && share > 0)
          ex.add(trace::TileRange{pieces[k].first, pieces[k].first}, {&d, 1}, share);
      }
    }
  }
  return ex;
}

}  // namespace ipusim::compiler
