// SPDX-License-Identifier: Apache-2.0
#include "ipu_builder.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>

#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::compiler {

using trace::DType;
using trace::Op;
using trace::StepKind;
using trace::TileRange;
namespace sl = trace::slot;

void push_repeated(Steps& out, trace::Step step, std::uint64_t count) {
  Steps body;
  body.push_back(std::move(step));
  push_repeated(out, std::move(body), count);
}

void push_repeated(Steps& out, Steps body, std::uint64_t count) {
  if (count == 1) {
    out.insert(out.end(), std::make_move_iterator(body.begin()),
               std::make_move_iterator(body.end()));
    return;
  }
  trace::Step loop = make_step(StepKind::kRepeat);
  loop.count = count;
  loop.body = std::move(body);
  out.push_back(std::move(loop));
}

std::string layout_key(const Layout& l) {
  return fmt::format("{}x{}_t{}s{}_b{}x{}_{}{}", l.positions, l.channels, l.first_tile,
                     l.tile_stride, l.positions_per_tile, l.chans_per_tile,
                     static_cast<int>(l.dtype), l.channels_outer ? "_co" : "");
}

namespace {

Layout blocked(const Layout& source, std::uint64_t position_blocks, std::uint64_t channel_blocks,
               std::uint32_t stride) {
  Layout l = source;
  l.first_tile = 0;
  l.tile_stride = stride;
  l.channels_outer = false;
  l.positions_per_tile = ceil_div(source.positions, std::max<std::uint64_t>(1, position_blocks));
  l.chans_per_tile = ceil_div(source.channels, std::max<std::uint64_t>(1, channel_blocks));
  return l;
}

// Adds what `steps`, run `times` times, run to `items` (repeat loops by their counts).
void count_items(std::span<const trace::Step> steps, std::uint64_t times,
                 PlannedConv::Items& items) {
  const auto add = [times](auto& list, std::uint32_t index) {
    for (auto& [i, n] : list)
      if (i == index) {
        n += times;
        return;
      }
    list.emplace_back(index, times);
  };
  for (const trace::Step& s : steps) {
    if (s.kind == StepKind::kCompute) add(items.compute_sets, s.index);
    if (s.kind == StepKind::kExchange) add(items.exchanges, s.index);
    if (s.kind == StepKind::kSync && s.group.kind == trace::GroupKind::kTile) items.syncs += times;
    if (s.kind == StepKind::kRepeat) count_items(s.body, times * s.count, items);
  }
}

std::string args_key(const plan::ConvArgs& a) {
  std::string key = fmt::format("conv_n{}_c{}_{}x{}_k{}_f{}_s{}_g{}_{}", a.batch, a.in_chans,
                                a.height, a.width, a.out_chans, plan::to_string(a.kernel),
                                plan::to_string(a.stride), a.groups, static_cast<int>(a.dtype));
  // Partials wider than the inputs (FP16.32) are named; the default precision keeps the names.
  if (plan::partials_of(a) != a.dtype)
    key += fmt::format("_p{}", static_cast<int>(plan::partials_of(a)));
  if (a.transposed_input) key += "_ti";
  if (a.transposed_weights) key += "_tw";
  if (a.coeff_load_bits != plan::ConvArgs{}.coeff_load_bits)
    key += fmt::format("_l{}", a.coeff_load_bits);
  if (a.channel_groups) key += "_cg";
  if (a.combined_groups > 1) key += fmt::format("_x{}", a.combined_groups);
  if (a.matmul) key += "_mm";
  if (a.weight_update) key += "_wu";
  return key;
}

// One copy of `v` per block of `l` (vertex tiles are ranges: a strided layout's blocks are not
// contiguous, so each gets its own; a contiguous layout needs one range).
std::vector<trace::Vertex> on_blocks(const Layout& l, trace::Vertex v) {
  std::vector<trace::Vertex> vs;
  if (l.tile_stride == 1) {
    v.tiles = l.range();
    vs.push_back(v);
    return vs;
  }
  for (std::uint64_t p = 0; p < l.position_blocks(); ++p)
    for (std::uint64_t c = 0; c < l.channel_blocks(); ++c) {
      v.tiles = TileRange{l.tile(p, c), l.tile(p, c)};
      vs.push_back(v);
    }
  return vs;
}

// Adds to `ex` the results of a staged reduction, held by each group's first tile, sent back to
// every other tile of the group (a normalisation's broadcast operand): `outputs` float values
// per tile.
void add_broadcast(trace::Exchange& ex, const std::vector<std::vector<std::uint32_t>>& groups,
                   std::uint64_t outputs) {
  const std::uint64_t bytes = outputs * trace::dtype_bytes(DType::kFloat);
  for (const auto& g : groups) {
    std::vector<TileRange> dst;
    for (std::size_t i = 1; i < g.size(); ++i) dst.push_back(TileRange{g[i], g[i]});
    if (!dst.empty()) ex.add(TileRange{g.front(), g.front()}, dst, bytes);
  }
}

}  // namespace

// Operands a conv reads are spread evenly over the tiles that use them (Poplar maps created
// inputs and weights "by use", poplar-compiler.md §1.7): an input block (row block x
// in-channel block) is shared by the plan's out_split tiles, a weight block (in-channel block
// x out-channel block) by its row_split tiles; each user holds a share.
Layout plan_input_layout(const Layout& source, const plan::ConvPlan& p, bool transposed) {
  const std::uint64_t rows = std::uint64_t{p.group_split} * p.row_split * p.out_split;
  Layout l =
      transposed ? blocked(source, p.in_split, rows, 1) : blocked(source, rows, p.in_split, 1);
  if (p.joint) {
    // A joint plan (a matmul's: a row is a position) holds its blocks exactly as planned, so
    // that its three passes find each weight block on the one tile that uses it.
    (transposed ? l.chans_per_tile : l.positions_per_tile) = p.rows_per_tile;
    (transposed ? l.positions_per_tile : l.chans_per_tile) = p.in_per_tile * p.serial_in;
  }
  return l;
}

Layout plan_weight_layout(const Layout& source, const plan::ConvPlan& p, bool transposed) {
  const std::uint64_t ins = std::uint64_t{p.in_split} * p.row_split;
  const std::uint64_t outs = std::uint64_t{p.group_split} * p.out_split;
  return transposed ? blocked(source, outs, ins, 1) : blocked(source, ins, outs, 1);
}

std::vector<std::vector<std::uint32_t>> reduction_groups(const Layout& l, Axis axis) {
  std::vector<std::vector<std::uint32_t>> groups;
  if (axis == Axis::kPositions) {
    for (std::uint64_t c = 0; c < l.channel_blocks(); ++c) {
      auto& g = groups.emplace_back();
      for (std::uint64_t p = 0; p < l.position_blocks(); ++p) g.push_back(l.tile(p, c));
    }
  } else {
    for (std::uint64_t p = 0; p < l.position_blocks(); ++p) {
      auto& g = groups.emplace_back();
      for (std::uint64_t c = 0; c < l.channel_blocks(); ++c) g.push_back(l.tile(p, c));
    }
  }
  return groups;
}

