// SPDX-License-Identifier: Apache-2.0
// The in-memory form of a compiled program trace (format v6, docs/trace-format.md).
// A trace holds one BSP program per IPU of a replica: tensor allocations per tile, compute sets
// (vertex instances per tile), exchanges (tile-to-tile transfers), and a step tree (compute,
// sync, exchange, host copy, repeat; since v2 also external syncs, inter-IPU copies and
// collectives). `replicas` copies of the replica run data-parallel. Text and binary files are
// two serialisations of this.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "ipusim/trace/codelet.hpp"

namespace ipusim::trace {

// The version writers produce; readers also accept kOldestFormatVersion..kFormatVersion.
inline constexpr std::uint32_t kFormatVersion = 6;
inline constexpr std::uint32_t kOldestFormatVersion = 1;

// Deepest nesting of repeat steps that readers accept and check_structure allows.
inline constexpr std::size_t kMaxRepeatDepth = 64;
// Most data-parallel replicas a trace may declare.
inline constexpr std::uint32_t kMaxReplicas = 65536;
// IPU indices are below this: a system has at most 65536 IPUs (config/system.cpp), and
// "highest index + 1" (Trace::ipus_per_replica) must not wrap (issue 16, defect B).
inline constexpr std::uint32_t kMaxIpus = 65536;
// Longest name (trace, tensor, compute set, exchange) in characters.
inline constexpr std::size_t kMaxNameLength = 4096;

// Names are 1..kMaxNameLength characters from [A-Za-z0-9_.:/-].
bool is_valid_name(std::string_view name);

// An inclusive range of tile indices [first, last].
struct TileRange {
  std::uint32_t first = 0;
  std::uint32_t last = 0;
  std::uint32_t size() const { return last - first + 1; }
  bool contains(std::uint32_t t) const { return t >= first && t <= last; }
  bool operator==(const TileRange&) const = default;
};

// The lowest tile that lies in two of `ranges` (a transfer's destinations must not overlap),
// or nullopt if they are disjoint.
std::optional<std::uint32_t> first_shared_tile_of_several(std::span<const TileRange> ranges);
inline std::optional<std::uint32_t> first_shared_tile(std::span<const TileRange> ranges) {
  if (ranges.size() < 2) return std::nullopt;  // one range (what the compiler mostly writes)
  return first_shared_tile_of_several(ranges);
}

enum class TensorKind : std::uint8_t {
  kWeight = 0,
  kActivation,
  kGradient,
  kOptimiser,
  kPartial,
  kInput,
  kOutput,
  kTemp,
};
inline constexpr std::array<std::string_view, 8> kTensorKindNames{
    "weight", "activation", "gradient", "optimiser", "partial", "input", "output", "temp"};

// Program positions of an IPU's program: its steps numbered in pre-order from 0 (a repeat
// step, then its body's steps, each counted once however often the loop runs).
struct Lifetime {
  std::uint64_t first = 0;
  std::uint64_t last = 0;  // included
  bool contains(std::uint64_t position) const { return position >= first && position <= last; }
  bool operator==(const Lifetime&) const = default;
};

// `bytes_per_tile` bytes on every tile of `tiles`, live at the program positions `live`
// (v3; unset: the whole program). Memory is the peak over positions of the live tensors.
struct Tensor {
  std::string name;
  TensorKind kind = TensorKind::kActivation;
  DType dtype = DType::kHalf;
  TileRange tiles;
  std::uint64_t bytes_per_tile = 0;
  std::optional<Lifetime> live;
  bool operator==(const Tensor&) const = default;
};

// Where an item of the program comes from (v3, issue 13): the model layer or layers it belongs
// to (several when shared between layers or fused), the training pass and the kind of
// operation. For reports only: provenance never changes timing. Empty when unknown (a
// hand-written or kernel trace).
enum class Pass : std::uint8_t {
  kNone = 0,
  kForward,
  kRecompute,
  kDataGradient,
  kWeightGradient,
  kWeightUpdate,
  kGradientAllreduce,
  kHostIo,
  kPipelineCopy,
};
inline constexpr std::array<std::string_view, 9> kPassNames{"none",
                                                            "forward",
                                                            "recompute",
                                                            "data_gradient",
                                                            "weight_gradient",
                                                            "weight_update",
                                                            "gradient_allreduce",
                                                            "host_io",
                                                            "pipeline_copy"};
enum class OpKind : std::uint8_t {
  kNone = 0,
  kConv,
  kMatmul,
  kBatchNorm,
  kLayerNorm,
  kSoftmax,
  kElementwise,
  kReduce,
  kPool,
  kEmbedding,
  kLoss,
  kOptimiser,
  kCopy,
};
inline constexpr std::array<std::string_view, 13> kOpKindNames{
    "none",   "conv", "matmul",    "batch_norm", "layer_norm", "softmax", "elementwise",
    "reduce", "pool", "embedding", "loss",       "optimiser",  "copy"};
// Most layer names one item may carry.
inline constexpr std::size_t kMaxProvenanceLayers = 4096;

struct Provenance {
  std::vector<std::string> layers;  // valid names, each at most once, in order of first use
  Pass pass = Pass::kNone;
  OpKind op = OpKind::kNone;
  bool empty() const { return layers.empty() && pass == Pass::kNone && op == OpKind::kNone; }
  bool operator==(const Provenance&) const = default;
};
// The layers an item serves, short enough for a table cell: its layer, "a+b", or
// "a (+N more)" when they would be longer than 30 characters; "" when it has none.
std::string layers_label(const Provenance& p);
// The item's pass ("forward", "weight_update", ...), "" when it has none.
std::string_view pass_label(const Provenance& p);

// One vertex instance of `codelet` on every tile of `tiles` (a range is shorthand for
// identical instances). Unused parameter slots are zero.
// Since v3 a vertex record is a run: `count` copies of it, copy i on `tiles` shifted by
// i x `step` (count 1 is a single record, whose step is 0). Engines visit the copies with
// tiles_at(i); coalesce() builds runs from consecutive records.
struct Vertex {
  Codelet codelet = Codelet::kCopy;
  TileRange tiles;
  std::array<std::int64_t, kMaxVertexParams> params{};
  std::uint32_t count = 1;
  std::int64_t step = 0;
  TileRange tiles_at(std::uint32_t i) const {
    const auto shift = static_cast<std::uint32_t>(static_cast<std::int64_t>(i) * step);
    return {tiles.first + shift, tiles.last + shift};
  }
  // Tiles of all copies together (counting a tile once per copy on it).
  std::uint64_t instances() const { return static_cast<std::uint64_t>(tiles.size()) * count; }
  // Copy i as a single vertex record.
  Vertex copy(std::uint32_t i) const {
    Vertex one = *this;
    one.tiles = tiles_at(i);
    one.count = 1;
    one.step = 0;
    return one;
  }
  bool operator==(const Vertex&) const = default;
};

struct ComputeSet {
  std::string name;
  std::vector<Vertex> vertices;
  Provenance provenance;  // v3
  // Appends one vertex (count 1), merged into runs as vertices arrive, by coalesce()'s rule
  // (docs/trace-format.md §4.2): it extends the last run if it continues it; the last two
  // single vertices and it become a run if the three are affine; else it is a single vertex.
  void add(const Vertex& v) {
    using I = std::int64_t;
    const auto same = [&](const Vertex& a) {
      return a.codelet == v.codelet && a.params == v.params && a.tiles.size() == v.tiles.size();
    };
    if (!vertices.empty()) {  // (the tiles first: comparing parameters costs more)
      Vertex& last = vertices.back();
      if (last.count >= 2) {
        if (continues_last_run(v, 1)) {
          ++last.count;
          return;
        }
      } else if (vertices.size() >= 2) {
        Vertex& a = vertices[vertices.size() - 2];
        const I step = I{last.tiles.first} - a.tiles.first;
        if (a.count == 1 && I{v.tiles.first} == a.tiles.first + 2 * step && same(a) && same(last)) {
          a.count = 3;
          a.step = step;
          vertices.pop_back();
          return;
        }
      }
    }
    vertices.push_back(v);
  }
  // Whether the last record is a run that `n` more copies of `v` (whose copy 0 is next)
  // continue: the same vertex, its tiles where the run's next copy goes, room in the count.
  bool continues_last_run(const Vertex& v, std::uint64_t n) const {
    if (vertices.empty()) return false;
    const Vertex& last = vertices.back();
    return last.count >= 2 &&
           std::int64_t{v.tiles.first} == last.tiles.first + std::int64_t{last.count} * last.step &&
           n <= std::numeric_limits<std::uint32_t>::max() - last.count &&
           last.tiles.size() == v.tiles.size() && last.codelet == v.codelet &&
           last.params == v.params;
  }
  bool operator==(const ComputeSet&) const = default;
};

// How the tiles of a transfer's source range send.
enum class TransferMode : std::uint8_t {
  // Every source tile sends `bytes` of its own data once; every destination tile (other than
  // the sender) receives that same data (multicast).
  kMulticast = 0,
  // Every source tile sends a distinct block of `bytes` to each destination tile other than
  // itself (all-to-all personalised exchange).
  kPersonalised = 1,
};
inline constexpr std::array<std::string_view, 2> kTransferModeNames{"multicast", "personalised"};

// A transfer record. Since v3 it is a run (an affine family) of `count` transfers: transfer
// i sends from `src` shifted by i x `src_step`, to every destination range shifted by
// i x `dst_step`, `bytes` + i x `bytes_step` bytes. A single transfer has count 1 and zero
// steps. Each transfer of a run is a transfer in every respect (timing, exchange code).
struct Transfer {
  TileRange src;
  std::uint32_t dst_first = 0;  // index into Exchange::dst_pool
  std::uint32_t dst_count = 0;  // number of destination ranges
  std::uint64_t bytes = 0;
  TransferMode mode = TransferMode::kMulticast;
  std::uint32_t count = 1;
  std::int64_t src_step = 0;
  std::int64_t dst_step = 0;
  std::int64_t bytes_step = 0;
  bool is_run() const { return count > 1; }
  static std::uint32_t shift(std::uint32_t tile, std::int64_t step, std::uint32_t i) {
    return static_cast<std::uint32_t>(tile + static_cast<std::uint64_t>(step * i));
  }
  TileRange src_at(std::uint32_t i) const {
    return {shift(src.first, src_step, i), shift(src.last, src_step, i)};
  }
  std::uint64_t bytes_at(std::uint32_t i) const {
    return bytes + static_cast<std::uint64_t>(bytes_step * i);
  }
  bool operator==(const Transfer&) const = default;
};

// One transfer of an exchange, as engines see it (Exchange::for_each).
struct TransferView {
  TileRange src;
  std::span<const TileRange> dst;
  std::uint64_t bytes = 0;
  TransferMode mode = TransferMode::kMulticast;
};

// How a [positions x channels] tensor is cut into blocks over an IPU's tiles (the compiler's
// tensor layouts, include/ipusim/compiler/layout.hpp): blocks of `positions_per_tile` by
// `chans_per_tile` elements (only the last of each dimension smaller), block (p, c) on tile
// first_tile + b x tile_stride, where b = p x channel blocks + c, or c x position blocks + p
// when `channels_outer`.
struct BlockGrid {
  std::uint32_t first_tile = 0;
  std::uint32_t tile_stride = 1;
  std::uint64_t positions_per_tile = 1, chans_per_tile = 1;
  bool channels_outer = false;
  bool operator==(const BlockGrid&) const = default;
};

// A rearrangement (v5): the [positions x channels] tensor of `element_bytes`-byte elements,
// laid out as `from`, copied into the layout `to`. It means one single-tile multicast transfer
// per piece: each block of `to` meets blocks of `from`, and each such intersection whose two
// tiles differ is a transfer of its bytes from the `from` block's tile to the `to` block's.
// Pieces come in order of `to`'s blocks (position block outer, channel block inner), and
// within one, of `from`'s blocks likewise. One record stands for the up to hundreds of
// thousands of transfers of a compiled layout change (docs/trace-format.md §4.4).
struct Move {
  std::uint64_t positions = 0, channels = 0;
  std::uint32_t element_bytes = 2;
  BlockGrid from, to;

