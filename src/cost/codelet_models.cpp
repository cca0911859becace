// SPDX-License-Identifier: Apache-2.0
// Codelet cycle models. Each restates a poplibs cycle estimator as summarised in
// ../shared/reference/ipu-hardware.md §3-§4 (poplibs@7eac0f2), with the hardware numbers
// (worker contexts, AMP engines, vector width, load and copy rates) read from the ChipSpec.
// docs/codelets.md gives every formula in prose with a worked example.
//
// Notation used throughout: W = worker contexts, vw = vector width in elements,
// "worker cycles" are one worker's instruction count; tile cycles = W x slowest worker
// (barrel issue, ipu-hardware.md §3 rule 1) + supervisor overhead.
#include "ipusim/cost/codelet_models.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "ipusim/cost/tile_timing.hpp"
#include "ipusim/tile/amp_weight_height.hpp"
#include "ipusim/tile/reduce_plan.hpp"
#include "ipusim/util/checked.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::cost {
namespace {

using trace::DType;
using trace::Op;
using u64 = std::uint64_t;
// Cycle and FLOP arithmetic below is overflow-checked: every formula multiplies parameters
// that a trace sets (each up to 2^40), so products of two or three of them can pass 2^64.
// vertex_cost turns the overflow into a ModelError naming the vertex (issue 16, defect C).
using C = Checked;
C ceil_div(C a, C b) { return ipusim::ceil_div(a.get(), b.get()); }

// ---------------------------------------------------------------------------------------------
// Constants. Every number is a property of the codelet software (loop structure), not of the
// chip; the chip's numbers come from ChipSpec.
// ---------------------------------------------------------------------------------------------

// Barrel rendezvous: supervisor work that overlaps the shortest worker (§3 rule 3, §4).
constexpr u64 kAmp1x1Tag = 14;  // ConvPartial1x1Out "tag cost", ipu-hardware.md §4
constexpr u64 kAmpNx1Tag = 9;   // ConvPartialnx1 per-kernel-position tag, ipu-hardware.md §4

// Engines of the IPU2 "v4" half->half AMP (f16v4hihov4amp) that runs the fast 1x1 code path
// ("half with 16 engines"), ipu-hardware.md §3 rule 6 and §4.
constexpr u64 kAmpFastHalfEngines = 16;

// ConvPartial1x1Out worker (poplibs PerformanceEstimation.hpp,
// getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat; ipu-hardware.md §4), per worklist
// entry of n positions. The "common" path (half in with 16 engines or float partials) zeroes
// through the AMP ($FP_CLR): n = 0, 1, 2 cost 20, 31, 40 + (1 zeroing | 2), n >= 3
// (37 zeroing | 38) + core x (n - 3). The other paths (8-engine half->half, float) cost
// n = 0 24; n = 1 39 | 47 (half | float); n = 2 40 | 46; n >= 3 41 | 46 + core x (n - 3); and
// zeroing adds 2 + z x n for n >= 1.
constexpr u64 kAmp1x1CommonSmall[3] = {20, 31, 40};
constexpr u64 kAmp1x1CommonSmallZeroing = 1, kAmp1x1CommonSmallNoZeroing = 2;
constexpr u64 kAmp1x1CommonBaseZeroing = 37, kAmp1x1CommonBaseNoZeroing = 38;
constexpr u64 kAmp1x1OtherEmpty = 24;
constexpr u64 kAmp1x1HalfSmall[2] = {39, 40}, kAmp1x1FloatSmall[2] = {47, 46};
constexpr u64 kAmp1x1BaseHalf8Engine = 41, kAmp1x1BaseFloat = 46;
// zeroCyclesPerGroup: 8 for float in with 16 engines, else 4 for float partials, else 2.
constexpr u64 kAmp1x1ZeroBase = 2;
constexpr u64 kAmp1x1ZeroPerPosFloat16 = 8, kAmp1x1ZeroPerPosFloat = 4, kAmp1x1ZeroPerPosHalf = 2;
// State retention on the common half path (conv1x1WorkerRetentionSavings): each worker entry
// costs 7 fewer cycles, and the supervisor pays W x (7 + 3 x (IG x CG - 1)) once a vertex.
constexpr u64 kAmp1x1RetentionWorker = 7, kAmp1x1RetentionPerInGroup = 3;
// ConvPartial1x1Out supervisor outer loop (ipu-hardware.md §4 "Outer ~ 50 + ...").
constexpr u64 kAmp1x1OuterBase = 50;     // supervisor non-loop overhead, §4
constexpr u64 kAmp1x1PerConvGroup = 12;  // per conv group (+c), §4
constexpr u64 kAmp1x1PerInGroup = 16;    // per extra input group: 15 - c + 1, §4
constexpr u64 kAmp1x1LastInGroup = 11;   // last (zeroing) input group: 10 + 1, §4
constexpr u64 kAmp1x1PerOutGroup = 19;   // per output group (-c on the zeroing group), §4
constexpr u64 kAmp1x1PassNoZero = 6;     // per pass, non-zeroing, before L + inner, §4
constexpr u64 kAmp1x1PassZero = 7;       // per pass, zeroing, before L + inner, §4

// ConvPartialnx1 worker: 17 (+1 half partials) + sum over entries of [3 + f(n) - 9] (§4).
constexpr u64 kAmpNx1WorkerBase = 17;        // ipu-hardware.md §4
constexpr u64 kAmpNx1HalfPartialsExtra = 1;  // ipu-hardware.md §4 "+1 for half partials"
constexpr u64 kAmpNx1EntryOverhead = 3;      // ipu-hardware.md §4 "3 + f(n)"
constexpr u64 kAmpNx1RetentionSaving = 9;    // ipu-hardware.md §4 "-9 ... per entry"
// f(n) for n = 0, 1, 2 and the base of f(n >= 3) = base + core x (n - 3) (ipu-hardware.md §4).
constexpr u64 kAmpNx1SmallHalf[3] = {17, 29, 33};   // §4 half column
constexpr u64 kAmpNx1SmallFloat[3] = {17, 33, 44};  // §4 float column
constexpr u64 kAmpNx1BaseHalf = 34;                 // §4 f(n>=3) half
constexpr u64 kAmpNx1BaseFloat = 45;                // §4 f(n>=3) float
// ConvPartialnx1 supervisor inner loop: sum_ky [14 + sum_kx (12 + P (L + h_cost + 3))] (§4).
constexpr u64 kAmpNx1PerKy = 14;   // ipu-hardware.md §4
constexpr u64 kAmpNx1PerKx = 12;   // ipu-hardware.md §4
constexpr u64 kAmpNx1PerPass = 3;  // ipu-hardware.md §4 "+ 3"
// ConvPartialnx1 outer: 109 + W.9 + W.(9|10) + CG(17 OG + 6(OG-1) + 1) + 6(CG-1) + 1
//                       + CG(16 + IG(14 + OG(14 + inner)))   (ipu-hardware.md §4).
constexpr u64 kAmpNx1OuterBase = 109;                  // §4
constexpr u64 kAmpNx1OuterPerWorker = 9;               // §4 "W·9"
constexpr u64 kAmpNx1OuterPerWorkerFloatPartials = 9;  // §4 "W·(9|10)": ESTIMATE 9 float ...
constexpr u64 kAmpNx1OuterPerWorkerHalfPartials = 10;  // ... and 10 for half partials
constexpr u64 kAmpNx1PerOutGroupSetup = 17;            // §4 "17·OG"
constexpr u64 kAmpNx1PerOutGroupLoop = 6;              // §4 "6·(OG-1)", also "6·(CG-1)"
constexpr u64 kAmpNx1PerConvGroup = 16;                // §4 "CG·(16 + ...)"
constexpr u64 kAmpNx1PerInGroup = 14;                  // §4 "IG·(14 + ...)"
constexpr u64 kAmpNx1PerOutGroup = 14;                 // §4 "OG·(14 + inner)"
// ConvPartialnx1 zeroes its partials first (poplinCycleEstimators.cpp ConvPartialnx1 adds
// getZeroSupervisorVertexCycleEstimate): per output group, each worker stores its share of
// the group's outputs a 64-bit vector a cycle after 15 (half) or 14 (float) cycles of set-up,
// less the 10 or 9 saved by state retention (zeroPartialsRetentionSavings): 5 either way.
constexpr u64 kAmpNx1ZeroWorkerOverhead = 5;

// Horizontal-MAC style dot products (ipu-hardware.md §4 "Horizontal MAC"; poplibs
// PerformanceEstimation.hpp getConvPartialHorizontalMac* / getDenseDotProductCycles).
constexpr u64 kDotOuterHalf = 65;       // supervisor outer overhead, half, §4
constexpr u64 kDotOuterFloat = 58;      // supervisor outer overhead, float, §4
constexpr u64 kDotWorkerOverhead = 16;  // poplibs workerNonLoopOverhead
constexpr u64 kDotEntryOverhead = 19;   // poplibs per non-empty worklist entry
constexpr u64 kDotPerOutput = 7;        // poplibs per-output loop overhead
constexpr u64 kDotSetupHalf = 6;        // poplibs getDenseDotProductCycles half: 6 + n/4
constexpr u64 kDotSetupFloat = 4;       // poplibs getDenseDotProductCycles float: 4 + n/2

// Reduce (ipu-hardware.md §4 "ReduceAdd, single input").
constexpr u64 kReduceAccumulatorBytes = 16;  // 128-bit accumulators (8 half / 4 float), §4
constexpr u64 kReduceSupervisor = 33;        // §4 "33 + W·[...]"
constexpr u64 kReduceWorkerBase = 20;        // §4 "20 + ..."
constexpr u64 kReduceLoopSameType = 7;       // §4 "7..10": low end when no output conversion
constexpr u64 kReduceLoopConvert = 10;       // §4 "7..10": high end, ESTIMATE: converts on store
// popops' scalar-output worker vertex (CycleEstimationFunctions.cpp
// getCyclesEstimateForSingleInput): entry, storage and exit 1 + 2, set-up 6, remainder and
// accumulator read-out 5, the final sum of the accumulators 3, and 5 to convert to a
// non-float output.
constexpr u64 kScalarReduceFixed = 1 + 2 + 6 + 5 + 3;
constexpr u64 kScalarReduceConvert = 5;
// popops' STRIDED_REDUCE worker (getCyclesEstimateForStridedReduce, no update): entry and exit
// 3 + 2 and loop set-up 6 + 5; per outer loop 3 + the inner loop's completion and store
// (half partials: 1 + 7, or 1 + 6 for an add to float; float partials: 3 for an add, else 2,
// + 2) + 3 + (partials - 1).
constexpr u64 kStridedReduceFixed = 3 + 2 + 6 + 5;
constexpr u64 kStridedReduceLoop = 3 + 3;
// popops' ALL_REGIONS_CONTINUOUS worker (getCycleEstimateReduceAllRegionsContinuous): 12 a
// output, 10 of set-up and 7 of call and return, 2 more for an odd partial count.
constexpr u64 kContinuousReducePerOutput = 12;
constexpr u64 kContinuousReduceFixed = 10 + 7;
constexpr u64 kContinuousReduceOdd = 2;

// Elementwise (ipu-hardware.md §4 "Elementwise (popops)").
constexpr u64 kBasicOpSupervisor = 11;      // basicOpSupervisorOverhead, §4
constexpr u64 kUnarySupervisorExtra = 9;    // UnaryOp1D "11 + 9", §4
constexpr u64 kUnaryWorkerBase = 17;        // UnaryOp1D worker, §4
constexpr u64 kUnaryWorkerBaseExp = 33;     // UnaryOp1D worker for EXPONENT, §4
constexpr u64 kUnaryPerVectorOverhead = 4;  // UnaryOp1D "(c + 4)", §4
constexpr u64 kBinaryWorkerBaseHalf = 26;   // BinaryOp1D worker, half, §4
constexpr u64 kBinaryWorkerBaseFloat = 29;  // BinaryOp1D worker, float (and int), §4
constexpr u64 kBinaryPerVectorAsm = 2;      // BinaryOp1D "(c + 2)" assembly codelets, §4
constexpr u64 kBinaryPerVectorCpp = 5;      // BinaryOp1D "(c + 5)" C++ codelets, §4

// ScaledAdd (ipu-hardware.md §4 "ScaledAdd"; poplibs popops PerformanceEstimation.cpp
// getScaledArithmeticSupervisorCycleEstimate, same-type data and tensor scale).
constexpr u64 kScaledAddPerType = 21;         // perTypeSupervisorOverhead, §4
constexpr u64 kScaledAddNoRemainder = 7;      // §4 "(7|13)": 7 when n % vw == 0
constexpr u64 kScaledAddRemainder = 13;       // §4 "(7|13)": 13 otherwise
constexpr u64 kScaledAddSupervisorTail = 12;  // §4 "+ 12"
constexpr u64 kScaledAddTensorScale = 6;      // §4 "+ 6" (scale is a tensor, not a constant)
constexpr u64 kScaledAddWorkerPrologue = 15;  // poplibs same-type worker prologue
constexpr u64 kScaledAddLoopSetup = 6;        // poplibs inner loop constant overhead
constexpr u64 kScaledAddWorkerEpilogue = 4;   // poplibs: rem check 2 + final check 1 + exitz 1
constexpr u64 kScaledAddPerTailElement = 7;   // ESTIMATE: poplibs remainder paths (5..8 each)

// Cast (poplibs popops PerformanceEstimation.cpp castWorkerCycles / getCast1DCycleEstimate;
// §4 has no cast row, so these are the poplibs source values).
constexpr u64 kCastSupervisor = 19;      // setzi, runall, sync, br
constexpr u64 kCastWorkerEntry = 23;     // fromSupervisorWorkerCycles
constexpr u64 kCastWorkerPrologue = 19;  // Half_Float_core prologue
constexpr u64 kCastReadPorts = 2;        // two 64-bit reads per bundle (f32v2tof16)
constexpr u64 kCastRemainderCheck = 1;   // per remainder bit tested
constexpr u64 kCastRemainderElem = 2;    // convert + store per remainder piece

// Copy (ipu-hardware.md §1 "Local copy (memcpy) rate" and §4 "Generic on-tile Copy").
constexpr u64 kCopyCallOverhead = 288;  // fixed cost of a six-worker local copy, T3P (IPU21)

// DynamicSlice1D (ipu-hardware.md §4 "DynamicSlice1D").
constexpr u64 kSliceSupervisor = 25;  // §4 "supervisor 25"
constexpr u64 kSliceWorkerBase = 39;  // §4 "39 + ..."
constexpr u64 kSlicePerCopy = 24;     // §4 "(24 + 2·nCopies)·subElements"
constexpr u64 kSlicePerVector = 2;    // §4 "64 bits per 2 worker cycles"

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

std::string dtype_name(DType t) {
  const auto i = static_cast<std::size_t>(t);
  return i < trace::kDTypeNames.size() ? std::string(trace::kDTypeNames[i]) : "?";
}

std::string op_name(Op op) {
  const auto i = static_cast<std::size_t>(op);
  return i < trace::kOpNames.size() ? std::string(trace::kOpNames[i]) : "?";
}

// Element size (trace::dtype_bytes), an error for a value that is no dtype.
u64 bytes_of(DType t) {
  if (const u64 bytes = trace::dtype_bytes(t)) return bytes;
  throw ModelError("codelet model: unknown dtype value " + std::to_string(static_cast<int>(t)));
}

bool is_fp(DType t) { return t == DType::kHalf || t == DType::kFloat; }

C workers(const ChipSpec& chip) {
  if (chip.worker_contexts == 0) {
    throw ModelError("codelet model: chip '" + chip.name + "' has 0 worker contexts");
  }
  return chip.worker_contexts;
}

// Elements per non-AMP vector instruction: datapath bytes / element bytes (4 half, 2 float).
C vector_width(const ChipSpec& chip, DType t) {
  const C vw = chip.datapath_width.count / bytes_of(t);
  if (vw == 0) {
    throw ModelError("codelet model: chip '" + chip.name + "' datapath of " +
                     std::to_string(chip.datapath_width.count) + " B is narrower than one " +
                     dtype_name(t));
  }
  return vw;
}

// Cycles to move `bytes` at `rate` (the chip parameter `what`), rounded up by ceil_cycles.
C cycles_at(Bytes bytes, BytesPerCycle rate, const char* what) {
  if (rate.value <= 0) {
    throw ModelError(std::string("codelet model: ") + what + " must be positive");
  }
  return (bytes / rate).count;
}

C at_least_one(C v) { return std::max<C>(v, 1); }

// Barrel rule with rendezvous tag: max(W x slowest, W x fastest + tag) (§3 rules 1 and 3).
C barrel(C w, C slowest, C fastest, C tag) { return std::max(w * slowest, w * fastest + tag); }

// ---------------------------------------------------------------------------------------------
// AMP
// ---------------------------------------------------------------------------------------------

struct AmpConfig {
  C engines = 0;     // output channels per pass
  C weights = 0;     // input channels per AMP group (weights per engine)
  C core = 0;        // worker cycles per output position = weights / macs per engine
  C coeff_load = 0;  // L: supervisor cycles to load one pass of weights
  bool half_in = true;
  bool half_partials = true;
  bool fast = false;  // the "c = 1" path: half in with float partials or >= 16 engines
};

// Weight-load rate of a vertex: the chip's, capped by the vertex's load width when narrower.
BytesPerCycle coeff_load_rate(const ChipSpec& chip, std::uint64_t coeff_load_bits) {
  const BytesPerCycle chip_rate = chip.amp.coeff_load_bytes_per_cycle;
  if (coeff_load_bits == 0) return chip_rate;
  return BytesPerCycle{std::min(chip_rate.value, static_cast<double>(coeff_load_bits) / 8.0)};
}

AmpConfig amp_config(const ChipSpec& chip, DType in, DType partials,
                     std::uint64_t coeff_load_bits) {
  AmpConfig c;
  c.engines = amp_engines(chip, in, partials);
  c.half_in = in == DType::kHalf;
  c.half_partials = partials == DType::kHalf;
  c.weights = c.half_in ? chip.amp.weights_per_engine_half : chip.amp.weights_per_engine_float;
  const C macs = c.half_in ? chip.amp.macs_per_engine_half : chip.amp.macs_per_engine_float;
  if (c.weights == 0 || macs == 0) {
    throw ModelError("codelet model: chip '" + chip.name + "' has no AMP weights/MACs for " +
                     dtype_name(in) + " input");
  }
  c.core = ceil_div(c.weights, macs);
  c.coeff_load =
      cycles_at(Bytes{(c.engines * c.weights * bytes_of(in)).get()},
                coeff_load_rate(chip, coeff_load_bits), "amp.coeff_load_bytes_per_cycle");
  c.fast = c.half_in && (!c.half_partials || c.engines >= kAmpFastHalfEngines);
  return c;
}

// Worker cycles of one ConvPartial1x1Out worklist entry of n positions (the constants above).
C amp1x1_worker(const AmpConfig& c, C n, bool zeroing) {
  if (c.fast) {
    const C cycles = n < 3 ? kAmp1x1CommonSmall[n.get()] +
                                 (zeroing ? kAmp1x1CommonSmallZeroing : kAmp1x1CommonSmallNoZeroing)
                           : (zeroing ? kAmp1x1CommonBaseZeroing : kAmp1x1CommonBaseNoZeroing) +
                                 c.core * (n - 3);
    return cycles - kAmp1x1RetentionWorker;
  }
  if (n == 0) return kAmp1x1OtherEmpty;
  C cycles = n < 3 ? (c.half_in ? kAmp1x1HalfSmall : kAmp1x1FloatSmall)[n.get() - 1]
                   : (c.half_in ? kAmp1x1BaseHalf8Engine : kAmp1x1BaseFloat) + c.core * (n - 3);
  if (zeroing) {
    const C z = !c.half_in && c.engines == kAmpFastHalfEngines ? kAmp1x1ZeroPerPosFloat16
                : !c.half_partials                             ? kAmp1x1ZeroPerPosFloat
                                                               : kAmp1x1ZeroPerPosHalf;
    cycles += kAmp1x1ZeroBase + z * n;
  }
  return cycles;
}

// Tile cycles of the worker phase of one pass: positions split over W as evenly as possible.
// The slowest and fastest workers are the dearer and cheaper of the two share sizes (a worker
// of 2 positions costs more than one of 3), as the estimator takes the max and min over them.
C amp1x1_inner(const AmpConfig& c, C w, C positions, bool zeroing) {
  const C big = amp1x1_worker(c, ceil_div(positions, w), zeroing);
  const C small = amp1x1_worker(c, positions / w, zeroing);
  return barrel(w, std::max(big, small), std::min(big, small), kAmp1x1Tag);
}

// ConvPartialnx1 worklist entry of n positions for one kernel position: 3 + f(n) - 9 (§4).
C ampnx1_entry(const AmpConfig& c, C n) {
  C f = 0;
  if (n < 3) {
    f = c.half_in ? kAmpNx1SmallHalf[n.get()] : kAmpNx1SmallFloat[n.get()];
  } else {
    f = (c.half_in ? kAmpNx1BaseHalf : kAmpNx1BaseFloat) + c.core * (n - 3);
  }
  return kAmpNx1EntryOverhead + f - kAmpNx1RetentionSaving;
}

C ampnx1_worker_base(const AmpConfig& c) {
  return kAmpNx1WorkerBase + (c.half_partials ? kAmpNx1HalfPartialsExtra : 0);
}

// ConvPartialnx1 worker with one worklist entry of n positions.
C ampnx1_worker(const AmpConfig& c, C n) { return ampnx1_worker_base(c) + ampnx1_entry(c, n); }

// A worker whose share is output positions [begin, end) of a field whose rows hold `width`
// positions: one worklist entry per row it touches (poplin's partitionConvPartialByWorker
// cuts each share at row ends).
C ampnx1_worker_rows(const AmpConfig& c, std::uint64_t begin, std::uint64_t end,
                     std::uint64_t width) {
  if (end <= begin) return ampnx1_worker_base(c);
  const std::uint64_t first_row = begin / width, last_row = (end - 1) / width;
  if (first_row == last_row) return ampnx1_worker(c, end - begin);
  const std::uint64_t head = (first_row + 1) * width - begin;
  const std::uint64_t tail = end - last_row * width;
  const std::uint64_t full = last_row - first_row - 1;
  return ampnx1_worker_base(c) + ampnx1_entry(c, head) + C(full) * ampnx1_entry(c, width) +
         ampnx1_entry(c, tail);
}

}  // namespace

