// SPDX-License-Identifier: Apache-2.0
// Exchange, host-copy and memory costs against hand-computed values (GC200: 4 B/cycle/tile,
// super-tile pairs, 100-cycle exchange overhead, 46 tiles per column, 1 cycle per column).
#include "ipusim/cost/program_costs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "ipusim/util/error.hpp"
#include "test_chips.hpp"

namespace ipusim::cost {
namespace {

using trace::TileRange;

trace::Exchange one(std::uint32_t src, TileRange dst, std::uint64_t bytes,
                    trace::TransferMode mode = trace::TransferMode::kMulticast) {
  trace::Exchange ex;
  ex.name = "x";
  ex.add(TileRange{src, src}, {&dst, 1}, bytes, mode);
  return ex;
}

TEST(ExchangeCost, OneMiBIntoOneTile) {
  // §5: a 1 MiB exchange into one tile takes 1048576 / 4 = 262144 cycles (+ 100 fixed).
  const ChipSpec chip = testing::gc200_by_hand();
  const auto c = exchange_cost(chip, one(0, {3, 3}, 1 << 20));
  EXPECT_EQ(c.transfer_cycles, 262144u);
  EXPECT_EQ(c.latency_cycles, 0u);  // tiles 0 and 3 share column 0
  EXPECT_EQ(c.cycles, 262244u);
  EXPECT_EQ(c.tile_bytes[0], 1u << 20);
  EXPECT_EQ(c.tile_bytes[3], 1u << 20);
}

TEST(ExchangeCost, SuperTilePairReceivesSameDataAtTwiceTheRate) {
  const ChipSpec chip = testing::gc200_by_hand();
  // Two senders (tiles 0 and 1) each multicast 1 MiB.
  trace::Exchange pair;
  const TileRange both{2, 3};
  pair.add({0, 0}, {&both, 1}, 1 << 20);
  pair.add({1, 1}, {&both, 1}, 1 << 20);
  // Tiles 2 and 3 form a super-tile and both receive: 2 MiB at 8 B/cycle = 262144 cycles,
  // equal to each sender's 1 MiB at 4 B/cycle.
  EXPECT_EQ(exchange_cost(chip, pair).transfer_cycles, 262144u);
  trace::Exchange single;
  const TileRange lone{2, 2};
  single.add({0, 0}, {&lone, 1}, 1 << 20);
  single.add({1, 1}, {&lone, 1}, 1 << 20);
  // Tile 2 alone: 2 MiB at 4 B/cycle.
  EXPECT_EQ(exchange_cost(chip, single).transfer_cycles, 524288u);
  // A pair split across super-tiles (3 and 4) gets no doubling.
  trace::Exchange split;
  const TileRange straddle{3, 4};
  split.add({0, 0}, {&straddle, 1}, 1 << 20);
  split.add({1, 1}, {&straddle, 1}, 1 << 20);
  EXPECT_EQ(exchange_cost(chip, split).transfer_cycles, 524288u);
}

TEST(ExchangeCost, PersonalisedAllToAll) {
  const ChipSpec chip = testing::gc200_by_hand();
  const TileRange all{0, 91};  // two columns of 46
  trace::Exchange ex;
  ex.add(all, {&all, 1}, 256, trace::TransferMode::kPersonalised);
  const auto c = exchange_cost(chip, ex);
  // Each tile sends and receives 91 x 256 B = 23296 B at 4 B/cycle = 5824 cycles.
  EXPECT_EQ(c.transfer_cycles, 5824u);
  EXPECT_EQ(c.latency_cycles, 1u);  // column 0 to column 1
  EXPECT_EQ(c.cycles, 100u + 5824u + 1u);
  EXPECT_EQ(c.total_bytes, 92u * 91u * 256u);
}

TEST(ExchangeCost, ColumnLatencyAcrossTheChip) {
  const ChipSpec chip = testing::gc200_by_hand();
  // Tile 1471 is in column 1471 / 46 = 31.
  const auto c = exchange_cost(chip, one(0, {1471, 1471}, 4));
  EXPECT_EQ(c.latency_cycles, 31u);
  EXPECT_EQ(c.cycles, 100u + 1u + 31u);
}

TEST(ExchangeCost, AllToAllNeverBeatsFourBytesPerCyclePerTile) {
  const ChipSpec chip = testing::gc200_by_hand();
  for (std::uint32_t tiles : {8u, 64u, 1472u}) {
    const TileRange all{0, tiles - 1};
    trace::Exchange ex;
    ex.add(all, {&all, 1}, 1024, trace::TransferMode::kPersonalised);
    const auto c = exchange_cost(chip, ex);
    const double rate = static_cast<double>(c.total_bytes) / static_cast<double>(c.cycles) / tiles;
    EXPECT_LE(rate, 4.0) << tiles;
    EXPECT_GT(rate, 3.0) << tiles;  // and large transfers come close to it
  }
}

// Runs are costed transfer by transfer (the fast path takes a run whole); reusing one
// ExchangeScratch, across exchanges, chips and a costing that threw, gives the same results.
TEST(ExchangeCost, RunsAndScratchGiveTheResultsOfSingleTransfers) {
  const ChipSpec chip = testing::gc200_by_hand();
  trace::Exchange ex;
  ex.name = "runs";
  const TileRange pair{10, 11}, wide{40, 47}, one_tile{50, 50}, two[2] = {{60, 61}, {64, 67}};
  const auto multicast = trace::TransferMode::kMulticast;
  // Single sources into one range: a source step, a bytes step, a source inside the range.
  ex.add_run({0, 0}, {&pair, 1}, 100, multicast, 5, 2, 0, 0);
  ex.add_run({41, 41}, {&wide, 1}, 7, multicast, 4, 1, 0, 13);
  ex.add_run({1, 1}, {&one_tile, 1}, 4096, multicast, 3, 50, 0, -1000);
  // A destination step, a source range, several ranges, personalised runs.
  ex.add_run({2, 2}, {&pair, 1}, 64, multicast, 4, 1, 2, 0);
  ex.add_run({90, 92}, {&wide, 1}, 33, multicast, 2, 3, 0, 1);
  ex.add_run({3, 3}, {two, 2}, 12, multicast, 3, 1, 8, 4);
  ex.add_run({100, 103}, {&wide, 1}, 8, trace::TransferMode::kPersonalised, 3, 4, 0, 8);
  ex.add({5, 5}, {&wide, 1}, 1000);
  // Runs of identical copies (no tile step), costed in closed form: one source, a source
  // range, a bytes step, personalised.
  ex.add_run({6, 6}, {&wide, 1}, 24, multicast, 5, 0, 0, 0);
  ex.add_run({70, 73}, {two, 2}, 16, multicast, 3, 0, 0, 8);
  ex.add_run({104, 107}, {&wide, 1}, 8, trace::TransferMode::kPersonalised, 4, 0, 0, 0);
  const trace::Exchange flat = trace::expanded(ex);
  ASSERT_EQ(flat.transfers.size(), ex.transfer_count());

  trace::IpuProgram program;
  const auto same = [&](const ExchangeCost& a, const ExchangeCost& b) {
    EXPECT_EQ(a.cycles, b.cycles);
    EXPECT_EQ(a.transfer_cycles, b.transfer_cycles);
    EXPECT_EQ(a.latency_cycles, b.latency_cycles);
    EXPECT_EQ(a.total_bytes, b.total_bytes);
    EXPECT_EQ(a.busiest_tile, b.busiest_tile);
    EXPECT_EQ(a.tile_bytes, b.tile_bytes);
  };
  MemoryMap flat_code = memory_map(chip, program, false);
  const ExchangeCost expected = exchange_cost(chip, flat, &flat_code);
  MemoryMap code = memory_map(chip, program, false);
  same(exchange_cost(chip, ex, &code), expected);
  for (std::uint32_t t = 0; t < chip.tiles; ++t)
    EXPECT_EQ(code.tiles[t].exchange_code, flat_code.tiles[t].exchange_code) << t;

  ExchangeScratch scratch;
  same(exchange_cost(chip, ex, nullptr, scratch), expected);
  trace::Exchange bad;
  bad.name = "bad";
  const TileRange past{1470, 1472};
  bad.add({0, 0}, {&wide, 1}, 8);
  bad.add({1, 1}, {&past, 1}, 8);
  EXPECT_THROW(exchange_cost(chip, bad, nullptr, scratch), TraceError);
  ChipSpec small = chip;
  small.tiles = 128;
  same(exchange_cost(small, ex, nullptr, scratch), exchange_cost(small, flat));
  MemoryMap again = memory_map(chip, program, false);
  same(exchange_cost(chip, ex, &again, scratch), expected);
  for (std::uint32_t t = 0; t < chip.tiles; ++t)
    EXPECT_EQ(again.tiles[t].exchange_code, flat_code.tiles[t].exchange_code) << t;
}

// The rule of program_costs.hpp applied tile by tile, straight from its words, with no
// shared code: each tile's bytes sent and its receive time, summed over every transfer of
// every run. exchange_cost adds over tile ranges and strides instead; on random exchanges
// (several ranges that touch, senders inside and beside their ranges, runs stepping either
// way, personalised blocks to their own tiles) both give the same cycles, busiest tile,
// bytes and exchange code (with fresh buffers and with one ExchangeScratch reused over the
// rounds), and memory_map the same exchange code.
struct TileByTile {
  std::uint64_t transfer_cycles = 0, total_bytes = 0;
  std::vector<std::uint64_t> tile_bytes, transfers;
};
TileByTile tile_by_tile(const ChipSpec& chip, const trace::Exchange& ex) {
  const std::uint32_t n = chip.tiles, group = chip.exchange.tiles_per_shared_bus;
  const double rate = chip.exchange.bytes_per_cycle.value;
  std::vector<std::uint64_t> sent(n, 0);
  std::vector<double> receive(n, 0.0);
  TileByTile out;
  out.tile_bytes.assign(n, 0);
  out.transfers.assign(n, 0);
  ex.for_each([&](const trace::TransferView& tr) {
    const auto is_dst = [&](std::uint32_t t) {
      for (const auto& d : tr.dst)
        if (d.contains(t)) return true;
      return false;
    };
    for (std::uint32_t t = tr.src.first; t <= tr.src.last; ++t) ++out.transfers[t];
    for (const auto& d : tr.dst)
      for (std::uint32_t t = d.first; t <= d.last; ++t) ++out.transfers[t];
    for (std::uint32_t s = tr.src.first; s <= tr.src.last; ++s) {
      for (std::uint32_t t = 0; t < n; ++t) {
        if (t == s || !is_dst(t)) continue;
        const std::uint32_t g0 = t - t % group;
        bool whole = tr.mode == trace::TransferMode::kMulticast && g0 + group <= n &&
                     !(s >= g0 && s < g0 + group);
        for (std::uint32_t g = g0; whole && g < g0 + group; ++g) whole = is_dst(g);
        receive[t] += static_cast<double>(tr.bytes) / (rate * (whole ? group : 1));
        out.tile_bytes[t] += tr.bytes;
        out.total_bytes += tr.bytes;
        if (tr.mode == trace::TransferMode::kPersonalised) sent[s] += tr.bytes;
      }
      if (tr.mode == trace::TransferMode::kMulticast) sent[s] += tr.bytes;
    }
  });
  for (std::uint32_t t = 0; t < n; ++t) {
    out.tile_bytes[t] += sent[t];
    const double busy = std::max(static_cast<double>(sent[t]) / rate, receive[t]);
    out.transfer_cycles = std::max(out.transfer_cycles, ceil_cycles(busy).count);
  }
  return out;
}

TEST(ExchangeCost, RangesAndStridesGiveTheRuleTileByTile) {
  ChipSpec chip = testing::gc200_by_hand();
  chip.tiles = 96;  // small enough to check every tile against every transfer
  std::uint64_t seed = 12345;
  const auto next = [&](std::uint64_t below) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % below;
  };
  const std::uint32_t n = chip.tiles;
  ExchangeScratch scratch;  // one for every round, as a program's exchanges share one
  for (int round = 0; round < 300; ++round) {
    trace::Exchange ex;
    ex.name = "random";
    const int transfers = 1 + static_cast<int>(next(6));
    for (int k = 0; k < transfers; ++k) {
      const auto mode =
          next(4) == 0 ? trace::TransferMode::kPersonalised : trace::TransferMode::kMulticast;
      // Up to three destination ranges, in any order, touching or apart.
      std::vector<TileRange> dst;
      std::uint32_t at = static_cast<std::uint32_t>(next(n / 2));
      const std::size_t ranges = 1 + next(3);
      for (std::size_t r = 0; r < ranges && at < n; ++r) {
        const auto len = static_cast<std::uint32_t>(1 + next(6));
        const TileRange d{at, std::min(n - 1, at + len - 1)};
        dst.push_back(d);
        at = d.last + 1 + static_cast<std::uint32_t>(next(3));  // 0: the next range touches
      }
      if (next(2) == 0) std::reverse(dst.begin(), dst.end());
      const std::uint32_t count = 1 + static_cast<std::uint32_t>(next(12));
      const std::uint32_t src_len = next(3) == 0 ? 1 + static_cast<std::uint32_t>(next(3)) : 1;
      const std::int64_t src_step = static_cast<std::int64_t>(next(9)) - 4;  // -4 .. 4
      // Sources near the destinations, so that some send from inside them.
      std::int64_t first = dst.front().first + static_cast<std::int64_t>(next(9)) - 4;
      const std::int64_t last_first = first + (count - 1) * src_step;
      if (std::min(first, last_first) < 0) first -= std::min(first, last_first);
      if (std::max(first, last_first) + src_len > n)
        first -= std::max(first, last_first) + src_len - n;
      // A destination stepping either way (a rearrangement's runs of one-tile copies).
      std::int64_t dst_step =
          dst.size() == 1 && next(3) == 0 ? static_cast<std::int64_t>(next(7)) - 3 : 0;
      if (dst.back().last + (count - 1) * dst_step >= n ||
          dst.front().first + (count - 1) * dst_step < 0)
        dst_step = 0;
      const std::int64_t bytes_step = next(3) == 0 ? static_cast<std::int64_t>(next(5)) : 0;
      const auto src = TileRange{static_cast<std::uint32_t>(first),
                                 static_cast<std::uint32_t>(first) + src_len - 1};
      // A block sent to its own tile is legal only personalised; multicast skips the sender.
      ex.add_run(src, dst, 4 * (1 + next(50)), mode, count, count > 1 ? src_step : 0,
                 count > 1 ? dst_step : 0, count > 1 ? bytes_step : 0);
    }
    const TileByTile want = tile_by_tile(chip, ex);
    trace::IpuProgram program;
    MemoryMap code = memory_map(chip, program, false);
    const ExchangeCost got = exchange_cost(chip, ex, &code);
    ASSERT_EQ(got.transfer_cycles, want.transfer_cycles) << "round " << round;
    ASSERT_EQ(got.total_bytes, want.total_bytes) << "round " << round;
    ASSERT_EQ(got.tile_bytes, want.tile_bytes) << "round " << round;
    MemoryMap code_again = memory_map(chip, program, false);
    const ExchangeCost again = exchange_cost(chip, ex, &code_again, scratch);
    ASSERT_EQ(again.transfer_cycles, want.transfer_cycles) << "round " << round;
    ASSERT_EQ(again.tile_bytes, want.tile_bytes) << "round " << round;
    // memory_map's exchange code, which adds the runs' ranges along their strides too.
    trace::IpuProgram with;
    with.exchanges.push_back(ex);
    const MemoryMap map = memory_map(chip, with);
    for (std::uint32_t t = 0; t < n; ++t) {
      const std::uint64_t bytes =
          want.transfers[t] * chip.runtime.exchange_code_bytes_per_transfer.count;
      ASSERT_EQ(code.tiles[t].exchange_code, bytes) << "round " << round << " tile " << t;
      ASSERT_EQ(code_again.tiles[t].exchange_code, bytes) << "round " << round << " tile " << t;
      ASSERT_EQ(map.tiles[t].exchange_code, bytes) << "round " << round << " tile " << t;
    }
  }
}

// A seeded linear congruential generator: next(n) is in 0..n-1, the same on every platform.
struct Lcg {
  std::uint64_t seed;
  std::uint64_t operator()(std::uint64_t below) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % below;
  }
};

