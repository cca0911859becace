// SPDX-License-Identifier: Apache-2.0
#include "ipusim/topology/link_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::topology {

LinkSchedule::LinkSchedule(const Topology& topology) : topology_(topology) {
  const Frequency clock = topology.system().chip.clock;
  for (const Link& l : topology.links()) {
    rate_.push_back(l.bytes_per_second / clock.hz);
    latency_.push_back((Duration{l.latency_seconds} * clock).count);
  }
  free_at_.assign(topology.channels(), 0);
  use_.assign(topology.channels(), ChannelUse{});
}

std::uint64_t LinkSchedule::run(std::span<const Flow> flows, std::uint64_t ready) {
  std::uint64_t end = ready;
  for (const Flow& f : flows) {
    if (f.src == f.dst || f.bytes == 0) continue;
    topology_.route(f.src, f.dst, route_);
    const auto& route = route_;
    std::uint64_t start = ready;
    double slowest = std::numeric_limits<double>::max();
    std::uint64_t latency = 0;
    for (Channel c : route) {
      start = std::max(start, free_at_[c]);
      slowest = std::min(slowest, rate(c));
      latency += this->latency(c);
    }
    const auto cycles = [&](double rate) {
      return (Bytes{f.bytes} / BytesPerCycle{rate}).count;
    };
    // Each channel is busy for the bytes at its own rate; the flow arrives at the pace of the
    // slowest channel of its route.
    for (Channel c : route) {
      const std::uint64_t busy = cycles(rate(c));
      free_at_[c] = start + busy;
      use_[c].bytes += f.bytes;
      use_[c].busy_cycles += busy;
    }
    end = std::max(end, start + cycles(slowest) + latency);
  }
  return end;
}

std::uint64_t reduce_cycles(const ChipSpec& chip, std::uint64_t bytes, std::uint64_t inputs,
                            trace::DType dtype) {
  const std::uint64_t elements = ceil_div(bytes, trace::dtype_bytes(dtype));
  if (elements == 0 || inputs < 2) return 0;
  const std::uint64_t per_tile = ceil_div(elements, chip.tiles);
  const auto vertex = inputs == 2 ? cost::binary(chip, trace::Op::kAdd, dtype, per_tile)
                                  : cost::reduce(chip, trace::Op::kAdd, dtype, dtype, per_tile, inputs);
  return vertex.cycles + chip.runtime.compute_set_overhead.count + chip.sync.internal_latency.count;
}

namespace {

using trace::CollectiveMethod;
using trace::CollectiveOp;

// One ring pass: members in ring order, sending `chunk` bytes to their successor (or
// predecessor when reversed) at each step.
struct Pass {
  std::vector<std::uint32_t> order;
  bool reverse = false;
  std::uint64_t chunk = 0;
};

class Collective {
 public:
  Collective(LinkSchedule& links, const ChipSpec& chip, trace::DType dtype)
      : links_(links), chip_(chip), dtype_(dtype) {
    const SystemSpec& sys = links.topology().system();
    hop_sync_ = (Duration{2.0 * sys.fabric.sync_hop_latency.seconds} * chip.clock).count;
  }

  // `steps` ring steps of every pass at once; with `reduce`, each step ends with an on-chip
  // reduction of the received chunk. Each step also pays a neighbour sync.
  std::uint64_t ring_steps(const std::vector<Pass>& passes, std::size_t steps, bool reduce,
                           std::uint64_t t) {
    std::vector<Flow> flows;
    for (std::size_t s = 0; s < steps; ++s) {
      flows.clear();
      std::uint64_t chunk = 0;
      for (const Pass& p : passes) {
        const std::size_t n = p.order.size();
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t next = p.reverse ? (i + n - 1) % n : (i + 1) % n;
          flows.push_back({p.order[i], p.order[next], p.chunk});
        }
        chunk = std::max(chunk, p.chunk);
      }
      t = links_.run(flows, t);
      if (reduce) t += reduce_cycles(chip_, chunk, 2, dtype_);
      t += hop_sync_;
    }
    return t;
  }

  // Reduce-scatter or all-gather of `bytes` per member over rings chosen by `method`.
  std::uint64_t ring_phase(const std::vector<std::vector<std::uint32_t>>& groups,
                           CollectiveMethod method, std::uint64_t bytes, bool reduce,
                           std::uint64_t t) {
    std::vector<Pass> passes;
    std::size_t n = 0;
    for (const auto& members : groups) {
      n = std::max(n, members.size());
      const std::vector<std::uint32_t> ring = links_.topology().ring(members);
      const std::uint64_t k = members.size();
      switch (method) {
        case CollectiveMethod::kBidirectionalRing:
          passes.push_back({ring, false, ceil_div(bytes, 2 * k)});
          passes.push_back({ring, true, ceil_div(bytes, 2 * k)});
          break;
        case CollectiveMethod::kQuadRing: {
          // A second ring in plain IPU order beside the GCL ring, each used both ways.
          auto plain = members;
          std::sort(plain.begin(), plain.end());
          for (const auto& order : {ring, plain}) {
            passes.push_back({order, false, ceil_div(bytes, 4 * k)});
            passes.push_back({order, true, ceil_div(bytes, 4 * k)});
          }
          break;
        }
        default:
          passes.push_back({ring, false, ceil_div(bytes, k)});
      }
    }
    return n < 2 ? t : ring_steps(passes, n - 1, reduce, t);
  }

