// SPDX-License-Identifier: Apache-2.0
// Builds one IPU's program from layout-aware operations (docs/workloads.md "Lowering"): convs
// and matmuls planned by plan::plan_conv whose operands are rearranged from the layouts
// they have into the layouts the plan wants; elementwise chains computed where their operand
// lives (fused into one vertex per tile, or one compute set per op); reductions planned from
// their input layout. Identical operations reuse their compute sets and exchanges, as Poplar
// reuses code for repeated layers, so the trace stays small.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/layout.hpp"
#include "ipusim/plan/cache.hpp"
#include "ipusim/plan/conv.hpp"
#include "ipusim/plan/prefetch.hpp"
#include "ipusim/plan/program_parts.hpp"
#include "ipusim/trace/program.hpp"
#include "ipusim/util/units.hpp"
#include "memory.hpp"

namespace ipusim::compiler {

using Steps = std::vector<trace::Step>;

using plan::make_step;
// Appends `step` (or the steps of `body`) run `count` times: itself once, else a repeat loop
// of it.
void push_repeated(Steps& out, trace::Step step, std::uint64_t count);
void push_repeated(Steps& out, Steps body, std::uint64_t count);

// An operand of a conv or matmul: the layout it has now, and whether the conv reads it
// transposed (positions and channels swapped: the weights of a data-gradient pass, the
// activations of a weight-gradient pass). Empty: the operand is created for the conv
// (createInput / createWeights), so it already has the layout the plan wants.
struct Operand {
  std::optional<Layout> layout;
  bool transposed = false;
};

// The layouts a planned conv wants for its operands, in the source tensor's own axes: each
// block of the plan spread over the tiles that use it, from where the plan's fetch exchange
// multicasts it.
Layout plan_input_layout(const Layout& source, const plan::ConvPlan& plan, bool transposed);
Layout plan_weight_layout(const Layout& source, const plan::ConvPlan& plan, bool transposed);

// Which per-element reduction: over positions for each channel (batch-norm statistics, bias
// gradients, pools) or over channels for each position (layer norm, softmax).
enum class Axis { kPositions, kChannels };

// Tiles of `layout` that hold parts of the same outputs of a reduction over `axis`: one group
// per output block, listed in the order the staged reduction combines them.
std::vector<std::vector<std::uint32_t>> reduction_groups(const Layout& layout, Axis axis);

using plan::reduction_stages;

class IpuBuilder {
 public:
  // `rearrange_operands` false: conv operands are taken to be in the plan's layouts already
  // (no regroup exchange or transpose), to measure what rearranging costs.
  IpuBuilder(const ChipSpec& chip, trace::IpuProgram& program, double available_memory,
             trace::DType partials, bool fuse_elementwise, bool rearrange_operands = true);
  // Bits per AMP weight load of every conv and matmul built from now on (64 or 128).
  void set_coeff_load_bits(std::uint32_t bits) { coeff_load_bits_ = bits; }
  // Training: every ungrouped matmul is planned as poplin plans one with fullyConnectedPass
  // TRAINING_FWD, _BWD and _WU (as PopART and TensorFlow set it for training matmuls): its
  // forward pass with its data and weight gradients (plan::plan_fully_connected), jointly where
  // that is cheaper. Needs the operands' rearrangements (rearrange_operands), which tell the
  // passes apart.
  void plan_fully_connected_passes(bool on) { fc_passes_ = on; }
  // Plans are searched through the process's plan store (plan/cache.hpp: plans kept on disk
  // across processes) when one is set, else searched here.
  // Plans found by another builder of the same compile (the IPUs of a pipeline plan the same
  // shapes): plan_conv is deterministic in the chip, the planned shape and the budget, so a
  // plan is searched once per (shape, budget) per compile. The cache must outlive the builder
  // and serve one chip.
  using PlanCache = std::map<std::pair<std::string, std::uint64_t>, plan::ConvPlan>;
  void share_plans(PlanCache* cache) { shared_plans_ = cache; }
  // What another builder of the same compile built for an operation (the IPUs of a pipeline
  // build the same layers): its compute sets, exchanges and steps, by the operation's key and
  // the budget. A build is a function of those and the compile's settings, so a builder that
  // finds one appends copies instead of building them again; the program is the same. Only
  // self-contained builds are kept (no other cached operation inside, no tensor added). The
  // cache must outlive the builder and serve one compile.
  struct SharedBuild {
    std::vector<trace::ComputeSet> compute_sets;
    std::vector<trace::Exchange> exchanges;
    Steps steps;  // their indices relative to the first compute set and exchange
  };
  using BuildCache = std::map<std::pair<std::string, std::uint64_t>, SharedBuild>;
  void share_builds(BuildCache* cache) { shared_builds_ = cache; }
  // Every conv and matmul built from now on is appended to `plans` (if not null) as program
  // `ipu`'s (compile()'s plan records).
  void record_plans(std::vector<PlannedConv>* plans, std::uint32_t ipu) {
    plans_out_ = plans;
    plans_ipu_ = ipu;
  }