IpuBuilder::IpuBuilder(const ChipSpec& chip, trace::IpuProgram& program, double available_memory,
                       DType partials, bool fuse_elementwise, bool rearrange_operands)
    : chip_(chip),
      program_(program),
      partials_(partials),
      fuse_(fuse_elementwise),
      rearrange_operands_(rearrange_operands),
      available_memory_(available_memory),
      budget_(static_cast<std::uint64_t>(available_memory *
                                         static_cast<double>(chip.tile_memory.count))) {}

namespace {

bool on_chip_sync(const trace::Step& s) {
  return s.kind == StepKind::kSync && s.group.kind == trace::GroupKind::kTile;
}

// Appends `steps` to `out`, less a leading on-chip sync where `out` ends with one: an
// operation's steps end with the sync after its last compute set and the next operation's
// begin with the sync before its first exchange, and between the two BSP (and Poplar) syncs
// once (docs/codelets.md, "One small matmul's training step").
void append_steps(Steps& out, const Steps& steps) {
  const bool merge = !out.empty() && !steps.empty() && on_chip_sync(out.back()) &&
                     on_chip_sync(steps.front()) && out.back() == steps.front();
  out.insert(out.end(), steps.begin() + (merge ? 1 : 0), steps.end());
}

}  // namespace

template <class F>
void IpuBuilder::cached(Steps& out, const std::string& key, F&& build) {
  auto it = ops_.find(key);
  // A compute set or exchange names at most kMaxProvenanceLayers layers (the trace's bound):
  // once reusing it would name more, the next layers get a copy of their own (the same work,
  // named "<name>/copyN"), which they share in turn.
  std::uint32_t copy = 0;
  if (it != ops_.end() && !room_for_layers(it->second)) {
    copy = ++copies_[key];
    ops_.erase(it);
    it = ops_.end();
  }
  ++cached_calls_;
  if (it == ops_.end()) {
    const std::size_t compute_sets = program_.compute_sets.size();
    const std::size_t exchanges = program_.exchanges.size();
    Steps steps;
    if (copy == 0 && replay_shared(key, steps)) {
      it = ops_.emplace(key, std::move(steps)).first;
      append_steps(out, it->second);
      return;
    }
    const std::uint64_t calls = cached_calls_;
    const std::size_t tensors = program_.tensors.size();
    build(steps);
    if (copy == 0 && cached_calls_ == calls && program_.tensors.size() == tensors)
      keep_shared(key, steps, compute_sets, exchanges);
    if (copy > 0) {
      for (std::size_t i = compute_sets; i < program_.compute_sets.size(); ++i)
        program_.compute_sets[i].name += fmt::format("/copy{}", copy);
      for (std::size_t i = exchanges; i < program_.exchanges.size(); ++i)
        program_.exchanges[i].name += fmt::format("/copy{}", copy);
    }
    it = ops_.emplace(key, std::move(steps)).first;
    append_steps(out, it->second);
    return;
  }
  add_layers(it->second);
  const std::size_t first = out.size();
  append_steps(out, it->second);
  stamp_pass(std::span(out).subspan(first));
}

namespace {

// Adds `shift` to the compute-set and exchange indices of `steps` (at any depth); false if one
// would fall below 0.
bool shift_indices(Steps& steps, std::int64_t cs_shift, std::int64_t ex_shift) {
  for (trace::Step& s : steps) {
    const std::int64_t shift = s.kind == StepKind::kCompute    ? cs_shift
                               : s.kind == StepKind::kExchange ? ex_shift
                                                               : 0;
    if (shift != 0) {
      if (std::int64_t{s.index} + shift < 0) return false;
      s.index = static_cast<std::uint32_t>(std::int64_t{s.index} + shift);
    }
    if (s.kind == StepKind::kRepeat && !shift_indices(s.body, cs_shift, ex_shift)) return false;
  }
  return true;
}

}  // namespace

bool IpuBuilder::replay_shared(const std::string& key, Steps& steps) {
  if (!shared_builds_) return false;
  const auto it = shared_builds_->find({key, budget_});
  if (it == shared_builds_->end()) return false;
  const SharedBuild& b = it->second;
  steps = b.steps;
  (void)shift_indices(steps, static_cast<std::int64_t>(program_.compute_sets.size()),
                      static_cast<std::int64_t>(program_.exchanges.size()));
  program_.compute_sets.insert(program_.compute_sets.end(), b.compute_sets.begin(),
                               b.compute_sets.end());
  program_.exchanges.insert(program_.exchanges.end(), b.exchanges.begin(), b.exchanges.end());
  return true;
}

void IpuBuilder::keep_shared(const std::string& key, const Steps& steps, std::size_t compute_sets,
                             std::size_t exchanges) {
  if (!shared_builds_ || shared_builds_->count({key, budget_})) return;
  SharedBuild b;
  b.steps = steps;
  // Steps that use an earlier compute set or exchange are not self-contained.
  if (!shift_indices(b.steps, -static_cast<std::int64_t>(compute_sets),
                     -static_cast<std::int64_t>(exchanges)))
    return;
  b.compute_sets.assign(program_.compute_sets.begin() + static_cast<std::ptrdiff_t>(compute_sets),
                        program_.compute_sets.end());
  b.exchanges.assign(program_.exchanges.begin() + static_cast<std::ptrdiff_t>(exchanges),
                     program_.exchanges.end());
  shared_builds_->emplace(std::pair{key, budget_}, std::move(b));
}

void IpuBuilder::stamp_pass(std::span<trace::Step> steps) const {
  if (current_.pass == trace::Pass::kNone) return;
  for (trace::Step& s : steps) {
    const trace::Provenance* item = nullptr;
    if (s.kind == StepKind::kCompute && s.index < stamped_compute_sets_)
      item = &program_.compute_sets[s.index].provenance;
    if (s.kind == StepKind::kExchange && s.index < stamped_exchanges_)
      item = &program_.exchanges[s.index].provenance;
    if (item) s.provenance.pass = item->pass == current_.pass ? trace::Pass::kNone : current_.pass;
    if (s.kind == StepKind::kRepeat) stamp_pass(s.body);
  }
}

trace::Provenance IpuBuilder::stamp_for(trace::OpKind op) const {
  trace::Provenance p = current_;
  if (p.op == trace::OpKind::kNone) p.op = op;
  return p;
}

void IpuBuilder::stamp_new(trace::OpKind op) {
  if (stamped_compute_sets_ == program_.compute_sets.size() &&
      stamped_exchanges_ == program_.exchanges.size())
    return;
  const trace::Provenance p = stamp_for(op);
  for (; stamped_compute_sets_ < program_.compute_sets.size(); ++stamped_compute_sets_)
    program_.compute_sets[stamped_compute_sets_].provenance = p;
  for (; stamped_exchanges_ < program_.exchanges.size(); ++stamped_exchanges_)
    program_.exchanges[stamped_exchanges_].provenance = p;
}

bool IpuBuilder::room_for_layers(const Steps& steps) const {
  const auto fits = [&](const trace::Provenance& p) {
    return p.layers.size() + current_.layers.size() <= trace::kMaxProvenanceLayers;
  };
  for (const trace::Step& s : steps) {
    if (s.kind == StepKind::kCompute && s.index < stamped_compute_sets_ &&
        !fits(program_.compute_sets[s.index].provenance))
      return false;
    if (s.kind == StepKind::kExchange && s.index < stamped_exchanges_ &&
        !fits(program_.exchanges[s.index].provenance))
      return false;
    if (s.kind == StepKind::kRepeat && !room_for_layers(s.body)) return false;
  }
  return true;
}

