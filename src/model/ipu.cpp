// SPDX-License-Identifier: Apache-2.0
#include "ipusim/model/ipu.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ipusim/model/clock.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::model {
namespace {

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, const char* what) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a)
    throw ModelError(fmt::format("{} overflows 64 bits ({} x {})", what, a, b));
  return a * b;
}

// True if `steps` (at any depth) contain a step that waits for other IPUs.
bool has_group_step(const std::vector<trace::Step>& steps) {
  for (const auto& step : steps) {
    switch (step.kind) {
      case trace::StepKind::kSync:
        if (step.group.kind != trace::GroupKind::kTile) return true;
        break;
      case trace::StepKind::kGlobalExchange:
      case trace::StepKind::kCollective:
        return true;
      case trace::StepKind::kRepeat:
        if (has_group_step(step.body)) return true;
        break;
      default:
        break;
    }
  }
  return false;
}

}  // namespace

const ExchangeCostCache::Costed& ExchangeCostCache::get(const ChipSpec& chip,
                                                        const trace::Exchange& ex,
                                                        cost::ExchangeScratch& scratch) {
  // The key: the counts and a few transfers (cheap); equal keys are told apart by comparing
  // the records whole.
  const auto mix = [](std::uint64_t h, std::uint64_t v) {
    return (h ^ v) * 0x100000001b3ull + (h >> 29);
  };
  std::uint64_t key = mix(ex.transfers.size(), ex.dst_pool.size());
  for (std::size_t i : {std::size_t{0}, ex.transfers.size() / 2, ex.transfers.size() - 1}) {
    if (i >= ex.transfers.size()) break;
    const trace::Transfer& t = ex.transfers[i];
    key = mix(mix(mix(key, t.src.first), t.bytes), (std::uint64_t{t.count} << 32) | t.dst_first);
  }
  for (const trace::Move& m : ex.moves)
    key = mix(mix(mix(key, m.positions), m.channels),
              (std::uint64_t{m.from.first_tile} << 32) | m.to.first_tile);
  for (const trace::ReduceScatter& r : ex.reduce_scatters)
    key = mix(mix(mix(key, r.members), r.stride),
              (std::uint64_t{r.groups.size()} << 32) | (r.groups.empty() ? 0 : r.groups[0].first));
  const auto [first, last] = entries_.equal_range(key);
  for (auto it = first; it != last; ++it)
    if (it->second.exchange->transfers == ex.transfers &&
        it->second.exchange->dst_pool == ex.dst_pool && it->second.exchange->moves == ex.moves &&
        it->second.exchange->reduce_scatters == ex.reduce_scatters)
      return *it->second.costed;
  auto costed = std::make_unique<Costed>();
  costed->cost = cost::exchange_cost_and_code(chip, ex, &costed->code, scratch);
  return *entries_.emplace(key, Entry{&ex, std::move(costed)})->second.costed;
}

ExchangeCosts::ExchangeCosts(const ChipSpec& chip, const trace::IpuProgram& p)
    : chip_(chip), program_(p), costs_(p.exchanges.size(), nullptr), owned_(p.exchanges.size()) {}

void ExchangeCosts::cost_all(cost::MemoryMap& memory, ExchangeCostCache* shared) {
  cost::ExchangeScratch scratch;
  for (std::size_t i = 0; i < costs_.size(); ++i) {
    if (costs_[i]) continue;
    if (shared) {
      const ExchangeCostCache::Costed& c = shared->get(chip_, program_.exchanges[i], scratch);
      for (std::size_t t = 0; t < c.code.size(); ++t) memory.tiles[t].exchange_code += c.code[t];
      costs_[i] = &c.cost;
    } else {
      owned_[i] = std::make_unique<cost::ExchangeCost>(
          cost::exchange_cost(chip_, program_.exchanges[i], &memory, scratch));
      costs_[i] = owned_[i].get();
    }
  }
}