  // Every member sends `bytes` (or a 1/n chunk) to every other member at once. The n(n-1)
  // flows are scheduled one sender at a time, in the same order as one list: flows ready at
  // the same cycle are independent of how they are split into calls, so memory stays linear.
  std::uint64_t direct(const std::vector<std::uint32_t>& members, std::uint64_t bytes,
                       std::uint64_t t) {
    std::vector<Flow> flows;
    std::uint64_t end = t;
    for (auto a : members) {
      flows.clear();
      for (auto b : members)
        if (a != b) flows.push_back({a, b, bytes});
      end = std::max(end, links_.run(flows, t));
    }
    return end + hop_sync_;
  }

  std::uint64_t flat(CollectiveOp op, CollectiveMethod method,
                     const std::vector<std::uint32_t>& members, std::uint64_t bytes,
                     std::uint64_t t) {
    const std::uint64_t n = members.size();
    if (n < 2) return t;
    const std::vector<std::vector<std::uint32_t>> one{members};
    if (method == CollectiveMethod::kBroadcastReduce) {
      switch (op) {
        case CollectiveOp::kAllReduce:
          return direct(members, bytes, t) + reduce_cycles(chip_, bytes, n, dtype_);
        case CollectiveOp::kReduceScatter:
          return direct(members, ceil_div(bytes, n), t) +
                 reduce_cycles(chip_, ceil_div(bytes, n), n, dtype_);
        case CollectiveOp::kAllGather:
          return direct(members, ceil_div(bytes, n), t);
        case CollectiveOp::kBroadcast: {
          std::vector<Flow> flows;
          for (std::size_t i = 1; i < n; ++i) flows.push_back({members[0], members[i], bytes});
          return links_.run(flows, t) + hop_sync_;
        }
      }
    }
    switch (op) {
      case CollectiveOp::kAllReduce:
        t = ring_phase(one, method, bytes, true, t);
        return ring_phase(one, method, bytes, false, t);
      case CollectiveOp::kReduceScatter:
        return ring_phase(one, method, bytes, true, t);
      case CollectiveOp::kAllGather:
        return ring_phase(one, method, bytes, false, t);
      case CollectiveOp::kBroadcast: {
        // Scatter 1/n of the tensor from the root to each member, then all-gather.
        std::vector<Flow> flows;
        for (std::size_t i = 1; i < n; ++i) flows.push_back({members[0], members[i], ceil_div(bytes, n)});
        t = links_.run(flows, t) + hop_sync_;
        return ring_phase(one, method, bytes, false, t);
      }
    }
    return t;
  }

  // All-reduce across racks: reduce-scatter inside each rack, all-reduce of the shards
  // between racks (over GW-Links), all-gather inside each rack.
  std::uint64_t hierarchical(CollectiveMethod method,
                             const std::vector<std::vector<std::uint32_t>>& per_rack,
                             std::uint64_t bytes, std::uint64_t t) {
    const std::size_t k = per_rack.front().size();
    t = ring_phase(per_rack, method, bytes, true, t);
    std::vector<std::vector<std::uint32_t>> across(k);
    for (std::size_t j = 0; j < k; ++j)
      for (const auto& rack : per_rack) across[j].push_back(links_.topology().ring(rack)[j]);
    const std::uint64_t shard = ceil_div(bytes, k);
    t = ring_phase(across, CollectiveMethod::kRing, shard, true, t);
    t = ring_phase(across, CollectiveMethod::kRing, shard, false, t);
    return ring_phase(per_rack, method, bytes, false, t);
  }

 private:
  LinkSchedule& links_;
  const ChipSpec& chip_;
  trace::DType dtype_;
  std::uint64_t hop_sync_ = 0;
};

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

CollectiveOutcome run_method(LinkSchedule& links, const ChipSpec& chip, CollectiveOp op,
                             CollectiveMethod method, std::span<const std::uint32_t> members,
                             std::uint64_t bytes, trace::DType dtype, std::uint64_t ready) {
  Collective c(links, chip, dtype);
  const std::vector<std::uint32_t> list(members.begin(), members.end());
  const auto racks = split_by_rack(links.topology(), members);
  CollectiveOutcome out;
  out.method = method;
  if (op == CollectiveOp::kAllReduce && !racks.empty() && racks.front().size() > 1 &&
      method != CollectiveMethod::kBroadcastReduce) {
    out.hierarchical = true;
    out.end = c.hierarchical(method, racks, bytes, ready);
  } else {
    out.end = c.flat(op, method, list, bytes, ready);
  }
  return out;
}

}  // namespace

CollectiveOutcome run_collective(LinkSchedule& links, const ChipSpec& chip, CollectiveOp op,
                                 CollectiveMethod method, std::span<const std::uint32_t> members,
                                 std::uint64_t tensor_bytes, trace::DType dtype,
                                 std::uint64_t ready) {
  if (method != CollectiveMethod::kAuto)
    return run_method(links, chip, op, method, members, tensor_bytes, dtype, ready);
  // auto: try each method on a copy of the link state and run the fastest for real.
  CollectiveMethod best = CollectiveMethod::kRing;
  std::uint64_t best_end = std::numeric_limits<std::uint64_t>::max();
  for (auto m : {CollectiveMethod::kRing, CollectiveMethod::kBidirectionalRing,
                 CollectiveMethod::kQuadRing, CollectiveMethod::kBroadcastReduce}) {
    LinkSchedule trial = links;
    const auto outcome = run_method(trial, chip, op, m, members, tensor_bytes, dtype, ready);
    if (outcome.end < best_end) {
      best_end = outcome.end;
      best = m;
    }
  }
  return run_method(links, chip, op, best, members, tensor_bytes, dtype, ready);
}

}  // namespace ipusim::topology
