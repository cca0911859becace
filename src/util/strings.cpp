// SPDX-License-Identifier: Apache-2.0
#include "ipusim/util/strings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace ipusim {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  auto m = closest_match(word, candidates);
  return m ? fmt::format(" (did you mean '{}'?)", *m) : std::string();
}

namespace {

// The UTF-8 sequence at `text[i]`: its length and code point, or length 0 when the bytes there
// are not valid UTF-8 (a stray continuation byte such as a raw 0x9b, a truncated or overlong
// sequence, a surrogate, a code point past U+10FFFF).
struct Utf8 {
  std::size_t length = 0;
  char32_t code = 0;
};
Utf8 utf8_at(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return {1, b0};
  std::size_t n = 0;
  char32_t code = 0, min = 0;
  if ((b0 & 0xe0) == 0xc0) {
    n = 2, code = b0 & 0x1f, min = 0x80;
  } else if ((b0 & 0xf0) == 0xe0) {
    n = 3, code = b0 & 0x0f, min = 0x800;
  } else if ((b0 & 0xf8) == 0xf0) {
    n = 4, code = b0 & 0x07, min = 0x10000;
  } else {
    return {};
  }
  if (i + n > text.size()) return {};
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return {};
    code = (code << 6) | (byte(i + k) & 0x3f);
  }
  if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return {};
  return {n, code};
}

// C0 controls, DEL and the C1 controls (U+0080 to U+009F: CSI, NEL, ...), which terminals act on.
bool is_control(char32_t c) { return c < 0x20 || (c >= 0x7f && c <= 0x9f); }

}  // namespace

bool has_control_characters(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const Utf8 u = utf8_at(text, i);
    if (u.length == 0 || is_control(u.code)) return true;
    i += u.length;
  }
  return false;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Utf8 u = utf8_at(text, i);
    if (u.length == 0) {  // not UTF-8: the byte, escaped
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i]));
      ++i;
      continue;
    }
    switch (u.code) {
      case '\0':
        out += "\\0";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u.code < 0x80 && is_control(u.code))
          out += fmt::format("\\x{:02x}", static_cast<unsigned>(u.code));
        else if (is_control(u.code))
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(u.code));
        else
          out.append(text.substr(i, u.length));
    }
    i += u.length;
  }
  return out;
}

std::string_view trim(std::string_view s, std::string_view chars) {
  const auto first = s.find_first_not_of(chars);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(chars) - first + 1);
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t p; (p = s.find(sep, start)) != std::string_view::npos; start = p + 1)
    out.emplace_back(s.substr(start, p - start));
  out.emplace_back(s.substr(start));
  return out;
}

}  // namespace ipusim