const cost::ExchangeCost& ExchangeCosts::cost(std::uint32_t index) {
  if (!costs_.at(index)) {
    owned_[index] =
        std::make_unique<cost::ExchangeCost>(cost::exchange_cost(chip_, program_.exchanges[index]));
    costs_[index] = owned_[index].get();
  }
  return *costs_[index];
}

Ipu::Ipu(sc_core::sc_module_name name, const ChipSpec& chip, const trace::IpuProgram& program,
         ModelOptions options, Placement placement, Fabric* fabric,
         ExchangeCostCache* exchange_costs)
    : IpuModule(name),
      chip_(chip),
      program_(program),
      options_(options),
      placement_(placement),
      fabric_(fabric),
      period_(clock_period(chip.clock)),
      memory_(cost::memory_map(chip, program, /*exchanges=*/false)),
      exchange_(chip, program),
      compute_cache_(program.compute_sets.size()),
      compute_executions_(program.compute_sets.size(), 0),
      exchange_executions_(program.exchanges.size(), 0),
      // Spans record every iteration: with them, every iteration is simulated.
      fast_forward_(options.fast_forward && options.memoise_loops && !options.record_spans) {
  // Every exchange is costed here, once, in the same pass over its transfers that adds their
  // exchange code to the memory map (compiled programs have millions of transfers).
  exchange_.cost_all(memory_, exchange_costs);
  cost::check_memory(chip, program, memory_);
  SC_THREAD(run);
}

const cost::ComputeSetCost& Ipu::compute_cost(std::uint32_t index) {
  auto& slot = compute_cache_.at(index);
  if (!slot)
    slot = std::make_unique<cost::ComputeSetCost>(
        cost::compute_set_cost(chip_, program_.compute_sets[index]));
  return *slot;
}

void Ipu::advance(std::uint64_t cycles) {
  if (cycles == 0) return;
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() / period_.value();
  if (cycles > limit || now_ > limit - cycles)
    throw ModelError(fmt::format(
        "IPU {}: simulated time exceeds the kernel's range ({} cycles at {} ps per cycle)",
        program_.ipu, limit, period_.value()));
  now_ += cycles;
  wait(sc_core::sc_time::from_value(period_.value() * cycles));
}

void Ipu::execute(const std::vector<trace::Step>& steps, std::uint64_t times) {
  for (const auto& step : steps) {
    execute_step(step, times);
    if (work_total_ != 0 && step.kind != trace::StepKind::kRepeat) tick();
  }
}

void Ipu::tick() {
  // Reported every 4096 phases: the callback reads the clock and may print.
  if ((++work_done_ & 4095) == 0) options_.progress(work_done_, work_total_);
}

std::uint64_t Ipu::work(const std::vector<trace::Step>& steps) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max() / 4;
  std::uint64_t n = 0;
  for (const auto& step : steps) {
    std::uint64_t w = 1;
    if (step.kind == trace::StepKind::kRepeat) {
      const std::uint64_t body = work(step.body);
      const bool once = options_.memoise_loops && memoisable(step);
      w = once || body == 0 ? body : (step.count > kMax / body ? kMax : step.count * body);
    }
    n = std::min(kMax, n + w);
  }
  return n;
}

void Ipu::open_superstep(const trace::Step& compute, std::uint64_t times,
                         std::uint32_t active_tiles) {
  if (!options_.record_supersteps) return;
  auto [it, added] = superstep_rows_.try_emplace(&compute, superstep_totals_.size());
  if (added) {
    SuperstepTotals row;
    row.index = static_cast<std::int64_t>(superstep_rows_.size()) - 1;
    row.compute_set = compute.index;
    row.first_start = now_;
    row.active_tiles = active_tiles;
    superstep_totals_.push_back(row);
  }
  superstep_ = it->second;
  superstep_totals_[superstep_].executions += times;
}

