// SPDX-License-Identifier: Apache-2.0
#include "ipusim/config/system.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ipusim/config/chip.hpp"
#include "ipusim/config/field.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim {
namespace {

using config::ParamDecl;
using config::ValueKind;

constexpr double kBig = 1e15;

// One row per machine, fabric and system parameter, bound to the SystemSpec member that holds
// it (config/field.hpp); the chip's rows come from chip_schema().
template <class Access>
config::Field<SystemSpec> row(std::string path, double min, double max, std::string description,
                              std::string source, Access access, bool uncertain = false) {
  return config::field<SystemSpec>(std::move(path), min, max, std::move(description),
                                   std::move(source), access, uncertain);
}

// Sources are rows of ../shared/reference/ipu-hardware.md §1-§2. The includes name the part
// files; system.extra_links is parsed once the IPU count is known.
const std::vector<config::Field<SystemSpec>>& part_fields() {
  static const std::vector<config::Field<SystemSpec>> fields = {
      row("machine.name", 0, 0, "Machine name shown in reports", "-",
          [](SystemSpec& s) { return &s.machine.name; }),
      row("machine.ipus", 1, 64, "IPUs per machine, in rungs of two (1 on a PCIe card)",
          "§2 M2000 contents (4 x GC200); C600 datasheet (one IPU per card)",
          [](SystemSpec& s) { return &s.machine.ipus; }),
      config::enum_field<SystemSpec>(
          "machine.host_attach", kHostAttachNames,
          "gateway: the IPUs reach the host through an IPU-Gateway (machine.gateway.*, "
          "machine.host_link.*); pcie: a PCIe card on the host server's bus, whose host "
          "transfers use the chip's own host link (chip.host.*) and which has no gateway keys",
          "§1 Host interface (in M2000); §1 Host interface (chip): PCIe Gen4 x16",
          [](SystemSpec& s) { return &s.machine.host_attach; }, "gateway"),
      row("machine.rung_links", 1, 64,
          "IPU-Links between the two IPUs of a rung, used for partner traffic",
          "§1 IPU-Link usage in the IPUModel (4 for rung-partner traffic)",
          [](SystemSpec& s) { return &s.machine.rung_links; }),
      row("machine.rail_links", 1, 64,
          "IPU-Links from an IPU to the next IPU up (or down) its rail",
          "§1 IPU-Link usage in the IPUModel (2 up, 2 down); §2 IPU-Links inside an M2000",
          [](SystemSpec& s) { return &s.machine.rail_links; }),
      row("machine.gw_links", 0, 64, "GW-Links from the machine's gateway to other racks",
          "§2 IPU-Fabric per machine (GW-Link 2 x 100 Gbps)",
          [](SystemSpec& s) { return &s.machine.gw_links; }),
      row(
          "machine.gateway.pcie_bandwidth", 1e6, kBig,
          "IPU <-> gateway rate, each direction, per IPU",
          "§1 Host interface (in M2000): PCIe Gen4 x8 per IPU",
          [](SystemSpec& s) { return &s.machine.pcie_bandwidth; }, true),
      row("machine.gateway.streaming_memory", 0, kBig * 1e3,
          "Streaming Memory (gateway DDR) capacity", "§2 Streaming Memory (default 128 GB)",
          [](SystemSpec& s) { return &s.machine.streaming_memory; }),
      row(
          "machine.gateway.ddr_bandwidth", 1e6, kBig,
          "Gateway DDR rate shared by the machine's IPUs",
          "§2 IPU-Gateway (3 DRAM channels; speed not public)",
          [](SystemSpec& s) { return &s.machine.ddr_bandwidth; }, true),
      row(
          "machine.gateway.latency", 0, 1, "Fixed latency of a gateway transfer",
          "no public number", [](SystemSpec& s) { return &s.machine.gateway_latency; }, true),
      row("machine.host_link.bandwidth", 1e6, kBig,
          "Host <-> machine rate (RoCE), shared by the machine's IPUs",
          "§1 Host interface (in M2000): 100 GbE RoCEv2",
          [](SystemSpec& s) { return &s.machine.host_link_bandwidth; }),
      row(
          "machine.host_link.latency", 0, 1, "Fixed latency of a host transfer", "no public number",
          [](SystemSpec& s) { return &s.machine.host_latency; }, true),
      row("fabric.ipu_link.bandwidth", 1e6, kBig, "Raw rate of one IPU-Link, each direction",
          "§1 IPU-Links; §2 IPU-Link physical rate (128 Gibit/s)",
          [](SystemSpec& s) { return &s.fabric.ipu_link.bandwidth; }),
      row(
          "fabric.ipu_link.efficiency", 0.01, 1,
          "Payload fraction of the IPU-Link rate, sustained under load",
          "no public number (§5 open questions: IPU-Link throughput under load); set from the "
          "ResNet-50 IPU-POD256 calibration point (workloads.md §4); the IPUModel assumes 0.85",
          [](SystemSpec& s) { return &s.fabric.ipu_link.efficiency; }, true),
      row(
          "fabric.ipu_link.latency", 0, 1, "IPU-Link latency per hop",
          "no public number (§5 open questions)",
          [](SystemSpec& s) { return &s.fabric.ipu_link.latency; }, true),
      row("fabric.gw_link.bandwidth", 1e6, kBig, "Raw rate of one GW-Link, each direction",
          "§2 IPU-Fabric per machine (GW-Link 2 x 100 Gbps)",
          [](SystemSpec& s) { return &s.fabric.gw_link.bandwidth; }),
      row(
          "fabric.gw_link.efficiency", 0.01, 1, "Payload fraction of the GW-Link rate",
          "no public number (the IPUModel's IPU-Link value, 0.85, assumed)",
          [](SystemSpec& s) { return &s.fabric.gw_link.efficiency; }, true),
      row(
          "fabric.gw_link.latency", 0, 1, "GW-Link latency per hop", "no public number",
          [](SystemSpec& s) { return &s.fabric.gw_link.latency; }, true),
      row("fabric.sync.hop_latency", 0, 1e-3, "External sync time per hop of the sync tree",
          "§2 Sync latency model (IPUModel: 15 ns per hop)",
          [](SystemSpec& s) { return &s.fabric.sync_hop_latency; }),
      row("fabric.sync.ipus_per_hop", 1, 1024, "IPUs per extra sync hop: hops = 1 + n / this",
          "§2 Sync latency model (hops = 1 + (N/2)/2)",
          [](SystemSpec& s) { return &s.fabric.sync_ipus_per_hop; }),
      row("fabric.host_server_bandwidth", 1e6, kBig, "NIC bandwidth of one host server",
          "§2 POD4 DA / POD16 DA (100 GbE RoCEv2 NIC)",
          [](SystemSpec& s) { return &s.fabric.host_server_bandwidth; }),
      row("fabric.gcl.max_broadcast_size", 0, kBig,
          "GCL software: method auto broadcasts a collective of at most this many bytes x "
          "members and uses a ring method otherwise",
          "GCL user guide, options: syncful.maxBroadcastSize (default 2048)",
          [](SystemSpec& s) { return &s.fabric.gcl_max_broadcast_size; }),
      row("system.name", 0, 0, "System name shown in reports", "-",
          [](SystemSpec& s) { return &s.name; }),
      config::enum_field<SystemSpec>(
          "system.kind", kSystemKindNames,
          "pod: IPU count must be a power of two >= 16; machine: no rule on the IPU count (one "
          "machine, or a what-if shape)",
          "§2 POD256 (Pod sizes must be powers of 2 and >= 16)",
          [](SystemSpec& s) { return &s.is_pod; }),
      config::unbound<SystemSpec>({"system.chip", ValueKind::kInclude, 0, 0,
                                   "Chip config file (relative to this file)", "-"}),
      config::unbound<SystemSpec>({"system.machine", ValueKind::kInclude, 0, 0,
                                   "Machine part file (relative to this file)", "-"}),
      config::unbound<SystemSpec>({"system.fabric", ValueKind::kInclude, 0, 0,
                                   "Fabric part file (relative to this file)", "-"}),
      row("system.machines_per_rack", 1, 1024, "Machines stacked in one rack",
          "§2 POD topology; POD64 (16 x M2000)",
          [](SystemSpec& s) { return &s.machines_per_rack; }),
      row("system.racks", 1, 1024, "Racks joined over GW-Links",
          "§2 POD128 / POD256 (2 / 4 x POD64)", [](SystemSpec& s) { return &s.racks; }),
      config::enum_field<SystemSpec>("system.rack_topology", kRackTopologyNames,
                                     "ladder: rails open at the ends; torus: the ends wrap round",
                                     "§2 POD topology", [](SystemSpec& s) { return &s.topology; }),
      row("system.host_servers", 1, 4096, "Host servers feeding the system",
          "§2 POD16 DA (1 server); POD64 (1-4 servers)",
          [](SystemSpec& s) { return &s.host_servers; }),
      config::unbound<SystemSpec>({"system.extra_links", ValueKind::kString, 0, 0,
                                   "What-if IPU-Link bundles added to the generated graph: "
                                   "\"a-b:n,...\" (IPU a to b, n links)",
                                   "-", false, "none"}),
  };
  return fields;
}

std::vector<ExtraLink> parse_extra_links(const std::string& text, std::uint32_t ipus,
                                         const std::string& origin) {
  std::vector<ExtraLink> out;
  if (text == "none" || text.empty()) return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    // Exactly "a-b:n", each 1-9 digits (no sign, space or anything after n).
    std::uint32_t a = 0, b = 0, n = 0;
    std::size_t at = 0;
    const auto number = [&](std::uint32_t& v, char stop) {
      const std::size_t from = at;
      while (at < item.size() && at - from < 9 && item[at] >= '0' && item[at] <= '9')
        v = v * 10 + static_cast<std::uint32_t>(item[at++] - '0');
      if (at == from) return false;
      if (stop == '\0') return at == item.size();
      return at < item.size() && item[at++] == stop;
    };
    if (!(number(a, '-') && number(b, ':') && number(n, '\0')) || n == 0 || a == b)
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

// The keys of a machine's IPU-Gateway and its host link, which a PCIe card does not have.
bool gateway_key(const std::string& path) {
  return path.starts_with("machine.gateway.") || path.starts_with("machine.host_link.");
}

bool pcie_attached(const config::Document& doc) {
  const auto it = doc.values.find("machine.host_attach");
  return it != doc.values.end() &&
         it->second.text == config::enum_name(kHostAttachNames, HostAttach::kPcie);
}

// The schema a system document is checked against: the whole system schema, or without the
// gateway keys for a PCIe card.
const config::Schema& schema_for(const config::Document& doc) {
  static const config::Schema card = [] {
    std::vector<ParamDecl> decls;
    for (const auto& d : system_schema().params())
      if (!gateway_key(d.path)) decls.push_back(d);
    return config::Schema("system", std::move(decls));
  }();
  return pcie_attached(doc) ? card : system_schema();
}

// A PCIe card names no gateway key: the first one found is an error at its line. A machine
// attached through a gateway needs every gateway key without a default: the first missing one
// is an error that says why it is needed (the part may be a card's, switched by --set).
void check_no_gateway_keys(const config::Document& doc) {
  if (!pcie_attached(doc)) {
    const auto attach = doc.values.find("machine.host_attach");
    if (attach == doc.values.end()) return;  // resolve() reports the missing key
    for (const auto& d : system_schema().params())
      if (gateway_key(d.path) && !d.default_text && !doc.values.count(d.path))
        throw ConfigError(fmt::format(
            "{}: machine.host_attach is gateway: the machine reaches the host through an "
            "IPU-Gateway, whose key {} is missing ({})",
            attach->second.key_origin, d.path, d.description));
    return;
  }
  for (const auto& [path, raw] : doc.values)
    if (gateway_key(path))
      throw ConfigError(fmt::format(
          "{}: {}: machine.host_attach is pcie (a PCIe card), which has no IPU-Gateway or "
          "gateway host link: its host transfers use chip.host.*; remove this key",
          raw.key_origin, path));
}

}  // namespace

const config::Schema& system_part_schema(const config::Document& doc) {
  check_no_gateway_keys(doc);
  return schema_for(doc);
}

std::uint64_t SystemSpec::sync_cycles(std::uint32_t n_in_rack, std::uint32_t rack_distance) const {
  const double hops = 1.0 + static_cast<double>(n_in_rack) / fabric.sync_ipus_per_hop;
  const double one_way =
      hops * fabric.sync_hop_latency.seconds + rack_distance * fabric.gw_link.latency.seconds;
  return (Duration{2.0 * one_way} * chip.clock).count;
}

std::uint64_t SystemSpec::sync_cycles(std::uint32_t n) const {
  const std::uint32_t per_rack = std::max<std::uint32_t>(1, ipus_per_rack());
  const std::uint32_t spanned = (n + per_rack - 1) / per_rack;
  // Consecutive racks, on a line or all of the ring: the farthest is spanned / 2 away from
  // the middle one.
  return sync_cycles(std::min(n, per_rack), spanned / 2);
}

const config::Schema& system_schema() {
  static const config::Schema schema = [] {
    std::vector<ParamDecl> all = chip_schema().params();
    for (auto& p : config::decls_of(part_fields())) all.push_back(std::move(p));
    return config::Schema("system", std::move(all));
  }();
  return schema;
}

namespace {

// The links a --set key of the system describes, and why this system has none of them (""
// when it has): a key that changes nothing is said, never silently kept (issue 55, part 1). A
// warning, not an error: one --set over several systems (a sweep from POD16 to POD256, the
// calibration points) is expected to reach some that lack the links. Keys given by the
// system's own files are not checked: its parts are shared by every system.
std::string unused_because(const SystemSpec& s, const std::string& key) {
  if (key.starts_with("fabric.gw_link.") || key == "machine.gw_links")
    return s.racks >= 2
               ? ""
               : fmt::format("GW-Links join racks, and {} has one rack (system.racks 1)", s.name);
  if (key.starts_with("fabric.ipu_link.") || key.starts_with("fabric.gcl.") ||
      key == "machine.rung_links" || key == "machine.rail_links")
    return s.ipus() >= 2 ? ""
                         : fmt::format(
                               "IPU-Links and their collectives join IPUs, and {} has "
                               "one IPU",
                               s.name);
  const bool card = s.machine.host_attach == HostAttach::kPcie;
  if (key.starts_with("chip.host.") && !card)
    return fmt::format(
        "it times a PCIe card's own host link, and {}'s IPUs reach the host through their "
        "IPU-Gateway (machine.host_attach gateway: machine.gateway.*, machine.host_link.*)",
        s.name);
  if ((key == "fabric.host_server_bandwidth" || key == "system.host_servers") && card)
    return fmt::format(
        "a PCIe card's host transfers use its own host link (chip.host.*), and {} is one", s.name);
  if (key == "system.kind")
    return fmt::format(
        "the kind only chooses the rules the system's size is checked against (pod: a power of "
        "two of at least 16 IPUs; machine: none), and {} is simulated the same either way",
        s.name);
  return unused_chip_key(s.chip, key);
}

std::vector<std::string> unused_overrides(const SystemSpec& s,
                                          const std::vector<std::string>& overrides) {
  return overrides_without_effect(overrides,
                                  [&](const std::string& key) { return unused_because(s, key); });
}

}  // namespace

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
  config::Resolved r = config::resolve(doc, system_part_schema(doc));

