// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "common.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/regression/manifest.hpp"
#include "ipusim/sweep/spec.hpp"
#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::cli {
namespace {

bool is_config(const std::string& path) {
  return path.size() > 5 && (path.ends_with(".yaml") || path.ends_with(".yml"));
}

// The keys of a YAML file's top-level map, and the value of its `format:` key, read from the
// lines that start in column 0 (the loaders parse the file properly afterwards).
struct TopLevel {
  std::set<std::string> keys;
  std::string format;
};
TopLevel top_level(const std::string& file) {
  TopLevel t;
  // The largest cap of any kind (a model file's): each kind's loader applies its own after.
  std::istringstream in(read_input_file(file, kMaxModelBytes, "YAML file"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == ' ' || line[0] == '\t' || line[0] == '#' || line[0] == '-')
      continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    if (key == "format") {
      std::string value = line.substr(colon + 1);
      if (const auto hash = value.find(" #"); hash != std::string::npos) value.resize(hash);
      t.format = trim(value);
    }
    t.keys.insert(std::move(key));
  }
  return t;
}

// A part of a system (configs/parts: `machine:` or `fabric:`): its keys checked against the
// system schema's declarations under its root, all of which it must give.
std::string validate_part(const std::string& file, const std::string& root) {
  const config::Document doc = config::load_document(file);
  std::vector<config::ParamDecl> decls;
  for (const auto& d : system_part_schema(doc).params())
    if (d.path.starts_with(root + ".")) decls.push_back(d);
  const config::Schema part(root, decls);
  const config::Resolved r = config::resolve(doc, part);
  return fmt::format("system part {}, {} keys", root, r.values().size());
}

// What the file is and its one-line summary; throws the loaders' errors (file:line, key).
std::string validate_yaml(const std::string& file, const std::vector<std::string>& overrides) {
  const TopLevel t = top_level(file);
  if (t.format == "ipusim-sweep/1") {
    const sweep::Spec spec = sweep::load_spec(file);
    return fmt::format("sweep {}, {} point(s)", spec.name, sweep::expand(spec).size());
  }
  if (t.format == "ipusim-suite/1") {
    const regression::Manifest m = regression::load_manifest(file);
    return fmt::format("suite {}, {} case(s)", m.name, m.cases.size());
  }
  if (t.keys.count("model")) {
    const compiler::ModelDef m = compiler::load_model(file);
    return fmt::format("model {} ({}), {} parameters", m.name, compiler::family_name(m.family),
                       compiler::parameter_count(m));
  }
  if (t.keys.count("run")) {
    const compiler::LoadedRun r = compiler::load_run(file, overrides);
    // Its keys against its model: a key the model or mode does not use is refused here too.
    compiler::check_run_applies(compiler::load_model(r.run.model_file), r.run);
    return fmt::format("run {}: {} replica(s) x {} IPU(s)", r.run.name, r.run.replicas,
                       r.run.ipus_per_replica);
  }
  if (t.keys.count("system")) {
    const LoadedSystem s = load_system(file, overrides);
    return fmt::format("system {}, {} IPU(s)", s.spec.name, s.spec.ipus());
  }
  if (t.keys.count("chip")) {
    const auto loaded = load_chip(file, overrides);
    return fmt::format("chip {}, {} tiles", loaded.spec.name, loaded.spec.tiles);
  }
  for (const char* part : {"machine", "fabric"})
    if (t.keys.count(part)) return validate_part(file, part);
  std::string found;
  for (const auto& k : t.keys) found += (found.empty() ? "" : ", ") + k;
  throw ConfigError(fmt::format(
      "{}: not a file ipusim knows: expected a top-level key chip, system, machine, fabric, run "
      "or model, or format: ipusim-sweep/1 or ipusim-suite/1; found {}",
      file, found.empty() ? "no top-level key" : "the keys " + found));
}

}  // namespace

int validate_command(int argc, char** argv) {
  CommonOptions common;
  ChipOptions chip_opts;
  std::vector<std::string> files;
  po::options_description desc("Options");
  add_common_options(desc, common);
  add_chip_options(desc, chip_opts);
  desc.add_options()("file", po::value(&files)->value_name("FILE"), "config or trace to check");
  po::positional_options_description pos;
  pos.add("file", -1);
  parse("validate", argc, argv, desc, &pos);
  if (common.help) {
    print_help(
        "ipusim validate [options] FILE...",
        "Checks files without simulating, each by its own schema: YAML files by what they\n"
        "are (chip, system, system part, run config, model, sweep spec or regression suite:\n"
        "strict keys, units, ranges and the files they name), traces (*.trace, *.itb) by\n"
        "structure, tile indices and per-tile memory (against --chip). --set applies to\n"
        "chip, system and run files. Prints one line per file; exits non-zero if any file is\n"
        "invalid, with the status of the first invalid file (3: bad input, 4: well formed\n"
        "but does not fit the chip, as 'ipusim run' would exit).",
        desc);
    return 0;
  }
  apply_log_level(common.log_level);
  if (files.empty())
    throw UsageError("ipusim validate: no FILE given (see 'ipusim validate --help')");
  std::optional<ExitCode> failed;  // the first invalid file's status
  std::optional<ChipSpec> chip;
  for (const auto& f : files) {
    try {
      if (is_config(f)) {
        std::cout << fmt::format("ok: {} ({})\n", f, validate_yaml(f, chip_opts.overrides));
        continue;
      }
      if (compiler::is_onnx_file(f)) {
        const compiler::ModelDef m = compiler::load_model(f);
        std::cout << fmt::format("ok: {} (ONNX model {} ({}), {} parameters)\n", f, m.name,
                                 compiler::family_name(m.family), compiler::parameter_count(m));
        continue;
      }
      if (!chip) chip = load_chip_options(chip_opts).spec;
      const trace::Trace t = trace::read_file(f);  // checks the structure
      trace::check_tiles(t, chip->tiles, f);
      for (const auto& program : t.ipus)
        cost::check_memory(*chip, program, cost::memory_map(*chip, program));
      std::cout << fmt::format("ok: {} (trace {}, {} IPU program(s), fits {})\n", f, t.name,
                               t.ipus.size(), chip->name);
    } catch (const Error& e) {
      std::cerr << "error: " << e.what() << "\n";
      if (!failed) failed = e.exit_code();
    }
  }
  return failed ? static_cast<int>(*failed) : 0;
}

}  // namespace ipusim::cli
