// SPDX-License-Identifier: Apache-2.0
// Two-layer configuration: YAML files (raw, as written) are flattened to key paths, checked
// strictly against a Schema (every parameter declared once: kind, unit, range, description,
// source), and resolved into typed values from which immutable specs are built.
// Any key can be overridden by its path: "--set chip.clock=1.5GHz".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ipusim/util/units.hpp"

namespace ipusim::config {

enum class ValueKind {
  kCount,
  kFrequency,
  kBytes,
  kCycles,
  kBytesPerCycle,
  kBandwidth,
  kDuration,
  kRatio,
  kString,
  kInclude
};  // a path (relative to the file) of another config to merge

struct ParamDecl {
  std::string path;  // e.g. "chip.exchange.bytes_per_cycle"
  ValueKind kind;
  double min = 0;  // inclusive range in the kind's base unit (Hz, B, cycles, ...)
  double max = 0;
  std::string description;  // what it means, with its unit
  std::string source;       // the row of ipu-hardware.md (or the measurement) it comes from
  bool uncertain = false;   // marked I or L in the reference, or no public number
  std::optional<std::string> default_text;  // used when the key is absent (else it is required)
  std::vector<std::string> choices;         // kString: the allowed values, if restricted
};

class Schema {
 public:
  Schema(std::string root, std::vector<ParamDecl> params);
  const std::string& root() const { return root_; }
  const std::vector<ParamDecl>& params() const { return params_; }
  const ParamDecl* find(const std::string& path) const;
  // The closest declared path to `path`, if any is near enough to be a likely typo.
  std::optional<std::string> suggest(const std::string& path) const;
  // What follows "unknown key" in a message: a section's keys when `path` names a section
  // ("chip.amp"), else " (did you mean ...?)" or "".
  std::string unknown_key_hint(const std::string& path) const;

 private:
  std::string root_;
  std::vector<ParamDecl> params_;
};

// A raw scalar as written, with where it came from ("file.yaml:12:10" or "--set KEY").
struct RawValue {
  std::string text;
  std::string origin;      // where the value is
  std::string key_origin;  // where its key is
};

// A flattened config document: key path -> raw scalar.
struct Document {
  std::string file;
  std::map<std::string, RawValue> values;
};

// Parses a YAML file into a flat Document. Nested maps become dotted paths; sequences and
// non-scalar leaves are rejected. Throws ConfigError with file:line:column.
Document load_document(const std::string& file);
Document parse_document(const std::string& yaml_text, const std::string& origin);

// Loads `file` and, recursively, every file named by one of its kInclude keys (paths relative
// to the including file), merged into one Document. A key set in two files, a missing file or
// a cycle of includes is a ConfigError naming the files.
Document load_document_tree(const std::string& file, const Schema& schema);

// An override "KEY=VALUE" (--set, or set: in a suite or sweep) split at its first '='.
struct Override {
  std::string key, value;
};
// The one check of the form: nullopt if `text` has no '=' or an empty KEY.
std::optional<Override> parse_override(std::string_view text);
// The error for a `text` parse_override refuses: "expected KEY=VALUE such as
// chip.clock=1.85GHz, found \"<text>\"" (callers prefix where it came from).
std::string override_form_error(std::string_view text);

// Applies "key.path=value". Throws ConfigError if the form is wrong or the key unknown.
void apply_override(Document& doc, const std::string& assignment, const Schema& schema);

using Value = std::variant<std::uint64_t, Frequency, Bytes, Cycles, BytesPerCycle, Bandwidth,
                           Duration, double, std::string>;

// Typed values for every declared parameter, after strict checking.
class Resolved {
 public:
  const Value& at(const std::string& path) const;
  std::uint64_t count(const std::string& path) const { return std::get<std::uint64_t>(at(path)); }
  Frequency frequency(const std::string& p) const { return std::get<Frequency>(at(p)); }
  Bytes bytes(const std::string& p) const { return std::get<Bytes>(at(p)); }
  Cycles cycles(const std::string& p) const { return std::get<Cycles>(at(p)); }
  BytesPerCycle bytes_per_cycle(const std::string& p) const {
    return std::get<BytesPerCycle>(at(p));
  }
  Bandwidth bandwidth(const std::string& p) const { return std::get<Bandwidth>(at(p)); }
  Duration duration(const std::string& p) const { return std::get<Duration>(at(p)); }
  double ratio(const std::string& p) const { return std::get<double>(at(p)); }
  const std::string& string(const std::string& p) const { return std::get<std::string>(at(p)); }

  const std::map<std::string, Value>& values() const { return values_; }
  // Canonical YAML (nested maps, canonical unit strings), e.g. for config.resolved.yaml.
  std::string to_yaml() const;

 private:
  friend Resolved resolve(const Document&, const Schema&);
  std::map<std::string, Value> values_;
};

// Checks `doc` against `schema`: unknown keys (with "did you mean"), missing keys, units and
// ranges. Throws ConfigError naming file:line:column and the key path.
Resolved resolve(const Document& doc, const Schema& schema);

// The strict number parsers of every config and run key: a whole number (decimal digits
// only, at most 18) and a decimal number (no hex, no inf or nan, the whole text). Throw
// ParseError naming the expected form and what was found.
std::uint64_t parse_count(const std::string& text);
double parse_ratio(const std::string& text);

std::string format_value(const Value& v);
std::string kind_name(ValueKind kind);

// Markdown table of a schema's parameters (for docs/config-reference.md).
std::string reference_markdown(const Schema& schema);

}  // namespace ipusim::config
