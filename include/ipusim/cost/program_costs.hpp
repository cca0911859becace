// SPDX-License-Identifier: Apache-2.0
// Costs of the BSP phases of one IPU program, as plain C++ over the trace (no SystemC):
// compute sets (per-tile cycles from the codelet models), exchanges (per-tile send/receive
// limits, super-tile sharing, fixed overhead, column latency), host copies and per-tile memory.
// The SystemC model calls these once per distinct phase and caches the results: every phase
// cost depends only on the trace and the chip, so it is identical on every execution.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/trace/program.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::cost {

struct ComputeSetCost {
  std::uint64_t cycles = 0;                // phase time = slowest tile
  std::uint64_t flops = 0;                 // over all tiles
  std::uint32_t active_tiles = 0;          // tiles with at least one vertex
  std::vector<std::uint64_t> tile_cycles;  // per tile (size = chip.tiles)
};

// Per tile: sum of its vertices' cycles plus the compute-set overhead on each active tile.
ComputeSetCost compute_set_cost(const ChipSpec& chip, const trace::ComputeSet& cs);

struct ExchangeCost {
  std::uint64_t cycles = 0;           // fixed overhead + slowest tile + column latency
  std::uint64_t transfer_cycles = 0;  // slowest tile's send/receive time alone
  std::uint64_t latency_cycles = 0;   // column-distance term
  std::uint64_t total_bytes = 0;      // bytes received over all tiles
  std::uint32_t busiest_tile = 0;
  std::vector<std::uint64_t> tile_bytes;  // bytes sent + received per tile
};

// Timing rule (ipu-hardware.md §3 rule 7): each tile sends at most B bytes/cycle and receives
// at most B bytes/cycle (B = chip.exchange.bytes_per_cycle), concurrently; a multicast that
// reaches every tile of a super-tile group is received at group-size x B by each of them.
// Phase time = fixed overhead + max over tiles of max(send, receive) time, rounded up
// + the largest column distance of any transfer x column_hop_latency.
// With `exchange_code`, also adds the exchange code of every transfer to its source and
// destination tiles in that map (what memory_map() does for the exchange), in the same pass
// over the transfers. Throws TraceError for a transfer with a tile beyond chip.tiles.
struct MemoryMap;
ExchangeCost exchange_cost(const ChipSpec& chip, const trace::Exchange& ex,
                           MemoryMap* exchange_code = nullptr);

// Per-tile sums of values added to runs of tiles first, first + k, ..., first + (count - 1) k,
// each run in O(1): one difference array along every stride k in use (the difference at the
// run's first tile and after its last), summed along its stride only when drained.
// exchange_cost and memory_map both add runs of copies whose tiles step this way.
class StridedSums {
 public:
  // All sums zero, for a chip of `tiles` tiles.
  void reset(std::uint32_t tiles);
  // `v` added to each of the `count` tiles first, first + k, ...; 0 < k < tiles, and the run
  // ends before `tiles` (not checked).
  void add(std::uint32_t k, std::uint32_t first, std::uint32_t count, std::uint64_t v);
  // Every tile's sum added to the per-tile difference array `diff` (tiles + 1 entries, as
  // diff[t] += sum, diff[t + 1] -= sum) and the sums zeroed for the next use.
  void drain_into(std::vector<std::uint64_t>& diff);

 private:
  struct Stride {
    std::uint32_t k = 0;
    std::vector<std::uint64_t> diff;  // tiles entries
    bool used = false;                // nonzero entries since the last drain
  };
  std::uint32_t tiles_ = 0;
  std::vector<std::uint32_t> slot_;  // stride k -> 1 + index in strides_ (0: none yet)
  std::vector<Stride> strides_;
};

// Working buffers of exchange_cost (per-tile sums and lookup tables), kept between calls so
// that costing many exchanges of one program allocates and clears them once, not once per
// exchange. Any chip; not shared between threads.
class ExchangeScratch {
 public:
  ExchangeScratch() = default;

