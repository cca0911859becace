// SPDX-License-Identifier: Apache-2.0
// parse_json through nlohmann-json's SAX parser, which is strict RFC 8259: no comments, no
// trailing commas, no NaN or Infinity (nor numbers that overflow a double), UTF-8 checked inside
// strings, lone surrogates rejected.
// The handler builds a JsonValue (members in document order, repeated keys kept; numbers with
// their literal text), limits the nesting depth and turns nlohmann's errors into
// "<origin>:<line>:<column>: expected X, found Y" at the offending byte.
#include "ipusim/util/json_reader.hpp"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>

#include "ipusim/util/error.hpp"

namespace ipusim {
namespace {

using Json = nlohmann::json;

constexpr std::size_t kMaxDepth = 256;
constexpr std::string_view kAValue = "a value (object, array, string, number, true, false or null)";

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// 'c', "control character 0x01", "byte 0xc3" (not ASCII) or "end of file": the byte at `at`.
std::string describe(std::string_view text, std::size_t at) {
  if (at >= text.size()) return "end of file";
  const auto c = static_cast<unsigned char>(text[at]);
  if (c < 0x20) return fmt::format("control character 0x{:02x}", static_cast<unsigned>(c));
  if (c >= 0x7f) return fmt::format("byte 0x{:02x}", static_cast<unsigned>(c));
  return fmt::format("'{}'", text[at]);
}

[[noreturn]] void fail(std::string_view text, const std::string& origin, std::size_t at,
                       std::string_view expected, std::string_view found) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  throw Error(
      fmt::format("{}:{}:{}: expected {}, found {}", origin, line, column, expected, found));
}

// Byte offset of the n-th (from 1) '{' or '[' outside strings. nlohmann's SAX interface gives
// positions only with errors; a depth error needs one, and all the text before it has parsed.
std::size_t nth_open_bracket(std::string_view text, std::size_t n) {
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if ((c == '{' || c == '[') && --n == 0) {
      return i;
    }
  }
  return text.size();
}

// What nlohmann's lexer message (the part before "; last read:") says was expected.
std::string lexer_expected(std::string_view message) {
  if (message == "invalid literal") return std::string(kAValue);
  if (message == "invalid string: missing closing quote") return "a closing '\"'";
  if (message == "invalid string: forbidden character after backslash")
    return "one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u";
  if (starts_with(message, "invalid string: '\\u' must be followed"))
    return "4 hex digits after \\u";
  if (starts_with(message, "invalid string: control character")) return "a string character";
  if (starts_with(message, "invalid string: ill-formed UTF-8")) return "UTF-8 text in a string";
  if (starts_with(message, "invalid string: surrogate U+D800"))
    return "a low surrogate \\uDC00-\\uDFFF after a high surrogate";
  if (starts_with(message, "invalid string: surrogate U+DC00"))
    return "a high surrogate \\uD800-\\uDBFF before a low surrogate";
  constexpr std::string_view kNumber = "invalid number; expected ";
  if (starts_with(message, kNumber)) return "a " + std::string(message.substr(kNumber.size()));
  return "valid JSON (" + std::string(message) + ")";
}

// What nlohmann's parser expected (a token name) while parsing `context`, in ipusim's words.
std::string parser_expected(std::string_view context, std::string_view token) {
  if (token == "':'") return "':' after a member name";
  if (token == "string literal" && context == "object key") return "a quoted member name";
  if (token == "'}'" && context == "object") return "',' or '}' in an object";
  if (token == "']'" && context == "array") return "',' or ']' in an array";
  if (token == "end of input") return "the end of the document";
  if (token == "'[', '{', or a literal") return std::string(kAValue);
  return std::string(token);
}

// Builds a JsonValue from nlohmann's SAX events. With an origin, errors throw ipusim::Error;
// without, they make sax_parse return false (JsonNumber::parse).
class Builder : public nlohmann::json_sax<Json> {
 public:
  Builder(std::string_view text, const std::string* origin) : text_(text), origin_(origin) {}

  JsonValue& root() { return root_; }

