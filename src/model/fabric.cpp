// SPDX-License-Identifier: Apache-2.0
#include "ipusim/model/fabric.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <span>
#include <tuple>

#include "ipusim/cost/program_costs.hpp"
#include "ipusim/model/clock.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::model {
namespace {

// A group instance: its kind in the top byte, then (replica groups) the group size less one
// in 16 bits (k <= kMaxReplicas), the program in 16 (< kMaxIpus) and the group's index (block,
// < kMaxReplicas) in the low 24; (IPUs of a replica) the size less one in 16 bits, the stride
// less one in 16 and the first member's system IPU in the low 24.
constexpr std::uint64_t kShift = 56;
constexpr std::uint64_t kSizeShift = 40;
constexpr std::uint64_t kField = 24;
constexpr std::uint64_t kSubGroup = 5;

}  // namespace

void charge_group_step(const trace::Step& step, std::uint64_t start, const GroupTiming& t,
                       std::uint64_t times, PhaseCycles& phases, PhaseCounts& counts,
                       GroupStepCycles& by_kind) {
  const std::uint64_t arrived = std::max(start, t.barrier);
  const bool collective = step.kind == trace::StepKind::kCollective;
  const bool copy = step.kind == trace::StepKind::kGlobalExchange;
  PhaseCycles& row = collective ? by_kind.collective
                     : copy     ? by_kind.inter_ipu
                                : by_kind.external_sync;
  for (PhaseCycles* p : {&phases, &row}) {
    (*p)[PhaseKind::kWaiting] += arrived - start;
    (*p)[PhaseKind::kExternalSync] += t.synced - arrived;
    if (collective) (*p)[PhaseKind::kCollective] += t.end - t.synced;
    if (copy) (*p)[PhaseKind::kInterIpu] += t.end - t.synced;
  }
  if (arrived > start) counts[PhaseKind::kWaiting] += times;
  counts[PhaseKind::kExternalSync] += times;
  if (collective) counts[PhaseKind::kCollective] += times;
  if (copy) counts[PhaseKind::kInterIpu] += times;
}

Fabric::Fabric(sc_core::sc_module_name name, const SystemSpec& system, const trace::Trace& trace,
               bool simulate_all_replicas)
    : sc_core::sc_module(name),
      system_(system),
      trace_(trace),
      topology_(system),
      links_(topology_),
      programs_(trace.ipus_per_replica()),
      simulated_replicas_(simulate_all_replicas ? trace.replicas : 1),
      period_(clock_period(system.chip.clock)) {
  if (const std::string* v = trace::find_meta(trace.meta, "engine.sync_replicas_independently"))
    sync_replicas_independently_ = *v == "true";
  if (const std::string* v = trace::find_meta(trace.meta, "engine.single_ipu_replicas"))
    single_ipu_replicas_ = *v == "true";
  {
    std::vector<std::uint32_t> all(static_cast<std::size_t>(trace.replicas) * programs_);
    for (std::uint32_t g = 0; g < all.size(); ++g) all[g] = g;
    if (all.size() <= system.ipus()) all_ipus_sync_ = topology_.sync_cycles(all);
  }
  replica_free_.assign(trace.replicas, 0);
  simulated_ipus_ = simulated_replicas_ * static_cast<std::uint32_t>(trace.ipus.size());
  has_program_.assign(programs_, false);
  for (const auto& p : trace.ipus) has_program_[p.ipu] = true;
  count_host_streamers(trace);
  const std::uint64_t needed = static_cast<std::uint64_t>(trace.replicas) * programs_;
  if (needed >= (1ull << kField))
    throw ModelError(fmt::format("the trace needs {} IPUs; the model takes fewer than {}", needed,
                                 1ull << kField));
  if (needed > system.ipus())
    throw ModelError(
        fmt::format("the trace needs {} IPUs ({} replicas x {} IPUs per replica) but {} has {}",
                    needed, trace.replicas, programs_, system.name, system.ipus()));
  for (std::size_t g = 0; g < trace.global_exchanges.size(); ++g)
    for (const auto& c : trace.global_exchanges[g].copies)
      if (std::max(c.src, c.dst) >= programs_)
        throw ModelError(fmt::format(
            "global exchange '{}' copies between IPUs {} and {}, but the replica has IPUs 0..{}",
            trace.global_exchanges[g].name, c.src, c.dst, programs_ - 1));
}

