// SPDX-License-Identifier: Apache-2.0
#include "ipusim/trace/codelet.hpp"

#include <fmt/format.h>

#include <string>

namespace ipusim::trace {
namespace {

constexpr std::int64_t kDTypeMax = static_cast<std::int64_t>(kDTypeNames.size()) - 1;
constexpr std::int64_t kOpMax = static_cast<std::int64_t>(kOpNames.size()) - 1;
constexpr std::int64_t kHalf = static_cast<std::int64_t>(DType::kHalf);
constexpr std::int64_t kFloat = static_cast<std::int64_t>(DType::kFloat);
constexpr std::int64_t kAdd = static_cast<std::int64_t>(Op::kAdd);

constexpr ParamSpec dtype_param(std::string_view name, std::optional<std::int64_t> def,
                                std::string_view description) {
  return ParamSpec{name, ParamKind::kDType, 0, kDTypeMax, def, description};
}
constexpr ParamSpec op_param(std::string_view name, std::optional<std::int64_t> def,
                             std::string_view description) {
  return ParamSpec{name, ParamKind::kOp, 0, kOpMax, def, description};
}
constexpr ParamSpec int_param(std::string_view name, std::int64_t min,
                              std::optional<std::int64_t> def, std::string_view description) {
  return ParamSpec{name, ParamKind::kInt, min, kMaxCount, def, description};
}

// The width of the supervisor's weight loads into the AMP engines, a vertex variant in poplibs
// (use128BitConvUnitLoad): 64 loads at most 8 B/cycle, 128 at the chip's full rate.
constexpr ParamSpec coeff_load_param() {
  ParamSpec p{"coeff_load_bits",
              ParamKind::kInt,
              0,
              128,
              0,
              "bits per supervisor weight load into the AMP engines: 64 (Poplar's default, "
              "use128BitConvUnitLoad=false) or 128; 0: the chip's full rate "
              "(chip.amp.coeff_load_bytes_per_cycle)"};
  p.late = true;
  return p;
}

// amp_convnx1's weight height (poplin's convUnitWeightHeight): kernel rows per weight load,
// for convs with fewer input channels than an engine's weights; added late in version 3, older
// traces read as 0 (one row).
constexpr ParamSpec weight_height_param() {
  ParamSpec p{"weight_height",
              ParamKind::kInt,
              0,
              4,
              0,
              "kernel rows per weight load: 0 or 1 (one row), 2 or 4 (an engine's weights "
              "hold weights/weight_height input channels of weight_height rows)"};
  p.late = true;
  return p;
}

// Parameter lists, in the order of the slot:: constants in codelet.hpp.
constexpr ParamSpec kAmpConv1x1Params[] = {
    dtype_param("in", kHalf, "input and weight element type"),
    dtype_param("partials", kHalf, "accumulator (partial sum) element type"),
    int_param("positions", 0, std::nullopt, "output positions computed on the tile"),
    int_param("in_chans", 1, std::nullopt, "input channels per conv group"),
    int_param("out_chans", 1, std::nullopt, "output channels per conv group"),
    int_param("groups", 1, 1, "conv groups"),
    coeff_load_param(),
};
constexpr ParamSpec kAmpConvNx1Params[] = {
    dtype_param("in", kHalf, "input and weight element type"),
    dtype_param("partials", kHalf, "accumulator (partial sum) element type"),
    int_param("positions", 0, std::nullopt, "output positions computed on the tile"),
    int_param("in_chans", 1, std::nullopt, "input channels per conv group"),
    int_param("out_chans", 1, std::nullopt, "output channels per conv group"),
    int_param("groups", 1, 1, "conv groups"),
    int_param("kernel_h", 1, std::nullopt, "kernel height"),
    int_param("kernel_w", 1, std::nullopt, "kernel width"),
    int_param("width", 0, 0,
              "output positions per row of the tile's output field: each worker's share of the "
              "positions is one worklist entry per row it touches (0: one contiguous run)"),
    coeff_load_param(),
    weight_height_param(),
};
constexpr ParamSpec kDotParams[] = {
    dtype_param("in", kHalf, "input element type"),
    dtype_param("partials", kFloat, "accumulator element type"),
    int_param("length", 1, std::nullopt, "elements per dot product"),
    int_param("count", 1, std::nullopt, "number of dot products"),
};
// How a reduce vertex's partials lie (docs/codelets.md "reduce"); added late in version 3,
// older traces read as 0.
constexpr ParamSpec reduce_layout_param() {
  ParamSpec p{"layout",
              ParamKind::kInt,
              0,
              2,
              0,
              "0: a conv's partial sums (poplin's ReduceAdd), 1: strided (an output's partials "
              "one row apart: popops STRIDED_REDUCE), 2: continuous (an output's partials "
              "contiguous: popops ALL_REGIONS_CONTINUOUS)"};
  p.late = true;
  return p;
}
// One output (docs/codelets.md "reduce"): the vertex is only the first stage of popops'
// two-stage scalar reduction, whose pieces' results a reduce of the next compute set adds; added
// late in version 3, older traces read as 0 (both stages in the vertex).
constexpr ParamSpec reduce_first_stage_param() {
  ParamSpec p{"first_stage",
              ParamKind::kInt,
              0,
              1,
              0,
              "with outputs 1: 1 if the vertex is only the first stage of popops' two-stage "
              "scalar reduction (the next compute set reduces the workers' pieces), 0 if it "
              "runs both stages"};
  p.late = true;
  return p;
}
constexpr ParamSpec kReduceParams[] = {
    op_param("op", kAdd, "reduction operator: add or max"),
    dtype_param("in", kFloat, "partials element type"),
    dtype_param("out", kHalf, "output element type"),
    int_param("outputs", 1, std::nullopt, "values produced"),
    int_param("inputs", 1, std::nullopt, "partials reduced into each output"),
    reduce_layout_param(),
    reduce_first_stage_param(),
};
constexpr ParamSpec kUnaryParams[] = {
    op_param("op", std::nullopt,
             "unary operator: relu exp log sqrt rsqrt inverse neg abs tanh "
             "sigmoid gelu square"),
    dtype_param("dtype", kHalf, "element type"),
    int_param("n", 0, std::nullopt, "elements"),
};
constexpr ParamSpec kBinaryParams[] = {
    op_param("op", std::nullopt, "binary operator: add sub mul div max min"),
    dtype_param("dtype", kHalf, "element type"),
    int_param("n", 0, std::nullopt, "elements"),
};
constexpr ParamSpec kScaledAddParams[] = {
    dtype_param("dtype", kHalf, "element type"),
    int_param("n", 0, std::nullopt, "elements"),
};
constexpr ParamSpec kCastParams[] = {
    dtype_param("from", std::nullopt, "source element type"),
    dtype_param("to", std::nullopt, "destination element type"),
    int_param("n", 0, std::nullopt, "elements"),
};
constexpr ParamSpec kCopyParams[] = {
    int_param("bytes", 0, std::nullopt, "bytes copied"),
};
constexpr ParamSpec kDynamicSliceParams[] = {
    dtype_param("dtype", kHalf, "element type"),
    int_param("elems", 1, std::nullopt, "elements per copied row"),
    int_param("copies", 1, std::nullopt, "rows copied"),
};

constexpr ParamSpec kMapParams[] = {
    dtype_param("dtype", kHalf, "element type"),
    int_param("n", 0, std::nullopt, "elements"),
    int_param("op_cycles", 1, std::nullopt,
              "sum over the fused operators of their per-vector cycles (poplibs op tables)"),
    int_param("ops", 1, std::nullopt, "fused operators (FLOPs per element)"),
};
// poplin's empirical factor on its rearrangement estimate (ConvModel's transform scale factor,
// docs/codelets.md "transpose"); added late in version 3, older traces read as 0 (none).
constexpr ParamSpec transpose_factor_param() {
  ParamSpec p{"factor",
              ParamKind::kInt,
              0,
              2,
              0,
              "poplin's empirical factor on the copy: 1 = 5/4 (the rearranged channels, in x out "
              "per group, are a multiple of the vector width), 2 = 5/3 (they are not); 0: none"};
  p.late = true;
  return p;
}
constexpr ParamSpec kTransposeParams[] = {
    dtype_param("dtype", kHalf, "element type"),
    int_param("n", 0, std::nullopt, "elements rearranged"),
    transpose_factor_param(),
};

constexpr ParamSpec kBroadcastBinaryParams[] = {
    op_param("op", std::nullopt, "binary operator: add sub mul"),
    dtype_param("dtype", kHalf, "element type"),
    int_param("n", 0, std::nullopt, "elements of the full operand (a whole number of vectors)"),
    int_param("length", 1, std::nullopt,
              "length of the broadcast vector (channels per block, repeated along the outer "
              "dimension)"),
    ParamSpec{"in_place", ParamKind::kInt, 0, 1, 0, "1: the result overwrites the full operand"},
};

constexpr ParamSpec kAmpSlicParams[] = {
    dtype_param("in", kHalf, "input and weight element type (half only)"),
    dtype_param("partials", kHalf, "accumulator (partial sum) element type"),
    int_param("positions", 0, std::nullopt, "output positions computed on the tile"),
    int_param("width", 0, 0,
              "output positions per row of the tile's output field: each worker's share is one "
              "worklist entry per row it touches (0: one contiguous run)"),
    int_param("groups", 1, 1, "conv groups per group: 1, 2, 4, or 8 and 16 with 4 chains"),
    int_param("chans", 1, 4,
              "input = output channels per conv group: 4, 2 or 1 (groups x chans "
              "is 4, or 8 and 16 with one channel)"),
    int_param("group_groups", 1, 1, "groups of conv groups on the tile"),
    int_param("kernel_h", 1, std::nullopt, "kernel height"),
    int_param("kernel_w", 1, std::nullopt, "kernel width (in 1x4 windows, rounded up)"),
    ParamSpec{"stride", ParamKind::kInt, 1, 2, 1, "output stride along the row: 1 or 2"},
    ParamSpec{"chains", ParamKind::kInt, 2, 4, 2,
              "conv-unit chains: 4 (16 engines, half partials) or 2"},
};

constexpr ParamSpec kConvHmacParams[] = {
    dtype_param("in", kHalf, "input and weight element type"),
    dtype_param("partials", kHalf,
                "accumulator (partial sum) element type: output channels in pairs for half, "
                "one at a time for float"),
    int_param("positions", 0, std::nullopt, "output positions computed on the tile"),
    int_param("width", 0, 0,
              "output positions per row of the tile's output field: each worker takes whole "
              "rows and a part of one (0: one row, as a 1x1 conv's flattened field)"),
    int_param("in_chans", 1, std::nullopt,
              "input channels per conv group: one input-channel group, padded to 2 for half"),
    int_param("out_chans", 1, std::nullopt, "output channels per conv group"),
    int_param("groups", 1, 1, "conv groups"),
    int_param("kernel_h", 1, 1, "kernel height"),
    int_param("kernel_w", 1, 1, "kernel width"),
};

constexpr CodeletSpec kCatalogue[] = {
    {Codelet::kAmpConv1x1, "amp_conv1x1", kAmpConv1x1Params,
     "AMP partial convolution with a 1x1 kernel (also the matmul path)"},
    {Codelet::kAmpConvNx1, "amp_convnx1", kAmpConvNx1Params,
     "AMP partial convolution with a kernel_h x kernel_w kernel"},
    {Codelet::kDot, "dot", kDotParams, "non-AMP dot products on the vector datapath"},
    {Codelet::kReduce, "reduce", kReduceParams, "reduce `inputs` partials into each of `outputs`"},
    {Codelet::kUnary, "unary", kUnaryParams, "elementwise unary operator over n elements"},
    {Codelet::kBinary, "binary", kBinaryParams, "elementwise binary operator over n elements"},
    {Codelet::kScaledAdd, "scaled_add", kScaledAddParams, "a += scale * b over n elements"},
    {Codelet::kCast, "cast", kCastParams, "convert n elements between element types"},
    {Codelet::kCopy, "copy", kCopyParams, "on-tile memcpy of `bytes` bytes"},
    {Codelet::kDynamicSlice, "dynamic_slice", kDynamicSliceParams,
     "copy `copies` rows of `elems` elements at a runtime offset"},
    {Codelet::kMap, "map", kMapParams,
     "fused elementwise expression over n elements (one generated codelet for a chain of ops)"},
    {Codelet::kTranspose, "transpose", kTransposeParams,
     "rearrange n elements on a tile (transpose or regroup of channel groups)"},
    {Codelet::kBroadcastBinary, "broadcast_binary", kBroadcastBinaryParams,
     "binary operator of n elements with a per-channel vector of `length` broadcast along the "
     "outer dimension (popops BroadcastVectorInner)"},
    {Codelet::kAmpSlic, "amp_slic", kAmpSlicParams,
     "SLIC partial convolution (poplin ConvPartial1x4SLIC): a 1x4 kernel window slid along "
     "output rows, for few channels per conv group"},
    {Codelet::kConvHmac, "conv_hmac", kConvHmacParams,
     "horizontal-MAC partial convolution (poplin ConvPartialHorizontalMac): dot products over "
     "the input channels on the vector datapath, no AMP"},
};
static_assert(std::size(kCatalogue) == kCodeletCount);

constexpr bool catalogue_is_consistent() {
  for (std::size_t i = 0; i < std::size(kCatalogue); ++i) {
    if (static_cast<std::size_t>(kCatalogue[i].id) != i) return false;
    if (kCatalogue[i].params.size() > kMaxVertexParams) return false;
  }
  return true;
}
static_assert(catalogue_is_consistent(), "catalogue must be indexed by Codelet");

// Spot checks that the parameter order matches the slot:: constants.
static_assert(kAmpConvNx1Params[slot::kAmpPositions].name == "positions");
static_assert(kAmpConvNx1Params[slot::kAmpGroups].name == "groups");
static_assert(kAmpConvNx1Params[slot::kAmpKernelH].name == "kernel_h");
static_assert(kAmpConvNx1Params[slot::kAmpKernelW].name == "kernel_w");
static_assert(kAmpConvNx1Params[slot::kAmpWidth].name == "width");
static_assert(kAmpConv1x1Params[slot::kAmpOutChans].name == "out_chans");
static_assert(kAmpConv1x1Params[slot::kAmp1x1CoeffLoadBits].name == "coeff_load_bits");
static_assert(kAmpConvNx1Params[slot::kAmpNx1CoeffLoadBits].name == "coeff_load_bits");
static_assert(kAmpConvNx1Params[slot::kAmpNx1WeightHeight].name == "weight_height");
static_assert(kDotParams[slot::kDotCount].name == "count");
static_assert(kReduceParams[slot::kReduceInputs].name == "inputs");
static_assert(kReduceParams[slot::kReduceOut].name == "out");
static_assert(kReduceParams[slot::kReduceLayout].name == "layout");
static_assert(kReduceParams[slot::kReduceFirstStage].name == "first_stage");
static_assert(kUnaryParams[slot::kEltN].name == "n");
static_assert(kBinaryParams[slot::kEltOp].name == "op");
static_assert(kScaledAddParams[slot::kScaledAddN].name == "n");
static_assert(kCastParams[slot::kCastTo].name == "to");
static_assert(kCopyParams[slot::kCopyBytes].name == "bytes");
static_assert(kDynamicSliceParams[slot::kSliceCopies].name == "copies");
static_assert(kAmpSlicParams[slot::kSlicGroupGroups].name == "group_groups");
static_assert(kAmpSlicParams[slot::kSlicChains].name == "chains");
static_assert(kConvHmacParams[slot::kHmacOutChans].name == "out_chans");
static_assert(kConvHmacParams[slot::kHmacKernelW].name == "kernel_w");

template <std::size_t N>
std::optional<std::size_t> index_of(const std::array<std::string_view, N>& names,
                                    std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == name) return i;
  return std::nullopt;
}

std::string allowed_op_list(Codelet c) {
  std::string out;
  for (std::size_t i = 0; i < kOpNames.size(); ++i) {
    if (!op_allowed(c, static_cast<Op>(i))) continue;
    if (!out.empty()) out += ", ";
    out += kOpNames[i];
  }
  return out;
}

}  // namespace

