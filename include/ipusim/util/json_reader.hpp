// SPDX-License-Identifier: Apache-2.0
// The JSON reader for the files ipusim itself writes (stats.json, point records, sweep.json):
// nlohmann-json's strict RFC 8259 parser (no comments, NaN or Infinity; UTF-8 checked) behind a
// small document type whose numbers keep their literal text, so that nothing is lost between
// stats.json, a golden file and a comparison.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ipusim {

// A number as written ("12345", "0.25", "1e-05"). Integers that fit int64 compare exactly.
struct JsonNumber {
  std::string text;
  bool integral = false;  // no fraction or exponent and fits in int64
  std::int64_t i = 0;     // when integral
  double d = 0;           // always set

  // Parses a JSON number literal (and keeps `text` as it is); nullopt if `text` is not one.
  static std::optional<JsonNumber> parse(std::string_view text);
  bool operator==(const JsonNumber& other) const;
};

struct JsonMember;

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  JsonNumber number;                // kNumber
  std::string string;               // kString (decoded)
  std::vector<JsonValue> items;     // kArray
  std::vector<JsonMember> members;  // kObject, in document order

  // The member named `key` of an object (the first, if repeated), or nullptr.
  const JsonValue* find(std::string_view key) const;
};

// One member of an object. (A std::pair of an incomplete JsonValue does not compile with
// clang and libstdc++; a vector of a struct declared later does.)
struct JsonMember {
  std::string key;
  JsonValue value;
};

// Parses a whole JSON document. Throws ipusim::Error "<origin>:<line>:<column>: expected ...,
// found ..." on malformed input (the column counts bytes). Objects and arrays nest at most 256
// deep. A repeated member name keeps every member; find() returns the first. The integer "-0"
// reads as 0 with text "0" (nlohmann passes integers by value).
JsonValue parse_json(std::string_view text, const std::string& origin);

// Looks up a dotted field path such as "total.cycles", "phases.sync.count" or
// "ipu[0].tiles.memory.max". A path that ends at a quantity object ({"value": v, "unit": u})
// yields its value. Returns nullptr if any segment is missing or the result is not a number.
const JsonValue* json_field(const JsonValue& root, std::string_view path);

// The value at a field path of the same form, of any kind (a quantity object stays an
// object); nullptr if any segment is missing.
const JsonValue* json_find(const JsonValue& root, std::string_view path);

// "number", "string", "null", ... for messages about a JSON value of the wrong kind.
std::string json_kind(const JsonValue& v);

// True if `path` is a well-formed field path: segments [A-Za-z_][A-Za-z0-9_]* each optionally
// followed by [INDEX], separated by dots.
bool valid_field_path(std::string_view path);

}  // namespace ipusim
