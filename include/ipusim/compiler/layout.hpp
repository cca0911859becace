// SPDX-License-Identifier: Apache-2.0
// Tensor layouts: how the compiler spreads a tensor over one IPU's tiles (poplar-compiler.md
// §1.7). A tensor is viewed as [positions x channels] with channels innermost: a conv
// activation is (batch x height x width) x channels, a matmul operand rows x columns, a
// grouped matmul's output (groups x rows) x columns. A layout cuts it into a grid of blocks,
// `channel_blocks` blocks of `chans_per_tile` channels (whole grains) by `position_blocks`
// blocks of `positions_per_tile` positions, one block per tile, channel block innermost:
// block (p, c) lives on tile first_tile + (p x channel_blocks + c) x tile_stride (or, with
// `channels_outer`, first_tile + (c x position_blocks + p) x tile_stride: the output of a conv
// whose groups are channel slices, which its plan puts outermost on the tiles). Only the last
// block of each dimension may be smaller. Two layouts with equal fields are the same tile mapping,
// so an op whose operands have equal layouts needs no exchange.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/plan/conv.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::compiler {

struct Layout {
  trace::DType dtype = trace::DType::kHalf;
  std::uint64_t positions = 0, channels = 0;
  std::uint32_t first_tile = 0;
  std::uint32_t tile_stride = 1;  // tiles between consecutive blocks
  std::uint64_t positions_per_tile = 0, chans_per_tile = 0;
  bool channels_outer = false;  // blocks numbered channel block first (see above)

  std::uint64_t elements() const { return positions * channels; }
  std::uint64_t position_blocks() const;
  std::uint64_t channel_blocks() const;
  std::uint32_t tiles() const;  // tiles holding a block
  trace::TileRange range() const;
  // Elements and bytes on the fullest tile.
  std::uint64_t per_tile() const { return positions_per_tile * chans_per_tile; }
  std::uint64_t bytes_per_tile() const { return per_tile() * trace::dtype_bytes(dtype); }
  // Tiles holding part of one channel (a per-channel reduction's fan-in) and of one position
  // (a per-position reduction's fan-in, e.g. layer norm or softmax over channels).
  std::uint64_t channel_sharers() const { return position_blocks(); }
  std::uint64_t position_sharers() const { return channel_blocks(); }
  // Tile of block (p, c).
  std::uint32_t tile(std::uint64_t p, std::uint64_t c) const;
  // tile(p, c) given position_blocks() and channel_blocks() (for loops over many blocks).
  std::uint32_t tile(std::uint64_t p, std::uint64_t c, std::uint64_t position_blocks,
                     std::uint64_t channel_blocks) const {
    const std::uint64_t block = channels_outer ? c * position_blocks + p : p * channel_blocks + c;
    return static_cast<std::uint32_t>(first_tile + block * tile_stride);
  }
  bool operator==(const Layout&) const = default;
};

// Poplar's generic linear mapping (poplar-compiler.md §1.7): the flattened tensor in
// contiguous pieces of whole vector-width grains and at least 128 bytes, on tiles 0, 1, 2, ...
// Pieces are cut on position boundaries when a tile holds whole positions, else on channel
// grains within a position.
Layout linear_layout(const ChipSpec& chip, trace::DType dtype, std::uint64_t positions,
                     std::uint64_t channels);

// The same tile mapping with positions and channels exchanged (the blocks and their tiles
// unchanged): a [positions x channels] layout read as [channels x positions].
Layout transposed_view(const Layout& l);

// Channels [0, width) of `l`, where `l` keeps them (the first part of a channel split: Q of a
// fused QKV projection's output).
Layout channel_slice(Layout l, std::uint64_t width);
// `l` viewed with the shape of `as` (same elements, another shape: a grouped matmul's
// [groups x rows, columns] result read as [tokens, hidden]), keeping its tiles and block counts.
Layout viewed_as(const Layout& l, const Layout& as);

// The output of a planned conv or matmul (plan::emit_conv): out-channel blocks of the
// plan's out_per_tile channels innermost; each row block's positions, further cut into
// in_split chunks when partial sums are reduce-scattered over the input-channel split. A
// swapped plan computes C^T: its output is the transposed view of that product's.
Layout conv_output_layout(const ChipSpec& chip, const plan::ConvArgs& args,
                          const plan::ConvPlan& plan);

// A conv's output whose groups are channel slices (a grouped or depthwise conv of a CNN),
// given in the planner's axes [(groups x positions) x channels], in the CNN's axes
// [positions x (groups x channels)]: the plan's group blocks become channel blocks, outermost
// on the tiles. Exact when each tile holds whole groups, or one group's block of positions
// with all its channels; otherwise the blocks keep their sizes and tiles in another order.
Layout channel_view(const Layout& grouped, std::uint64_t groups);