  bool null() override {
    add(JsonValue{});
    return true;
  }
  bool boolean(bool b) override {
    JsonValue v;
    v.kind = JsonValue::Kind::kBool;
    v.boolean = b;
    add(std::move(v));
    return true;
  }
  // Integers: nlohmann gives no text, but an integer literal's text is its decimal value
  // (JSON forbids leading zeros and '+'), except "-0", which reads back as "0".
  bool number_integer(number_integer_t i) override {
    JsonNumber n;
    n.text = std::to_string(i);
    n.integral = true;
    n.i = i;
    n.d = static_cast<double>(i);
    return number(std::move(n));
  }
  bool number_unsigned(number_unsigned_t u) override {
    JsonNumber n;
    n.text = std::to_string(u);
    n.integral = u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (n.integral) n.i = static_cast<std::int64_t>(u);
    n.d = static_cast<double>(u);
    return number(std::move(n));
  }
  // Fractions, exponents and integers beyond uint64, with the literal text.
  bool number_float(number_float_t d, const string_t& text) override {
    JsonNumber n;
    n.text = text;
    n.d = d;
    return number(std::move(n));
  }
  bool string(string_t& s) override {
    JsonValue v;
    v.kind = JsonValue::Kind::kString;
    v.string = std::move(s);
    add(std::move(v));
    return true;
  }
  bool binary(binary_t&) override { return false; }  // not in JSON text
  bool start_object(std::size_t) override { return open(JsonValue::Kind::kObject); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return open(JsonValue::Kind::kArray); }
  bool end_array() override {
    stack_.pop_back();
    return true;
  }

  // `position` is the count of bytes read, the end of file counting as one; `token` what the
  // lexer read for the last token. nlohmann's message reads "... syntax error while parsing
  // CONTEXT - unexpected TOKEN; expected TOKEN" or "... - LEXER MESSAGE; last read: '...'".
  bool parse_error(std::size_t position, const std::string& token,
                   const nlohmann::detail::exception& ex) override {
    if (!origin_) return false;
    const std::string_view what = ex.what();
    constexpr std::string_view kWhile = "while parsing ", kDash = " - ",
                               kUnexpected = "unexpected ", kExpected = "; expected ",
                               kLastRead = "; last read: ";
    const std::size_t last = std::min(position == 0 ? 0 : position - 1, text_.size());
    if (ex.id == 406) {  // a number beyond the range of double: no Infinity by overflow either
      const std::size_t at = position >= token.size() ? position - token.size() : 0;
      fail(text_, *origin_, at, "a number a double can hold (magnitude below 1.8e308)",
           fmt::format("'{}'", token));
    }
    const auto context_at = what.find(kWhile);
    const auto dash = what.find(kDash, context_at);
    if (context_at == std::string_view::npos || dash == std::string_view::npos)
      fail(text_, *origin_, last, "valid JSON", ex.what());
    const std::string_view context =
        what.substr(context_at + kWhile.size(), dash - context_at - kWhile.size());
    const std::string_view rest = what.substr(dash + kDash.size());
    if (!starts_with(rest, kUnexpected)) {  // the lexer: at the last byte it read
      const std::string_view message = rest.substr(0, rest.find(kLastRead));
      std::size_t at = last;
      if (message == "invalid literal") {  // at the start of a cut-short true, false or null
        for (std::size_t len = 4; len > 0; --len)
          if (at >= len && is_literal_prefix(text_.substr(at - len, len))) {
            at -= len;
            break;
          }
      }
      fail(text_, *origin_, at, lexer_expected(message), describe(text_, at));
    }
    // An unexpected token: at its first byte.
    const auto expected_at = rest.find(kExpected);
    const std::string_view found =
        rest.substr(kUnexpected.size(), expected_at - kUnexpected.size());
    const std::string_view expected = expected_at == std::string_view::npos
                                          ? "valid JSON"
                                          : rest.substr(expected_at + kExpected.size());
    std::size_t at = std::min(text_.find('\0'), text_.size());  // "end of input" (or a NUL)
    if (found != "end of input") {
      std::size_t length = 1;  // a structural character
      if (found == "true literal" || found == "null literal")
        length = 4;
      else if (found == "false literal")
        length = 5;
      else if (found == "number literal" || found == "string literal")
        length = token.size();
      at = std::min(position >= length ? position - length : 0, last);
    }
    fail(text_, *origin_, at, parser_expected(context, expected), describe(text_, at));
  }