// The hand-checked GC200 cut to four columns (184 tiles), with super-tile groups of `group`.
ChipSpec four_columns(std::uint32_t group) {
  ChipSpec chip = testing::gc200_by_hand();
  chip.tiles = 184;
  chip.exchange.tiles_per_shared_bus = group;
  return chip;
}

// `ex` (whose records include a structured one: a move or a reduce-scatter) costs as its
// transfers written out: the same cycles, bytes, busiest tile and exchange code, in the cost
// and in the memory map's own pass over a program holding it. Returns its cost.
ExchangeCost expect_costed_as_expanded(const ChipSpec& chip, const trace::Exchange& ex,
                                       ExchangeScratch& scratch, int round) {
  const trace::Exchange flat = trace::expanded(ex);
  EXPECT_TRUE(flat.moves.empty() && flat.reduce_scatters.empty());
  EXPECT_EQ(flat.transfers.size(), ex.transfer_count());
  trace::IpuProgram program;
  MemoryMap flat_code = memory_map(chip, program, false);
  MemoryMap code = memory_map(chip, program, false);
  const ExchangeCost expected = exchange_cost(chip, flat, &flat_code);
  const ExchangeCost got = exchange_cost(chip, ex, &code, scratch);
  EXPECT_EQ(got.cycles, expected.cycles) << round;
  EXPECT_EQ(got.transfer_cycles, expected.transfer_cycles);
  EXPECT_EQ(got.latency_cycles, expected.latency_cycles);
  EXPECT_EQ(got.total_bytes, expected.total_bytes);
  EXPECT_EQ(got.busiest_tile, expected.busiest_tile);
  EXPECT_EQ(got.tile_bytes, expected.tile_bytes);
  for (std::uint32_t t = 0; t < chip.tiles; ++t)
    EXPECT_EQ(code.tiles[t].exchange_code, flat_code.tiles[t].exchange_code) << t;
  program.exchanges.push_back(ex);
  const MemoryMap with_record = memory_map(chip, program, true);
  for (std::uint32_t t = 0; t < chip.tiles; ++t)
    EXPECT_EQ(with_record.tiles[t].exchange_code, flat_code.tiles[t].exchange_code) << t;
  return got;
}

