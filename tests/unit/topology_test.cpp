// SPDX-License-Identifier: Apache-2.0
// System configs, the link graph and routing, against the structure in
// ../shared/reference/ipu-hardware.md §2 counted by hand.
#include "ipusim/topology/topology.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <fstream>
#include <map>
#include <numeric>
#include <tuple>

#include "ipusim/config/system.hpp"
#include "ipusim/topology/collective.hpp"
#include "ipusim/topology/link_schedule.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::topology {
namespace {

std::string system_path(const std::string& name) {
  return std::string(IPUSIM_SOURCE_DIR) + "/configs/systems/" + name + ".yaml";
}

std::size_t count(const Topology& t, LinkKind kind) {
  return static_cast<std::size_t>(std::count_if(t.links().begin(), t.links().end(),
                                                [&](const Link& l) { return l.kind == kind; }));
}

std::string error_of(const std::string& file, const std::vector<std::string>& overrides) {
  try {
    load_system(file, overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SystemConfig, EveryShippedSystemLoads) {
  for (const char* name : {"m2000", "c600", "pod16", "pod64", "pod128", "pod256", "bow-pod16",
                           "bow-pod64", "bow-pod128", "bow-pod256"}) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(load_system(system_path(name)));
  }
  EXPECT_EQ(load_system(system_path("pod16")).spec.ipus(), 16u);
  EXPECT_EQ(load_system(system_path("pod64")).spec.ipus(), 64u);
  EXPECT_EQ(load_system(system_path("pod128")).spec.ipus(), 128u);
  const SystemSpec pod256 = load_system(system_path("pod256")).spec;
  EXPECT_EQ(pod256.ipus(), 256u);
  EXPECT_EQ(pod256.racks, 4u);
  EXPECT_DOUBLE_EQ(load_system(system_path("bow-pod64")).spec.chip.clock.hz, 1.85e9);
}

TEST(SystemConfig, PodSizeMustBeAPowerOfTwoOfAtLeastSixteen) {
  EXPECT_NE(error_of(system_path("pod16"), {"system.machines_per_rack=3"})
                .find("the IPU count must be a power of two of at least 16; found 12 IPUs"),
            std::string::npos);
  EXPECT_NE(error_of(system_path("pod16"), {"system.machines_per_rack=2"}).find("found 8 IPUs"),
            std::string::npos);
  // A single machine is not a POD and may have 4 IPUs.
  EXPECT_EQ(error_of(system_path("m2000"), {}), "(no error)");
}

TEST(SystemConfig, APcieCardIsOneIpuOnTheHostBusWithNoGateway) {
  const SystemSpec c600 = load_system(system_path("c600")).spec;
  EXPECT_EQ(c600.ipus(), 1u);
  EXPECT_EQ(c600.machine.host_attach, HostAttach::kPcie);
  EXPECT_DOUBLE_EQ(c600.chip.host.bandwidth.bytes_per_second, 32e9);  // PCIe Gen4 x16 each way
  // One IPU: no IPU-Link, no PCIe-to-gateway link, no GW-Link.
  EXPECT_TRUE(Topology(c600).links().empty());
  EXPECT_EQ(load_system(system_path("m2000")).spec.machine.host_attach, HostAttach::kGateway);

  // A card has no gateway: a gateway key is an error at that key, from a file or --set.
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/card.yaml") << "machine:\n  name: c\n  ipus: 1\n  host_attach: pcie\n"
                                       "  rung_links: 1\n  rail_links: 1\n  gw_links: 0\n"
                                       "  gateway:\n    latency: 2us\n";
  std::ofstream(dir + "/card-sys.yaml")
      << "system:\n  name: x\n  kind: machine\n  chip: " << IPUSIM_SOURCE_DIR
      << "/configs/chips/bow.yaml\n  machine: card.yaml\n  fabric: " << IPUSIM_SOURCE_DIR
      << "/configs/parts/ipu-fabric.yaml\n  machines_per_rack: 1\n  racks: 1\n"
         "  rack_topology: ladder\n  host_servers: 1\n";
  std::string e = error_of(dir + "/card-sys.yaml", {});
  EXPECT_NE(e.find("card.yaml:9:5: machine.gateway.latency: machine.host_attach is pcie (a PCIe "
                   "card), which has no IPU-Gateway"),
            std::string::npos)
      << e;
  e = error_of(system_path("m2000"), {"machine.host_attach=pcie"});
  EXPECT_NE(e.find("machine.gateway.ddr_bandwidth: machine.host_attach is pcie"), std::string::npos)
      << e;
  // One card of one IPU: more IPUs or more cards are refused, naming what was found.
  e = error_of(system_path("c600"), {"machine.ipus=2"});
  EXPECT_NE(e.find("a PCIe card system is one card of one IPU (machine.ipus 1, "
                   "system.machines_per_rack 1, system.racks 1); found machine.ipus 2, "
                   "system.machines_per_rack 1, system.racks 1"),
            std::string::npos)
      << e;
  e = error_of(system_path("c600"), {"system.machines_per_rack=2"});
  EXPECT_NE(e.find("found machine.ipus 1, system.machines_per_rack 2, system.racks 1"),
            std::string::npos)
      << e;
  // Without a card, one IPU is still not a machine of rungs.
  e = error_of(system_path("m2000"), {"machine.ipus=1"});
  EXPECT_NE(e.find("machine.ipus: expected an even number"), std::string::npos) << e;
}

TEST(SystemConfig, LinkToAMissingIpu) {
  const std::string e = error_of(system_path("pod16"), {"system.extra_links=0-15:2,3-16:1"});
  EXPECT_NE(e.find("system.extra_links: link 3-16 names IPU 16, but the system has IPUs 0..15"),
            std::string::npos)
      << e;
  // Exactly "a-b:n": no sign, space, overflow or anything after n (sscanf let these through).
  for (const std::string& bad :
       std::vector<std::string>{"0-x", "0-1:1x", "0- 1:1", "-1-2:1", "0-1:+1", "0-1:4294967297",
                                "0-1", "0-1:", "0-0:1", "0-1:0"})
    EXPECT_NE(error_of(system_path("pod16"), {"system.extra_links=" + bad})
                  .find("expected \"a-b:n\" (two different IPUs, n >= 1 links)"),
              std::string::npos)
        << bad;
  // A NUL (or any control character) in a config text value is refused before it is parsed.
  EXPECT_NE(error_of(system_path("pod16"), {"system.extra_links=" + std::string("0-1:1\0z", 7)})
                .find("expected text without control characters, found \"0-1:1\\0z\""),
            std::string::npos);
}

TEST(SystemConfig, NegativeBandwidth) {
  const std::string e = error_of(system_path("pod16"), {"fabric.ipu_link.bandwidth=-1GB/s"});
  EXPECT_NE(e.find("fabric.ipu_link.bandwidth: expected a bandwidth such as \"32GB/s\" or "
                   "\"100Gbit/s\" (not negative), found \"-1GB/s\""),
            std::string::npos)
      << e;
}

TEST(SystemConfig, BadTopologyNameSuggests) {
  const std::string e = error_of(system_path("pod16"), {"system.rack_topology=tours"});
  EXPECT_NE(e.find("expected one of ladder, torus, found \"tours\" (did you mean 'torus'?)"),
            std::string::npos)
      << e;
}

TEST(SystemConfig, UnknownKeyInAnIncludedPartNamesThatFile) {
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/fabric.yaml") << "fabric:\n  ipu_link:\n    bandwith: 1GB/s\n";
  std::ofstream(dir + "/sys.yaml")
      << "system:\n  name: x\n  kind: pod\n  chip: " << IPUSIM_SOURCE_DIR
      << "/configs/chips/gc200.yaml\n  machine: " << IPUSIM_SOURCE_DIR
      << "/configs/parts/m2000.yaml\n  fabric: fabric.yaml\n  machines_per_rack: 4\n"
         "  racks: 1\n  rack_topology: ladder\n  host_servers: 1\n";
  const std::string e = error_of(dir + "/sys.yaml", {});
  EXPECT_NE(e.find("fabric.yaml:3:5: fabric.ipu_link.bandwith: unknown key (did you mean "
                   "fabric.ipu_link.bandwidth?)"),
            std::string::npos)
      << e;
}

TEST(SystemConfig, CyclicIncludeIsAnError) {
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/a.yaml") << "system:\n  machine: b.yaml\n";
  std::ofstream(dir + "/b.yaml") << "system:\n  fabric: a.yaml\n";
  const std::string e = error_of(dir + "/a.yaml", {});
  EXPECT_NE(e.find("cyclic include"), std::string::npos) << e;
}

TEST(SystemConfig, ExternalSyncFollowsTheIpuModelFormula) {
  // §2: at 1.325 GHz, N=4 -> 80, N=16 -> 199, N=64 -> 676 cycles.
  const SystemSpec s = load_system(system_path("pod64")).spec;
  EXPECT_EQ(s.sync_cycles(4), 80u);
  EXPECT_EQ(s.sync_cycles(16), 199u);
  EXPECT_EQ(s.sync_cycles(64), 676u);
}

TEST(SystemConfig, ExternalSyncAcrossRacksCrossesTheGwLinksToTheFarthestRackAndBack) {
  // ceil(2 x (hops x 15 ns + rack hops x 2 us) x 1.325 GHz), hops = 1 + (members in the
  // fullest rack) / 4, rack hops from the middle rack of the group to the farthest.
  const Topology pod256(load_system(system_path("pod256")).spec);
  std::vector<std::uint32_t> all(256);
  std::iota(all.begin(), all.end(), 0u);
  // 64 per rack (17 hops); 4 racks in a ring, the farthest 2 GW hops from any of them:
  // 2 x (255 ns + 4 us) = 8.51 us = 11,275.75 cycles.
  EXPECT_EQ(pod256.sync_cycles(all), 11276u);
  EXPECT_EQ(pod256.system().sync_cycles(256), 11276u);
  // One IPU in each rack: 1.25 hops, 2 x (18.75 ns + 4 us) = 10,649.69 cycles.
  const std::vector<std::uint32_t> strided{0, 64, 128, 192};
  EXPECT_EQ(pod256.sync_cycles(strided), 10650u);
  // Two neighbouring racks: 1 GW hop, 2 x (255 ns + 2 us) = 5,975.75 cycles.
  const std::vector<std::uint32_t> two_racks(all.begin(), all.begin() + 128);
  EXPECT_EQ(pod256.sync_cycles(two_racks), 5976u);
  // Racks 0 and 2 of the ring: 2 GW hops either way round.
  const std::vector<std::uint32_t> opposite{0, 128};
  EXPECT_EQ(pod256.sync_cycles(opposite), 10650u);
  // Inside one rack the IPUModel formula alone: 16 IPUs -> 199 cycles.
  const std::vector<std::uint32_t> sixteen(all.begin(), all.begin() + 16);
  EXPECT_EQ(pod256.sync_cycles(sixteen), 199u);
}

TEST(Topology, Pod16IsALadderOfEightRungs) {
  const Topology t(load_system(system_path("pod16")).spec);
  EXPECT_EQ(count(t, LinkKind::kRung), 8u);
  EXPECT_EQ(count(t, LinkKind::kRail), 2u * 7);  // two rails, open at the ends
  EXPECT_EQ(count(t, LinkKind::kPcie), 16u);
  EXPECT_EQ(count(t, LinkKind::kGw), 0u);
  // Rung bundle: 4 links x 128 Gibit/s x 0.32 each way.
  const double link = 128.0 * (1u << 30) / 8 * 0.32;
  for (const Link& l : t.links()) {
    if (l.kind == LinkKind::kRung) EXPECT_DOUBLE_EQ(l.bytes_per_second, 4 * link);
    if (l.kind == LinkKind::kRail) EXPECT_DOUBLE_EQ(l.bytes_per_second, 2 * link);
  }
  // Bisection between rungs 3 and 4: both rails, 2 links each.
  EXPECT_DOUBLE_EQ(t.bisection_bytes_per_second(), 2 * 2 * link);
}

TEST(Topology, Pod64WrapsIntoATorus) {
  const Topology t(load_system(system_path("pod64")).spec);
  EXPECT_EQ(count(t, LinkKind::kRung), 32u);
  EXPECT_EQ(count(t, LinkKind::kRail), 2u * 32);  // the top rung links back to the bottom
  // IPU 0 reaches IPU 62 in one hop over the wrap.
  EXPECT_EQ(t.route(0, 62).size(), 1u);
  EXPECT_EQ(t.route(0, 32).size(), 16u);  // half way round the rail either way
}

TEST(Topology, Pod256RacksJoinOverGwLinks) {
  const Topology t(load_system(system_path("pod256")).spec);
  EXPECT_EQ(count(t, LinkKind::kGw), 64u);  // 16 machine slots x 4 rack pairs in a ring
  // IPU 0 (rack 0) to IPU 64 (rack 1, same position): PCIe up, GW-Link, PCIe down.
  const auto& r = t.route(0, 64);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(t.channel_name(r[0]), "pcie:ipu0->gw0");
  EXPECT_EQ(t.channel_name(r[1]), "gw:gw0->gw16");
  EXPECT_EQ(t.channel_name(r[2]), "pcie:gw16->ipu64");
  // Rack 0 to rack 3 goes the short way round (downwards).
  EXPECT_EQ(t.channel_name(t.route(1, 193)[1]), "gw:gw0->gw48");
}

TEST(Topology, RoutesAreShortestAndDeterministic) {
  const Topology t(load_system(system_path("pod16")).spec);
  // IPU 0 to IPU 3: two hops; ties go towards the lower node (0 -> 1 -> 3).
  const auto& r = t.route(0, 3);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(t.channel_name(r[0]), "rung:ipu0->ipu1");
  EXPECT_EQ(t.channel_name(r[1]), "rail:ipu1->ipu3");
  EXPECT_EQ(t.route(0, 14).size(), 7u);
}

TEST(Topology, RingGoesUpOneRailAndDownTheOther) {
  const Topology t(load_system(system_path("pod16")).spec);
  std::vector<std::uint32_t> all(16);
  std::iota(all.begin(), all.end(), 0);
  const std::vector<std::uint32_t> expected{0, 2, 4, 6, 8, 10, 12, 14, 15, 13, 11, 9, 7, 5, 3, 1};
  EXPECT_EQ(t.ring(all), expected);
  // Every ring neighbour is one link away.
  for (std::size_t i = 0; i < 16; ++i)
    EXPECT_EQ(t.route(expected[i], expected[(i + 1) % 16]).size(), 1u);
}

// Reference routing written from docs/topology.md's rules, independently of Topology's search
// (which stops early, and shares trees between racks): a full breadth-first search from the
// destination over the IPU-Links of t.links() with neighbours in ascending node order, kept
// for every destination; between two IPUs joined by several bundles, the lowest-numbered one.
// Without an IPU-Link path: PCIe up, GW-Links round the ring of racks the shorter way (upwards
// on a tie), PCIe down to the same machine position, then IPU-Links. This is the quadratic
// table the old Topology kept, so it is only used on small systems or a few destinations.
class ReferenceRoutes {
 public:
  explicit ReferenceRoutes(const Topology& t) : t_(t), adj_(t.ipus()) {
    for (std::uint32_t i = 0; i < t.links().size(); ++i) {
      const Link& l = t.links()[i];
      links_.emplace(std::make_tuple(l.a, l.b, l.kind), i);
      if (l.a < t.ipus() && l.b < t.ipus()) {
        adj_[l.a].emplace_back(l.b, i);
        adj_[l.b].emplace_back(l.a, i);
      }
    }
    for (auto& a : adj_) std::sort(a.begin(), a.end());
  }

  std::vector<Channel> route(std::uint32_t src, std::uint32_t dst) {
    if (src == dst) return {};
    std::vector<Channel> path;
    if (ipu_path(src, dst, path)) return path;
    const SystemSpec& s = t_.system();
    const std::uint32_t per_rack = s.ipus_per_rack(), racks = s.racks;
    const std::uint32_t from = src / per_rack, to = dst / per_rack;
    const std::uint32_t slot = src % per_rack / s.machine.ipus;
    auto gw = [&](std::uint32_t rack) { return t_.ipus() + rack * s.machines_per_rack + slot; };
    path.push_back(channel(src, gw(from), LinkKind::kPcie));
    const std::uint32_t up = (to + racks - from) % racks;
    for (std::uint32_t r = from; r != to;) {
      const std::uint32_t next = up <= racks - up ? (r + 1) % racks : (r + racks - 1) % racks;
      path.push_back(channel(gw(r), gw(next), LinkKind::kGw));
      r = next;
    }
    const std::uint32_t landing = to * per_rack + src % per_rack;
    path.push_back(channel(gw(to), landing, LinkKind::kPcie));
    ipu_path(landing, dst, path);
    return path;
  }

 private:
  Channel channel(std::uint32_t from, std::uint32_t to, LinkKind kind) const {
    if (auto it = links_.find({from, to, kind}); it != links_.end()) return 2 * it->second;
    return 2 * links_.at({to, from, kind}) + 1;
  }

  bool ipu_path(std::uint32_t src, std::uint32_t dst, std::vector<Channel>& path) {
    auto [it, fresh] = trees_.try_emplace(dst);
    auto& parent = it->second;  // (parent, link) per IPU
    if (fresh) {
      parent.assign(t_.ipus(), {-1, 0});
      parent[dst] = {dst, 0};
      std::deque<std::uint32_t> queue{dst};
      while (!queue.empty()) {
        const std::uint32_t n = queue.front();
        queue.pop_front();
        for (const auto& [next, link] : adj_[n])
          if (parent[next].first < 0) {
            parent[next] = {n, link};
            queue.push_back(next);
          }
      }
    }
    if (parent[src].first < 0) return false;
    for (std::uint32_t n = src; n != dst;) {
      const auto [p, link] = parent[n];
      path.push_back(2 * link + (t_.links()[link].a == n ? 0 : 1));
      n = static_cast<std::uint32_t>(p);
    }
    return true;
  }

  const Topology& t_;
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> adj_;
  std::map<std::tuple<std::uint32_t, std::uint32_t, LinkKind>, std::uint32_t> links_;
  std::map<std::uint32_t, std::vector<std::pair<std::int64_t, std::uint32_t>>> trees_;
};

struct SystemCase {
  const char* file;
  std::vector<std::string> overrides;
};

// Issue 16, defect G: routes are computed on demand, not kept per IPU pair. Every route of
// ladders, tori (even and odd rung counts), rings of 2 and 3 racks, a rack too large for the
// shared per-rack trees and systems with extra links (inside a rung, across the ladder, between
// racks) equals the reference.
TEST(Topology, EveryRouteEqualsAReferenceSearch) {
  const std::vector<SystemCase> cases{
      {"m2000", {}},
      {"pod16", {}},
      {"pod64", {}},
      {"pod128", {}},
      {"pod256", {}},
      {"m2000", {"machine.ipus=2", "system.machines_per_rack=3", "system.rack_topology=torus"}},
      {"m2000", {"machine.ipus=6", "system.machines_per_rack=3", "system.rack_topology=torus"}},
      {"m2000", {"machine.ipus=2", "system.machines_per_rack=5", "system.racks=3"}},
      {"m2000", {"machine.ipus=2", "system.machines_per_rack=1", "system.racks=5"}},
      {"pod16", {"system.machines_per_rack=64"}},  // 256 IPUs in one ladder
      {"pod16", {"system.extra_links=0-1:1,0-5:2,3-12:1,7-14:1"}},
      {"pod64", {"system.extra_links=0-31:1,10-50:2"}},
      {"pod128", {"system.extra_links=5-70:1,64-127:1"}},
  };
  for (const auto& c : cases) {
    const SystemSpec spec = load_system(system_path(c.file), c.overrides).spec;
    SCOPED_TRACE(std::string(c.file) + " " + ::testing::PrintToString(c.overrides));
    const Topology t(spec);
    ReferenceRoutes ref(t);
    std::size_t checked = 0, mismatched = 0;
    for (std::uint32_t src = 0; src < t.ipus(); ++src)
      for (std::uint32_t dst = 0; dst < t.ipus(); ++dst) {
        ++checked;
        const auto expected = ref.route(src, dst);
        if (t.route(src, dst) != expected && ++mismatched <= 3)
          ADD_FAILURE() << "route " << src << " -> " << dst << " differs from the reference";
        if (src != dst) ASSERT_FALSE(expected.empty());
      }
    EXPECT_EQ(mismatched, 0u) << "of " << checked;
  }
}

// Defect G at its scale: the 4,096-IPU system of the reproduction (16 racks of 256) and 4,096
// IPUs in one rack (too large for shared per-rack trees: searched per route). After routing
// an all-IPU ring and every route from 16 sources, the routing state is still a few words per
// node and link plus the per-rack trees, which are at most 64 channels per IPU — the old
// per-pair table held 16 x 4,096 routes and a 4,096-entry tree per destination (>100 MB).
// Routes to 8 destinations are checked against the reference.
TEST(Topology, RoutingMemoryIsLinearInTheIpuCount) {
  for (const auto& overrides :
       {std::vector<std::string>{"system.racks=16", "system.machines_per_rack=64"},
        std::vector<std::string>{"system.machines_per_rack=1024"}}) {
    SCOPED_TRACE(::testing::PrintToString(overrides));
    const Topology t(load_system(system_path("pod16"), overrides).spec);
    ASSERT_EQ(t.ipus(), 4096u);
    const std::size_t bound =
        64 * sizeof(Channel) * t.ipus() + 64 * (std::size_t{t.nodes()} + t.links().size());
    const std::size_t built = t.routing_bytes();
    std::vector<std::uint32_t> all(t.ipus());
    std::iota(all.begin(), all.end(), 0u);
    const auto ring = t.ring(all);
    std::size_t hops = 0;
    for (std::size_t i = 0; i < ring.size(); ++i)
      hops += t.route(ring[i], ring[(i + 1) % ring.size()]).size();
    // One IPU-Link per ring step, except at the 16 rack boundaries of the first system: IPU 1
    // of a rack to IPU 0 of the next is PCIe up, one GW-Link, PCIe down to IPU 1, a rung: 4.
    EXPECT_EQ(hops, ring.size() + (overrides.size() == 2 ? 16 * 3 : 0));
    std::vector<Channel> r;
    for (std::uint32_t src = 0; src < t.ipus(); src += t.ipus() / 16)
      for (std::uint32_t dst = 0; dst < t.ipus(); ++dst) t.route(src, dst, r);
    EXPECT_LE(t.routing_bytes(), bound) << "built with " << built << " bytes";
    ReferenceRoutes ref(t);
    for (std::uint32_t dst = 5; dst < t.ipus(); dst += t.ipus() / 8)
      for (std::uint32_t src = 0; src < t.ipus(); ++src) {
        t.route(src, dst, r);
        ASSERT_EQ(r, ref.route(src, dst)) << src << " -> " << dst;
      }
    EXPECT_LE(t.routing_bytes(), bound);
  }
}

TEST(LinkSchedule, FlowsSharingALinkQueue) {
  const Topology t(load_system(system_path("pod16")).spec);
  LinkSchedule s(t);
  const double rate = 2 * 128.0 * (1u << 30) / 8 * 0.32 / 1.325e9;  // rail, bytes/cycle
  const std::uint64_t hold = static_cast<std::uint64_t>(std::ceil(1e6 / rate));
  const std::uint64_t latency = 20;  // 15 ns at 1.325 GHz, rounded up
  const std::vector<Flow> one{{0, 2, 1000000}};
  EXPECT_EQ(s.run(one, 100), 100 + hold + latency);
  // Two flows on the same rail hop: the second waits for the first.
  LinkSchedule s2(t);
  const std::vector<Flow> two{{0, 2, 1000000}, {0, 2, 1000000}};
  EXPECT_EQ(s2.run(two, 0), 2 * hold + latency);
  // Opposite directions do not contend.
  LinkSchedule s3(t);
  const std::vector<Flow> both{{0, 2, 1000000}, {2, 0, 1000000}};
  EXPECT_EQ(s3.run(both, 0), hold + latency);
}

TEST(Collective, EveryStepAfterTheFirstPaysTheExternalSyncOfItsDomain) {
  // A ring all-gather of 4 MiB per IPU over IPUs 0..3 of a POD16: the GCL ring 0 -> 2 -> 3 ->
  // 1 -> 0 (two rail hops, two rung hops), 3 steps of 1 MiB chunks, each bound by a rail hop
  // (2 IPU-Links x 128 Gibit/s x 0.32) plus its 15 ns latency (20 cycles). Each step is a BSP
  // superstep: the two after the first start with an external sync (the first one's is the
  // group step's own). Fixed cost = 2 syncs; bytes over bandwidth = 3 chunks over the rail.
  const Topology t(load_system(system_path("pod16")).spec);
  const ChipSpec& chip = t.system().chip;
  const double rate = 2 * 128.0 * (1u << 30) / 8 * 0.32 / 1.325e9;  // rail, bytes/cycle
  const std::uint64_t step = static_cast<std::uint64_t>(std::ceil((1u << 20) / rate)) + 20;
  const std::vector<std::uint32_t> members{0, 1, 2, 3};
  const std::uint64_t sync = t.sync_cycles(members);
  EXPECT_EQ(sync, 80u);  // 4 IPUs: ceil(2 x 2 hops x 15 ns x 1.325 GHz)
  for (const std::uint64_t step_sync : {std::uint64_t{0}, sync, std::uint64_t{10000}}) {
    LinkSchedule links(t);
    const auto o =
        run_collective(links, chip, trace::CollectiveOp::kAllGather, trace::CollectiveMethod::kRing,
                       members, 4u << 20, trace::DType::kHalf, 1000, step_sync);
    EXPECT_EQ(o.end, 1000 + 3 * step + 2 * step_sync) << step_sync;
  }
  // Replicas syncing independently: each step syncs the IPUs it involves, all four here.
  LinkSchedule links(t);
  const auto o =
      run_collective(links, chip, trace::CollectiveOp::kAllGather, trace::CollectiveMethod::kRing,
                     members, 4u << 20, trace::DType::kHalf, 1000, std::nullopt);
  EXPECT_EQ(o.end, 1000 + 3 * step + 2 * sync);
}

}  // namespace
}  // namespace ipusim::topology