  SystemSpec s;
  s.chip = chip_from(r);
  for (const auto& f : part_fields())
    if (f.assign && r.values().count(f.decl.path)) f.assign(s, r);
  const auto& m = s.machine;
  const bool card = m.host_attach == HostAttach::kPcie;

  // Whole-system rules, reported against the system file.
  if (card && (m.ipus != 1 || s.machines() != 1))
    throw ConfigError(fmt::format(
        "{}: machine.host_attach is pcie: a PCIe card system is one card of one IPU "
        "(machine.ipus 1, system.machines_per_rack 1, system.racks 1); found machine.ipus {}, "
        "system.machines_per_rack {}, system.racks {} (cards joined by IPU-Links are not "
        "modelled)",
        file, m.ipus, s.machines_per_rack, s.racks));
  if (!card && m.ipus % 2 != 0)
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
        "found {} IPUs (system.racks {} x system.machines_per_rack {} x machine.ipus {})",
        file, ipus, s.racks, s.machines_per_rack, m.ipus));
  if (s.racks > 1 && m.gw_links == 0)
    throw ConfigError(
        fmt::format("{}: {} racks need GW-Links, but machine.gw_links is 0", file, s.racks));
  if (s.topology == RackTopology::kTorus && s.machines_per_rack * m.ipus < 6)
    throw ConfigError(
        fmt::format("{}: system.rack_topology: a torus needs at least 3 rungs per rack", file));
  s.extra_links = parse_extra_links(r.string("system.extra_links"), s.ipus(), file);
  std::vector<std::string> warnings = unused_overrides(s, overrides);
  return LoadedSystem{std::move(s), std::move(r), std::move(warnings)};
}

}  // namespace ipusim