  static std::uint64_t blocks(std::uint64_t size, std::uint64_t per) {
    return (size + per - 1) / per;
  }
  static std::uint32_t tile(const BlockGrid& g, std::uint64_t p, std::uint64_t c,
                            std::uint64_t position_blocks, std::uint64_t channel_blocks) {
    const std::uint64_t b = g.channels_outer ? c * position_blocks + p : p * channel_blocks + c;
    return static_cast<std::uint32_t>(g.first_tile + b * g.tile_stride);
  }
  // The highest tile either grid uses (checked against 2^32 - 1 by check_structure).
  std::uint64_t last_tile() const;
  // Pieces, counting those whose two tiles are the same (which are not transfers): the cells
  // of the two grids' common refinement, in closed form.
  std::uint64_t cells() const;
  // Calls f(source tile, destination tile, bytes) for every transfer, in order.
  template <typename F>
  void for_each_piece(F&& f) const;
  // Each tile's share of the transfers, in time linear in the blocks, not the transfers (for
  // costing): to(tile, bytes received, transfers received, lowest and highest tile of the
  // blocks of `from` that its block meets) for every block of `to`, and from(tile, bytes sent,
  // transfers sent) for every block of `from`.
  template <typename To, typename From>
  void for_each_tile(To&& to_fn, From&& from_fn) const;
  bool operator==(const Move&) const = default;
};

// Limits check_structure puts on a move (v5): bytes per element, and pieces (Move::cells).
inline constexpr std::uint32_t kMaxElementBytes = 8;
inline constexpr std::uint64_t kMaxMoveCells = std::uint64_t{1} << 22;
// Why `m` is not a valid move (its fields' ranges, the tiles it reaches, its pieces), if it is
// not.
std::optional<std::string> move_problem(const Move& m);
// The tiles grid `g` of a valid move `m` spans (first to last block's tile).
TileRange move_tiles(const Move& m, const BlockGrid& g);

template <typename F>
void Move::for_each_piece(F&& f) const {
  const std::uint64_t to_pb = blocks(positions, to.positions_per_tile);
  const std::uint64_t to_cb = blocks(channels, to.chans_per_tile);
  const std::uint64_t from_pb = blocks(positions, from.positions_per_tile);
  const std::uint64_t from_cb = blocks(channels, from.chans_per_tile);
  // A grid's tile of block (p, c) is first_tile + p x step.first + c x step.second (tile()).
  const auto steps = [](const BlockGrid& g, std::uint64_t pb, std::uint64_t cb) {
    const std::uint64_t k = g.tile_stride;
    return g.channels_outer ? std::pair{k, pb * k} : std::pair{cb * k, k};
  };
  const auto [to_p, to_c] = steps(to, to_pb, to_cb);
  const auto [from_p, from_c] = steps(from, from_pb, from_cb);
  // One dimension: for block k of `to`, the blocks of `from` it meets (as their tile offset)
  // and the elements it shares with each, listed from start[k] to start[k + 1].
  struct Cut {
    std::vector<std::uint64_t> offset, size;
    std::vector<std::size_t> start;
  };
  const auto cut = [](std::uint64_t n, std::uint64_t to_per, std::uint64_t from_per,
                      std::uint64_t step) {
    Cut out;
    const std::uint64_t to_blocks = blocks(n, to_per);
    out.start.reserve(to_blocks + 1);
    for (std::uint64_t k = 0; k < to_blocks; ++k) {
      out.start.push_back(out.offset.size());
      const std::uint64_t lo = k * to_per, hi = std::min(n, lo + to_per);
      for (std::uint64_t j = lo / from_per; j * from_per < hi; ++j) {
        out.offset.push_back(j * step);
        out.size.push_back(std::min(hi, (j + 1) * from_per) - std::max(lo, j * from_per));
      }
    }
    out.start.push_back(out.offset.size());
    return out;
  };
  const Cut ps = cut(positions, to.positions_per_tile, from.positions_per_tile, from_p);
  const Cut cs = cut(channels, to.chans_per_tile, from.chans_per_tile, from_c);
  for (std::uint64_t p = 0; p < to_pb; ++p)
    for (std::uint64_t c = 0; c < to_cb; ++c) {
      const auto dst = static_cast<std::uint32_t>(to.first_tile + p * to_p + c * to_c);
      for (std::size_t i = ps.start[p]; i < ps.start[p + 1]; ++i) {
        const std::uint64_t row = from.first_tile + ps.offset[i];
        const std::uint64_t row_bytes = ps.size[i] * element_bytes;
        for (std::size_t j = cs.start[c]; j < cs.start[c + 1]; ++j) {
          const auto src = static_cast<std::uint32_t>(row + cs.offset[j]);
          if (src != dst) f(src, dst, row_bytes * cs.size[j]);
        }
      }
    }
}

template <typename To, typename From>
void Move::for_each_tile(To&& to_fn, From&& from_fn) const {
  struct Grid {
    const BlockGrid& g;
    std::uint64_t pb, cb;
    std::uint32_t tile(std::uint64_t p, std::uint64_t c) const {
      return Move::tile(g, p, c, pb, cb);
    }
    // The block on tile t, if one is (as (position block, channel block)).
    std::optional<std::pair<std::uint64_t, std::uint64_t>> block_on(std::uint32_t t) const {
      if (t < g.first_tile) return std::nullopt;
      std::uint64_t b = t - g.first_tile;
      if (g.tile_stride != 1) {
        if (b % g.tile_stride != 0) return std::nullopt;
        b /= g.tile_stride;
      }
      if (b >= pb * cb) return std::nullopt;
      return g.channels_outer ? std::pair{b % pb, b / pb} : std::pair{b / cb, b % cb};
    }
  };
  const Grid src{from, blocks(positions, from.positions_per_tile),
                 blocks(channels, from.chans_per_tile)};
  const Grid dst{to, blocks(positions, to.positions_per_tile), blocks(channels, to.chans_per_tile)};
  // One dimension of n elements cut into blocks of `per`, against the cut into blocks of
  // `other`: each block's size and the first and last block of the other cut it meets.
  struct Side {
    std::uint64_t n, per, other;
    std::vector<std::uint64_t> size, first, last;
    Side(std::uint64_t n_, std::uint64_t per_, std::uint64_t other_)
        : n(n_), per(per_), other(other_) {
      for (std::uint64_t k = 0; k * per < n; ++k) {
        const std::uint64_t lo = k * per, hi = std::min(n, lo + per);
        size.push_back(hi - lo);
        first.push_back(lo / other);
        last.push_back((hi - 1) / other);
      }
    }
    // Elements block k shares with block j of the other cut.
    std::uint64_t shared(std::uint64_t k, std::uint64_t j) const {
      const std::uint64_t lo = std::max(k * per, j * other);
      const std::uint64_t hi = std::min({n, (k + 1) * per, (j + 1) * other});
      return hi > lo ? hi - lo : 0;
    }
  };
  // A block's share: all its elements but those its tile keeps (the other grid's block on the
  // same tile, when that is one of the blocks it meets), one transfer per block met but that.
  const auto visit = [&](const Grid& self, const Grid& other, auto&& fn) {
    const Side sp(positions, self.g.positions_per_tile, other.g.positions_per_tile);
    const Side sc(channels, self.g.chans_per_tile, other.g.chans_per_tile);
    for (std::uint64_t p = 0; p < self.pb; ++p)
      for (std::uint64_t c = 0; c < self.cb; ++c) {
        const std::uint32_t t = self.tile(p, c);
        std::uint64_t bytes = sp.size[p] * sc.size[c] * element_bytes;
        std::uint64_t transfers = (sp.last[p] - sp.first[p] + 1) * (sc.last[c] - sc.first[c] + 1);
        if (const auto own = other.block_on(t);
            own && own->first >= sp.first[p] && own->first <= sp.last[p] &&
            own->second >= sc.first[c] && own->second <= sc.last[c]) {
          bytes -= sp.shared(p, own->first) * sc.shared(c, own->second) * element_bytes;
          --transfers;
        }
        // The other grid's tiles grow with both block indices, so those of the blocks met
        // lie between these two.
        fn(t, bytes, transfers, other.tile(sp.first[p], sc.first[c]),
           other.tile(sp.last[p], sc.last[c]));
      }
  };
  visit(dst, src, to_fn);
  visit(src, dst,
        [&](std::uint32_t t, std::uint64_t bytes, std::uint64_t transfers, std::uint32_t,
            std::uint32_t) { from_fn(t, bytes, transfers); });
}

// One stage of a staged reduce-scatter among groups of tiles (v6): the exchange that sends each
// owner of a chunk of partial sums its peers' partials of it (poplin's reduction of an
// input-channel split, docs/trace-format.md §4.5). A group is `members` tiles, member k on
// tile first + k x `member_step`, holding `elements` elements of `element_bytes` bytes each,
// cut into `members` chunks of ceil(elements / members) (the last ones smaller or empty).
// Member k owns the chunks c = k (mod stride x fan_in); it receives from the other members of
// its stage group, base + m x stride for m < inputs, where base is k with its stage digit
// (k / stride) mod fan_in set to 0 and inputs = min(fan_in, ceil((members - base) / stride)),
// one single-tile multicast transfer of its owned elements from each. Owners with nothing
// owned receive nothing. Transfers come in group order, then owner order, then sender order:
// one record stands for the thousands of transfers of a conv's reduction stage.
struct ReduceScatter {
  // `count` groups, group i's first member on tile first + i x step, each of `elements`.
  struct Groups {
    std::uint32_t first = 0;
    std::uint32_t step = 0;
    std::uint32_t count = 1;
    std::uint64_t elements = 1;
    bool operator==(const Groups&) const = default;
  };
  std::uint32_t members = 2;
  std::uint32_t member_step = 1;
  std::uint32_t fan_in = 2;
  std::uint32_t stride = 1;
  std::uint32_t element_bytes = 2;
  std::vector<Groups> groups;

