// SPDX-License-Identifier: Apache-2.0
#include "ipusim/util/json_reader.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>

#include "ipusim/util/error.hpp"

namespace ipusim {
namespace {

constexpr std::size_t kMaxDepth = 256;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Length of the JSON number literal at the start of `s` (0 if none).
std::size_t number_length(std::string_view s) {
  std::size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size()) return 0;
  if (s[i] == '0') {
    ++i;
  } else if (is_digit(s[i])) {
    while (i < s.size() && is_digit(s[i])) ++i;
  } else {
    return 0;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size() || !is_digit(s[i])) return 0;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (i >= s.size() || !is_digit(s[i])) return 0;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  return i;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& origin) : s_(text), origin_(origin) {}

  JsonValue document() {
    skip_space();
    JsonValue v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("the end of the document", describe_here());
    return v;
  }

 private:
  [[noreturn]] void fail(std::string_view expected, std::string_view found) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw Error(
        fmt::format("{}:{}:{}: expected {}, found {}", origin_, line, column, expected, found));
  }

  std::string describe_here() const {
    if (pos_ >= s_.size()) return "end of file";
    const char c = s_[pos_];
    if (static_cast<unsigned char>(c) < 0x20)
      return fmt::format("control character 0x{:02x}",
                         static_cast<unsigned>(static_cast<unsigned char>(c)));
    return fmt::format("'{}'", c);
  }

  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  bool consume(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  JsonValue value(std::size_t depth) {
    if (depth > kMaxDepth)
      fail(fmt::format("nesting at most {} levels deep", kMaxDepth), "deeper nesting");
    if (pos_ >= s_.size()) fail("a value", "end of file");
    JsonValue v;
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = JsonValue::Kind::kObject;
      ++pos_;
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return v;
      }
      while (true) {
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("a quoted member name", describe_here());
        std::string key = string();
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != ':') fail("':' after a member name", describe_here());
        ++pos_;
        skip_space();
        v.members.push_back(JsonMember{std::move(key), value(depth + 1)});
        skip_space();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == '}') {
          ++pos_;
          return v;
        }
        fail("',' or '}' in an object", describe_here());
      }
    }
    if (c == '[') {
      v.kind = JsonValue::Kind::kArray;
      ++pos_;
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return v;
      }
      while (true) {
        skip_space();
        v.items.push_back(value(depth + 1));
        skip_space();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == ']') {
          ++pos_;
          return v;
        }
        fail("',' or ']' in an array", describe_here());
      }
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::kString;
      v.string = string();
      return v;
    }
    if (consume("true")) {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = true;
      return v;
    }
    if (consume("false")) {
      v.kind = JsonValue::Kind::kBool;
      return v;
    }
    if (consume("null")) return v;
    const std::size_t n = number_length(s_.substr(pos_));
    if (n == 0)
      fail("a value (object, array, string, number, true, false or null)", describe_here());
    v.kind = JsonValue::Kind::kNumber;
    v.number = *JsonNumber::parse(s_.substr(pos_, n));
    pos_ += n;
    return v;
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("4 hex digits after \\u", "end of file");
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_];
      u <<= 4;
      if (is_digit(c))
        u |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        u |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        u |= static_cast<unsigned>(c - 'A' + 10);
      else
        fail("4 hex digits after \\u", describe_here());
      ++pos_;
    }
    return u;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // At an opening quote: reads and decodes the string.
  std::string string() {
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("a closing '\"'", "end of file");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("a string character", describe_here());
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) fail("an escape character", "end of file");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && consume("\\u")) {
            const unsigned lo = hex4();
            if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          --pos_;
          fail("one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u", describe_here());
      }
    }
  }

  std::string_view s_;
  const std::string& origin_;
  std::size_t pos_ = 0;
};

// One path segment: name and optional index.
struct Segment {
  std::string_view name;
  std::optional<std::size_t> index;
};

bool name_char(char c, bool first) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || (!first && is_digit(c));
}

std::optional<std::vector<Segment>> split_path(std::string_view path) {
  std::vector<Segment> out;
  std::size_t i = 0;
  while (true) {
    Segment seg;
    const std::size_t start = i;
    while (i < path.size() && name_char(path[i], i == start)) ++i;
    if (i == start) return std::nullopt;
    seg.name = path.substr(start, i - start);
    if (i < path.size() && path[i] == '[') {
      ++i;
      const std::size_t digits = i;
      while (i < path.size() && is_digit(path[i])) ++i;
      if (i == digits || i >= path.size() || path[i] != ']') return std::nullopt;
      std::size_t idx = 0;
      auto [p, ec] = std::from_chars(path.data() + digits, path.data() + i, idx);
      if (ec != std::errc()) return std::nullopt;
      seg.index = idx;
      ++i;
    }
    out.push_back(seg);
    if (i == path.size()) return out;
    if (path[i] != '.') return std::nullopt;
    ++i;
  }
}

}  // namespace

std::optional<JsonNumber> JsonNumber::parse(std::string_view text) {
  if (text.empty() || number_length(text) != text.size()) return std::nullopt;
  JsonNumber n;
  n.text = std::string(text);
  const std::string z(text);
  n.d = std::strtod(z.c_str(), nullptr);
  if (text.find_first_of(".eE") == std::string_view::npos) {
    std::int64_t i = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
    if (ec == std::errc() && p == text.data() + text.size()) {
      n.integral = true;
      n.i = i;
    }
  }
  return n;
}

bool JsonNumber::operator==(const JsonNumber& other) const {
  if (integral && other.integral) return i == other.i;
  return d == other.d;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  if (kind != Kind::kObject) return nullptr;
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

JsonValue parse_json(std::string_view text, const std::string& origin) {
  return Parser(text, origin).document();
}

const JsonValue* json_field(const JsonValue& root, std::string_view path) {
  const auto segments = split_path(path);
  if (!segments) return nullptr;
  const JsonValue* v = &root;
  for (const auto& seg : *segments) {
    v = v->find(seg.name);
    if (!v) return nullptr;
    if (seg.index) {
      if (v->kind != JsonValue::Kind::kArray || *seg.index >= v->items.size()) return nullptr;
      v = &v->items[*seg.index];
    }
  }
  if (v->kind == JsonValue::Kind::kObject) {
    if (const JsonValue* inner = v->find("value")) v = inner;
  }
  return v->kind == JsonValue::Kind::kNumber ? v : nullptr;
}

bool valid_field_path(std::string_view path) { return split_path(path).has_value(); }

}  // namespace ipusim
