// SPDX-License-Identifier: Apache-2.0
// The minimal JSON reader used by 'ipusim check' to read stats.json.
#include "ipusim/util/json_reader.hpp"

#include <gtest/gtest.h>

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
  EXPECT_EQ(error_of(""), "s.json:1:1: expected a value, found end of file");
  EXPECT_EQ(error_of("\"a\\qb\""),
            "s.json:1:4: expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u, found 'q'");
  EXPECT_NE(error_of(std::string(300, '[')).find("nesting at most 256 levels deep"),
            std::string::npos);
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
               JsonNumber::parse("0x10") || JsonNumber::parse(" 1") || JsonNumber::parse(""));
  EXPECT_TRUE(valid_field_path("ipu[12].tiles.memory.max"));
  EXPECT_FALSE(valid_field_path("ipu[].x"));
  EXPECT_FALSE(valid_field_path("1total"));
  EXPECT_FALSE(valid_field_path("total."));
}

}  // namespace
}  // namespace ipusim