void IpuBuilder::add_layers(const Steps& steps) {
  const auto add = [&](trace::Provenance& p, std::unordered_set<std::string>& known) {
    if (known.empty()) known.insert(p.layers.begin(), p.layers.end());
    for (const std::string& layer : current_.layers)
      if (known.insert(layer).second) p.layers.push_back(layer);
  };
  for (const trace::Step& s : steps) {
    if (s.kind == StepKind::kCompute && s.index < stamped_compute_sets_)
      add(program_.compute_sets[s.index].provenance, cs_layers_[s.index]);
    if (s.kind == StepKind::kExchange && s.index < stamped_exchanges_)
      add(program_.exchanges[s.index].provenance, ex_layers_[s.index]);
    if (s.kind == StepKind::kRepeat) add_layers(s.body);
  }
}

std::uint32_t IpuBuilder::add_compute_set(const std::string& name,
                                          std::vector<trace::Vertex> vertices) {
  program_.compute_sets.push_back({name, std::move(vertices)});
  return static_cast<std::uint32_t>(program_.compute_sets.size() - 1);
}

std::uint32_t IpuBuilder::add_exchange(trace::Exchange ex) {
  program_.exchanges.push_back(std::move(ex));
  return static_cast<std::uint32_t>(program_.exchanges.size() - 1);
}

plan::ConvArgs IpuBuilder::as_planned(plan::ConvArgs a) const {
  a.partials = partials_;
  a.coeff_load_bits = coeff_load_bits_;
  return plan::combine_conv_groups(chip_, a);
}

bool IpuBuilder::fc_pass(const plan::ConvArgs& a) const {
  return fc_passes_ && rearrange_operands_ && a.matmul && plan::swappable(a);
}

bool IpuBuilder::fc_forward(const plan::ConvArgs& a) const {
  return fc_pass(a) && !a.transposed_input && !a.transposed_weights;
}

void IpuBuilder::plan_fully_connected(const plan::ConvArgs& f) {
  // The passes as conv() plans them: data_gradient reads the weights transposed,
  // weight_gradient the activations.
  plan::ConvArgs d = as_planned(data_gradient_args(f));
  d.transposed_weights = true;
  plan::ConvArgs w = as_planned(weight_gradient_args(f));
  w.transposed_input = true;
  const std::array<std::string, 3> keys{args_key(f), args_key(d), args_key(w)};
  std::array<plan::ConvPlan, 3> plans;
  // Another builder's three plans, kept together; else planned here (and shared).
  const auto shared_all = [&] {
    if (!shared_plans_) return false;
    for (std::size_t i = 0; i < 3; ++i) {
      const auto found = shared_plans_->find({keys[i], budget_});
      if (found == shared_plans_->end()) return false;
      plans[i] = found->second;
    }
    return true;
  };
  if (!shared_all()) {
    const plan::FcPlans fc = search_fully_connected(f, d, w);
    spdlog::info(
        "{}: its three passes planned {} (poplin's estimates: joint {} cycles, "
        "separate {}){}",
        plan::conv_name(f), fc.joint ? "jointly" : "separately",
        fc.joint_cycles == 0 ? std::string("none fits") : std::to_string(fc.joint_cycles),
        fc.separate_cycles,
        fc.joint ? fmt::format(", the forward pass on {} x {} tiles (rows x input channels)",
                               fc.fwd.row_split, fc.fwd.in_split)
                 : "");
    plans = {fc.fwd, fc.bwd, fc.wu};
    if (shared_plans_)
      for (std::size_t i = 0; i < 3; ++i)
        shared_plans_->insert_or_assign(std::pair{keys[i], budget_}, plans[i]);
  }
  // (A pass this builder planned already keeps its plan: its code may be emitted.)
  const std::array<const plan::ConvArgs*, 3> args{&f, &d, &w};
  for (std::size_t i = 0; i < 3; ++i)
    plans_.try_emplace(keys[i], Planned{plans[i], conv_output_layout(chip_, *args[i], plans[i])});
}

plan::ConvPlan IpuBuilder::search(const plan::ConvArgs& a) {
  if (!store_) return plan::plan_conv(chip_, a, budget_);
  if (!chip_key_) chip_key_ = plan::chip_key(chip_);
  return store_->plan_conv(chip_, *chip_key_, a, budget_);
}

plan::FcPlans IpuBuilder::search_fully_connected(const plan::ConvArgs& f, const plan::ConvArgs& d,
                                                 const plan::ConvArgs& w) {
  if (!store_) return plan::plan_fully_connected(chip_, f, d, w, budget_);
  if (!chip_key_) chip_key_ = plan::chip_key(chip_);
  return store_->plan_fully_connected(chip_, *chip_key_, f, d, w, budget_);
}

const IpuBuilder::Planned& IpuBuilder::planned(const plan::ConvArgs& args) {
  try {
    return planned_unchecked(args);
  } catch (const ModelError& e) {
    // The planner knows the shape, not whose it is: name the layer, pass and shape, and what
    // the user can change.
    const plan::ConvArgs a = as_planned(args);
    std::string layers;
    for (const auto& l : current_.layers) layers += (layers.empty() ? "'" : ", '") + l + "'";
    const std::string shape =
        a.matmul_shaped()
            ? fmt::format("a {} x {} by {} x {} matmul", a.height, a.in_chans, a.in_chans,
                          a.out_chans)
            : fmt::format("a conv of {} samples of {} x {} x {} to {} channels", a.batch, a.height,
                          a.width, a.in_chans * a.groups, a.out_chans * a.groups);
    std::string whose;
    if (!layers.empty()) whose = fmt::format("layer {}", layers);
    if (current_.pass != trace::Pass::kNone)
      whose += fmt::format("{}{} pass", whose.empty() ? "" : ", ",
                           trace::kPassNames[static_cast<std::size_t>(current_.pass)]);
    throw cost::TileMemoryError(fmt::format(
        "{}{} ({}): {}; what makes it fit: fewer samples per micro-batch (run.micro_batch), or "
        "a chip with more memory per tile (chip.tile_memory) or more tiles (chip.tiles)",
        whose.empty() ? "" : whose + ": ", shape, plan::conv_name(a), e.what()));
  }
}

const IpuBuilder::Planned& IpuBuilder::planned_unchecked(const plan::ConvArgs& args) {
  const plan::ConvArgs a = as_planned(args);
  const std::string key = args_key(a);
  auto it = plans_.find(key);
  if (it == plans_.end() && fc_forward(a)) {
    plan_fully_connected(a);
    it = plans_.find(key);
  }
  if (it == plans_.end()) {
    std::optional<plan::ConvPlan> found;
    bool shared = false;  // another IPU's builder made it
    if (shared_plans_)
      if (auto s = shared_plans_->find({key, budget_}); s != shared_plans_->end()) {
        found = s->second;
        shared = true;
      }
    if (!found && prefetcher_) found = prefetcher_->take(key, budget_);
    const plan::ConvPlan plan = found ? *found : search(a);
    if (shared_plans_ && !shared) shared_plans_->emplace(std::pair{key, budget_}, plan);
    it = plans_.emplace(key, Planned{plan, conv_output_layout(chip_, a, plan)}).first;
  }
  return it->second;
}

