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

#include <cstdint>
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
  std::uint32_t gateway_node(std::uint32_t machine) const { return ipus_ + machine; }
  const std::vector<Link>& links() const { return links_; }
  std::uint32_t channels() const { return static_cast<std::uint32_t>(2 * links_.size()); }
  const Link& link_of(Channel c) const { return links_[c / 2]; }
  std::string channel_name(Channel c) const;

  // The route from one IPU to another as directed channels, deterministic:
  //  - over IPU-Links when a path exists: fewest hops, ties broken towards lower node ids;
  //  - otherwise (another rack): PCIe to the source machine's gateway, GW-Links around the
  //    ring of racks (shorter way, ties upwards) to the gateway of the same machine slot, PCIe
  //    to the IPU in the same machine position, then IPU-Links to the destination.
  const std::vector<Channel>& route(std::uint32_t src_ipu, std::uint32_t dst_ipu) const;

  // GCL ring order of a set of IPUs of one rack: rail 0 upwards, then rail 1 downwards.
  // Members in several racks are ordered rack by rack.
  std::vector<std::uint32_t> ring(std::vector<std::uint32_t> members) const;

  // Sum of the usable rates of the links between IPUs [0, n/2) and [n/2, n), each direction.
  double bisection_bytes_per_second() const;

 private:
  void add(LinkKind kind, std::uint32_t a, std::uint32_t b, std::uint32_t lanes,
           const LinkParams& params);
  void add_raw(LinkKind kind, std::uint32_t a, std::uint32_t b, std::uint32_t lanes,
               double rate, double latency);
  // Parent pointers of a BFS over IPU-Links from `src` (cached).
  const std::vector<std::int64_t>& tree(std::uint32_t src) const;
  std::vector<Channel> ipu_path(std::uint32_t src, std::uint32_t dst) const;  // empty if none
  std::vector<Channel> gateway_path(std::uint32_t src, std::uint32_t dst) const;
  Channel channel(std::uint32_t from, std::uint32_t to, bool gw_only) const;

  SystemSpec system_;
  std::uint32_t ipus_ = 0;
  std::vector<Link> links_;
  // adjacency: node -> (neighbour, link index), sorted by neighbour
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> adjacency_;
  mutable std::vector<std::vector<std::int64_t>> trees_;
  mutable std::vector<std::vector<std::vector<Channel>>> routes_;
};

}  // namespace ipusim::topology