  // A conv or matmul: rearranges the operands into the plan's layouts (exchange plus transpose
  // vertices where the conv reads an operand transposed), then the planned conv; returns the
  // output's layout.
  Layout conv(Steps& out, const plan::ConvArgs& a, const Operand& input = {},
              const Operand& weights = {});
  Layout matmul(Steps& out, std::uint64_t m, std::uint64_t n, std::uint64_t k, trace::DType dt,
                const Operand& input = {}, const Operand& weights = {}, std::uint64_t groups = 1);
  // The backward passes of a conv or matmul `fwd` (a matmul is a 1x1 conv: height = rows),
  // given the layouts of its weights `w`, its input `x` and its output gradient `g`:
  //  - data gradient: a conv of g with w read transposed, at the output resolution (stride 1,
  //    the forward pass's MACs); returns its layout;
  //  - weight gradient: (k x k x in) x out reducing over batch x output field, reading x
  //    transposed and g as its weights; with `update`, the result moves to w's layout and is
  //    added there (a gradient accumulator's or an SGD step's scaled add). Returns where the
  //    gradient lies: w's layout, or without `update` the matmul's output.
  Layout data_gradient(Steps& out, const plan::ConvArgs& fwd, const Layout& w, const Layout& g);
  Layout weight_gradient(Steps& out, const plan::ConvArgs& fwd, const Layout& x, const Layout& w,
                         const Layout& g, bool update);
  // The layout a conv's weights are created with (createWeights), in [k x k x in, out] axes.
  Layout weights_layout(const plan::ConvArgs& a);
  // The layout an input created for a conv gets (createInput), e.g. a host input stream.
  Layout input_layout(const plan::ConvArgs& a);

  // Moves a tensor to another layout (sync + exchange); nothing when they are equal. An
  // `owner` (a conv's key) gives the move an exchange of its own, shared with no other owner.
  void rearrange(Steps& out, const Layout& from, const Layout& to, const std::string& owner = {});
  // Moves channels [from_first, from_first + n) of `from` into channels [to_first, to_first + n)
  // of `to` (sync + exchange; layout.hpp channel_move); nothing when no byte changes tile.
  void move_channels(Steps& out, const Layout& from, std::uint64_t from_first, const Layout& to,
                     std::uint64_t to_first, std::uint64_t n);
  // Builds an expanded plan's input (plan::expand_dims) in layout `to` from the conv's input in
  // `from` (sync + exchange); `a` is the conv, `plan` its expanded plan.
  void expand_input(Steps& out, const Layout& from, const Layout& to, const plan::ConvArgs& a,
                    const plan::ConvPlan& plan);