 private:
  friend ExchangeCost exchange_cost_and_code(const ChipSpec&, const trace::Exchange&,
                                             std::vector<std::uint64_t>*, ExchangeScratch&);
  friend ExchangeCost exchange_cost(const ChipSpec&, const trace::Exchange&, MemoryMap*,
                                    ExchangeScratch&);
  // Differences of per-tile sums (n + 1 entries each; see exchange_cost).
  std::vector<std::uint64_t> transfers_at_, sent_, alone_, shared_, received_;
  std::vector<trace::TileRange> ranges_;  // a transfer's destination ranges, sorted and merged
  StridedSums strided_sent_, strided_transfers_;  // runs of copies from stepping sources
  std::vector<std::int64_t> column_;
  std::vector<std::uint32_t> group_start_;
  std::uint32_t tiles_ = 0, tiles_per_column_ = 0, group_ = 0;  // what the tables are for
  bool clean_ = true;                // the sums are all zero (false after a costing that threw)
  std::vector<std::uint64_t> code_;  // exchange code per tile, for a memory map
};
// exchange_cost with reusable buffers; the same result.
ExchangeCost exchange_cost(const ChipSpec& chip, const trace::Exchange& ex,
                           MemoryMap* exchange_code, ExchangeScratch& scratch);
// The same, with each tile's exchange code (bytes) written to `code` (chip.tiles entries; null:
// none) instead of added to a memory map: what an exchange adds to any program's map.
ExchangeCost exchange_cost_and_code(const ChipSpec& chip, const trace::Exchange& ex,
                                    std::vector<std::uint64_t>* code, ExchangeScratch& scratch);

struct HostCopyCost {
  std::uint64_t cycles = 0;
  std::uint64_t total_bytes = 0;
};

// The one host-transfer rule: `latency` + max(the step's total bytes / `link`, each tile's bytes
// / the tile exchange rate), in tile cycles rounded up (ceil_cycles). Every caller's link and
// latency differ (a bare chip's host link; a system's PCIe, gateway, DDR and host shares).
std::uint64_t host_transfer_cycles(const ChipSpec& chip, const trace::Step& step, Bandwidth link,
                                   Duration latency);

// Host stream copy on a bare chip: host_transfer_cycles over its host link and latency.
HostCopyCost host_copy_cost(const ChipSpec& chip, const trace::Step& step);

// Per-tile memory use: tensors, vertex state, code, exchange code and stack.
struct TileMemoryUse {
  std::uint64_t tensors = 0;
  // Of `tensors`: the tensors with a lifetime, at the tile's peak over program positions (the
  // rest is live throughout).
  std::uint64_t scoped_peak = 0;
  std::uint64_t peak_position = 0;  // where they peak (with scoped_peak > 0)
  // `tensors` by trace::TensorKind (weights, activations, gradients, optimiser state, ...).
  std::array<std::uint64_t, trace::kTensorKindNames.size()> tensor_kinds{};
  std::uint64_t vertex_state = 0;
  std::uint64_t code = 0;
  std::uint64_t exchange_code = 0;
  std::uint64_t stack = 0;
  std::uint64_t total() const { return tensors + vertex_state + code + exchange_code + stack; }
};

struct MemoryMap {
  std::vector<TileMemoryUse> tiles;  // size = chip.tiles
};

// Throws TraceError if a tensor, vertex or transfer uses a tile beyond chip.tiles
// (trace::check_tiles names the item). Without `exchanges`, the exchange code is left at zero
// (exchange_cost() can add it while costing each exchange).
MemoryMap memory_map(const ChipSpec& chip, const trace::IpuProgram& program, bool exchanges = true);

// A program that does not fit in tile memory (check_memory).
class TileMemoryError : public ModelError {
 public:
  using ModelError::ModelError;
};

// Throws TileMemoryError naming the most over-committed tile, its use, its capacity and its
// biggest consumers if any tile's use exceeds chip.tile_memory; `advice` ends the message
// (kCompiledWorkloadAdvice for a compiled workload's program).
void check_memory(const ChipSpec& chip, const trace::IpuProgram& program, const MemoryMap& map,
                  std::string_view advice = {});
// What makes a compiled workload's program fit, for check_memory.
inline constexpr std::string_view kCompiledWorkloadAdvice =
    "; what makes it fit: fewer samples per micro-batch (run.micro_batch), recomputation "
    "checkpoints (run.recompute_checkpoints), more IPUs per replica (a pipeline split: "
    "run.pipeline_splits or run.pipeline_placement), or a lower "
    "run.available_memory_proportion for the convs' and matmuls' temporaries";

}  // namespace ipusim::cost