std::uint32_t amp_engines(const ChipSpec& chip, trace::DType in, trace::DType partials) {
  const AmpPath* path = nullptr;
  if (in == DType::kHalf && partials == DType::kHalf) path = &chip.amp.half_half;
  if (in == DType::kHalf && partials == DType::kFloat) path = &chip.amp.half_float;
  if (in == DType::kFloat && partials == DType::kFloat) path = &chip.amp.float_float;
  if (path == nullptr) {
    throw ModelError("AMP has no " + dtype_name(in) + " -> " + dtype_name(partials) +
                     " path (supported: half->half, half->float, float->float)");
  }
  if (path->engines == 0) {
    throw ModelError("chip '" + chip.name + "' has 0 AMP engines for " + dtype_name(in) + " -> " +
                     dtype_name(partials));
  }
  return path->engines;
}

VertexCost amp_conv1x1(const ChipSpec& chip, const AmpConvArgs& a) {
  const AmpConfig c = amp_config(chip, a.in, a.partials, a.coeff_load_bits);
  const C w = workers(chip);
  const C cg = at_least_one(a.groups);
  const C ig = at_least_one(ceil_div(a.in_chans, c.weights));
  const C og = at_least_one(ceil_div(a.out_chans, c.engines));
  const C passes = 1;  // outChansPerGroup = engines, so one pass per output group
  // The common code path's outer-loop constants ("c"): half in with 16 engines, or float
  // partials (float in included).
  const C cc = c.fast || !c.half_partials ? 1 : 0;
  const C inner_nz = amp1x1_inner(c, w, a.positions, false);
  const C inner_z = amp1x1_inner(c, w, a.positions, true);
  const C L = c.coeff_load;

  const C other_in_groups =
      (ig - 1) * (kAmp1x1PerInGroup - cc +
                  og * (kAmp1x1PerOutGroup + passes * (kAmp1x1PassNoZero + L + inner_nz)));
  const C zeroing_in_group = kAmp1x1LastInGroup + og * (kAmp1x1PerOutGroup - cc +
                                                        passes * (kAmp1x1PassZero + L + inner_z));
  const C per_conv_group = kAmp1x1PerConvGroup + cc + other_in_groups + zeroing_in_group;

  const C retention =
      c.fast ? w * (kAmp1x1RetentionWorker + kAmp1x1RetentionPerInGroup * (ig * cg - 1)) : C(0);
  VertexCost cost;
  cost.cycles = C(kAmp1x1OuterBase + retention + cg * per_conv_group).get();
  cost.flops = (C(2) * a.positions * a.in_chans * a.out_chans * cg).get();
  return cost;
}

