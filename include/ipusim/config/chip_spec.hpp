// SPDX-License-Identifier: Apache-2.0
// The resolved, validated description of one IPU chip. Built once from configs/chips/*.yaml
// (plus --set overrides) by load_chip(), then passed by const reference. Every field's source
// row in ../shared/reference/ipu-hardware.md is named in the config files and in
// docs/config-reference.md.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "ipusim/util/units.hpp"

namespace ipusim {

// Which model times a vertex (chip.tile_model): the poplibs-derived closed forms
// (src/cost/codelet_models.cpp) or the instruction-level tile model (src/tile/,
// docs/tile-model.md).
enum class TileModel : std::uint8_t { kClosedForm, kIsa };
inline constexpr std::array<std::pair<std::string_view, TileModel>, 2> kTileModelNames{
    {{"closed_form", TileModel::kClosedForm}, {"isa", TileModel::kIsa}}};

// One AMP (accumulating matrix product) data path: input type -> partials type.
struct AmpPath {
  std::uint32_t engines = 0;  // conv units (output channels per AMP pass)
};

struct ChipSpec {
  std::string name;                   // e.g. "GC200"
  Frequency clock;                    // tile clock
  std::uint32_t tiles = 0;            // tiles per IPU
  Bytes tile_memory;                  // SRAM per tile
  std::uint32_t worker_contexts = 0;  // barrel-threaded worker contexts per tile
  Bytes datapath_width;               // non-AMP vector datapath (64 bit = 8 B)

  struct Memory {
    BytesPerCycle load_bytes_per_cycle;              // plain 64-bit loads
    BytesPerCycle interleaved_load_bytes_per_cycle;  // ld128 / ld2x64pace
    BytesPerCycle memcpy_bytes_per_cycle;            // on-tile copy rate
  } memory;

  struct Amp {
    AmpPath half_half;                           // half in, half partials
    AmpPath half_float;                          // half in, float partials
    AmpPath float_float;                         // float in, float partials
    std::uint32_t weights_per_engine_half = 0;   // input channels per group, half
    std::uint32_t weights_per_engine_float = 0;  // input channels per group, float
    std::uint32_t macs_per_engine_half = 0;      // MACs per engine per AMP instruction, half
    std::uint32_t macs_per_engine_float = 0;     // MACs per engine per AMP instruction, float
    BytesPerCycle coeff_load_bytes_per_cycle;    // supervisor weight load into the engines
    std::uint32_t pipeline_depth = 4;            // positions in flight in an engine (fill/drain)
  } amp;

  // Tile micro-architecture read by the instruction-level model only (chip.tile.*, all with
  // defaults; docs/tile-model.md). The barrel depth is worker_contexts.
  TileModel tile_model = TileModel::kClosedForm;
  struct Tile {
    std::uint32_t issue_width = 2;     // instructions per bundle issued in one turn (main+aux)
    std::uint32_t result_latency = 6;  // cycles from a worker's issue to its result
    BytesPerCycle store_bytes_per_cycle{8};       // store port
    std::uint32_t supervisor_simple_cycles = 1;   // independent supervisor instruction
    std::uint32_t supervisor_control_cycles = 6;  // dependent, branch, put, runall, sync
    std::uint32_t rpt_count_max = 4095;           // largest rpt count; longer loops are split
  } tile;

  struct Exchange {
    BytesPerCycle bytes_per_cycle;           // per tile, each direction
    std::uint32_t tiles_per_shared_bus = 0;  // super-tile size
    Cycles fixed_overhead;                   // per exchange phase
    std::uint32_t tiles_per_column = 0;      // layout assumption for the latency term
    Cycles column_hop_latency;               // extra delay per column of distance
  } exchange;

  struct Sync {
    Cycles internal_latency;  // on-chip BSP sync of all tiles
  } sync;

  struct Host {
    Bandwidth bandwidth;  // host <-> IPU, each direction
    Duration latency;     // per host transfer
  } host;

  struct Runtime {
    Bytes vertex_state_bytes;                // per vertex instance
    Bytes stack_bytes;                       // per tile, always live
    Bytes codelet_code_bytes;                // per distinct codelet type used on a tile
    Bytes exchange_code_bytes_per_transfer;  // per transfer a tile sends or receives
    Cycles compute_set_overhead;             // per compute set per tile (supervisor launch)
  } runtime;

  // Derived peaks.
  double peak_macs_per_cycle_per_tile(bool half_in, bool float_partials) const;
  double peak_flops(bool half_in, bool float_partials) const;  // per IPU, FLOP/s
  double exchange_bandwidth() const;                           // aggregate all-to-all, bytes/s
  Bytes total_memory() const { return Bytes{tile_memory.count * tiles}; }
};

}  // namespace ipusim
