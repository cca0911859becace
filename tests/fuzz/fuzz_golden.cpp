// SPDX-License-Identifier: Apache-2.0
// Fuzz target: regression golden files (tests/regression/golden/, docs/regression.md), as
// `ipusim check` reads them: regression::parse_golden. A golden that parses must round-trip:
// golden_text() of it parses again to the same golden (the file `check --update` writes).
// ipusim::Error is the expected outcome for bad input.
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "ipusim/regression/golden.hpp"
#include "ipusim/util/error.hpp"

namespace {

bool same(const ipusim::regression::Golden& a, const ipusim::regression::Golden& b) {
  if (a.case_name != b.case_name || a.definition != b.definition ||
      a.fields.size() != b.fields.size())
    return false;
  for (std::size_t i = 0; i < a.fields.size(); ++i)
    if (a.fields[i].first != b.fields[i].first || !(a.fields[i].second == b.fields[i].second))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ipusim;
  regression::Golden golden;
  try {
    golden = regression::parse_golden(fuzz::as_string(data, size), "fuzz.golden.yaml");
  } catch (const Error&) {
    return 0;
  }
  const std::string text = regression::golden_text(golden);
  try {
    if (!same(regression::parse_golden(text, "again.golden.yaml"), golden))
      fuzz::fuzz_fail("golden_text() does not parse back to the same golden", text);
  } catch (const Error& e) {
    fuzz::fuzz_fail("golden_text() is rejected", std::string(e.what()) + "\n" + text);
  }
  return 0;
}
