// SPDX-License-Identifier: Apache-2.0
// The collective-algorithm registry, the steps algorithms are made of, and run_collective:
// `auto` and the hierarchical composition over racks (include/ipusim/topology/collective.hpp).
#include "ipusim/topology/collective.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <span>

#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::topology {

using trace::CollectiveMethod;
using trace::CollectiveOp;

const std::vector<const CollectiveAlgorithm*>& collective_algorithms() {
  static const std::vector<const CollectiveAlgorithm*> registry{
      &ring_algorithm(), &bidirectional_ring_algorithm(), &quad_ring_algorithm(),
      &broadcast_reduce_algorithm()};
  return registry;
}

const CollectiveAlgorithm& collective_algorithm(CollectiveMethod method) {
  for (const auto* a : collective_algorithms())
    if (a->method() == method) return *a;
  throw ModelError(fmt::format("no collective algorithm is registered for method {}",
                               trace::kCollectiveMethodNames[static_cast<std::size_t>(method)]));
}

CollectiveContext::CollectiveContext(LinkSchedule& links, const ChipSpec& chip, trace::DType dtype,
                                     std::optional<std::uint64_t> domain_sync)
    : links_(links), chip_(chip), dtype_(dtype), domain_sync_(domain_sync) {}

std::uint64_t CollectiveContext::group_sync(std::span<const std::uint32_t> members) const {
  return domain_sync_ ? *domain_sync_ : links_.topology().sync_cycles(members);
}

std::uint64_t CollectiveContext::begin_step_with(std::uint64_t t, std::uint64_t sync) {
  if (!started_) {
    started_ = true;
    return t;
  }
  return t + sync;
}

std::uint64_t CollectiveContext::begin_step(std::uint64_t t,
                                            std::span<const std::uint32_t> members) {
  return begin_step_with(t, started_ ? group_sync(members) : 0);
}

std::uint64_t CollectiveContext::reduce(std::uint64_t bytes, std::uint64_t inputs) const {
  return reduce_cycles(chip_, bytes, inputs, dtype_);
}

std::uint64_t CollectiveContext::ring_steps(const std::vector<RingPass>& passes,
                                            std::span<const std::vector<std::uint32_t>> groups,
                                            std::size_t steps, bool reduce, std::uint64_t t) {
  // The groups sync at once each step, which waits for the slowest; the same every step.
  std::uint64_t sync = 0;
  for (const auto& g : groups) sync = std::max(sync, group_sync(g));
  // Every step sends the same flows, so their routes are found once.
  std::vector<Flow> flows;
  std::uint64_t chunk = 0;
  for (const RingPass& p : passes) {
    const std::size_t n = p.order.size();
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t next = p.reverse ? (i + n - 1) % n : (i + 1) % n;
      flows.push_back({p.order[i], p.order[next], p.chunk});
    }
    chunk = std::max(chunk, p.chunk);
  }
  std::vector<std::vector<Channel>> routes(flows.size());
  for (std::size_t i = 0; i < flows.size() && steps > 0; ++i)
    links_.topology().route(flows[i].src, flows[i].dst, routes[i]);
  const bool any = std::any_of(flows.begin(), flows.end(),
                               [](const Flow& f) { return f.src != f.dst && f.bytes != 0; });
  for (std::size_t s = 0; s < steps; ++s) {
    if (s == 1 && steps > 2) {
      // From the second step on, each step starts a sync after the one before ended, when
      // every channel of the flows' routes is free again (a flow frees its channels by the
      // time it arrives), and the first step's earlier traffic is behind them: every later
      // step does exactly what the second does, shifted (LinkSchedule::replay).
      const LinkSchedule before = links_;
      const std::uint64_t start = begin_step_with(t, sync);
      const std::uint64_t arrived = links_.run(flows, routes, start);
      const LinkSchedule::Effect effect = links_.effect_since(before, start);
      const std::uint64_t step = arrived - start + (reduce ? this->reduce(chunk, 2) : 0);
      const std::uint64_t rest = steps - 2, period = step + sync;
      links_.replay(effect, start + period, period, rest);
      if (any) links_.check_abort(start + rest * period + (arrived - start));
      return start + rest * period + step;
    }
    t = links_.run(flows, routes, begin_step_with(t, sync));
    if (reduce) t += this->reduce(chunk, 2);
  }
  return t;
}

