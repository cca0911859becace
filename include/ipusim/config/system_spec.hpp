// SPDX-License-Identifier: Apache-2.0
// The resolved description of a system of IPUs: the chip, the machine (IPU-M2000) that holds
// them, the IPU-Fabric links and how many machines and racks there are. Built from
// configs/systems/*.yaml, which include a chip, a machine and a fabric part (configs/parts/).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim {

// One direction of a link bundle: raw rate x efficiency x lanes is what a transfer gets.
struct LinkParams {
  Bandwidth bandwidth;    // raw rate of one link, each direction
  double efficiency = 1;  // fraction of the raw rate available to payload
  Duration latency;       // per hop
  double effective_bytes_per_second() const { return bandwidth.bytes_per_second * efficiency; }
};

// How a machine's IPUs reach the host: through an IPU-Gateway (IPU-M2000, Bow-2000: PCIe to
// the gateway, then RoCE to the host server; Streaming Memory in gateway DDR) or directly on
// the host server's PCIe bus (a PCIe card such as the C600: the chip's own host link,
// chip.host.*, and no gateway, so no machine.gateway.* or machine.host_link.* keys).
enum class HostAttach { kGateway, kPcie };
inline constexpr std::array<std::pair<std::string_view, HostAttach>, 2> kHostAttachNames{
    {{"gateway", HostAttach::kGateway}, {"pcie", HostAttach::kPcie}}};

struct MachineSpec {
  std::string name;
  HostAttach host_attach = HostAttach::kGateway;
  std::uint32_t ipus = 0;         // IPUs per machine (4 in an M2000: two rungs of two)
  std::uint32_t rung_links = 0;   // IPU-Links between the two IPUs of a rung
  std::uint32_t rail_links = 0;   // IPU-Links from an IPU to the next one up its rail
  std::uint32_t gw_links = 0;     // GW-Links leaving the machine's gateway
  Bandwidth pcie_bandwidth;       // each IPU <-> gateway, each direction
  Bytes streaming_memory;         // gateway DDR capacity
  Bandwidth ddr_bandwidth;        // gateway DDR, shared by the machine's IPUs
  Duration gateway_latency;       // per streaming-memory or GW transfer
  Bandwidth host_link_bandwidth;  // host <-> machine (RoCE), shared by the machine's IPUs
  Duration host_latency;          // per host transfer
};

struct FabricSpec {
  LinkParams ipu_link;
  LinkParams gw_link;
  Duration sync_hop_latency;  // external sync: time per hop of the sync tree
  std::uint32_t sync_ipus_per_hop = 0;
  Bandwidth host_server_bandwidth;  // NIC bandwidth of one host server
  // GCL's `auto` method broadcasts a collective whose members x bytes is at most this (GCL
  // option syncful.maxBroadcastSize), and runs a ring-based method otherwise.
  Bytes gcl_max_broadcast_size;
};

enum class RackTopology { kLadder, kTorus };
inline constexpr std::array<std::pair<std::string_view, RackTopology>, 2> kRackTopologyNames{
    {{"ladder", RackTopology::kLadder}, {"torus", RackTopology::kTorus}}};
// system.kind: a pod (is_pod) or a machine.
inline constexpr std::array<std::pair<std::string_view, bool>, 2> kSystemKindNames{
    {{"pod", true}, {"machine", false}}};

// An extra IPU-Link bundle for what-if topologies: IPUs a and b joined by `links` links.
struct ExtraLink {
  std::uint32_t a = 0, b = 0, links = 0;
};

struct SystemSpec {
  std::string name;
  bool is_pod = true;  // PODs must have a power-of-two IPU count of at least 16
  ChipSpec chip;
  MachineSpec machine;
  FabricSpec fabric;
  std::uint32_t machines_per_rack = 0;
  std::uint32_t racks = 0;
  RackTopology topology = RackTopology::kLadder;
  std::uint32_t host_servers = 0;
  std::vector<ExtraLink> extra_links;

  std::uint32_t machines() const { return machines_per_rack * racks; }
  std::uint32_t ipus() const { return machines() * machine.ipus; }
  std::uint32_t ipus_per_rack() const { return machines_per_rack * machine.ipus; }
  // External BSP sync of a group of IPUs, in tile cycles. Inside a rack, over the Sync-Links
  // (ipu-hardware.md §2, IPUModel): hops = 1 + n / ipus_per_hop for the `n` members of the
  // rack with the most. A group that spans racks also sends the sync over the GW-Links to the
  // farthest rack of the group and back (`rack_distance` hops of the ring of racks, each a
  // GW-Link latency): cycles = ceil(2 x (hops x hop latency + rack_distance x GW latency) x
  // clock).
  std::uint64_t sync_cycles(std::uint32_t n_in_rack, std::uint32_t rack_distance) const;
  // The same for the first n IPUs of the system (consecutive IPUs, rack by rack).
  std::uint64_t sync_cycles(std::uint32_t n) const;
};

}  // namespace ipusim