void Ipu::record(SpanKind kind, std::uint32_t index, std::uint64_t start, std::uint64_t cycles,
                 std::uint64_t times, std::uint32_t active_tiles) {
  if (options_.record_supersteps) {
    if (const auto phase = phase_of(kind)) {  // loops and background transfers belong to none
      if (superstep_ == superstep_totals_.size()) {  // before the first compute phase
        SuperstepTotals before;
        before.first_start = start;
        superstep_totals_.push_back(before);
      }
      superstep_totals_[superstep_].cycles[*phase] += cycles;
    }
  }
  if (!options_.record_spans) return;
  Span s;
  s.start = start;
  s.cycles = cycles;
  s.times = times;
  s.index = index;
  s.active_tiles = active_tiles;
  s.kind = kind;
  spans_.push_back(s);
}

void Ipu::record_tiles(bool exchange, std::uint32_t index, std::uint64_t start,
                       std::uint64_t cycles, std::uint64_t times) {
  if (!options_.record_tiles || placement_.system_ipu != options_.tile_ipu) return;
  // An exchange belongs to the superstep of the compute phase before it.
  if (exchange && supersteps_ == 0) return;
  const std::uint64_t step = exchange ? supersteps_ - 1 : supersteps_;
  if (step < options_.tile_steps_first || step > options_.tile_steps_last) return;
  if (exchange) {
    const auto& c = exchange_.cost(index);
    for (std::uint32_t t = 0; t < chip_.tiles; ++t)
      if (c.tile_bytes[t] != 0)
        tile_spans_.push_back({start, cycles, c.tile_bytes[t] * times, t,
                               static_cast<std::uint32_t>(step), index, true});
  } else {
    const auto& c = compute_cost(index);
    for (std::uint32_t t = 0; t < chip_.tiles; ++t)
      if (c.tile_cycles[t] != 0)
        tile_spans_.push_back({start, c.tile_cycles[t] * times, c.tile_cycles[t] * times, t,
                               static_cast<std::uint32_t>(step), index, false});
  }
}

