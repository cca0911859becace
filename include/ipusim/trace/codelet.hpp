// SPDX-License-Identifier: Apache-2.0
// The codelet catalogue: every vertex type a trace may name, with its parameters.
// This is the single declaration that the trace readers/writers (names, ranges) and the cost
// models (meaning) share. Parameters are stored as int64 slots in declaration order.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ipusim::trace {

enum class DType : std::uint8_t { kHalf = 0, kFloat = 1, kInt = 2, kChar = 3 };
inline constexpr std::array<std::string_view, 4> kDTypeNames{"half", "float", "int", "char"};
// Bytes per element (inline: the compiler and the costs ask millions of times).
constexpr std::uint32_t dtype_bytes(DType t) {
  switch (t) {
    case DType::kHalf:
      return 2;
    case DType::kFloat:
      return 4;
    case DType::kInt:
      return 4;
    case DType::kChar:
      return 1;
  }
  return 0;
}

// How a reduce vertex's partials lie (its `layout` parameter; docs/codelets.md "reduce"): a
// conv's partial sums reduced by poplin's ReduceAdd vertices; or a popops reduction whose
// outputs are contiguous and each output's partials a row apart (a reduction over the outer
// dimension: STRIDED_REDUCE), or whose each output's partials are contiguous (over the inner
// dimension: ALL_REGIONS_CONTINUOUS).
enum class ReduceLayout : std::uint8_t { kPartialSums = 0, kStrided = 1, kContinuous = 2 };

// Operators for the elementwise and reduce codelets.
enum class Op : std::uint8_t {
  kAdd = 0,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,  // binary / reduce
  kRelu,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kInverse,
  kNeg,
  kAbs,  // unary
  kTanh,
  kSigmoid,
  kGelu,
  kSquare,
};
inline constexpr std::array<std::string_view, 18> kOpNames{
    "add",  "sub",   "mul",     "div", "max", "min",  "relu",    "exp",  "log",
    "sqrt", "rsqrt", "inverse", "neg", "abs", "tanh", "sigmoid", "gelu", "square"};

enum class Codelet : std::uint8_t {
  kAmpConv1x1 = 0,   // AMP partial convolution, 1x1 kernel (also the matmul path)
  kAmpConvNx1,       // AMP partial convolution, kernel_h x kernel_w > 1x1
  kDot,              // non-AMP dot products (vector MAC on the 64-bit datapath)
  kReduce,           // reduce `inputs` partials into `outputs` values (add or max)
  kUnary,            // elementwise unary op over n elements
  kBinary,           // elementwise binary op over n elements
  kScaledAdd,        // a += scale * b over n elements
  kCast,             // convert n elements between dtypes
  kCopy,             // on-tile memcpy of `bytes` bytes
  kDynamicSlice,     // copy `copies` rows of `elems` elements at a runtime offset
  kMap,              // fused elementwise expression (popops::map codegen) over n elements
  kTranspose,        // rearrangement (transpose / regroup) of n elements on a tile
  kBroadcastBinary,  // binary op of n elements with a vector repeated along the outer dimension
  kAmpSlic,          // SLIC partial convolution: 1x4 windows over few channels per conv group
  kConvHmac,         // horizontal-MAC partial convolution: dot products on the vector datapath
};
inline constexpr std::size_t kCodeletCount = 15;

enum class ParamKind : std::uint8_t { kInt, kDType, kOp };

struct ParamSpec {
  std::string_view name;
  ParamKind kind;
  std::int64_t min;                           // inclusive lower bound (for kInt)
  std::int64_t max;                           // inclusive upper bound (for kInt)
  std::optional<std::int64_t> default_value;  // nullopt: required
  std::string_view description;
  // A parameter added to a codelet after traces were written with it: the text form omits it
  // at its default, and binary traces whose vertex lacks it (as the last parameters) read it
  // as its default.
  bool late = false;
};

inline constexpr std::size_t kMaxVertexParams = 11;

// Upper bound on every count or size in a trace (element counts, bytes, repeat counts): 2^40.
// Larger values are rejected when read, long before they could overflow a cost computation.
inline constexpr std::int64_t kMaxCount = std::int64_t{1} << 40;

