// SPDX-License-Identifier: Apache-2.0
// Bundle programs of the core codelet families (docs/tile-model.md), parameterised by the
// vertex's sizes and the chip, and the memoised vertex timing of the instruction-level model.
// The programs are the project's own: prologue, rpt body and epilogue per worker, and the
// supervisor loop around them.
#pragma once

#include <cstdint>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/tile/program.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::tile {

// The supervisor program of one vertex (its runs hold the worker programs). Throws
// ModelError for a parameter the codelet does not support (as the closed forms do).
SupBlock vertex_program(const ChipSpec& chip, const trace::Vertex& v);

// Whether the codelet has a bundle program: every one but amp_slic, whose SLIC engine chain is
// not modelled, and conv_hmac (the isa timing model keeps their closed forms).
bool has_isa_program(trace::Codelet c);

// Tile cycles of one vertex on the engine; memoised per (chip micro-architecture, codelet,
// parameters), thread-safe.
std::uint64_t isa_vertex_cycles(const ChipSpec& chip, const trace::Vertex& v);

// Distinct vertex shapes timed so far (memo size), for tests and diagnostics.
std::size_t isa_memo_size();

}  // namespace ipusim::tile
