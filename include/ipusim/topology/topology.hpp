// SPDX-License-Identifier: Apache-2.0
// The link graph of a system, built from its SystemSpec (never hard-coded per POD size), and
// deterministic routing over it. Plain C++; docs/topology.md describes the graph and routes.
//
// Nodes: IPU i is node i (i < ipus()); the gateway of machine m is node ipus() + m.
// IPU numbering: rack r, machine m of the rack, IPU k of the machine is
// (r x machines_per_rack + m) x machine.ipus + k. Within a rack, IPU l (rack-local) sits on rung
// l / 2 and rail l % 2: a rung's two IPUs are joined by rung links, each IPU to the IPU two
// above it (same rail) by rail links, and in a torus the top rung wraps to the bottom one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ipusim/config/system_spec.hpp"

namespace ipusim::topology {

enum class LinkKind : std::uint8_t { kRung, kRail, kExtra, kPcie, kGw };
inline constexpr const char* kLinkKindNames[] = {"rung", "rail", "extra", "pcie", "gw"};

// A bundle of `lanes` parallel links between nodes a and b, full duplex.
struct Link {
  LinkKind kind;
  std::uint32_t a = 0, b = 0;
  std::uint32_t lanes = 0;
  double bytes_per_second = 0;  // usable rate of the whole bundle, each direction
  double latency_seconds = 0;   // per hop
};

// A directed use of a link: channel = 2 x link index + (0 for a->b, 1 for b->a).
using Channel = std::uint32_t;

class Topology {
 public:
  explicit Topology(const SystemSpec& system);

  const SystemSpec& system() const { return system_; }
  std::uint32_t ipus() const { return ipus_; }
  std::uint32_t nodes() const { return ipus_ + system_.machines(); }
  std::uint32_t machine_of(std::uint32_t ipu) const { return ipu / system_.machine.ipus; }
  std::uint32_t rack_of(std::uint32_t ipu) const { return ipu / system_.ipus_per_rack(); }
  // External sync of `ipus` (SystemSpec::sync_cycles): the most members in one rack, and the
  // GW-Link hops from the middle rack of the group (the one nearest to all others round the
  // ring of racks) to the farthest.
  std::uint64_t sync_cycles(std::span<const std::uint32_t> ipus) const;
  std::uint32_t gateway_node(std::uint32_t machine) const { return ipus_ + machine; }
  const std::vector<Link>& links() const { return links_; }
  std::uint32_t channels() const { return static_cast<std::uint32_t>(2 * links_.size()); }
  const Link& link_of(Channel c) const { return links_[c / 2]; }
  std::string channel_name(Channel c) const;

  // The route from one IPU to another as directed channels, deterministic:
  //  - over IPU-Links when a path exists: fewest hops, ties broken towards lower node ids
  //    (the parent pointers of a breadth-first search from the destination that visits
  //    neighbours in ascending node order);
  //  - otherwise (another rack): PCIe to the source machine's gateway, GW-Links around the
  //    ring of racks (shorter way, ties upwards) to the gateway of the same machine slot, PCIe
  //    to the IPU in the same machine position, then IPU-Links to the destination.
  // Computed on demand, nothing is kept per IPU pair: the search from the destination stops as
  // soon as it reaches the source (every node of the source's path is found before it), so a
  // route costs time in the number of IPUs within its length of the destination (at most four
  // per hop on a ladder or torus) and memory stays linear in the IPU count. `out` is replaced
  // by the route.
  void route(std::uint32_t src_ipu, std::uint32_t dst_ipu, std::vector<Channel>& out) const;
  std::vector<Channel> route(std::uint32_t src_ipu, std::uint32_t dst_ipu) const;

  // Bytes held for the link graph and routing (links, adjacency, the search's scratch arrays):
  // linear in nodes() + links(), whatever routes have been asked for.
  std::size_t routing_bytes() const;

  // GCL ring order of a set of IPUs of one rack: rail 0 upwards, then rail 1 downwards.
  // Members in several racks are ordered rack by rack.
  std::vector<std::uint32_t> ring(std::vector<std::uint32_t> members) const;

  // Sum of the usable rates of the links between IPUs [0, n/2) and [n/2, n), each direction.
  double bisection_bytes_per_second() const;

 private:
  void add(LinkKind kind, std::uint32_t a, std::uint32_t b, std::uint32_t lanes,
           const LinkParams& params);
  void add_raw(LinkKind kind, std::uint32_t a, std::uint32_t b, std::uint32_t lanes, double rate,
               double latency);
  // Channel from each IPU of rack 0 to its parent in the search tree towards rack-local IPU
  // `dst`, kNoRoute where there is none (computed once; only used when local_trees_ is sized).
  const std::vector<Channel>& local_tree(std::uint32_t dst) const;
  // Appends the IPU-Link path from src to dst to `out`; false (nothing appended) if none.
  bool ipu_path(std::uint32_t src, std::uint32_t dst, std::vector<Channel>& out) const;
  void gateway_path(std::uint32_t src, std::uint32_t dst, std::vector<Channel>& out) const;
  Channel channel(std::uint32_t from, std::uint32_t to, bool gw_only) const;

  SystemSpec system_;
  std::uint32_t ipus_ = 0;
  std::vector<Link> links_;
  // adjacency: node -> (neighbour, link index), sorted by neighbour
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> adjacency_;
  static constexpr Channel kNoRoute = ~Channel{0};
  // Rack-local search trees are kept when they hold at most this many entries per IPU of the
  // system (ipus_per_rack^2 <= 64 x ipus: up to 256-IPU racks in a 1,024-IPU system);
  // otherwise every route is searched afresh.
  static constexpr std::uint64_t kTreeEntriesPerIpu = 64;
  std::uint32_t rack_links_ = 0;  // links of one rack (rung and rail), added rack by rack
  mutable std::vector<std::vector<Channel>> local_trees_;  // by rack-local destination
  // IPU-Link neighbours of each IPU in ascending order (adjacency without gateways, flat):
  // those of IPU i are ipu_neighbours_[ipu_first_[i] .. ipu_first_[i + 1]), each with the
  // channel from that neighbour to i.
  std::vector<std::uint32_t> ipu_first_;
  std::vector<std::pair<std::uint32_t, Channel>> ipu_neighbours_;
  // Scratch of the breadth-first search, one entry per IPU, allocated on the first route: a
  // node's parent (and the channel to it) is valid when its mark equals the current search's
  // generation.
  mutable std::vector<std::uint32_t> parent_;
  mutable std::vector<Channel> parent_channel_;
  mutable std::vector<std::uint32_t> mark_;
  mutable std::vector<std::uint32_t> queue_;
  mutable std::uint32_t generation_ = 0;
};

}  // namespace ipusim::topology