std::span<const CodeletSpec> codelet_catalogue() { return kCatalogue; }

const CodeletSpec& codelet_spec(Codelet c) {
  auto i = static_cast<std::size_t>(c);
  return kCatalogue[i < kCodeletCount ? i : 0];
}

std::optional<Codelet> codelet_by_name(std::string_view name) {
  for (const auto& spec : kCatalogue)
    if (spec.name == name) return spec.id;
  return std::nullopt;
}

std::optional<std::size_t> param_index(Codelet c, std::string_view name) {
  const auto& params = codelet_spec(c).params;
  for (std::size_t i = 0; i < params.size(); ++i)
    if (params[i].name == name) return i;
  return std::nullopt;
}

std::optional<DType> dtype_by_name(std::string_view name) {
  auto i = index_of(kDTypeNames, name);
  return i ? std::optional<DType>(static_cast<DType>(*i)) : std::nullopt;
}

std::optional<Op> op_by_name(std::string_view name) {
  auto i = index_of(kOpNames, name);
  return i ? std::optional<Op>(static_cast<Op>(*i)) : std::nullopt;
}

bool op_allowed(Codelet c, Op op) {
  const auto v = static_cast<unsigned>(op);
  switch (c) {
    case Codelet::kReduce:
      return op == Op::kAdd || op == Op::kMax;
    case Codelet::kBinary:
      return v >= static_cast<unsigned>(Op::kAdd) && v <= static_cast<unsigned>(Op::kMin);
    case Codelet::kUnary:
      return v >= static_cast<unsigned>(Op::kRelu) && v <= static_cast<unsigned>(Op::kSquare);
    case Codelet::kBroadcastBinary:
      return op == Op::kAdd || op == Op::kSub || op == Op::kMul;
    default:
      return false;
  }
}