// A move (trace format v5) costs exactly what its transfers cost one record each: cycles,
// bytes, busiest tile and exchange code, beside other records, on random grids (strides,
// either block order, blocks that divide each other or not, tiles shared by both grids), with
// super-tile pairs and without. Each tile's bytes are also checked element by element: an
// element whose block moves to another tile adds its bytes to both tiles.
TEST(ExchangeCost, MovesCostAsTheirTransfers) {
  Lcg next{777};
  for (const std::uint32_t group : {2u, 1u}) {
    const ChipSpec chip = four_columns(group);
    ExchangeScratch scratch;
    for (int round = 0; round < 200; ++round) {
      trace::Move m;
      m.positions = 1 + next(40);
      m.channels = 1 + next(40);
      m.element_bytes = next(2) == 0 ? 2 : 4;
      const auto grid = [&] {
        trace::BlockGrid g;
        g.positions_per_tile = 1 + next(m.positions);
        g.chans_per_tile = 1 + next(m.channels);
        g.tile_stride = 1 + static_cast<std::uint32_t>(next(3));
        g.channels_outer = next(2) == 0;
        const std::uint64_t blocks = trace::Move::blocks(m.positions, g.positions_per_tile) *
                                     trace::Move::blocks(m.channels, g.chans_per_tile);
        const std::uint64_t span = (blocks - 1) * g.tile_stride + 1;
        if (span > chip.tiles) {  // too many blocks for the chip: one block per tile
          g.positions_per_tile = m.positions;
          g.chans_per_tile = m.channels;
          return g;
        }
        g.first_tile = static_cast<std::uint32_t>(next(chip.tiles - span + 1));
        return g;
      };
      m.from = grid();
      m.to = grid();
      trace::Exchange ex;
      ex.name = "move";
      const TileRange d{5, 9};
      ex.add({0, 0}, {&d, 1}, 64);  // a transfer record beside the move
      ex.moves.push_back(m);
      const ExchangeCost got = expect_costed_as_expanded(chip, ex, scratch, round);

      // Element by element: the tile of an element's block in each grid.
      const auto tile_of = [&](const trace::BlockGrid& g, std::uint64_t p, std::uint64_t c) {
        const std::uint64_t pb = trace::Move::blocks(m.positions, g.positions_per_tile);
        const std::uint64_t cb = trace::Move::blocks(m.channels, g.chans_per_tile);
        const std::uint64_t bp = p / g.positions_per_tile, bc = c / g.chans_per_tile;
        return g.first_tile + (g.channels_outer ? bc * pb + bp : bp * cb + bc) * g.tile_stride;
      };
      std::vector<std::uint64_t> bytes(chip.tiles, 0);
      for (std::uint32_t t = 5; t <= 9; ++t) bytes[t] += 64;
      bytes[0] += 64;
      std::uint64_t moved = 0;
      for (std::uint64_t p = 0; p < m.positions; ++p)
        for (std::uint64_t c = 0; c < m.channels; ++c) {
          const std::uint64_t a = tile_of(m.from, p, c), b = tile_of(m.to, p, c);
          if (a == b) continue;
          bytes[a] += m.element_bytes;
          bytes[b] += m.element_bytes;
          moved += m.element_bytes;
        }
      EXPECT_EQ(got.tile_bytes, bytes) << round;
      EXPECT_EQ(got.total_bytes, 5 * 64 + moved);
    }
  }
  // A move past the chip's tiles is an error naming the exchange.
  const ChipSpec chip = testing::gc200_by_hand();
  trace::Exchange far;
  far.name = "far";
  far.moves.push_back({1, 2, 2, {0, 1, 1, 1, false}, {1471, 1, 1, 1, false}});
  try {
    (void)exchange_cost(chip, far);
    ADD_FAILURE() << "no error";
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()),
              "exchange 'far' moves a tensor over tiles up to 1472 but the chip has 1472 tiles");
  }
}