namespace ipusim::topology {
namespace {

TEST(CollectiveRegistry, EveryTraceMethodHasOneAlgorithmAndAutoTriesThemAll) {
  // The trace's methods other than auto, each registered once under its own name, in the
  // order auto tries them (ring first: a tie keeps the plain ring).
  const auto& all = collective_algorithms();
  ASSERT_EQ(all.size(), trace::kCollectiveMethodNames.size() - 1);
  EXPECT_EQ(all.front()->method(), trace::CollectiveMethod::kRing);
  for (std::size_t m = 0; m < trace::kCollectiveMethodNames.size(); ++m) {
    const auto method = static_cast<trace::CollectiveMethod>(m);
    if (method == trace::CollectiveMethod::kAuto) {
      EXPECT_THROW(collective_algorithm(method), ModelError);
      continue;
    }
    EXPECT_EQ(collective_algorithm(method).method(), method) << trace::kCollectiveMethodNames[m];
    EXPECT_EQ(
        std::count_if(all.begin(), all.end(), [&](const auto* a) { return a->method() == method; }),
        1);
  }
  // Ring-based algorithms lay out passes (and compose over racks); broadcast-reduce does not.
  const std::vector<std::uint32_t> four{0, 1, 2, 3};
  EXPECT_EQ(ring_algorithm().passes(four, four, 4000).size(), 1u);
  EXPECT_EQ(ring_algorithm().passes(four, four, 4000)[0].chunk, 1000u);               // 4000 / 4
  EXPECT_EQ(bidirectional_ring_algorithm().passes(four, four, 4000)[1].chunk, 500u);  // / 2 x 4
  EXPECT_EQ(quad_ring_algorithm().passes(four, four, 4000).size(), 4u);
  EXPECT_EQ(quad_ring_algorithm().passes(four, four, 4000)[3].chunk, 250u);  // / 4 x 4
  EXPECT_TRUE(broadcast_reduce_algorithm().passes(four, four, 4000).empty());
}

}  // namespace
}  // namespace ipusim::topology