VertexCost amp_convnx1(const ChipSpec& chip, const AmpConvArgs& a) {
  const std::uint64_t h = std::max<std::uint64_t>(a.weight_height, 1);
  AmpConfig c = amp_config(chip, a.in, a.partials, a.coeff_load_bits);
  if (!tile::valid_weight_height(h, c.weights.get())) {
    throw ModelError("amp_convnx1: weight height must be 1, 2 or 4 and divide the " +
                     std::to_string(c.weights.get()) + " weights per engine, found " +
                     std::to_string(h));
  }
  if (h == 4) {  // its weights are shuffled with 64-bit loads (tile::kHeight4LoadBytesPerCycle)
    c.coeff_load =
        cycles_at(Bytes{(c.engines * c.weights * bytes_of(a.in)).get()},
                  BytesPerCycle{std::min(coeff_load_rate(chip, a.coeff_load_bits).value,
                                         static_cast<double>(tile::kHeight4LoadBytesPerCycle))},
                  "amp.coeff_load_bytes_per_cycle");
  }
  const C w = workers(chip);
  const C cg = at_least_one(a.groups);
  // With weight height h an engine's weights hold weights / h input channels of h kernel rows
  // (poplin's convUnitWeightHeight): input groups of weights / h channels, ceil(kh / h) row
  // passes.
  const C ig = at_least_one(ceil_div(a.in_chans, c.weights / h));
  const C og = at_least_one(ceil_div(a.out_chans, c.engines));
  const C kh = at_least_one(ceil_div(a.kernel_h, h));
  const C kw = at_least_one(a.kernel_w);
  // h_cost: the supervisor's weight-height set-up per pass (tile::weight_height_setup).
  const C h_cost = tile::weight_height_setup(h);
  const C passes = 1;  // outChansPerGroup = engines

  // One worklist entry per worker per kernel position; weights reloaded for every row pass and
  // kernel column (at height 4 with 64-bit loads, above).
  // Each worker takes an equal contiguous share of the positions; with a known row width the
  // share is one worklist entry per row it touches.
  C slowest = ampnx1_worker(c, ceil_div(a.positions, w));
  C fastest = ampnx1_worker(c, a.positions / w);
  if (a.width > 0 && a.positions > 0) {
    const std::uint64_t workers_n = w.get();
    for (std::uint64_t i = 0; i < workers_n; ++i) {
      const std::uint64_t b = a.positions * i / workers_n, e = a.positions * (i + 1) / workers_n;
      const C cost = ampnx1_worker_rows(c, b, e, a.width);
      slowest = i == 0 ? cost : std::max(slowest, cost);
      fastest = i == 0 ? cost : std::min(fastest, cost);
    }
  }
  const C per_kpos = barrel(w, slowest, fastest, kAmpNx1Tag);
  const C per_kx = kAmpNx1PerKx + passes * (c.coeff_load + h_cost + kAmpNx1PerPass + per_kpos);
  const C inner = kh * kAmpNx1PerKy + kh * kw * per_kx;

  const C per_worker =
      kAmpNx1OuterPerWorker +
      (c.half_partials ? kAmpNx1OuterPerWorkerHalfPartials : kAmpNx1OuterPerWorkerFloatPartials);
  // The two "+ 1" terms are as written in §4's outer formula (ipu-hardware.md §4).
  const C setup = kAmpNx1OuterBase + w * per_worker +
                  cg * (kAmpNx1PerOutGroupSetup * og + kAmpNx1PerOutGroupLoop * (og - 1) + 1) +
                  kAmpNx1PerOutGroupLoop * (cg - 1) + 1;
  const C loops =
      cg * (kAmpNx1PerConvGroup + ig * (kAmpNx1PerInGroup + og * (kAmpNx1PerOutGroup + inner)));

  VertexCost cost;
  // Zeroing: outputs of one output group (positions x E) split over the workers, in vectors.
  const C zero_worker =
      ceil_div(ceil_div(C(a.positions) * c.engines, w), vector_width(chip, a.partials)) +
      kAmpNx1ZeroWorkerOverhead;
  const C zeroing = w * og * cg * zero_worker;
  cost.cycles = C(setup + loops + zeroing).get();
  cost.flops =
      (C(2) * a.positions * a.in_chans * a.out_chans * cg * at_least_one(a.kernel_h) * kw).get();
  return cost;
}

