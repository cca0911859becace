// SPDX-License-Identifier: Apache-2.0
// Fuzz target: run directories as `ipusim report` and `ipusim compare` read them. The input is
// up to six files separated by NUL bytes:
//
//     stats.json [ '\0' config.resolved.yaml [ '\0' tiles.csv [ '\0' supersteps.csv
//         [ '\0' layers.csv [ '\0' plan.csv ]]]]]
//
// (a file absent from the input is absent from the directory). They are written into a private
// directory and read by report::load_run_dir; then the stats are looked up as `report` and
// `compare` look them up, and compared with themselves (explain_comparison). The JSON reader
// (parse_json: nlohmann-json's parser behind ipusim's document type, also used for goldens'
// stats and sweep results) sees every byte of the first part; a document it accepts must come
// back the same through JsonWriter and parse_json, and each number's text must parse to the
// same number. ipusim::Error is the expected outcome for bad input.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "fuzz_file_common.hpp"
#include "ipusim/report/compare.hpp"
#include "ipusim/report/run_dir.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/json.hpp"
#include "ipusim/util/json_reader.hpp"

namespace {

using ipusim::JsonValue;

// Writes a parsed document back as ipusim writes JSON (a non-finite double becomes null).
void write(ipusim::JsonWriter& w, const JsonValue& v) {
  switch (v.kind) {
    case JsonValue::Kind::kNull:
      w.value(std::numeric_limits<double>::quiet_NaN());
      break;
    case JsonValue::Kind::kBool:
      w.value(v.boolean);
      break;
    case JsonValue::Kind::kNumber:
      if (v.number.integral)
        w.value(v.number.i);
      else
        w.value(v.number.d);
      break;
    case JsonValue::Kind::kString:
      w.value(v.string);
      break;
    case JsonValue::Kind::kArray:
      w.begin_array();
      for (const auto& item : v.items) write(w, item);
      w.end_array();
      break;
    case JsonValue::Kind::kObject:
      w.begin_object();
      for (const auto& m : v.members) {
        w.key(m.key);
        write(w, m.value);
      }
      w.end_object();
      break;
  }
}

bool same(const JsonValue& a, const JsonValue& b) {
  if (a.kind == JsonValue::Kind::kNumber) {
    const auto reparsed = ipusim::JsonNumber::parse(a.number.text);
    if (!reparsed || !(*reparsed == a.number))
      ipusim::fuzz::fuzz_fail("number text", a.number.text);
    if (!std::isfinite(a.number.d)) return b.kind == JsonValue::Kind::kNull;
  }
  if (a.kind != b.kind || a.boolean != b.boolean || a.string != b.string ||
      a.items.size() != b.items.size() || a.members.size() != b.members.size())
    return false;
  if (a.kind == JsonValue::Kind::kNumber && !(a.number == b.number)) return false;
  for (std::size_t i = 0; i < a.items.size(); ++i)
    if (!same(a.items[i], b.items[i])) return false;
  for (std::size_t i = 0; i < a.members.size(); ++i)
    if (a.members[i].key != b.members[i].key || !same(a.members[i].value, b.members[i].value))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ipusim;
  const std::string input = fuzz::as_string(data, size);
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (parts.size() < 5) {
    const auto nul = input.find('\0', start);
    if (nul == std::string::npos) break;
    parts.push_back(input.substr(start, nul - start));
    start = nul + 1;
  }
  parts.push_back(input.substr(start));

  // The JSON reader on its own, and lookup of the paths report and compare use.
  try {
    const JsonValue v = parse_json(parts[0], "stats.json");
    JsonWriter w;
    write(w, v);
    if (!same(v, parse_json(w.str(), "rewritten.json")))
      fuzz::fuzz_fail("parse_json(JsonWriter(parse_json(x))) differs from parse_json(x)", w.str());
    for (const char* path : {"total.cycles", "total.time", "ipu[0].tiles.memory.max",
                             "phases.compute.count", "links[0].utilisation"})
      (void)json_field(v, path);
  } catch (const Error&) {
  }

  const auto dir = fuzz::private_dir("run_dir") / "run";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir);
  static const char* const kNames[] = {"stats.json",     "config.resolved.yaml", "tiles.csv",
                                       "supersteps.csv", "layers.csv",           "plan.csv"};
  for (std::size_t i = 0; i < parts.size(); ++i) fuzz::write_file(dir / kNames[i], parts[i]);
  try {
    const report::RunDir run = report::load_run_dir(dir.string());
    (void)report::find_stat(run, "total.cycles");
    (void)report::find_stat(run, "chip.clock");
    (void)report::find_stat(run, "throughput.utilisation");
    // The explained comparison, of the run with itself, as compare prints it.
    const report::ExplainedComparison e = report::explain_comparison(run, run);
    (void)report::explained_text(e, 25);
    (void)report::explained_json(e, 25);
  } catch (const Error&) {
  }
  return 0;
}

// The report library links the SystemC model (RunStats lives there), and libsystemc expects an
// sc_main; this target never runs the SystemC kernel.
extern "C" int sc_main(int, char*[]) { return 1; }
