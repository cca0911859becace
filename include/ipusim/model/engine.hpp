// SPDX-License-Identifier: Apache-2.0
// The two ways the model can run a program (docs/performance.md):
//  - fast (default): one SC_THREAD per IPU walks the program; tiles are evaluated as data, each
//    distinct compute set and exchange is costed once and cached, repeat loops are timed
//    once and scaled, and loops that must run iteration by iteration are fast-forwarded once
//    they provably repeat (Ipu, ipu.hpp; fast_forward.hpp);
//  - reference: the straightforward model, one SC_THREAD per tile waiting on phase events and
//    costing its own share of every phase on every execution, a controller thread advancing
//    BSP phases when all tiles are done; no caching, no loop memoisation (ReferenceIpu,
//    reference_ipu.hpp). It exists to check the fast engine and to measure its speed-up: both
//    must give bit-identical statistics.
#pragma once

#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <systemc>

#include "ipusim/stats/run_stats.hpp"

namespace ipusim::model {

enum class Engine { kFast, kReference };

// "fast" or "reference"; nullopt for anything else.
std::optional<Engine> engine_by_name(std::string_view name);
std::string_view engine_name(Engine engine);

struct ModelOptions {
  Engine engine = Engine::kFast;
  // Where the trace came from (its file name), for errors about it; empty: the trace's name.
  std::string origin;
  // Fast engine: run a repeat body once with every phase scaled by the iteration count when
  // its timing is identical on every iteration: always when the body (at any depth) has no
  // group step, since on-chip phase costs are pure functions of (trace, chip). Bodies with
  // group steps depend on other IPUs and run every iteration. The reference engine always
  // runs every iteration.
  bool memoise_loops = true;
  // Fast engine, with memoise_loops and without record_spans: a loop that runs iteration by
  // iteration is fast-forwarded once it is proved to repeat exactly: its state at a cut (a
  // group step of every simulated IPU, or an iteration's start when the body has no group
  // step) equal three times one period apart, relative to the time, on every IPU and the
  // fabric, with the same statistics added in both periods. The remaining whole periods are
  // accounted by multiplication; the results are identical (docs/architecture.md).
  bool fast_forward = true;
  // Fast engine only: record each IPU's phases as spans (IpuRunStats::spans) for the
  // timeline. Costs one small record per phase executed (a memoised loop records its body
  // once); off, the engine does no extra work.
  bool record_spans = false;
  // Fast engine only: total each distinct superstep's phases (IpuRunStats::supersteps) for
  // supersteps.csv, in memory bounded by the program's size.
  bool record_supersteps = false;
  // With record_spans: also record per-tile spans on system IPU `tile_ipu` for supersteps
  // (compute phases, numbered from 0 as in supersteps.csv) first..last (inclusive).
  bool record_tiles = false;
  std::uint32_t tile_ipu = 0;
  std::uint64_t tile_steps_first = 0;
  std::uint64_t tile_steps_last = 0;
  // Called by the engine running system IPU 0 with (done, total) units of work from time to
  // time (phases executed out of those the engine will execute); may be empty.
  std::function<void(std::uint64_t, std::uint64_t)> progress;
  // Called once the model is built (every compute set and exchange costed) and before the
  // simulation starts; may be empty. What it throws ends the run with nothing simulated:
  // `ipusim run --run` waits here for its check of the compiled trace's structure, made on a
  // second thread while the model is built.
  std::function<void()> before_run;
};

// What simulate() needs from an IPU module of either engine.
class IpuModule : public sc_core::sc_module {
 public:
  explicit IpuModule(const sc_core::sc_module_name& name) : sc_core::sc_module(name) {}
  virtual bool finished() const = 0;
  // Valid after the simulation has run to completion.
  virtual IpuRunStats stats() = 0;
  // An exception raised while running (e.g. time overflow), rethrown by simulate().
  virtual std::exception_ptr error() const = 0;
};

}  // namespace ipusim::model
