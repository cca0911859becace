// SPDX-License-Identifier: Apache-2.0
#include "ipusim/cost/tile_timing.hpp"

#include "ipusim/tile/codelets.hpp"

namespace ipusim::cost {
namespace {

class ClosedForm final : public TileTimingModel {
 public:
  std::string_view name() const override { return "closed_form"; }
  VertexCost cost(const ChipSpec& chip, const trace::Vertex& v) const override {
    return closed_form_vertex_cost(chip, v);
  }
};

class Isa final : public TileTimingModel {
 public:
  std::string_view name() const override { return "isa"; }
  VertexCost cost(const ChipSpec& chip, const trace::Vertex& v) const override {
    VertexCost c = closed_form_vertex_cost(chip, v);  // FLOPs, and the same parameter checks
    // A codelet without an instruction-level program keeps its closed form (docs/tile-model.md).
    if (tile::has_isa_program(v.codelet)) c.cycles = tile::isa_vertex_cycles(chip, v);
    return c;
  }
};

}  // namespace

const TileTimingModel& tile_timing_model(TileModel kind) {
  static const ClosedForm closed;
  static const Isa isa;
  if (kind == TileModel::kIsa) return isa;
  return closed;
}

std::string_view tile_model_name(TileModel kind) { return tile_timing_model(kind).name(); }

}  // namespace ipusim::cost
