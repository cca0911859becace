// SPDX-License-Identifier: Apache-2.0
#include "ipusim/kernels/kernels.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <span>
#include <string_view>

#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/plan/conv.hpp"
#include "ipusim/plan/program_parts.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::kernels {

using plan::conv_name;
using plan::ConvArgs;
using plan::ConvPlan;

namespace {

using plan::add_spread;
using plan::make_step;
using plan::Spread;
using plan::spread;
using trace::DType;
using trace::TileRange;

trace::Trace one_ipu(std::string name) {
  trace::Trace t;
  t.name = std::move(name);
  t.ipus.emplace_back();
  return t;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw UsageError(what);
}

trace::Trace conv2d_with(const ChipSpec& chip, const ConvArgs& a, const ConvPlan& p) {
  spdlog::info(
      "{}: plan of {} tiles (splits: {} groups x {} rows x {} out x {} in{}{}), serial {} in x {} "
      "out, weight height {}{}, {} B per tile, estimated {} cycles",
      conv_name(a), p.tiles_used(), p.group_split, p.row_split, p.out_split, p.in_split,
      p.swapped ? ", operands swapped" : "",
      p.expanded()
          ? fmt::format(", kernel {} expanded into the input channels",
                        p.expand_h && p.expand_w ? "rows and columns" : plan::expansion_name(p))
          : "",
      p.serial_in, p.serial_out, p.weight_height,
      p.method == plan::ConvMethod::kSlic   ? ", SLIC vertex"
      : p.method == plan::ConvMethod::kHmac ? ", HMAC vertex"
                                            : "",
      p.bytes_per_tile.count, p.estimated_cycles.count);
  const plan::ConvBuffers b = plan::conv_buffers(chip, a, p);  // on every tile used
  trace::Trace t = one_ipu(conv_name(a));
  auto& prog = t.ipus[0];
  const TileRange all{0, p.tiles_used() - 1};
  // Buffers are allocated at the largest block's size on every tile used.
  prog.tensors.push_back({"in_blk", trace::TensorKind::kActivation, a.dtype, all, b.input});
  prog.tensors.push_back({"weight_blk", trace::TensorKind::kWeight, a.dtype, all, b.weights});
  prog.tensors.push_back(
      {"partials", trace::TensorKind::kPartial, b.partials, all, b.partial_sums});
  if (p.in_split > 1) {
    prog.tensors.push_back({"reduce_buf", trace::TensorKind::kTemp, b.partials, all, b.reduce});
    prog.tensors.push_back({"out", trace::TensorKind::kOutput, a.dtype, all, b.reduced});
  }
  if (p.serial_in > 1)
    prog.tensors.push_back({"acc", trace::TensorKind::kOutput, a.dtype, all, b.accumulated});
  if (p.expanded()) {
    // An expanded plan's input is built first (poplin's rearrangement of the input for
    // expandDims): the expanded tensor, spread evenly over the plan's tiles, copied into place
    // on each. The input is created for the conv, so nothing is exchanged to build it (the
    // compiler, which knows where the input lives, exchanges it too); the conv's fetch then
    // brings each block to its users.
    const ConvArgs e = plan::planned_product(a, p);
    namespace sl = trace::slot;
    trace::Vertex v{trace::Codelet::kTranspose, all, {}};
    v.params[sl::kTransposeDType] = static_cast<std::int64_t>(a.dtype);
    v.params[sl::kTransposeN] =
        static_cast<std::int64_t>(ceil_div(plan::input_elements(e), p.tiles_used()));
    v.params[sl::kTransposeFactor] = static_cast<std::int64_t>(plan::transpose_factor(chip, e));
    prog.compute_sets.push_back({"expand_input", {v}});
    prog.steps.push_back(make_step(trace::StepKind::kCompute, 0));
    prog.steps.push_back(make_step(trace::StepKind::kSync));
  }
  plan::emit_conv(prog, "", chip, a, p, prog.steps);
  return t;
}

}  // namespace

trace::Trace conv2d(const ChipSpec& chip, const ConvArgs& a) {
  return conv2d_with(chip, a, plan::plan_conv(chip, a));
}

trace::Trace conv2d(const ChipSpec& chip, const ConvArgs& a, std::uint64_t budget) {
  return conv2d_with(chip, a, plan::plan_conv(chip, a, budget));
}

trace::Trace matmul(const ChipSpec& chip, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                    DType dtype) {
  return matmul(chip, m, n, k, dtype, 1);
}

trace::Trace matmul(const ChipSpec& chip, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                    DType dtype, std::uint64_t groups) {
  ConvArgs a;
  a.height = m;
  a.out_chans = n;
  a.in_chans = k;
  a.dtype = dtype;
  a.groups = groups;
  a.matmul = true;
  return conv2d(chip, a);
}

