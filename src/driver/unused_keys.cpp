// SPDX-License-Identifier: Apache-2.0
#include "ipusim/driver/unused_keys.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "ipusim/config/chip.hpp"

namespace ipusim::driver {
namespace {

// What a run's AMP vertices take: their input and partials types, and the fastest weight load
// any of them can use (bytes/cycle; infinite for one that loads at the chip's full rate).
struct AmpUse {
  bool any = false, half_in = false, float_in = false, half_half = false, half_float = false;
  double load_cap = 0;
};

AmpUse amp_use(const trace::Trace& trace) {
  namespace s = trace::slot;
  AmpUse u;
  for (const auto& program : trace.ipus)
    for (const auto& cs : program.compute_sets)
      for (const auto& v : cs.vertices) {
        std::int64_t in = 0, partials = 0;
        double cap = std::numeric_limits<double>::infinity();
        switch (v.codelet) {
          case trace::Codelet::kAmpConv1x1:
          case trace::Codelet::kAmpConvNx1: {
            in = v.params[s::kAmpIn];
            partials = v.params[s::kAmpPartials];
            const std::int64_t bits =
                v.params[v.codelet == trace::Codelet::kAmpConv1x1 ? s::kAmp1x1CoeffLoadBits
                                                                  : s::kAmpNx1CoeffLoadBits];
            if (bits > 0) cap = static_cast<double>(bits) / 8.0;
            break;
          }
          case trace::Codelet::kAmpSlic:
            in = v.params[s::kSlicIn];
            partials = v.params[s::kSlicPartials];
            break;
          default:
            continue;
        }
        const bool half_in = in == static_cast<std::int64_t>(trace::DType::kHalf);
        const bool half_partials = partials == static_cast<std::int64_t>(trace::DType::kHalf);
        u.any = true;
        u.half_in |= half_in;
        u.float_in |= !half_in;
        u.half_half |= half_in && half_partials;
        u.half_float |= half_in && !half_partials;
        u.load_cap = std::max(u.load_cap, cap);
      }
  return u;
}

}  // namespace

std::vector<std::string> unused_by_run(const std::vector<std::string>& overrides,
                                       const ChipSpec& chip, const SystemSpec* system,
                                       const trace::Trace& trace, const RunStats& stats) {
  const AmpUse amp = amp_use(trace);
  std::uint64_t rung_bytes = 0, rail_bytes = 0, extra_bytes = 0, gw_bytes = 0, group_steps = 0,
                collectives = 0;
  for (const LinkUse& l : stats.links) {
    const std::string kind = l.name.substr(0, l.name.find(':'));
    if (kind == "rung") rung_bytes += l.bytes;
    if (kind == "rail") rail_bytes += l.bytes;
    if (kind == "extra") extra_bytes += l.bytes;
    if (kind == "gw") gw_bytes += l.bytes;
  }
  for (const auto& ipu : stats.ipus) {
    group_steps += ipu.counts[PhaseKind::kExternalSync] + ipu.counts[PhaseKind::kCollective] +
                   ipu.counts[PhaseKind::kInterIpu];
    collectives += ipu.counts[PhaseKind::kCollective];
  }
  const auto no_amp = [&](bool used, const char* what) -> std::string {
    if (used) return "";
    return amp.any ? fmt::format("no AMP (conv or matmul) vertex of this run takes {}", what)
                   : "this run has no AMP (conv or matmul) vertex";
  };
  const auto why = [&](const std::string& key) -> std::string {
    if (key == "chip.amp.engines_half_half") return no_amp(amp.half_half, "half partials");
    if (key == "chip.amp.engines_half_float")
      return no_amp(amp.half_float, "half input with float partials");
    if (key == "chip.amp.engines_float_float" || key == "chip.amp.weights_per_engine_float" ||
        key == "chip.amp.macs_per_engine_float")
      return no_amp(amp.float_in, "float input");
    if (key == "chip.amp.weights_per_engine_half" || key == "chip.amp.macs_per_engine_half")
      return no_amp(amp.half_in, "half input");
    if (key == "chip.amp.coeff_load_bytes_per_cycle") {
      if (!amp.any) return no_amp(false, "");
      if (chip.amp.coeff_load_bytes_per_cycle.value >= amp.load_cap)
        return fmt::format(
            "every AMP vertex of this run loads its weights at most {:g} B/cycle (run."
            "conv_unit_load_bits {:g}), which the chip's rate does not limit",
            amp.load_cap, amp.load_cap * 8);
      return "";
    }
    if (!system) return "";
    // A system of one IPU or one rack was said to lack its IPU-Links or GW-Links when it was
    // loaded (LoadedSystem::warnings): only a system that has them is judged by its traffic.
    const bool ipu_links = system->ipus() >= 2;
    if (key.starts_with("fabric.ipu_link."))
      return ipu_links && rung_bytes + rail_bytes + extra_bytes == 0
                 ? "no data crossed an IPU-Link in this run"
                 : "";
    if (key == "machine.rung_links")
      return ipu_links && rung_bytes == 0 ? "no data crossed the IPU-Links of a rung in this run"
                                          : "";
    if (key == "machine.rail_links")
      return ipu_links && rail_bytes == 0 ? "no data crossed the IPU-Links of a rail in this run"
                                          : "";
    if (key == "system.rack_topology")  // a torus adds rail links: the ends' wrap-around
      return rail_bytes == 0 ? "no data crossed the IPU-Links of a rail in this run, which are "
                               "where a ladder and a torus differ"
                             : "";
    if (key == "system.extra_links")
      return extra_bytes == 0 ? "the added IPU-Links carried no data in this run" : "";
    if (key.starts_with("fabric.gw_link.") || key == "machine.gw_links")
      return system->racks >= 2 && gw_bytes == 0 ? "no data crossed a GW-Link in this run" : "";
    if (key.starts_with("fabric.sync."))
      return group_steps == 0 ? "no IPU synchronised with another in this run" : "";
    if (key.starts_with("fabric.gcl."))
      return ipu_links && collectives == 0 ? "this run has no collective" : "";
    return "";
  };
  return overrides_without_effect(overrides, why);
}

}  // namespace ipusim::driver