void IpuBuilder::plan_ahead(const plan::ConvArgs& args, bool transposed_input,
                            bool transposed_weights) {
  plan::ConvArgs a = as_planned(args);
  if (rearrange_operands_) {
    a.transposed_input = transposed_input;
    a.transposed_weights = transposed_weights;
  }
  a = as_planned(a);
  // A fully connected layer's passes are planned with its forward pass (planned()).
  if (fc_pass(a)) return;
  const std::string key = args_key(a);
  if (plans_.count(key) || (shared_plans_ && shared_plans_->count({key, budget_}))) return;
  if (!prefetcher_) prefetcher_ = std::make_unique<plan::PlanPrefetcher>(chip_, store_);
  prefetcher_->request(key, a, budget_);
}

// A channel-grouped conv's weights are [k x k x in, groups x out] and its input [positions,
// groups x in]; its plan is that of its combined groups (as_planned). A grouped matmul's
// weights are its groups stacked, [(groups x in), out], as its weight gradient is.
// A swapped plan's weights are its product's input and its input that product's weights, each
// laid out in the product's axes (the transposed view).
Layout IpuBuilder::weights_layout(const plan::ConvArgs& a) {
  Layout source;
  source.dtype = a.dtype;
  source.positions = (a.channel_groups ? 1 : a.groups) * a.kernel.area() * a.in_chans;
  source.channels = (a.channel_groups ? a.groups : 1) * a.out_chans;
  const plan::ConvPlan& plan = planned(a).plan;
  if (plan.swapped) return transposed_view(plan_input_layout(transposed_view(source), plan, false));
  return plan_weight_layout(source, plan, false);
}

Layout IpuBuilder::input_layout(const plan::ConvArgs& a) {
  Layout source;
  source.dtype = a.dtype;
  source.positions = a.batch * a.height * a.width;
  source.channels = (a.channel_groups ? a.groups : 1) * a.in_chans;
  const plan::ConvPlan& plan = planned(a).plan;
  if (plan.swapped)
    return transposed_view(plan_weight_layout(transposed_view(source), plan, false));
  return plan_input_layout(source, plan, false);
}

void IpuBuilder::rearrange(Steps& out, const Layout& from, const Layout& to,
                           const std::string& owner) {
  const Stamp stamp(*this, trace::OpKind::kCopy);
  if (from == to) return;
  const std::string key = fmt::format("rearrange_{}_to_{}{}", layout_key(from), layout_key(to),
                                      owner.empty() ? "" : "/for_" + owner);
  cached(out, key, [&](Steps& steps) {
    trace::Exchange ex = rearrangement(key, from, to);
    if (ex.empty()) return;
    steps.push_back(make_step(StepKind::kSync));
    steps.push_back(make_step(StepKind::kExchange, add_exchange(std::move(ex))));
  });
}

void IpuBuilder::move_channels(Steps& out, const Layout& from, std::uint64_t from_first,
                               const Layout& to, std::uint64_t to_first, std::uint64_t n) {
  const Stamp stamp(*this, trace::OpKind::kCopy);
  const std::string key = fmt::format("move_{}_{}_{}_to_{}_{}", layout_key(from), from_first, n,
                                      layout_key(to), to_first);
  cached(out, key, [&](Steps& steps) {
    trace::Exchange ex = channel_move(key, from, from_first, to, to_first, n);
    if (ex.empty()) return;
    steps.push_back(make_step(StepKind::kSync));
    steps.push_back(make_step(StepKind::kExchange, add_exchange(std::move(ex))));
  });
}

void IpuBuilder::per_block(Steps& out, const std::string& key, const Layout& l,
                           const trace::Vertex& v) {
  cached(out, key, [&](Steps& steps) {
    steps.push_back(make_step(StepKind::kCompute, add_compute_set(key, on_blocks(l, v))));
    steps.push_back(make_step(StepKind::kSync));
  });
}

void IpuBuilder::transpose(Steps& out, const Layout& l, std::uint64_t factor) {
  const Stamp stamp(*this, trace::OpKind::kCopy);
  trace::Vertex v{trace::Codelet::kTranspose, l.range(), {}};
  v.params[sl::kTransposeDType] = static_cast<std::int64_t>(l.dtype);
  v.params[sl::kTransposeN] = static_cast<std::int64_t>(l.per_tile());
  v.params[sl::kTransposeFactor] = static_cast<std::int64_t>(factor);
  per_block(
      out,
      fmt::format("transpose{}_{}", factor == 1 ? "" : "f" + std::to_string(factor), layout_key(l)),
      l, v);
}