  // An elementwise chain over a tensor of `layout`, computed where it lives: one compute set
  // of fused `map` vertices, or (fusion off) one compute set and sync per op.
  void elementwise(Steps& out, const Layout& layout, std::span<const trace::Op> ops);
  // `op` of a tensor of `layout` with a per-channel vector broadcast over its positions, where
  // the tensor lives (the vector already on its tiles): popops' BroadcastVectorInner vertex
  // where popops would pick it (half, channel blocks a multiple of 4), else a plain binary op.
  void channel_op(Steps& out, const Layout& layout, trace::Op op, bool in_place);
  // Converts a tensor of `layout` (in `from`) to the layout's dtype, where it lives.
  void cast(Steps& out, const Layout& layout, trace::DType from);
  // a += scale * b where both have `layout`.
  void scaled_add(Steps& out, const Layout& layout);
  // A copy of a tensor of `layout` into a new tensor of the same layout, where it lives.
  void copy(Steps& out, const Layout& layout);

  // Reduces `stats` statistics (e.g. sum and sum of squares) of `layout` over `axis`:
  // tile-local partials, then staged cross-tile combining among the tiles holding the same
  // outputs only; with `broadcast` the results go back to every tile that holds the outputs'
  // inputs (for a following normalisation).
  void reduce(Steps& out, const Layout& layout, Axis axis, std::uint64_t stats, bool broadcast);
  // The sum of squares of a whole tensor of `layout` (a norm), over its own tiles: one popops
  // SQUARE_ADD reduction to one value, which squares as it adds (popops' estimator costs it as
  // an add; TensorFlow's reduction_square_add fusion, PopART's LambSquareOpx and
  // ReduceSumSquareOpx); with `broadcast` the result goes back to every tile of the tensor.
  void norm(Steps& out, const Layout& layout, bool broadcast) {
    reduce(out, one_row(layout), Axis::kChannels, 1, broadcast);
  }
  // norm() of each layout, combined as popops' reduceMany runs them: every stage's vertices share
  // one compute set, exchange and sync; the results go back to every tile of their tensor. `name`
  // tells combinations apart.
  void reduce_many(Steps& out, const std::string& name, std::span<const Layout> layouts);
  // Only the last part of reduce(..., broadcast = true): results already reduced (and, say,
  // all-reduced and turned into mean and inverse deviation) go from each output group's first
  // tile to the others.
  void broadcast(Steps& out, const Layout& layout, Axis axis, std::uint64_t stats);

  void host(Steps& out, std::uint64_t total_bytes, trace::HostDirection dir,
            trace::HostMemory memory, bool overlap = false);
  // The same onto `tiles` (e.g. I/O tiles, or the tiles of the tensor it fills).
  void host(Steps& out, std::uint64_t total_bytes, trace::HostDirection dir,
            trace::HostMemory memory, bool overlap, trace::TileRange tiles);
  trace::Step collective(trace::CollectiveOp op, std::uint64_t bytes, trace::DType dt,
                         trace::Group group) const;
  // A collective over a `bytes` tensor in fused buffers of at most `buffer` bytes, as GCL runs
  // the gradient reduction (one collective per buffer).
  void collectives(Steps& out, trace::CollectiveOp op, std::uint64_t bytes, trace::DType dt,
                   trace::Group group, std::uint64_t buffer) const;