 private:
  static bool is_literal_prefix(std::string_view s) {
    for (std::string_view literal : {"true", "false", "null"})
      if (s.size() < literal.size() && starts_with(literal, s)) return true;
    return false;
  }

  bool number(JsonNumber n) {
    JsonValue v;
    v.kind = JsonValue::Kind::kNumber;
    v.number = std::move(n);
    add(std::move(v));
    return true;
  }

  JsonValue* add(JsonValue v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    JsonValue& top = *stack_.back();
    if (top.kind == JsonValue::Kind::kArray) {
      top.items.push_back(std::move(v));
      return &top.items.back();
    }
    top.members.push_back(JsonMember{std::move(key_), std::move(v)});
    return &top.members.back().value;
  }

  // Containers nest at most kMaxDepth deep. A pointer to the open container stays valid: only
  // the innermost one grows.
  bool open(JsonValue::Kind kind) {
    ++opened_;
    if (stack_.size() >= kMaxDepth) {
      if (!origin_) return false;
      fail(text_, *origin_, nth_open_bracket(text_, opened_),
           fmt::format("nesting at most {} levels deep", kMaxDepth), "deeper nesting");
    }
    JsonValue v;
    v.kind = kind;
    stack_.push_back(add(std::move(v)));
    return true;
  }

  std::string_view text_;
  const std::string* origin_;
  JsonValue root_;
  std::vector<JsonValue*> stack_;  // the open containers, innermost last
  std::string key_;                // of the next object member
  std::size_t opened_ = 0;         // containers opened so far
};

// nlohmann's lexer takes a NUL byte for the end of input, as in a C string; ipusim's text ends
// at its last byte. Whatever stops the parse at a NUL has been reported at the NUL (the Builder
// describes it from the whole text); a parse that succeeds before one leaves it to the caller.
bool sax_parse(std::string_view text, Builder& builder) {
  return Json::sax_parse(text.data(), text.data() + text.size(), &builder,
                         Json::input_format_t::json, /*strict=*/true);
}

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
  // nlohmann skips white space around a value; a number literal has none.
  if (text.empty() || !(text.front() == '-' || is_digit(text.front())) || !is_digit(text.back()))
    return std::nullopt;
  Builder builder(text, nullptr);
  if (text.find('\0') != std::string_view::npos || !sax_parse(text, builder) ||
      builder.root().kind != JsonValue::Kind::kNumber)
    return std::nullopt;
  JsonNumber n = std::move(builder.root().number);
  n.text = std::string(text);
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
  // nlohmann skips a UTF-8 byte order mark; ipusim never writes one and did not accept it.
  if (starts_with(text, "\xEF\xBB\xBF")) fail(text, origin, 0, kAValue, describe(text, 0));
  Builder builder(text, &origin);
  if (!sax_parse(text, builder)) fail(text, origin, text.size(), "valid JSON", "none");
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    fail(text, origin, nul, "the end of the document", describe(text, nul));
  return std::move(builder.root());
}

std::string json_kind(const JsonValue& v) {
  switch (v.kind) {
    case JsonValue::Kind::kNull:
      return "null";
    case JsonValue::Kind::kBool:
      return "boolean";
    case JsonValue::Kind::kNumber:
      return "number";
    case JsonValue::Kind::kString:
      return "string";
    case JsonValue::Kind::kArray:
      return "array";
    case JsonValue::Kind::kObject:
      return "object";
  }
  return "value";
}

const JsonValue* json_find(const JsonValue& root, std::string_view path) {
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
  return v;
}

const JsonValue* json_field(const JsonValue& root, std::string_view path) {
  const JsonValue* v = json_find(root, path);
  if (!v) return nullptr;
  if (v->kind == JsonValue::Kind::kObject) {
    if (const JsonValue* inner = v->find("value")) v = inner;
  }
  return v->kind == JsonValue::Kind::kNumber ? v : nullptr;
}

bool valid_field_path(std::string_view path) { return split_path(path).has_value(); }

}  // namespace ipusim