namespace {

// The conv's fetch of an input read as it is from `source`: block (group x row block, in-channel
// block) goes to its out_split consumers, straight from the tiles holding it.
std::function<void(trace::Exchange&)> input_fetch(const Layout& source, const plan::ConvPlan& plan,
                                                  const plan::ConvArgs& a) {
  // Block (group x row block, in-channel block) goes to its out_split consumers. A row
  // block of output rows [r0, r1) (over batch x output height) reads input rows
  // [r0 s - pad, (r1 - 1) s + k - pad) of the flattened batch x height (the halo of a
  // kernel's rows included); a strided 1x1 conv reads 1 in s_h x s_w of them.
  const std::uint64_t out_h = ceil_div(a.height, a.stride.h);
  const std::uint64_t rows = a.batch * out_h, pad = (a.kernel.h - 1) / 2;
  const std::uint64_t positions_per_group = a.batch * a.height * a.width;
  const bool strided_1x1 = a.kernel == plan::Spatial{1} && a.stride != plan::Spatial{1};
  // When the source's shape is not the conv's input shape (a grouped matmul reading
  // heads out of a [tokens x hidden] tensor), blocks are cut in proportion instead.
  const bool exact =
      source.positions == a.groups * positions_per_group && source.channels == a.in_chans;
  // A channel-grouped conv's source holds the groups side by side in its channels.
  const bool by_channels = a.channel_groups && source.positions == positions_per_group &&
                           source.channels == a.groups * a.in_chans;
  return [source, plan, a, rows, pad, positions_per_group, strided_1x1, exact,
          by_channels](trace::Exchange& fetch) {
    const std::uint64_t cpt = ceil_div(by_channels ? a.in_chans : source.channels, plan.in_split);
    const std::uint64_t ppb =
        ceil_div(source.positions, std::uint64_t{plan.group_split} * plan.row_split);
    for (std::uint32_t g = 0; g < plan.group_split; ++g)
      for (std::uint32_t r = 0; r < plan.row_split; ++r) {
        // The source positions block (g, r) reads: [p0, p1).
        std::uint64_t p0 = (std::uint64_t{g} * plan.row_split + r) * ppb, p1 = p0 + ppb;
        // Channels of group block g (by_channels): its groups' slices.
        const std::uint64_t c0 =
            by_channels ? std::uint64_t{g} * plan.groups_per_tile * a.in_chans : 0;
        const std::uint64_t cw = by_channels ? plan.groups_per_tile * a.in_chans : 0;
        if (exact || by_channels) {
          const std::uint64_t r0 = std::uint64_t{r} * plan.rows_per_tile;
          const std::uint64_t r1 = std::min(rows, r0 + plan.rows_per_tile);
          if (r0 >= r1) continue;
          const std::uint64_t lo = r0 * a.stride.h > pad ? r0 * a.stride.h - pad : 0;
          const std::uint64_t hi =
              std::min(a.batch * a.height, (r1 - 1) * a.stride.h + a.kernel.h - pad);
          // Groups are outermost in the source's positions (a grouped matmul's rows).
          const std::uint64_t base = std::uint64_t{g} * plan.groups_per_tile * positions_per_group;
          const std::uint64_t span = plan.groups_per_tile * positions_per_group;
          const bool in_rows = a.groups > 1 && !by_channels;
          p0 = in_rows ? base + lo * a.width : lo * a.width;
          p1 = in_rows ? std::min(base + span, base + hi * a.width) : hi * a.width;
        }
        for (std::uint32_t i = 0; i < plan.in_split; ++i) {
          const TileRange users{plan::plan_tile(plan, g, r, i, 0),
                                plan::plan_tile(plan, g, r, i, plan.out_split - 1)};
          // (by_channels: the in-channel block i of each of the block's groups, taken
          // together: the groups' slices are adjacent.)
          const std::uint64_t ch0 = by_channels ? c0 + i * cpt * plan.groups_per_tile : i * cpt;
          const std::uint64_t ch1 =
              by_channels ? std::min(c0 + cw, ch0 + cpt * plan.groups_per_tile) : (i + 1) * cpt;
          range_pieces(source, p0, p1, ch0, ch1, [&](std::uint32_t src, std::uint64_t bytes) {
            const std::uint64_t needed =
                exact && strided_1x1 ? ceil_div(bytes, a.stride.area()) : bytes;
            fetch.add(TileRange{src, src}, {&users, 1}, needed);
          });
        }
      }
  };
}

// The conv's fetch of weights read as they are from `source`.
std::function<void(trace::Exchange&)> weight_fetch(const Layout& source,
                                                   const plan::ConvPlan& plan) {
  // Block (in-channel block, group x out-channel block) goes to its row_split consumers.
  const Layout blocks =
      blocked(source, plan.in_split, std::uint64_t{plan.group_split} * plan.out_split, 1);
  const std::uint64_t O = plan.out_split;
  return [blocks, source, plan, O](trace::Exchange& fetch) {
    block_pieces(source, blocks,
                 [&](std::uint64_t pb, std::uint64_t cb, std::uint32_t src, std::uint64_t bytes) {
                   const auto i = static_cast<std::uint32_t>(pb);
                   const auto g = static_cast<std::uint32_t>(cb / O),
                              o = static_cast<std::uint32_t>(cb % O);
                   std::vector<TileRange> users;
                   for (std::uint32_t r = 0; r < plan.row_split; ++r)
                     users.push_back(TileRange{plan::plan_tile(plan, g, r, i, o),
                                               plan::plan_tile(plan, g, r, i, o)});
                   fetch.add(TileRange{src, src}, users, bytes);
                 });
  };
}

}  // namespace

void IpuBuilder::expand_input(Steps& out, const Layout& from, const Layout& to,
                              const plan::ConvArgs& a, const plan::ConvPlan& plan) {
  const Stamp stamp(*this, trace::OpKind::kCopy);
  const std::string key = fmt::format("expand{}{}_{}_to_{}", plan.expand_h ? "h" : "",
                                      plan.expand_w ? "w" : "", layout_key(from), layout_key(to));
  cached(out, key, [&](Steps& steps) {
    trace::Exchange ex = expansion(key, from, to, a, plan);
    if (ex.empty()) return;
    steps.push_back(make_step(StepKind::kSync));
    steps.push_back(make_step(StepKind::kExchange, add_exchange(std::move(ex))));
  });
}

bool IpuBuilder::copied_for_plan(const plan::ConvPlan& plan, bool input) const {
  constexpr std::uint32_t kMaxBroadcastDests = 7;
  if (current_.pass == trace::Pass::kWeightGradient) return true;
  return (input ? plan.out_split : plan.row_split) > kMaxBroadcastDests;
}

Layout IpuBuilder::conv(Steps& out, const plan::ConvArgs& args, const Operand& input,
                        const Operand& weights) {
  const Stamp stamp(*this, trace::OpKind::kConv);
  // The run's precision: partials are half (16.16) or float (16.32) for half inputs.
  plan::ConvArgs a = as_planned(args);
  if (rearrange_operands_) {
    a.transposed_input = input.layout && input.transposed;
    a.transposed_weights = weights.layout && weights.transposed;
  }
  const Planned& p = planned(a);
  // Temporaries count for the convs that run (a plan that only lays out a tensor, such as a
  // span-head model's embedding table, allocates none).
  peak_temp_ = std::max(peak_temp_, p.plan.bytes_per_tile.count);
  // An operand read as it is (not transposed) that poplin does not copy (copied_for_plan) is
  // fetched straight from its layout by the conv's own fetch exchange: each tile that uses a
  // block receives it from the tiles that hold it, as Poplar's conv exchange does. A copied
  // operand is first moved into the plan's layout, a transposed one also transposed there
  // (Poplar's weight transpose or activation regroup makes a new tensor), then fetched from
  // there. Plans with a serial split fetch every operand from the plan's layout.
  const plan::ConvPlan& plan = p.plan;
  // A swapped plan computes C^T = B^T A^T: its input is the weights operand and its weights the
  // input operand, each in the transposed view of its layout (the flags go with the operand,
  // as plan::swap_operands moves them).
  const plan::ConvArgs e = plan::planned_product(a, plan);
  const auto view = [](const Operand& o) {
    return Operand{o.layout ? std::optional<Layout>(transposed_view(*o.layout)) : std::nullopt,
                   o.transposed};
  };
  const Operand in_e = plan.swapped ? view(weights) : input;
  const Operand w_e = plan.swapped ? view(input) : weights;
  plan::FetchSources sources;
  const std::string conv_key = args_key(a);
  std::string key = conv_key;  // and where the operands fetched straight come from
  const std::size_t first_step = out.size();
  for (const auto& [operand, is_input] : {std::pair{&in_e, true}, std::pair{&w_e, false}}) {
    if (!operand->layout || !rearrange_operands_) continue;
    const Layout& source = *operand->layout;
    // An expanded plan's input is a new tensor, built from the conv's input by an exchange and
    // copied on its tiles (poplin's rearrangement of the input for expandDims); then fetched
    // from there.
    if (is_input && plan.expanded()) {
      Layout expanded = source;
      expanded.positions = e.batch * e.height * e.width;
      expanded.channels = e.in_chans;
      const Layout home = plan_input_layout(expanded, plan, false);
      expand_input(out, source, home, a, plan);
      transpose(out, home, plan::transpose_factor(chip_, e));
      continue;
    }
    if (!operand->transposed && plan.serial() == 1 && !plan.expanded() &&
        !copied_for_plan(plan, is_input)) {
      key += fmt::format("/{}_from_{}", is_input ? "in" : "w", layout_key(source));
      (is_input ? sources.input : sources.weights) =
          is_input ? input_fetch(source, plan, e) : weight_fetch(source, plan);
      continue;
    }
    const Layout home = is_input ? plan_input_layout(source, plan, operand->transposed)
                                 : plan_weight_layout(source, plan, operand->transposed);
    // Each conv copies its operands in a program of its own (poplin's transformPre copies).
    rearrange(out, source, home, conv_key + (is_input ? "/in" : "/w"));
    // (An expanded plan's weights are rearranged for the expanded conv, as poplin does.)
    if (operand->transposed || plan.expanded())
      transpose(out, home, plan::transpose_factor(chip_, plan.expanded() ? e : a));
  }
  const std::size_t conv_step = out.size();
  cached(out, key, [&](Steps& steps) {
    plan::emit_conv(program_, key + "/", chip_, a, plan, steps, sources);
  });
  if (plans_out_) record_plan(out, a, plan, first_step, conv_step);
  return a.channel_groups ? channel_view(p.output, a.groups) : p.output;
}