  // Provenance (trace format v3, issue 13): while a scope is alive, every compute set,
  // exchange, host copy and collective the builder creates carries its layer, pass and op.
  // Where the scope gives no op, each operation supplies its own (conv, matmul, reduce,
  // elementwise, copy for rearrangements and host copies). A cached compute set or exchange
  // reused under another layer adds that layer to its list. Scopes nest; the innermost wins,
  // and its destruction restores the enclosing one.
  class Scope {
   public:
    Scope(IpuBuilder& b, trace::Provenance p) : b_(b), saved_(std::move(b.current_)) {
      b_.current_ = std::move(p);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() { b_.current_ = std::move(saved_); }

   private:
    IpuBuilder& b_;
    trace::Provenance saved_;
  };
  // `layer` empty: no layer (e.g. the gradient all-reduce of all layers).
  [[nodiscard]] Scope scope(const std::string& layer, trace::Pass pass,
                            trace::OpKind op = trace::OpKind::kNone) {
    trace::Provenance p;
    if (!layer.empty()) p.layers.push_back(layer);
    p.pass = pass;
    p.op = op;
    return Scope(*this, std::move(p));
  }
  // The current layers and op with another pass (weight_gradient within a backward scope).
  [[nodiscard]] Scope scope_pass(trace::Pass pass) {
    trace::Provenance p = current_;
    p.pass = pass;
    return Scope(*this, std::move(p));
  }
  // The current pass and op for the work of `layers` done later (elementwise ops pending from
  // them, applied in another layer's scope); the current layers when `layers` is empty.
  [[nodiscard]] Scope scope_layers(const std::vector<std::string>& layers) {
    trace::Provenance p = current_;
    if (!layers.empty()) p.layers = layers;
    return Scope(*this, std::move(p));
  }
  const trace::Provenance& provenance() const { return current_; }
  // A tensor of `total_bytes` spread evenly over all tiles (memory accounting), live at the
  // program positions `live` (unset: always live).
  void tensor(const std::string& name, trace::TensorKind kind, trace::DType dt,
              std::uint64_t total_bytes, std::optional<trace::Lifetime> live = std::nullopt);
  // `copies` tensors of `layout`, on the tiles that layout puts them (memory accounting),
  // live at the program positions `live` (unset: always live).
  void tensor(const std::string& name, trace::TensorKind kind, const Layout& layout,
              std::uint64_t copies = 1, std::optional<trace::Lifetime> live = std::nullopt);
  // A tensor the memory-accounting pass lists (memory.hpp), by whichever of the two above.
  void hold(const Holding& h) {
    if (h.layout)
      tensor(h.name, h.kind, *h.layout, h.copies, h.live);
    else
      tensor(h.name, h.kind, h.dtype, h.bytes, h.live);
  }

  Layout linear(trace::DType dt, std::uint64_t positions, std::uint64_t channels) const {
    return linear_layout(chip_, dt, positions, channels);
  }
  // `l`'s elements as one row over the same tiles, the same count on each: a reduction of it
  // over channels is the whole tensor's to one value (a weight tensor's norm).
  static Layout one_row(Layout l) {
    l.channels = l.elements();
    l.chans_per_tile = std::max<std::uint64_t>(1, l.per_tile());
    l.positions = 1;
    l.positions_per_tile = 1;
    l.channels_outer = false;
    return l;
  }
  // One of `k` equal parts of `l`, on the same tiles (1/k of each tile's elements).
  static Layout part(Layout l, std::uint64_t k) {
    if (k <= 1) return l;
    if (l.positions >= k) {
      l.positions = ceil_div(l.positions, k);
      l.positions_per_tile = std::max<std::uint64_t>(1, ceil_div(l.positions_per_tile, k));
    } else {
      l.channels = ceil_div(l.channels, k);
      l.chans_per_tile = std::max<std::uint64_t>(1, ceil_div(l.chans_per_tile, k));
    }
    return l;
  }
  std::uint64_t peak_temp() const { return peak_temp_; }
  // Bytes the program keeps in its gateway's Streaming Memory (input buffers, streamed
  // optimiser state or weights), for check_streaming_memory.
  void keep_in_streaming_memory(std::uint64_t bytes) { streaming_bytes_ += bytes; }
  std::uint64_t streaming_memory() const { return streaming_bytes_; }
  const ChipSpec& chip() const { return chip_; }
  // Plans conv `args` ahead, on a second thread (plan/prefetch.hpp), as conv() will plan it
  // with its input and weights read transposed or not: conv() takes the plan made, or waits
  // for it. Asking for a conv that never runs costs only the second thread's time.
  void plan_ahead(const plan::ConvArgs& args, bool transposed_input = false,
                  bool transposed_weights = false);
  // The data-gradient conv of forward conv `fwd` (data_gradient) and its weight-gradient
  // matmul, [k x k x in, out] = [k x k x in, positions] x [positions, out] (weight_gradient).
  static plan::ConvArgs data_gradient_args(const plan::ConvArgs& fwd);
  static plan::ConvArgs weight_gradient_args(const plan::ConvArgs& fwd);
  // An m x k by k x n matmul (in `groups` groups) as the 1x1 conv matmul() plans.
  static plan::ConvArgs matmul_args(std::uint64_t m, std::uint64_t n, std::uint64_t k,
                                    trace::DType dt, std::uint64_t groups = 1);

