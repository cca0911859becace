// SPDX-License-Identifier: Apache-2.0
// Elaborates the SystemC model for a trace and runs it to completion.
// SystemC elaborates once per process: call simulate() at most once per process.
#pragma once

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/config/system_spec.hpp"
#include "ipusim/model/ipu.hpp"
#include "ipusim/stats/run_stats.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::model {

// Checks the trace against the chip (tile indices, memory), builds one Ipu module per IPU
// program, runs the kernel until every program ends and returns the measurements.
// Throws TraceError / ModelError for programs the chip cannot run.
// Without a system, every program runs on its own chip and group steps are an error.
RunStats simulate(const ChipSpec& chip, const trace::Trace& trace, const ModelOptions& options);

// The same on a system: program i of replica r runs on system IPU r x P + i, group steps go
// through the system's Fabric. Only replica 0 is simulated unless `all_replicas` is set
// (replica symmetry: see docs/topology.md).
RunStats simulate(const SystemSpec& system, const trace::Trace& trace, const ModelOptions& options,
                  bool all_replicas);

}  // namespace ipusim::model
