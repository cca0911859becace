// SPDX-License-Identifier: Apache-2.0
#include "ipusim/model/reference_ipu.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/model/clock.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::model {
namespace {

// Each tile thread only costs its own share of a phase: a small stack is plenty and keeps
// 1,472 threads per IPU cheap.
constexpr std::size_t kTileStackBytes = 128 * 1024;

std::uint64_t column_of(const ChipSpec& chip, std::uint32_t tile) {
  return tile / chip.exchange.tiles_per_column;
}

std::uint64_t column_distance(const ChipSpec& chip, trace::TileRange a, trace::TileRange b) {
  const std::int64_t a0 = static_cast<std::int64_t>(column_of(chip, a.first));
  const std::int64_t a1 = static_cast<std::int64_t>(column_of(chip, a.last));
  const std::int64_t b0 = static_cast<std::int64_t>(column_of(chip, b.first));
  const std::int64_t b1 = static_cast<std::int64_t>(column_of(chip, b.last));
  return static_cast<std::uint64_t>(std::max<std::int64_t>({b1 - a0, a1 - b0, 0}));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ReferenceTile
// ---------------------------------------------------------------------------------------------

ReferenceTile::ReferenceTile(sc_core::sc_module_name name, std::uint32_t index, ReferenceIpu& ipu)
    : sc_core::sc_module(name), index_(index), ipu_(ipu) {
  SC_THREAD(run);
  set_stack_size(kTileStackBytes);
}

void ReferenceTile::run() {
  for (;;) {
    sc_core::wait(ipu_.start_);
    std::uint64_t cycles = 0;
    std::uint64_t distance = 0;
    try {
      switch (ipu_.phase_) {
        case ReferenceIpu::Phase::kCompute:
          cycles = compute_phase(ipu_.phase_index_);
          break;
        case ReferenceIpu::Phase::kExchange: {
          cycles = exchange_phase(ipu_.phase_index_);
          // The largest column distance of the transfers this tile sends.
          const auto& ex = ipu_.program_.exchanges[ipu_.phase_index_];
          auto [lo, hi] = std::equal_range(transfers.begin(), transfers.end(),
                                           TransferEntry{ipu_.phase_index_, 0, false, false},
                                           [](const TransferEntry& a, const TransferEntry& b) {
                                             return a.exchange < b.exchange;
                                           });
          for (auto it = lo; it != hi; ++it) {
            if (!it->sends) continue;
            const auto& tr = ex.transfers[it->transfer];
            for (const auto& d : ex.destinations(tr))
              distance = std::max(distance, column_distance(ipu_.chip_, tr.src, d));
          }
          break;
        }
        case ReferenceIpu::Phase::kSync:
          break;  // arriving at the barrier takes no time of its own
      }
      ipu_.check_time(cycles);
    } catch (...) {
      ipu_.tile_failed(std::current_exception());
      return;
    }
    if (cycles > 0) sc_core::wait(sc_core::sc_time::from_value(ipu_.period_.value() * cycles));
    ipu_.tile_done(cycles, distance);
  }
}

std::uint64_t ReferenceTile::compute_phase(std::uint32_t compute_set) {
  const auto& cs = ipu_.program_.compute_sets[compute_set];
  auto [lo, hi] = std::equal_range(
      vertices.begin(), vertices.end(), VertexEntry{compute_set, 0},
      [](const VertexEntry& a, const VertexEntry& b) { return a.compute_set < b.compute_set; });
  std::uint64_t cycles = 0;
  for (auto it = lo; it != hi; ++it) {
    const cost::VertexCost vc = cost::vertex_cost(ipu_.chip_, cs.vertices[it->vertex]);
    cycles += vc.cycles;
    flops_ += vc.flops;
  }
  // A tile whose vertices all cost nothing is idle; otherwise it also runs the compute set's
  // control code.
  if (cycles > 0) cycles += ipu_.chip_.runtime.compute_set_overhead.count;
  compute_cycles_ += cycles;
  return cycles;
}

std::uint64_t ReferenceTile::exchange_phase(std::uint32_t exchange) {
  const ChipSpec& chip = ipu_.chip_;
  const auto& ex = ipu_.program_.exchanges[exchange];
  const std::uint32_t n = chip.tiles;
  const std::uint32_t group = chip.exchange.tiles_per_shared_bus;
  const double rate = chip.exchange.bytes_per_cycle.value;
  const std::uint32_t t = index_;
  const std::uint32_t g0 = t - t % group;

  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  double receive_cycles = 0.0;
  auto [lo, hi] = std::equal_range(
      transfers.begin(), transfers.end(), TransferEntry{exchange, 0, false, false},
      [](const TransferEntry& a, const TransferEntry& b) { return a.exchange < b.exchange; });
  for (auto it = lo; it != hi; ++it) {
    const auto& tr = ex.transfers[it->transfer];
    const auto dsts = ex.destinations(tr);
    const auto in_dsts = [&](std::uint32_t tile) {
      return std::any_of(dsts.begin(), dsts.end(), [&](auto d) { return d.contains(tile); });
    };
    if (tr.mode == trace::TransferMode::kPersonalised) {
      // A distinct block to every destination but itself; one from every source but itself.
      if (it->sends) {
        std::uint64_t dst_count = 0;
        for (const auto& d : dsts) dst_count += d.size();
        sent += tr.bytes * (dst_count - (in_dsts(t) ? 1 : 0));
      }
      if (it->receives) {
        const std::uint64_t senders = tr.src.size() - (tr.src.contains(t) ? 1 : 0);
        receive_cycles += static_cast<double>(tr.bytes * senders) / rate;
        received += tr.bytes * senders;
      }
      continue;
    }
    // Multicast: the tile sends its data once; as a destination it receives every other
    // source's data, at the super-tile rate when its whole group receives that source.
    if (it->sends) sent += tr.bytes;
    if (!it->receives) continue;
    bool group_receives = g0 + group <= n;
    for (std::uint32_t g = g0; group_receives && g < g0 + group; ++g) group_receives = in_dsts(g);
    for (std::uint32_t s = tr.src.first; s <= tr.src.last; ++s) {
      if (s == t) continue;
      const bool whole_group = group_receives && !(s >= g0 && s < g0 + group);
      receive_cycles += static_cast<double>(tr.bytes) / (rate * (whole_group ? group : 1));
      received += tr.bytes;
    }
  }
  exchange_bytes_ += sent + received;
  received_bytes_ += received;
  const double busy = std::max(static_cast<double>(sent) / rate, receive_cycles);
  return ceil_cycles(busy).count;
}

// ---------------------------------------------------------------------------------------------
// ReferenceIpu
// ---------------------------------------------------------------------------------------------

namespace {
trace::IpuProgram expanded_program(const trace::IpuProgram& program) {
  trace::IpuProgram out;
  out.ipu = program.ipu;
  out.tensors = program.tensors;
  out.steps = program.steps;
  for (const auto& cs : program.compute_sets) out.compute_sets.push_back(trace::expanded(cs));
  for (const auto& ex : program.exchanges) out.exchanges.push_back(trace::expanded(ex));
  return out;
}
}  // namespace

ReferenceIpu::ReferenceIpu(sc_core::sc_module_name name, const ChipSpec& chip,
                           const trace::IpuProgram& program, Placement placement, Fabric* fabric)
    : IpuModule(name),
      chip_(chip),
      expanded_(expanded_program(program)),
      program_(expanded_),
      placement_(placement),
      fabric_(fabric),
      period_(clock_period(chip.clock)),
      memory_(cost::memory_map(chip, program)) {
  cost::check_memory(chip, program, memory_);
  tiles_.reserve(chip.tiles);
  for (std::uint32_t t = 0; t < chip.tiles; ++t)
    tiles_.push_back(
        std::make_unique<ReferenceTile>(fmt::format("tile_{:04d}", t).c_str(), t, *this));
  // Load each tile's slice of the program.
  for (std::uint32_t c = 0; c < program_.compute_sets.size(); ++c) {
    const auto& vertices = program_.compute_sets[c].vertices;
    for (std::uint32_t v = 0; v < vertices.size(); ++v)
      for (std::uint32_t t = vertices[v].tiles.first; t <= vertices[v].tiles.last; ++t)
        tiles_[t]->vertices.push_back({c, v});
  }
  for (std::uint32_t e = 0; e < program_.exchanges.size(); ++e) {
    const auto& ex = program_.exchanges[e];
    for (std::uint32_t i = 0; i < ex.transfers.size(); ++i) {
      const auto& tr = ex.transfers[i];
      const auto entry = [&](std::uint32_t t) -> ReferenceTile::TransferEntry& {
        auto& list = tiles_[t]->transfers;
        if (list.empty() || list.back().exchange != e || list.back().transfer != i)
          list.push_back({e, i, false, false});
        return list.back();
      };
      for (std::uint32_t s = tr.src.first; s <= tr.src.last; ++s) entry(s).sends = true;
      for (const auto& d : ex.destinations(tr))
        for (std::uint32_t t = d.first; t <= d.last; ++t) entry(t).receives = true;
    }
  }
  // Each item's name, what it serves and what one execution does (costed here, as the fast
  // engine costs it), for the reports.
  for (const auto& cs : program.compute_sets)
    compute_sets_.push_back({cs.name, 0, 0, trace::layers_label(cs.provenance),
                             std::string(trace::pass_label(cs.provenance)),
                             cost::compute_set_cost(chip_, cs).flops, 0});
  cost::ExchangeScratch scratch;
  for (const auto& ex : program.exchanges)
    exchanges_.push_back({ex.name, 0, 0, trace::layers_label(ex.provenance),
                          std::string(trace::pass_label(ex.provenance)), 0,
                          cost::exchange_cost(chip_, ex, nullptr, scratch).total_bytes});
  SC_THREAD(run);
}

void ReferenceIpu::check_time(std::uint64_t cycles) const {
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() / period_.value();
  if (cycles > limit || now_ > limit - cycles)
    throw ModelError(fmt::format(
        "IPU {}: simulated time exceeds the kernel's range ({} cycles at {} ps per cycle)",
        program_.ipu, limit, period_.value()));
}

void ReferenceIpu::advance(std::uint64_t cycles) {
  if (cycles == 0) return;
  check_time(cycles);
  now_ += cycles;
  wait(sc_core::sc_time::from_value(period_.value() * cycles));
}

std::uint64_t ReferenceIpu::run_phase(Phase phase, std::uint32_t index) {
  phase_ = phase;
  phase_index_ = index;
  outstanding_ = static_cast<std::uint32_t>(tiles_.size());
  phase_max_cycles_ = 0;
  phase_max_distance_ = 0;
  // A delta notification: every tile thread is waiting on start_ by the next delta cycle.
  start_.notify(sc_core::SC_ZERO_TIME);
  wait(done_);
  if (error_) std::rethrow_exception(error_);
  // The slowest tile reported last, at phase start + its cycles.
  now_ += phase_max_cycles_;
  return phase_max_cycles_;
}

void ReferenceIpu::tile_done(std::uint64_t cycles, std::uint64_t column_distance) {
  phase_max_cycles_ = std::max(phase_max_cycles_, cycles);
  phase_max_distance_ = std::max(phase_max_distance_, column_distance);
  if (--outstanding_ == 0) done_.notify();
}

void ReferenceIpu::tile_failed(std::exception_ptr error) {
  if (!error_) error_ = error;
  sc_core::sc_stop();
}

void ReferenceIpu::execute(const std::vector<trace::Step>& steps) {
  for (const auto& step : steps) execute_step(step);
}

void ReferenceIpu::execute_step(const trace::Step& step) {
  switch (step.kind) {
    case trace::StepKind::kCompute: {
      const std::uint64_t cycles = run_phase(Phase::kCompute, step.index);
      auto& named = compute_sets_[step.index];
      ++named.executions;
      named.cycles += cycles;
      phases_[PhaseKind::kCompute] += cycles;
      ++counts_[PhaseKind::kCompute];
      break;
    }
    case trace::StepKind::kSync: {
      if (step.group.kind != trace::GroupKind::kTile) {
        group_step(step);
        break;
      }
      // Every tile arrives at the barrier; the sync controller releases them after its
      // latency.
      run_phase(Phase::kSync, 0);
      const std::uint64_t latency = chip_.sync.internal_latency.count;
      phases_[PhaseKind::kSync] += latency;
      ++counts_[PhaseKind::kSync];
      advance(latency);
      break;
    }
    case trace::StepKind::kExchange: {
      // Tiles move their data; then the exchange's fixed overhead and the column latency of
      // the farthest transfer.
      const std::uint64_t transfer = run_phase(Phase::kExchange, step.index);
      const std::uint64_t rest = chip_.exchange.fixed_overhead.count +
                                 phase_max_distance_ * chip_.exchange.column_hop_latency.count;
      advance(rest);
      auto& named = exchanges_[step.index];
      ++named.executions;
      named.cycles += transfer + rest;
      phases_[PhaseKind::kExchange] += transfer + rest;
      ++counts_[PhaseKind::kExchange];
      break;
    }
    case trace::StepKind::kHost: {
      const auto c = cost::host_copy_cost(chip_, step);
      const std::uint64_t cycles = fabric_ ? fabric_->host_cycles(step) : c.cycles;
      if (step.overlap) {
        // A background transfer on I/O tiles: wait for the previous one to land, then let
        // this one run behind the program.
        const std::uint64_t stall = background_until_ > now_ ? background_until_ - now_ : 0;
        phases_[PhaseKind::kHost] += stall;
        ++counts_[PhaseKind::kHost];
        host_bytes_ += c.total_bytes;
        advance(stall);
        background_until_ = now_ + cycles;
        break;
      }
      const PhaseKind kind =
          step.memory == trace::HostMemory::kStreaming ? PhaseKind::kStreaming : PhaseKind::kHost;
      phases_[kind] += cycles;
      ++counts_[kind];
      host_bytes_ += c.total_bytes;
      advance(cycles);
      break;
    }
    case trace::StepKind::kGlobalExchange:
    case trace::StepKind::kCollective:
      group_step(step);
      break;
    case trace::StepKind::kRepeat:
      for (std::uint64_t i = 0; i < step.count; ++i) execute(step.body);
      break;
  }
}

void ReferenceIpu::group_step(const trace::Step& step) {
  if (!fabric_)
    throw ModelError(fmt::format(
        "IPU {}: the program has external syncs, inter-IPU copies or collectives: run it on a "
        "system (--system configs/systems/...)",
        program_.ipu));
  const GroupTiming t = fabric_->group_step(placement_, step, now_, 1);
  // Waiting for the group's other members, then the external sync from the last arrival.
  charge_group_step(step, now_, t, 1, phases_, counts_, group_steps_);
  now_ = t.end;
}

void ReferenceIpu::run() {
  try {
    execute(program_.steps);
    // The program ends when its last background transfer has landed.
    if (background_until_ > now_) {
      phases_[PhaseKind::kHost] += background_until_ - now_;
      advance(background_until_ - now_);
    }
    finished_ = true;
  } catch (...) {
    if (!error_) error_ = std::current_exception();
    sc_core::sc_stop();
  }
}

IpuRunStats ReferenceIpu::stats() {
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
  for (const auto& tile : tiles_) {
    s.tile_compute_cycles.push_back(tile->compute_cycles());
    s.tile_exchange_bytes.push_back(tile->exchange_bytes());
    s.flops += tile->flops();
    s.exchange_bytes += tile->received_bytes();
  }
  s.compute_sets = compute_sets_;
  s.exchanges = exchanges_;
  return s;
}

}  // namespace ipusim::model
