// SPDX-License-Identifier: Apache-2.0
#include "ipusim/config/system.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "ipusim/config/chip.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim {
namespace {

using config::ParamDecl;
using config::ValueKind;

constexpr double kBig = 1e15;

// Sources are rows of ../shared/reference/ipu-hardware.md §1-§2.
std::vector<ParamDecl> part_params() {
  std::vector<ParamDecl> p = {
      {"machine.name", ValueKind::kString, 0, 0, "Machine name shown in reports", "-"},
      {"machine.ipus", ValueKind::kCount, 2, 64, "IPUs per machine, in rungs of two",
       "§2 M2000 contents (4 x GC200)"},
      {"machine.rung_links", ValueKind::kCount, 1, 64,
       "IPU-Links between the two IPUs of a rung, used for partner traffic",
       "§1 IPU-Link usage in the IPUModel (4 for rung-partner traffic)"},
      {"machine.rail_links", ValueKind::kCount, 1, 64,
       "IPU-Links from an IPU to the next IPU up (or down) its rail",
       "§1 IPU-Link usage in the IPUModel (2 up, 2 down); §2 IPU-Links inside an M2000"},
      {"machine.gw_links", ValueKind::kCount, 0, 64,
       "GW-Links from the machine's gateway to other racks",
       "§2 IPU-Fabric per machine (GW-Link 2 x 100 Gbps)"},
      {"machine.gateway.pcie_bandwidth", ValueKind::kBandwidth, 1e6, kBig,
       "IPU <-> gateway rate, each direction, per IPU",
       "§1 Host interface (in M2000): PCIe Gen4 x8 per IPU", true},
      {"machine.gateway.streaming_memory", ValueKind::kBytes, 0, kBig * 1e3,
       "Streaming Memory (gateway DDR) capacity", "§2 Streaming Memory (default 128 GB)"},
      {"machine.gateway.ddr_bandwidth", ValueKind::kBandwidth, 1e6, kBig,
       "Gateway DDR rate shared by the machine's IPUs",
       "§2 IPU-Gateway (3 DRAM channels; speed not public)", true},
      {"machine.gateway.latency", ValueKind::kDuration, 0, 1, "Fixed latency of a gateway transfer",
       "no public number", true},
      {"machine.host_link.bandwidth", ValueKind::kBandwidth, 1e6, kBig,
       "Host <-> machine rate (RoCE), shared by the machine's IPUs",
       "§1 Host interface (in M2000): 100 GbE RoCEv2"},
      {"machine.host_link.latency", ValueKind::kDuration, 0, 1, "Fixed latency of a host transfer",
       "no public number", true},
      {"fabric.ipu_link.bandwidth", ValueKind::kBandwidth, 1e6, kBig,
       "Raw rate of one IPU-Link, each direction",
       "§1 IPU-Links; §2 IPU-Link physical rate (128 Gibit/s)"},
      {"fabric.ipu_link.efficiency", ValueKind::kRatio, 0.01, 1,
       "Payload fraction of the IPU-Link rate", "§1 IPU-Link usage in the IPUModel (0.85)"},
      {"fabric.ipu_link.latency", ValueKind::kDuration, 0, 1, "IPU-Link latency per hop",
       "no public number (§5 open questions)", true},
      {"fabric.gw_link.bandwidth", ValueKind::kBandwidth, 1e6, kBig,
       "Raw rate of one GW-Link, each direction",
       "§2 IPU-Fabric per machine (GW-Link 2 x 100 Gbps)"},
      {"fabric.gw_link.efficiency", ValueKind::kRatio, 0.01, 1,
       "Payload fraction of the GW-Link rate", "no public number (IPU-Link value assumed)", true},
      {"fabric.gw_link.latency", ValueKind::kDuration, 0, 1, "GW-Link latency per hop",
       "no public number", true},
      {"fabric.sync.hop_latency", ValueKind::kDuration, 0, 1e-3,
       "External sync time per hop of the sync tree",
       "§2 Sync latency model (IPUModel: 15 ns per hop)"},
      {"fabric.sync.ipus_per_hop", ValueKind::kCount, 1, 1024,
       "IPUs per extra sync hop: hops = 1 + n / this",
       "§2 Sync latency model (hops = 1 + (N/2)/2)"},
      {"fabric.host_server_bandwidth", ValueKind::kBandwidth, 1e6, kBig,
       "NIC bandwidth of one host server", "§2 POD4 DA / POD16 DA (100 GbE RoCEv2 NIC)"},
      {"system.name", ValueKind::kString, 0, 0, "System name shown in reports", "-"},
      {"system.kind", ValueKind::kString, 0, 0,
       "pod: IPU count must be a power of two >= 16; machine: a single machine",
       "§2 POD256 (Pod sizes must be powers of 2 and >= 16)"},
      {"system.chip", ValueKind::kInclude, 0, 0, "Chip config file (relative to this file)", "-"},
      {"system.machine", ValueKind::kInclude, 0, 0, "Machine part file (relative to this file)",
       "-"},
      {"system.fabric", ValueKind::kInclude, 0, 0, "Fabric part file (relative to this file)", "-"},
      {"system.machines_per_rack", ValueKind::kCount, 1, 1024, "Machines stacked in one rack",
       "§2 POD topology; POD64 (16 x M2000)"},
      {"system.racks", ValueKind::kCount, 1, 1024, "Racks joined over GW-Links",
       "§2 POD128 / POD256 (2 / 4 x POD64)"},
      {"system.rack_topology", ValueKind::kString, 0, 0,
       "ladder: rails open at the ends; torus: the ends wrap round", "§2 POD topology"},
      {"system.host_servers", ValueKind::kCount, 1, 4096, "Host servers feeding the system",
       "§2 POD16 DA (1 server); POD64 (1-4 servers)"},
      {"system.extra_links", ValueKind::kString, 0, 0,
       "What-if IPU-Link bundles added to the generated graph: \"a-b:n,...\" (IPU a to b, n links)",
       "-"},
  };
  for (auto& d : p) {
    if (d.path == "system.kind") d.choices = {"pod", "machine"};
    if (d.path == "system.rack_topology") d.choices = {"ladder", "torus"};
    if (d.path == "system.extra_links") d.default_text = "none";
  }
  return p;
}

std::vector<ExtraLink> parse_extra_links(const std::string& text, std::uint32_t ipus,
                                         const std::string& origin) {
  std::vector<ExtraLink> out;
  if (text == "none" || text.empty()) return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    unsigned a = 0, b = 0, n = 0;
    char tail = 0;
    if (std::sscanf(item.c_str(), "%u-%u:%u%c", &a, &b, &n, &tail) != 3 || n == 0 || a == b)
      throw ConfigError(
          fmt::format("{}: system.extra_links: expected \"a-b:n\" (two different IPUs, n >= 1 "
                      "links), found \"{}\"",
                      origin, item));
    if (a >= ipus || b >= ipus)
      throw ConfigError(fmt::format(
          "{}: system.extra_links: link {}-{} names IPU {}, but the system has IPUs 0..{}", origin,
          a, b, std::max(a, b), ipus - 1));
    out.push_back({a, b, n});
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::uint64_t SystemSpec::sync_cycles(std::uint32_t n) const {
  const double hops = 1.0 + static_cast<double>(n) / fabric.sync_ipus_per_hop;
  return (Duration{2.0 * hops * fabric.sync_hop_latency.seconds} * chip.clock).count;
}

const config::Schema& system_schema() {
  static const config::Schema schema = [] {
    std::vector<ParamDecl> all = chip_schema().params();
    for (auto& p : part_params()) all.push_back(std::move(p));
    return config::Schema("system", std::move(all));
  }();
  return schema;
}

LoadedSystem load_system(const std::string& file, const std::vector<std::string>& overrides,
                         const std::optional<std::string>& chip_file) {
  const config::Schema& schema = system_schema();
  config::Document doc = config::load_document_tree(file, schema);
  if (chip_file) {
    // Replace the included chip by the one given on the command line.
    std::erase_if(doc.values, [](const auto& kv) { return kv.first.starts_with("chip."); });
    const config::Document chip = config::load_document(*chip_file);
    for (const auto& [path, raw] : chip.values) doc.values[path] = raw;
    doc.values["system.chip"].text = *chip_file;
  }
  for (const auto& o : overrides) config::apply_override(doc, o, schema);
  config::Resolved r = config::resolve(doc, schema);

  SystemSpec s;
  s.name = r.string("system.name");
  s.is_pod = r.string("system.kind") == "pod";
  s.chip = chip_from(r);
  auto& m = s.machine;
  m.name = r.string("machine.name");
  m.ipus = static_cast<std::uint32_t>(r.count("machine.ipus"));
  m.rung_links = static_cast<std::uint32_t>(r.count("machine.rung_links"));
  m.rail_links = static_cast<std::uint32_t>(r.count("machine.rail_links"));
  m.gw_links = static_cast<std::uint32_t>(r.count("machine.gw_links"));
  m.pcie_bandwidth = r.bandwidth("machine.gateway.pcie_bandwidth");
  m.streaming_memory = r.bytes("machine.gateway.streaming_memory");
  m.ddr_bandwidth = r.bandwidth("machine.gateway.ddr_bandwidth");
  m.gateway_latency = r.duration("machine.gateway.latency");
  m.host_link_bandwidth = r.bandwidth("machine.host_link.bandwidth");
  m.host_latency = r.duration("machine.host_link.latency");
  auto& f = s.fabric;
  f.ipu_link = {r.bandwidth("fabric.ipu_link.bandwidth"), r.ratio("fabric.ipu_link.efficiency"),
                r.duration("fabric.ipu_link.latency")};
  f.gw_link = {r.bandwidth("fabric.gw_link.bandwidth"), r.ratio("fabric.gw_link.efficiency"),
               r.duration("fabric.gw_link.latency")};
  f.sync_hop_latency = r.duration("fabric.sync.hop_latency");
  f.sync_ipus_per_hop = static_cast<std::uint32_t>(r.count("fabric.sync.ipus_per_hop"));
  f.host_server_bandwidth = r.bandwidth("fabric.host_server_bandwidth");
  s.machines_per_rack = static_cast<std::uint32_t>(r.count("system.machines_per_rack"));
  s.racks = static_cast<std::uint32_t>(r.count("system.racks"));
  s.topology =
      r.string("system.rack_topology") == "torus" ? RackTopology::kTorus : RackTopology::kLadder;
  s.host_servers = static_cast<std::uint32_t>(r.count("system.host_servers"));

  // Whole-system rules, reported against the system file.
  if (m.ipus % 2 != 0)
    throw ConfigError(
        fmt::format("{}: machine.ipus: expected an even number (IPUs come in rungs "
                    "of two), found {}",
                    file, m.ipus));
  const std::uint64_t ipus = static_cast<std::uint64_t>(s.machines()) * m.ipus;
  if (ipus > 65536)
    throw ConfigError(
        fmt::format("{}: the system has {} IPUs; at most 65536 are supported", file, ipus));
  if (s.is_pod && (ipus < 16 || (ipus & (ipus - 1)) != 0))
    throw ConfigError(fmt::format(
        "{}: system.kind is pod, so the IPU count must be a power of two of at least 16; "
        "found {} IPUs ({} racks x {} machines x {} IPUs)",
        file, ipus, s.racks, s.machines_per_rack, m.ipus));
  if (s.racks > 1 && m.gw_links == 0)
    throw ConfigError(
        fmt::format("{}: {} racks need GW-Links, but machine.gw_links is 0", file, s.racks));
  if (s.topology == RackTopology::kTorus && s.machines_per_rack * m.ipus < 6)
    throw ConfigError(
        fmt::format("{}: system.rack_topology: a torus needs at least 3 rungs per rack", file));
  s.extra_links = parse_extra_links(r.string("system.extra_links"), s.ipus(), file);
  return LoadedSystem{std::move(s), std::move(r)};
}

}  // namespace ipusim