 private:
  // Whether poplin copies an operand of `plan` (the input, or else the weights, of the planned
  // product) into the plan's layout before the conv fetches it, where it could be fetched from
  // where it lies: always in a weight-gradient pass, and where the conv broadcasts it to more
  // than 7 tiles (poplibs Convolution.cpp, createConvPartials: rearrangeActs and
  // rearrangeWeights, inViewMaxBroadcastDests = weightViewMaxBroadcastDests = 7;
  // inputRearrangementIsExpensive). ipusim's plans split no kernel, so an input's
  // destinations are the output-channel split and the weights' the row (batch x field) split.
  bool copied_for_plan(const plan::ConvPlan& plan, bool input) const;
  // One reduction of reduction_steps: each group of tiles reduces to its first tile; `outputs`
  // results per tile from `inputs` values each, of `dtype`, read as `local` on the tiles.
  struct Reduction {
    std::vector<std::vector<std::uint32_t>> groups;
    std::uint64_t outputs;
    std::uint64_t inputs;
    trace::DType dtype;
    trace::ReduceLayout local;
  };
  static Reduction reduction(const Layout& l, Axis axis, std::uint64_t stats);
  // The steps of `rs` run together: one local compute set, then each cross-tile stage's
  // exchange, compute set and sync shared by every reduction that has it.
  void reduction_steps(Steps& steps, const std::string& key, std::span<const Reduction> rs,
                       bool broadcast);
  struct Planned {
    plan::ConvPlan plan;
    Layout output;
  };
  // The plan of `a` (planned once): a planner error names the layer, pass and shape.
  const Planned& planned(const plan::ConvArgs& a);
  const Planned& planned_unchecked(const plan::ConvArgs& a);
  // Whether `a` (as planned) is one of the three passes of a fully connected layer planned
  // together (plan_fully_connected_passes), and whether it is the forward one, which plans them.
  bool fc_pass(const plan::ConvArgs& a) const;
  bool fc_forward(const plan::ConvArgs& a) const;
  // Plans forward matmul `f` (as planned) with its data and weight gradients
  // (plan::plan_fully_connected) and keeps the three plans under the keys conv() looks them up by.
  void plan_fully_connected(const plan::ConvArgs& f);
  // plan::plan_conv and plan::plan_fully_connected within budget_, through the plan store.
  plan::ConvPlan search(const plan::ConvArgs& a);
  plan::FcPlans search_fully_connected(const plan::ConvArgs& f, const plan::ConvArgs& d,
                                       const plan::ConvArgs& w);
  // `a` as the builder plans it: with its partials type (the run's precision) and AMP
  // weight-load width, and its groups combined (plan::combine_conv_groups; applying it again
  // changes nothing).
  plan::ConvArgs as_planned(plan::ConvArgs a) const;
  // `factor`: poplin's empirical factor on the copy (plan::transpose_factor).
  void transpose(Steps& out, const Layout& layout, std::uint64_t factor);
  // A compute set (cached by `key`) of `v` on every block of `layout`, then a sync.
  void per_block(Steps& out, const std::string& key, const Layout& layout, const trace::Vertex& v);
  std::uint32_t add_compute_set(const std::string& name, std::vector<trace::Vertex> vertices);
  std::uint32_t add_exchange(trace::Exchange ex);
  // Appends the cached steps of `key`, building them with `build` the first time.
  template <class F>
  void cached(Steps& out, const std::string& key, F&& build);
  // shared_builds_: appends the shared build of `key` to the program and its steps to `steps`
  // (false: none); keeps the build of `key` just made from the given first indices.
  bool replay_shared(const std::string& key, Steps& steps);
  void keep_shared(const std::string& key, const Steps& steps, std::size_t compute_sets,
                   std::size_t exchanges);
  // The current provenance with `op` where the scope gives none.
  trace::Provenance stamp_for(trace::OpKind op) const;
  // Appends to plans_out_ the conv just emitted: `a` planned as `plan`, its operands'
  // rearrangements at out[first_step, conv_step) and the conv itself from conv_step.
  void record_plan(const Steps& out, const plan::ConvArgs& a, const plan::ConvPlan& plan,
                   std::size_t first_step, std::size_t conv_step);
  // Stamps the compute sets and exchanges created since the last stamp (on leaving each
  // operation, so that nested operations stamp their own first).
  void stamp_new(trace::OpKind op);
  // Adds the current layers to the compute sets and exchanges `steps` refer to (reuse).
  void add_layers(const Steps& steps);
  // Whether every compute set and exchange `steps` refer to can name the current layers too
  // (at most trace::kMaxProvenanceLayers each).
  bool room_for_layers(const Steps& steps) const;
  // Gives the reused compute and exchange steps of `steps` the current pass where their items
  // were made in another (trace format v4: a recomputation runs the forward's compute sets).
  void stamp_pass(std::span<trace::Step> steps) const;
  // Stamps on leaving an operation.
  class Stamp {
   public:
    Stamp(IpuBuilder& b, trace::OpKind op) : b_(b), op_(op) {}
    Stamp(const Stamp&) = delete;
    Stamp& operator=(const Stamp&) = delete;
    ~Stamp() { b_.stamp_new(op_); }

