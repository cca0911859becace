// SPDX-License-Identifier: Apache-2.0
// The run directory's data files for people's own notebooks and for `ipusim report`
// (docs/stats-reference.md), and the Chrome/Perfetto timeline (docs/reports.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/stats/run_stats.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::report {

// tiles.csv (the run directory's, and `ipusim run --tile-stats FILE`): one row per tile of
// every simulated IPU (ipu, tile, compute_cycles, exchange_bytes, memory_bytes, then the
// memory by category: the tensors by kind (weights, activations, gradients, optimiser state,
// partials, inputs, outputs, temporaries), vertex state, code, exchange code, stack), over the
// whole run.
std::string tiles_csv(const RunStats& stats);
inline constexpr const char* kTilesHeader =
    "ipu,tile,compute_cycles,exchange_bytes,memory_bytes,weight_bytes,activation_bytes,"
    "gradient_bytes,optimiser_bytes,partial_bytes,input_bytes,output_bytes,temp_bytes,"
    "vertex_state_bytes,code_bytes,exchange_code_bytes,stack_bytes";
// tiles.csv before the tensors were split by kind (still read: tensors as one category).
inline constexpr const char* kTilesHeaderTensorsTogether =
    "ipu,tile,compute_cycles,exchange_bytes,memory_bytes,tensor_bytes,vertex_state_bytes,"
    "code_bytes,exchange_code_bytes,stack_bytes";
// tiles.csv before the memory categories (still read: no breakdown).
inline constexpr const char* kTilesHeaderTotalsOnly =
    "ipu,tile,compute_cycles,exchange_bytes,memory_bytes";

// supersteps.csv: one row per distinct superstep of every simulated IPU, from the superstep
// totals the fast engine recorded (IpuRunStats::supersteps). A superstep starts at a compute
// step of the program and holds the phases up to the next one; row -1 holds the phases before
// the first compute phase. Cycle columns are totals over all the row's executions, so each
// column sums to the IPU's phase total in stats.json; a row's step, layer and pass are its
// compute set's as the engine named it (IpuRunStats::compute_sets). Empty if nothing was
// recorded.
std::string supersteps_csv(const RunStats& stats);
// Its header: ipu,superstep,step,executions,start_cycle, <phase>_cycles per kPhases, active_tiles.
std::string supersteps_header();
// The header of run directories written before supersteps.csv named each row's layers and pass.
std::string supersteps_header_without_layer();

// Time attributed to the layers and passes of a compiled trace (its provenance), per
// simulated IPU, from the program and what the engine recorded (so both engines, and memoised
// or fully run loops, give the same rows): a compute set's or exchange's cycles, FLOPs and
// bytes go to its layers and pass, each execution counted (an item that serves several layers
// is split equally among them, the remainder to the first; `group` names them, "a+b"); an
// on-chip sync goes with the next step of its list (or, at the end of a list, the last one
// before it); host and streaming copies go to "(host I/O)"; group steps with their waiting
// and external sync to "(collectives)", "(pipeline copies)" and "(external sync)". Items
// without provenance form the row "(unattributed)". The rows of an IPU add up exactly to its
// phase totals. Cycles, FLOPs and bytes are the engine's per compute set and exchange
// (IpuRunStats::compute_sets, exchanges), never costed again.
struct LayerRow {
  std::uint32_t ipu = 0;
  std::string layer;
  std::string pass;
  PhaseCycles cycles;
  std::uint64_t executions = 0;  // compute phases run
  std::uint64_t flops = 0;
  std::uint64_t exchange_bytes = 0;
  // The most memory live at any program position of the row's steps (LiveMemory): on the
  // whole IPU and on its fullest tile.
  std::uint64_t peak_live_bytes = 0;
  std::uint64_t peak_tile_live_bytes = 0;
  // The group the row's largest shared item serves: the layers ("a+b+c") of the compute set or
  // exchange shared with other layers that gave the row the most cycles; empty if none did.
  std::string group;
  std::uint64_t total() const { return cycles.total(); }
};

// Memory over the program positions of one IPU (docs/trace-format.md §4.3): at each position,
// the bytes live on the whole IPU (what is always live, on every tile, plus the tensors with a
// lifetime that are live there) and on its fullest tile (the tile with the most memory in
// `map`, the peak the chip must hold).
struct LiveMemory {
  std::uint32_t tile = 0;
  std::uint64_t always_ipu = 0, always_tile = 0;     // live throughout
  std::vector<std::uint64_t> ipu_bytes, tile_bytes;  // per position
};
LiveMemory live_memory(const trace::IpuProgram& program, const cost::MemoryMap& map);
// Each simulated IPU's live memory (live_memory), by system IPU index.
using LiveMemories = std::vector<std::pair<std::uint32_t, LiveMemory>>;
LiveMemories live_memories(const RunStats& stats, const trace::Trace& trace);
// The live memory of system IPU `ipu` in `memories`, or nullptr.
const LiveMemory* find_live_memory(const LiveMemories& memories, std::uint32_t ipu);