std::uint64_t CollectiveContext::ring_phase(const std::vector<std::vector<std::uint32_t>>& groups,
                                            const CollectiveAlgorithm& algorithm,
                                            std::uint64_t bytes, bool reduce, std::uint64_t t) {
  std::vector<RingPass> passes;
  std::size_t n = 0;
  for (const auto& members : groups) {
    n = std::max(n, members.size());
    for (auto& p : algorithm.passes(members, links_.topology().ring(members), bytes))
      passes.push_back(std::move(p));
  }
  return n < 2 ? t : ring_steps(passes, groups, n - 1, reduce, t);
}

// The n(n-1) flows are scheduled one sender at a time, in the same order as one list: flows
// ready at the same cycle are independent of how they are split into calls, so memory stays
// linear.
std::uint64_t CollectiveContext::direct(const std::vector<std::uint32_t>& members,
                                        std::uint64_t bytes, std::uint64_t t) {
  std::vector<Flow> flows;
  t = begin_step(t, members);
  std::uint64_t end = t;
  for (auto a : members) {
    flows.clear();
    for (auto b : members)
      if (a != b) flows.push_back({a, b, bytes});
    end = std::max(end, links_.run(flows, t));
  }
  return end;
}

std::uint64_t RingAlgorithm::run(CollectiveContext& c, CollectiveOp op,
                                 const std::vector<std::uint32_t>& members, std::uint64_t bytes,
                                 std::uint64_t t) const {
  const std::vector<std::vector<std::uint32_t>> one{members};
  switch (op) {
    case CollectiveOp::kAllReduce:
      t = c.ring_phase(one, *this, bytes, true, t);
      return c.ring_phase(one, *this, bytes, false, t);
    case CollectiveOp::kReduceScatter:
      return c.ring_phase(one, *this, bytes, true, t);
    case CollectiveOp::kAllGather:
      return c.ring_phase(one, *this, bytes, false, t);
    case CollectiveOp::kBroadcast: {
      // Scatter 1/n of the tensor from the root to each member, then all-gather.
      const std::uint64_t n = members.size();
      std::vector<Flow> flows;
      for (std::size_t i = 1; i < n; ++i)
        flows.push_back({members[0], members[i], ceil_div(bytes, n)});
      t = c.links().run(flows, c.begin_step(t, members));
      return c.ring_phase(one, *this, bytes, false, t);
    }
  }
  return t;
}

namespace {

// Whether `a` lays out ring passes (and so composes hierarchically over racks).
bool ring_based(const CollectiveAlgorithm& a) {
  const std::vector<std::uint32_t> two{0, 1};
  return !a.passes(two, two, 2).empty();
}

// Members grouped by rack, if they span several racks with the same count in each.
std::vector<std::vector<std::uint32_t>> split_by_rack(const Topology& topo,
                                                      std::span<const std::uint32_t> members) {
  std::map<std::uint32_t, std::vector<std::uint32_t>> racks;
  for (auto m : members) racks[topo.rack_of(m)].push_back(m);
  std::vector<std::vector<std::uint32_t>> out;
  if (racks.size() < 2) return out;
  for (auto& [rack, list] : racks) {
    if (!out.empty() && list.size() != out.front().size()) return {};
    out.push_back(std::move(list));
  }
  return out;
}

// A collective across racks, as GCL's three-phase collectives over several racks: for an
// all-reduce, reduce-scatter inside each rack with `algorithm`, ring all-reduce of the shards
// between racks (over GW-Links), all-gather inside each rack; a reduce-scatter stops after
// reducing the shards between racks, and an all-gather starts by gathering them there.
std::uint64_t hierarchical(CollectiveContext& c, const CollectiveAlgorithm& algorithm,
                           CollectiveOp op, const std::vector<std::vector<std::uint32_t>>& per_rack,
                           std::uint64_t bytes, std::uint64_t t) {
  const std::size_t k = per_rack.front().size();
  const bool reduce = op != CollectiveOp::kAllGather, gather = op != CollectiveOp::kReduceScatter;
  if (reduce) t = c.ring_phase(per_rack, algorithm, bytes, true, t);
  std::vector<std::vector<std::uint32_t>> rings;  // each rack's ring order, computed once
  for (const auto& rack : per_rack) rings.push_back(c.links().topology().ring(rack));
  std::vector<std::vector<std::uint32_t>> across(k);
  for (std::size_t j = 0; j < k; ++j)
    for (const auto& ring : rings) across[j].push_back(ring[j]);
  const std::uint64_t shard = ceil_div(bytes, k);
  if (reduce) t = c.ring_phase(across, ring_algorithm(), shard, true, t);
  if (gather) t = c.ring_phase(across, ring_algorithm(), shard, false, t);
  return gather ? c.ring_phase(per_rack, algorithm, bytes, false, t) : t;
}

CollectiveOutcome run_with(LinkSchedule& links, const ChipSpec& chip, CollectiveOp op,
                           const CollectiveAlgorithm& algorithm,
                           std::span<const std::uint32_t> members, std::uint64_t bytes,
                           trace::DType dtype, std::uint64_t ready,
                           std::optional<std::uint64_t> domain_sync) {
  CollectiveContext c(links, chip, dtype, domain_sync);
  const std::vector<std::uint32_t> list(members.begin(), members.end());
  const auto racks = split_by_rack(links.topology(), members);
  CollectiveOutcome out;
  out.method = algorithm.method();
  if (op != CollectiveOp::kBroadcast && !racks.empty() && racks.front().size() > 1 &&
      ring_based(algorithm)) {
    out.hierarchical = true;
    out.end = hierarchical(c, algorithm, op, racks, bytes, ready);
  } else {
    out.end = list.size() < 2 ? ready : algorithm.run(c, op, list, bytes, ready);
  }
  return out;
}

}  // namespace

