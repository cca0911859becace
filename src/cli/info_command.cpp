// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "common.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/chip.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/topology/topology.hpp"
#include "ipusim/util/strings.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::cli {

namespace {

// `chip_file`, when --chip was given, replaces the system's chip (as `run` and `compile` do).
int print_system(const std::string& file, const std::vector<std::string>& overrides,
                 const std::optional<std::string>& chip_file) {
  const LoadedSystem loaded = load_system(file, overrides, chip_file);
  for (const auto& w : loaded.warnings)
    std::cerr << fmt::format("ipusim info: warning: {}\n", printable(w));
  const SystemSpec& s = loaded.spec;
  const topology::Topology topo(s);
  std::cout << fmt::format("system {} ({})\n", s.name, file);
  std::cout << fmt::format("  IPUs              {} x {} ({} tiles at {})\n", s.ipus(), s.chip.name,
                           s.chip.tiles, human_frequency(s.chip.clock.hz));
  std::cout << fmt::format("  machines          {} x {} ({} IPU(s) each), {} per rack\n",
                           s.machines(), s.machine.name, s.machine.ipus, s.machines_per_rack);
  const bool card = s.machine.host_attach == HostAttach::kPcie;
  std::cout << fmt::format(
      "  host attach       {}\n",
      card ? fmt::format("PCIe card: the chip's host link, {} each way",
                         human_rate(s.chip.host.bandwidth.bytes_per_second, "B/s"))
           : std::string("IPU-Gateway (PCIe to the gateway, RoCE to the host)"));
  std::cout << fmt::format("  racks             {} ({} each){}\n", s.racks,
                           s.topology == RackTopology::kTorus ? "torus" : "ladder",
                           s.racks > 1 ? ", joined over GW-Links" : "");
  std::cout << fmt::format("  host servers      {}\n", s.host_servers);
  std::cout << fmt::format("  peak FP16.16      {}\n",
                           human_rate(s.chip.peak_flops(true, false) * s.ipus(), "FLOP/s"));
  std::cout << fmt::format(
      "  In-Processor-Memory {}\n",
      human_bytes(static_cast<double>(s.chip.total_memory().count) * s.ipus()));
  std::cout << "  links (bundles; rate per direction):\n";
  for (int k = 0; k < 5; ++k) {
    std::uint32_t count = 0, lanes = 0;
    double rate = 0;
    for (const auto& l : topo.links())
      if (static_cast<int>(l.kind) == k) {
        ++count;
        lanes += l.lanes;
        rate = l.bytes_per_second;
      }
    if (count == 0) continue;
    static const char* kWhat[] = {"IPU-Link rung", "IPU-Link rail", "IPU-Link extra",
                                  "PCIe IPU-gateway", "GW-Link"};
    std::cout << fmt::format("    {:<18} {:>5} bundles, {:>5} links, {} per bundle\n", kWhat[k],
                             count, lanes, human_rate(rate, "B/s"));
  }
  if (s.ipus() >= 2)
    std::cout << fmt::format("  bisection         {} each way (IPUs 0..{} | {}..{})\n",
                             human_rate(topo.bisection_bytes_per_second(), "B/s"), s.ipus() / 2 - 1,
                             s.ipus() / 2, s.ipus() - 1);
  else
    std::cout << "  bisection         none (one IPU)\n";
  std::cout << "  external sync     ";
  if (s.ipus() < 2) std::cout << "none (one IPU)";
  for (std::uint32_t n = 2; n <= s.ipus(); n *= 2)
    std::cout << fmt::format("{}{}: {} cycles", n == 2 ? "" : ", ", n, s.sync_cycles(n));
  std::cout << "\n\nresolved config:\n" << loaded.resolved.to_yaml();
  return 0;
}

}  // namespace