std::vector<std::uint32_t> Fabric::members(const Placement& who, trace::Group group,
                                           std::uint64_t& instance) const {
  const std::uint32_t replicas = trace_.replicas;
  std::vector<std::uint32_t> out;
  switch (group.kind) {
    case trace::GroupKind::kReplica: {
      if (group.size == 0) {
        instance = (1ull << kShift) | who.replica;
        for (std::uint32_t j = 0; j < programs_; ++j) out.push_back(who.replica * programs_ + j);
        break;
      }
      // `size` programs `stride` apart: program i's set in its block of size x stride.
      const std::uint32_t block = group.size * group.stride;
      const std::uint32_t first =
          who.replica * programs_ + who.program / block * block + who.program % group.stride;
      instance = (kSubGroup << kShift) |
                 (static_cast<std::uint64_t>(group.size - 1) << kSizeShift) |
                 (static_cast<std::uint64_t>(group.stride - 1) << kField) | first;
      for (std::uint32_t q = 0; q < group.size; ++q) out.push_back(first + q * group.stride);
      break;
    }
    case trace::GroupKind::kAll:
      instance = 2ull << kShift;
      for (std::uint32_t g = 0; g < replicas * programs_; ++g) out.push_back(g);
      break;
    case trace::GroupKind::kReplicas: {
      const std::uint32_t k = group.size == 0 ? replicas : group.size;
      const std::uint32_t block = who.replica / k;
      // The size is part of the instance: groups of 2 and of all replicas both have a block 0.
      instance = (3ull << kShift) | (static_cast<std::uint64_t>(k - 1) << kSizeShift) |
                 (static_cast<std::uint64_t>(who.program) << kField) | block;
      for (std::uint32_t q = 0; q < k; ++q)
        out.push_back((block * k + q) * programs_ + who.program);
      break;
    }
    case trace::GroupKind::kTile:
      throw std::logic_error("tile group has no members");
  }
  return out;
}

std::uint32_t Fabric::simulated_count(const std::vector<std::uint32_t>& members) const {
  return static_cast<std::uint32_t>(std::count_if(members.begin(), members.end(), [&](auto g) {
    return g / programs_ < simulated_replicas_ && has_program_[g % programs_];
  }));
}

std::string Fabric::describe(const trace::Step& step) const {
  switch (step.kind) {
    case trace::StepKind::kSync:
      return fmt::format("sync group={}", trace::group_name(step.group));
    case trace::StepKind::kGlobalExchange:
      return fmt::format("global_exchange {}", trace_.global_exchanges[step.index].name);
    case trace::StepKind::kCollective:
      return fmt::format("collective {} bytes={} group={}",
                         trace::kCollectiveOpNames[static_cast<int>(step.collective)], step.bytes,
                         trace::group_name(step.group));
    default:
      return "?";
  }
}

