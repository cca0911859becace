// SPDX-License-Identifier: Apache-2.0
// SystemC model of one IPU executing a compiled BSP program.
//
// Structure (visible in the SystemC hierarchy): Ipu > tile_NNNN (one per tile), exchange,
// sync. Only the Ipu has a process: a single SC_THREAD walks the program tree and, for each
// phase, asks the owning component for its duration and waits for it. No process ticks per
// cycle: tiles are evaluated as data (their per-tile cycles come from the codelet models), and
// each distinct phase is costed once and cached, since its cost depends only on the trace and
// the chip. BSP order is the program's: compute, sync, exchange.
//
// Time: the kernel's resolution is 1 ps and one tile cycle lasts round(1e12 / clock) ps; the
// exact integer cycle count is kept separately, so the ps rounding never reaches the stats.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <systemc>
#include <unordered_map>
#include <vector>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/model/engine.hpp"
#include "ipusim/model/fabric.hpp"
#include "ipusim/model/fast_forward.hpp"
#include "ipusim/stats/run_stats.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::model {

// The exchanges costed so far in a simulation, by their transfers: exchanges with the same
// transfers cost the same and add the same exchange code to their tiles, whatever their name or
// IPU (a pipeline's stages of the same layers, a tensor-parallel group's copies of one program,
// every replica's copy when all are simulated), so each is costed once. Holds pointers into the
// trace, which must outlive it.
class ExchangeCostCache {
 public:
  struct Costed {
    cost::ExchangeCost cost;
    std::vector<std::uint64_t> code;  // exchange code per tile (bytes)
  };
  const Costed& get(const ChipSpec& chip, const trace::Exchange& ex,
                    cost::ExchangeScratch& scratch);

 private:
  struct Entry {
    const trace::Exchange* exchange;
    std::unique_ptr<Costed> costed;
  };
  std::unordered_multimap<std::uint64_t, Entry> entries_;  // by a key of the transfers
};

// The costs of a program's on-chip exchanges, each costed once (plain data, no process: the
// IPU's thread asks it for an exchange's duration and waits that long).
class ExchangeCosts {
 public:
  ExchangeCosts(const ChipSpec& chip, const trace::IpuProgram& p);
  // Cost of exchange `index` (cached).
  const cost::ExchangeCost& cost(std::uint32_t index);
  // Costs every exchange not costed yet, adding its exchange code to `memory`; through
  // `shared` (null: none) when given.
  void cost_all(cost::MemoryMap& memory, ExchangeCostCache* shared = nullptr);

 private:
  const ChipSpec& chip_;
  const trace::IpuProgram& program_;
  std::vector<const cost::ExchangeCost*> costs_;            // by exchange; null: not costed yet
  std::vector<std::unique_ptr<cost::ExchangeCost>> owned_;  // those costed here
};

// The fast engine's IPU (engine.hpp).
class Ipu : public IpuModule, public LoopParty {
 public:
  SC_HAS_PROCESS(Ipu);
  // `fabric` is null for a single chip; then group steps are an error.
  // `exchange_costs` (null: none) is shared with the simulation's other IPUs.
  Ipu(sc_core::sc_module_name name, const ChipSpec& chip, const trace::IpuProgram& program,
      ModelOptions options, Placement placement = {}, Fabric* fabric = nullptr,
      ExchangeCostCache* exchange_costs = nullptr);

  bool finished() const override { return finished_; }
  IpuRunStats stats() override;
  std::exception_ptr error() const override { return error_; }

  // Fast-forward (fast_forward.hpp): cuts at group steps of every simulated IPU.
  bool cut_state(std::uint64_t time, CutState& out) const override;
  void cut_counters(std::vector<std::uint64_t>& out) const override;
  void skip(std::uint64_t periods, std::uint64_t cycles, std::vector<std::uint64_t> counters,
            std::uint64_t iterations) override;

 private:
  // A repeat loop run iteration by iteration.
  struct Frame {
    const trace::Step* loop = nullptr;
    std::uint64_t iteration = 0, iterations = 0;
  };
  // Periods a cut proved, applied when the IPU resumes.
  struct Skipped {
    std::uint64_t periods = 0, cycles = 0, iterations = 0;
    std::vector<std::uint64_t> counters;
  };