void IpuBuilder::record_plan(const Steps& out, const plan::ConvArgs& a, const plan::ConvPlan& plan,
                             std::size_t first_step, std::size_t conv_step) {
  PlannedConv r;
  r.ipu = plans_ipu_;
  r.provenance = stamp_for(trace::OpKind::kConv);
  r.name = args_key(a);
  r.args = a;
  r.plan = plan;
  r.available_memory = available_memory_;
  r.budget_bytes = budget_;
  const std::span<const trace::Step> steps(out);
  count_items(steps.subspan(first_step, conv_step - first_step), 1, r.rearrangement);
  count_items(steps.subspan(conv_step), 1, r.conv);
  // The on-chip syncs just before it (ending the operation before) go with its first
  // exchange, as layer rows count them (report::layer_rows).
  for (std::size_t i = first_step; i > 0 && out[i - 1].kind == StepKind::kSync &&
                                   out[i - 1].group.kind == trace::GroupKind::kTile;
       --i)
    ++(conv_step > first_step ? r.rearrangement : r.conv).syncs;
  plans_out_->push_back(std::move(r));
}

plan::ConvArgs IpuBuilder::matmul_args(std::uint64_t m, std::uint64_t n, std::uint64_t k, DType dt,
                                       std::uint64_t groups) {
  plan::ConvArgs a;
  a.height = m;
  a.groups = groups;
  a.out_chans = n;
  a.in_chans = k;
  a.dtype = dt;
  a.matmul = true;
  return a;
}

Layout IpuBuilder::matmul(Steps& out, std::uint64_t m, std::uint64_t n, std::uint64_t k, DType dt,
                          const Operand& input, const Operand& weights, std::uint64_t groups) {
  const plan::ConvArgs a = matmul_args(m, n, k, dt, groups);
  // A matmul is a 1x1 conv: the conv's operations are stamped as a matmul.
  trace::Provenance p = stamp_for(trace::OpKind::kMatmul);
  const Scope scope(*this, std::move(p));
  return conv(out, a, input, weights);
}

plan::ConvArgs IpuBuilder::data_gradient_args(const plan::ConvArgs& fwd) {
  plan::ConvArgs d = fwd;
  d.in_chans = fwd.out_chans;
  d.out_chans = fwd.in_chans;
  d.height = ceil_div(fwd.height, fwd.stride.h);
  d.width = ceil_div(fwd.width, fwd.stride.w);
  d.stride = 1;
  return d;
}

plan::ConvArgs IpuBuilder::weight_gradient_args(const plan::ConvArgs& fwd) {
  const std::uint64_t field =
      ceil_div(fwd.height, fwd.stride.h) * ceil_div(fwd.width, fwd.stride.w);
  // A conv's weight gradient is a conv pass (poplin's TRAINING_WU), a matmul's a matmul
  // (FC_TRAINING_WU).
  plan::ConvArgs w = matmul_args(fwd.kernel.area() * fwd.in_chans, fwd.out_chans, fwd.batch * field,
                                 fwd.dtype, fwd.groups);
  w.matmul = fwd.matmul;
  w.weight_update = !fwd.matmul;
  return w;
}

Layout IpuBuilder::data_gradient(Steps& out, const plan::ConvArgs& fwd, const Layout& w,
                                 const Layout& g) {
  const plan::ConvArgs d = data_gradient_args(fwd);
  // A matmul's (a 1x1 conv of one image one column wide, as matmul() builds it) data gradient
  // is a matmul too.
  const Scope scope(*this,
                    stamp_for(fwd.matmul_shaped() ? trace::OpKind::kMatmul : trace::OpKind::kConv));
  return conv(out, d, Operand{g, false}, Operand{w, true});
}

Layout IpuBuilder::weight_gradient(Steps& out, const plan::ConvArgs& fwd, const Layout& x,
                                   const Layout& w, const Layout& g, bool update) {
  const auto pass = scope_pass(trace::Pass::kWeightGradient);
  const plan::ConvArgs m = weight_gradient_args(fwd);
  Layout dw = [&] {
    const Scope scope(*this, stamp_for(trace::OpKind::kMatmul));  // lowered as a matmul
    return conv(out, m, Operand{x, true}, Operand{g, false});
  }();
  if (!update) return dw;
  // A channel-grouped conv's weights are [k x k x in, groups x out]; the grouped matmul's
  // result is [(groups x k x k x in), out].
  if (fwd.channel_groups) dw = channel_view(dw, fwd.groups);
  rearrange(out, dw, w);
  scaled_add(out, w);
  return w;
}

void IpuBuilder::elementwise(Steps& out, const Layout& l, std::span<const Op> ops) {
  const Stamp stamp(*this, trace::OpKind::kElementwise);
  if (ops.empty()) return;
  const std::uint64_t n = l.per_tile();
  auto vertex_for = [&](Op op) {
    const bool binary = op <= Op::kMin;
    trace::Vertex v{binary ? trace::Codelet::kBinary : trace::Codelet::kUnary, l.range(), {}};
    v.params[sl::kEltOp] = static_cast<std::int64_t>(op);
    v.params[sl::kEltDType] = static_cast<std::int64_t>(l.dtype);
    v.params[sl::kEltN] = static_cast<std::int64_t>(n);
    return v;
  };
  if (!fuse_ || ops.size() == 1) {
    for (Op op : ops) {
      const std::string key =
          fmt::format("{}_{}", trace::kOpNames[static_cast<std::size_t>(op)], layout_key(l));
      per_block(out, key, l, vertex_for(op));
    }
    return;
  }
  std::string names;
  std::uint64_t op_cycles = 0;
  for (Op op : ops) {
    names += names.empty() ? "" : "_";
    names += trace::kOpNames[static_cast<std::size_t>(op)];
    op_cycles += cost::op_vector_cycles(op, l.dtype);
  }
  const std::string key = fmt::format("map_{}_{}", names, layout_key(l));
  trace::Vertex v{trace::Codelet::kMap, l.range(), {}};
  v.params[sl::kMapDType] = static_cast<std::int64_t>(l.dtype);
  v.params[sl::kMapN] = static_cast<std::int64_t>(n);
  v.params[sl::kMapOpCycles] = static_cast<std::int64_t>(std::max<std::uint64_t>(1, op_cycles));
  v.params[sl::kMapOps] = static_cast<std::int64_t>(ops.size());
  per_block(out, key, l, v);
}