void Ipu::execute_step(const trace::Step& step, std::uint64_t times) {
  switch (step.kind) {
    case trace::StepKind::kCompute: {
      const auto& c = compute_cost(step.index);
      const std::uint64_t cycles = checked_mul(c.cycles, times, "compute time");
      compute_executions_[step.index] += times;
      phases_[PhaseKind::kCompute] += cycles;
      counts_[PhaseKind::kCompute] += times;
      open_superstep(step, times, c.active_tiles);
      record(span_kind(PhaseKind::kCompute), step.index, now_, cycles, times, c.active_tiles);
      if (options_.record_spans) {
        record_tiles(false, step.index, now_, cycles, times);
        ++supersteps_;
      }
      advance(cycles);
      break;
    }
    case trace::StepKind::kSync: {
      if (step.group.kind != trace::GroupKind::kTile) {
        group_step(step, times);
        break;
      }
      const std::uint64_t cycles =
          checked_mul(chip_.sync.internal_latency.count, times, "sync time");
      phases_[PhaseKind::kSync] += cycles;
      counts_[PhaseKind::kSync] += times;
      record(span_kind(PhaseKind::kSync), 0, now_, cycles, times);
      advance(cycles);
      break;
    }
    case trace::StepKind::kExchange: {
      const auto& c = exchange_.cost(step.index);
      const std::uint64_t cycles = checked_mul(c.cycles, times, "exchange time");
      exchange_executions_[step.index] += times;
      phases_[PhaseKind::kExchange] += cycles;
      counts_[PhaseKind::kExchange] += times;
      record(span_kind(PhaseKind::kExchange), step.index, now_, cycles, times);
      if (options_.record_spans) record_tiles(true, step.index, now_, cycles, times);
      advance(cycles);
      break;
    }
    case trace::StepKind::kHost: {
      // Through the machine's gateway in a system; straight to the chip's host link otherwise.
      const auto c = cost::host_copy_cost(chip_, step);
      if (step.overlap) {
        // A background transfer on I/O tiles: wait only for the previous one (double
        // buffering), then let this one run behind the program. Loops holding one are never
        // scaled (see kRepeat), so times is 1 here.
        const std::uint64_t stall = background_until_ > now_ ? background_until_ - now_ : 0;
        phases_[PhaseKind::kHost] += stall;
        counts_[PhaseKind::kHost] += 1;
        host_bytes_ += c.total_bytes;
        const auto dir = static_cast<std::uint32_t>(step.direction);
        if (stall > 0) record(span_kind(PhaseKind::kHost), dir, now_, stall, 1);
        advance(stall);
        background_until_ = now_ + (fabric_ ? fabric_->host_cycles(step) : c.cycles);
        record(SpanKind::kBackgroundHost, dir, now_, background_until_ - now_, 1);
        break;
      }
      const std::uint64_t cycles =
          checked_mul(fabric_ ? fabric_->host_cycles(step) : c.cycles, times, "host copy time");
      const PhaseKind kind =
          step.memory == trace::HostMemory::kStreaming ? PhaseKind::kStreaming : PhaseKind::kHost;
      phases_[kind] += cycles;
      counts_[kind] += times;
      host_bytes_ += checked_mul(c.total_bytes, times, "host bytes");
      record(span_kind(kind), static_cast<std::uint32_t>(step.direction), now_, cycles, times);
      advance(cycles);
      break;
    }
    case trace::StepKind::kGlobalExchange:
    case trace::StepKind::kCollective:
      group_step(step, times);
      break;
    case trace::StepKind::kRepeat: {
      const std::uint64_t iterations = checked_mul(step.count, times, "repeat count");
      // The loop's span is recorded before its body (start order) and closed after it.
      const std::size_t loop_span = spans_.size();
      const std::uint64_t loop_start = now_;
      record(SpanKind::kLoop, depth_, now_, 0, iterations);
      ++depth_;
      if (options_.memoise_loops && memoisable(step)) {
        // Every phase cost is a pure function of (trace, chip): the body takes the same time
        // on each iteration, so running it once with every phase scaled is exact.
        execute(step.body, iterations);
      } else {
        // A body with group steps waits for other IPUs, whose programs may interleave with
        // this one differently on each iteration, and one with background transfers overlaps
        // its iterations: run every iteration (inner loops without either are still scaled),
        // unless fast-forward proves that they repeat.
        // Loops with no group step are fast-forwarded on their own only when this IPU is the
        // only one simulated (no other thread whose order against this one's could matter).
        const bool local = fast_forward_ && !has_group_step(step.body) &&
                           (!fabric_ || fabric_->ipus_simulated() == 1);
        const std::size_t f = frames_.size();
        frames_.push_back({&step, 0, iterations});
        for (; frames_[f].iteration < iterations; ++frames_[f].iteration) {
          if (local) local_cut();
          execute(step.body, 1);
        }
        frames_.pop_back();
      }
      --depth_;
      if (options_.record_spans) spans_[loop_span].cycles = now_ - loop_start;
      break;
    }
  }
}

bool Ipu::memoisable(const trace::Step& repeat) {
  auto [it, inserted] = memoisable_.try_emplace(&repeat, false);
  if (inserted) it->second = !has_group_step(repeat.body) && !has_background_transfer(repeat.body);
  return it->second;
}