// Group norm's view of an activation `x` of `samples` samples (poplibs lib/popnn/GroupNorm.cpp,
// groupActs): one "channel" per statistic, samples x groups of them, each over its group's
// channels at one sample's positions (channels / groups x positions / samples elements). Each
// tile keeps its block: a block within one sample and one group holds part of one statistic; a
// block of whole samples or groups holds whole statistics, several. The number of tiles sharing
// a statistic (a reduction's fan-in) is exact when blocks nest in samples and groups or hold
// whole ones (a block straddling samples or groups is widened to cut each into equal parts, so
// the view never has more blocks than `x`); the tiles are numbered in the view's own block
// order.
Layout group_norm_view(const Layout& x, std::uint64_t samples, std::uint64_t groups);

// The input an unswapped planned conv wants (createInput, §1.7): its row blocks by in-channel
// blocks, each block held once (by the block's first out-channel tile).
Layout conv_input_layout(const ChipSpec& chip, const plan::ConvArgs& args,
                         const plan::ConvPlan& plan);

// The exchange that moves a tensor from layout `from` to layout `to` (same positions and
// channels): every destination block receives the parts of it that other tiles hold. Bytes
// a tile already holds do not move. Returns no transfers when the layouts are equal.
trace::Exchange rearrangement(const std::string& name, const Layout& from, const Layout& to);

// The exchange that moves channels [from_first, from_first + n) of `from` to channels
// [to_first, to_first + n) of `to` (same positions): a concat's operand into its result, or a
// concat's gradient back to an operand's. Bytes a tile already holds do not move (the copy on
// the tile is not charged).
trace::Exchange channel_move(const std::string& name, const Layout& from, std::uint64_t from_first,
                             const Layout& to, std::uint64_t to_first, std::uint64_t n);
// The exchange that builds an expanded plan's input (poplin's expandDims, plan::expand_dims) in
// `home`, the plan's layout of the expanded tensor, from `source`, the layout of the input of
// `a`, the conv: each block of `home` receives its bytes from the tiles holding the input rows it
// is made of (for an expanded kernel row dimension, the kernel rows of its output row;
// otherwise the same row), shared among them in proportion to what each holds of those rows.
// Bytes a tile holds already do not move (the copy on the tile that follows builds them).
trace::Exchange expansion(const std::string& name, const Layout& source, const Layout& home,
                          const plan::ConvArgs& a, const plan::ConvPlan& plan);

// Calls f(source tile, bytes) for every piece of positions [pos0, pos1) x channels [ch0, ch1)
// that a tile of `from` holds, position blocks outer, channel blocks inner.
template <class F>
void range_pieces(const Layout& from, std::uint64_t pos0, std::uint64_t pos1, std::uint64_t ch0,
                  std::uint64_t ch1, F&& f) {
  const std::uint64_t eb = trace::dtype_bytes(from.dtype);
  pos1 = std::min(pos1, from.positions);
  ch1 = std::min(ch1, from.channels);
  if (pos0 >= pos1 || ch0 >= ch1) return;
  const std::uint64_t ppt = from.positions_per_tile, cpt = from.chans_per_tile;
  const std::uint64_t pblocks = from.position_blocks(), cblocks = from.channel_blocks();
  for (std::uint64_t fp = pos0 / ppt; fp * ppt < pos1; ++fp) {
    const std::uint64_t q0 = std::max(pos0, fp * ppt);
    const std::uint64_t q1 = std::min(pos1, (fp + 1) * ppt);
    for (std::uint64_t fc = ch0 / cpt; fc * cpt < ch1; ++fc) {
      const std::uint64_t d0 = std::max(ch0, fc * cpt);
      const std::uint64_t d1 = std::min(ch1, (fc + 1) * cpt);
      f(from.tile(fp, fc, pblocks, cblocks), (q1 - q0) * (d1 - d0) * eb);
    }
  }
}

// Calls f(p, c, source tile, bytes) for every piece of block (p, c) of `to` that tile of
// `from` holds (whatever tiles `to` itself would use), blocks of `to` in order.
template <class F>
void block_pieces(const Layout& from, const Layout& to, F&& f) {
  const std::uint64_t pblocks = to.position_blocks(), cblocks = to.channel_blocks();
  for (std::uint64_t p = 0; p < pblocks; ++p)
    for (std::uint64_t c = 0; c < cblocks; ++c)
      range_pieces(from, p * to.positions_per_tile, (p + 1) * to.positions_per_tile,
                   c * to.chans_per_tile, (c + 1) * to.chans_per_tile,
                   [&](std::uint32_t src, std::uint64_t bytes) { f(p, c, src, bytes); });
}

// Bytes the busiest destination tile receives in rearrangement(from, to).
std::uint64_t rearrangement_receive_bytes(const Layout& from, const Layout& to);

}  // namespace ipusim::compiler