  // The stage's ownership modulus: member k owns the chunks c = k (mod span()).
  std::uint64_t span() const { return std::uint64_t{stride} * fan_in; }
  // A group of `elements` cut into chunks of `size`: `whole` full chunks per residue mod
  // span(), one more for residues below `part`, and the last partial chunk of `rest` elements
  // at residue `part`.
  struct Chunks {
    std::uint64_t size = 0, whole = 0, part = 0, rest = 0;
    // Elements the members of residue `r` own (0: they receive nothing).
    std::uint64_t owned(std::uint64_t r) const {
      return size * (whole + (r < part ? 1 : 0)) + (rest != 0 && r == part ? rest : 0);
    }
  };
  Chunks chunks(std::uint64_t elements) const {
    const std::uint64_t size = (elements + members - 1) / members;
    const std::uint64_t full = elements / size;
    return {size, full / span(), full % span(), elements - full * size};
  }
  // Elements member k owns after the stage in a group of `elements` (0: it receives nothing).
  std::uint64_t owned(std::uint64_t elements, std::uint32_t k) const {
    return chunks(elements).owned(k % span());
  }
  // Member k's stage group: its first member and its number of members.
  std::pair<std::uint64_t, std::uint64_t> stage_group(std::uint32_t k) const {
    const std::uint64_t base = k - (k / stride) % fan_in * std::uint64_t{stride};
    const std::uint64_t inputs =
        std::min<std::uint64_t>(fan_in, (members - base + stride - 1) / stride);
    return {base, inputs};
  }
  // An upper bound of the transfers: groups x members x (min(fan_in, members) - 1).
  std::uint64_t transfer_bound() const;
  // The highest tile a run of groups reaches, and any group (checked against 2^32 - 1 by
  // check_structure).
  std::uint64_t last_tile(const Groups& g) const;
  std::uint64_t last_tile() const;
  // Calls f(source tile, destination tile, bytes) for every transfer, in order.
  template <typename F>
  void for_each_piece(F&& f) const;
  // Each member's share of the transfers, in time linear in the members, not the transfers
  // (for costing): f(tile, bytes received, transfers received, lowest and highest tile of its
  // stage group, bytes sent, transfers sent) for every member of every group.
  template <typename F>
  void for_each_tile(F&& f) const;
  bool operator==(const ReduceScatter&) const = default;
};

// The most transfers check_structure lets a reduce-scatter stand for (transfer_bound).
inline constexpr std::uint64_t kMaxReduceScatterTransfers = std::uint64_t{1} << 22;
// Why `r` is not a valid reduce-scatter (its fields' ranges, the tiles it reaches, its
// transfers), if it is not.
std::optional<std::string> reduce_scatter_problem(const ReduceScatter& r);

template <typename F>
void ReduceScatter::for_each_piece(F&& f) const {
  for (const Groups& g : groups)
    for (std::uint32_t i = 0; i < g.count; ++i) {
      const std::uint64_t first = g.first + std::uint64_t{i} * g.step;
      const auto tile = [&](std::uint64_t k) {
        return static_cast<std::uint32_t>(first + k * member_step);
      };
      for (std::uint32_t k = 0; k < members; ++k) {
        const std::uint64_t n = owned(g.elements, k);
        if (n == 0) continue;
        const auto [base, inputs] = stage_group(k);
        for (std::uint64_t m = 0; m < inputs; ++m)
          if (base + m * stride != k) f(tile(base + m * stride), tile(k), n * element_bytes);
      }
    }
}

template <typename F>
void ReduceScatter::for_each_tile(F&& f) const {
  // owned() and stage_group() with their divisions done once: per member, its residue and
  // stage group; per group run, its chunks.
  std::vector<std::uint64_t> residue(members), base(members), inputs(members), n(members);
  for (std::uint32_t k = 0; k < members; ++k) {
    residue[k] = k % span();
    std::tie(base[k], inputs[k]) = stage_group(k);
  }
  // Per stage group (indexed by its first member): the elements its owners own, and its owners.
  std::vector<std::uint64_t> group_owned(members), group_owners(members);
  for (const Groups& g : groups) {
    const Chunks c = chunks(g.elements);
    std::fill(group_owned.begin(), group_owned.end(), 0);
    std::fill(group_owners.begin(), group_owners.end(), 0);
    for (std::uint32_t k = 0; k < members; ++k) {
      n[k] = c.owned(residue[k]);
      if (n[k] != 0) {
        group_owned[base[k]] += n[k];
        ++group_owners[base[k]];
      }
    }
    for (std::uint32_t i = 0; i < g.count; ++i) {
      const std::uint64_t first = g.first + std::uint64_t{i} * g.step;
      const auto tile = [&](std::uint64_t k) {
        return static_cast<std::uint32_t>(first + k * member_step);
      };
      for (std::uint32_t k = 0; k < members; ++k) {
        if (inputs[k] < 2) continue;  // alone in its stage group: no transfer
        const std::uint64_t peers = inputs[k] - 1;
        f(tile(k), n[k] * peers * element_bytes, n[k] != 0 ? peers : 0, tile(base[k]),
          tile(base[k] + (inputs[k] - 1) * stride), (group_owned[base[k]] - n[k]) * element_bytes,
          group_owners[base[k]] - (n[k] != 0 ? 1 : 0));
      }
    }
  }
}

struct Exchange {
  std::string name;
  std::vector<Transfer> transfers;  // runs (v3), in order
  // Destination ranges of all transfers, back to back in transfer order with no gaps (as add()
  // builds it; check_structure enforces this so that files round-trip exactly). A run stores
  // the destination ranges of its first transfer.
  std::vector<TileRange> dst_pool;
  Provenance provenance;  // v3
  // Rearrangements (v5): their transfers follow the records' (for_each visits them in order).
  std::vector<Move> moves;
  // Reduce-scatter stages (v6): their transfers follow the moves'.
  std::vector<ReduceScatter> reduce_scatters;

