// SPDX-License-Identifier: Apache-2.0
#include "ipusim/topology/link_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::topology {

LinkSchedule::LinkSchedule(const Topology& topology) : topology_(&topology) {
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
    topology_->route(f.src, f.dst, route_);
    schedule(f, route_, ready, end);
  }
  return end;
}

std::uint64_t LinkSchedule::run(std::span<const Flow> flows,
                                std::span<const std::vector<Channel>> routes, std::uint64_t ready) {
  std::uint64_t end = ready;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const Flow& f = flows[i];
    if (f.src == f.dst || f.bytes == 0) continue;
    schedule(f, routes[i], ready, end);
  }
  return end;
}

void LinkSchedule::schedule(const Flow& f, std::span<const Channel> route, std::uint64_t ready,
                            std::uint64_t& end) {
  std::uint64_t start = ready;
  double slowest = std::numeric_limits<double>::max();
  std::uint64_t latency = 0;
  for (Channel c : route) {
    start = std::max(start, free_at_[c]);
    slowest = std::min(slowest, rate(c));
    latency += this->latency(c);
  }
  const auto cycles = [&](double rate) { return (Bytes{f.bytes} / BytesPerCycle{rate}).count; };
  // Each channel is busy for the bytes at its own rate; the flow arrives at the pace of the
  // slowest channel of its route.
  for (Channel c : route) {
    const std::uint64_t busy = cycles(rate(c));
    free_at_[c] = start + busy;
    use_[c].bytes += f.bytes;
    use_[c].busy_cycles += busy;
  }
  end = std::max(end, start + cycles(slowest) + latency);
  if (abort_ && end >= abort_at_) throw Exceeded{};
}

void LinkSchedule::busy_after(std::uint64_t time, std::vector<std::uint64_t>& out) const {
  for (const std::uint64_t f : free_at_) out.push_back(f > time ? f - time : 0);
}

void LinkSchedule::use_counters(std::vector<std::uint64_t>& out) const {
  for (const ChannelUse& u : use_) {
    out.push_back(u.bytes);
    out.push_back(u.busy_cycles);
  }
}

void LinkSchedule::skip(std::uint64_t periods, std::uint64_t cycles,
                        std::span<const std::uint64_t> use) {
  // Flows start at max(ready, free_at) with ready at or after the cut: moving every channel's
  // free time on by the skipped time keeps each one's state relative to the new time.
  for (auto& f : free_at_) f += periods * cycles;
  for (std::size_t c = 0; c < use_.size(); ++c) {
    use_[c].bytes += periods * use[2 * c];
    use_[c].busy_cycles += periods * use[2 * c + 1];
  }
}

LinkSchedule::Effect LinkSchedule::effect_since(const LinkSchedule& before,
                                                std::uint64_t start) const {
  Effect e;
  for (std::size_t c = 0; c < free_at_.size(); ++c) {
    const ChannelUse& was = before.use_[c];
    if (free_at_[c] == before.free_at_[c] && use_[c].bytes == was.bytes &&
        use_[c].busy_cycles == was.busy_cycles)
      continue;
    e.channels.push_back(static_cast<Channel>(c));
    e.free_after.push_back(free_at_[c] > start ? free_at_[c] - start : 0);
    e.use.push_back({use_[c].bytes - was.bytes, use_[c].busy_cycles - was.busy_cycles});
  }
  return e;
}

void LinkSchedule::replay(const Effect& e, std::uint64_t first, std::uint64_t period,
                          std::uint64_t times) {
  if (times == 0) return;
  const std::uint64_t last = first + (times - 1) * period;
  for (std::size_t i = 0; i < e.channels.size(); ++i) {
    const Channel c = e.channels[i];
    free_at_[c] = std::max(free_at_[c], last + e.free_after[i]);
    use_[c].bytes += times * e.use[i].bytes;
    use_[c].busy_cycles += times * e.use[i].busy_cycles;
  }
}

std::uint64_t reduce_cycles(const ChipSpec& chip, std::uint64_t bytes, std::uint64_t inputs,
                            trace::DType dtype) {
  const std::uint64_t elements = ceil_div(bytes, trace::dtype_bytes(dtype));
  if (elements == 0 || inputs < 2) return 0;
  const std::uint64_t per_tile = ceil_div(elements, chip.tiles);
  const auto vertex = inputs == 2
                          ? cost::binary(chip, trace::Op::kAdd, dtype, per_tile)
                          : cost::reduce(chip, trace::Op::kAdd, dtype, dtype, per_tile, inputs);
  return vertex.cycles + chip.runtime.compute_set_overhead.count + chip.sync.internal_latency.count;
}

}  // namespace ipusim::topology