   private:
    IpuBuilder& b_;
    trace::OpKind op_;
  };

  const ChipSpec& chip_;
  trace::IpuProgram& program_;
  trace::DType partials_;
  std::uint32_t coeff_load_bits_ = plan::ConvArgs{}.coeff_load_bits;
  bool fuse_;
  bool rearrange_operands_;
  bool fc_passes_ = false;
  double available_memory_;  // proportion of tile memory a conv's buffers may take
  std::uint64_t budget_;     // that in bytes per tile
  std::uint64_t peak_temp_ = 0;
  std::uint64_t streaming_bytes_ = 0;
  std::map<std::string, Planned> plans_;
  PlanCache* shared_plans_ = nullptr;
  BuildCache* shared_builds_ = nullptr;
  std::uint64_t cached_calls_ = 0;  // cached() calls so far (to tell a build that nests one)
  std::shared_ptr<const plan::PlanStore> store_ = plan::plan_store();  // null: none
  std::optional<plan::ChipKey> chip_key_;                              // made on first use
  std::unique_ptr<plan::PlanPrefetcher> prefetcher_;  // made by the first plan_ahead()
  std::vector<PlannedConv>* plans_out_ = nullptr;
  std::uint32_t plans_ipu_ = 0;
  std::map<std::string, Steps> ops_;
  std::map<std::string, std::uint32_t> copies_;  // copies made of a key's items (cached)
  trace::Provenance current_;
  std::size_t stamped_compute_sets_ = 0, stamped_exchanges_ = 0;
  // The layers of each shared compute set's and exchange's provenance as a set (by index, made
  // on its first share), so that adding a layer is not a search of up to 4,096 names.
  std::unordered_map<std::size_t, std::unordered_set<std::string>> cs_layers_, ex_layers_;
};

std::string layout_key(const Layout& l);

}  // namespace ipusim::compiler
