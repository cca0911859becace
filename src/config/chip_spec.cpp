// SPDX-License-Identifier: Apache-2.0
#include "ipusim/config/chip_spec.hpp"

namespace ipusim {

double ChipSpec::peak_macs_per_cycle_per_tile(bool half_in, bool float_partials) const {
  if (half_in) {
    const AmpPath& path = float_partials ? amp.half_float : amp.half_half;
    return static_cast<double>(path.engines) * amp.macs_per_engine_half;
  }
  return static_cast<double>(amp.float_float.engines) * amp.macs_per_engine_float;
}

double ChipSpec::peak_flops(bool half_in, bool float_partials) const {
  return 2.0 * peak_macs_per_cycle_per_tile(half_in, float_partials) * tiles * clock.hz;
}

double ChipSpec::exchange_bandwidth() const {
  return exchange.bytes_per_cycle.value * tiles * clock.hz;
}

}  // namespace ipusim
