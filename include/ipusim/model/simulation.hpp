// SPDX-License-Identifier: Apache-2.0
// Elaborates the SystemC model for a trace and runs it to completion.
// SystemC elaborates once per process: call simulate() at most once per process.
#pragma once

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/model/ipu.hpp"
#include "ipusim/model/run_stats.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::model {

// Checks the trace against the chip (tile indices, memory), builds one Ipu module per IPU
// program, runs the kernel until every program ends and returns the measurements.
// Throws TraceError / ModelError for programs the chip cannot run.
RunStats simulate(const ChipSpec& chip, const trace::Trace& trace, const ModelOptions& options);

}  // namespace ipusim::model
