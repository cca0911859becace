// SPDX-License-Identifier: Apache-2.0
// Op-class table. Sources name rows of ../shared/reference/ipu-hardware.md; "inferred" marks
// values with no public number (chosen from the codelet cycle counts they must reproduce).
#include "ipusim/tile/ops.hpp"

#include <array>

#include "ipusim/util/error.hpp"

namespace ipusim::tile {
namespace {

using P = Pipe;
using M = Port;
using O = OpClass;

constexpr std::array<OpInfo, kOpClassCount> kTable{{
    {O::kNop, "nop", P::kNone, M::kNone, 0, 0, 1, 1, "§3 rule 4: empty main slot"},
    {O::kLd32, "ld32", P::kMain, M::kLoad, 4, 0, 1, 0, "§3 rule 5: 64-bit port, one access"},
    {O::kLd64, "ld64", P::kMain, M::kLoad, 8, 0, 1, 0,
     "§1 Load/store bandwidth: normal load 64 bits"},
    {O::kLd128, "ld128", P::kMain, M::kLoadPair, 16, 0, 1, 0,
     "§1 Memory organisation / Load/store bandwidth: ld128 needs interleaved memory"},
    {O::kLd2x64Pace, "ld2x64pace", P::kMain, M::kLoadPair, 16, 0, 1, 0,
     "§1 Load/store bandwidth: two 64-bit loads, interleaved"},
    {O::kLdSt64Pace, "ldst64pace", P::kMain, M::kLoadStore, 8, 8, 1, 0,
     "§3 rule 5: one load and one store per bundle"},
    {O::kLd2xSt64Pace, "ld2xst64pace", P::kMain, M::kLoadPairStore, 16, 8, 1, 0,
     "§1 Load/store bandwidth: 2 x 64-bit loads + 1 x 64-bit store, 24 B/cycle"},
    {O::kSt32, "st32", P::kMain, M::kStore, 0, 4, 1, 1, "§3 rule 5"},
    {O::kSt64, "st64", P::kMain, M::kStore, 0, 8, 1, 1, "§3 rule 5: 64-bit store"},
    {O::kSt64Pace, "st64pace", P::kMain, M::kStore, 0, 8, 1, 1, "§3 rule 5: paced 64-bit store"},
    {O::kLd16Elem, "ld16", P::kMain, M::kLoad, 2, 0, 1, 0, "§3 rule 5: sub-word load, one access"},
    {O::kSt16Elem, "st16", P::kMain, M::kStore, 0, 2, 1, 1,
     "§3 rule 5: sub-word store (read-modify-write folded in, inferred)"},
    {O::kSetzi, "setzi", P::kMain, M::kNone, 0, 0, 1, 1, "§3 rule 1: single-cycle to the worker"},
    {O::kAdd, "add", P::kMain, M::kNone, 0, 0, 1, 1, "§3 rule 1"},
    {O::kCmp, "cmp", P::kMain, M::kNone, 0, 0, 1, 1, "§3 rule 1"},
    {O::kShift, "shl/shr", P::kMain, M::kNone, 0, 0, 1, 1, "§3 rule 1"},
    {O::kIntMul, "mul", P::kMain, M::kNone, 0, 0, 1, 0, "§3 rule 1 (result at next turn)"},
    {O::kAnd, "and/or", P::kMain, M::kNone, 0, 0, 1, 1, "§3 rule 1"},
    {O::kBr, "br", P::kMain, M::kNone, 0, 0, 1, 1, "§3 rule 1; §3 rule 2 for the supervisor"},
    {O::kBrCond, "brz/brnz", P::kMain, M::kNone, 0, 0, 1, 1, "§3 rule 1"},
    {O::kBrnzdec, "brnzdec", P::kMain, M::kNone, 0, 0, 1, 1, "§3 rule 2: loop branch"},
    {O::kRpt, "rpt", P::kMain, M::kNone, 0, 0, 1, 1,
     "§3 rule 4: zero-overhead loop, one bundle to set up"},
    {O::kGet, "get", P::kMain, M::kNone, 0, 0, 1, 0, "§3 rule 2: control-register read"},
    {O::kPut, "put/uput", P::kMain, M::kNone, 0, 0, 1, 1, "§3 rule 2: control-register write"},
    {O::kExit, "exitz", P::kMain, M::kNone, 0, 0, 1, 1, "§3 rule 3: worker exit frees its slot"},
    {O::kCall, "call", P::kMain, M::kNone, 0, 0, 1, 1, "§3 rule 2"},
    {O::kRunAll, "runall", P::kSupervisor, M::kNone, 0, 0, 1, 1, "§3 rules 2-3: about 6 cycles"},
    {O::kSync, "sync", P::kSupervisor, M::kNone, 0, 0, 1, 1, "§3 rules 2-3: about 6 cycles"},
    {O::kLd128PutCs, "ld128putcs", P::kSupervisor, M::kLoadPair, 16, 0, 1, 1,
     "§1 AMP weight load: 16 B/cycle into the engines"},
    {O::kLd64PutCs, "ld64putcs", P::kSupervisor, M::kLoad, 8, 0, 1, 1,
     "§1 AMP weight load: 8 B/cycle without 128-bit loads"},
    {O::kSupPutCcc, "put $CCCSLOAD", P::kSupervisor, M::kNone, 0, 0, 1, 1,
     "§3 rule 2: put charged 6"},
    {O::kFnop, "fnop", P::kNone, M::kNone, 0, 0, 1, 1, "§3 rule 4: empty aux slot"},
    {O::kFvArith, "f16v4add/f32v2mul", P::kAux, M::kNone, 0, 0, 1, 0,
     "§4 ADD/SUB/MUL c = 1 (one vector per instruction)"},
    {O::kFvMac, "f16v4mix/f32v2axpy", P::kAux, M::kNone, 0, 0, 1, 0,
     "§1 Non-AMP vector width (axpy forms)"},
    {O::kFvCmp, "f16v4max/cmp", P::kAux, M::kNone, 0, 0, 1, 0, "§4 op tables (RELU, MAX)"},
    {O::kFvBitwise, "f16v4absneg", P::kAux, M::kNone, 0, 0, 1, 0, "§4 op tables (ABS c = 1)"},
    {O::kFvCvt, "f32v2tof16/f16v2tof32", P::kAux, M::kNone, 0, 0, 1, 0,
     "poplibs castWorkerCycles: one convert per 64-bit word"},
    {O::kFvAcc, "f16v8acc/f32v4acc", P::kAux, M::kNone, 0, 0, 1, 0,
     "§4 Reduce: 128-bit accumulators"},
    {O::kFvShuffle, "sort4x16/roll", P::kAux, M::kNone, 0, 0, 1, 0, "inferred: element shuffles"},
    {O::kFvTranscend, "f16v2exp/f32exp", P::kAux, M::kNone, 0, 0, 2, 0,
     "inferred: one 32-bit lane per turn (§4 EXPONENT half c = 4 for 4 lanes)"},
    {O::kFvDivSqrt, "f32div/f32sqrt step", P::kAux, M::kNone, 0, 0, 1, 0,
     "inferred: iterative refinement, one step per instruction"},
    {O::kFvPoly, "polynomial step", P::kAux, M::kNone, 0, 0, 1, 0,
     "inferred: one mac of a series evaluation (GELU, TANH)"},
    {O::kAmp, "f16v4hihov4amp/f16v4sisoamp/f32sisov2amp", P::kAux, M::kNone, 0, 0, 1, 0,
     "§1 AMP instruction throughput: one per cycle per tile; §3 rule 6"},
    {O::kAmpClear, "uput $FP_CLR", P::kMain, M::kNone, 0, 0, 1, 1,
     "§3 rule 6: accumulators cleared through $FP_CLR"},
}};

}  // namespace

std::span<const OpInfo> op_table() { return kTable; }

const OpInfo& op_info(OpClass op) {
  const auto i = static_cast<std::size_t>(op);
  if (i >= kTable.size() || kTable[i].op != op) {
    throw ModelError("tile op table: no entry for op class " + std::to_string(i));
  }
  return kTable[i];
}

}  // namespace ipusim::tile
