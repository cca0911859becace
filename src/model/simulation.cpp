// SPDX-License-Identifier: Apache-2.0
#include "ipusim/model/simulation.hpp"

#include <fmt/format.h>

#include <chrono>
#include <memory>

#include "ipusim/util/error.hpp"

namespace ipusim::model {
namespace {

// Top of the module tree: one Ipu per program (IPUs run independently in trace format v1).
class System : public sc_core::sc_module {
 public:
  System(sc_core::sc_module_name name, const ChipSpec& chip, const trace::Trace& trace,
         const ModelOptions& options)
      : sc_core::sc_module(name) {
    for (const auto& program : trace.ipus)
      ipus.push_back(std::make_unique<Ipu>(fmt::format("ipu{}", program.ipu).c_str(), chip,
                                           program, options));
  }
  std::vector<std::unique_ptr<Ipu>> ipus;
};

}  // namespace

RunStats simulate(const ChipSpec& chip, const trace::Trace& trace, const ModelOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  trace::check_tiles(trace, chip.tiles, trace.name);
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  System system("system", chip, trace, options);
  sc_core::sc_start();
  for (const auto& ipu : system.ipus)
    if (ipu->error()) std::rethrow_exception(ipu->error());
  RunStats stats;
  for (auto& ipu : system.ipus) {
    if (!ipu->finished()) throw ModelError(fmt::format("{} did not finish", ipu->name()));
    stats.ipus.push_back(ipu->stats());
    stats.cycles = std::max(stats.cycles, stats.ipus.back().cycles);
  }
  stats.seconds = chip.clock.seconds(Cycles{stats.cycles});
  stats.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace ipusim::model
