// SPDX-License-Identifier: Apache-2.0
// Overflow-checked unsigned 64-bit arithmetic for counts, sizes, cycles and FLOPs that user
// input reaches (issue 16, defect C). A Checked value behaves like std::uint64_t under + - * /
// and comparisons, but throws ArithmeticOverflow instead of wrapping; the caller that knows
// what was being computed catches it and reports an error naming the input (e.g. the vertex
// and its parameters) rather than a silently wrapped number.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include "ipusim/util/error.hpp"

namespace ipusim {

// Thrown by Checked. A ModelError (status 4), so that even an uncaught one is a clear error,
// but callers that know what was computed rethrow it with the inputs named.
class ArithmeticOverflow : public ModelError {
 public:
  explicit ArithmeticOverflow(const std::string& message = "64-bit arithmetic overflow")
      : ModelError(message) {}
};

class Checked {
 public:
  constexpr Checked(std::uint64_t v = 0) : v_(v) {}  // NOLINT: implicit on purpose
  constexpr std::uint64_t get() const { return v_; }

  friend Checked operator+(Checked a, Checked b) {
    std::uint64_t r = 0;
    if (__builtin_add_overflow(a.v_, b.v_, &r)) throw ArithmeticOverflow();
    return r;
  }
  friend Checked operator-(Checked a, Checked b) {
    std::uint64_t r = 0;
    if (__builtin_sub_overflow(a.v_, b.v_, &r)) throw ArithmeticOverflow();
    return r;
  }
  friend Checked operator*(Checked a, Checked b) {
    std::uint64_t r = 0;
    if (__builtin_mul_overflow(a.v_, b.v_, &r)) throw ArithmeticOverflow();
    return r;
  }
  friend Checked operator/(Checked a, Checked b) { return a.v_ / b.v_; }
  friend Checked operator%(Checked a, Checked b) { return a.v_ % b.v_; }
  Checked& operator+=(Checked b) { return *this = *this + b; }
  Checked& operator*=(Checked b) { return *this = *this * b; }
  friend constexpr auto operator<=>(Checked a, Checked b) = default;
  friend constexpr bool operator==(Checked a, Checked b) = default;

 private:
  std::uint64_t v_;
};

inline Checked max(Checked a, Checked b) { return a < b ? b : a; }
inline Checked min(Checked a, Checked b) { return a < b ? a : b; }

}  // namespace ipusim
