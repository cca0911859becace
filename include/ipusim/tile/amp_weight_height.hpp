// SPDX-License-Identifier: Apache-2.0
// poplin's AMP weight height (convUnitWeightHeight; docs/codelets.md "amp_convnx1"): the rules
// both timing models of the nx1 vertex apply, the closed form (cost::amp_convnx1) and the
// instruction-level tile model (ampnx1_program).
#pragma once

#include <cstdint>

namespace ipusim::tile {

// Whether `height` kernel rows can share one weight load of `weights` per engine: 1, 2 or 4,
// dividing the weights.
inline bool valid_weight_height(std::uint64_t height, std::uint64_t weights) {
  return (height == 1 || height == 2 || height == 4) && weights % height == 0;
}

// The supervisor's weight-height set-up per pass, h_cost: 15, 46 or 60 cycles for heights 1, 2
// and 4 (ipu-hardware.md §4; poplibs getConvPartialnx1SupervisorInnerLoopCycleEstimateHalfFloat).
inline std::uint64_t weight_height_setup(std::uint64_t height) {
  return height == 1 ? 15 : height == 2 ? 46 : 60;
}

// Height 4 shuffles its weights with 64-bit loads: at most 8 B of coefficients a cycle
// (poplibs getConvPartialAmpSupervisorWeightLoadCycleEstimate).
inline constexpr std::uint64_t kHeight4LoadBytesPerCycle = 8;

}  // namespace ipusim::tile
