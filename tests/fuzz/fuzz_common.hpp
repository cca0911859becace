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
#include <vector>

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

// The `--set` overrides of an input "FILE CONTENT\0KEY=VALUE\nKEY=VALUE...": one per line
// after the first NUL (an empty last line included); none without a NUL.
inline std::vector<std::string> overrides_after_nul(const std::string& input) {
  std::vector<std::string> overrides;
  const auto nul = input.find('\0');
  if (nul == std::string::npos) return overrides;
  const std::string rest = input.substr(nul + 1);
  std::size_t start = 0;
  while (start <= rest.size()) {
    const auto nl = rest.find('\n', start);
    overrides.push_back(rest.substr(start, nl == std::string::npos ? nl : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return overrides;
}

}  // namespace ipusim::fuzz