  void run();
  // Executes `steps` `times` times in a row (a memoised loop body: see ModelOptions).
  void execute(const std::vector<trace::Step>& steps, std::uint64_t times);
  void execute_step(const trace::Step& step, std::uint64_t times);
  void advance(std::uint64_t cycles);
  const cost::ComputeSetCost& compute_cost(std::uint32_t index);

  void group_step(const trace::Step& step, std::uint64_t times);
  // True if repeat step `repeat` can be timed once and scaled: its body has no group step
  // and no background transfer at any depth (cached per step).
  bool memoisable(const trace::Step& repeat);
  static bool has_background_transfer(const std::vector<trace::Step>& steps);
  // Span recording (ModelOptions::record_spans) and superstep totals (record_supersteps);
  // no-ops when off. A compute step opens its superstep (open_superstep) before its span.
  void record(SpanKind kind, std::uint32_t index, std::uint64_t start, std::uint64_t cycles,
              std::uint64_t times, std::uint32_t active_tiles = 0);
  void open_superstep(const trace::Step& compute, std::uint64_t times, std::uint32_t active_tiles);
  void record_tiles(bool exchange, std::uint32_t index, std::uint64_t start, std::uint64_t cycles,
                    std::uint64_t times);
  // Phases this engine will execute for `steps` (memoised loops once), saturating.
  std::uint64_t work(const std::vector<trace::Step>& steps);
  void tick();
  // A cut at the start of an iteration of the innermost loop, which has no group step (its
  // iterations depend on this IPU alone); skips the periods it proves.
  void local_cut();
  // Adds a skip's statistics, iterations and time (`wait`: also in kernel time).
  void apply(const Skipped& s, bool wait);
  // Every statistic the engine accumulates while it runs, in one fixed order.
  template <class Self, class F>
  static void visit_counters(Self& self, F&& f);

  const ChipSpec& chip_;
  const trace::IpuProgram& program_;
  ModelOptions options_;
  Placement placement_;
  Fabric* fabric_;
  sc_core::sc_time period_;
  cost::MemoryMap memory_;
  ExchangeCosts exchange_;  // the exchanges' costs; the tiles' memory is memory_'s
  std::vector<std::unique_ptr<cost::ComputeSetCost>> compute_cache_;
  std::vector<std::uint64_t> compute_executions_;
  std::vector<std::uint64_t> exchange_executions_;
  std::unordered_map<const trace::Step*, bool> memoisable_;
  std::uint64_t now_ = 0;  // exact cycles since start
  PhaseCycles phases_;
  PhaseCounts counts_;
  GroupStepCycles group_steps_;
  std::uint64_t host_bytes_ = 0;
  std::uint64_t background_until_ = 0;  // end of the background host transfer in flight
  bool finished_ = false;
  std::exception_ptr error_;
  std::vector<Span> spans_;
  std::vector<TileSpan> tile_spans_;
  std::uint64_t supersteps_ = 0;  // compute spans recorded so far
  std::vector<SuperstepTotals> superstep_totals_;
  std::unordered_map<const trace::Step*, std::size_t> superstep_rows_;  // compute step -> row
  std::size_t superstep_ = 0;  // the row phases go to now (superstep_totals_.size(): none yet)
  std::uint32_t depth_ = 0;    // loop nesting while recording
  std::uint64_t work_done_ = 0, work_total_ = 0;
  // Fast-forward (ModelOptions::fast_forward): the loops under way run iteration by
  // iteration, the group step waiting in the Fabric, a skip to apply when it returns, and the
  // cuts of loops with no group step, one search per loop depth (an outer loop's iterations
  // are compared at their starts while the inner loop's are compared within each).
  bool fast_forward_ = false;
  std::vector<Frame> frames_;
  const trace::Step* group_step_ = nullptr;
  std::optional<Skipped> skip_;
  std::vector<SteadyState> local_;
};

}  // namespace ipusim::model