namespace {

// brnzdec's 6-cycle stall on every iteration but the last (poplibs' brnzdec_cycles).
C brnzdec_loop(C n) { return C(6) * (n - 1) + 1; }

// One worklist entry of n positions of a SLIC worker pass: its preamble and row, times the
// passes over the input (getConvPartialSlicSupervisorInnerLoopCycleEstimateHalfFloat's loop
// body).
C slic_entry(std::uint64_t n, bool half8, bool float_partials, std::uint64_t passes,
             std::uint64_t stride, bool zeroing) {
  const std::uint64_t threshold = half8 ? 6 : 5;
  C row = 0;
  if (stride == 1) {
    if (n < threshold) {
      // Short rows: the estimator's terms (1 + (n-1) + 2 + (4-n) + 2 + (3-(4-n)) + 3) sum to
      // n + 10 without zeroing.
      row = zeroing ? C(10) + (n > 1 ? n : 0) + 3 : C(7) + (n == 1 ? 6 : n + 10);
    } else {
      row = C(15) + (n - 5) + (!zeroing && half8 ? 3 : 0);
    }
  } else {
    row = n < 3 ? C(7) + (n == 1 ? 3 : 5) + 3 : C(15) + 2 * (n - 3);
  }
  if (float_partials) row = row - 1;  // a dummy dual load steps the pointers
  return C(half8 ? 9 : 10) + (zeroing ? 1 : 0) + (float_partials ? 3 : 0) + row * passes;
}

}  // namespace

VertexCost amp_slic(const ChipSpec& chip, const SlicArgs& a) {
  const bool float_partials = a.partials == DType::kFloat;
  if (a.partials != DType::kHalf && !float_partials)
    throw ModelError("amp_slic: partials must be half or float, found " + dtype_name(a.partials));
  const bool sixteen = amp_engines(chip, DType::kHalf, DType::kHalf) == 16;
  if (a.chains != 2 && a.chains != 4)
    throw ModelError("amp_slic: conv-unit chains must be 2 or 4, found " +
                     std::to_string(a.chains));
  if (a.chains == 4 && (float_partials || !sixteen))
    throw ModelError("amp_slic: 4 chains need half partials and 16 half engines");
  // poplin's groupings (ConvVertexType.cpp getConvVertexSLICCandidates): 1x4, 2x2, 4x1, and
  // 8x1 and 16x1 with half partials on 16 engines.
  const std::uint64_t g = a.groups_per_group;
  const bool grouping = (g == 1 && a.chans == 4) || (g == 2 && a.chans == 2) ||
                        (g == 4 && a.chans == 1) ||
                        ((g == 8 || g == 16) && a.chans == 1 && !float_partials && sixteen);
  if (!grouping)
    throw ModelError(fmt::format(
        "amp_slic: conv groups per group x channels must be 1x4, 2x2, 4x1 (or 8x1, 16x1 with "
        "half partials on 16 engines), found {}x{}",
        g, a.chans));
  if (a.stride != 1 && a.stride != 2)
    throw ModelError("amp_slic: the output stride must be 1 or 2, found " +
                     std::to_string(a.stride));
  const C w = workers(chip);
  const std::uint64_t wn = w.get();
  const bool half8 = a.chains == 2 && !float_partials;
  const std::uint64_t passes = a.chains == 4 ? 1 : 2;  // passes over the input data
  const bool wide = g > 4;
  // Each worker's share of the positions cut at row ends (partitionConvPartialByWorker): a
  // head, whole rows and a tail, each a worklist entry. Worker id, output pointers, input
  // pointer, worklist DeltaN (load, unpack, base), entries / 3, zeroing flag and strides and
  // half8's zeroing decision: 17, 4 more for 8 or 16 groups; half8 decides on the merge (2).
  const auto worker = [&](std::uint64_t b, std::uint64_t e, bool zeroing) {
    C cycles = C(17) + (wide ? 4 : 0) + (half8 ? 2 : 0);
    const auto entry = [&](std::uint64_t n) {
      return slic_entry(n, half8, float_partials, passes, a.stride, zeroing);
    };
    if (e <= b) return cycles;
    if (a.width == 0 || b / a.width == (e - 1) / a.width) return cycles + entry(e - b);
    const std::uint64_t first = b / a.width, last = (e - 1) / a.width;
    return cycles + entry((first + 1) * a.width - b) + C(last - first - 1) * entry(a.width) +
           entry(e - last * a.width);
  };
  const auto inner = [&](bool zeroing) {
    C slowest = 0;
    for (std::uint64_t i = 0; i < wn; ++i)
      slowest =
          std::max(slowest, worker(a.positions * i / wn, a.positions * (i + 1) / wn, zeroing));
    // half8 merges its two outputs on the zeroing pass: 2 + 2 per position.
    return w * slowest + (half8 && zeroing ? C(2) + C(2) * a.positions : C(0));
  };
  const C inner_zero = inner(true);
  C inner_rest = inner(false);

  // Weight load: with 4 channels the supervisor's loop, pointer and branch; otherwise the
  // workers rearrange the weights (10 or 12 cycles each, 11 with 8 or 16 groups); then 16
  // ld64putcs.
  C load = 16;
  if (a.chans == 4) {
    load += 18;
  } else {
    const C worker_load = C(g == 2 ? 12 : 10) + (wide ? 1 : 0);
    load += 9 + 6 + worker_load * w + 6;
  }
  const C cgg = at_least_one(a.group_groups);
  const C sub_kernels = at_least_one(C(ceil_div(a.kernel_w, 4))) * at_least_one(a.kernel_h);
  C group_body = half8 ? 12 : 15;
  C sub_kernel_body = 0;
  if (!wide) {
    // pointers swapped or not, worklist pointer, zeroing flag and stride, runall, sync, the
    // next weights' pointer
    sub_kernel_body = load + (half8 ? 0 : 3) + 2 + (half8 ? 0 : 1) + 6 + 1 + 6 + 1;
  } else {
    const C strides = C(g / 4);
    const C stride_body = load + 6 + 1 + 6 + 2 + 6;
    sub_kernel_body = stride_body * strides + brnzdec_loop(strides) + 2 + 2 + 6 + 3 + 2;
    group_body += 2 + 6;    // the group counter kept on the stack
    inner_rest *= strides;  // as the estimator has it: the passes after the first only
  }
  const C cycles = C(half8 ? 25 : 28) + group_body * cgg + brnzdec_loop(cgg) +
                   sub_kernel_body * sub_kernels + brnzdec_loop(sub_kernels) + cgg * inner_zero +
                   cgg * (sub_kernels - 1) * inner_rest;
  VertexCost cost;
  cost.cycles = cycles.get();
  cost.flops = (C(2) * a.positions * a.chans * a.chans * g * cgg * at_least_one(a.kernel_h) *
                at_least_one(a.kernel_w))
                   .get();
  return cost;
}

