// SPDX-License-Identifier: Apache-2.0
// Lowering of a training step onto IPU programs (docs/workloads.md).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/kernels/kernels.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::compiler {
namespace {

using trace::DType;
using trace::Op;
using trace::Step;
using trace::StepKind;
using trace::TileRange;

Step make(StepKind kind, std::uint32_t index = 0) {
  Step s;
  s.kind = kind;
  s.index = index;
  return s;
}

// Builds one IPU's program. Identical operations (same shape) reuse the same compute sets and
// exchanges, as Poplar reuses code for repeated layers, so the trace stays small.
class IpuBuilder {
 public:
  static constexpr std::uint64_t kMinBytesPerTile = 128;
  IpuBuilder(const ChipSpec& chip, trace::IpuProgram& program, double available_memory,
             DType partials)
      : chip_(chip), program_(program), partials_(partials),
        budget_(static_cast<std::uint64_t>(available_memory * static_cast<double>(chip.tile_memory.count))) {}

  // A convolution or matmul (fwd, data-gradient or weight-gradient pass).
  void conv(std::vector<Step>& out, const kernels::ConvArgs& a) {
    const std::string key = fmt::format("conv_n{}_c{}_{}x{}_k{}_f{}_s{}_{}", a.batch, a.in_chans,
                                        a.height, a.width, a.out_chans, a.kernel, a.stride,
                                        static_cast<int>(a.dtype));
    auto it = ops_.find(key);
    if (it == ops_.end()) {
      const kernels::ConvPlan plan = kernels::plan_conv(chip_, a, budget_);
      peak_temp_ = std::max(peak_temp_, plan.bytes_per_tile);
      std::vector<Step> steps;
      kernels::emit_conv(program_, key + "/", chip_, a, plan, steps);
      it = ops_.emplace(key, std::move(steps)).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }

  void matmul(std::vector<Step>& out, std::uint64_t m, std::uint64_t n, std::uint64_t k, DType dt) {
    kernels::ConvArgs a;
    a.height = m;
    a.out_chans = n;
    a.in_chans = k;
    a.dtype = dt;
    conv(out, a);
  }

  // An elementwise pass over `elements`, spread over the tiles (spread()), then a sync.
  void elementwise(std::vector<Step>& out, Op op, std::uint64_t elements, DType dt) {
    const TileRange tiles = spread(elements, dt);
    const std::uint64_t per_tile = ceil_div(elements, tiles.size());
    const bool binary = op <= Op::kMin;
    const std::string key = fmt::format("{}_{}x{}_{}", trace::kOpNames[static_cast<int>(op)], per_tile,
                                        tiles.size(), static_cast<int>(dt));
    auto it = ops_.find(key);
    if (it == ops_.end()) {
      trace::Vertex v{binary ? trace::Codelet::kBinary : trace::Codelet::kUnary, tiles, {}};
      v.params[trace::slot::kEltOp] = static_cast<std::int64_t>(op);
      v.params[trace::slot::kEltDType] = static_cast<std::int64_t>(dt);
      v.params[trace::slot::kEltN] = static_cast<std::int64_t>(per_tile);
      it = ops_.emplace(key, std::vector<Step>{make(StepKind::kCompute, add_compute_set(key, {v})),
                                               make(StepKind::kSync)}).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }

  // a += scale * b over `elements` (gradient accumulation, optimiser updates).
  void scaled_add(std::vector<Step>& out, std::uint64_t elements, DType dt) {
    const TileRange tiles = spread(elements, dt);
    const std::uint64_t per_tile = ceil_div(elements, tiles.size());
    const std::string key = fmt::format("scaled_add_{}x{}_{}", per_tile, tiles.size(), static_cast<int>(dt));
    auto it = ops_.find(key);
    if (it == ops_.end()) {
      trace::Vertex v{trace::Codelet::kScaledAdd, tiles, {}};
      v.params[trace::slot::kScaledAddDType] = static_cast<std::int64_t>(dt);
      v.params[trace::slot::kScaledAddN] = static_cast<std::int64_t>(per_tile);
      it = ops_.emplace(key, std::vector<Step>{make(StepKind::kCompute, add_compute_set(key, {v})),
                                               make(StepKind::kSync)}).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }

  // Reduces `elements` to `outputs` sums. With `outputs_innermost` (batch-norm channels: the
  // reduced dimensions are outer) every tile holds partials of many outputs and all tiles
  // must be combined; otherwise (softmax, layer norm: each output's inputs are contiguous)
  // an output spans ceil(inputs per output / elements per tile) tiles, often just one.
  // Partials are combined in stages (poplar-compiler.md §1.3: one stage below a depth of 16,
  // two from 16, three from 125), each gathering groups of `fan_in` tiles onto one tile.
  void reduce(std::vector<Step>& out, std::uint64_t elements, std::uint64_t outputs, DType in,
              bool outputs_innermost = false) {
    const TileRange tiles = spread(elements, in);
    const std::uint64_t per_tile = ceil_div(elements, tiles.size());
    const std::uint64_t per_output = std::max<std::uint64_t>(1, elements / std::max<std::uint64_t>(outputs, 1));
    std::uint64_t local_outputs = 0, local_inputs = 0, depth = 0;
    if (outputs_innermost) {
      local_outputs = std::max<std::uint64_t>(1, std::min(outputs, per_tile));
      local_inputs = std::max<std::uint64_t>(1, per_tile / local_outputs);
      depth = tiles.size();
    } else if (per_tile >= per_output) {
      local_outputs = ceil_div(per_tile, per_output);
      local_inputs = per_output;
      depth = 1;
    } else {
      local_outputs = 1;
      local_inputs = per_tile;
      depth = ceil_div(per_output, per_tile);
    }
    const std::string key = fmt::format("reduce_{}_{}_{}_{}", elements, outputs, static_cast<int>(in),
                                        outputs_innermost ? "inner" : "outer");
    auto it = ops_.find(key);
    if (it == ops_.end()) {
      std::vector<Step> steps;
      namespace sl = trace::slot;
      trace::Vertex local{trace::Codelet::kReduce, tiles, {}};
      local.params[sl::kReduceOp] = static_cast<std::int64_t>(Op::kAdd);
      local.params[sl::kReduceIn] = static_cast<std::int64_t>(in);
      local.params[sl::kReduceOut] = static_cast<std::int64_t>(DType::kFloat);
      local.params[sl::kReduceOutputs] = static_cast<std::int64_t>(local_outputs);
      local.params[sl::kReduceInputs] = static_cast<std::int64_t>(local_inputs);
      steps.push_back(make(StepKind::kCompute, add_compute_set(key + "/local", {local})));
      steps.push_back(make(StepKind::kSync));
      const int stages = depth < 2 ? 0 : depth < 16 ? 1 : depth < 125 ? 2 : 3;
      const auto fan_in = static_cast<std::uint64_t>(
          std::ceil(std::pow(static_cast<double>(depth), 1.0 / std::max(stages, 1)) - 1e-9));
      const std::uint64_t partial_bytes = local_outputs * 4;  // float partials
      std::uint64_t holders = tiles.size();
      for (int stage = 0; stage < stages; ++stage) {
        const std::uint64_t next = ceil_div(holders, fan_in);
        trace::Exchange ex{fmt::format("{}/stage{}", key, stage), {}, {}};
        for (std::uint64_t j = 0; j < next; ++j) {
          const TileRange leader{static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(j)};
          const auto first = static_cast<std::uint32_t>(j * fan_in);
          const auto last = static_cast<std::uint32_t>(std::min(holders, (j + 1) * fan_in) - 1);
          ex.add(TileRange{first, last}, {&leader, 1}, partial_bytes);
        }
        program_.exchanges.push_back(std::move(ex));
        steps.push_back(make(StepKind::kExchange, static_cast<std::uint32_t>(program_.exchanges.size() - 1)));
        trace::Vertex combine{trace::Codelet::kReduce,
                              TileRange{0, static_cast<std::uint32_t>(next - 1)}, local.params};
        combine.params[sl::kReduceIn] = static_cast<std::int64_t>(DType::kFloat);
        combine.params[sl::kReduceInputs] = static_cast<std::int64_t>(std::max<std::uint64_t>(2, fan_in));
        steps.push_back(make(StepKind::kCompute, add_compute_set(fmt::format("{}/stage{}", key, stage), {combine})));
        steps.push_back(make(StepKind::kSync));
        holders = next;
      }
      it = ops_.emplace(key, std::move(steps)).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }

  void host(std::vector<Step>& out, std::uint64_t total_bytes, trace::HostDirection dir,
            trace::HostMemory memory, bool overlap = false) {
    if (total_bytes == 0) return;
    Step s = make(StepKind::kHost);
    s.direction = dir;
    s.memory = memory;
    s.overlap = overlap;
    s.tiles = all();
    s.bytes = ceil_div(total_bytes, chip_.tiles);
    out.push_back(s);
  }

  static Step collective(trace::CollectiveOp op, std::uint64_t bytes, DType dt, trace::Group group) {
    Step s = make(StepKind::kCollective);
    s.collective = op;
    s.bytes = bytes;
    s.dtype = dt;
    s.group = group;
    return s;
  }

  // A tensor of `total_bytes` spread evenly over all tiles.
  void tensor(const std::string& name, trace::TensorKind kind, DType dt, std::uint64_t total_bytes) {
    if (total_bytes == 0) return;
    program_.tensors.push_back({name, kind, dt, all(), ceil_div(total_bytes, chip_.tiles)});
  }

  // Tiles for a tensor of `elements`: spread linearly from tile 0 with at least
  // kMinBytesPerTile on each tile (poplar-compiler.md §7.4), so small tensors use few tiles.
  TileRange spread(std::uint64_t elements, DType dt) const {
    const std::uint64_t bytes = elements * trace::dtype_bytes(dt);
    const std::uint64_t used = std::clamp<std::uint64_t>(ceil_div(bytes, kMinBytesPerTile), 1, chip_.tiles);
    return TileRange{0, static_cast<std::uint32_t>(used - 1)};
  }

  std::uint64_t peak_temp() const { return peak_temp_; }
  DType partials() const { return partials_; }
  const ChipSpec& chip() const { return chip_; }

 private:
  TileRange all() const { return TileRange{0, chip_.tiles - 1}; }
  std::uint32_t add_compute_set(const std::string& name, std::vector<trace::Vertex> vertices) {
    program_.compute_sets.push_back({name, std::move(vertices)});
    return static_cast<std::uint32_t>(program_.compute_sets.size() - 1);
  }

  const ChipSpec& chip_;
  trace::IpuProgram& program_;
  DType partials_;
  std::uint64_t budget_;
  std::uint64_t peak_temp_ = 0;
  std::map<std::string, std::vector<Step>> ops_;
};

double amp_for(const RunConfig& run, std::size_t ipu) {
  return run.available_memory.size() == 1 ? run.available_memory[0] : run.available_memory[ipu];
}

// ---------------------------------------------------------------------------------------------
// CNN (ResNet-50)

struct Shape {
  std::uint64_t h = 0, w = 0, c = 0;
  std::uint64_t elements() const { return h * w * c; }
};

struct CnnLayer {
  const Layer* layer;
  Shape in, out;
  std::uint64_t params = 0;
};

std::vector<CnnLayer> propagate(const ModelDef& m) {
  std::map<std::string, Shape> shapes;
  std::vector<CnnLayer> out;
  Shape input{m.height, m.width, m.channels};
  for (const Layer& l : m.layers) {
    CnnLayer c{&l, l.input.empty() ? input : shapes.at(l.input), {}, 0};
    Shape s = c.in;
    if (l.op == "conv") {
      s = {ceil_div(s.h, l.stride), ceil_div(s.w, l.stride), l.out};
      c.params = l.kernel * l.kernel * c.in.c * l.out;
    } else if (l.op == "maxpool") {
      s = {ceil_div(s.h, l.stride), ceil_div(s.w, l.stride), s.c};
    } else if (l.op == "avgpool") {
      s = {1, 1, s.c};
    } else if (l.op == "fc") {
      s = {1, 1, l.out};
      c.params = c.in.c * l.out + l.out;
    } else if (l.op == "batchnorm") {
      c.params = 2 * s.c;
    }
    c.out = s;
    shapes[l.name] = s;
    out.push_back(c);
  }
  return out;
}

class CnnLowering {
 public:
  CnnLowering(const ModelDef& m, const RunConfig& run, IpuBuilder& b)
      : m_(m), run_(run), b_(b), layers_(propagate(m)), n_(run.micro_batch) {}

  void forward(std::vector<Step>& out, const CnnLayer& c) {
    const Layer& l = *c.layer;
    const DType dt = m_.dtype;
    const std::uint64_t in_e = n_ * c.in.elements(), out_e = n_ * c.out.elements();
    if (l.op == "conv") {
      b_.conv(out, conv_args(c.in.c, c.in.h, c.in.w, l.out, l.kernel, l.stride));
    } else if (l.op == "batchnorm") {
      // Statistics (sum and sum of squares per channel), shared over the batch-norm group,
      // then normalise and scale.
      b_.elementwise(out, Op::kSquare, out_e, dt);
      b_.reduce(out, out_e, c.out.c, dt, true);
      b_.reduce(out, out_e, c.out.c, dt, true);
      if (run_.batchnorm_group > 1)
        out.push_back(IpuBuilder::collective(trace::CollectiveOp::kAllReduce, 2 * c.out.c * 4,
                                             DType::kFloat, {trace::GroupKind::kReplicas, run_.batchnorm_group}));
      b_.elementwise(out, Op::kSub, out_e, dt);
      b_.elementwise(out, Op::kMul, out_e, dt);
      b_.scaled_add(out, out_e, dt);
    } else if (l.op == "relu") {
      b_.elementwise(out, Op::kRelu, out_e, dt);
    } else if (l.op == "maxpool") {
      b_.elementwise(out, Op::kMax, out_e * l.kernel * l.kernel, dt);
    } else if (l.op == "add") {
      b_.elementwise(out, Op::kAdd, out_e, dt);
    } else if (l.op == "avgpool") {
      b_.reduce(out, in_e, n_ * c.out.c, dt, true);
    } else if (l.op == "fc") {
      b_.matmul(out, n_, l.out, c.in.c, dt);
    } else if (l.op == "softmax_loss") {
      b_.elementwise(out, Op::kExp, in_e, dt);
      b_.reduce(out, in_e, n_, dt);
      b_.elementwise(out, Op::kDiv, in_e, dt);
    }
  }

  void backward(std::vector<Step>& out, const CnnLayer& c, bool first_layer) {
    const Layer& l = *c.layer;
    const DType dt = m_.dtype;
    const std::uint64_t in_e = n_ * c.in.elements(), out_e = n_ * c.out.elements();
    const auto ho = c.out.h, wo = c.out.w;
    if (l.op == "conv") {
      // Data gradient: a conv of the output gradient with the transposed weights (same MACs
      // as the forward pass); weight gradient: a matmul reducing over batch x output field.
      if (!first_layer) b_.conv(out, conv_args(l.out, ho, wo, c.in.c, l.kernel, 1));
      b_.matmul(out, l.kernel * l.kernel * c.in.c, l.out, n_ * ho * wo, dt);
      b_.scaled_add(out, c.params, dt);  // accumulate into the gradient accumulator
    } else if (l.op == "batchnorm") {
      b_.reduce(out, out_e, c.out.c, dt, true);
      b_.reduce(out, out_e, c.out.c, dt, true);
      if (run_.batchnorm_group > 1)
        out.push_back(IpuBuilder::collective(trace::CollectiveOp::kAllReduce, 2 * c.out.c * 4,
                                             DType::kFloat, {trace::GroupKind::kReplicas, run_.batchnorm_group}));
      b_.elementwise(out, Op::kMul, out_e, dt);
      b_.elementwise(out, Op::kSub, out_e, dt);
      b_.scaled_add(out, out_e, dt);
      b_.scaled_add(out, c.params, dt);
    } else if (l.op == "relu") {
      b_.elementwise(out, Op::kMul, out_e, dt);  // gradient x (activation > 0)
    } else if (l.op == "maxpool") {
      b_.elementwise(out, Op::kMul, in_e, dt);
    } else if (l.op == "add") {
      // The gradient flows to both operands unchanged.
    } else if (l.op == "avgpool") {
      b_.elementwise(out, Op::kMul, in_e, dt);
    } else if (l.op == "fc") {
      b_.matmul(out, n_, c.in.c, l.out, dt);
      b_.matmul(out, c.in.c, l.out, n_, dt);
      b_.scaled_add(out, c.params, dt);
    } else if (l.op == "softmax_loss") {
      b_.elementwise(out, Op::kSub, in_e, dt);
    }
  }

  // One micro-batch: input, forward, then backward segment by segment, recomputing each
  // segment's forward from its checkpoint (all but the last segment, whose activations are
  // still live).
  std::vector<Step> micro_batch() {
    std::vector<Step> out;
    // The next micro-batch's images stream in on I/O tiles while this one computes.
    b_.host(out, n_ * run_.input_bytes_per_sample, trace::HostDirection::kToIpu, trace::HostMemory::kHost,
            /*overlap=*/true);
    for (const auto& c : layers_) forward(out, c);
    const auto segments = segment_bounds();
    for (std::size_t s = segments.size(); s-- > 0;) {
      const auto [first, last] = segments[s];
      if (s + 1 != segments.size())
        for (std::size_t i = first; i < last; ++i) forward(out, layers_[i]);
      for (std::size_t i = last; i-- > first;) backward(out, layers_[i], i == 0);
    }
    return out;
  }

  // After the gradient-accumulation loop: all-reduce of the gradients, then the optimiser.
  std::vector<Step> weight_update() {
    std::vector<Step> out;
    const std::uint64_t params = total_params();
    const DType dt = m_.dtype;
    if (run_.replicas > 1)
      out.push_back(IpuBuilder::collective(trace::CollectiveOp::kAllReduce, params * trace::dtype_bytes(dt), dt,
                                           {trace::GroupKind::kReplicas, 0}));
    // LARS: per-layer weight and gradient norms, then momentum and weight updates.
    b_.elementwise(out, Op::kSquare, params, dt);
    b_.reduce(out, params, layers_.size(), dt);
    b_.elementwise(out, Op::kSquare, params, dt);
    b_.reduce(out, params, layers_.size(), dt);
    b_.scaled_add(out, params, dt);
    b_.scaled_add(out, params, dt);
    return out;
  }

  std::uint64_t total_params() const {
    return std::accumulate(layers_.begin(), layers_.end(), std::uint64_t{0},
                           [](std::uint64_t a, const CnnLayer& c) { return a + c.params; });
  }

  // Activation bytes kept between forward and backward: the checkpoints, plus the largest
  // segment's activations while it is recomputed and back-propagated. Batch norm, ReLU and
  // the residual add work in place, so a segment holds the outputs of its convs, pools and
  // fc, plus a working set of two gradient tensors of its largest activation.
  std::pair<std::uint64_t, std::uint64_t> activation_bytes() const {
    const std::uint64_t eb = trace::dtype_bytes(m_.dtype);
    std::uint64_t checkpoints = 0, live = 0;
    for (const auto& [first, last] : segment_bounds()) {
      checkpoints += n_ * layers_[last - 1].out.elements() * eb;
      std::uint64_t seg = 0, largest = 0;
      for (std::size_t i = first; i < last; ++i) {
        const std::string& op = layers_[i].layer->op;
        const std::uint64_t bytes = n_ * layers_[i].out.elements() * eb;
        if (op == "conv" || op == "maxpool" || op == "avgpool" || op == "fc") seg += bytes;
        largest = std::max(largest, bytes);
      }
      live = std::max(live, seg + 2 * largest);
    }
    return {checkpoints, live};
  }

 private:
  kernels::ConvArgs conv_args(std::uint64_t in, std::uint64_t h, std::uint64_t w, std::uint64_t out,
                              std::uint64_t k, std::uint64_t s) const {
    kernels::ConvArgs a;
    a.batch = n_;
    a.in_chans = in;
    a.height = h;
    a.width = w;
    a.out_chans = out;
    a.kernel = k;
    a.stride = s;
    a.dtype = m_.dtype;
    return a;
  }

  // [first, last) layer ranges between checkpoints.
  std::vector<std::pair<std::size_t, std::size_t>> segment_bounds() const {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    std::size_t first = 0;
    for (std::size_t i = 0; i < layers_.size(); ++i)
      if (std::find(run_.checkpoints.begin(), run_.checkpoints.end(), layers_[i].layer->name) !=
          run_.checkpoints.end()) {
        out.emplace_back(first, i + 1);
        first = i + 1;
      }
    if (first < layers_.size()) out.emplace_back(first, layers_.size());
    return out;
  }

  const ModelDef& m_;
  const RunConfig& run_;
  IpuBuilder& b_;
  std::vector<CnnLayer> layers_;
  std::uint64_t n_;
};

void check_checkpoints(const ModelDef& m, const RunConfig& run) {
  for (const auto& c : run.checkpoints)
    if (std::none_of(m.layers.begin(), m.layers.end(), [&](const Layer& l) { return l.name == c; }))
      throw ConfigError(fmt::format("{}: run.recompute_checkpoints: '{}' is not a layer of {}", run.file, c, m.file));
}

trace::Trace compile_cnn(const ModelDef& m, const RunConfig& run, const SystemSpec& system) {
  if (run.ipus_per_replica != 1)
    throw ConfigError(fmt::format("{}: run.ipus_per_replica: CNN models run one IPU per replica (data "
                                  "parallel), found {}", run.file, run.ipus_per_replica));
  check_checkpoints(m, run);
  trace::Trace t;
  t.name = run.name;
  t.replicas = run.replicas;
  auto& program = t.ipus.emplace_back();
  IpuBuilder b(system.chip, program, amp_for(run, 0), run.partials);
  CnnLowering lower(m, run, b);
  Step loop = make(StepKind::kRepeat);
  loop.count = run.gradient_accumulation;
  loop.body = lower.micro_batch();
  program.steps.push_back(std::move(loop));
  for (auto& s : lower.weight_update()) program.steps.push_back(std::move(s));
  // Memory: weights, gradient accumulators and LARS momentum (16-bit), checkpoints and live
  // activations, the input buffer and the largest conv's temporaries.
  const std::uint64_t eb = trace::dtype_bytes(m.dtype);
  const std::uint64_t params = lower.total_params();
  const auto [checkpoints, live] = lower.activation_bytes();
  b.tensor("weights", trace::TensorKind::kWeight, m.dtype, params * eb);
  b.tensor("gradient_accumulators", trace::TensorKind::kGradient, m.dtype, params * eb);
  b.tensor("optimiser_momentum", trace::TensorKind::kOptimiser, m.dtype, params * eb);
  b.tensor("checkpoint_activations", trace::TensorKind::kActivation, m.dtype, checkpoints);
  b.tensor("live_activations", trace::TensorKind::kActivation, m.dtype, live);
  b.tensor("input_buffer", trace::TensorKind::kInput, DType::kChar, run.micro_batch * run.input_bytes_per_sample);
  program.tensors.push_back({"conv_temporaries", trace::TensorKind::kTemp, m.dtype,
                             TileRange{0, system.chip.tiles - 1}, b.peak_temp()});
  return t;
}

// ---------------------------------------------------------------------------------------------
// Transformer (BERT-Large): pipelined over the IPUs of a replica.

class TransformerLowering {
 public:
  TransformerLowering(const ModelDef& m, const RunConfig& run, IpuBuilder& b)
      : m_(m), run_(run), b_(b), tokens_(run.micro_batch * m.sequence),
        packs_(run.micro_batch) {}

  std::uint64_t attention_params() const { return 4 * m_.hidden * m_.hidden + 4 * m_.hidden + 2 * m_.hidden; }
  std::uint64_t ffn_params() const { return 2 * m_.hidden * m_.ffn + m_.hidden + m_.ffn + 2 * m_.hidden; }
  std::uint64_t embedding_params() const {
    return (m_.vocabulary + m_.max_positions + 2) * m_.hidden + 2 * m_.hidden;
  }
  std::uint64_t head_params() const { return m_.hidden * m_.hidden + 3 * m_.hidden + 2 * m_.hidden; }
  std::uint64_t masked() const {
    return static_cast<std::uint64_t>(std::ceil(static_cast<double>(packs_) * run_.sequences_per_pack)) *
           m_.masked_tokens;
  }

  void layer_norm(std::vector<Step>& out) {
    const DType dt = m_.dtype;
    b_.reduce(out, tokens_ * m_.hidden, tokens_, dt);
    b_.elementwise(out, Op::kSquare, tokens_ * m_.hidden, dt);
    b_.reduce(out, tokens_ * m_.hidden, tokens_, dt);
    b_.elementwise(out, Op::kSub, tokens_ * m_.hidden, dt);
    b_.scaled_add(out, tokens_ * m_.hidden, dt);
  }

  void attention_fwd(std::vector<Step>& out) {
    const DType dt = m_.dtype;
    const std::uint64_t h = m_.hidden, s = m_.sequence, heads = m_.heads, d = h / heads;
    const std::uint64_t rows = packs_ * heads * s;
    b_.matmul(out, tokens_, 3 * h, h, dt);          // Q, K, V projections
    b_.matmul(out, rows, s, d, dt);                 // scores = Q K^T per head
    b_.elementwise(out, Op::kExp, rows * s, dt);    // softmax
    b_.reduce(out, rows * s, rows, dt);
    b_.elementwise(out, Op::kDiv, rows * s, dt);
    b_.matmul(out, rows, d, s, dt);                 // context = P V
    b_.matmul(out, tokens_, h, h, dt);              // output projection
    b_.elementwise(out, Op::kAdd, tokens_ * h, dt); // residual
    layer_norm(out);
  }

  void ffn_fwd(std::vector<Step>& out) {
    const DType dt = m_.dtype;
    b_.matmul(out, tokens_, m_.ffn, m_.hidden, dt);
    b_.elementwise(out, Op::kGelu, tokens_ * m_.ffn, dt);
    b_.matmul(out, tokens_, m_.hidden, m_.ffn, dt);
    b_.elementwise(out, Op::kAdd, tokens_ * m_.hidden, dt);
    layer_norm(out);
  }

  // Backward of a matmul C[M x N] = A[M x K] B[K x N]: dA = dC B^T and dB = A^T dC.
  void matmul_bwd(std::vector<Step>& out, std::uint64_t m, std::uint64_t n, std::uint64_t k, bool weights) {
    b_.matmul(out, m, k, n, m_.dtype);
    b_.matmul(out, k, n, m, m_.dtype);
    if (weights) b_.scaled_add(out, k * n, m_.dtype);
  }

  void attention_bwd(std::vector<Step>& out) {
    const DType dt = m_.dtype;
    const std::uint64_t h = m_.hidden, s = m_.sequence, heads = m_.heads, d = h / heads;
    const std::uint64_t rows = packs_ * heads * s;
    layer_norm(out);
    matmul_bwd(out, tokens_, h, h, true);
    matmul_bwd(out, rows, d, s, false);
    b_.elementwise(out, Op::kMul, rows * s, dt);  // softmax gradient
    b_.reduce(out, rows * s, rows, dt);
    b_.elementwise(out, Op::kSub, rows * s, dt);
    matmul_bwd(out, rows, s, d, false);
    matmul_bwd(out, tokens_, 3 * h, h, true);
  }

  void ffn_bwd(std::vector<Step>& out) {
    const DType dt = m_.dtype;
    layer_norm(out);
    matmul_bwd(out, tokens_, m_.hidden, m_.ffn, true);
    b_.elementwise(out, Op::kMul, tokens_ * m_.ffn, dt);  // GELU gradient
    matmul_bwd(out, tokens_, m_.ffn, m_.hidden, true);
  }

  // Embedding lookup (a dynamic slice of the table per token) and, on the same IPU, the MLM
  // head: dense + GELU + layer norm on the masked tokens, then the vocabulary matmul against
  // the tied embedding, serialised over the vocabulary.
  void embedding_fwd(std::vector<Step>& out) {
    gather(out);
    layer_norm(out);
  }
  void heads_fwd(std::vector<Step>& out) {
    const DType dt = m_.dtype;
    const std::uint64_t t = masked();
    b_.matmul(out, t, m_.hidden, m_.hidden, dt);
    b_.elementwise(out, Op::kGelu, t * m_.hidden, dt);
    const std::uint64_t slice = ceil_div(m_.vocabulary, run_.embedding_serialisation);
    for (std::uint32_t i = 0; i < run_.embedding_serialisation; ++i) b_.matmul(out, t, slice, m_.hidden, dt);
    b_.elementwise(out, Op::kExp, t * m_.vocabulary, dt);
    b_.reduce(out, t * m_.vocabulary, t, dt);
  }
  void heads_bwd(std::vector<Step>& out) {
    const std::uint64_t t = masked();
    const std::uint64_t slice = ceil_div(m_.vocabulary, run_.embedding_serialisation);
    b_.elementwise(out, Op::kSub, t * m_.vocabulary, m_.dtype);
    for (std::uint32_t i = 0; i < run_.embedding_serialisation; ++i) matmul_bwd(out, t, slice, m_.hidden, true);
    matmul_bwd(out, t, m_.hidden, m_.hidden, true);
  }
  void embedding_bwd(std::vector<Step>& out) {
    layer_norm(out);
    b_.scaled_add(out, tokens_ * m_.hidden, m_.dtype);  // scatter-add into the table gradient
  }

  std::uint64_t tokens() const { return tokens_; }

 private:
  void gather(std::vector<Step>& out) {
    // One dynamic slice of `hidden` elements per token, tokens spread over the tiles.
    (void)out;
    b_.elementwise(out, Op::kAdd, tokens_ * m_.hidden, m_.dtype);  // token + position embeddings
  }

  const ModelDef& m_;
  const RunConfig& run_;
  IpuBuilder& b_;
  std::uint64_t tokens_;
  std::uint64_t packs_;
};

trace::Trace compile_transformer(const ModelDef& m, const RunConfig& run, const SystemSpec& system) {
  const std::uint32_t p = run.ipus_per_replica;
  if (run.placement.size() != p)
    throw ConfigError(fmt::format("{}: run.pipeline_placement: a transformer needs a placement for each of "
                                  "the {} IPUs of a replica", run.file, p));
  std::uint64_t attn = 0, ffn = 0;
  for (const auto& [a, f] : run.placement) {
    attn += a;
    ffn += f;
  }
  if (attn != m.encoder_layers || ffn != m.encoder_layers)
    throw ConfigError(fmt::format("{}: run.pipeline_placement places {} attention and {} FFN sub-layers; "
                                  "{} has {} of each", run.file, attn, ffn, m.file, m.encoder_layers));
  trace::Trace t;
  t.name = run.name;
  t.replicas = run.replicas;
  const std::uint64_t eb = trace::dtype_bytes(m.dtype);
  const std::uint64_t acts = run.micro_batch * m.sequence * m.hidden * eb;  // stage boundary
  // Activations travel IPU0 -> IPU1 -> ... -> IPU(p-1) -> IPU0; gradients the other way.
  trace::GlobalExchange fwd{"stage_activations", {}}, bwd{"stage_gradients", {}};
  for (std::uint32_t i = 0; i < p; ++i) {
    fwd.copies.push_back({i, (i + 1) % p, acts});
    bwd.copies.push_back({(i + 1) % p, i, acts});
  }
  t.global_exchanges = {fwd, bwd};
  const std::uint64_t cycles = run.gradient_accumulation + p - 1;  // fill + steady state + flush
  for (std::uint32_t ipu = 0; ipu < p; ++ipu) {
    auto& program = t.ipus.emplace_back();
    program.ipu = ipu;
    IpuBuilder b(system.chip, program, amp_for(run, ipu), run.partials);
    TransformerLowering lower(m, run, b);
    const auto [n_attn, n_ffn] = run.placement[ipu];
    const bool first = ipu == 0;
    std::vector<Step> forward, backward;
    if (first) lower.embedding_fwd(forward);
    for (std::uint32_t i = 0; i < std::max(n_attn, n_ffn); ++i) {
      if (i < n_attn) lower.attention_fwd(forward);
      if (i < n_ffn) lower.ffn_fwd(forward);
    }
    if (first) lower.heads_fwd(forward);
    // Backward recomputes the stage's forward first (pipeline recomputation).
    backward = forward;
    if (first) lower.heads_bwd(backward);
    for (std::uint32_t i = std::max(n_attn, n_ffn); i-- > 0;) {
      if (i < n_ffn) lower.ffn_bwd(backward);
      if (i < n_attn) lower.attention_bwd(backward);
    }
    if (first) lower.embedding_bwd(backward);
    Step loop = make(StepKind::kRepeat);
    loop.count = cycles;
    if (first) b.host(loop.body, run.micro_batch * run.input_bytes_per_sample, trace::HostDirection::kToIpu,
                      trace::HostMemory::kHost, /*overlap=*/true);
    loop.body.insert(loop.body.end(), forward.begin(), forward.end());
    loop.body.push_back(make(StepKind::kGlobalExchange, 0));
    loop.body.insert(loop.body.end(), backward.begin(), backward.end());
    loop.body.push_back(make(StepKind::kGlobalExchange, 1));
    program.steps.push_back(std::move(loop));
    // Weight update after the pipeline flush, on the tiles holding each stage's weights.
    std::uint64_t params = n_attn * lower.attention_params() + n_ffn * lower.ffn_params();
    if (first) params += lower.embedding_params() + lower.head_params();
    const bool rts = run.replicated_tensor_sharding && run.replicas > 1;
    const std::uint64_t shard = rts ? ceil_div(params, run.replicas) : params;
    if (run.replicas > 1)
      program.steps.push_back(IpuBuilder::collective(
          rts ? trace::CollectiveOp::kReduceScatter : trace::CollectiveOp::kAllReduce, params * eb, m.dtype,
          {trace::GroupKind::kReplicas, 0}));
    // LAMB: two moments (16-bit), per-tensor norms, update; state streamed in and out when it
    // lives in Streaming Memory.
    const std::uint64_t state = 2 * shard * eb;
    if (run.optimiser_state_streaming)
      b.host(program.steps, state, trace::HostDirection::kToIpu, trace::HostMemory::kStreaming);
    for (int pass = 0; pass < 4; ++pass) b.scaled_add(program.steps, shard, m.dtype);
    b.elementwise(program.steps, Op::kSquare, shard, m.dtype);
    b.reduce(program.steps, shard, 2 * (n_attn + n_ffn) + 2, m.dtype);
    b.elementwise(program.steps, Op::kRsqrt, shard, m.dtype);
    if (run.optimiser_state_streaming)
      b.host(program.steps, state, trace::HostDirection::kFromIpu, trace::HostMemory::kStreaming);
    if (rts)
      program.steps.push_back(IpuBuilder::collective(trace::CollectiveOp::kAllGather, params * eb, m.dtype,
                                                     {trace::GroupKind::kReplicas, 0}));
    // Memory: weights and gradient accumulators, optimiser state unless streamed, stashed
    // stage inputs (2 x stages to the end + 1 micro-batches), the largest sub-layer's live
    // activations, and the planner's temporaries.
    const std::uint64_t stages_to_end = first ? 0 : p - ipu;
    const std::uint64_t stash = (2 * stages_to_end + 1) * acts;
    const std::uint64_t heads_rows = run.micro_batch * m.heads * m.sequence;
    const std::uint64_t live = std::max(heads_rows * m.sequence * eb, lower.tokens() * m.ffn * eb) + 4 * acts;
    b.tensor("weights", trace::TensorKind::kWeight, m.dtype, params * eb);
    b.tensor("gradient_accumulators", trace::TensorKind::kGradient, m.dtype, params * eb);
    if (!run.optimiser_state_streaming) b.tensor("optimiser_state", trace::TensorKind::kOptimiser, m.dtype, state);
    b.tensor("stashed_activations", trace::TensorKind::kActivation, m.dtype, stash);
    b.tensor("live_activations", trace::TensorKind::kActivation, m.dtype, live);
    if (first)
      b.tensor("input_buffer", trace::TensorKind::kInput, DType::kChar, run.micro_batch * run.input_bytes_per_sample);
    program.tensors.push_back({"matmul_temporaries", trace::TensorKind::kTemp, m.dtype,
                               TileRange{0, system.chip.tiles - 1}, b.peak_temp()});
  }
  return t;
}

std::string meta_number(double v) {
  std::string s = fmt::format("{:.9g}", v);
  return s;
}

}  // namespace

trace::Trace compile(const ModelDef& model, const RunConfig& run, const SystemSpec& system) {
  const std::uint64_t needed = static_cast<std::uint64_t>(run.replicas) * run.ipus_per_replica;
  if (needed > system.ipus())
    throw ConfigError(fmt::format("{}: {} replicas x {} IPUs need {} IPUs, but {} has {}", run.file,
                                  run.replicas, run.ipus_per_replica, needed, system.name, system.ipus()));
  trace::Trace t = model.family == "cnn" ? compile_cnn(model, run, system)
                                         : compile_transformer(model, run, system);
  // What reports need to turn a step time into throughput and time to train.
  t.meta = {{"model", model.name},
            {"samples_per_step", std::to_string(run.samples_per_step())},
            {"sample_unit", run.sample_unit},
            {"ttt.epochs", meta_number(run.epochs)},
            {"ttt.samples_per_epoch", std::to_string(run.samples_per_epoch)},
            {"ttt.samples_to_train", std::to_string(run.samples_to_train)},
            {"ttt.lead_in_s", meta_number(run.lead_in_seconds)},
            {"ttt.checkpoint_s", meta_number(run.checkpoint_seconds)},
            {"ttt.checkpoints", std::to_string(run.checkpoints_taken)},
            {"ttt.evaluation_s", meta_number(run.evaluation_seconds)},
            {"ttt.evaluations", std::to_string(run.evaluations)}};
  for (const auto& program : t.ipus) cost::check_memory(system.chip, program, cost::memory_map(system.chip, program));
  trace::check_structure(t, run.name);
  return t;
}

}  // namespace ipusim::compiler
