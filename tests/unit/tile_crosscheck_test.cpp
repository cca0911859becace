// SPDX-License-Identifier: Apache-2.0
// Instruction-level tile model (docs/tile-model.md): isa against the closed forms over each
// family's grid (within 10%), a what-if the formulas cannot answer, memoisation and the
// chip.tile_model switch.
#include <gtest/gtest.h>

#include <string>

#include "ipusim/config/chip.hpp"
#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/cost/tile_timing.hpp"
#include "ipusim/tile/codelets.hpp"
#include "ipusim/tile/program.hpp"
#include "ipusim/util/error.hpp"
#include "test_chips.hpp"

namespace ipusim {
namespace {

using trace::Codelet;
using u64 = std::uint64_t;

trace::Vertex vertex(Codelet c, std::initializer_list<std::int64_t> params) {
  trace::Vertex v;
  v.codelet = c;
  std::size_t i = 0;
  for (const auto p : params) v.params[i++] = p;
  return v;
}

constexpr std::int64_t kHalf = 0, kFloat = 1;

TEST(TileCrossCheck, FloatAmpZeroingStoresEveryEngine) {
  const ChipSpec chip = testing::gc200_by_hand();
  // float->float, 16 engines x 4 B = 64 B of zeros per position = 8 stores, the z = 8 of
  // poplibs' estimator for float with 16 engines (zeroCyclesPerGroup); the two models then
  // differ by the fill and drain of the stream (+17 bundles per worker) and the supervisors.
  const auto one = vertex(Codelet::kAmpConv1x1, {kFloat, kFloat, 600, 8, 16, 1, 0});
  const u64 isa = tile::isa_vertex_cycles(chip, one);
  const u64 cf = cost::closed_form_vertex_cost(chip, one).cycles;
  // Per worker 100 positions: isa worker 12 + zero (2 + rpt + 800) + stream (24 + rpt +
  // 97 x 8 + 24) + exit = 1641; closed 46 + 8 x 97 + (2 + 8 x 100) = 1624: 6 x 17 more cycles
  // in the run (the supervisors differ by a few tens).
  EXPECT_NEAR(static_cast<double>(isa) - static_cast<double>(cf), 6.0 * (1641 - 1624), 60.0);
}

// ----- Cross-check ---------------------------------------------------------------------------

void expect_within(const ChipSpec& chip, const trace::Vertex& v, double tol = 0.10) {
  const double cf = static_cast<double>(cost::closed_form_vertex_cost(chip, v).cycles);
  const double isa = static_cast<double>(tile::isa_vertex_cycles(chip, v));
  EXPECT_NEAR(isa / cf, 1.0, tol) << cost::describe_vertex(v) << ": isa " << isa << " closed "
                                  << cf;
}

TEST(TileCrossCheck, Amp1x1HalfWithin10Percent) {
  const ChipSpec chip = testing::gc200_by_hand();
  for (const std::int64_t partials : {kHalf, kFloat})
    for (const std::int64_t pos : {24, 96, 384, 1536})
      for (const std::int64_t ic : {16, 64, 256})
        for (const std::int64_t oc : {16, 64})
          for (const std::int64_t bits : {0, 64})  // chip-rate and 64-bit weight loads
            expect_within(chip,
                          vertex(Codelet::kAmpConv1x1, {kHalf, partials, pos, ic, oc, 1, bits}));
}

TEST(TileCrossCheck, Amp1x1FloatWithin10PercentFromEightInputGroups) {
  const ChipSpec chip = testing::gc200_by_hand();
  for (const std::int64_t pos : {384, 1536})
    for (const std::int64_t ic : {64, 256})
      expect_within(chip, vertex(Codelet::kAmpConv1x1, {kFloat, kFloat, pos, ic, 32, 1, 0}));
}

TEST(TileCrossCheck, AmpNx1Within10Percent) {
  const ChipSpec chip = testing::gc200_by_hand();
  struct Shape {
    std::int64_t pos, width;
  };
  for (const std::int64_t partials : {kHalf, kFloat})
    for (const Shape s : {Shape{56, 56}, {196, 14}, {784, 28}, {3136, 56}})
      for (const std::int64_t k : {3, 7})
        expect_within(chip, vertex(Codelet::kAmpConvNx1,
                                   {kHalf, partials, s.pos, 64, 64, 1, k, 1, s.width, 64}));
  for (const Shape s : {Shape{784, 28}, {3136, 56}})
    expect_within(chip,
                  vertex(Codelet::kAmpConvNx1, {kFloat, kFloat, s.pos, 64, 64, 1, 3, 3, s.width}));
  // Few input channels with taller weights (an image stem: 3 channels of a 7x7 kernel in
  // weights of 4 rows; 6 channels of a 3x3 in weights of 2), chip-rate and 64-bit loads.
  for (const Shape s : {Shape{112, 112}, {784, 112}})
    for (const std::int64_t bits : {0, 64}) {
      expect_within(chip, vertex(Codelet::kAmpConvNx1,
                                 {kHalf, kHalf, s.pos, 3, 64, 1, 7, 7, s.width, bits, 4}));
      expect_within(chip, vertex(Codelet::kAmpConvNx1,
                                 {kHalf, kFloat, s.pos, 6, 64, 1, 3, 3, s.width, bits, 2}));
    }
}

TEST(TileCrossCheck, ElementwiseWithin10Percent) {
  const ChipSpec chip = testing::gc200_by_hand();
  for (const std::int64_t t : {kHalf, kFloat})
    for (const std::int64_t n : {240, 2400, 24000, 240000}) {
      for (const std::int64_t op : {0, 1, 2, 3, 4, 5})
        expect_within(chip, vertex(Codelet::kBinary, {op, t, n}));
      for (std::int64_t op = 6; op < 18; ++op)
        expect_within(chip, vertex(Codelet::kUnary, {op, t, n}));
      for (const std::int64_t c : {1, 6, 20})
        expect_within(chip, vertex(Codelet::kMap, {t, n, c, 3}));
      expect_within(chip, vertex(Codelet::kScaledAdd, {t, n}));
      expect_within(chip, vertex(Codelet::kScaledAdd, {t, n + 3}));
    }
}

TEST(TileCrossCheck, CastCopyTransposeWithin10Percent) {
  const ChipSpec chip = testing::gc200_by_hand();
  for (const std::int64_t n : {240, 2400, 24000, 240000}) {
    expect_within(chip, vertex(Codelet::kCast, {kHalf, kFloat, n}));
    expect_within(chip, vertex(Codelet::kCast, {kFloat, kHalf, n}));
    expect_within(chip, vertex(Codelet::kCopy, {n}));
    expect_within(chip, vertex(Codelet::kCopy, {n + 5}));
    expect_within(chip, vertex(Codelet::kTranspose, {kFloat, n}));
  }
}

TEST(TileCrossCheck, ReduceDotSliceWithin10Percent) {
  const ChipSpec chip = testing::gc200_by_hand();
  for (const std::int64_t t : {kHalf, kFloat})
    for (const std::int64_t outs : {24, 240, 2400})
      for (const std::int64_t ins : {2, 4, 16, 64}) {
        expect_within(chip, vertex(Codelet::kReduce, {0, t, t, outs, ins}));
        expect_within(chip, vertex(Codelet::kReduce, {0, kFloat, kHalf, outs, ins}));
      }
  // popops' strided and continuous reductions.
  for (const std::int64_t t : {kHalf, kFloat})
    for (const std::int64_t layout : {1, 2})
      for (const std::int64_t outs : {24, 240, 2400})
        for (const std::int64_t ins : {4, 64, 512})
          expect_within(chip, vertex(Codelet::kReduce, {0, t, kFloat, outs, ins, layout}));
  // One output, split over the workers (popops' scalar-output reduction).
  for (const std::int64_t t : {kHalf, kFloat})
    for (const std::int64_t ins : {100, 1000, 2850, 10000})
      expect_within(chip, vertex(Codelet::kReduce, {0, t, kFloat, 1, ins}));
  for (const std::int64_t t : {kHalf, kFloat})
    for (const std::int64_t len : {16, 240, 2400}) {
      expect_within(chip, vertex(Codelet::kDot, {t, t, len, 16}));
      expect_within(chip, vertex(Codelet::kDynamicSlice, {t, len, 4}));
    }
}

// ----- What-ifs the formulas cannot answer ---------------------------------------------------

TEST(TileWhatIf, DoubleAmpEnginesNeedTheDoubledLoadPort) {
  ChipSpec base = testing::gc200_by_hand();
  const auto v = vertex(Codelet::kAmpConv1x1, {kHalf, kHalf, 6000, 64, 64, 1, 0});
  const double t16 = static_cast<double>(tile::isa_vertex_cycles(base, v));
  ChipSpec twice = base;
  twice.amp.half_half.engines = 32;  // 16 B of partials per AMP instruction: 24 B of loads
  const double t32 = static_cast<double>(tile::isa_vertex_cycles(twice, v));
  twice.memory.interleaved_load_bytes_per_cycle = BytesPerCycle{32};
  twice.tile.store_bytes_per_cycle = BytesPerCycle{16};
  const double t32_ported = static_cast<double>(tile::isa_vertex_cycles(twice, v));
  // Half the passes, each with 2-cycle feeds: no gain; with the wider ports, about half.
  EXPECT_NEAR(t32 / t16, 1.0, 0.03);
  EXPECT_NEAR(t32_ported / t16, 0.5, 0.03);
}

// ----- Memo and the per-run switch -----------------------------------------------------------

TEST(TileModelSwitch, MemoisedPerShapeAndSelectedByChipConfig) {
  ChipSpec chip = testing::gc200_by_hand();
  const auto v = vertex(Codelet::kBinary, {0, kHalf, 123457});
  const u64 first = tile::isa_vertex_cycles(chip, v);
  const std::size_t size = tile::isa_memo_size();
  EXPECT_EQ(tile::isa_vertex_cycles(chip, v), first);
  EXPECT_EQ(tile::isa_memo_size(), size);
  chip.tile.issue_width = 1;  // another micro-architecture is another entry
  tile::isa_vertex_cycles(chip, v);
  EXPECT_EQ(tile::isa_memo_size(), size + 1);

  const std::string file = std::string(IPUSIM_SOURCE_DIR) + "/configs/chips/gc200.yaml";
  const ChipSpec closed = load_chip(file).spec;
  const ChipSpec isa = load_chip(file, {"chip.tile_model=isa"}).spec;
  EXPECT_EQ(closed.tile_model, TileModel::kClosedForm);
  EXPECT_EQ(isa.tile_model, TileModel::kIsa);
  EXPECT_EQ(cost::tile_model_name(isa.tile_model), "isa");
  EXPECT_EQ(cost::vertex_cost(closed, v), cost::closed_form_vertex_cost(closed, v));
  EXPECT_EQ(cost::vertex_cost(isa, v).cycles, tile::isa_vertex_cycles(isa, v));
  EXPECT_EQ(cost::vertex_cost(isa, v).flops, cost::closed_form_vertex_cost(isa, v).flops);
  EXPECT_THROW(load_chip(file, {"chip.tile_model=rtl"}), ConfigError);
}

}  // namespace
}  // namespace ipusim