GroupTiming Fabric::group_step(const Placement& who, const trace::Step& step, std::uint64_t now,
                               std::uint64_t times, LoopParty* party) {
  // Everything that owns memory lives in this block and is gone before the thread waits:
  // when a model error stops the simulation while members still wait here (mismatched group
  // steps), SystemC never resumes or unwinds their threads, so anything on their stacks
  // would leak.
  std::pair<std::uint64_t, std::uint64_t> key;
  Pending* pending = nullptr;
  {
    std::uint64_t instance = 0;
    std::vector<std::uint32_t> group;
    if (step.kind == trace::StepKind::kGlobalExchange) {
      instance =
          (4ull << kShift) | (static_cast<std::uint64_t>(step.index) << kField) | who.replica;
      for (const auto& c : trace_.global_exchanges[step.index].copies)
        for (auto p : {c.src, c.dst}) group.push_back(who.replica * programs_ + p);
      std::sort(group.begin(), group.end());
      group.erase(std::unique(group.begin(), group.end()), group.end());
      if (!std::binary_search(group.begin(), group.end(), who.system_ipu))
        throw ModelError(
            fmt::format("IPU {} runs global exchange '{}' but none of its copies "
                        "involves that IPU",
                        who.program, trace_.global_exchanges[step.index].name));
    } else {
      group = members(who, step.group, instance);
    }
    const std::uint64_t seq = sequence_[{who.system_ipu, instance}]++;
    key = {instance, seq};
    Pending& p = pending_[key];
    pending = &p;
    std::string what = fmt::format("{} (x{})", describe(step), times);
    if (!p.done) {
      p.what = std::move(what);
      p.expected = simulated_count(group);
      p.times = times;
      p.done = std::make_unique<sc_core::sc_event>();
    } else if (p.what != what) {
      throw ModelError(fmt::format(
          "IPU {} reached '{}' as its group step {} in a group where IPU {} reached '{}': the "
          "programs of a group must run the same group steps in the same order",
          who.system_ipu, what, seq, p.waiting.front(), p.what));
    }
    p.waiting.push_back(who.system_ipu);
    p.parties.push_back(party);
    p.barrier = std::max(p.barrier, now);
    if (++p.arrived == p.expected) {
      // Operations started in the same cycle run in the order their last members arrive,
      // which SystemC picks; they could interact (shared links, replicas).
      tie_ = tie_ || last_start_ == now;
      last_start_ = now;
      p.timing = run(who, step, group, p.barrier, times);
      // Every simulated IPU waits here: a cut (fast_forward.hpp).
      const std::uint64_t later = p.expected == simulated_ipus_ && times == 1 ? fast_forward(p) : 0;
      p.done->notify(sc_core::sc_time::from_value(period_.value() * (p.timing.end + later - now)));
    }
  }
  sc_core::wait(*pending->done);
  const GroupTiming timing = pending->timing;
  if (--pending->arrived == 0) pending_.erase(key);
  return timing;
}

GroupTiming Fabric::run(const Placement& who, const trace::Step& step,
                        const std::vector<std::uint32_t>& group, std::uint64_t barrier,
                        std::uint64_t times) {
  // The step starts when its members have arrived and the replicas involved have ended their
  // previous group step (the wait is charged as waiting for other IPUs); with single-IPU
  // Poplar replicas an IPU's group steps wait for no other IPU's.
  const auto replicas = replicas_of(group);
  if (!single_ipu_replicas_)
    for (auto r : replicas) barrier = std::max(barrier, replica_free_[r]);
  // What the step's syncs span, and each later step of a collective's, all its phases
  // included: every IPU of the program, or of the (Poplar) replicas involved.
  const std::uint64_t domain = domain_sync(replicas, group);
  GroupTiming t;
  t.barrier = barrier;
  t.synced = barrier + domain;
  std::uint64_t end = t.synced;
  if (step.kind == trace::StepKind::kGlobalExchange) {
    std::vector<topology::Flow> flows;
    for (const auto& c : trace_.global_exchanges[step.index].copies)
      flows.push_back({who.replica * programs_ + c.src, who.replica * programs_ + c.dst, c.bytes});
    end = links_.run(flows, t.synced);
    links_idle_at_ = std::max(links_idle_at_, end);
  } else if (step.kind == trace::StepKind::kCollective) {
    // `auto` tries every method on a copy of the link schedule and runs the fastest. When no
    // earlier transfer is still on any link, each trial's duration depends only on the
    // collective itself (flows start at `max(ready, link free)` = ready), so the choice made
    // for the same collective before is the choice now: run only that method. Exact; see
    // docs/performance.md.
    trace::CollectiveMethod method = step.method;
    const bool idle = t.synced >= links_idle_at_;
    AutoKey key{step.collective, step.dtype, step.bytes, group};
    IdleKey idle_key{key, step.method, domain};
    // The same collective on idle links again: its run replayed (idle_runs_).
    if (const auto it = idle ? idle_runs_.find(idle_key) : idle_runs_.end();
        it != idle_runs_.end()) {
      links_.replay(it->second.links, t.synced);
      end = t.synced + it->second.cycles;
    } else {
      if (method == trace::CollectiveMethod::kAuto && idle) {
        if (auto a = auto_choice_.find(key); a != auto_choice_.end()) method = a->second;
      }
      std::optional<topology::LinkSchedule> before;
      if (idle) before = links_;
      const auto outcome =
          topology::run_collective(links_, system_.chip, step.collective, method, group, step.bytes,
                                   step.dtype, t.synced, domain);
      if (step.method == trace::CollectiveMethod::kAuto && idle)
        auto_choice_.try_emplace(key, outcome.method);
      end = outcome.end;
      if (idle)
        idle_runs_.emplace(std::move(idle_key),
                           IdleRun{end - t.synced, links_.effect_since(*before, t.synced)});
    }
    links_idle_at_ = std::max(links_idle_at_, end);
  }
  // A memoised loop runs the whole step `times` times back to back.
  t.synced = barrier + (t.synced - barrier) * times;
  t.end = barrier + (end - barrier) * times;
  if (!single_ipu_replicas_)
    for (auto r : replicas) replica_free_[r] = t.end;
  return t;
}