// A reduce-scatter costs as its transfers written out (trace::expanded), member sums and all,
// on random records (both bus groupings); and its tile bytes are those of a chunk-by-chunk
// count from the record's definition (docs/trace-format.md §4.5).
TEST(ExchangeCost, ReduceScattersCostAsTheirTransfers) {
  Lcg next{4242};
  for (const std::uint32_t group : {2u, 1u}) {
    const ChipSpec chip = four_columns(group);
    ExchangeScratch scratch;
    for (int round = 0; round < 300; ++round) {
      trace::ReduceScatter r;
      r.members = 2 + static_cast<std::uint32_t>(next(11));
      r.member_step = 1 + static_cast<std::uint32_t>(next(3));
      r.fan_in = 2 + static_cast<std::uint32_t>(next(r.members + 1));
      r.stride = 1 + static_cast<std::uint32_t>(next(r.members));
      r.element_bytes = next(2) == 0 ? 2 : 4;
      const std::uint64_t width = std::uint64_t{r.members - 1} * r.member_step + 1;
      for (std::uint64_t runs = 1 + next(3); runs > 0; --runs) {
        trace::ReduceScatter::Groups g;
        g.count = 1 + static_cast<std::uint32_t>(next(3));
        g.step = g.count == 1 ? 0 : static_cast<std::uint32_t>(next(40));
        g.elements = 1 + next(60);
        const std::uint64_t span = std::uint64_t{g.count - 1} * g.step + width;
        g.first = static_cast<std::uint32_t>(next(chip.tiles - span + 1));
        r.groups.push_back(g);
      }
      ASSERT_FALSE(trace::reduce_scatter_problem(r)) << round;
      trace::Exchange ex;
      ex.name = "reduce";
      const TileRange d{5, 9};
      ex.add({0, 0}, {&d, 1}, 64);  // a transfer record beside the reduce-scatter
      ex.reduce_scatters.push_back(r);
      const ExchangeCost got = expect_costed_as_expanded(chip, ex, scratch, round);

      // Chunk by chunk: every member of a stage group sends each other member the chunks
      // that member owns (chunk c is owned by the members k with c = k mod stride x fan_in).
      std::vector<std::uint64_t> bytes(chip.tiles, 0);
      for (std::uint32_t t = 5; t <= 9; ++t) bytes[t] += 64;
      bytes[0] += 64;
      std::uint64_t sent = 0;
      const std::uint64_t D = r.members, S = r.stride, f = r.fan_in;
      for (const auto& g : r.groups)
        for (std::uint64_t i = 0; i < g.count; ++i) {
          const std::uint64_t first = g.first + i * g.step;
          const std::uint64_t size = (g.elements + D - 1) / D;
          for (std::uint64_t k = 0; k < D; ++k)
            for (std::uint64_t s = 0; s < D; ++s) {
              // s and k meet in a stage group when they differ only in their stage digit.
              if (s == k || s / (S * f) != k / (S * f) || s % S != k % S) continue;
              for (std::uint64_t c = 0; c < D; ++c) {
                if (c % (S * f) != k % (S * f) || c * size >= g.elements) continue;
                const std::uint64_t n = std::min(size, g.elements - c * size) * r.element_bytes;
                bytes[first + s * r.member_step] += n;
                bytes[first + k * r.member_step] += n;
                sent += n;
              }
            }
        }
      EXPECT_EQ(got.tile_bytes, bytes) << round;
      EXPECT_EQ(got.total_bytes, 5 * 64 + sent);
    }
  }
  // A reduce-scatter past the chip's tiles is an error naming the exchange.
  const ChipSpec chip = testing::gc200_by_hand();
  trace::Exchange far;
  far.name = "far";
  trace::ReduceScatter r;
  r.groups.push_back({1470, 0, 1, 8});
  r.member_step = 2;
  far.reduce_scatters.push_back(r);
  try {
    (void)exchange_cost(chip, far);
    ADD_FAILURE() << "no error";
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()),
              "exchange 'far' reduces over tiles up to 1472 but the chip has 1472 tiles");
  }
}