void Ipu::group_step(const trace::Step& step, std::uint64_t times) {
  if (!fabric_)
    throw ModelError(fmt::format(
        "IPU {}: the program has external syncs, inter-IPU copies or collectives: run it on a "
        "system (--system configs/systems/...)",
        program_.ipu));
  const std::uint64_t start = now_;
  group_step_ = &step;
  const GroupTiming t =
      fabric_->group_step(placement_, step, now_, times, fast_forward_ ? this : nullptr);
  // Waiting for the group's other members (pipeline bubbles, imbalance), then the external
  // sync itself from the last arrival.
  const std::uint64_t arrived = std::max(start, t.barrier);
  if (arrived > start)
    record(span_kind(PhaseKind::kWaiting), static_cast<std::uint32_t>(step.group.kind), start,
           arrived - start, times);
  record(span_kind(PhaseKind::kExternalSync), static_cast<std::uint32_t>(step.group.kind), arrived,
         t.synced - arrived, times);
  if (step.kind == trace::StepKind::kCollective)
    record(span_kind(PhaseKind::kCollective), static_cast<std::uint32_t>(step.collective), t.synced,
           t.end - t.synced, times);
  else if (step.kind == trace::StepKind::kGlobalExchange)
    record(span_kind(PhaseKind::kInterIpu), step.index, t.synced, t.end - t.synced, times);
  // Waiting for the other members, the external sync, then the step itself.
  charge_group_step(step, start, t, times, phases_, counts_, group_steps_);
  now_ = t.end;  // the fabric's event already advanced kernel time to the end
  if (skip_) {   // released that much later
    apply(*skip_, false);
    skip_.reset();
  }
}

template <class Self, class F>
void Ipu::visit_counters(Self& self, F&& f) {
  for (auto* phases : {&self.phases_, &self.counts_, &self.group_steps_.external_sync,
                       &self.group_steps_.collective, &self.group_steps_.inter_ipu})
    for (auto& v : phases->values) f(v);
  f(self.host_bytes_);
  f(self.work_done_);
  for (auto& v : self.compute_executions_) f(v);
  for (auto& v : self.exchange_executions_) f(v);
  for (auto& row : self.superstep_totals_) {
    f(row.executions);
    for (auto& v : row.cycles.values) f(v);
  }
}

bool Ipu::cut_state(std::uint64_t time, CutState& out) const {
  if (frames_.empty()) return false;
  for (std::size_t i = 0; i < frames_.size(); ++i) {
    out.loops.push_back(reinterpret_cast<std::uintptr_t>(frames_[i].loop));
    if (i + 1 < frames_.size()) out.loops.push_back(frames_[i].iteration);
  }
  out.step = reinterpret_cast<std::uintptr_t>(group_step_);
  out.iteration = frames_.back().iteration;
  out.iterations = frames_.back().iterations;
  // Everything else this IPU's future depends on: when it arrived, how much longer its
  // background transfer runs, the superstep its phases go to and the supersteps it has seen
  // (the rest is the trace and the chip).
  out.relative = {time - now_, background_until_ > time ? background_until_ - time : 0, superstep_,
                  superstep_totals_.size()};
  return true;
}

void Ipu::cut_counters(std::vector<std::uint64_t>& out) const {
  visit_counters(*this, [&](const std::uint64_t& v) { out.push_back(v); });
}

void Ipu::skip(std::uint64_t periods, std::uint64_t cycles, std::vector<std::uint64_t> counters,
               std::uint64_t iterations) {
  skip_ = Skipped{periods, cycles, iterations, std::move(counters)};
}

void Ipu::apply(const Skipped& s, bool wait) {
  std::size_t i = 0;
  visit_counters(*this, [&](std::uint64_t& v) { v += s.periods * s.counters[i++]; });
  frames_.back().iteration += s.periods * s.iterations;
  // Relative state stays as it was at the cut: a background transfer in flight ends as much
  // later (one that ended before is moved on too, still before the new time).
  background_until_ += s.periods * s.cycles;
  if (wait)
    advance(s.periods * s.cycles);
  else
    now_ += s.periods * s.cycles;
}

void Ipu::local_cut() {
  std::vector<CutState> parties(1);
  cut_state(now_, parties[0]);
  parties[0].step = 0;  // the iteration's start
  if (local_.size() < frames_.size()) local_.resize(frames_.size());
  auto skip = local_[frames_.size() - 1].cut(
      now_, std::move(parties),
      [this](std::size_t, std::vector<std::uint64_t>& out) { cut_counters(out); },
      std::numeric_limits<std::uint64_t>::max() / period_.value());
  if (!skip) return;
  spdlog::info("fast-forward: IPU {} skips {} periods of {} cycles from cycle {}",
               placement_.system_ipu, skip->periods, skip->cycles, now_);
  apply({skip->periods, skip->cycles, skip->iterations[0], std::move(skip->counters[0])}, true);
}

