// SPDX-License-Identifier: Apache-2.0
// System configs, the link graph and routing, against the structure in
// ../shared/reference/ipu-hardware.md §2 counted by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <numeric>

#include "ipusim/config/system.hpp"
#include "ipusim/topology/link_schedule.hpp"
#include "ipusim/topology/topology.hpp"
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
  for (const char* name : {"m2000", "pod16", "pod64", "pod128", "pod256", "bow-pod16", "bow-pod64",
                           "bow-pod128", "bow-pod256"}) {
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

TEST(SystemConfig, LinkToAMissingIpu) {
  const std::string e = error_of(system_path("pod16"), {"system.extra_links=0-15:2,3-16:1"});
  EXPECT_NE(e.find("system.extra_links: link 3-16 names IPU 16, but the system has IPUs 0..15"),
            std::string::npos)
      << e;
  EXPECT_NE(error_of(system_path("pod16"), {"system.extra_links=0-x"}).find("expected \"a-b:n\""),
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

TEST(Topology, Pod16IsALadderOfEightRungs) {
  const Topology t(load_system(system_path("pod16")).spec);
  EXPECT_EQ(count(t, LinkKind::kRung), 8u);
  EXPECT_EQ(count(t, LinkKind::kRail), 2u * 7);  // two rails, open at the ends
  EXPECT_EQ(count(t, LinkKind::kPcie), 16u);
  EXPECT_EQ(count(t, LinkKind::kGw), 0u);
  // Rung bundle: 4 links x 128 Gibit/s x 0.85 each way.
  const double link = 128.0 * (1u << 30) / 8 * 0.85;
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
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(t.route(expected[i], expected[(i + 1) % 16]).size(), 1u);
}

TEST(LinkSchedule, FlowsSharingALinkQueue) {
  const Topology t(load_system(system_path("pod16")).spec);
  LinkSchedule s(t);
  const double rate = 2 * 128.0 * (1u << 30) / 8 * 0.85 / 1.325e9;  // rail, bytes/cycle
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

}  // namespace
}  // namespace ipusim::topology
