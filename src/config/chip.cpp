// SPDX-License-Identifier: Apache-2.0
#include "ipusim/config/chip.hpp"

#include <cstdlib>

#include "ipusim/util/error.hpp"

#ifndef IPUSIM_SOURCE_DIR_DEFAULT
#define IPUSIM_SOURCE_DIR_DEFAULT "."
#endif

namespace ipusim {
namespace {

using config::ParamDecl;
using config::ValueKind;

constexpr double kKiB = 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kBig = 1e15;

// Sources are rows of ../shared/reference/ipu-hardware.md ("§1 Tiles (IPU-cores) per IPU").
std::vector<ParamDecl> chip_params() {
  return {
      {"chip.name", ValueKind::kString, 0, 0, "Chip name shown in reports", "-"},
      {"chip.clock", ValueKind::kFrequency, 1e6, 1e11, "Tile clock frequency",
       "§1 Tile clock (GC200 in M2000) / Bow IPU clock"},
      {"chip.tiles", ValueKind::kCount, 1, 65536, "Tiles per IPU", "§1 Tiles (IPU-cores) per IPU"},
      {"chip.tile_memory", ValueKind::kBytes, kKiB, 64 * kMiB, "SRAM per tile", "§1 SRAM per tile"},
      {"chip.worker_contexts", ValueKind::kCount, 1, 64,
       "Barrel-threaded worker contexts per tile (a worker issues once every N cycles)",
       "§1 Hardware threads per tile; §3 rule 1"},
      {"chip.datapath_width", ValueKind::kBytes, 4, 128,
       "Width of the non-AMP vector datapath (sets the vector width: 8 B = 4 half / 2 float)",
       "§1 Non-AMP vector width (64-bit datapath)"},
      {"chip.memory.load_bytes_per_cycle", ValueKind::kBytesPerCycle, 1, 1024,
       "Plain (non-interleaved) load rate per tile", "§1 Load/store bandwidth per tile"},
      {"chip.memory.interleaved_load_bytes_per_cycle", ValueKind::kBytesPerCycle, 1, 1024,
       "Load rate from interleaved memory (ld128 / ld2x64pace)",
       "§1 Load/store bandwidth per tile"},
      {"chip.memory.memcpy_bytes_per_cycle", ValueKind::kBytesPerCycle, 1, 1024,
       "On-tile copy rate", "§1 Local copy (memcpy) rate", true},
      {"chip.amp.engines_half_half", ValueKind::kCount, 1, 256,
       "AMP engines (output channels per pass), half in / half partials",
       "§1 AMP (\"conv unit\") counts on IPU2"},
      {"chip.amp.engines_half_float", ValueKind::kCount, 1, 256,
       "AMP engines, half in / float partials", "§1 AMP (\"conv unit\") counts on IPU2"},
      {"chip.amp.engines_float_float", ValueKind::kCount, 1, 256,
       "AMP engines, float in / float partials", "§1 AMP (\"conv unit\") counts on IPU2"},
      {"chip.amp.weights_per_engine_half", ValueKind::kCount, 1, 256,
       "Weights held per engine = input channels per AMP group, half",
       "§1 AMP counts (weights per conv unit 16 half)"},
      {"chip.amp.weights_per_engine_float", ValueKind::kCount, 1, 256,
       "Weights held per engine = input channels per AMP group, float",
       "§1 AMP counts (weights per conv unit 8 float)"},
      {"chip.amp.macs_per_engine_half", ValueKind::kCount, 1, 64,
       "MACs per engine per AMP instruction, half input (peak = engines x this per cycle)",
       "§1 FP16.16 peak 64 MAC/cycle/tile with 16 engines; §4 core 4 cycles/position"},
      {"chip.amp.macs_per_engine_float", ValueKind::kCount, 1, 64,
       "MACs per engine per AMP instruction, float input",
       "§1 FP32 peak 16 MAC/cycle/tile with 16 engines; §4 core 8 cycles/position"},
      {"chip.amp.coeff_load_bytes_per_cycle", ValueKind::kBytesPerCycle, 1, 1024,
       "Supervisor load rate of weights into the AMP engines", "§1 AMP weight (coefficient) load"},
      {"chip.amp.pipeline_depth", ValueKind::kCount, 1, 64,
       "Output positions in flight in an AMP engine: the worker loop feeds this many minus one "
       "before the first result and drains as many after the last input (tile model only)",
       "§4 getConvUnitMaxPipelineDepth = 4 (2017 default); §3 rule 4 fill/drain about 3", true,
       "4"},
      // Tile micro-architecture (instruction-level model, docs/tile-model.md). Defaults so that
      // chip configs without a tile: section keep working.
      {"chip.tile_model",
       ValueKind::kString,
       0,
       0,
       "Vertex timing model: closed_form (poplibs estimator formulas) or isa (bundle programs "
       "on the worker-pipeline engine)",
       "-",
       false,
       "closed_form",
       {"closed_form", "isa"}},
      {"chip.tile.issue_width", ValueKind::kCount, 1, 2,
       "Instructions a context issues in one turn: 2 = a main and an auxiliary instruction "
       "per 64-bit bundle, 1 = single issue (a paired bundle takes two turns)",
       "§3 rule 4 Bundles and rpt", false, "2"},
      {"chip.tile.result_latency", ValueKind::kCount, 1, 64,
       "Cycles from a worker's issue to its result being usable (load-use latency); hidden "
       "while it does not exceed worker_contexts",
       "§1 Local memory load latency (6 cycles, Mk1, assumed on Mk2); §3 rule 5", true, "6"},
      {"chip.tile.store_bytes_per_cycle", ValueKind::kBytesPerCycle, 1, 1024,
       "Store port width per tile per cycle",
       "§1 Load/store bandwidth (ld2xst64pace: 1 x 64-bit store)", false, "8B/cycle"},
      {"chip.tile.supervisor_simple_cycles", ValueKind::kCount, 1, 64,
       "Cycles of an independent supervisor instruction", "§3 rule 2 (independent charged 1)",
       false, "1"},
      {"chip.tile.supervisor_control_cycles", ValueKind::kCount, 1, 64,
       "Cycles of a dependent or control supervisor instruction (branch, put, runall, sync)",
       "§3 rule 2 (about 6 each)", true, "6"},
      {"chip.tile.rpt_count_max", ValueKind::kCount, 1, 1e9,
       "Largest rpt repeat count; longer loops run as several rpt blocks",
       "§3 rule 4 / §4 getRptCountMax (no public number)", true, "4095"},
      {"chip.exchange.bytes_per_cycle", ValueKind::kBytesPerCycle, 0.125, 1024,
       "Exchange send and receive rate per tile, each direction",
       "§1 Per-tile exchange send or receive rate"},
      {"chip.exchange.tiles_per_shared_bus", ValueKind::kCount, 1, 64,
       "Tiles sharing an exchange bus (super-tile); receiving the same data doubles the rate",
       "§1 Exchange bus sharing"},
      {"chip.exchange.fixed_overhead", ValueKind::kCycles, 0, 1e9,
       "Fixed cost of every exchange phase", "§1 Exchange fixed overheads (model values)", true},
      {"chip.exchange.tiles_per_column", ValueKind::kCount, 1, 65536,
       "Tiles per exchange column (layout assumption for the latency term)",
       "§1 Exchange timing model (no public number)", true},
      {"chip.exchange.column_hop_latency", ValueKind::kCycles, 0, 1e6,
       "Extra exchange delay per column of distance between sender and receiver",
       "§1 Exchange timing model; open question in §5 (no public number)", true},
      {"chip.sync.internal_latency", ValueKind::kCycles, 0, 1e9, "On-chip BSP sync of all tiles",
       "§1 Exchange fixed overheads (syncCycles = 90)", true},
      {"chip.host.bandwidth", ValueKind::kBandwidth, 1e3, kBig,
       "Host <-> IPU transfer rate, each direction",
       "§1 Host interface (chip): PCIe Gen4 x16 64 GB/s bidirectional"},
      {"chip.host.latency", ValueKind::kDuration, 0, 1, "Fixed latency of one host transfer",
       "no public number (open question in §5)", true},
      {"chip.runtime.vertex_state_bytes", ValueKind::kBytes, 0, kMiB,
       "Memory per vertex instance (vertex state)", "poplar-compiler.md §7.8 (about 12 B+)", true},
      {"chip.runtime.stack_bytes", ValueKind::kBytes, 0, 64 * kMiB, "Always-live stack per tile",
       "poplar-compiler.md §7.8 (about 3 KB per tile)", true},
      {"chip.runtime.codelet_code_bytes", ValueKind::kBytes, 0, 64 * kMiB,
       "Code per distinct codelet type used on a tile", "no public number", true},
      {"chip.runtime.exchange_code_bytes_per_transfer", ValueKind::kBytes, 0, kMiB,
       "Exchange code per transfer a tile takes part in",
       "poplar-compiler.md §7.8 (about 4 B per exchange instruction)", true},
      {"chip.runtime.compute_set_overhead", ValueKind::kCycles, 0, 1e9,
       "Supervisor cost to enter and leave a compute set, per tile",
       "§3 rules 2-3 (runall + sync, about 6 cycles each)", true},
  };
}

}  // namespace

const config::Schema& chip_schema() {
  static const config::Schema schema("chip", chip_params());
  return schema;
}

ChipSpec chip_from(const config::Resolved& r) {
  ChipSpec c;
  c.name = r.string("chip.name");
  c.clock = r.frequency("chip.clock");
  c.tiles = static_cast<std::uint32_t>(r.count("chip.tiles"));
  c.tile_memory = r.bytes("chip.tile_memory");
  c.worker_contexts = static_cast<std::uint32_t>(r.count("chip.worker_contexts"));
  c.datapath_width = r.bytes("chip.datapath_width");
  c.memory.load_bytes_per_cycle = r.bytes_per_cycle("chip.memory.load_bytes_per_cycle");
  c.memory.interleaved_load_bytes_per_cycle =
      r.bytes_per_cycle("chip.memory.interleaved_load_bytes_per_cycle");
  c.memory.memcpy_bytes_per_cycle = r.bytes_per_cycle("chip.memory.memcpy_bytes_per_cycle");
  c.amp.half_half.engines = static_cast<std::uint32_t>(r.count("chip.amp.engines_half_half"));
  c.amp.half_float.engines = static_cast<std::uint32_t>(r.count("chip.amp.engines_half_float"));
  c.amp.float_float.engines = static_cast<std::uint32_t>(r.count("chip.amp.engines_float_float"));
  c.amp.weights_per_engine_half =
      static_cast<std::uint32_t>(r.count("chip.amp.weights_per_engine_half"));
  c.amp.weights_per_engine_float =
      static_cast<std::uint32_t>(r.count("chip.amp.weights_per_engine_float"));
  c.amp.macs_per_engine_half = static_cast<std::uint32_t>(r.count("chip.amp.macs_per_engine_half"));
  c.amp.macs_per_engine_float =
      static_cast<std::uint32_t>(r.count("chip.amp.macs_per_engine_float"));
  c.amp.coeff_load_bytes_per_cycle = r.bytes_per_cycle("chip.amp.coeff_load_bytes_per_cycle");
  c.amp.pipeline_depth = static_cast<std::uint32_t>(r.count("chip.amp.pipeline_depth"));
  c.tile_model = r.string("chip.tile_model") == "isa" ? TileModel::kIsa : TileModel::kClosedForm;
  c.tile.issue_width = static_cast<std::uint32_t>(r.count("chip.tile.issue_width"));
  c.tile.result_latency = static_cast<std::uint32_t>(r.count("chip.tile.result_latency"));
  c.tile.store_bytes_per_cycle = r.bytes_per_cycle("chip.tile.store_bytes_per_cycle");
  c.tile.supervisor_simple_cycles =
      static_cast<std::uint32_t>(r.count("chip.tile.supervisor_simple_cycles"));
  c.tile.supervisor_control_cycles =
      static_cast<std::uint32_t>(r.count("chip.tile.supervisor_control_cycles"));
  c.tile.rpt_count_max = static_cast<std::uint32_t>(r.count("chip.tile.rpt_count_max"));
  c.exchange.bytes_per_cycle = r.bytes_per_cycle("chip.exchange.bytes_per_cycle");
  c.exchange.tiles_per_shared_bus =
      static_cast<std::uint32_t>(r.count("chip.exchange.tiles_per_shared_bus"));
  c.exchange.fixed_overhead = r.cycles("chip.exchange.fixed_overhead");
  c.exchange.tiles_per_column =
      static_cast<std::uint32_t>(r.count("chip.exchange.tiles_per_column"));
  c.exchange.column_hop_latency = r.cycles("chip.exchange.column_hop_latency");
  c.sync.internal_latency = r.cycles("chip.sync.internal_latency");
  c.host.bandwidth = r.bandwidth("chip.host.bandwidth");
  c.host.latency = r.duration("chip.host.latency");
  c.runtime.vertex_state_bytes = r.bytes("chip.runtime.vertex_state_bytes");
  c.runtime.stack_bytes = r.bytes("chip.runtime.stack_bytes");
  c.runtime.codelet_code_bytes = r.bytes("chip.runtime.codelet_code_bytes");
  c.runtime.exchange_code_bytes_per_transfer =
      r.bytes("chip.runtime.exchange_code_bytes_per_transfer");
  c.runtime.compute_set_overhead = r.cycles("chip.runtime.compute_set_overhead");
  return c;
}

LoadedChip load_chip(const std::string& file, const std::vector<std::string>& overrides) {
  config::Document doc = config::load_document(file);
  for (const auto& o : overrides) config::apply_override(doc, o, chip_schema());
  config::Resolved resolved = config::resolve(doc, chip_schema());
  return LoadedChip{chip_from(resolved), std::move(resolved)};
}

std::string data_dir() {
  if (const char* env = std::getenv("IPUSIM_DATA_DIR"); env && *env) return env;
  return IPUSIM_SOURCE_DIR_DEFAULT;
}

std::string default_chip_file() { return data_dir() + "/configs/chips/gc200.yaml"; }

}  // namespace ipusim
