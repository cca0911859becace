// SPDX-License-Identifier: Apache-2.0
// The regression suite manifest (tests/regression/suite.yaml, docs/regression.md): which cases
// exist, how each one is produced and run, and which stats.json fields are compared with which
// tolerance. Loading is strict: unknown keys, wrong types, duplicate names and unreadable
// referenced files are ConfigErrors naming "<manifest>:<line>:<column>".
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipusim/util/json_reader.hpp"

namespace ipusim::regression {

// How far a field may move before the case fails. Written in the manifest as "exact" (or 0),
// an absolute amount in the field's own unit ("100") or a percentage of the golden value
// ("0.5%").
struct Tolerance {
  enum class Kind { kExact, kAbsolute, kRelative };
  Kind kind = Kind::kExact;
  double amount = 0;  // kAbsolute: field units; kRelative: percent
  std::string text = "exact";

  // Throws ParseError (no location) if `text` is not a tolerance.
  static Tolerance parse(std::string_view text);
  // True if moving from `golden` to `now` stays within the tolerance.
  bool allows(const JsonNumber& golden, const JsonNumber& now) const;
};

// One compared field: a path into stats.json (json_reader.hpp: lookup) and its tolerance.
struct Field {
  std::string path;
  Tolerance tolerance;
};

struct Case {
  std::string name;  // unique; "/"-separated segments of [A-Za-z0-9_.-]
  int line = 0;      // 1-based line of the case in the manifest
  std::string description;
  // Exactly one of: a reference kernel (ipusim kernel KERNEL --ARG VALUE ...) ...
  std::string kernel;
  std::vector<std::pair<std::string, std::string>> args;  // in manifest order; "" = bare flag
  // ... or a program trace file (as written, and resolved against the manifest's folder) ...
  std::string trace;
  std::string trace_path;
  // ... or a training step compiled by 'ipusim compile --run FILE' from a run config (a name
  // under configs/runs/ or a path relative to the manifest; the run names model and system).
  std::string compile;
  std::string compile_path;
  // The system config for multi-IPU cases: a name under configs/systems/ ("pod16") or a path
  // ending in .yaml relative to the manifest, as written (empty if the case names none) and
  // resolved (for a compile case without system:, the run config's system).
  std::string system;
  std::string system_file;
  // The chip config: a name under configs/chips/ ("gc200") or a path ending in .yaml relative
  // to the manifest, as written and resolved. A system or compile case without its own chip:
  // key uses its system's chip (chip is then empty; chip_file is that chip's file for a kernel
  // case, which plans for it, and empty for a compile case).
  std::string chip;
  std::string chip_file;
  std::vector<std::string> overrides;  // defaults.set, then the case's own set
  std::vector<Field> fields;           // defaults.fields, then the case's own fields

  bool is_kernel() const { return !kernel.empty(); }
  bool is_compile() const { return !compile.empty(); }
  bool is_system() const { return !system_file.empty(); }
  // A one-line description of what the case runs, as written in the manifest (independent of
  // where the suite lives). Stored in the golden so that a changed case is noticed.
  std::string definition() const;
};

struct Manifest {
  std::string file;         // as given
  std::string dir;          // its folder
  std::string name;         // suite name
  std::string goldens_dir;  // resolved
  std::vector<Case> cases;
};

Manifest load_manifest(const std::string& path);
Manifest parse_manifest(const std::string& text, const std::string& path);

// Where the golden result of `c` lives: <goldens>/<name>.yaml.
std::string golden_path(const Manifest& manifest, const Case& c);

// True if `name` matches any of the glob `patterns` (fnmatch: '*' also matches '/'), or if
// `patterns` is empty.
bool matches_filter(const std::string& name, const std::vector<std::string>& patterns);

}  // namespace ipusim::regression