std::uint64_t hmac_out_chans_per_group(trace::DType partials) {
  return partials == DType::kFloat ? 1 : 2;
}
std::uint64_t hmac_in_grain(trace::DType in) { return in == DType::kFloat ? 1 : 2; }

namespace {

// One dense dot product of `size` activations (poplibs getDenseDotProductCycles): the loop over
// the widest vector dividing the size, one cycle a vector (two below 64 bits, whose weights
// then load apart, one more cycle per output), plus the rpt, wind-down, half/half conversion,
// the add to the previous partials and the branch. Half/half produces two outputs at once.
C hmac_dot(std::uint64_t vw, bool float_acts, bool float_partials, std::uint64_t size) {
  const bool half_half = !float_acts && !float_partials;
  const std::uint64_t outs = half_half ? 2 : 1;
  const C overhead = C(3 * outs) + (half_half ? 1 : 0) + 3 + 1;
  std::uint64_t width = std::bit_ceil(vw);
  while (size % width != 0) width /= 2;
  const bool narrow = width < vw;  // less than 64 bits a load
  return overhead + (narrow ? outs : 0) + C(size / width) * (narrow ? 2 : 1) - (float_acts ? 0 : 1);
}

}  // namespace

VertexCost conv_hmac(const ChipSpec& chip, const HmacArgs& a) {
  const bool float_acts = a.in == DType::kFloat, float_partials = a.partials == DType::kFloat;
  if (!is_fp(a.in) || !is_fp(a.partials) || (float_acts && !float_partials)) {
    throw ModelError("conv_hmac: no " + dtype_name(a.in) + " -> " + dtype_name(a.partials) +
                     " vertex (supported: half->half, half->float, float->float)");
  }
  const C w = workers(chip);
  const std::uint64_t wn = w.get();
  const std::uint64_t vw = vector_width(chip, a.in).get();
  const std::uint64_t ocpg = hmac_out_chans_per_group(a.partials);
  const C kernel = at_least_one(a.kernel_h) * at_least_one(a.kernel_w);
  // The field as rows of `width` (one row when width is 0, a 1x1 conv's flattened field).
  const std::uint64_t width = a.width == 0 ? a.positions : std::min(a.width, a.positions);
  const std::uint64_t rows = width == 0 ? 0 : ipusim::ceil_div(a.positions, width);
  // The 1x1 specialisation: half activations, float partials, a 1x1 kernel on one row
  // (canUseHorizontalMac1x1Vertex, horizontalMacHas1x1Specialisation).
  const bool one_by_one = kernel == 1 && rows <= 1 && !float_acts && float_partials;

  // The slowest worker (estimateConvPartialHorizontalMacInnerLoopCycles): rows split in
  // W / gcd(W, rows) parts, a worker taking ceil(parts / W) of them, as whole rows and one
  // partial row of ceil-ish size.
  C worker_entries = 0;
  if (rows > 0) {
    const std::uint64_t split = wn / std::gcd(wn, rows);
    const std::uint64_t most = ipusim::ceil_div(rows * split, wn);
    const std::uint64_t whole = most / split, part = most % split;
    const C dot = hmac_dot(vw, float_acts, float_partials, a.in_chans);
    // One worklist entry of n positions, each a dot product per output pair (or channel):
    // getConvPartialHorizontalMacCycleEstimate with its output channels halved for half
    // partials, so one here.
    const auto entry = [&](std::uint64_t n) {
      if (n == 0) return C(7);
      return one_by_one ? C(13) + 1 + C(n) * (C(2) + dot) : C(19) + C(n) * (C(7) + dot);
    };
    worker_entries = C(whole) * entry(width);
    if (part != 0) worker_entries += entry(part * (width + split - 1) / split);
  }
  // Per kernel position: 16 less the state retention (15 with the 1x1 specialisation, 6 for
  // half activations), then the entries; 16 more once.
  const C retention = one_by_one ? 15 : (float_acts ? 0 : 6);
  const C inner = w * (kernel * (C(16) - retention + worker_entries) + 16);

  const C og = at_least_one(ipusim::ceil_div(a.out_chans, ocpg));
  const C cg = at_least_one(a.groups);
  const C ig = 1;
  // The supervisor (getConvPartialHorizontalMacSupervisorOuterLoopCycleEstimate), whose worker
  // retention term is called with the partials' type in the activations' place.
  const C outer = C(float_acts ? 58 : 65) - (one_by_one ? 10 : 0) + w * (float_partials ? 9 : 10) +
                  w * (one_by_one ? 15 : (float_partials ? 0 : 6)) +
                  cg * (C(23) + ig * (C(15) + og * (C(10) + inner)));
  // Zeroing the partials first (estimateZeroSupervisorCycles, costed as float stores: 64 bits
  // two elements at a time), skipped by the 1x1 specialisation with one channel a group.
  C zeroing = 0;
  if (!(one_by_one && ocpg == 1)) {
    const C per_worker = ceil_div(C(a.positions) * ocpg, w);
    zeroing = w * og * cg * (ceil_div(per_worker, vector_width(chip, DType::kFloat)) + 5);
  }
  VertexCost cost;
  cost.cycles = C(outer + zeroing).get();
  cost.flops = (C(2) * a.positions * a.in_chans * a.out_chans * cg * kernel).get();
  return cost;
}

VertexCost dot(const ChipSpec& chip, trace::DType in, trace::DType partials, std::uint64_t length,
               std::uint64_t count) {
  if (!is_fp(in) || !is_fp(partials) || (in == DType::kFloat && partials == DType::kHalf)) {
    throw ModelError("dot: no " + dtype_name(in) + " -> " + dtype_name(partials) +
                     " dot product (supported: half->half, half->float, float->float)");
  }
  const C w = workers(chip);
  const bool half = in == DType::kHalf;
  // About 1 cycle per datapath-width of activations (§4), plus the dense-dot setup.
  const C vectors = ceil_div(length, vector_width(chip, in));
  const C per_dot = (half ? kDotSetupHalf : kDotSetupFloat) + vectors;
  const C worker =
      kDotWorkerOverhead + kDotEntryOverhead + ceil_div(count, w) * (kDotPerOutput + per_dot);
  VertexCost cost;
  cost.cycles = C((half ? kDotOuterHalf : kDotOuterFloat) + w * worker).get();
  cost.flops = (C(2) * length * count).get();
  return cost;
}

namespace {

// The vector loop of popops' reduce vertices over `in` elements (tile::reduce_vector).
tile::ReduceVector reduce_vector(const ChipSpec& chip, bool add, DType in) {
  vector_width(chip, in);  // a datapath narrower than one element is an error
  return tile::reduce_vector(add, bytes_of(in), chip.datapath_width.count, kReduceAccumulatorBytes);
}

// Worker cycles of popops' SCALAR_OUTPUT_SINGLE_INPUT vertex over n partials
// (getCyclesEstimateForSingleInput): an add loads one 128-bit accumulator's worth (8 half, 4
// float) in two 64-bit loads a loop, other operators one vector a cycle; one cycle per
// element of the remainder.
C scalar_reduce_worker(const ChipSpec& chip, Op op, DType in, DType out, C n) {
  const tile::ReduceVector v = reduce_vector(chip, op == Op::kAdd, in);
  return kScalarReduceFixed + C(v.loads) * n / v.per_loop() + n % v.per_loop() +
         (out == DType::kFloat ? 0 : kScalarReduceConvert);
}

}  // namespace

