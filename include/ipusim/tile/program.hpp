// SPDX-License-Identifier: Apache-2.0
// Bundle programs and the worker-pipeline timing engine of the instruction-level tile model
// (docs/tile-model.md).
//
// A worker program is a list of blocks: straight-line bundles, or an `rpt` block whose body
// repeats with zero overhead (one `rpt` bundle per rpt_count_max iterations sets it up).
// A supervisor program is a tree of steps: single instructions (simple: 1 cycle; control:
// chip.tile.supervisor_control_cycles), weight loads, `runall` of one worker program per
// context, and counted brnzdec loops.
//
// Timing rules (ipu-hardware.md §3):
//  - barrel: contexts take issue turns round-robin, one bundle per turn; an idle or finished
//    context's turn is an empty cycle (rule 1);
//  - dual issue: a bundle is a main + aux pair; with issue_width 1 a full pair takes two turns;
//  - memory ports: a bundle whose loads or stores exceed a port's bytes per cycle holds the
//    port, and so the whole barrel, for ceil(bytes / rate) cycles;
//  - latency: a bundle marked `dep` waits until its context's previous bundle's result is ready
//    (issue + result latency); a stalled context loses its turn;
//  - supervisor: runall, then the supervisor resumes when the first worker exits, runs its
//    `tail` (which ends in sync), and the run ends when both it and the last worker are done
//    (rule 3); a loop's brnzdec costs a control cycle count except on its last iteration.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/tile/ops.hpp"

namespace ipusim::tile {

struct Bundle {
  OpClass main = OpClass::kNop;
  OpClass aux = OpClass::kFnop;
  std::uint32_t load_bytes = 0;   // total read by the bundle
  std::uint32_t store_bytes = 0;  // total written by the bundle
  bool pair_load = false;         // the reads are two accesses in one cycle (interleaved port)
  bool dep = false;               // uses the result of the context's previous bundle
  std::uint64_t hold = 0;         // further turns held (a run of dependent aux instructions
                                  // written as one bundle, e.g. a long fused expression)
};

// A bundle with the memory traffic of its op classes (op table bytes).
Bundle bundle(OpClass main, OpClass aux = OpClass::kFnop, bool dep = false);

struct Block {
  std::vector<Bundle> body;
  std::uint64_t repeat = 1;  // rpt iterations (rpt blocks only)
  bool rpt = false;          // repeated block
  bool software = false;     // repeated by a branch in its body (no rpt setup, no count limit)
};

struct WorkerProgram {
  std::vector<Block> blocks;
  void straight(const Bundle& b, std::uint64_t times = 1);    // appends `times` copies
  void rpt(std::vector<Bundle> body, std::uint64_t repeat);   // no-op when repeat == 0
  void loop(std::vector<Bundle> body, std::uint64_t repeat);  // software loop, body ends in
                                                              // its own branch
  std::uint64_t bundles() const;  // dynamic bundle count, without the rpt set-up bundles
                                  // that the engine issues
};

struct SupStep;
using SupBlock = std::vector<SupStep>;

struct SupStep {
  enum class Kind : std::uint8_t { kSimple, kControl, kWeightLoad, kRun, kRunCycles, kLoop };
  Kind kind = Kind::kSimple;
  std::uint64_t count = 1;             // instructions (simple/control), iterations (loop)
  std::uint64_t bytes = 0;             // kWeightLoad: bytes loaded into the AMP
  std::uint64_t load_bits = 0;         // kWeightLoad: bits per load (64: ld64putcs; 0: chip)
  std::vector<WorkerProgram> workers;  // kRun: one per context (fewer: the rest stay idle)
  std::uint64_t tail_simple = 0;       // kRun: supervisor work after the first worker exits
  std::uint64_t tail_control = 0;      //       (the final sync is one of these)
  std::uint64_t cycles = 0;            // kRunCycles: a run already timed (runall excluded)
  std::shared_ptr<SupBlock> body;      // kLoop
};

SupStep simple(std::uint64_t n = 1);
SupStep control(std::uint64_t n = 1);
SupStep weight_load(std::uint64_t bytes, std::uint64_t load_bits);
SupStep run(std::vector<WorkerProgram> workers, std::uint64_t tail_simple,
            std::uint64_t tail_control);
SupStep loop(std::uint64_t iterations, SupBlock body);
SupStep run_cycles(std::uint64_t cycles);

// Cycles of one runall: from the first worker issue to the end of the sync.
struct RunTiming {
  std::uint64_t cycles = 0;        // max(last worker, first worker + supervisor tail)
  std::uint64_t first_exit = 0;    // cycle the first worker finished
  std::uint64_t last_exit = 0;     // cycle the last worker finished
  std::uint64_t bundles = 0;       // bundles issued by all workers
  std::uint64_t stall_cycles = 0;  // cycles lost to memory ports and latency
};

// Executes the workers of one runall on the barrel (with rpt steady states fast-forwarded).
RunTiming run_workers(const ChipSpec& chip, const std::vector<WorkerProgram>& workers,
                      std::uint64_t tail_cycles);

// Cycles of a supervisor program (runs included).
std::uint64_t supervisor_cycles(const ChipSpec& chip, const SupBlock& program);

}  // namespace ipusim::tile
