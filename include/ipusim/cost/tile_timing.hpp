// SPDX-License-Identifier: Apache-2.0
// The tile timing-model interface: which model turns a vertex into tile cycles, chosen per run
// by chip.tile_model. closed_form restates poplibs' cycle estimators (codelet_models.cpp);
// isa executes the vertex's bundle programs on the worker-pipeline engine (src/tile/,
// docs/tile-model.md). Both report the same FLOPs (a property of the vertex, not of timing).
#pragma once

#include <string_view>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::cost {

class TileTimingModel {
 public:
  virtual ~TileTimingModel() = default;
  virtual std::string_view name() const = 0;  // "closed_form" or "isa"
  virtual VertexCost cost(const ChipSpec& chip, const trace::Vertex& v) const = 0;
};

const TileTimingModel& tile_timing_model(TileModel kind);
std::string_view tile_model_name(TileModel kind);

// The closed-form cost regardless of chip.tile_model (for cross-checks).
VertexCost closed_form_vertex_cost(const ChipSpec& chip, const trace::Vertex& v);

}  // namespace ipusim::cost
