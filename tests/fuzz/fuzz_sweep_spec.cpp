// SPDX-License-Identifier: Apache-2.0
// Fuzz target: sweep specs (docs/sweeps.md), as `ipusim sweep --list` reads them:
// sweep::parse_spec, then expand() with a small point cap (so that a spec of many points is
// rejected by the count, defect F, rather than expanded) and each point's label.
// ipusim::Error is the expected outcome for bad input.
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "ipusim/sweep/spec.hpp"
#include "ipusim/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ipusim;
  try {
    const sweep::Spec spec = sweep::parse_spec(fuzz::as_string(data, size), "fuzz/spec.yaml");
    (void)sweep::combination_count(spec);
    for (const auto& p : sweep::expand(spec, 1000)) (void)p.label();
  } catch (const Error&) {
  }
  return 0;
}
