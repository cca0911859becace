// SPDX-License-Identifier: Apache-2.0
// Fuzz target: ONNX models (docs/onnx.md), as `ipusim run --model MODEL.onnx` reads them:
// compiler::load_model on the input written to "model.onnx" in a private directory (the
// protobuf decoder, the importer and the model file it becomes). ConfigError (any
// ipusim::Error) is the expected outcome for bad input.
#include <cstdint>

#include "fuzz_common.hpp"
#include "fuzz_file_common.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ipusim;
  const auto file = fuzz::private_dir("onnx") / "model.onnx";
  fuzz::write_file(file, fuzz::as_string(data, size));
  try {
    (void)compiler::load_model(file.string());
  } catch (const Error&) {
  }
  return 0;
}