namespace {

// Worker cycles of popops' STRIDED_REDUCE vertex over `outputs` contiguous outputs of
// `inputs` partials each, a row apart: one outer loop per vector of outputs (4 half, 2 float:
// the datapath, and the accumulator width for an add).
C strided_reduce_worker(const ChipSpec& chip, Op op, DType in, DType out, C outputs, C inputs) {
  if (outputs == 0) return 0;
  const bool add = op == Op::kAdd;
  const C post = tile::strided_reduce_post(in == DType::kHalf, add, out == DType::kFloat);
  return kStridedReduceFixed + (kStridedReduceLoop + post + inputs - 1) *
                                   ceil_div(outputs, reduce_vector(chip, add, in).per_load);
}

// Worker cycles of popops' ALL_REGIONS_CONTINUOUS vertex: `outputs` outputs, each of `inputs`
// contiguous partials read a 64-bit vector a cycle.
C continuous_reduce_worker(const ChipSpec& chip, DType in, C outputs, C inputs) {
  if (outputs == 0) return 0;
  // Its estimator reads the accumulator's width whatever the operator (getOpVectorWidth).
  const C per_cycle = reduce_vector(chip, /*add=*/true, in).per_load;
  return outputs * (inputs / per_cycle) + (inputs.get() % 2 == 1 ? kContinuousReduceOdd : 0) +
         kContinuousReducePerOutput * outputs + kContinuousReduceFixed;
}

}  // namespace

namespace {

// The workers' pieces of a reduction of `inputs` partials to one value (tile::scalar_reduce_pieces:
// an add takes two vectors an operation).
std::vector<std::uint64_t> scalar_reduce_pieces(const ChipSpec& chip, Op op, DType in,
                                                std::uint64_t inputs) {
  const C vw = vector_width(chip, in);
  return tile::scalar_reduce_pieces(inputs, workers(chip).get(),
                                    (op == Op::kAdd ? 2 : 1) * vw.get(), vw.get());
}

}  // namespace

std::uint64_t scalar_reduce_split(const ChipSpec& chip, trace::Op op, trace::DType in,
                                  std::uint64_t inputs) {
  return scalar_reduce_pieces(chip, op, in, inputs).size();
}

VertexCost reduce(const ChipSpec& chip, trace::Op op, trace::DType in, trace::DType out,
                  std::uint64_t outputs, std::uint64_t inputs, trace::ReduceLayout layout,
                  bool first_stage) {
  if (op != Op::kAdd && op != Op::kMul && op != Op::kMax && op != Op::kMin) {
    throw ModelError("reduce: operator '" + op_name(op) +
                     "' is not a reduction "
                     "(supported: add, mul, max, min)");
  }
  const C w = workers(chip);
  if (outputs == 1 && inputs > 1) {
    // One output: popops' scalar-output reduction, split over the workers in pieces
    // (tile::scalar_reduce_pieces), then, with more than one piece, a second stage reducing
    // the pieces' results on one worker, unless that stage is a vertex of the next compute set
    // (`first_stage`, as popops runs it). Each stage holds the tile for W x its slowest
    // worker's cycles (the barrel).
    const auto pieces = scalar_reduce_pieces(chip, op, in, inputs);
    C slowest = 0;
    for (const std::uint64_t n : pieces)
      slowest = std::max(slowest, scalar_reduce_worker(chip, op, in, out, n));
    C cycles = w * slowest;
    if (pieces.size() > 1 && !first_stage)
      cycles += w * scalar_reduce_worker(chip, op, out, out, pieces.size());
    VertexCost cost;
    cost.cycles = cycles.get();
    cost.flops = inputs - 1;
    return cost;
  }
  if (layout != trace::ReduceLayout::kPartialSums) {
    // popops splits the outputs over the workers, in vectors for a strided reduction
    // (findSplitsBetweenWorkers); the tile is held for W x the busiest worker.
    VertexCost cost;
    if (layout == trace::ReduceLayout::kStrided) {
      const C share = tile::output_share(outputs, w.get(), vector_width(chip, in).get());
      cost.cycles =
          (w * strided_reduce_worker(chip, op, in, out, std::min(share, C(outputs)), inputs)).get();
    } else {
      cost.cycles = (w * continuous_reduce_worker(chip, in, ceil_div(C(outputs), w), inputs)).get();
    }
    cost.flops = (inputs > 0 ? C(outputs) * (inputs - 1) : C(0)).get();
    return cost;
  }
  // Max/min/mul run the same accumulator loop as add: no more expensive (§4 gives one formula).
  const C acc_elems = std::max<C>(kReduceAccumulatorBytes / bytes_of(in), 1);
  const C loops = ceil_div(outputs, acc_elems);
  const C loads_per_partial =
      cycles_at(Bytes{(acc_elems * bytes_of(in)).get()}, chip.memory.load_bytes_per_cycle,
                "memory.load_bytes_per_cycle");
  const C per_loop =
      loads_per_partial * inputs + (in == out ? kReduceLoopSameType : kReduceLoopConvert);
  VertexCost cost;
  cost.cycles =
      C(kReduceSupervisor + w * (kReduceWorkerBase + per_loop * ceil_div(loops, w))).get();
  cost.flops = (inputs > 0 ? C(outputs) * (inputs - 1) : C(0)).get();
  return cost;
}

namespace {

// Per-op cycles per vector (c) for the elementwise loops, GC200 values: {half, float}.
// int and char use the float column (ESTIMATE: integer ops are not modelled separately).
struct OpCost {
  u64 half = 0;
  u64 fp32 = 0;
  bool assembly = true;  // binary ops only: assembly codelet (c + 2) or C++ (c + 5)
};

std::optional<OpCost> unary_op_cost(Op op) {
  switch (op) {
    case Op::kRelu:
      return OpCost{2, 2};  // ipu-hardware.md §4 "RELU c = 2"
    case Op::kExp:
      return OpCost{4, 6};  // poplibs unaryOpPerfInfo EXPONENT
    case Op::kLog:
      return OpCost{4, 12};  // poplibs unaryOpPerfInfo LOGARITHM
    case Op::kSqrt:
      return OpCost{23, 10};  // poplibs unaryOpPerfInfo SQRT
    case Op::kRsqrt:
      return OpCost{19, 8};  // §4 "RSQRT half 19"; float poplibs table
    case Op::kInverse:
      return OpCost{15, 6};  // §4 "INVERSE half 15"; float poplibs table
    case Op::kNeg:
      return OpCost{2, 2};  // poplibs unaryOpPerfInfo NEGATE
    case Op::kAbs:
      return OpCost{1, 1};  // poplibs unaryOpPerfInfo ABSOLUTE
    case Op::kTanh:
      return OpCost{4, 12};  // poplibs unaryOpPerfInfo TANH
    case Op::kSigmoid:
      return OpCost{6, 12};  // poplibs unaryOpPerfInfo SIGMOID
    case Op::kGelu:
      return OpCost{16, 22};  // §4 "GELU_ERF 16 / 22" (read as half/float)
    case Op::kSquare:
      return OpCost{2, 2};  // poplibs unaryOpPerfInfo SQUARE
    default:
      return std::nullopt;
  }
}

std::optional<OpCost> binary_op_cost(Op op) {
  switch (op) {
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
      return OpCost{1, 1, true};  // ipu-hardware.md §4 "ADD/SUB/MUL c = 1"
    case Op::kDiv:
      return OpCost{21, 10, false};  // poplibs binaryOpPerfInfo DIVIDE
    case Op::kMax:
    case Op::kMin:
      return OpCost{4, 4, false};  // poplibs binaryOpPerfInfo MAXIMUM/MINIMUM
    default:
      return std::nullopt;
  }
}

u64 cost_for(const OpCost& c, DType t) { return t == DType::kHalf ? c.half : c.fp32; }

// Vectors the slowest worker processes when n elements are split over W workers.
C vectors_per_worker(const ChipSpec& chip, DType t, C n) {
  return ceil_div(ceil_div(n, workers(chip)), vector_width(chip, t));
}

}  // namespace

std::uint64_t op_vector_cycles(trace::Op op, trace::DType dtype) {
  if (const auto c = unary_op_cost(op)) return cost_for(*c, dtype);
  if (const auto c = binary_op_cost(op)) return cost_for(*c, dtype);
  throw ModelError("op_vector_cycles: unknown operator '" + op_name(op) + "'");
}

VertexCost unary(const ChipSpec& chip, trace::Op op, trace::DType dtype, std::uint64_t n) {
  const auto c = unary_op_cost(op);
  if (!c) throw ModelError("unary: operator '" + op_name(op) + "' is not a unary op");
  const C base = op == Op::kExp ? kUnaryWorkerBaseExp : kUnaryWorkerBase;
  const C worker =
      base + vectors_per_worker(chip, dtype, n) * (cost_for(*c, dtype) + kUnaryPerVectorOverhead);
  VertexCost cost;
  cost.cycles = C(kBasicOpSupervisor + kUnarySupervisorExtra + workers(chip) * worker).get();
  cost.flops = C(n).get();
  return cost;
}

VertexCost binary(const ChipSpec& chip, trace::Op op, trace::DType dtype, std::uint64_t n) {
  const auto c = binary_op_cost(op);
  if (!c) throw ModelError("binary: operator '" + op_name(op) + "' is not a binary op");
  const C base = dtype == DType::kHalf ? kBinaryWorkerBaseHalf : kBinaryWorkerBaseFloat;
  const C per_vector =
      cost_for(*c, dtype) + (c->assembly ? kBinaryPerVectorAsm : kBinaryPerVectorCpp);
  VertexCost cost;
  cost.cycles = C(kBasicOpSupervisor +
                  workers(chip) * (base + vectors_per_worker(chip, dtype, n) * per_vector))
                    .get();
  cost.flops = C(n).get();
  return cost;
}