std::optional<std::string> param_problem(Codelet c, std::size_t index, std::int64_t value) {
  if (static_cast<std::size_t>(c) >= kCodeletCount)
    return fmt::format("unknown codelet {}", static_cast<unsigned>(c));
  const CodeletSpec& spec = codelet_spec(c);
  if (index >= spec.params.size())
    return fmt::format("codelet {} has no parameter {}", spec.name, index);
  const ParamSpec& p = spec.params[index];
  switch (p.kind) {
    case ParamKind::kInt:
      if (value < p.min || value > p.max)
        return fmt::format("parameter '{}' of {} must be in {}..{}, found {}", p.name, spec.name,
                           p.min, p.max, value);
      if (c == Codelet::kAmpConvNx1 && index == slot::kAmpNx1WeightHeight && value == 3)
        return fmt::format("parameter '{}' of {} must be 1, 2 or 4, found 3", p.name, spec.name);
      return std::nullopt;
    case ParamKind::kDType:
      if (value < 0 || value > kDTypeMax)
        return fmt::format(
            "parameter '{}' of {} must be a dtype (half, float, int, char), "
            "found {}",
            p.name, spec.name, value);
      return std::nullopt;
    case ParamKind::kOp:
      if (value < 0 || value > kOpMax)
        return fmt::format("parameter '{}' of {} must be one of {}, found {}", p.name, spec.name,
                           allowed_op_list(c), value);
      if (!op_allowed(c, static_cast<Op>(value)))
        return fmt::format("parameter '{}' of {} must be one of {}, found '{}'", p.name, spec.name,
                           allowed_op_list(c), kOpNames[static_cast<std::size_t>(value)]);
      return std::nullopt;
  }
  return fmt::format("parameter '{}' of {} has an unknown kind", p.name, spec.name);
}

}  // namespace ipusim::trace
