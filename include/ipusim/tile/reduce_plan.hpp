// SPDX-License-Identifier: Apache-2.0
// How popops runs a reduction on a tile (docs/codelets.md "reduce"): the rules both timing
// models apply, the closed form (cost::reduce) and the instruction-level tile model
// (reduce_program): the vector loop of its vertices, a strided loop's closing cycles, the
// workers' shares of the outputs, and the split of a reduction to one value over the workers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ipusim::tile {

// The vector loop of popops' reduce vertices (CycleEstimationFunctions.cpp, getOpVectorWidth
// and the elements per cycle of each estimator): an add accumulates a 128-bit accumulator's
// worth (`accumulator_bytes`) a loop, other operators one datapath vector; a load brings at
// most one datapath vector, so an add of halves takes 2 loads of 4 a loop.
struct ReduceVector {
  std::uint64_t per_load = 1, loads = 1;  // elements per 64-bit load, loads per loop
  std::uint64_t per_loop() const { return per_load * loads; }
};
inline ReduceVector reduce_vector(bool add, std::uint64_t element_bytes,
                                  std::uint64_t datapath_bytes, std::uint64_t accumulator_bytes) {
  const std::uint64_t width = std::max<std::uint64_t>(datapath_bytes / element_bytes, 1);
  const std::uint64_t op_width =
      add ? std::max<std::uint64_t>(accumulator_bytes / element_bytes, 1) : width;
  const std::uint64_t per_load = std::min(op_width, width);
  return {per_load, op_width / per_load};
}

// The cycles closing each outer loop of popops' STRIDED_REDUCE vertex, no update
// (getCyclesEstimateForStridedReduce): half partials 1 + 6 for an add to float, else 1 + 7;
// float partials 3 for an add, else 2, + 2 to store.
inline std::uint64_t strided_reduce_post(bool half_partials, bool add, bool float_out) {
  return half_partials ? 1 + (add && float_out ? 6 : 7) : (add ? 3 : 2) + 2;
}

// Each worker's share of `outputs` (the last ones may get less or none): an even split over
// `workers`, in whole grains of `grain` outputs (popops' findSplitsBetweenWorkers).
inline std::uint64_t output_share(std::uint64_t outputs, std::uint64_t workers,
                                  std::uint64_t grain) {
  const auto udiv = [](std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; };
  return udiv(udiv(outputs, workers), grain) * grain;
}

// The partials each first-stage worker reduces when one output takes `inputs` partials, as
// popops' ReductionConnection.cpp plans it: splitTwoStageReductionsBetweenWorkers decides how
// many pieces (it splits while the rough cost, 30 cycles of vertex overhead (60 once split) plus
// inputs / ops_per_cycle, still falls, at most inputs / 2 pieces and one per worker, and keeps
// one piece if splitting gains nothing), and splitRowsToWorkers cuts the rows into pieces of
// whole grains (`grain`: the vector width), the remainder on the last. One piece means one
// stage; more mean a second stage that reduces the pieces' results on one worker.
//   workers: worker contexts; ops_per_cycle: popops' opsPerCycle for a scalar output (the
//   vector width, doubled for add).
inline std::vector<std::uint64_t> scalar_reduce_pieces(std::uint64_t inputs, std::uint64_t workers,
                                                       std::uint64_t ops_per_cycle,
                                                       std::uint64_t grain) {
  const auto udiv = [](std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; };
  // splitTwoStageReductionsBetweenWorkers, one reduction on the tile.
  const std::uint64_t rough = udiv(inputs, std::max<std::uint64_t>(ops_per_cycle, 1));
  const std::uint64_t one_stage = 30 + rough;
  const std::uint64_t max_split = std::min(inputs / 2, one_stage / 4);  // getMaxSplit
  std::uint64_t splits = 1, cycles = one_stage;
  for (std::uint64_t free = workers > 1 ? workers - 1 : 0; free > 0; --free) {
    if (splits + 1 >= max_split) break;
    const std::uint64_t after = 60 + rough / (splits + 1);
    if (after >= cycles) break;
    cycles = after;
    ++splits;
  }
  if (cycles == one_stage) splits = 1;
  // splitRowsToWorkers.
  if (inputs <= 3 || splits <= 1) return {inputs};
  const std::uint64_t per = udiv(inputs, splits);
  const std::uint64_t n = std::min(inputs / 2, udiv(inputs, per));
  std::vector<std::uint64_t> pieces(n, grain * (inputs / (n * grain)));
  const std::uint64_t extra = inputs % (n * grain);
  for (std::uint64_t i = 0; i < extra / grain; ++i) pieces[i] += grain;
  pieces.back() += extra % grain;
  return pieces;
}

}  // namespace ipusim::tile