// Time per layer and pass of every simulated IPU, with each row's peak live memory from
// `memory` (live_memories).
std::vector<LayerRow> layer_rows(const ChipSpec& chip, const RunStats& stats,
                                 const trace::Trace& trace, const LiveMemories& memory);
// layers.csv: ipu, layer, pass, executions, <phase>_cycles per kPhases, total_cycles, flops,
// exchange_bytes, peak_live_bytes, peak_tile_live_bytes, group; rows of each IPU by total
// cycles, largest first.
std::string layers_csv(const std::vector<LayerRow>& rows);
// Its header: ipu,layer,pass,executions, <phase>_cycles per kPhases, total_cycles,flops,
// exchange_bytes,peak_live_bytes,peak_tile_live_bytes; and the header before the peaks.
std::string layers_header_without_memory();
std::string layers_header_without_group();
std::string layers_header();
// plan.csv (a run that compiled its workload): one row per conv or matmul the compiler
// planned and the layer it serves (one per layer when it serves several), in program order per
// IPU: its shape, what the planner chose (tiles, the split of each dimension, serial splits,
// vertex, the memory budget and the temporaries it needs) and what one execution cost, as the
// planner estimated it and as the run simulated it (docs/stats-reference.md "plan.csv").
struct PlanRow {
  std::uint32_t ipu = 0;  // system IPU (replica 0's IPU of its program)
  std::string layer, pass, op;
  std::string name;   // the planned shape's key: the conv's compute sets are named after it
  std::string shape;  // "n=20 c=64 h=56 w=56 k=64 kernel=3 stride=1 groups=1", or m, k, n
  std::string dtype, partials;
  std::string vertex;  // the codelet of its AMP vertices (amp_conv1x1, amp_convnx1)
  bool amp = true;     // on the AMP units (ipusim plans every conv and matmul on them)
  std::uint32_t tiles = 0, group_split = 1, row_split = 1, out_split = 1, in_split = 1,
                serial_in = 1, serial_out = 1;
  double available_memory = 0;                          // proportion of tile memory planned within
  std::uint64_t budget_bytes = 0, temporary_bytes = 0;  // per tile
  std::uint64_t rearranged_bytes = 0;  // received by its operands' rearrangement, all tiles
  // One execution: the planner's estimate (its transposed copies included), and the simulated
  // compute and exchange phases of its compute sets and exchanges plus its on-chip syncs
  // (rearrangement included; rearrangement_cycles of it).
  std::uint64_t estimated_cycles = 0, simulated_cycles = 0, rearrangement_cycles = 0;
  // Kernel rows per AMP weight load (1, 2 or 4), whether the product was planned with its
  // operands swapped (C^T = B^T A^T: then the splits are the swapped product's), and which of
  // the kernel's dimensions were moved into the input channels (poplin's expandDims: "no",
  // "rows", "columns" or "both"; then the splits are the expanded conv's), and whether it is
  // one of the three passes of a fully connected layer planned jointly (poplin's
  // fullyConnectedPass, plan::plan_fully_connected). Run directories written before these
  // columns read as 1, no, no and no.
  std::uint32_t weight_height = 1;
  bool swapped = false;
  std::string expanded = "no";
  bool joint = false;
};
std::string plan_header();
std::string plan_csv(const std::vector<PlanRow>& rows);
// The summary's lines on the `n` most expensive rows of the simulated IPU that ran longest,
// and for the first, why it costs what it does (layer_bound).
std::string top_layers_text(const ChipSpec& chip, const RunStats& stats,
                            const std::vector<LayerRow>& rows, std::size_t n);
// A row's FLOPs over its compute time against one IPU's FP16.16 peak (0 without compute).
double compute_phase_utilisation(const ChipSpec& chip, const LayerRow& row);
// What bounds a layer row: the phase kind with the largest share of its time (compute-bound
// with its AMP use against the FP16.16 peak, exchange-bound with its bytes, sync-bound,
// waiting for peers, or I/O and collectives).
std::string layer_bound(const ChipSpec& chip, const LayerRow& row);

// The name of a span as shown in the timeline (the program step's name).
std::string span_name(const Span& span, const trace::Trace& trace, std::uint32_t program);

// What a timeline shows: every phase its own span, or (kSupersteps) a compute phase with the
// on-chip sync and exchange phases after it as one "superstep" span whose args give each
// part; and only the spans that overlap [first_cycle, last_cycle] of simulated time.
struct TimelineOptions {
  enum class Detail { kPhases, kSupersteps };
  Detail detail = Detail::kSupersteps;
  std::uint64_t first_cycle = 0;
  std::uint64_t last_cycle = UINT64_MAX;
};

// Writes the Chrome trace-event JSON (ts/dur in microseconds, fractional) atomically: one
// process per simulated IPU with a "program" thread (phases or supersteps, loops nested around
// their bodies), a "background host I/O" thread and, for the IPU whose tile spans were
// recorded, one thread per active tile. Returns the number of events written.
std::uint64_t write_timeline(const std::string& path, const ChipSpec& chip, const RunStats& stats,
                             const trace::Trace& trace, const TimelineOptions& options = {});

}  // namespace ipusim::report
