// SPDX-License-Identifier: Apache-2.0
// Shared helpers of the fuzz targets (docs/reliability.md). A target returns normally when the
// input is rejected with an ipusim::Error (the expected outcome for bad input); anything else
// that escapes (another exception type, a sanitizer report, a broken round trip reported by
// fuzz_fail) is a bug and is reported as a crash by libFuzzer or by the replay driver.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace ipusim::fuzz {

// An oracle failed: print why and abort so that libFuzzer saves the input.
[[noreturn]] inline void fuzz_fail(std::string_view what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz oracle failed: %.*s\n", static_cast<int>(what.size()), what.data());
  if (!detail.empty())
    std::fprintf(stderr, "%.*s\n", static_cast<int>(detail.size()), detail.data());
  std::abort();
}

inline std::string as_string(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace ipusim::fuzz
