// SPDX-License-Identifier: Apache-2.0
// A small streaming JSON writer with deterministic output (2-space indent, keys in the order
// written, doubles with up to 17 significant digits).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ipusim {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(double d);
  JsonWriter& value(std::uint64_t u);
  JsonWriter& value(std::int64_t i);
  JsonWriter& value(std::uint32_t u) { return value(static_cast<std::uint64_t>(u)); }
  JsonWriter& value(int i) { return value(static_cast<std::int64_t>(i)); }
  JsonWriter& value(bool b);
  // A number given as its JSON text (the caller rounds it, e.g. `ipusim compare --json`).
  JsonWriter& number_text(std::string_view text);
  JsonWriter& null();
  // {"value": v, "unit": unit}
  template <class T>
  JsonWriter& quantity(std::string_view k, T v, std::string_view unit) {
    key(k).begin_object().key("value").value(v).key("unit").value(unit).end_object();
    return *this;
  }
  const std::string& str() const { return out_; }

  static std::string escape(std::string_view s);

 private:
  // Appends `s` as a JSON string (escape()).
  static void append_escaped(std::string& out, std::string_view s);
  void before_value();
  void newline();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace ipusim