void IpuBuilder::channel_op(Steps& out, const Layout& l, Op op, bool in_place) {
  if (l.dtype != DType::kHalf || l.chans_per_tile % 4 != 0) {
    elementwise(out, l, {&op, 1});
    return;
  }
  const Stamp stamp(*this, trace::OpKind::kElementwise);
  trace::Vertex v{trace::Codelet::kBroadcastBinary, l.range(), {}};
  v.params[sl::kBroadcastOp] = static_cast<std::int64_t>(op);
  v.params[sl::kBroadcastDType] = static_cast<std::int64_t>(l.dtype);
  v.params[sl::kBroadcastN] = static_cast<std::int64_t>(l.per_tile());
  v.params[sl::kBroadcastLength] = static_cast<std::int64_t>(l.chans_per_tile);
  v.params[sl::kBroadcastInPlace] = in_place ? 1 : 0;
  per_block(out,
            fmt::format("channel_{}{}_{}", trace::kOpNames[static_cast<std::size_t>(op)],
                        in_place ? "_inplace" : "", layout_key(l)),
            l, v);
}

void IpuBuilder::cast(Steps& out, const Layout& l, DType from) {
  const Stamp stamp(*this, trace::OpKind::kElementwise);
  trace::Vertex v{trace::Codelet::kCast, l.range(), {}};
  v.params[sl::kCastFrom] = static_cast<std::int64_t>(from);
  v.params[sl::kCastTo] = static_cast<std::int64_t>(l.dtype);
  v.params[sl::kCastN] = static_cast<std::int64_t>(l.per_tile());
  per_block(out, fmt::format("cast_{}_{}", static_cast<int>(from), layout_key(l)), l, v);
}

void IpuBuilder::copy(Steps& out, const Layout& l) {
  const Stamp stamp(*this, trace::OpKind::kCopy);
  trace::Vertex v{trace::Codelet::kCopy, l.range(), {}};
  v.params[sl::kCopyBytes] = static_cast<std::int64_t>(l.per_tile() * trace::dtype_bytes(l.dtype));
  per_block(out, fmt::format("copy_{}", layout_key(l)), l, v);
}

void IpuBuilder::scaled_add(Steps& out, const Layout& l) {
  const Stamp stamp(*this, trace::OpKind::kElementwise);
  trace::Vertex v{trace::Codelet::kScaledAdd, l.range(), {}};
  v.params[sl::kScaledAddDType] = static_cast<std::int64_t>(l.dtype);
  v.params[sl::kScaledAddN] = static_cast<std::int64_t>(l.per_tile());
  per_block(out, fmt::format("scaled_add_{}", layout_key(l)), l, v);
}

void IpuBuilder::reduce(Steps& out, const Layout& l, Axis axis, std::uint64_t stats,
                        bool broadcast) {
  const Stamp stamp(*this, trace::OpKind::kReduce);
  const std::string key =
      fmt::format("reduce_{}_{}{}_{}", axis == Axis::kPositions ? "pos" : "chan", stats,
                  broadcast ? "b" : "", layout_key(l));
  cached(out, key, [&](Steps& steps) {
    const Reduction r = reduction(l, axis, stats);
    reduction_steps(steps, key, {&r, 1}, broadcast);
  });
}

void IpuBuilder::reduce_many(Steps& out, const std::string& name, std::span<const Layout> layouts) {
  if (layouts.empty()) return;
  const Stamp stamp(*this, trace::OpKind::kReduce);
  // Steps are named after `name`; the cache key also holds the layouts.
  const std::string base = fmt::format("reduce_many_{}", name);
  std::string key = base;
  for (const Layout& l : layouts) key += "_" + layout_key(l);
  cached(out, key, [&](Steps& steps) {
    std::vector<Reduction> rs;
    for (const Layout& l : layouts) rs.push_back(reduction(one_row(l), Axis::kChannels, 1));
    reduction_steps(steps, base, rs, /*broadcast=*/true);
  });
}

IpuBuilder::Reduction IpuBuilder::reduction(const Layout& l, Axis axis, std::uint64_t stats) {
  const bool over_positions = axis == Axis::kPositions;
  // popops' vertex for each: channels are innermost, so a reduction over the positions has
  // its outputs contiguous and each output's partials a row apart (strided), one over the
  // channels each output's partials contiguous.
  return {reduction_groups(l, axis),
          stats * (over_positions ? l.chans_per_tile : l.positions_per_tile),
          over_positions ? l.positions_per_tile : l.chans_per_tile, l.dtype,
          over_positions ? trace::ReduceLayout::kStrided : trace::ReduceLayout::kContinuous};
}

namespace {

// Sorts tile indices: by counting when they span few tiles for their number (a reduction's
// tiles span at most a chip), else by comparison.
void sort_tiles(std::vector<std::uint32_t>& tiles) {
  if (tiles.size() < 64) {
    std::sort(tiles.begin(), tiles.end());
    return;
  }
  const auto [lo, hi] = std::minmax_element(tiles.begin(), tiles.end());
  const std::uint64_t first = *lo, span = std::uint64_t{*hi} - first + 1;
  if (span > 8 * tiles.size() + 4096) {
    std::sort(tiles.begin(), tiles.end());
    return;
  }
  std::vector<std::uint32_t> count(span, 0);
  for (const std::uint32_t t : tiles) ++count[t - first];
  std::size_t at = 0;
  for (std::uint64_t k = 0; k < span; ++k)
    for (std::uint32_t n = count[k]; n > 0; --n)
      tiles[at++] = static_cast<std::uint32_t>(first + k);
}

}  // namespace

