// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ipusim {

// Levenshtein edit distance.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, if its distance is at most max(2, |word|/3).
std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// `text` with control characters escaped (\0, \t, \n, \r, \xNN; the C1 controls of UTF-8,
// U+0080 to U+009F, as \uNNNN) and every byte that is not valid UTF-8 as \xNN, for messages:
// a NUL or newline in a user's key or value must not cut a one-line message short (issue 16, N),
// and no CSI (U+009B or a raw 0x9b byte) reaches the terminal (issue 55, part 4).
// has_control_characters is true for any text printable() would change.
std::string printable(std::string_view text);
bool has_control_characters(std::string_view text);

// The pieces of `s` between each `sep` (empty ones kept: "a::b" is a, "", b; "" is one "").
std::vector<std::string> split(std::string_view s, char sep);

// `s` without the leading and trailing characters in `chars` (by default, white space).
std::string_view trim(std::string_view s, std::string_view chars = " \t\n\v\f\r");

}  // namespace ipusim
