// SPDX-License-Identifier: Apache-2.0
#include "ipusim/config/chip.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "ipusim/config/field.hpp"
#include "ipusim/util/error.hpp"

#ifndef IPUSIM_SOURCE_DIR_DEFAULT
#define IPUSIM_SOURCE_DIR_DEFAULT "."
#endif

namespace ipusim {
namespace {

constexpr double kKiB = 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kBig = 1e15;

// One row per chip parameter, bound to the ChipSpec member that holds it (config/field.hpp).
template <class Access>
config::Field<ChipSpec> row(std::string path, double min, double max, std::string description,
                            std::string source, Access access, bool uncertain = false,
                            std::optional<std::string> default_text = std::nullopt) {
  return config::field<ChipSpec>(std::move(path), min, max, std::move(description),
                                 std::move(source), access, uncertain, std::move(default_text));
}

// Sources are rows of ../shared/reference/ipu-hardware.md ("§1 Tiles (IPU-cores) per IPU").
// The tile micro-architecture rows (chip.tile_model, chip.tile.*: the instruction-level model,
// docs/tile-model.md) have defaults, so that chip configs without a tile: section keep working.
const std::vector<config::Field<ChipSpec>>& chip_fields() {
  static const std::vector<config::Field<ChipSpec>> fields = {
      row("chip.name", 0, 0, "Chip name shown in reports", "-",
          [](ChipSpec& c) { return &c.name; }),
      row("chip.clock", 1e6, 1e11, "Tile clock frequency",
          "§1 Tile clock (GC200 in M2000) / Bow IPU clock", [](ChipSpec& c) { return &c.clock; }),
      row("chip.tiles", 1, 65536, "Tiles per IPU", "§1 Tiles (IPU-cores) per IPU",
          [](ChipSpec& c) { return &c.tiles; }),
      row("chip.tile_memory", kKiB, 64 * kMiB, "SRAM per tile", "§1 SRAM per tile",
          [](ChipSpec& c) { return &c.tile_memory; }),
      row("chip.worker_contexts", 1, 64,
          "Barrel-threaded worker contexts per tile (a worker issues once every N cycles)",
          "§1 Hardware threads per tile; §3 rule 1",
          [](ChipSpec& c) { return &c.worker_contexts; }),
      row("chip.datapath_width", 4, 128,
          "Width of the non-AMP vector datapath (sets the vector width: 8 B = 4 half / 2 float)",
          "§1 Non-AMP vector width (64-bit datapath)",
          [](ChipSpec& c) { return &c.datapath_width; }),
      row("chip.memory.load_bytes_per_cycle", 1, 1024, "Plain (non-interleaved) load rate per tile",
          "§1 Load/store bandwidth per tile",
          [](ChipSpec& c) { return &c.memory.load_bytes_per_cycle; }),
      row("chip.memory.interleaved_load_bytes_per_cycle", 1, 1024,
          "Load rate from interleaved memory (ld128 / ld2x64pace)",
          "§1 Load/store bandwidth per tile",
          [](ChipSpec& c) { return &c.memory.interleaved_load_bytes_per_cycle; }),
      row(
          "chip.memory.memcpy_bytes_per_cycle", 1, 1024, "On-tile copy rate",
          "§1 Local copy (memcpy) rate",
          [](ChipSpec& c) { return &c.memory.memcpy_bytes_per_cycle; }, true),
      row("chip.amp.engines_half_half", 1, 256,
          "AMP engines (output channels per pass), half in / half partials",
          "§1 AMP (\"conv unit\") counts on IPU2",
          [](ChipSpec& c) { return &c.amp.half_half.engines; }),
      row("chip.amp.engines_half_float", 1, 256, "AMP engines, half in / float partials",
          "§1 AMP (\"conv unit\") counts on IPU2",
          [](ChipSpec& c) { return &c.amp.half_float.engines; }),
      row("chip.amp.engines_float_float", 1, 256, "AMP engines, float in / float partials",
          "§1 AMP (\"conv unit\") counts on IPU2",
          [](ChipSpec& c) { return &c.amp.float_float.engines; }),
      row("chip.amp.weights_per_engine_half", 1, 256,
          "Weights held per engine = input channels per AMP group, half",
          "§1 AMP counts (weights per conv unit 16 half)",
          [](ChipSpec& c) { return &c.amp.weights_per_engine_half; }),
      row("chip.amp.weights_per_engine_float", 1, 256,
          "Weights held per engine = input channels per AMP group, float",
          "§1 AMP counts (weights per conv unit 8 float)",
          [](ChipSpec& c) { return &c.amp.weights_per_engine_float; }),
      row("chip.amp.macs_per_engine_half", 1, 64,
          "MACs per engine per AMP instruction, half input (peak = engines x this per cycle)",
          "§1 FP16.16 peak 64 MAC/cycle/tile with 16 engines; §4 core 4 cycles/position",
          [](ChipSpec& c) { return &c.amp.macs_per_engine_half; }),
      row("chip.amp.macs_per_engine_float", 1, 64,
          "MACs per engine per AMP instruction, float input",
          "§1 FP32 peak 16 MAC/cycle/tile with 16 engines; §4 core 8 cycles/position",
          [](ChipSpec& c) { return &c.amp.macs_per_engine_float; }),
      row("chip.amp.coeff_load_bytes_per_cycle", 1, 1024,
          "Supervisor load rate of weights into the AMP engines",
          "§1 AMP weight (coefficient) load",
          [](ChipSpec& c) { return &c.amp.coeff_load_bytes_per_cycle; }),
      row(
          "chip.amp.pipeline_depth", 1, 64,
          "Output positions in flight in an AMP engine: the worker loop feeds this many minus one "
          "before the first result and drains as many after the last input (tile model only)",
          "§4 getConvUnitMaxPipelineDepth = 4 (2017 default); §3 rule 4 fill/drain about 3",
          [](ChipSpec& c) { return &c.amp.pipeline_depth; }, true, "4"),
      config::enum_field<ChipSpec>(
          "chip.tile_model", kTileModelNames,
          "Vertex timing model: closed_form (poplibs estimator formulas) or isa (bundle programs "
          "on the worker-pipeline engine)",
          "-", [](ChipSpec& c) { return &c.tile_model; }, "closed_form"),
      row(
          "chip.tile.issue_width", 1, 2,
          "Instructions a context issues in one turn: 2 = a main and an auxiliary instruction per "
          "64-bit bundle, 1 = single issue (a paired bundle takes two turns)",
          "§3 rule 4 Bundles and rpt", [](ChipSpec& c) { return &c.tile.issue_width; }, false, "2"),
      row(
          "chip.tile.result_latency", 1, 64,
          "Cycles from a worker's issue to its result being usable (load-use latency); hidden "
          "while it does not exceed worker_contexts",
          "§1 Local memory load latency (6 cycles, Mk1, assumed on Mk2); §3 rule 5",
          [](ChipSpec& c) { return &c.tile.result_latency; }, true, "6"),
      row(
          "chip.tile.store_bytes_per_cycle", 1, 1024, "Store port width per tile per cycle",
          "§1 Load/store bandwidth (ld2xst64pace: 1 x 64-bit store)",
          [](ChipSpec& c) { return &c.tile.store_bytes_per_cycle; }, false, "8B/cycle"),
      row(
          "chip.tile.supervisor_simple_cycles", 1, 64,
          "Cycles of an independent supervisor instruction", "§3 rule 2 (independent charged 1)",
          [](ChipSpec& c) { return &c.tile.supervisor_simple_cycles; }, false, "1"),
      row(
          "chip.tile.supervisor_control_cycles", 1, 64,
          "Cycles of a dependent or control supervisor instruction (branch, put, runall, sync)",
          "§3 rule 2 (about 6 each)", [](ChipSpec& c) { return &c.tile.supervisor_control_cycles; },
          true, "6"),
      row(
          "chip.tile.rpt_count_max", 1, 1e9,
          "Largest rpt repeat count; longer loops run as several rpt blocks",
          "§3 rule 4 / §4 getRptCountMax (no public number)",
          [](ChipSpec& c) { return &c.tile.rpt_count_max; }, true, "4095"),
      row("chip.exchange.bytes_per_cycle", 0.125, 1024,
          "Exchange send and receive rate per tile, each direction",
          "§1 Per-tile exchange send or receive rate",
          [](ChipSpec& c) { return &c.exchange.bytes_per_cycle; }),
      row("chip.exchange.tiles_per_shared_bus", 1, 64,
          "Tiles sharing an exchange bus (super-tile); receiving the same data doubles the rate",
          "§1 Exchange bus sharing", [](ChipSpec& c) { return &c.exchange.tiles_per_shared_bus; }),
      row(
          "chip.exchange.fixed_overhead", 0, 1e9, "Fixed cost of every exchange phase",
          "§1 Exchange fixed overheads (model values)",
          [](ChipSpec& c) { return &c.exchange.fixed_overhead; }, true),
      row(
          "chip.exchange.tiles_per_column", 1, 65536,
          "Tiles per exchange column (layout assumption for the latency term)",
          "§1 Exchange timing model (no public number)",
          [](ChipSpec& c) { return &c.exchange.tiles_per_column; }, true),
      row(
          "chip.exchange.column_hop_latency", 0, 1e6,
          "Extra exchange delay per column of distance between sender and receiver",
          "§1 Exchange timing model; open question in §5 (no public number)",
          [](ChipSpec& c) { return &c.exchange.column_hop_latency; }, true),
      row(
          "chip.sync.internal_latency", 0, 1e9, "On-chip BSP sync of all tiles",
          "§1 Exchange fixed overheads (syncCycles = 90)",
          [](ChipSpec& c) { return &c.sync.internal_latency; }, true),
      row("chip.host.bandwidth", 1e3, kBig, "Host <-> IPU transfer rate, each direction",
          "§1 Host interface (chip): PCIe Gen4 x16 64 GB/s bidirectional",
          [](ChipSpec& c) { return &c.host.bandwidth; }),
      row(
          "chip.host.latency", 0, 1, "Fixed latency of one host transfer",
          "no public number (open question in §5)", [](ChipSpec& c) { return &c.host.latency; },
          true),
      row(
          "chip.runtime.vertex_state_bytes", 0, kMiB, "Memory per vertex instance (vertex state)",
          "poplar-compiler.md §7.8 (about 12 B+)",
          [](ChipSpec& c) { return &c.runtime.vertex_state_bytes; }, true),
      row(
          "chip.runtime.stack_bytes", 0, 64 * kMiB, "Always-live stack per tile",
          "poplar-compiler.md §7.8 (about 3 KB per tile)",
          [](ChipSpec& c) { return &c.runtime.stack_bytes; }, true),
      row(
          "chip.runtime.codelet_code_bytes", 0, 64 * kMiB,
          "Code per distinct codelet type used on a tile", "no public number",
          [](ChipSpec& c) { return &c.runtime.codelet_code_bytes; }, true),
      row(
          "chip.runtime.exchange_code_bytes_per_transfer", 0, kMiB,
          "Exchange code per transfer a tile takes part in",
          "poplar-compiler.md §7.8 (about 4 B per exchange instruction)",
          [](ChipSpec& c) { return &c.runtime.exchange_code_bytes_per_transfer; }, true),
      row(
          "chip.runtime.compute_set_overhead", 0, 1e9,
          "Supervisor cost to enter and leave a compute set, per tile",
          "§3 rules 2-3 (runall + sync, about 6 cycles each)",
          [](ChipSpec& c) { return &c.runtime.compute_set_overhead; }, true),
  };
  return fields;
}

}  // namespace

const config::Schema& chip_schema() {
  static const config::Schema schema("chip", config::decls_of(chip_fields()));
  return schema;
}

ChipSpec chip_from(const config::Resolved& r) {
  ChipSpec c;
  config::assign_fields(chip_fields(), r, c);
  return c;
}

std::string unused_chip_key(const ChipSpec& chip, const std::string& key) {
  const bool isa_only = key.starts_with("chip.tile.") || key == "chip.amp.pipeline_depth" ||
                        key == "chip.memory.interleaved_load_bytes_per_cycle";
  if (isa_only && chip.tile_model == TileModel::kClosedForm)
    return "it times the instruction-level tile model (chip.tile_model isa), and this run uses "
           "the closed-form one (chip.tile_model closed_form)";
  if (key == "chip.tile.result_latency" && chip.tile.result_latency <= chip.worker_contexts)
    return fmt::format(
        "a result latency of at most chip.worker_contexts ({}) cycles is hidden by the barrel "
        "schedule: a worker issues again only after the other contexts have",
        chip.worker_contexts);
  return "";
}

std::vector<std::string> overrides_without_effect(
    const std::vector<std::string>& overrides,
    const std::function<std::string(const std::string&)>& why) {
  std::vector<std::string> out;
  for (const auto& o : overrides) {
    const auto parsed = config::parse_override(o);
    if (!parsed) continue;
    if (const std::string reason = why(parsed->key); !reason.empty())
      out.push_back(fmt::format("--set {} has no effect: {}", parsed->key, reason));
  }
  return out;
}

LoadedChip load_chip(const std::string& file, const std::vector<std::string>& overrides) {
  config::Document doc = config::load_document(file);
  for (const auto& o : overrides) config::apply_override(doc, o, chip_schema());
  config::Resolved resolved = config::resolve(doc, chip_schema());
  ChipSpec spec = chip_from(resolved);
  std::vector<std::string> warnings = overrides_without_effect(
      overrides, [&](const std::string& key) { return unused_chip_key(spec, key); });
  return LoadedChip{std::move(spec), std::move(resolved), std::move(warnings)};
}

std::string data_dir() {
  if (const char* env = std::getenv("IPUSIM_DATA_DIR"); env && *env) return env;
  return IPUSIM_SOURCE_DIR_DEFAULT;
}

std::string default_chip_file() { return data_dir() + "/configs/chips/gc200.yaml"; }

}  // namespace ipusim
