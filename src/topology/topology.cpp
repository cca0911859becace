// SPDX-License-Identifier: Apache-2.0
#include "ipusim/topology/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

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
        add(LinkKind::kRail, base + 2 * rung + rail, base + 2 * up + rail, m.rail_links,
            f.ipu_link);
    }
  }
  rack_links_ = static_cast<std::uint32_t>(links_.size() / system_.racks);
  for (const auto& e : system_.extra_links) add(LinkKind::kExtra, e.a, e.b, e.links, f.ipu_link);
  // Each IPU reaches its machine's gateway over PCIe (a PCIe card has no gateway).
  if (m.host_attach == HostAttach::kGateway)
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
            gateway_node(((r + 1) % system_.racks) * system_.machines_per_rack + s), lanes,
            f.gw_link);
  }
  for (auto& adj : adjacency_) std::sort(adj.begin(), adj.end());
  ipu_first_.reserve(ipus_ + 1);
  for (std::uint32_t n = 0; n < ipus_; ++n) {
    ipu_first_.push_back(static_cast<std::uint32_t>(ipu_neighbours_.size()));
    for (const auto& [next, index] : adjacency_[n])
      if (next < ipus_)
        ipu_neighbours_.emplace_back(next, 2 * index + (links_[index].a == next ? 0 : 1));
  }
  ipu_first_.push_back(static_cast<std::uint32_t>(ipu_neighbours_.size()));
  // Without extra links every rack is the same IPU-Link graph (rack r's links are rack 0's,
  // numbered rack_links_ x r later, between IPUs per_rack x r higher) and no IPU-Link leaves a
  // rack: one search tree per rack-local destination serves every rack, if they fit.
  if (system_.extra_links.empty() &&
      static_cast<std::uint64_t>(per_rack) * per_rack <= kTreeEntriesPerIpu * std::uint64_t{ipus_})
    local_trees_.resize(per_rack);
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
    if (n == to &&
        (!gw_only || links_[index].kind == LinkKind::kGw || links_[index].kind == LinkKind::kPcie))
      return 2 * index + (links_[index].a == from ? 0 : 1);
  throw std::logic_error("no link between route nodes");
}

const std::vector<Channel>& Topology::local_tree(std::uint32_t dst) const {
  auto& tree = local_trees_[dst];
  if (!tree.empty()) return tree;
  // Breadth-first search in rack 0 (IPUs 0 .. per_rack - 1) as ipu_path does, to the end.
  tree.assign(local_trees_.size(), kNoRoute);
  std::vector<std::uint32_t> queue{dst};
  tree[dst] = 0;  // any value other than kNoRoute: the destination is reached
  for (std::size_t head = 0; head < queue.size(); ++head) {
    const std::uint32_t n = queue[head];
    for (std::uint32_t e = ipu_first_[n]; e < ipu_first_[n + 1]; ++e) {
      const auto [next, to_n] = ipu_neighbours_[e];
      if (tree[next] != kNoRoute) continue;
      tree[next] = to_n;
      queue.push_back(next);
    }
  }
  return tree;
}

bool Topology::ipu_path(std::uint32_t src, std::uint32_t dst, std::vector<Channel>& out) const {
  if (src == dst) return true;
  if (!local_trees_.empty()) {
    const std::uint32_t rack = rack_of(src);
    if (rack_of(dst) != rack) return false;
    const std::uint32_t base = rack * system_.ipus_per_rack();
    const std::vector<Channel>& tree = local_tree(dst - base);
    const Channel shift = 2 * rack * rack_links_;
    std::uint32_t n = src - base;
    if (tree[n] == kNoRoute) return false;
    while (n != dst - base) {
      const Channel c = tree[n];
      out.push_back(c + shift);
      const Link& l = link_of(c);
      n = c % 2 == 0 ? l.b : l.a;  // the far end of the channel, in rack 0
    }
    return true;
  }
  if (parent_.empty()) {
    parent_.assign(ipus_, 0);
    parent_channel_.assign(ipus_, 0);
    mark_.assign(ipus_, 0);
    queue_.reserve(ipus_);
  }
  if (++generation_ == 0) {  // marks wrapped round: clear them once
    std::fill(mark_.begin(), mark_.end(), 0);
    generation_ = 1;
  }
  // Breadth-first search over IPU-Links from the destination, neighbours in ascending order;
  // a node's parent is its next hop towards dst. Stop when the source is reached: the parents
  // of its path are all set by then (they are closer to dst), and no later step changes them.
  // Between two IPUs joined by links of several kinds the lowest-numbered link is used.
  const std::uint32_t gen = generation_;
  mark_[dst] = gen;
  queue_.assign(1, dst);
  bool found = false;
  for (std::size_t head = 0; head < queue_.size() && !found; ++head) {
    const std::uint32_t n = queue_[head];
    for (std::uint32_t e = ipu_first_[n]; e < ipu_first_[n + 1]; ++e) {
      const auto [next, to_n] = ipu_neighbours_[e];
      if (mark_[next] == gen) continue;
      mark_[next] = gen;
      parent_[next] = n;
      parent_channel_[next] = to_n;
      if (next == src) {
        found = true;
        break;
      }
      queue_.push_back(next);
    }
  }
  if (!found) return false;
  for (std::uint32_t n = src; n != dst; n = parent_[n]) out.push_back(parent_channel_[n]);
  return true;
}