trace::Trace reduce(const ChipSpec& chip, std::uint64_t outputs, std::uint64_t inputs, DType dtype,
                    trace::ReduceLayout layout) {
  require(outputs >= 1 && inputs >= 1, "reduce needs --outputs and --inputs of at least 1");
  trace::Trace t = one_ipu(fmt::format("reduce_{}x{}_{}", inputs, outputs,
                                       trace::kDTypeNames[static_cast<std::size_t>(dtype)]));
  auto& prog = t.ipus[0];
  const Spread sp = spread(outputs, chip.tiles);
  const TileRange used{0, sp.used - 1};
  const std::uint64_t eb = trace::dtype_bytes(dtype);
  prog.tensors.push_back(
      {"partials", trace::TensorKind::kPartial, dtype, used, sp.big * inputs * eb});
  prog.tensors.push_back({"out", trace::TensorKind::kOutput, dtype, used, sp.big * eb});
  trace::ComputeSet cs{"reduce", {}};
  namespace sl = trace::slot;
  add_spread(cs, trace::Codelet::kReduce, sp, [&](trace::Vertex& v, std::uint64_t count) {
    v.params[sl::kReduceOp] = static_cast<std::int64_t>(trace::Op::kAdd);
    v.params[sl::kReduceIn] = static_cast<std::int64_t>(dtype);
    v.params[sl::kReduceOut] = static_cast<std::int64_t>(dtype);
    v.params[sl::kReduceOutputs] = static_cast<std::int64_t>(count);
    v.params[sl::kReduceInputs] = static_cast<std::int64_t>(inputs);
    v.params[sl::kReduceLayout] = static_cast<std::int64_t>(layout);
  });
  // A reduction to one value split over the workers runs its second stage in a compute set of
  // its own, as the compiler's do.
  plan::add_reduction(chip, prog, std::move(cs), "reduce_second_stage", prog.steps);
  return t;
}

trace::Trace elementwise(const ChipSpec& chip, trace::Op op, std::uint64_t n, DType dtype) {
  require(n >= 1, "elementwise needs --n of at least 1");
  const bool is_binary = op <= trace::Op::kMin;
  trace::Trace t =
      one_ipu(fmt::format("elementwise_{}_{}_{}", trace::kOpNames[static_cast<std::size_t>(op)], n,
                          trace::kDTypeNames[static_cast<std::size_t>(dtype)]));
  auto& prog = t.ipus[0];
  const Spread sp = spread(n, chip.tiles);
  const TileRange used{0, sp.used - 1};
  const std::uint64_t bytes = sp.big * trace::dtype_bytes(dtype);
  prog.tensors.push_back({"a", trace::TensorKind::kActivation, dtype, used, bytes});
  if (is_binary) prog.tensors.push_back({"b", trace::TensorKind::kActivation, dtype, used, bytes});
  prog.tensors.push_back({"out", trace::TensorKind::kOutput, dtype, used, bytes});
  trace::ComputeSet cs{"elementwise", {}};
  namespace sl = trace::slot;
  add_spread(cs, is_binary ? trace::Codelet::kBinary : trace::Codelet::kUnary, sp,
             [&](trace::Vertex& v, std::uint64_t count) {
               v.params[sl::kEltOp] = static_cast<std::int64_t>(op);
               v.params[sl::kEltDType] = static_cast<std::int64_t>(dtype);
               v.params[sl::kEltN] = static_cast<std::int64_t>(count);
             });
  prog.compute_sets.push_back(std::move(cs));
  prog.steps = {make_step(trace::StepKind::kCompute, 0)};
  return t;
}

namespace {
// An exchange kernel runs over 2 to chip.tiles tiles; a one-tile chip has no such range.
void require_exchange_tiles(const ChipSpec& chip, std::string_view kernel, std::uint64_t tiles) {
  require(chip.tiles >= 2, fmt::format("{} needs a chip of at least 2 tiles, found chip.tiles {}",
                                       kernel, chip.tiles));
  require(tiles >= 2 && tiles <= chip.tiles,
          fmt::format("{} needs 2 to {} tiles, got {}", kernel, chip.tiles, tiles));
}
}  // namespace

trace::Trace exchange_all_to_all(const ChipSpec& chip, std::uint64_t bytes, std::uint32_t tiles) {
  require_exchange_tiles(chip, "all-to-all", tiles);
  trace::Trace t = one_ipu(fmt::format("exchange_all_to_all_{}B_{}tiles", bytes, tiles));
  auto& prog = t.ipus[0];
  const TileRange all{0, tiles - 1};
  prog.tensors.push_back(
      {"send_buf", trace::TensorKind::kTemp, DType::kChar, all, bytes * (tiles - 1)});
  prog.tensors.push_back(
      {"recv_buf", trace::TensorKind::kTemp, DType::kChar, all, bytes * (tiles - 1)});
  trace::Exchange ex{"all_to_all", {}, {}};
  ex.add(all, {&all, 1}, bytes, trace::TransferMode::kPersonalised);
  prog.exchanges.push_back(std::move(ex));
  prog.steps = {make_step(trace::StepKind::kSync), make_step(trace::StepKind::kExchange, 0)};
  return t;
}

