// SPDX-License-Identifier: Apache-2.0
// The two model lowerings behind compiler::compile (docs/workloads.md): a data-parallel CNN
// with recomputation checkpoints (cnn_lowering.cpp) and a pipelined transformer
// (transformer_lowering.cpp). Each builds its IPU programs with IpuBuilder.
#pragma once

#include "ipusim/compiler/compiler.hpp"

namespace ipusim::compiler {

trace::Trace compile_cnn(const ModelDef& m, const RunConfig& run, const SystemSpec& system);
trace::Trace compile_transformer(const ModelDef& m, const RunConfig& run, const SystemSpec& system);

inline double available_memory_for(const RunConfig& run, std::size_t ipu) {
  return run.available_memory.size() == 1 ? run.available_memory[0] : run.available_memory[ipu];
}

}  // namespace ipusim::compiler