  bool empty() const { return transfers.empty() && moves.empty() && reduce_scatters.empty(); }

  std::span<const TileRange> destinations(const Transfer& t) const {
    return {dst_pool.data() + t.dst_first, t.dst_count};
  }
  // Appends one transfer, merged into runs as transfers arrive (docs/trace-format.md §4.2):
  // it extends the last run if it continues it; the last two single transfers and it become a
  // run if the three are affine; else it is a single transfer. Inline for one destination
  // range (what compiled programs add millions of); add_general holds the rule for any.
  void add(TileRange src, std::span<const TileRange> dst, std::uint64_t bytes,
           TransferMode mode = TransferMode::kMulticast) {
    if (dst.size() != 1 || transfers.empty() ||
        dst_pool.size() >= std::numeric_limits<std::uint32_t>::max()) {
      add_general(src, dst, bytes, mode);
      return;
    }
    using I = std::int64_t;
    const TileRange to = dst[0];
    Transfer& last = transfers.back();
    if (last.count >= 2) {
      const I k = last.count;
      const TileRange d = dst_pool[last.dst_first];
      if (last.dst_count == 1 && last.mode == mode &&
          last.count < std::numeric_limits<std::uint32_t>::max() &&
          I{src.first} == last.src.first + k * last.src_step &&
          I{src.last} == last.src.last + k * last.src_step &&
          static_cast<I>(bytes) == static_cast<I>(last.bytes) + k * last.bytes_step &&
          I{to.first} == d.first + k * last.dst_step && I{to.last} == d.last + k * last.dst_step) {
        ++last.count;
        return;
      }
    } else if (transfers.size() >= 2 && last.dst_count == 1) {
      Transfer& a = transfers[transfers.size() - 2];
      if (a.count == 1 && a.dst_count == 1 && a.mode == mode && last.mode == mode) {
        const TileRange da = dst_pool[a.dst_first], db = dst_pool[last.dst_first];
        const I s = I{last.src.first} - a.src.first, d = I{db.first} - da.first;
        const I b = static_cast<I>(last.bytes) - static_cast<I>(a.bytes);
        if (I{last.src.last} == a.src.last + s && I{db.last} == da.last + d &&
            I{src.first} == a.src.first + 2 * s && I{src.last} == a.src.last + 2 * s &&
            static_cast<I>(bytes) == static_cast<I>(a.bytes) + 2 * b &&
            I{to.first} == da.first + 2 * d && I{to.last} == da.last + 2 * d) {
          dst_pool.pop_back();
          transfers.pop_back();
          a.count = 3;
          a.src_step = s;
          a.dst_step = d;
          a.bytes_step = b;
          return;
        }
      }
    }
    Transfer t;
    t.src = src;
    t.dst_first = static_cast<std::uint32_t>(dst_pool.size());
    t.dst_count = 1;
    t.bytes = bytes;
    t.mode = mode;
    dst_pool.push_back(to);
    transfers.push_back(t);
  }
  // add() for any destination ranges.
  void add_general(TileRange src, std::span<const TileRange> dst, std::uint64_t bytes,
                   TransferMode mode);
  // Appends a run of `count` transfers (count >= 1; steps must be 0 when count is 1).
  void add_run(TileRange src, std::span<const TileRange> dst, std::uint64_t bytes,
               TransferMode mode, std::uint32_t count, std::int64_t src_step, std::int64_t dst_step,
               std::int64_t bytes_step);
  // Number of transfers (the runs expanded).
  std::uint64_t transfer_count() const;
  // Calls f(const TransferView&) for every transfer in order, the runs expanded on the fly
  // (destination ranges of a run with a destination step are shifted into a scratch buffer).
  template <typename F>
  void for_each(F&& f) const {
    std::vector<TileRange> scratch;
    for (const Transfer& t : transfers) {
      const auto dsts = destinations(t);
      if (t.count == 1) {
        f(TransferView{t.src, dsts, t.bytes, t.mode});
        continue;
      }
      if (t.dst_step != 0) scratch.resize(dsts.size());
      for (std::uint32_t i = 0; i < t.count; ++i) {
        std::span<const TileRange> d = dsts;
        if (t.dst_step != 0) {
          for (std::size_t k = 0; k < dsts.size(); ++k)
            scratch[k] = {Transfer::shift(dsts[k].first, t.dst_step, i),
                          Transfer::shift(dsts[k].last, t.dst_step, i)};
          d = scratch;
        }
        f(TransferView{t.src_at(i), d, t.bytes_at(i), t.mode});
      }
    }
    // A move's or reduce-scatter's piece: a single-tile multicast transfer.
    const auto piece = [&](std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) {
      const TileRange to{dst, dst};
      f(TransferView{TileRange{src, src}, {&to, 1}, bytes, TransferMode::kMulticast});
    };
    for (const Move& m : moves) m.for_each_piece(piece);
    for (const ReduceScatter& r : reduce_scatters) r.for_each_piece(piece);
  }
  bool operator==(const Exchange&) const = default;
};

enum class StepKind : std::uint8_t {
  kCompute = 0,
  kSync,
  kExchange,
  kHost,
  kRepeat,  // v1
  kGlobalExchange,
  kCollective,  // v2
};
enum class HostDirection : std::uint8_t { kToIpu = 0, kFromIpu = 1 };
inline constexpr std::array<std::string_view, 2> kHostDirectionNames{"to_ipu", "from_ipu"};

// Where host-step data lives: the host server (over the host link) or Streaming Memory
// (the gateway's DDR).
enum class HostMemory : std::uint8_t { kHost = 0, kStreaming = 1 };
inline constexpr std::array<std::string_view, 2> kHostMemoryNames{"host", "streaming"};

// The IPUs a sync or collective involves, relative to the IPU running the step. With P
// programs per replica and R replicas, program i of replica r runs on system IPU r x P + i.
//  kTile:     no other IPU: an internal (on-chip) sync;
//  kReplica:  the P IPUs of this replica (e.g. the stages of a pipeline), or, with size K > 0,
//             K of them `stride` S apart: program i's set in its block of K x S consecutive
//             programs (S = 1: K consecutive programs; e.g. the two groups of 2-D tensor
//             parallelism, popxl GPT-3 175B's TP2 `replica:8` and TP1 `replica:8/8`);
//  kAll:      every IPU of every replica;
//  kReplicas: program i in every replica (the data-parallel group), or, with size K > 0,
//             in each consecutive group of K replicas (e.g. ResNet's batch-norm groups of 2).
enum class GroupKind : std::uint8_t { kTile = 0, kReplica, kAll, kReplicas };
inline constexpr std::array<std::string_view, 4> kGroupKindNames{"tile", "replica", "all",
                                                                 "replicas"};
struct Group {
  GroupKind kind = GroupKind::kTile;
  std::uint32_t size = 0;    // kReplicas: replicas per group; kReplica: IPUs per group; 0 = all
  std::uint32_t stride = 0;  // kReplica with a size: programs between members (>= 1); else 0
  bool operator==(const Group&) const = default;
};
// As the text form writes it: "replica", "replicas:2", "replica:8/8".
std::string group_name(Group g);

enum class CollectiveOp : std::uint8_t { kAllReduce = 0, kReduceScatter, kAllGather, kBroadcast };
inline constexpr std::array<std::string_view, 4> kCollectiveOpNames{"all_reduce", "reduce_scatter",
                                                                    "all_gather", "broadcast"};

// Collective algorithms (docs/topology.md): auto picks the fastest for the size and group.
enum class CollectiveMethod : std::uint8_t {
  kAuto = 0,
  kRing,
  kBidirectionalRing,
  kQuadRing,
  kBroadcastReduce,
};
inline constexpr std::array<std::string_view, 5> kCollectiveMethodNames{
    "auto", "ring", "bidirectional_ring", "quad_ring", "broadcast_reduce"};

// One node of the program tree.
//  kCompute:        run compute set `index`;
//  kSync:           BSP sync: internal (group tile) or external over `group`;
//  kExchange:       run exchange `index`;
//  kHost:           stream `bytes` per tile of `tiles` between `memory` and IPU in `direction`
//                   (in the background if `overlap`);
//  kRepeat:         run `body` `count` times;
//  kGlobalExchange: take part in the trace's global exchange `index` (inter-IPU copies);
//  kCollective:     `collective` of a `bytes` tensor of `dtype` over `group` by `method`.
struct Step {
  StepKind kind = StepKind::kSync;
  std::uint32_t index = 0;
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
  TileRange tiles;
  HostDirection direction = HostDirection::kToIpu;
  std::vector<Step> body;
  Group group;
  HostMemory memory = HostMemory::kHost;
  CollectiveOp collective = CollectiveOp::kAllReduce;
  CollectiveMethod method = CollectiveMethod::kAuto;
  DType dtype = DType::kHalf;
  // kHost only: the transfer runs in the background on I/O tiles (prefetch); the program
  // waits for it only when it issues the next background transfer before this one is done.
  bool overlap = false;
  // kHost and kCollective (v3): where the step comes from. Compute sets, exchanges and global
  // exchanges carry their own; a kCompute or kExchange step (v4) may set provenance.pass alone
  // (layers and op empty): the pass it runs its compute set or exchange in when that differs
  // from the item's own (a recomputation running the forward pass's compute sets).
  Provenance provenance;
  // The pass a kCompute or kExchange step runs in: its own pass if set, else `item`'s.
  trace::Pass pass_of(const Provenance& item) const {
    return provenance.pass != Pass::kNone ? provenance.pass : item.pass;
  }
  bool operator==(const Step&) const = default;
};

// A copy of `bytes` from IPU `src` to IPU `dst` of the same replica (program indices).
struct IpuCopy {
  std::uint32_t src = 0;
  std::uint32_t dst = 0;
  std::uint64_t bytes = 0;
  bool operator==(const IpuCopy&) const = default;
};

// Inter-IPU copies run together after an external sync of the IPUs they involve; every
// source and destination IPU has a kGlobalExchange step for it.
struct GlobalExchange {
  std::string name;
  std::vector<IpuCopy> copies;
  Provenance provenance;  // v3
  bool operator==(const GlobalExchange&) const = default;
};

struct IpuProgram {
  std::uint32_t ipu = 0;
  std::vector<Tensor> tensors;
  std::vector<ComputeSet> compute_sets;
  std::vector<Exchange> exchanges;
  std::vector<Step> steps;
  bool operator==(const IpuProgram&) const = default;
};

// The number of program positions of `steps` (see Lifetime), saturating at 2^64-1.
std::uint64_t program_positions(const std::vector<Step>& steps);

// A trace's workload facts, (key, value) in order; keys are unique (check_structure).
using Meta = std::vector<std::pair<std::string, std::string>>;
// The value of `key` in `meta`, or null.
const std::string* find_meta(const Meta& meta, std::string_view key);

struct Trace {
  std::uint32_t version = kFormatVersion;
  std::string name;
  std::uint32_t replicas = 1;  // data-parallel copies of the programs below
  // Facts about the workload for reports (e.g. samples_per_step, sample_unit), as names.
  Meta meta;
  std::vector<GlobalExchange> global_exchanges;
  std::vector<IpuProgram> ipus;
  // IPUs per replica: programs are indexed 0..P-1 by their `ipu` field.
  std::uint32_t ipus_per_replica() const;
  // True if any step needs a system (external sync, global exchange, collective).
  bool uses_system() const;
  bool operator==(const Trace&) const = default;
};

// What is wrong with a run (v3) if anything, e.g. "steps tile range 5..5 by -1 over 7 copies,
// past the tile indices 0..4294967295": a count of 0, steps on a single record, or a member
// whose tiles leave 0..2^32-1 or whose bytes leave 0..kMaxCount.
std::optional<std::string> run_problem(const Vertex& v);
std::optional<std::string> run_problem(const Transfer& t, std::span<const TileRange> dst);

// Merges consecutive transfers of each exchange and consecutive vertices of each compute set
// into runs (the canonical run form: the same transfers and vertex instances in the same
// order, docs/trace-format.md §4.2). Idempotent; a trace and its coalesced form simulate
// identically. The compiler calls it on its result. An exchange's moves and reduce-scatters
// stay as they are.
void coalesce(Exchange& exchange);
void coalesce(ComputeSet& compute_set);
void coalesce(Trace& trace);
// The inverse: every run written out as count-1 records, and every move and reduce-scatter as
// its transfers (for tests and the reference engine).
Exchange expanded(const Exchange& exchange);
ComputeSet expanded(const ComputeSet& compute_set);

// Structural checks that do not need a chip: indices in range, tile ranges ordered, codelet
// parameters within the catalogue's bounds, names valid and unique per IPU, counts and sizes
// <= kMaxCount, repeat nesting <= kMaxRepeatDepth, fields a step's kind does not use left at
// their defaults. Throws TraceError "<origin>: <item>: <problem>".
void check_structure(const Trace& trace, const std::string& origin);
// check_structure for the readers: the same checks except the per-transfer destination
// overlap test (first_shared_tile), which every reader makes as it reads each transfer.
void check_structure_after_read(const Trace& trace, const std::string& origin);
// For a run: a program that syncs or reduces over groups of IPUs needs a section for every IPU
// of a replica, 0 to its highest (a missing one shrank the replica's groups silently: issue 30,
// defect 12). Throws TraceError naming the missing IPU.
void check_ipu_sections(const Trace& trace, const std::string& origin);

// Checks against a chip's tile count; throws TraceError naming the first item with a tile out
// of range, e.g. "<origin>: compute set 'mm' vertex 3 uses tile 1500 but the chip has 1472
// tiles" (items are prefixed "ipu N " when the trace has several IPUs). Call it on a trace that
// passed check_structure.
void check_tiles(const Trace& trace, std::uint32_t tile_count, const std::string& origin);

}  // namespace ipusim::trace
