// SPDX-License-Identifier: Apache-2.0
// The operation table of the instruction-level tile model (docs/tile-model.md): about 40 op
// classes of the project's own, each with the pipeline it issues on, the issue turns it holds,
// its result latency and the memory ports it uses. These are classes, not Graphcore opcodes:
// one class stands for every instruction that times the same way (e.g. all 64-bit vector
// add/sub/mul forms). Bytes are per instruction at the Mk2 64-bit datapath; programs that scale
// with the chip (vector width, AMP partials) size the memory traffic of a bundle themselves.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace ipusim::tile {

enum class Pipe : std::uint8_t {
  kNone,        // nop / fnop: occupies no pipeline
  kMain,        // main side of a bundle: load/store, integer, control
  kAux,         // auxiliary side: floating point, AMP
  kSupervisor,  // supervisor-only (runall, sync, weight-load put)
};

// Memory port an op uses.
enum class Port : std::uint8_t {
  kNone,
  kLoad,           // plain load port (chip.memory.load_bytes_per_cycle)
  kLoadPair,       // two loads in one cycle: interleaved memory (interleaved_load_bytes_per_cycle)
  kStore,          // store port (chip.tile.store_bytes_per_cycle)
  kLoadStore,      // plain load + store
  kLoadPairStore,  // two loads + one store (the paced AMP feed)
};

enum class OpClass : std::uint8_t {
  // Main pipeline: memory.
  kNop,
  kLd32,
  kLd64,
  kLd128,
  kLd2x64Pace,
  kLdSt64Pace,
  kLd2xSt64Pace,
  kSt32,
  kSt64,
  kSt64Pace,
  kLd16Elem,
  kSt16Elem,
  // Main pipeline: integer and address arithmetic.
  kSetzi,
  kAdd,
  kCmp,
  kShift,
  kIntMul,
  kAnd,
  // Main pipeline: control and state.
  kBr,
  kBrCond,
  kBrnzdec,
  kRpt,
  kGet,
  kPut,
  kExit,
  kCall,
  // Supervisor.
  kRunAll,
  kSync,
  kLd128PutCs,
  kLd64PutCs,
  kSupPutCcc,
  // Auxiliary pipeline: floating point.
  kFnop,
  kFvArith,
  kFvMac,
  kFvCmp,
  kFvBitwise,
  kFvCvt,
  kFvAcc,
  kFvShuffle,
  kFvTranscend,
  kFvDivSqrt,
  kFvPoly,
  // Auxiliary pipeline: AMP.
  kAmp,
  kAmpClear,
};
inline constexpr std::size_t kOpClassCount = static_cast<std::size_t>(OpClass::kAmpClear) + 1;

struct OpInfo {
  OpClass op;
  std::string_view name;  // class name, e.g. "ld2xst64pace"
  Pipe pipe;
  Port port;
  std::uint32_t load_bytes;   // bytes read per instruction at the 64-bit datapath
  std::uint32_t store_bytes;  // bytes written per instruction
  std::uint32_t turns;        // issue turns held (1: fully pipelined; >1: the context's next
                              // turns are taken by the same instruction)
  std::uint32_t latency;      // cycles to result; 0 = chip.tile.result_latency
  std::string_view source;    // where the timing comes from (ipu-hardware.md row or "inferred")
};

std::span<const OpInfo> op_table();
const OpInfo& op_info(OpClass op);

}  // namespace ipusim::tile
