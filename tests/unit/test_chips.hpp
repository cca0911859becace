// SPDX-License-Identifier: Apache-2.0
// Hand-built chip specs for unit tests that must not depend on the config loader.
// Values are the GC200 rows of ../shared/reference/ipu-hardware.md.
#pragma once

#include "ipusim/config/chip_spec.hpp"

namespace ipusim::testing {

inline ChipSpec gc200_by_hand() {
  ChipSpec c;
  c.name = "GC200";
  c.clock = Frequency{1.325e9};
  c.tiles = 1472;
  c.tile_memory = Bytes{624 * 1024};
  c.worker_contexts = 6;
  c.datapath_width = Bytes{8};
  c.memory.load_bytes_per_cycle = BytesPerCycle{8};
  c.memory.interleaved_load_bytes_per_cycle = BytesPerCycle{16};
  c.memory.memcpy_bytes_per_cycle = BytesPerCycle{8};
  c.amp.half_half.engines = 16;
  c.amp.half_float.engines = 8;
  c.amp.float_float.engines = 16;
  c.amp.weights_per_engine_half = 16;
  c.amp.weights_per_engine_float = 8;
  c.amp.macs_per_engine_half = 4;
  c.amp.macs_per_engine_float = 1;
  c.amp.coeff_load_bytes_per_cycle = BytesPerCycle{16};
  c.exchange.bytes_per_cycle = BytesPerCycle{4};
  c.exchange.tiles_per_shared_bus = 2;
  c.exchange.fixed_overhead = Cycles{100};
  c.exchange.tiles_per_column = 46;
  c.exchange.column_hop_latency = Cycles{1};
  c.sync.internal_latency = Cycles{90};
  c.host.bandwidth = Bandwidth{32e9};
  c.host.latency = Duration{2e-6};
  c.runtime.vertex_state_bytes = Bytes{12};
  c.runtime.stack_bytes = Bytes{3 * 1024};
  c.runtime.codelet_code_bytes = Bytes{1024};
  c.runtime.exchange_code_bytes_per_transfer = Bytes{4};
  c.runtime.compute_set_overhead = Cycles{6};
  return c;
}

}  // namespace ipusim::testing
