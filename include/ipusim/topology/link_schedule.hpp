// SPDX-License-Identifier: Apache-2.0
// Link occupancy over time, and the inter-IPU operations scheduled on it: copies between IPUs,
// collectives and external syncs. Plain C++ over a Topology; the SystemC Fabric owns one
// LinkSchedule for the whole system, so operations that overlap in time contend for links.
//
// Timing rule for one flow of B bytes over a route of channels: it starts when every channel
// of the route is free (and not before it is ready), streams through the route (cut-through,
// not store-and-forward) at the slowest channel's rate and arrives
// ceil(B / slowest rate) + the sum of the channels' latencies later. Each channel is busy for
// ceil(B / its own rate) from the start, so a fast link shared by flows that are each limited
// elsewhere (e.g. a GW-Link fed by several PCIe links) serves them back to back at its own
// rate. Flows that need the same channel are served in the order they are scheduled. Time is
// in tile clock cycles.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ipusim/topology/topology.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::topology {

struct Flow {
  std::uint32_t src = 0;  // system IPU
  std::uint32_t dst = 0;  // system IPU
  std::uint64_t bytes = 0;
};

struct ChannelUse {
  std::uint64_t bytes = 0;        // payload carried
  std::uint64_t busy_cycles = 0;  // cycles held by flows
};

class LinkSchedule {
 public:
  explicit LinkSchedule(const Topology& topology);

  const Topology& topology() const { return *topology_; }
  // Schedules `flows`, all ready at cycle `ready`; returns the cycle the last one arrives
  // (`ready` if there are none).
  std::uint64_t run(std::span<const Flow> flows, std::uint64_t ready);
  // The same, with each flow's route given (routes[i] = topology().route of flows[i]): for
  // flows that run again and again, such as a ring's steps.
  std::uint64_t run(std::span<const Flow> flows, std::span<const std::vector<Channel>> routes,
                    std::uint64_t ready);
  // Rate and latency of a directed channel, in bytes per tile cycle and cycles.
  double rate(Channel c) const { return rate_[c / 2]; }
  std::uint64_t latency(Channel c) const { return latency_[c / 2]; }
  const std::vector<ChannelUse>& use() const { return use_; }
  // For fast-forward (model/fast_forward.hpp): how much longer after `time` each channel is
  // busy (0 if free by then), appended to `out`; and the schedule moved on by `periods`
  // periods of `cycles` each, each period adding `use` to the channels' use (bytes and busy
  // cycles, channel by channel, as use_counters lists them).
  void busy_after(std::uint64_t time, std::vector<std::uint64_t>& out) const;
  void use_counters(std::vector<std::uint64_t>& out) const;
  void skip(std::uint64_t periods, std::uint64_t cycles, std::span<const std::uint64_t> use);

  // What operations did to the channels since `before` (this schedule as it was), relative to
  // cycle `start`, when every channel was free by `start` then: the channels they used, when
  // each is free after `start`, and the use they added. replay() does it again `times` times,
  // the i-th from `first` + i x `period`, each at a start when every channel it uses is free
  // (`period` at least how long after its start it holds a channel): the timing rule depends
  // only on differences of cycles, so the same operations would do exactly that (for
  // collectives and ring steps that recur).
  struct Effect {
    std::vector<Channel> channels;
    std::vector<std::uint64_t> free_after;
    std::vector<ChannelUse> use;
  };
  Effect effect_since(const LinkSchedule& before, std::uint64_t start) const;
  void replay(const Effect& e, std::uint64_t first, std::uint64_t period = 0,
              std::uint64_t times = 1);
  // What run() does when a flow arrives at `end` under abort_at (throws Exceeded).
  void check_abort(std::uint64_t end) const {
    if (abort_ && end >= abort_at_) throw Exceeded{};
  }

  // For `auto`'s trials (run_collective): from now on run() throws Exceeded as soon as a flow
  // arrives at or after `cycle`. A collective ends no earlier than any of its flows, so such a
  // trial cannot beat the one that ended at `cycle`.
  struct Exceeded {};
  void abort_at(std::uint64_t cycle) {
    abort_ = true;
    abort_at_ = cycle;
  }
  void never_abort() { abort_ = false; }

 private:
  // One flow on its route, all ready at `ready`; `end` raised to its arrival.
  void schedule(const Flow& f, std::span<const Channel> route, std::uint64_t ready,
                std::uint64_t& end);

  const Topology* topology_;  // a pointer, so that schedules can be assigned (auto's trials)
  bool abort_ = false;
  std::uint64_t abort_at_ = 0;
  std::vector<double> rate_;            // per link, bytes/cycle each direction
  std::vector<std::uint64_t> latency_;  // per link, cycles
  std::vector<std::uint64_t> free_at_;  // per channel
  std::vector<ChannelUse> use_;         // per channel
  std::vector<Channel> route_;          // scratch: the route of the flow being scheduled
};

// The algorithm a collective ran with (after `auto` chose).
struct CollectiveOutcome {
  std::uint64_t end = 0;  // cycle the last member finishes
  trace::CollectiveMethod method = trace::CollectiveMethod::kRing;
  bool hierarchical = false;  // reduce-scatter / GW all-reduce / all-gather over racks
};

// Runs a collective among `members` (system IPUs, in replica order) on `tensor_bytes` of
// `dtype` per IPU, starting at cycle `ready` (after the group's external sync); each of its
// steps after the first starts with another external sync: of `domain_sync` cycles when every
// sync spans a whole domain (Poplar's default), else of the IPUs that step involves. Reduction
// arithmetic on each IPU is costed with the codelet models over all its tiles. See
// docs/topology.md for each method.
CollectiveOutcome run_collective(LinkSchedule& links, const ChipSpec& chip, trace::CollectiveOp op,
                                 trace::CollectiveMethod method,
                                 std::span<const std::uint32_t> members, std::uint64_t tensor_bytes,
                                 trace::DType dtype, std::uint64_t ready,
                                 std::optional<std::uint64_t> domain_sync);

// Cycles for one IPU to reduce `inputs` vectors of `bytes` each into one, spread over all of
// its tiles: one compute set of reduce vertices plus an internal sync.
std::uint64_t reduce_cycles(const ChipSpec& chip, std::uint64_t bytes, std::uint64_t inputs,
                            trace::DType dtype);

}  // namespace ipusim::topology