VertexCost scaled_add(const ChipSpec& chip, trace::DType dtype, std::uint64_t n) {
  const C w = workers(chip);
  const C vw = vector_width(chip, dtype);
  const C vectors = ceil_div(n / vw, w);  // slowest worker's full vectors
  const C rem = n % vw;                   // tail elements, charged to the slowest worker
  // Per vector: load a and b (2 x datapath bytes at the plain load rate) + store a.
  const C per_vector = cycles_at(chip.datapath_width * 2, chip.memory.load_bytes_per_cycle,
                                 "memory.load_bytes_per_cycle") +
                       1;
  const C loop = vectors > 0 ? kScaledAddLoopSetup + per_vector * (vectors - 1) : 0;
  const C worker =
      kScaledAddWorkerPrologue + loop + kScaledAddWorkerEpilogue + kScaledAddPerTailElement * rem;
  const C supervisor = kScaledAddPerType + kBasicOpSupervisor +
                       (rem == 0 ? kScaledAddNoRemainder : kScaledAddRemainder) +
                       kScaledAddSupervisorTail + kScaledAddTensorScale;
  VertexCost cost;
  cost.cycles = C(supervisor + w * worker).get();
  cost.flops = (C(2) * n).get();
  return cost;
}

namespace {

// ceil(log2(v)) for v >= 1.
u64 ceil_log2(u64 v) {
  u64 bits = 0;
  while ((u64{1} << bits) < v) ++bits;
  return bits;
}

// Worker cycles to convert m elements (poplibs castWorkerCycles, floating-point branch; other
// types use the same loop at one element per 2 cycles, as poplibs' C++ fallback guess).
C cast_worker(const ChipSpec& chip, DType from, DType to, C m) {
  const bool fp = is_fp(from) && is_fp(to);
  const C load_elems =
      std::max<C>(static_cast<C>(chip.memory.load_bytes_per_cycle.value) / bytes_of(from), 1);
  const C store_elems = std::max<C>(chip.datapath_width.count / bytes_of(to), 1);
  const C op_width = fp ? std::min(load_elems * kCastReadPorts, store_elems) : 1;
  const C per_vector =
      std::max(ceil_div(op_width, load_elems), ceil_div(op_width, store_elems)) + (fp ? 0 : 1);
  C cycles = kCastWorkerPrologue + per_vector * (m / op_width);
  const C rem = m % op_width;
  for (u64 bit = 0; bit < ceil_log2(op_width.get()); ++bit) {
    cycles += kCastRemainderCheck + (((rem.get() >> bit) & 1) ? kCastRemainderElem : 0);
  }
  return cycles;
}

}  // namespace

VertexCost cast(const ChipSpec& chip, trace::DType from, trace::DType to, std::uint64_t n) {
  const C w = workers(chip);
  VertexCost cost;
  cost.cycles =
      C(kCastSupervisor + w * (kCastWorkerEntry + cast_worker(chip, from, to, ceil_div(n, w))))
          .get();
  cost.flops = C((is_fp(from) || is_fp(to)) ? n : 0).get();
  return cost;
}

VertexCost copy(const ChipSpec& chip, std::uint64_t bytes) {
  VertexCost cost;
  cost.cycles = C(kCopyCallOverhead + cycles_at(Bytes{bytes}, chip.memory.memcpy_bytes_per_cycle,
                                                "memory.memcpy_bytes_per_cycle"))
                    .get();
  return cost;
}

VertexCost map(const ChipSpec& chip, trace::DType dtype, std::uint64_t n, std::uint64_t op_cycles,
               std::uint64_t ops) {
  // Shaped as BinaryOp1D (§4): supervisor overhead + W x (worker base + vectors x (c + 5)),
  // with c the fused operators' summed cycles and 5 the per-vector overhead of C++ codelets.
  const C base = dtype == DType::kHalf ? kBinaryWorkerBaseHalf : kBinaryWorkerBaseFloat;
  VertexCost cost;
  cost.cycles =
      C(kBasicOpSupervisor + workers(chip) * (base + vectors_per_worker(chip, dtype, n) *
                                                         (op_cycles + kBinaryPerVectorCpp)))
          .get();
  cost.flops = (C(n) * ops).get();
  return cost;
}

std::uint64_t rearrangement_copy_cycles(const ChipSpec& chip, trace::DType dtype, std::uint64_t n,
                                        std::uint64_t factor) {
  // poplin's rearrangement cost: bytes / min(memcpy bytes per cycle, element size), i.e. an
  // element per cycle for half and float (ipu-hardware.md §1 "Local copy"), times its
  // empirical factor (ConvModel's scale factor for transforms, measured by Graphcore on
  // ResNet-50 layers: 5/4, or 5/3 where the channels cannot be regrouped in whole vectors).
  const C eb = trace::dtype_bytes(dtype);
  const double scale = factor == 1 ? 5.0 / 4.0 : factor == 2 ? 5.0 / 3.0 : 1.0;
  const BytesPerCycle rate{
      std::min(chip.memory.memcpy_bytes_per_cycle.value, static_cast<double>(eb.get())) / scale};
  return C(cycles_at(Bytes{(C(n) * eb).get()}, rate, "memory.memcpy_bytes_per_cycle")).get();
}

VertexCost transpose(const ChipSpec& chip, trace::DType dtype, std::uint64_t n,
                     std::uint64_t factor) {
  // The rearrangement as poplin costs it, plus the fixed cost of a six-worker copy call.
  VertexCost cost;
  cost.cycles = C(kCopyCallOverhead + rearrangement_copy_cycles(chip, dtype, n, factor)).get();
  return cost;
}

VertexCost broadcast_binary(const ChipSpec& chip, trace::Op op, trace::DType dtype, std::uint64_t n,
                            std::uint64_t length, bool in_place) {
  // popops' estimate of BroadcastVectorInner1D[InPlace] (popopsCycleEstimators.cpp): the
  // n / length blocks are split over the workers, the slowest holds m = ceil(blocks / W); a
  // worker keeps the vector in registers and streams the blocks through it. Half ADD/SUB runs
  // 8 (else 4) channels at a time at 2 cycles per further block, half MUL 4 channels at a
  // time (pipelined out of place); other shapes take the scalar path, float 8 + 2m per
  // channel. The MUL estimate counts a worker preamble twice, as popops' does.
  if (op != trace::Op::kAdd && op != trace::Op::kSub && op != trace::Op::kMul)
    throw ModelError("broadcast_binary: operator '" + op_name(op) + "' is not add, sub or mul");
  if (length == 0) throw ModelError("broadcast_binary: the vector length must be positive");
  const C w = workers(chip), b = length;
  const C m = ceil_div(C(n / length), w);
  const bool half = dtype == DType::kHalf, mul = op == trace::Op::kMul;
  C core = 0;
  if (!half) {
    core = 7 + b * (8 + 2 * m);
  } else if (!mul) {
    if (b <= 2048 && b % 8 == 0)
      core = 5 + (m == 1 ? 2 + 3 + 7 * (b / 8) + 1 : 2 + 4 + (b / 8) * (8 + 2 * (m - 1) + 7) + 1);
    else if (b <= 2048 && b % 4 == 0 && m >= 2)
      core = 9 + 5 + (b / 4) * (13 + 2 * (m / 2 - 1) + m % 2) + 1;
    else  // the scalar path, after the checks that led to it
      core = (b > 2048 ? 3 : m < 2 ? 7 : 9) + 5 + b * (5 + 9 * m) + 1;
  } else if (b % 4 != 0) {
    core = 3 + 4 + b * (5 + 9 * m) + 1;
  } else if (in_place || b > 2044 || m < 2) {
    core = (in_place ? 5 : 9) + 3 + (b / 4) * (7 + 2 * m) + 1;
  } else {
    core = 9 + 3 + (b / 4) * (9 + m) + 1;
  }
  const C worker = half ? 19 : 17;
  const C supervisor = 1 + w * 2;
  C extra = 0;  // the variant's own overhead
  if (mul)
    extra = w * (half ? 24 : 17) + (in_place ? w + 3 * w : 2 * w);
  else if (op == trace::Op::kSub || !in_place)
    extra = w + 3 * w;
  else
    extra = 2 * w;
  VertexCost cost;
  cost.cycles = C(supervisor + w * (worker + core) + extra).get();
  cost.flops = C(n).get();
  return cost;
}

std::uint64_t transpose_factor(const ChipSpec& chip, trace::DType dtype, std::uint64_t channels) {
  return channels % vector_width(chip, dtype).get() == 0 ? 1 : 2;
}

