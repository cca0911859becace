// SPDX-License-Identifier: Apache-2.0
// The JSON reader (nlohmann-json's parser behind parse_json) used to read stats.json, goldens'
// stats and sweep results.
#include "ipusim/util/json_reader.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ipusim/util/error.hpp"
#include "ipusim/util/json.hpp"

namespace ipusim {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_json(text, "s.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonReader, ReadsWhatJsonWriterWrites) {
  JsonWriter w;
  w.begin_object();
  w.key("format").value("ipusim-stats/1");
  w.key("total").begin_object().quantity("cycles", std::uint64_t{174987}, "cycles").end_object();
  w.quantity("ratio", 0.25, "fraction");
  w.key("ipu").begin_array();
  w.begin_object().key("tiles").begin_object();
  w.key("memory").begin_object().key("max").value(22658.0).end_object();
  w.end_object().end_object();
  w.end_array();
  w.key("text").value("a \"quoted\" \\ line\n\t\x01");
  w.key("flags").begin_array().value(true).value(false).end_array();
  w.end_object();
  const JsonValue v = parse_json(w.str(), "w.json");
  ASSERT_EQ(v.kind, JsonValue::Kind::kObject);
  EXPECT_EQ(v.find("format")->string, "ipusim-stats/1");
  EXPECT_EQ(v.find("text")->string, "a \"quoted\" \\ line\n\t\x01");
  const JsonValue* cycles = json_field(v, "total.cycles");
  ASSERT_NE(cycles, nullptr);
  EXPECT_TRUE(cycles->number.integral);
  EXPECT_EQ(cycles->number.i, 174987);
  EXPECT_EQ(cycles->number.text, "174987");
  ASSERT_NE(json_field(v, "ratio"), nullptr);
  EXPECT_DOUBLE_EQ(json_field(v, "ratio")->number.d, 0.25);
  EXPECT_FALSE(json_field(v, "ratio")->number.integral);
  ASSERT_NE(json_field(v, "ipu[0].tiles.memory.max"), nullptr);
  EXPECT_EQ(json_field(v, "ipu[0].tiles.memory.max")->number.d, 22658.0);
  EXPECT_EQ(json_field(v, "ipu[1].tiles.memory.max"), nullptr);  // no such IPU
  EXPECT_EQ(json_field(v, "total.time"), nullptr);               // no such field
  EXPECT_EQ(json_field(v, "format"), nullptr);                   // not a number
  EXPECT_EQ(json_field(v, "ipu.tiles"), nullptr);                // an array needs an index
  EXPECT_EQ(json_field(v, "total..cycles"), nullptr);            // malformed path
}

TEST(JsonReader, DecodesEscapes) {
  const JsonValue v = parse_json(R"(["\u00e9\ud83d\ude00\/", -0.5e+3, 0, null])", "x");
  ASSERT_EQ(v.items.size(), 4u);
  EXPECT_EQ(v.items[0].string, "\xc3\xa9\xf0\x9f\x98\x80/");
  EXPECT_DOUBLE_EQ(v.items[1].number.d, -500.0);
  EXPECT_TRUE(v.items[2].number.integral);
  EXPECT_EQ(v.items[3].kind, JsonValue::Kind::kNull);
}

TEST(JsonReader, ErrorsNameLineColumnExpectedAndFound) {
  EXPECT_EQ(error_of("{\n  \"a\": 1,\n  \"b\" 2\n}"),
            "s.json:3:7: expected ':' after a member name, found '2'");
  EXPECT_EQ(error_of("{\"a\": [1, 2}"), "s.json:1:12: expected ',' or ']' in an array, found '}'");
  EXPECT_EQ(error_of("{\"a\": 01}"), "s.json:1:8: expected ',' or '}' in an object, found '1'");
  EXPECT_EQ(error_of("{\"a\": tru}"),
            "s.json:1:7: expected a value (object, array, string, number, true, false or null), "
            "found 't'");
  EXPECT_EQ(error_of("{\"a\": \"x"), "s.json:1:9: expected a closing '\"', found end of file");
  EXPECT_EQ(error_of("{} {}"), "s.json:1:4: expected the end of the document, found '{'");
  EXPECT_EQ(error_of(""),
            "s.json:1:1: expected a value (object, array, string, number, true, false or null), "
            "found end of file");
  EXPECT_EQ(error_of("\"a\\qb\""),
            "s.json:1:4: expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u, found 'q'");
  EXPECT_EQ(error_of(std::string(300, '[')),
            "s.json:1:257: expected nesting at most 256 levels deep, found deeper nesting");
  EXPECT_EQ(error_of("{\"a\": 1,}"), "s.json:1:9: expected a quoted member name, found '}'");
  EXPECT_EQ(error_of("[1,\n  2 3]"), "s.json:2:5: expected ',' or ']' in an array, found '3'");
  EXPECT_EQ(error_of("[1 true]"), "s.json:1:4: expected ',' or ']' in an array, found 't'");
  EXPECT_EQ(error_of("{\"a\" \"b\"}"), "s.json:1:6: expected ':' after a member name, found '\"'");
  EXPECT_EQ(error_of("[\"a\x01\"]"),
            "s.json:1:4: expected a string character, found control character 0x01");
  EXPECT_EQ(error_of("[\"\xff\"]"), "s.json:1:3: expected UTF-8 text in a string, found byte 0xff");
  EXPECT_EQ(error_of("[\"\\ud800\"]"),
            "s.json:1:9: expected a low surrogate \\uDC00-\\uDFFF after a high surrogate, found "
            "'\"'");
  // A NUL byte is not the end of the text (nlohmann's lexer stops at one).
  EXPECT_EQ(error_of(std::string("{}\0{", 4)),
            "s.json:1:3: expected the end of the document, found control character 0x00");
  EXPECT_EQ(error_of(std::string("[1\0]", 4)),
            "s.json:1:3: expected ',' or ']' in an array, found control character 0x00");
  EXPECT_EQ(error_of(std::string("[\"a\0\"]", 6)),
            "s.json:1:4: expected a string character, found control character 0x00");
  EXPECT_EQ(error_of("[-]"), "s.json:1:3: expected a digit after '-', found ']'");
  EXPECT_EQ(error_of("[1, nul"),
            "s.json:1:5: expected a value (object, array, string, number, true, false or null), "
            "found 'n'");
  EXPECT_EQ(error_of("\xEF\xBB\xBF{}"),
            "s.json:1:1: expected a value (object, array, string, number, true, false or null), "
            "found byte 0xef");
  EXPECT_EQ(error_of("[1,\n -1e999]"),
            "s.json:2:2: expected a number a double can hold (magnitude below 1.8e308), found "
            "'-1e999'");
  // No NaN, Infinity, comments or trailing commas.
  for (const char* bad :
       {"[NaN]", "[Infinity]", "[-Infinity]", "[1] // c", "[1,]", "[+1]", "1e400"})
    EXPECT_NE(error_of(bad), "") << bad;
  EXPECT_EQ(error_of("[NaN]"),
            "s.json:1:2: expected a value (object, array, string, number, true, false or null), "
            "found 'N'");
}

TEST(JsonReader, NestsUpTo256LevelsAndKeepsRepeatedKeys) {
  const JsonValue deep = parse_json(std::string(256, '[') + std::string(256, ']'), "d");
  EXPECT_EQ(deep.items.size(), 1u);
  const JsonValue v = parse_json(R"({"a": 1, "a": 2, "b": {}})", "x");
  ASSERT_EQ(v.members.size(), 3u);
  EXPECT_EQ(v.find("a")->number.i, 1);  // the first of repeated keys
  EXPECT_EQ(v.members[1].value.number.i, 2);
}

TEST(JsonReader, NumbersOfEveryRange) {
  const JsonValue v = parse_json(
      "[-9223372036854775808, 9223372036854775807, 9223372036854775808, "
      "18446744073709551616, 1E-05, 0.094760927547169818, -0.0]",
      "x");
  ASSERT_EQ(v.items.size(), 7u);
  const auto& n = [&](std::size_t i) { return v.items[i].number; };
  EXPECT_TRUE(n(0).integral);
  EXPECT_EQ(n(0).i, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(n(0).text, "-9223372036854775808");
  EXPECT_TRUE(n(1).integral);
  EXPECT_EQ(n(1).i, std::numeric_limits<std::int64_t>::max());
  EXPECT_FALSE(n(2).integral);  // fits uint64, not int64
  EXPECT_EQ(n(2).text, "9223372036854775808");
  EXPECT_EQ(n(2).d, 9223372036854775808.0);
  EXPECT_FALSE(n(3).integral);  // beyond uint64
  EXPECT_EQ(n(3).text, "18446744073709551616");
  EXPECT_EQ(n(4).text, "1E-05");
  EXPECT_EQ(n(4).d, 1e-5);
  EXPECT_EQ(n(5).text, "0.094760927547169818");
  EXPECT_EQ(n(5).d, 0.094760927547169818);
  EXPECT_EQ(n(6).text, "-0.0");
  EXPECT_TRUE(std::signbit(n(6).d));
}

TEST(JsonReader, NumbersKeepTheirTextAndCompareExactly) {
  auto a = JsonNumber::parse("90000");
  auto b = JsonNumber::parse("90000.0");
  auto c = JsonNumber::parse("9223372036854775808");  // beyond int64: compared as double
  ASSERT_TRUE(a && b && c);
  EXPECT_TRUE(a->integral);
  EXPECT_FALSE(b->integral);
  EXPECT_FALSE(c->integral);
  EXPECT_TRUE(*a == *b);
  EXPECT_FALSE(JsonNumber::parse("1.") || JsonNumber::parse("+1") || JsonNumber::parse("1e") ||
               JsonNumber::parse("0x10") || JsonNumber::parse(" 1") || JsonNumber::parse("") ||
               JsonNumber::parse("1 ") || JsonNumber::parse("01") || JsonNumber::parse("1 2") ||
               JsonNumber::parse("-") || JsonNumber::parse("NaN") || JsonNumber::parse("[1]") ||
               JsonNumber::parse("1e999") || JsonNumber::parse(std::string("3\0 5", 4)));
  EXPECT_EQ(JsonNumber::parse("-0")->text, "-0");
  EXPECT_EQ(JsonNumber::parse("1e-05")->text, "1e-05");
  EXPECT_TRUE(valid_field_path("ipu[12].tiles.memory.max"));
  EXPECT_FALSE(valid_field_path("ipu[].x"));
  EXPECT_FALSE(valid_field_path("1total"));
  EXPECT_FALSE(valid_field_path("total."));
}

}  // namespace
}  // namespace ipusim
