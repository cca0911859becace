// SPDX-License-Identifier: Apache-2.0
// The tile clock as SystemC time.
#pragma once

#include <cmath>
#include <systemc>

#include "ipusim/util/units.hpp"

namespace ipusim::model {

// One cycle of `clock` as SystemC time: the period rounded to whole picoseconds, the time
// resolution simulate() sets (755 ps at 1.325 GHz). Every module waits in multiples of it.
inline sc_core::sc_time clock_period(Frequency clock) {
  return sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(std::llround(clock.period_ps())));
}

}  // namespace ipusim::model
