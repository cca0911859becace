// SPDX-License-Identifier: Apache-2.0
// The reference engine (`ipusim run --engine reference`): the straightforward SystemC model of
// an IPU, kept to check the fast engine (ipu.hpp) and to measure its speed-up.
//
// Every tile is a module with its own SC_THREAD. A controller thread walks the program with
// every repeat iteration in full and runs each BSP phase by notifying a phase event; every
// tile wakes up, costs its own share of the phase from its own program (its vertices of each
// compute set, the transfers it sends and receives in each exchange) with the same cost
// functions as the fast engine, waits that long in kernel time and reports done; the
// controller continues when the last tile has reported (BSP), then adds the phase's fixed
// terms (sync latency; exchange overhead and column latency). Nothing is cached between
// executions of a phase. Host copies and group steps are costed by the controller (the latter
// through the same Fabric as the fast engine).
//
// It must give bit-identical statistics to the fast engine: tests/integration/engine_test.cpp.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <systemc>
#include <vector>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/model/engine.hpp"
#include "ipusim/model/fabric.hpp"
#include "ipusim/stats/run_stats.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::model {

class ReferenceIpu;

// One tile with its own process and its own slice of the program.
class ReferenceTile : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(ReferenceTile);
  ReferenceTile(sc_core::sc_module_name name, std::uint32_t index, ReferenceIpu& ipu);

  std::uint32_t index() const { return index_; }
  std::uint64_t compute_cycles() const { return compute_cycles_; }  // busy, over the run
  std::uint64_t exchange_bytes() const { return exchange_bytes_; }  // sent + received
  std::uint64_t received_bytes() const { return received_bytes_; }
  std::uint64_t flops() const { return flops_; }

  // This tile's program, as Poplar would load it onto the tile: the vertices it runs in each
  // compute set and its part in each exchange. Entries are appended in program order.
  struct VertexEntry {
    std::uint32_t compute_set;
    std::uint32_t vertex;
  };
  struct TransferEntry {
    std::uint32_t exchange;
    std::uint32_t transfer;
    bool sends;
    bool receives;
  };
  std::vector<VertexEntry> vertices;
  std::vector<TransferEntry> transfers;

 private:
  void run();
  std::uint64_t compute_phase(std::uint32_t compute_set);
  std::uint64_t exchange_phase(std::uint32_t exchange);

  std::uint32_t index_;
  ReferenceIpu& ipu_;
  std::uint64_t compute_cycles_ = 0;
  std::uint64_t exchange_bytes_ = 0;
  std::uint64_t received_bytes_ = 0;
  std::uint64_t flops_ = 0;
};

class ReferenceIpu : public IpuModule {
 public:
  SC_HAS_PROCESS(ReferenceIpu);
  ReferenceIpu(sc_core::sc_module_name name, const ChipSpec& chip, const trace::IpuProgram& program,
               Placement placement = {}, Fabric* fabric = nullptr);

  bool finished() const override { return finished_; }
  IpuRunStats stats() override;
  std::exception_ptr error() const override { return error_; }

 private:
  friend class ReferenceTile;
  enum class Phase { kCompute, kSync, kExchange };

  void run();
  void execute(const std::vector<trace::Step>& steps);
  void execute_step(const trace::Step& step);
  // Wakes every tile for one phase and waits until all have reported; returns the slowest
  // tile's cycles.
  std::uint64_t run_phase(Phase phase, std::uint32_t index);
  void advance(std::uint64_t cycles);  // the controller's own wait
  void check_time(std::uint64_t cycles) const;
  void tile_done(std::uint64_t cycles, std::uint64_t column_distance);
  void tile_failed(std::exception_ptr error);
  void group_step(const trace::Step& step);

  const ChipSpec& chip_;
  // The program with its runs written out (v3 runs): the reference engine keeps the one-record
  // -per-transfer view it was written against, and is not on any fast path.
  trace::IpuProgram expanded_;
  const trace::IpuProgram& program_;
  Placement placement_;
  Fabric* fabric_;
  sc_core::sc_time period_;
  cost::MemoryMap memory_;
  std::vector<std::unique_ptr<ReferenceTile>> tiles_;

  // The phase being run, read by the tiles when start_ fires.
  sc_core::sc_event start_;
  sc_core::sc_event done_;
  Phase phase_ = Phase::kSync;
  std::uint32_t phase_index_ = 0;
  std::uint32_t outstanding_ = 0;
  std::uint64_t phase_max_cycles_ = 0;
  std::uint64_t phase_max_distance_ = 0;

  std::uint64_t now_ = 0;  // exact cycles since start
  PhaseCycles phases_;
  PhaseCounts counts_;
  GroupStepCycles group_steps_;
  std::uint64_t host_bytes_ = 0;
  std::uint64_t background_until_ = 0;  // end of the background host transfer in flight
  std::vector<NamedPhase> compute_sets_;
  std::vector<NamedPhase> exchanges_;
  bool finished_ = false;
  std::exception_ptr error_;
};

}  // namespace ipusim::model
