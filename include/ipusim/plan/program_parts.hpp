// SPDX-License-Identifier: Apache-2.0
// Small builders of program pieces shared by the conv emitter, the reference kernels and the
// compiler: a step, a count of items spread over tiles as one or two vertex groups, and the
// second compute set of popops' two-stage scalar reductions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::plan {

inline trace::Step make_step(trace::StepKind kind, std::uint32_t index = 0) {
  trace::Step s;
  s.kind = kind;
  s.index = index;
  return s;
}

// Spreads `n` items over `tiles` tiles: the first (n % tiles) tiles get one more.
struct Spread {
  std::uint64_t big = 0, small = 0;
  std::uint32_t big_tiles = 0, used = 0;
};

inline Spread spread(std::uint64_t n, std::uint32_t tiles) {
  Spread s;
  s.used = static_cast<std::uint32_t>(std::min<std::uint64_t>(n, tiles));
  if (s.used == 0) return s;
  s.small = n / s.used;
  s.big_tiles = static_cast<std::uint32_t>(n % s.used);
  s.big = s.small + 1;
  return s;
}

// Adds one vertex per group of the spread; `set_count` writes the per-tile count.
template <class F>
void add_spread(trace::ComputeSet& cs, trace::Codelet codelet, const Spread& sp, F&& params) {
  if (sp.big_tiles > 0) {
    trace::Vertex v{codelet, trace::TileRange{0, sp.big_tiles - 1}, {}};
    params(v, sp.big);
    cs.vertices.push_back(v);
  }
  if (sp.used > sp.big_tiles && sp.small > 0) {
    trace::Vertex v{codelet, trace::TileRange{sp.big_tiles, sp.used - 1}, {}};
    params(v, sp.small);
    cs.vertices.push_back(v);
  }
}

// Appends the compute set `cs` of reduce vertices to `program` and a step running it to
// `steps`. popops runs a reduction to one value that it splits over the workers in two compute
// sets (ReductionConnection.cpp, connectTwoStageReductions: the second is "Reduce_Second_Stage"),
// each with its own sync: each reduce vertex of `cs` with one output and more than one piece
// (cost::scalar_reduce_split) becomes its first stage only, and a sync and a compute set
// `second_name` follow with their second stages (per such vertex, on its tiles, a reduce of its
// pieces' results in its output type).
void add_reduction(const ChipSpec& chip, trace::IpuProgram& program, trace::ComputeSet cs,
                   const std::string& second_name, std::vector<trace::Step>& steps);

}  // namespace ipusim::plan