void Topology::gateway_path(std::uint32_t src, std::uint32_t dst, std::vector<Channel>& out) const {
  const std::uint32_t per_rack = system_.ipus_per_rack();
  const std::uint32_t racks = system_.racks;
  const std::uint32_t src_rack = rack_of(src), dst_rack = rack_of(dst);
  const std::uint32_t slot = (src % per_rack) / system_.machine.ipus;
  std::uint32_t gw = gateway_node(machine_of(src));
  out.push_back(channel(src, gw, true));
  const std::uint32_t up = (dst_rack + racks - src_rack) % racks;
  const bool upwards = up <= racks - up;
  for (std::uint32_t r = src_rack; r != dst_rack;) {
    const std::uint32_t next = upwards ? (r + 1) % racks : (r + racks - 1) % racks;
    const std::uint32_t next_gw = gateway_node(next * system_.machines_per_rack + slot);
    out.push_back(channel(gw, next_gw, true));
    gw = next_gw;
    r = next;
  }
  const std::uint32_t landing = dst_rack * per_rack + src % per_rack;
  out.push_back(channel(gw, landing, true));
  ipu_path(landing, dst, out);
}

void Topology::route(std::uint32_t src, std::uint32_t dst, std::vector<Channel>& out) const {
  out.clear();
  if (src == dst) return;
  if (!ipu_path(src, dst, out)) gateway_path(src, dst, out);
}

std::vector<Channel> Topology::route(std::uint32_t src, std::uint32_t dst) const {
  std::vector<Channel> out;
  route(src, dst, out);
  return out;
}

std::size_t Topology::routing_bytes() const {
  std::size_t bytes =
      links_.capacity() * sizeof(Link) + adjacency_.capacity() * sizeof(adjacency_.front());
  for (const auto& adj : adjacency_) bytes += adj.capacity() * sizeof(adj.front());
  bytes += local_trees_.capacity() * sizeof(local_trees_.front());
  for (const auto& tree : local_trees_) bytes += tree.capacity() * sizeof(Channel);
  bytes += ipu_first_.capacity() * sizeof(std::uint32_t) +
           ipu_neighbours_.capacity() * sizeof(ipu_neighbours_.front());
  return bytes +
         (parent_.capacity() + parent_channel_.capacity() + mark_.capacity() + queue_.capacity()) *
             sizeof(std::uint32_t);
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
        node < ipus_ ? node
                     : (node - ipus_) * system_.machine.ipus;  // a gateway sits with its machine
    return ipu < half;
  };
  double total = 0;
  for (const Link& l : links_)
    if (side(l.a) != side(l.b)) total += l.bytes_per_second;
  return total;
}

std::uint64_t Topology::sync_cycles(std::span<const std::uint32_t> ipus) const {
  std::map<std::uint32_t, std::uint32_t> per_rack;  // rack -> members
  for (auto g : ipus) ++per_rack[rack_of(g)];
  std::uint32_t most = 0;
  for (const auto& [rack, n] : per_rack) most = std::max(most, n);
  const std::uint32_t r = system_.racks;
  const auto ring_distance = [r](std::uint32_t a, std::uint32_t b) {
    const std::uint32_t d = a > b ? a - b : b - a;
    return std::min(d, r - d);
  };
  std::uint32_t radius = 0;
  if (per_rack.size() > 1) {
    radius = r;
    for (const auto& [a, na] : per_rack) {
      std::uint32_t farthest = 0;
      for (const auto& [b, nb] : per_rack) farthest = std::max(farthest, ring_distance(a, b));
      radius = std::min(radius, farthest);
    }
  }
  return system_.sync_cycles(most, radius);
}

}  // namespace ipusim::topology