VertexCost dynamic_slice(const ChipSpec& chip, trace::DType dtype, std::uint64_t elems,
                         std::uint64_t copies) {
  const C w = workers(chip);
  // Each row is split over the workers; a worker copies its share as whole vectors.
  const C vectors = ceil_div(elems, w) / vector_width(chip, dtype);
  const C worker = kSliceWorkerBase + (kSlicePerCopy + kSlicePerVector * vectors) * copies;
  VertexCost cost;
  cost.cycles = C(kSliceSupervisor + w * worker).get();
  return cost;
}

namespace {

u64 count_at(const trace::Vertex& v, std::size_t slot) {
  const std::int64_t x = v.params[slot];
  if (x < 0) {
    throw ModelError("vertex parameter " + std::to_string(slot) + " is negative (" +
                     std::to_string(x) + ")");
  }
  return static_cast<u64>(x);
}

DType dtype_at(const trace::Vertex& v, std::size_t slot) {
  const std::int64_t x = v.params[slot];
  if (x < 0 || static_cast<std::size_t>(x) >= trace::kDTypeNames.size()) {
    throw ModelError("vertex parameter " + std::to_string(slot) + " is not a dtype (" +
                     std::to_string(x) + ")");
  }
  return static_cast<DType>(x);
}

Op op_at(const trace::Vertex& v, std::size_t slot) {
  const std::int64_t x = v.params[slot];
  if (x < 0 || static_cast<std::size_t>(x) >= trace::kOpNames.size()) {
    throw ModelError("vertex parameter " + std::to_string(slot) + " is not an operator (" +
                     std::to_string(x) + ")");
  }
  return static_cast<Op>(x);
}

AmpConvArgs amp_args(const trace::Vertex& v) {
  namespace s = trace::slot;
  AmpConvArgs a;
  a.in = dtype_at(v, s::kAmpIn);
  a.partials = dtype_at(v, s::kAmpPartials);
  a.positions = count_at(v, s::kAmpPositions);
  a.in_chans = count_at(v, s::kAmpInChans);
  a.out_chans = count_at(v, s::kAmpOutChans);
  a.groups = count_at(v, s::kAmpGroups);
  a.kernel_h = count_at(v, s::kAmpKernelH);
  a.kernel_w = count_at(v, s::kAmpKernelW);
  if (v.codelet == trace::Codelet::kAmpConvNx1) {
    a.width = count_at(v, s::kAmpWidth);
    a.weight_height = count_at(v, s::kAmpNx1WeightHeight);
  }
  a.coeff_load_bits =
      count_at(v, v.codelet == trace::Codelet::kAmpConvNx1 ? s::kAmpNx1CoeffLoadBits
                                                           : s::kAmp1x1CoeffLoadBits);
  return a;
}

// An amp_slic vertex's arguments (its input must be half: the only type SLIC takes).
SlicArgs slic_args(const trace::Vertex& v) {
  namespace s = trace::slot;
  if (dtype_at(v, s::kSlicIn) != DType::kHalf)
    throw ModelError("amp_slic: input must be half, found " + dtype_name(dtype_at(v, s::kSlicIn)));
  SlicArgs a;
  a.partials = dtype_at(v, s::kSlicPartials);
  a.positions = count_at(v, s::kSlicPositions);
  a.width = count_at(v, s::kSlicWidth);
  a.groups_per_group = count_at(v, s::kSlicGroups);
  a.chans = count_at(v, s::kSlicChans);
  a.group_groups = count_at(v, s::kSlicGroupGroups);
  a.kernel_h = count_at(v, s::kSlicKernelH);
  a.kernel_w = count_at(v, s::kSlicKernelW);
  a.stride = count_at(v, s::kSlicStride);
  a.chains = count_at(v, s::kSlicChains);
  return a;
}

HmacArgs hmac_args(const trace::Vertex& v) {
  namespace s = trace::slot;
  HmacArgs a;
  a.in = dtype_at(v, s::kHmacIn);
  a.partials = dtype_at(v, s::kHmacPartials);
  a.positions = count_at(v, s::kHmacPositions);
  a.width = count_at(v, s::kHmacWidth);
  a.in_chans = count_at(v, s::kHmacInChans);
  a.out_chans = count_at(v, s::kHmacOutChans);
  a.groups = count_at(v, s::kHmacGroups);
  a.kernel_h = count_at(v, s::kHmacKernelH);
  a.kernel_w = count_at(v, s::kHmacKernelW);
  return a;
}

}  // namespace

namespace {

VertexCost vertex_cost_unchecked(const ChipSpec& chip, const trace::Vertex& v) {
  namespace s = trace::slot;
  using trace::Codelet;
  switch (v.codelet) {
    case Codelet::kAmpConv1x1:
      return amp_conv1x1(chip, amp_args(v));
    case Codelet::kAmpConvNx1:
      return amp_convnx1(chip, amp_args(v));
    case Codelet::kDot:
      return dot(chip, dtype_at(v, s::kDotIn), dtype_at(v, s::kDotPartials),
                 count_at(v, s::kDotLength), count_at(v, s::kDotCount));
    case Codelet::kReduce:
      return reduce(chip, op_at(v, s::kReduceOp), dtype_at(v, s::kReduceIn),
                    dtype_at(v, s::kReduceOut), count_at(v, s::kReduceOutputs),
                    count_at(v, s::kReduceInputs),
                    static_cast<trace::ReduceLayout>(count_at(v, s::kReduceLayout)),
                    count_at(v, s::kReduceFirstStage) != 0);
    case Codelet::kUnary:
      return unary(chip, op_at(v, s::kEltOp), dtype_at(v, s::kEltDType), count_at(v, s::kEltN));
    case Codelet::kBinary:
      return binary(chip, op_at(v, s::kEltOp), dtype_at(v, s::kEltDType), count_at(v, s::kEltN));
    case Codelet::kScaledAdd:
      return scaled_add(chip, dtype_at(v, s::kScaledAddDType), count_at(v, s::kScaledAddN));
    case Codelet::kCast:
      return cast(chip, dtype_at(v, s::kCastFrom), dtype_at(v, s::kCastTo), count_at(v, s::kCastN));
    case Codelet::kCopy:
      return copy(chip, count_at(v, s::kCopyBytes));
    case Codelet::kDynamicSlice:
      return dynamic_slice(chip, dtype_at(v, s::kSliceDType), count_at(v, s::kSliceElems),
                           count_at(v, s::kSliceCopies));
    case Codelet::kMap:
      return map(chip, dtype_at(v, s::kMapDType), count_at(v, s::kMapN),
                 count_at(v, s::kMapOpCycles), count_at(v, s::kMapOps));
    case Codelet::kBroadcastBinary:
      return broadcast_binary(chip, op_at(v, s::kBroadcastOp), dtype_at(v, s::kBroadcastDType),
                              count_at(v, s::kBroadcastN), count_at(v, s::kBroadcastLength),
                              count_at(v, s::kBroadcastInPlace) != 0);
    case Codelet::kTranspose:
      return transpose(chip, dtype_at(v, s::kTransposeDType), count_at(v, s::kTransposeN),
                       count_at(v, s::kTransposeFactor));
    case Codelet::kAmpSlic:
      return amp_slic(chip, slic_args(v));
    case Codelet::kConvHmac:
      return conv_hmac(chip, hmac_args(v));
  }
  throw ModelError("vertex_cost: unknown codelet value " +
                   std::to_string(static_cast<int>(v.codelet)));
}

}  // namespace

std::string describe_vertex(const trace::Vertex& v) {
  const trace::CodeletSpec& spec = trace::codelet_spec(v.codelet);
  std::string out(spec.name);
  for (std::size_t i = 0; i < spec.params.size() && i < v.params.size(); ++i) {
    const trace::ParamSpec& p = spec.params[i];
    if (p.late && v.params[i] == p.default_value) continue;  // as the text form omits it
    std::string value = std::to_string(v.params[i]);
    if (p.kind == trace::ParamKind::kDType) value = dtype_name(static_cast<DType>(v.params[i]));
    if (p.kind == trace::ParamKind::kOp) value = op_name(static_cast<Op>(v.params[i]));
    out += " " + std::string(p.name) + "=" + value;
  }
  return out;
}

VertexCost closed_form_vertex_cost(const ChipSpec& chip, const trace::Vertex& v) {
  return vertex_cost_unchecked(chip, v);
}

VertexCost vertex_cost(const ChipSpec& chip, const trace::Vertex& v) {
  try {
    // Tile model hook (issue 18): chip.tile_model picks closed_form (default) or isa.
    if (chip.tile_model != TileModel::kClosedForm)
      return tile_timing_model(chip.tile_model).cost(chip, v);
    return vertex_cost_unchecked(chip, v);
  } catch (const ArithmeticOverflow&) {
    throw ArithmeticOverflow("vertex " + describe_vertex(v) +
                             ": its cycle or FLOP count overflows 64 bits");
  }
}

}  // namespace ipusim::cost