TEST(ExchangeCost, ARunOfFourBillionCopiesIsCostedAtOnce) {
  // Issue 30, defect 5: a run of 2^32 - 1 copies was costed copy by copy (minutes). By hand,
  // the all-to-all of PersonalisedAllToAll repeated 4,294,967,295 times: each tile sends
  // 91 x 256 B per copy, 23,296 x 4,294,967,295 B in all, at 4 B/cycle.
  const ChipSpec chip = testing::gc200_by_hand();
  const TileRange all{0, 91};
  trace::Exchange ex;
  ex.name = "many";
  ex.add_run(all, {&all, 1}, 256, trace::TransferMode::kPersonalised, 4294967295u, 0, 0, 0);
  const std::uint64_t per_tile = 91ull * 256 * 4294967295ull;
  const auto c = exchange_cost(chip, ex);
  EXPECT_EQ(c.transfer_cycles, per_tile / 4);
  EXPECT_EQ(c.total_bytes, 92 * per_tile);
  // Its exchange code: one transfer's worth per copy on each source and destination tile.
  trace::IpuProgram program;
  MemoryMap code = memory_map(chip, program, false);
  (void)exchange_cost(chip, ex, &code);
  EXPECT_EQ(code.tiles[0].exchange_code,
            2 * 4294967295ull * chip.runtime.exchange_code_bytes_per_transfer.count);
  // More than 2^63 bytes is a model error naming the exchange, not a wrapped sum.
  trace::Exchange huge;
  huge.name = "huge";
  huge.add_run(all, {&all, 1}, std::uint64_t{1} << 40, trace::TransferMode::kPersonalised,
               4294967295u, 0, 0, 0);
  EXPECT_THROW(exchange_cost(chip, huge), ModelError);
}