bool Ipu::has_background_transfer(const std::vector<trace::Step>& steps) {
  for (const auto& s : steps)
    if ((s.kind == trace::StepKind::kHost && s.overlap) ||
        (s.kind == trace::StepKind::kRepeat && has_background_transfer(s.body)))
      return true;
  return false;
}

void Ipu::run() {
  // Exceptions must not cross the SystemC kernel (it would turn them into reports and lose
  // their type): keep it and stop the simulation; simulate() rethrows it.
  try {
    if (options_.progress && placement_.system_ipu == 0) {
      work_total_ = work(program_.steps);
      options_.progress(0, work_total_);
    }
    execute(program_.steps, 1);
    if (options_.progress && placement_.system_ipu == 0)
      options_.progress(work_total_, work_total_);
    // The program ends when its last background transfer has landed.
    if (background_until_ > now_) {
      phases_[PhaseKind::kHost] += background_until_ - now_;
      record(span_kind(PhaseKind::kHost), static_cast<std::uint32_t>(trace::HostDirection::kToIpu),
             now_, background_until_ - now_, 1);
      advance(background_until_ - now_);
    }
    finished_ = true;
  } catch (...) {
    error_ = std::current_exception();
    sc_core::sc_stop();
  }
}

IpuRunStats Ipu::stats() {
  IpuRunStats s;
  s.ipu = placement_.system_ipu;
  s.program = placement_.program;
  s.replica = placement_.replica;
  s.cycles = now_;
  s.phases = phases_;
  s.counts = counts_;
  s.group_steps = group_steps_;
  s.host_bytes = host_bytes_;
  s.memory = memory_;
  s.spans = std::move(spans_);
  s.tile_spans = std::move(tile_spans_);
  s.supersteps = std::move(superstep_totals_);
  s.tile_compute_cycles.assign(chip_.tiles, 0);
  s.tile_exchange_bytes.assign(chip_.tiles, 0);
  for (std::size_t i = 0; i < program_.compute_sets.size(); ++i) {
    const auto& cs = program_.compute_sets[i];
    NamedPhase named{cs.name, compute_executions_[i], 0, trace::layers_label(cs.provenance),
                     std::string(trace::pass_label(cs.provenance))};
    if (compute_executions_[i] != 0) {
      const auto& c = *compute_cache_[i];
      named.cycles = c.cycles * compute_executions_[i];
      named.flops = c.flops;
      s.flops += c.flops * compute_executions_[i];
      for (std::uint32_t t = 0; t < chip_.tiles; ++t)
        s.tile_compute_cycles[t] += c.tile_cycles[t] * compute_executions_[i];
    }
    s.compute_sets.push_back(std::move(named));
  }
  for (std::size_t i = 0; i < program_.exchanges.size(); ++i) {
    const auto& ex = program_.exchanges[i];
    NamedPhase named{ex.name, exchange_executions_[i], 0, trace::layers_label(ex.provenance),
                     std::string(trace::pass_label(ex.provenance))};
    if (exchange_executions_[i] != 0) {
      const auto& c = exchange_.cost(static_cast<std::uint32_t>(i));
      named.cycles = c.cycles * exchange_executions_[i];
      named.bytes = c.total_bytes;
      s.exchange_bytes += c.total_bytes * exchange_executions_[i];
      for (std::uint32_t t = 0; t < chip_.tiles; ++t)
        s.tile_exchange_bytes[t] += c.tile_bytes[t] * exchange_executions_[i];
    }
    s.exchanges.push_back(std::move(named));
  }
  return s;
}

}  // namespace ipusim::model
