// SPDX-License-Identifier: Apache-2.0
// Reference kernels: hand-plannable programs that exercise one part of the model each, mapped
// over the chip's tiles the way a sensible planner would (docs/kernels.md describes each
// mapping). Each generator plans for the given chip, so a changed chip gets a re-planned kernel.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/plan/conv.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::kernels {

trace::Trace matmul(const ChipSpec& chip, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                    trace::DType dtype);
// `groups` independent matmuls [G][M][K] x [G][K][N], planned as one grouped conv.
trace::Trace matmul(const ChipSpec& chip, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                    trace::DType dtype, std::uint64_t groups);
trace::Trace conv2d(const ChipSpec& chip, const plan::ConvArgs& args);
// The same kernel planned within `budget` bytes per tile (plan_conv's budget overload).
trace::Trace conv2d(const ChipSpec& chip, const plan::ConvArgs& args, std::uint64_t budget);
// Sum `inputs` partial vectors of `outputs` elements each; partials are already on the tiles
// that own their outputs, so the reduction is tile-local. `layout` is the reduce vertices'
// (trace::ReduceLayout: a conv's partial sums, or popops' strided or continuous reduction).
trace::Trace reduce(const ChipSpec& chip, std::uint64_t outputs, std::uint64_t inputs,
                    trace::DType dtype,
                    trace::ReduceLayout layout = trace::ReduceLayout::kPartialSums);
// One elementwise op over `n` elements spread evenly over all tiles.
trace::Trace elementwise(const ChipSpec& chip, trace::Op op, std::uint64_t n, trace::DType dtype);
// Every one of `tiles` tiles sends a distinct `bytes` block to every other.
trace::Trace exchange_all_to_all(const ChipSpec& chip, std::uint64_t bytes, std::uint32_t tiles);
// Tile `src` sends the same `bytes` to tiles 0..tiles-1.
trace::Trace exchange_broadcast(const ChipSpec& chip, std::uint64_t bytes, std::uint32_t tiles,
                                std::uint32_t src);
// `iterations` internal syncs in a repeat loop.
trace::Trace sync_loop(const ChipSpec& chip, std::uint64_t iterations);

// System microbenchmarks (trace format v2; run with --system).
// IPU `src` copies `bytes` to IPU `dst` in one global exchange.
trace::Trace link_p2p(const ChipSpec& chip, std::uint64_t bytes, std::uint32_t src,
                      std::uint32_t dst);
// One collective of a `bytes` tensor over `group` data-parallel replicas of one IPU each.
trace::Trace collective(const ChipSpec& chip, trace::CollectiveOp op, std::uint64_t bytes,
                        std::uint32_t group, trace::CollectiveMethod method, trace::DType dtype);
// `iterations` external syncs of all `group` IPUs.
trace::Trace external_sync(const ChipSpec& chip, std::uint32_t group, std::uint64_t iterations);

}  // namespace ipusim::kernels