TEST(HostCopyCost, LatencyPlusLinkOrTileLimit) {
  const ChipSpec chip = testing::gc200_by_hand();
  trace::Step s;
  s.kind = trace::StepKind::kHost;
  s.tiles = {0, 1471};
  s.bytes = 4096;
  const auto c = host_copy_cost(chip, s);
  // Link: 1472 x 4096 B / 32 GB/s = 188.416 us = 249651.2 cycles -> 249652; tile: 1024 cycles.
  // Latency 2 us = 2650 cycles.
  EXPECT_EQ(c.cycles, 2650u + 249652u);
  EXPECT_EQ(c.total_bytes, 1472u * 4096u);
  // The same rule over another link and latency (a system's gateway share, Fabric::host_cycles):
  // 1472 x 4096 B / 8 GB/s = 753.664 us = 998604.8 -> 998605 cycles, 5 us = 6625 cycles; and a
  // link too fast to matter leaves the tile's 4096 B / 4 B/cycle = 1024 cycles.
  EXPECT_EQ(host_transfer_cycles(chip, s, Bandwidth{8e9}, Duration{5e-6}), 6625u + 998605u);
  EXPECT_EQ(host_transfer_cycles(chip, s, Bandwidth{1e15}, Duration{0}), 1024u);
}

TEST(Memory, SumsTensorsStateCodeAndStack) {
  const ChipSpec chip = testing::gc200_by_hand();
  trace::IpuProgram p;
  p.tensors.push_back({"a", trace::TensorKind::kWeight, trace::DType::kHalf, {0, 3}, 1000});
  p.tensors.push_back({"b", trace::TensorKind::kActivation, trace::DType::kHalf, {2, 2}, 500});
  trace::ComputeSet cs{"cs", {}};
  cs.vertices.push_back({trace::Codelet::kCopy, {0, 1}, {}});
  cs.vertices.push_back({trace::Codelet::kCopy, {1, 1}, {}});
  cs.vertices.push_back({trace::Codelet::kCast, {1, 1}, {}});
  p.compute_sets.push_back(cs);
  const TileRange dst{1, 2};
  trace::Exchange ex;
  ex.add({0, 0}, {&dst, 1}, 64);
  p.exchanges.push_back(ex);
  const MemoryMap m = memory_map(chip, p);
  // Tile 1: tensor a 1000 + 3 vertices x 12 + 2 codelets x 1024 + 1 transfer x 4 + 3072 stack.
  EXPECT_EQ(m.tiles[1].total(), 1000u + 36u + 2048u + 4u + 3072u);
  // Tile 2: a 1000 + b 500 + one transfer + stack.
  EXPECT_EQ(m.tiles[2].total(), 1500u + 4u + 3072u);
  // Tile 5: stack only.
  EXPECT_EQ(m.tiles[5].total(), 3072u);
}