int info_command(int argc, char** argv) {
  CommonOptions common;
  ChipOptions chip_opts;
  bool reference = false, run_reference = false;
  std::string system_file;
  po::options_description desc("Options");
  add_common_options(desc, common);
  add_chip_options(desc, chip_opts);
  desc.add_options()("system", po::value(&system_file)->value_name("FILE"),
                     "describe a system (configs/systems/*.yaml): IPUs, machines, racks, links, "
                     "bisection bandwidth and external sync latency per group size")(
      "config-reference", po::bool_switch(&reference),
      "print the Markdown reference of every config key (chip, machine, fabric, system) and exit")(
      "run-reference", po::bool_switch(&run_reference),
      "print the Markdown reference of every run config key (run.*, configs/runs/*.yaml) and exit");
  const po::variables_map vm = parse("info", argc, argv, desc);
  if (common.help) {
    print_help("ipusim info [--chip FILE | --system FILE] [--set KEY=VALUE]...",
               "Prints the resolved chip (after overrides) and its derived peaks: FLOP/s per\n"
               "precision, total memory, memory and exchange bandwidth. With --system, prints\n"
               "the system: IPU count, machines, racks, link counts and per-direction\n"
               "bandwidths, bisection bandwidth and the external sync latency per group.",
               desc);
    return 0;
  }
  apply_log_level(common.log_level);
  if (reference) {
    std::cout << config::reference_markdown(system_schema());
    return 0;
  }
  if (run_reference) {
    std::cout << config::reference_markdown(compiler::run_schema());
    return 0;
  }
  if (!system_file.empty())
    return print_system(system_file, chip_opts.overrides,
                        vm["chip"].defaulted() ? std::nullopt : std::optional(chip_opts.chip_file));
  const LoadedChip loaded = load_chip_options(chip_opts);
  const ChipSpec& c = loaded.spec;
  std::cout << fmt::format("chip {} ({})\n", c.name, chip_opts.chip_file);
  std::cout << fmt::format("  tiles             {} x {} = {}\n", c.tiles,
                           human_bytes(static_cast<double>(c.tile_memory.count)),
                           human_bytes(static_cast<double>(c.total_memory().count)));
  std::cout << fmt::format("  clock             {}\n", human_frequency(c.clock.hz));
  std::cout << fmt::format("  peak FP16.16      {} ({} MAC/cycle/tile)\n",
                           human_rate(c.peak_flops(true, false), "FLOP/s"),
                           c.peak_macs_per_cycle_per_tile(true, false));
  std::cout << fmt::format("  peak FP16.32      {} ({} MAC/cycle/tile)\n",
                           human_rate(c.peak_flops(true, true), "FLOP/s"),
                           c.peak_macs_per_cycle_per_tile(true, true));
  std::cout << fmt::format("  peak FP32         {} ({} MAC/cycle/tile)\n",
                           human_rate(c.peak_flops(false, true), "FLOP/s"),
                           c.peak_macs_per_cycle_per_tile(false, true));
  const double load_store =
      (c.memory.interleaved_load_bytes_per_cycle.value + c.datapath_width.count) * c.tiles *
      c.clock.hz;
  std::cout << fmt::format("  memory bandwidth  {} (load {} B/cycle + store {} B/cycle per tile)\n",
                           human_rate(load_store, "B/s"),
                           c.memory.interleaved_load_bytes_per_cycle.value, c.datapath_width.count);
  std::cout << fmt::format("  exchange          {} all-to-all ({} B/cycle/tile each way)\n",
                           human_rate(c.exchange_bandwidth(), "B/s"),
                           c.exchange.bytes_per_cycle.value);
  std::cout << fmt::format("  sync              {} cycles ({})\n", c.sync.internal_latency.count,
                           human_seconds((c.sync.internal_latency / c.clock).seconds));
  std::cout << fmt::format("  host link         {} each way\n",
                           human_rate(c.host.bandwidth.bytes_per_second, "B/s"));
  // Tile micro-architecture (issue 18, docs/tile-model.md).
  std::cout << fmt::format("  tile model        {}\n", c.tile_model == TileModel::kIsa
                                                           ? "isa (bundle programs)"
                                                           : "closed_form (poplibs formulas)");
  std::cout << fmt::format(
      "  tile core         {} barrel contexts, issue width {} (main + aux), "
      "result latency {} cycles\n",
      c.worker_contexts, c.tile.issue_width, c.tile.result_latency);
  std::cout << fmt::format(
      "  tile memory ports load {} B/cycle ({} B/cycle paired), store {} B/cycle\n",
      c.memory.load_bytes_per_cycle.value, c.memory.interleaved_load_bytes_per_cycle.value,
      c.tile.store_bytes_per_cycle.value);
  std::cout << fmt::format(
      "  tile AMP          {}/{}/{} engines (hh/hf/ff), pipeline depth {}, "
      "weights {} B/cycle\n",
      c.amp.half_half.engines, c.amp.half_float.engines, c.amp.float_float.engines,
      c.amp.pipeline_depth, c.amp.coeff_load_bytes_per_cycle.value);
  std::cout << fmt::format(
      "  tile supervisor   {} cycle simple, {} cycles control; rpt count max {}\n",
      c.tile.supervisor_simple_cycles, c.tile.supervisor_control_cycles, c.tile.rpt_count_max);
  std::cout << "\nresolved config:\n" << loaded.resolved.to_yaml();
  return 0;
}

}  // namespace ipusim::cli