void IpuBuilder::reduction_steps(Steps& steps, const std::string& key,
                                 std::span<const Reduction> rs, bool broadcast) {
  auto reduce_vertex = [&](TileRange tiles, DType in, std::uint64_t outputs, std::uint64_t partials,
                           trace::ReduceLayout layout) {
    trace::Vertex v{trace::Codelet::kReduce, tiles, {}};
    v.params[sl::kReduceLayout] = static_cast<std::int64_t>(layout);
    v.params[sl::kReduceOp] = static_cast<std::int64_t>(Op::kAdd);
    v.params[sl::kReduceIn] = static_cast<std::int64_t>(in);
    v.params[sl::kReduceOut] = static_cast<std::int64_t>(DType::kFloat);
    v.params[sl::kReduceOutputs] = static_cast<std::int64_t>(outputs);
    v.params[sl::kReduceInputs] = static_cast<std::int64_t>(std::max<std::uint64_t>(1, partials));
    return v;
  };
  // One reduction's vertices over a set of tiles, merged into ranges of consecutive tiles
  // (appended to `vs`).
  auto over = [&](std::vector<trace::Vertex>& vs, std::vector<std::uint32_t> tiles, DType in,
                  std::uint64_t outputs, std::uint64_t partials, trace::ReduceLayout layout) {
    sort_tiles(tiles);
    for (std::size_t i = 0; i < tiles.size();) {
      std::size_t j = i;
      while (j + 1 < tiles.size() && tiles[j + 1] == tiles[j] + 1) ++j;
      vs.push_back(reduce_vertex(TileRange{tiles[i], tiles[j]}, in, outputs, partials, layout));
      i = j + 1;
    }
  };
  // A compute set of reduce vertices; a reduction to one value that popops splits over the
  // workers takes a second compute set and sync for its second stage (plan::add_reduction).
  auto reduce_step = [&](const std::string& name, std::vector<trace::Vertex> vertices) {
    plan::add_reduction(chip_, program_, {name, std::move(vertices)}, name + "/second_stage",
                        steps);
  };
  std::vector<trace::Vertex> local;
  for (const Reduction& r : rs) {
    std::vector<std::uint32_t> all;
    for (const auto& g : r.groups) all.insert(all.end(), g.begin(), g.end());
    over(local, std::move(all), r.dtype, r.outputs, r.inputs, r.local);
  }
  reduce_step(key + "/local", std::move(local));
  steps.push_back(make_step(StepKind::kSync));
  // The cross-tile stages, each reduction's own count and fan-in; a reduction's stage s shares
  // the exchange, compute set and sync of every other's stage s (popops' reduceMany).
  std::vector<std::vector<std::vector<std::uint32_t>>> holders;
  std::vector<std::pair<int, std::size_t>> shape;  // (stages, fan-in) of each
  int stages = 0;
  for (const Reduction& r : rs) {
    holders.push_back(r.groups);
    shape.push_back(reduction_stages(r.groups.empty() ? 1 : r.groups.front().size()));
    stages = std::max(stages, shape.back().first);
  }
  for (int stage = 0; stage < stages; ++stage) {
    trace::Exchange ex{fmt::format("{}/stage{}", key, stage), {}, {}};
    std::vector<trace::Vertex> vertices;
    for (std::size_t k = 0; k < rs.size(); ++k) {
      const auto [own_stages, fan_in] = shape[k];
      if (stage >= own_stages) continue;
      // Partials are float between tiles (poplar-compiler.md §2.2).
      const std::uint64_t partial_bytes = rs[k].outputs * 4;
      std::vector<std::uint32_t> leaders;
      std::uint64_t most = 1;
      for (auto& g : holders[k]) {
        std::vector<std::uint32_t> next;
        for (std::size_t i = 0; i < g.size(); i += fan_in) {
          const TileRange leader{g[i], g[i]};
          next.push_back(g[i]);
          const std::size_t end = std::min(g.size(), i + fan_in);
          most = std::max<std::uint64_t>(most, end - i);
          for (std::size_t j = i + 1; j < end; ++j)
            ex.add(TileRange{g[j], g[j]}, {&leader, 1}, partial_bytes);
        }
        g = std::move(next);
        leaders.insert(leaders.end(), g.begin(), g.end());
      }
      // The stages after an exchange reduce the received [sources x outputs] rows (strided).
      over(vertices, std::move(leaders), DType::kFloat, rs[k].outputs, most,
           trace::ReduceLayout::kStrided);
    }
    if (ex.empty()) continue;
    steps.push_back(make_step(StepKind::kExchange, add_exchange(std::move(ex))));
    reduce_step(fmt::format("{}/stage{}", key, stage), std::move(vertices));
    steps.push_back(make_step(StepKind::kSync));
  }
  if (broadcast) {
    trace::Exchange ex{key + "/broadcast", {}, {}};
    for (const Reduction& r : rs) add_broadcast(ex, r.groups, r.outputs);
    if (!ex.empty()) steps.push_back(make_step(StepKind::kExchange, add_exchange(std::move(ex))));
  }
}

void IpuBuilder::broadcast(Steps& out, const Layout& l, Axis axis, std::uint64_t stats) {
  const Stamp stamp(*this, trace::OpKind::kReduce);
  const std::string key = fmt::format(
      "broadcast_{}_{}_{}", axis == Axis::kPositions ? "pos" : "chan", stats, layout_key(l));
  cached(out, key, [&](Steps& steps) {
    const std::uint64_t outputs =
        stats * (axis == Axis::kPositions ? l.chans_per_tile : l.positions_per_tile);
    trace::Exchange ex{key, {}, {}};
    add_broadcast(ex, reduction_groups(l, axis), outputs);
    if (ex.empty()) return;
    steps.push_back(make_step(StepKind::kSync));
    steps.push_back(make_step(StepKind::kExchange, add_exchange(std::move(ex))));
  });
}

void IpuBuilder::host(Steps& out, std::uint64_t total_bytes, trace::HostDirection dir,
                      trace::HostMemory memory, bool overlap) {
  host(out, total_bytes, dir, memory, overlap, TileRange{0, chip_.tiles - 1});
}

void IpuBuilder::host(Steps& out, std::uint64_t total_bytes, trace::HostDirection dir,
                      trace::HostMemory memory, bool overlap, TileRange tiles) {
  if (total_bytes == 0) return;
  trace::Step s = make_step(StepKind::kHost);
  s.direction = dir;
  s.memory = memory;
  s.overlap = overlap;
  s.tiles = tiles;
  s.bytes = ceil_div(total_bytes, tiles.size());
  s.provenance = stamp_for(trace::OpKind::kCopy);
  out.push_back(s);
}

trace::Step IpuBuilder::collective(trace::CollectiveOp op, std::uint64_t bytes, DType dt,
                                   trace::Group group) const {
  trace::Step s = make_step(StepKind::kCollective);
  s.provenance = current_;
  s.collective = op;
  s.bytes = bytes;
  s.dtype = dt;
  s.group = group;
  return s;
}

void IpuBuilder::collectives(Steps& out, trace::CollectiveOp op, std::uint64_t bytes, DType dt,
                             trace::Group group, std::uint64_t buffer) const {
  const std::uint64_t n = ceil_div(bytes, std::max<std::uint64_t>(buffer, 1));
  if (n == 0) return;
  // n buffers of equal size (the last rounded up), so identical collectives repeat.
  push_repeated(out, collective(op, ceil_div(bytes, n), dt, group), n);
}

void IpuBuilder::tensor(const std::string& name, trace::TensorKind kind, DType dt,
                        std::uint64_t total_bytes, std::optional<trace::Lifetime> live) {
  if (total_bytes == 0) return;
  program_.tensors.push_back(
      {name, kind, dt, TileRange{0, chip_.tiles - 1}, ceil_div(total_bytes, chip_.tiles), live});
}

void IpuBuilder::tensor(const std::string& name, trace::TensorKind kind, const Layout& l,
                        std::uint64_t copies, std::optional<trace::Lifetime> live) {
  if (l.elements() == 0 || copies == 0) return;
  const std::uint64_t bytes = copies * l.bytes_per_tile();
  if (l.tile_stride == 1) {
    program_.tensors.push_back({name, kind, l.dtype, l.range(), bytes, live});
    return;
  }
  for (std::uint64_t p = 0; p < l.position_blocks(); ++p)
    for (std::uint64_t c = 0; c < l.channel_blocks(); ++c)
      program_.tensors.push_back({fmt::format("{}/{}.{}", name, p, c), kind, l.dtype,
                                  TileRange{l.tile(p, c), l.tile(p, c)}, bytes, live});
}

}  // namespace ipusim::compiler