TEST(Memory, TensorsWithLifetimesAddTheirPeakOverPositions) {
  const ChipSpec chip = testing::gc200_by_hand();
  trace::IpuProgram p;
  p.steps.resize(4);  // four on-chip syncs: positions 0..3
  using K = trace::TensorKind;
  const auto tensor = [&](const char* name, K kind, TileRange tiles, std::uint64_t bytes,
                          std::optional<trace::Lifetime> live) {
    p.tensors.push_back({name, kind, trace::DType::kHalf, tiles, bytes, live});
  };
  tensor("w", K::kWeight, {0, 3}, 100, std::nullopt);
  tensor("b", K::kActivation, {0, 1}, 1000, trace::Lifetime{0, 1});
  tensor("c", K::kGradient, {1, 2}, 500, trace::Lifetime{1, 2});
  tensor("d", K::kTemp, {0, 3}, 1200, trace::Lifetime{3, 3});
  const MemoryMap m = memory_map(chip, p);
  // By hand, live bytes at positions 0..3 on each tile, plus w's 100 always:
  //  tile 0: 1000, 1000, 0, 1200 -> 1200 (d);   tile 1: 1000, 1500, 500, 1200 -> 1500 (b + c)
  //  tile 2: 0, 500, 500, 1200 -> 1200 (d);     tile 3: 0, 0, 0, 1200 -> 1200 (d);  tile 4: none
  const std::uint64_t expected[] = {1300, 1600, 1300, 1300, 0};
  for (std::uint32_t t = 0; t < 5; ++t) EXPECT_EQ(m.tiles[t].tensors, expected[t]) << t;
  const auto kind = [&](std::uint32_t t, K k) {
    return m.tiles[t].tensor_kinds[static_cast<std::size_t>(k)];
  };
  EXPECT_EQ(kind(0, K::kTemp), 1200u);
  EXPECT_EQ(kind(0, K::kActivation), 0u);
  EXPECT_EQ(kind(1, K::kActivation), 1000u);
  EXPECT_EQ(kind(1, K::kGradient), 500u);
  EXPECT_EQ(kind(1, K::kTemp), 0u);
  EXPECT_EQ(kind(1, K::kWeight), 100u);
  // Without lifetimes every tensor is live throughout: the plain sum.
  for (auto& t : p.tensors) t.live.reset();
  EXPECT_EQ(memory_map(chip, p).tiles[1].tensors, 100u + 1000u + 500u + 1200u);
  // A scoped tensor beyond the chip is still an error.
  p.tensors.push_back(
      {"far", K::kTemp, trace::DType::kHalf, {0, chip.tiles}, 1, trace::Lifetime{0, 0}});
  EXPECT_THROW(memory_map(chip, p), TraceError);
}

