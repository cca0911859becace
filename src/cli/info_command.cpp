// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <iostream>

#include "common.hpp"
#include "ipusim/config/chip.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::cli {

int info_command(int argc, char** argv) {
  CommonOptions common;
  ChipOptions chip_opts;
  bool reference = false;
  po::options_description desc("Options");
  add_common_options(desc, common);
  add_chip_options(desc, chip_opts);
  desc.add_options()("config-reference", po::bool_switch(&reference),
                     "print the Markdown reference of every chip config key and exit");
  parse("info", argc, argv, desc);
  if (common.help) {
    print_help("ipusim info [--chip FILE] [--set KEY=VALUE]...",
               "Prints the resolved chip (after overrides) and its derived peaks: FLOP/s per\n"
               "precision, total memory, memory and exchange bandwidth.",
               desc);
    return 0;
  }
  apply_log_level(common.log_level);
  if (reference) {
    std::cout << config::reference_markdown(chip_schema());
    return 0;
  }
  const LoadedChip loaded = load_chip_options(chip_opts);
  const ChipSpec& c = loaded.spec;
  std::cout << fmt::format("chip {} ({})\n", c.name, chip_opts.chip_file);
  std::cout << fmt::format("  tiles             {} x {} = {}\n", c.tiles,
                           human_bytes(static_cast<double>(c.tile_memory.count)),
                           human_bytes(static_cast<double>(c.total_memory().count)));
  std::cout << fmt::format("  clock             {}\n", human_rate(c.clock.hz, "Hz"));
  std::cout << fmt::format("  peak FP16.16      {} ({} MAC/cycle/tile)\n",
                           human_rate(c.peak_flops(true, false), "FLOP/s"),
                           c.peak_macs_per_cycle_per_tile(true, false));
  std::cout << fmt::format("  peak FP16.32      {} ({} MAC/cycle/tile)\n",
                           human_rate(c.peak_flops(true, true), "FLOP/s"),
                           c.peak_macs_per_cycle_per_tile(true, true));
  std::cout << fmt::format("  peak FP32         {} ({} MAC/cycle/tile)\n",
                           human_rate(c.peak_flops(false, true), "FLOP/s"),
                           c.peak_macs_per_cycle_per_tile(false, true));
  const double load_store = (c.memory.interleaved_load_bytes_per_cycle.value + c.datapath_width.count) *
                            c.tiles * c.clock.hz;
  std::cout << fmt::format("  memory bandwidth  {} (load {} B/cycle + store {} B/cycle per tile)\n",
                           human_rate(load_store, "B/s"), c.memory.interleaved_load_bytes_per_cycle.value,
                           c.datapath_width.count);
  std::cout << fmt::format("  exchange          {} all-to-all ({} B/cycle/tile each way)\n",
                           human_rate(c.exchange_bandwidth(), "B/s"), c.exchange.bytes_per_cycle.value);
  std::cout << fmt::format("  sync              {} cycles ({})\n", c.sync.internal_latency.count,
                           human_seconds(c.clock.seconds(c.sync.internal_latency)));
  std::cout << fmt::format("  host link         {} each way\n",
                           human_rate(c.host.bandwidth.bytes_per_second, "B/s"));
  std::cout << "\nresolved config:\n" << loaded.resolved.to_yaml();
  return 0;
}

}  // namespace ipusim::cli
