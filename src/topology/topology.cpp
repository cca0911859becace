// SPDX-License-Identifier: Apache-2.0
#include "ipusim/topology/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>

#include "ipusim/util/error.hpp"

namespace ipusim::topology {

Topology::Topology(const SystemSpec& system) : system_(system), ipus_(system.ipus()) {
  adjacency_.resize(nodes());
  const auto& m = system_.machine;
  const auto& f = system_.fabric;
  const std::uint32_t per_rack = system_.ipus_per_rack();
  const std::uint32_t rungs = per_rack / 2;
  for (std::uint32_t r = 0; r < system_.racks; ++r) {
    const std::uint32_t base = r * per_rack;
    for (std::uint32_t rung = 0; rung < rungs; ++rung) {
      add(LinkKind::kRung, base + 2 * rung, base + 2 * rung + 1, m.rung_links, f.ipu_link);
      const bool last = rung + 1 == rungs;
      if (last && (system_.topology != RackTopology::kTorus || rungs < 3)) continue;
      const std::uint32_t up = last ? 0 : rung + 1;
      for (std::uint32_t rail = 0; rail < 2; ++rail)
        add(LinkKind::kRail, base + 2 * rung + rail, base + 2 * up + rail, m.rail_links, f.ipu_link);
    }
  }
  for (const auto& e : system_.extra_links) add(LinkKind::kExtra, e.a, e.b, e.links, f.ipu_link);
  // Each IPU reaches its machine's gateway over PCIe.
  for (std::uint32_t ipu = 0; ipu < ipus_; ++ipu)
    add_raw(LinkKind::kPcie, ipu, gateway_node(machine_of(ipu)), 1,
            m.pcie_bandwidth.bytes_per_second, m.gateway_latency.seconds);
  // GW-Links: machine slot s of rack r to slot s of rack r+1, around the ring of racks. With
  // two racks both GW-Links of a machine go to the other rack; with more, one each way.
  if (system_.racks >= 2 && m.gw_links > 0) {
    const std::uint32_t pairs = system_.racks == 2 ? 1 : system_.racks;
    const std::uint32_t lanes = system_.racks == 2 ? m.gw_links : std::max(1u, m.gw_links / 2);
    for (std::uint32_t r = 0; r < pairs; ++r)
      for (std::uint32_t s = 0; s < system_.machines_per_rack; ++s)
        add(LinkKind::kGw, gateway_node(r * system_.machines_per_rack + s),
            gateway_node(((r + 1) % system_.racks) * system_.machines_per_rack + s), lanes, f.gw_link);
  }
  for (auto& adj : adjacency_) std::sort(adj.begin(), adj.end());
  trees_.resize(ipus_);
  routes_.resize(ipus_);
}

void Topology::add(LinkKind kind, std::uint32_t a, std::uint32_t b, std::uint32_t lanes,
                   const LinkParams& params) {
  add_raw(kind, a, b, lanes, lanes * params.effective_bytes_per_second(), params.latency.seconds);
}

void Topology::add_raw(LinkKind kind, std::uint32_t a, std::uint32_t b, std::uint32_t lanes,
                       double rate, double latency) {
  // A second bundle between the same nodes (e.g. an extra link) widens the existing one.
  for (auto& [n, index] : adjacency_[a])
    if (n == b && links_[index].kind == kind) {
      links_[index].lanes += lanes;
      links_[index].bytes_per_second += rate;
      return;
    }
  const auto index = static_cast<std::uint32_t>(links_.size());
  links_.push_back(Link{kind, a, b, lanes, rate, latency});
  adjacency_[a].emplace_back(b, index);
  adjacency_[b].emplace_back(a, index);
}

std::string Topology::channel_name(Channel c) const {
  const Link& l = link_of(c);
  auto node = [&](std::uint32_t n) {
    return n < ipus_ ? fmt::format("ipu{}", n) : fmt::format("gw{}", n - ipus_);
  };
  const bool forward = c % 2 == 0;
  return fmt::format("{}:{}->{}", kLinkKindNames[static_cast<int>(l.kind)],
                     node(forward ? l.a : l.b), node(forward ? l.b : l.a));
}

Channel Topology::channel(std::uint32_t from, std::uint32_t to, bool gw_only) const {
  for (const auto& [n, index] : adjacency_[from])
    if (n == to && (!gw_only || links_[index].kind == LinkKind::kGw || links_[index].kind == LinkKind::kPcie))
      return 2 * index + (links_[index].a == from ? 0 : 1);
  throw std::logic_error("no link between route nodes");
}

const std::vector<std::int64_t>& Topology::tree(std::uint32_t src) const {
  auto& parents = trees_[src];
  if (!parents.empty()) return parents;
  parents.assign(ipus_, -1);
  parents[src] = src;
  std::deque<std::uint32_t> queue{src};
  while (!queue.empty()) {
    const std::uint32_t n = queue.front();
    queue.pop_front();
    for (const auto& [next, index] : adjacency_[n]) {
      if (next >= ipus_ || parents[next] >= 0) continue;  // IPU-Links only
      parents[next] = n;
      queue.push_back(next);
    }
  }
  return parents;
}

std::vector<Channel> Topology::ipu_path(std::uint32_t src, std::uint32_t dst) const {
  // BFS from the destination gives, for src, the next hop towards dst.
  const auto& parents = tree(dst);
  if (parents[src] < 0) return {};
  std::vector<Channel> path;
  for (std::uint32_t n = src; n != dst; n = static_cast<std::uint32_t>(parents[n]))
    path.push_back(channel(n, static_cast<std::uint32_t>(parents[n]), false));
  return path;
}

std::vector<Channel> Topology::gateway_path(std::uint32_t src, std::uint32_t dst) const {
  const std::uint32_t per_rack = system_.ipus_per_rack();
  const std::uint32_t racks = system_.racks;
  const std::uint32_t src_rack = rack_of(src), dst_rack = rack_of(dst);
  const std::uint32_t slot = (src % per_rack) / system_.machine.ipus;
  std::vector<Channel> path;
  std::uint32_t gw = gateway_node(machine_of(src));
  path.push_back(channel(src, gw, true));
  const std::uint32_t up = (dst_rack + racks - src_rack) % racks;
  const bool upwards = up <= racks - up;
  for (std::uint32_t r = src_rack; r != dst_rack;) {
    const std::uint32_t next = upwards ? (r + 1) % racks : (r + racks - 1) % racks;
    const std::uint32_t next_gw = gateway_node(next * system_.machines_per_rack + slot);
    path.push_back(channel(gw, next_gw, true));
    gw = next_gw;
    r = next;
  }
  const std::uint32_t landing = dst_rack * per_rack + src % per_rack;
  path.push_back(channel(gw, landing, true));
  for (Channel c : ipu_path(landing, dst)) path.push_back(c);
  return path;
}

const std::vector<Channel>& Topology::route(std::uint32_t src, std::uint32_t dst) const {
  auto& table = routes_[src];
  if (table.empty()) table.resize(ipus_);
  auto& r = table[dst];
  if (r.empty() && src != dst) {
    r = ipu_path(src, dst);
    if (r.empty()) r = gateway_path(src, dst);
  }
  return r;
}

std::vector<std::uint32_t> Topology::ring(std::vector<std::uint32_t> members) const {
  const std::uint32_t per_rack = system_.ipus_per_rack();
  // Key: rack, then rail 0 ascending, then rail 1 descending.
  auto key = [&](std::uint32_t ipu) {
    const std::uint32_t local = ipu % per_rack;
    const std::uint32_t rung = local / 2, rail = local % 2;
    const std::uint64_t along = rail == 0 ? rung : 2ull * per_rack - rung;
    return (static_cast<std::uint64_t>(rack_of(ipu)) << 32) | along;
  };
  std::sort(members.begin(), members.end(),
            [&](std::uint32_t a, std::uint32_t b) { return key(a) < key(b); });
  return members;
}

double Topology::bisection_bytes_per_second() const {
  const std::uint32_t half = ipus_ / 2;
  auto side = [&](std::uint32_t node) {
    const std::uint32_t ipu =
        node < ipus_ ? node : (node - ipus_) * system_.machine.ipus;  // a gateway sits with its machine
    return ipu < half;
  };
  double total = 0;
  for (const Link& l : links_)
    if (side(l.a) != side(l.b)) total += l.bytes_per_second;
  return total;
}

}  // namespace ipusim::topology