CollectiveOutcome run_collective(LinkSchedule& links, const ChipSpec& chip, CollectiveOp op,
                                 CollectiveMethod method, std::span<const std::uint32_t> members,
                                 std::uint64_t tensor_bytes, trace::DType dtype,
                                 std::uint64_t ready, std::optional<std::uint64_t> domain_sync) {
  if (method != CollectiveMethod::kAuto)
    return run_with(links, chip, op, collective_algorithm(method), members, tensor_bytes, dtype,
                    ready, domain_sync);
  // auto, as GCL's: a collective of at most fabric.gcl.max_broadcast_size bytes x members
  // is broadcast (every member sends to every other in one step, so the latency is paid
  // once); a larger one runs the fastest ring-based method.
  const std::uint64_t broadcast_limit =
      links.topology().system().fabric.gcl_max_broadcast_size.count;
  const bool broadcast = members.size() * tensor_bytes <= broadcast_limit;
  std::vector<const CollectiveAlgorithm*> candidates;
  for (const auto* a : collective_algorithms())
    if (ring_based(*a) != broadcast) candidates.push_back(a);
  if (candidates.empty()) candidates = collective_algorithms();
  // Try each candidate on a copy of the link state and keep the fastest (the first of
  // equals). A trial stops once one of its flows arrives no earlier than the best end so far:
  // it can only end later, so it cannot be chosen. Running the chosen algorithm again on the
  // real state would give the same outcome and the same state (the schedule is
  // deterministic), so the best trial's state becomes the real one.
  const CollectiveAlgorithm* best = candidates.front();
  std::uint64_t best_end = std::numeric_limits<std::uint64_t>::max();
  std::optional<LinkSchedule> best_links;
  CollectiveOutcome best_outcome;
  for (const auto* a : candidates) {
    LinkSchedule trial = links;
    if (best_links) trial.abort_at(best_end);
    CollectiveOutcome outcome;
    try {
      outcome = run_with(trial, chip, op, *a, members, tensor_bytes, dtype, ready, domain_sync);
    } catch (const LinkSchedule::Exceeded&) {
      continue;
    }
    if (outcome.end < best_end) {
      best_end = outcome.end;
      best = a;
      best_outcome = outcome;
      best_links = std::move(trial);
    }
  }
  if (!best_links)
    return run_with(links, chip, op, *best, members, tensor_bytes, dtype, ready, domain_sync);
  links = std::move(*best_links);
  links.never_abort();
  return best_outcome;
}

}  // namespace ipusim::topology