std::uint64_t Fabric::fast_forward(const Pending& p) {
  if (std::find(p.parties.begin(), p.parties.end(), nullptr) != p.parties.end()) return 0;
  // The state at a cut is the same whatever the order in which SystemC runs the IPU threads
  // waking in the same cycle (they share nothing but the Fabric: arrival order only decides
  // which member starts the operation), unless two operations started in the same cycle.
  // Cuts are compared only across periods without that.
  if (tie_) {
    tie_ = false;
    for (auto& [nesting, search] : steady_) search.reset();
    return 0;
  }
  // The parties in system-IPU order, then the Fabric.
  std::vector<std::size_t> order(p.parties.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return p.waiting[a] < p.waiting[b]; });
  const std::uint64_t time = p.timing.end;
  std::vector<CutState> states(order.size() + 1);
  std::size_t nesting = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (!p.parties[order[k]]->cut_state(time, states[k])) return 0;
    nesting += states[k].loops.size();
  }
  cut_state(time, p, states.back());
  const auto counters = [&](std::size_t k, std::vector<std::uint64_t>& out) {
    if (k < order.size())
      p.parties[order[k]]->cut_counters(out);
    else
      cut_counters(out);
  };
  // The kernel's range, as Ipu::advance checks it.
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() / period_.value();
  auto skip = steady_[nesting].cut(time, std::move(states), counters, limit);
  if (!skip) return 0;
  const std::uint64_t periods = skip->periods, later = periods * skip->cycles;
  spdlog::info("fast-forward: {} IPUs skip {} periods of {} cycles from cycle {}", order.size(),
               periods, skip->cycles, time);
  for (std::size_t k = 0; k < order.size(); ++k)
    p.parties[order[k]]->skip(periods, skip->cycles, std::move(skip->counters[k]),
                              skip->iterations[k]);
  // The Fabric's own state, relative to the later release, and its statistics.
  const std::vector<std::uint64_t>& mine = skip->counters.back();
  std::size_t c = 0;
  for (auto& [key, seq] : sequence_) seq += periods * mine[c++];
  links_.skip(periods, skip->cycles, std::span(mine).subspan(c));
  for (auto& r : replica_free_) r += later;
  links_idle_at_ += later;
  return later;
}

void Fabric::cut_state(std::uint64_t time, const Pending& p, CutState& out) const {
  // Times before the cut count as the cut's own: every later operation starts after it.
  const auto after = [time](std::uint64_t t) { return t > time ? t - time : 0; };
  auto& r = out.relative;
  r.push_back(pending_.size());
  r.push_back(time - p.timing.barrier);
  r.push_back(time - p.timing.synced);
  r.push_back(after(links_idle_at_));
  for (const auto f : replica_free_) r.push_back(after(f));
  for (const auto& [key, seq] : sequence_) {
    r.push_back(key.first);
    r.push_back(key.second);
  }
  links_.busy_after(time, r);
}

void Fabric::cut_counters(std::vector<std::uint64_t>& out) const {
  for (const auto& [key, seq] : sequence_) out.push_back(seq);
  links_.use_counters(out);
}

