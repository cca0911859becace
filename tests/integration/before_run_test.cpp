// SPDX-License-Identifier: Apache-2.0
// ModelOptions::before_run (model/engine.hpp): called once the model is built and before the
// simulation starts; what it throws ends the run with nothing simulated. `ipusim run --run`
// waits there for its check of the compiled trace's structure.
#include <gtest/gtest.h>

#include "cli_harness.hpp"
#include "ipusim/config/chip.hpp"
#include "ipusim/kernels/kernels.hpp"
#include "ipusim/model/simulation.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::testing {
namespace {

TEST(ModelOptions, BeforeRunIsCalledOnceBuiltAndItsErrorEndsTheRunUnsimulated) {
  const ChipSpec chip = load_chip(source_dir() + "/configs/chips/gc200.yaml").spec;
  const trace::Trace t = kernels::matmul(chip, 512, 512, 512, trace::DType::kHalf);
  model::ModelOptions options;
  int calls = 0;
  std::uint64_t progress = 0;
  options.progress = [&](std::uint64_t done, std::uint64_t) { progress = done; };
  options.before_run = [&] {
    ++calls;
    throw TraceError("the structure check failed");
  };
  EXPECT_THROW(model::simulate(chip, t, options), TraceError);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(progress, 0u);
}

}  // namespace
}  // namespace ipusim::testing