TEST(Memory, OverflowNamesTileUseAndBiggestConsumers) {
  const ChipSpec chip = testing::gc200_by_hand();
  trace::IpuProgram p;
  p.tensors.push_back({"big", trace::TensorKind::kWeight, trace::DType::kHalf, {7, 7}, 600 * 1024});
  p.tensors.push_back(
      {"medium", trace::TensorKind::kActivation, trace::DType::kHalf, {7, 8}, 40 * 1024});
  p.tensors.push_back({"small", trace::TensorKind::kActivation, trace::DType::kHalf, {0, 9}, 1024});
  const MemoryMap m = memory_map(chip, p);
  try {
    check_memory(chip, p, m);
    FAIL();
  } catch (const ModelError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of memory on tile 7: needs 644.00 KiB of 624.00 KiB"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("largest tensors: big 600.00 KiB, medium 40.00 KiB, small 1.00 KiB"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("1 tile(s) over capacity"), std::string::npos) << msg;
  }
}

TEST(Memory, OverflowNamesTheTensorsLiveAtTheTilesPeak) {
  // Tile 7: 500 KiB live throughout, then 100 KiB at position 0 or 130 KiB at position 1: the
  // peak (630 KiB + stack, over 624 KiB) is at position 1, so the message names big and b.
  const ChipSpec chip = testing::gc200_by_hand();
  trace::IpuProgram p;
  p.steps.resize(2);
  const auto kib = [](std::uint64_t n) { return n * 1024; };
  p.tensors.push_back({"big", trace::TensorKind::kWeight, trace::DType::kHalf, {7, 7}, kib(500)});
  p.tensors.push_back({"a",
                       trace::TensorKind::kActivation,
                       trace::DType::kHalf,
                       {7, 7},
                       kib(100),
                       trace::Lifetime{0, 0}});
  p.tensors.push_back({"b",
                       trace::TensorKind::kActivation,
                       trace::DType::kHalf,
                       {7, 7},
                       kib(130),
                       trace::Lifetime{1, 1}});
  const MemoryMap m = memory_map(chip, p);
  EXPECT_EQ(m.tiles[7].tensors, kib(630));
  EXPECT_EQ(m.tiles[7].peak_position, 1u);
  try {
    check_memory(chip, p, m);
    FAIL();
  } catch (const ModelError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("largest tensors: big 500.00 KiB, b 130.00 KiB; 1 tile(s)"),
              std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace ipusim::cost