std::vector<std::uint32_t> Fabric::replicas_of(const std::vector<std::uint32_t>& group) const {
  std::vector<std::uint32_t> out;
  for (auto g : group) out.push_back(g / programs_);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::uint64_t Fabric::domain_sync(const std::vector<std::uint32_t>& replicas,
                                  const std::vector<std::uint32_t>& group) const {
  if (!sync_replicas_independently_) return all_ipus_sync_;
  if (single_ipu_replicas_) return topology_.sync_cycles(group);
  std::vector<std::uint32_t> ipus;
  for (auto r : replicas)
    for (std::uint32_t j = 0; j < programs_; ++j) ipus.push_back(r * programs_ + j);
  return topology_.sync_cycles(ipus);
}

namespace {

// Whether `steps` move data between `memory` (the host's, or Streaming Memory) and the IPU.
bool has_transfer(const std::vector<trace::Step>& steps, trace::HostMemory memory) {
  return std::any_of(steps.begin(), steps.end(), [&](const trace::Step& s) {
    return (s.kind == trace::StepKind::kHost && s.memory == memory) || has_transfer(s.body, memory);
  });
}

}  // namespace

void Fabric::count_host_streamers(const trace::Trace& trace) {
  // The IPUs of every replica whose programs have `memory` transfers, and the most of them on
  // one machine (each at least 1).
  const auto count = [&](trace::HostMemory memory) {
    std::vector<bool> streams(programs_, false);
    for (const auto& p : trace.ipus) streams[p.ipu] = has_transfer(p.steps, memory);
    std::uint32_t all = 0, most = 1;
    std::map<std::uint32_t, std::uint32_t> per_machine;
    for (std::uint32_t g = 0; g < trace.replicas * programs_; ++g)
      if (streams[g % programs_]) {
        ++all;
        most = std::max(most, ++per_machine[topology_.machine_of(g)]);
      }
    return std::pair{std::max<std::uint32_t>(1, all), most};
  };
  std::tie(host_streamers_, machine_host_streamers_) = count(trace::HostMemory::kHost);
  machine_ddr_streamers_ = count(trace::HostMemory::kStreaming).second;
}

std::uint64_t Fabric::host_cycles(const trace::Step& step) const {
  // A PCIe card moves host data and remote buffers (host memory: there is no Streaming
  // Memory) over the chip's own host link. Otherwise the IPUs that make host-memory transfers
  // are assumed to stream at the same time, sharing the host servers' NICs and each machine's
  // gateway host link evenly among them, and the IPUs of a machine that make Streaming Memory
  // transfers share its DDR (count_host_streamers); each IPU also has its own PCIe link to the
  // gateway.
  const auto& m = system_.machine;
  if (m.host_attach == HostAttach::kPcie)
    return cost::host_transfer_cycles(system_.chip, step, system_.chip.host.bandwidth,
                                      system_.chip.host.latency);
  double rate = m.pcie_bandwidth.bytes_per_second;
  double latency = m.gateway_latency.seconds;
  if (step.memory == trace::HostMemory::kStreaming) {
    rate = std::min(rate, m.ddr_bandwidth.bytes_per_second / machine_ddr_streamers_);
  } else {
    rate = std::min({rate, m.host_link_bandwidth.bytes_per_second / machine_host_streamers_,
                     system_.host_servers * system_.fabric.host_server_bandwidth.bytes_per_second /
                         host_streamers_});
    latency += m.host_latency.seconds;
  }
  return cost::host_transfer_cycles(system_.chip, step, Bandwidth{rate}, Duration{latency});
}

std::vector<std::string> Fabric::stuck() const {
  std::vector<std::string> out;
  for (const auto& [key, p] : pending_) {
    if (p.arrived >= p.expected) continue;
    std::string ipus;
    for (auto g : p.waiting) ipus += fmt::format("{}{}", ipus.empty() ? "" : ", ", g);
    out.push_back(
        fmt::format("'{}': {} of {} IPUs arrived (IPU {})", p.what, p.arrived, p.expected, ipus));
  }
  return out;
}

std::vector<LinkUse> Fabric::link_use() const {
  std::vector<LinkUse> out;
  const auto& use = links_.use();
  for (topology::Channel c = 0; c < use.size(); ++c)
    if (use[c].bytes > 0)
      out.push_back({topology_.channel_name(c), use[c].bytes, use[c].busy_cycles});
  std::stable_sort(out.begin(), out.end(), [](const LinkUse& a, const LinkUse& b) {
    return a.busy_cycles > b.busy_cycles;
  });
  return out;
}

}  // namespace ipusim::model
