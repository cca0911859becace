// SPDX-License-Identifier: Apache-2.0
// report::layer_bound, the summary's "why" for the most expensive layer: the bound named by
// the phase kind with the largest share, with numbers worked out by hand.
#include <gtest/gtest.h>

#include "ipusim/report/run_files.hpp"
#include "test_chips.hpp"

namespace ipusim::report {
namespace {

LayerRow row(std::uint64_t compute, std::uint64_t exchange, std::uint64_t sync,
             std::uint64_t waiting) {
  LayerRow r;
  r.layer = "l";
  r.pass = "forward";
  r.cycles[PhaseKind::kCompute] = compute;
  r.cycles[PhaseKind::kExchange] = exchange;
  r.cycles[PhaseKind::kSync] = sync;
  r.cycles[PhaseKind::kWaiting] = waiting;
  return r;
}

TEST(LayerBound, ComputeBoundGivesTheAmpUseAgainstTheFp16Peak) {
  const ChipSpec chip = testing::gc200_by_hand();
  // 600 of 1000 cycles computing. The FP16.16 peak is 1472 tiles x 64 MAC x 2 FLOP per cycle:
  // half of it over 600 cycles is 1472 x 128 x 600 / 2 = 56,524,800 FLOP.
  LayerRow r = row(600, 400, 0, 0);
  r.flops = 56'524'800;
  EXPECT_EQ(layer_bound(chip, r),
            "compute-bound (60% of its time): the AMP units at 50.0% of the FP16.16 peak while "
            "it computes");
}

TEST(LayerBound, NamesExchangeSyncAndWaiting) {
  const ChipSpec chip = testing::gc200_by_hand();
  LayerRow ex = row(300, 700, 0, 0);
  ex.exchange_bytes = 3 << 20;
  EXPECT_EQ(layer_bound(chip, ex).rfind("exchange-bound (70% of its time exchanging 3", 0), 0u)
      << layer_bound(chip, ex);
  EXPECT_EQ(layer_bound(chip, row(100, 100, 800, 0)).rfind("sync-bound (80% of its time", 0), 0u);
  EXPECT_EQ(layer_bound(chip, row(50, 50, 0, 900)),
            "waiting for peers (90% of its time at external syncs)");
}

}  // namespace
}  // namespace ipusim::report