trace::Trace exchange_broadcast(const ChipSpec& chip, std::uint64_t bytes, std::uint32_t tiles,
                                std::uint32_t src) {
  require_exchange_tiles(chip, "broadcast", tiles);
  require(src < tiles,
          fmt::format("broadcast needs a source tile below its {} tiles, got {}", tiles, src));
  trace::Trace t = one_ipu(fmt::format("exchange_broadcast_{}B_{}tiles", bytes, tiles));
  auto& prog = t.ipus[0];
  const TileRange all{0, tiles - 1};
  prog.tensors.push_back({"data", trace::TensorKind::kActivation, DType::kChar, all, bytes});
  trace::Exchange ex{"broadcast", {}, {}};
  ex.add(TileRange{src, src}, {&all, 1}, bytes);
  prog.exchanges.push_back(std::move(ex));
  prog.steps = {make_step(trace::StepKind::kSync), make_step(trace::StepKind::kExchange, 0)};
  return t;
}

trace::Trace sync_loop(const ChipSpec& /*chip*/, std::uint64_t iterations) {
  require(iterations >= 1, "sync-loop needs --iterations of at least 1");
  trace::Trace t = one_ipu(fmt::format("sync_loop_{}", iterations));
  trace::Step loop = make_step(trace::StepKind::kRepeat);
  loop.count = iterations;
  loop.body.push_back(make_step(trace::StepKind::kSync));
  t.ipus[0].steps.push_back(std::move(loop));
  return t;
}

trace::Trace link_p2p(const ChipSpec& /*chip*/, std::uint64_t bytes, std::uint32_t src,
                      std::uint32_t dst) {
  require(src != dst, "link-p2p needs two different IPUs (--src-ipu, --dst-ipu)");
  trace::Trace t;
  t.name = fmt::format("link_p2p_{}B_ipu{}_to_ipu{}", bytes, src, dst);
  t.global_exchanges.push_back({"p2p", {trace::IpuCopy{src, dst, bytes}}});
  for (std::uint32_t ipu : {std::min(src, dst), std::max(src, dst)}) {
    trace::IpuProgram& p = t.ipus.emplace_back();
    p.ipu = ipu;
    p.steps.push_back(make_step(trace::StepKind::kGlobalExchange, 0));
  }
  return t;
}

trace::Trace collective(const ChipSpec& chip, trace::CollectiveOp op, std::uint64_t bytes,
                        std::uint32_t group, trace::CollectiveMethod method, DType dtype) {
  require(group >= 1, "a collective needs --group of at least 1");
  trace::Trace t = one_ipu(
      fmt::format("{}_{}B_{}ipus_{}", trace::kCollectiveOpNames[static_cast<std::size_t>(op)],
                  bytes, group, trace::kCollectiveMethodNames[static_cast<std::size_t>(method)]));
  t.replicas = group;
  // The tensor is spread over all tiles, as gradients are.
  const Spread sp = spread(ceil_div(bytes, 1), chip.tiles);
  if (sp.used > 0)
    t.ipus[0].tensors.push_back(
        {"tensor", trace::TensorKind::kGradient, dtype, TileRange{0, sp.used - 1}, sp.big});
  trace::Step c = make_step(trace::StepKind::kCollective);
  c.collective = op;
  c.method = method;
  c.dtype = dtype;
  c.bytes = bytes;
  c.group = trace::Group{trace::GroupKind::kReplicas, 0};
  t.ipus[0].steps.push_back(c);
  return t;
}

trace::Trace external_sync(const ChipSpec& /*chip*/, std::uint32_t group,
                           std::uint64_t iterations) {
  require(group >= 1 && iterations >= 1, "sync needs --group and --iterations of at least 1");
  trace::Trace t = one_ipu(fmt::format("external_sync_{}ipus_{}", group, iterations));
  t.replicas = group;
  trace::Step loop = make_step(trace::StepKind::kRepeat);
  loop.count = iterations;
  trace::Step sync = make_step(trace::StepKind::kSync);
  sync.group = trace::Group{trace::GroupKind::kAll, 0};
  loop.body.push_back(sync);
  t.ipus[0].steps.push_back(std::move(loop));
  return t;
}

}  // namespace ipusim::kernels