namespace ipusim::topology {
namespace {

// A collective that starts with every link free, replayed from its effect at a later start
// on free links, leaves the links exactly as running it there does: every channel's use and
// busy time, and what a later transfer finds (model::Fabric replays recurring collectives so).
TEST(LinkSchedule, ACollectiveOnFreeLinksReplaysExactlyLater) {
  for (const std::string system : {"pod16", "pod256"}) {
    const Topology topo(load_system(system_path(system)).spec);
    const ChipSpec& chip = topo.system().chip;
    std::vector<std::uint32_t> all(topo.ipus()), few{0, 1, 2, 3, 5, 8};
    std::iota(all.begin(), all.end(), 0u);
    const std::vector<Flow> earlier{{0, 1, 1 << 20}, {2, 6, 1 << 16}};
    const std::vector<Flow> probe{{1, 0, 4096}, {3, 2, 4096}, {0, topo.ipus() - 1, 4096}};
    for (const auto op : {trace::CollectiveOp::kAllReduce, trace::CollectiveOp::kAllGather})
      for (const auto* members : {&all, &few})
        for (const auto method : {trace::CollectiveMethod::kAuto, trace::CollectiveMethod::kRing})
          for (const std::uint64_t bytes : {std::uint64_t{64}, std::uint64_t{1} << 24}) {
            LinkSchedule first(topo);
            const std::uint64_t idle = first.run(earlier, 0);  // links free from here
            const LinkSchedule before = first;
            const std::uint64_t start = idle + 7;
            const auto ran = run_collective(first, chip, op, method, *members, bytes,
                                            trace::DType::kHalf, start, topo.sync_cycles(*members));
            const LinkSchedule::Effect effect = first.effect_since(before, start);
            // Later, on free links again: run it, or replay it.
            const std::uint64_t later = ran.end + 1000;
            LinkSchedule run_again = first, replayed = first;
            const auto again =
                run_collective(run_again, chip, op, method, *members, bytes, trace::DType::kHalf,
                               later, topo.sync_cycles(*members));
            replayed.replay(effect, later);
            const std::string what = system + " op " + std::to_string(static_cast<int>(op)) +
                                     " members " + std::to_string(members->size()) + " bytes " +
                                     std::to_string(bytes);
            EXPECT_EQ(again.end - later, ran.end - start) << what;
            ASSERT_EQ(replayed.use().size(), run_again.use().size());
            for (std::size_t c = 0; c < run_again.use().size(); ++c) {
              EXPECT_EQ(replayed.use()[c].bytes, run_again.use()[c].bytes) << what << " " << c;
              EXPECT_EQ(replayed.use()[c].busy_cycles, run_again.use()[c].busy_cycles) << what;
            }
            std::vector<std::uint64_t> a, b;
            replayed.busy_after(later, a);
            run_again.busy_after(later, b);
            EXPECT_EQ(a, b) << what;
            EXPECT_EQ(replayed.run(probe, later + 5), run_again.run(probe, later + 5)) << what;
          }
  }
}

// ring_steps (which replays the steps after the second) = every step run on the links one by
// one, as the ring is defined: the same end, channel use and busy links after, from free or
// busy links, with and without reductions and domain syncs; and it stops a trial (abort_at) in
// the same cases.
TEST(CollectiveContext, RingStepsAreEveryStepRunInTurn) {
  for (const std::string system : {"pod16", "pod256"}) {
    const Topology topo(load_system(system_path(system)).spec);
    const ChipSpec& chip = topo.system().chip;
    std::vector<std::uint32_t> all(topo.ipus()), few{0, 1, 2, 3, 5, 8};
    std::iota(all.begin(), all.end(), 0u);
    const std::vector<Flow> busy{{0, 1, 1 << 22}, {2, 6, 1 << 20}};
    for (const auto* members : {&all, &few})
      for (const bool earlier : {false, true})
        for (const bool reduce : {false, true})
          for (const std::optional<std::uint64_t> domain :
               {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{900}}) {
            const std::vector<RingPass> passes =
                bidirectional_ring_algorithm().passes(*members, topo.ring(*members), 1 << 20);
            const std::vector<std::vector<std::uint32_t>> groups{*members};
            const std::size_t steps = members->size() - 1;
            LinkSchedule start(topo);
            if (earlier) start.run(busy, 0);
            LinkSchedule fast = start, slow = start;
            CollectiveContext c(fast, chip, trace::DType::kHalf, domain);
            const std::uint64_t got = c.ring_steps(passes, groups, steps, reduce, 50);
            // By hand: the first step at the ready cycle, each later one a sync after the one
            // before ended (and its reduction), all of a step's flows at once.
            const std::uint64_t sync = domain ? *domain : topo.sync_cycles(*members);
            std::vector<Flow> flows;
            std::uint64_t chunk = 0;
            for (const RingPass& p : passes) {
              const std::size_t n = p.order.size();
              for (std::size_t i = 0; i < n; ++i)
                flows.push_back(
                    {p.order[i], p.order[p.reverse ? (i + n - 1) % n : (i + 1) % n], p.chunk});
              chunk = std::max(chunk, p.chunk);
            }
            std::uint64_t t = 50;
            for (std::size_t s = 0; s < steps; ++s) {
              t = slow.run(flows, s == 0 ? t : t + sync);
              if (reduce) t += reduce_cycles(chip, chunk, 2, trace::DType::kHalf);
            }
            const std::string what = system + " members " + std::to_string(members->size()) +
                                     (earlier ? " busy" : " free") + (reduce ? " reduce" : "") +
                                     (domain ? " domain" : "");
            EXPECT_EQ(got, t) << what;
            for (std::size_t ch = 0; ch < slow.use().size(); ++ch) {
              EXPECT_EQ(fast.use()[ch].bytes, slow.use()[ch].bytes) << what << " " << ch;
              EXPECT_EQ(fast.use()[ch].busy_cycles, slow.use()[ch].busy_cycles) << what;
            }
            std::vector<std::uint64_t> a, b;
            fast.busy_after(0, a);
            slow.busy_after(0, b);
            EXPECT_EQ(a, b) << what;
            // Under abort_at: stopped exactly when stepping would stop.
            for (const std::uint64_t at : {t - 1, t + 1, t / 2}) {
              LinkSchedule f = start, g = start;
              f.abort_at(at);
              g.abort_at(at);
              CollectiveContext cf(f, chip, trace::DType::kHalf, domain);
              bool f_stopped = false, g_stopped = false;
              try {
                (void)cf.ring_steps(passes, groups, steps, reduce, 50);
              } catch (const LinkSchedule::Exceeded&) {
                f_stopped = true;
              }
              try {
                std::uint64_t u = 50;
                for (std::size_t s = 0; s < steps; ++s) {
                  u = g.run(flows, s == 0 ? u : u + sync);
                  if (reduce) u += reduce_cycles(chip, chunk, 2, trace::DType::kHalf);
                }
              } catch (const LinkSchedule::Exceeded&) {
                g_stopped = true;
              }
              EXPECT_EQ(f_stopped, g_stopped) << what << " abort at " << at;
            }
          }
  }
}

// `auto` runs the fastest algorithm (the first of equals) and leaves the links as that
// algorithm alone would: the same end, method and per-channel use, and the same busy links
// for what comes next. Its trials stop early once they cannot win, and the winning trial's
// state is kept instead of running it again; neither may change anything.
TEST(CollectiveRegistry, AutoEqualsTheFastestAlgorithmGclWouldPickRunAlone) {
  for (const std::string system : {"pod16", "pod128"}) {
    const Topology topo(load_system(system_path(system)).spec);
    const ChipSpec& chip = topo.system().chip;
    std::vector<std::uint32_t> all(topo.ipus()), few{0, 1, 2, 3, 5, 8};
    std::iota(all.begin(), all.end(), 0u);
    const std::vector<Flow> busy{{0, 1, 1 << 20}, {2, 6, 1 << 16}};  // links not idle
    const std::vector<Flow> probe{{1, 0, 4096}, {3, 2, 4096}, {0, topo.ipus() - 1, 4096}};
    for (const auto op : {trace::CollectiveOp::kAllReduce, trace::CollectiveOp::kReduceScatter,
                          trace::CollectiveOp::kAllGather, trace::CollectiveOp::kBroadcast})
      for (const auto* members : {&all, &few})
        for (const std::uint64_t bytes : {std::uint64_t{64}, std::uint64_t{1} << 26})
          for (const bool idle : {true, false}) {
            LinkSchedule start(topo);
            if (!idle) start.run(busy, 0);
            // The fastest algorithm GCL's auto may pick (broadcast-reduce when members x bytes
            // <= fabric.gcl.max_broadcast_size, 2048 B; a ring-based one otherwise), each
            // tried alone on copies.
            const bool small = members->size() * bytes <= 2048;
            const CollectiveAlgorithm* fastest = nullptr;
            std::uint64_t fastest_end = 0;
            for (const auto* a : collective_algorithms()) {
              if ((a->method() == trace::CollectiveMethod::kBroadcastReduce) != small) continue;
              LinkSchedule copy = start;
              const auto o = run_collective(copy, chip, op, a->method(), *members, bytes,
                                            trace::DType::kHalf, 100, topo.sync_cycles(*members));
              if (!fastest || o.end < fastest_end) {
                fastest = a;
                fastest_end = o.end;
              }
            }
            LinkSchedule alone = start, chosen = start;
            const auto expected =
                run_collective(alone, chip, op, fastest->method(), *members, bytes,
                               trace::DType::kHalf, 100, topo.sync_cycles(*members));
            const auto got =
                run_collective(chosen, chip, op, trace::CollectiveMethod::kAuto, *members, bytes,
                               trace::DType::kHalf, 100, topo.sync_cycles(*members));
            const std::string what = system + " op " + std::to_string(static_cast<int>(op)) +
                                     " members " + std::to_string(members->size()) + " bytes " +
                                     std::to_string(bytes) + (idle ? " idle" : " busy");
            EXPECT_EQ(got.end, expected.end) << what;
            EXPECT_EQ(got.method, expected.method) << what;
            EXPECT_EQ(got.hierarchical, expected.hierarchical) << what;
            ASSERT_EQ(chosen.use().size(), alone.use().size());
            for (std::size_t c = 0; c < alone.use().size(); ++c) {
              EXPECT_EQ(chosen.use()[c].bytes, alone.use()[c].bytes) << what << " channel " << c;
              EXPECT_EQ(chosen.use()[c].busy_cycles, alone.use()[c].busy_cycles) << what;
            }
            EXPECT_EQ(chosen.run(probe, got.end), alone.run(probe, expected.end)) << what;
          }
  }
}

}  // namespace
}  // namespace ipusim::topology