struct CodeletSpec {
  Codelet id;
  std::string_view name;
  std::span<const ParamSpec> params;
  std::string_view description;
};

// The catalogue, indexed by Codelet.
std::span<const CodeletSpec> codelet_catalogue();
const CodeletSpec& codelet_spec(Codelet c);
std::optional<Codelet> codelet_by_name(std::string_view name);
// Index of a parameter of codelet `c` by name, or nullopt.
std::optional<std::size_t> param_index(Codelet c, std::string_view name);

std::optional<DType> dtype_by_name(std::string_view name);
std::optional<Op> op_by_name(std::string_view name);

// Whether `op` may be the `op` parameter of codelet `c` (reduce: add, max; binary: add, sub,
// mul, div, max, min; unary: relu .. square). False for codelets without an op parameter.
bool op_allowed(Codelet c, Op op);

// Checks `value` for parameter `index` of codelet `c` against the catalogue (integer bounds,
// valid dtype, op allowed for the codelet). Returns nullopt if valid, else a one-line
// description without location, e.g. "parameter 'positions' of amp_conv1x1 must be in
// 0..1099511627776, found -1".
std::optional<std::string> param_problem(Codelet c, std::size_t index, std::int64_t value);

// Named parameter slots, so that code reads params[kAmp1x1Positions] rather than params[2].
// Keep in the order of the catalogue in codelet.cpp.
namespace slot {
// amp_conv1x1 and amp_convnx1
inline constexpr std::size_t kAmpIn = 0, kAmpPartials = 1, kAmpPositions = 2, kAmpInChans = 3,
                             kAmpOutChans = 4, kAmpGroups = 5, kAmpKernelH = 6, kAmpKernelW = 7,
                             kAmpWidth = 8;
// coeff_load_bits, the last parameter of each AMP codelet
inline constexpr std::size_t kAmp1x1CoeffLoadBits = 6, kAmpNx1CoeffLoadBits = 9;
// amp_convnx1's weight height, after coeff_load_bits
inline constexpr std::size_t kAmpNx1WeightHeight = 10;
// dot
inline constexpr std::size_t kDotIn = 0, kDotPartials = 1, kDotLength = 2, kDotCount = 3;
// reduce
inline constexpr std::size_t kReduceOp = 0, kReduceIn = 1, kReduceOut = 2, kReduceOutputs = 3,
                             kReduceInputs = 4, kReduceLayout = 5, kReduceFirstStage = 6;
// unary / binary / scaled_add
inline constexpr std::size_t kEltOp = 0, kEltDType = 1, kEltN = 2;
inline constexpr std::size_t kScaledAddDType = 0, kScaledAddN = 1;
// cast
inline constexpr std::size_t kCastFrom = 0, kCastTo = 1, kCastN = 2;
// copy
inline constexpr std::size_t kCopyBytes = 0;
// dynamic_slice
inline constexpr std::size_t kSliceDType = 0, kSliceElems = 1, kSliceCopies = 2;
// map (fused elementwise): `op_cycles` = sum of the fused operators' per-vector cycles
inline constexpr std::size_t kMapDType = 0, kMapN = 1, kMapOpCycles = 2, kMapOps = 3;
// transpose
inline constexpr std::size_t kTransposeDType = 0, kTransposeN = 1, kTransposeFactor = 2;
// broadcast_binary
inline constexpr std::size_t kBroadcastOp = 0, kBroadcastDType = 1, kBroadcastN = 2,
                             kBroadcastLength = 3, kBroadcastInPlace = 4;
// amp_slic
inline constexpr std::size_t kSlicIn = 0, kSlicPartials = 1, kSlicPositions = 2, kSlicWidth = 3,
                             kSlicGroups = 4, kSlicChans = 5, kSlicGroupGroups = 6,
                             kSlicKernelH = 7, kSlicKernelW = 8, kSlicStride = 9, kSlicChains = 10;
// conv_hmac
inline constexpr std::size_t kHmacIn = 0, kHmacPartials = 1, kHmacPositions = 2, kHmacWidth = 3,
                             kHmacInChans = 4, kHmacOutChans = 5, kHmacGroups = 6, kHmacKernelH = 7,
                             kHmacKernelW = 8;
}  // namespace slot

}  // namespace ipusim::trace
