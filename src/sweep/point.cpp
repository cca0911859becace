// SPDX-License-Identifier: Apache-2.0
#include "ipusim/sweep/point.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/chip.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/source_identity.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/hash.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::sweep {
namespace fs = std::filesystem;
namespace {

std::vector<std::string> names_in(const std::string& folder) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A config named in the spec: a name under <data>/<folder>/ ("pod16") or a path (with a '/'
// or ending in .yaml) relative to the spec's folder.
std::string resolve_file(const Spec& spec, const std::string& key, const std::string& value,
                         const std::string& folder, const std::string& what) {
  const bool is_path =
      value.find('/') != std::string::npos || value.ends_with(".yaml") || value.ends_with(".yml");
  const std::string dir = data_dir() + "/" + folder;
  const std::string file = !is_path ? dir + "/" + value + ".yaml"
                           : fs::path(value).is_absolute()
                               ? value
                               : (fs::path(spec.dir) / value).lexically_normal().string();
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) return file;
  if (is_path)
    throw ConfigError(fmt::format("{}: expected a readable {}, found no file {}", key, what, file));
  const auto names = names_in(dir);
  throw ConfigError(fmt::format(
      "{}: expected the name of a {} in {} ({}) or a path ending in .yaml, found \"{}\"{}", key,
      what, dir, fmt::join(names, ", "), value, did_you_mean(value, names)));
}

// The chip file a system config includes (system.chip, relative to the system file).
std::string system_chip_file(const std::string& system_file) {
  try {
    const YAML::Node root =
        YAML::Load(read_input_file(system_file, kMaxDocumentBytes, "system config"));
    const YAML::Node value = root["system"]["chip"];
    if (value && value.IsScalar())
      return (fs::path(system_file).parent_path() / value.Scalar()).lexically_normal().string();
  } catch (const YAML::Exception&) {
    // Reported below; loading the system names the exact problem.
  }
  throw ConfigError(fmt::format(
      "system: expected a system config with a system.chip key, found none in {}", system_file));
}

std::vector<std::string> select(const std::vector<std::string>& sets, const char* prefix,
                                bool keep) {
  std::vector<std::string> out;
  for (const auto& s : sets)
    if (s.starts_with(prefix) == keep) out.push_back(s);
  return out;
}

void add_sets(std::vector<std::string>& argv, const std::vector<std::string>& sets) {
  for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
}

// Points of one sweep share their run and model files: each is read and parsed once per
// process (listing 90,000 points parsed the same model file 90,000 times). The files do not
// change while a sweep plans its points.
struct ModelEntry {
  compiler::ModelDef model;
  std::string text;  // the file as hashed into point ids
};
const ModelEntry& cached_model(const std::string& file) {
  static std::map<std::string, ModelEntry> cache;
  auto it = cache.find(file);
  if (it == cache.end())
    it = cache
             .emplace(file, ModelEntry{compiler::load_model(file),
                                       read_input_file(file, kMaxModelBytes, "model file")})
             .first;
  return it->second;
}
struct RunEntry {
  compiler::LoadedRun loaded;
  std::string resolved_yaml;
};
const RunEntry& cached_run(const std::string& file, const std::vector<std::string>& sets) {
  static std::map<std::pair<std::string, std::vector<std::string>>, RunEntry> cache;
  auto key = std::pair{file, sets};
  auto it = cache.find(key);
  if (it == cache.end()) {
    compiler::LoadedRun loaded = compiler::load_run(file, sets);
    std::string yaml = loaded.resolved.to_yaml();
    it = cache.emplace(std::move(key), RunEntry{std::move(loaded), std::move(yaml)}).first;
  }
  return it->second;
}

PointPlan plan(const Spec& spec, const Point& point) {
  const Base& b = spec.base;
  PointPlan p;
  p.index = point.index;
  p.values = point.values;
  p.label = point.label();
  p.kernel_point = b.is_kernel();
  p.kernel = b.kernel;
  p.args = b.args;
  p.sets = b.sets;
  std::string run = b.run, model = b.model, system = b.system, chip = b.chip;
  for (const auto& [key, value] : point.values) {
    if (key == "run")
      run = value;
    else if (key == "model")
      model = value;
    else if (key == "system")
      system = value;
    else if (key == "chip")
      chip = value;
    else if (key.starts_with("args.")) {
      const std::string arg = key.substr(5);
      auto it = std::find_if(p.args.begin(), p.args.end(),
                             [&](const Assignment& a) { return a.first == arg; });
      if (it != p.args.end())
        it->second = value;
      else
        p.args.emplace_back(arg, value);
    } else {
      p.sets.push_back(key + "=" + value);
    }
  }
  if (!system.empty())
    p.system_file = resolve_file(spec, "system", system, "configs/systems", "system config");
  if (!chip.empty()) {
    p.chip_file = resolve_file(spec, "chip", chip, "configs/chips", "chip config");
    p.chip_explicit = true;
  }
  const auto explicit_chip = p.chip_explicit ? std::optional(p.chip_file) : std::nullopt;
  Fnv1a64 h;
  auto feed = [&](const std::string& label, const std::string& text) {
    h.update(fmt::format("{} {}\n", label, text.size()));
    h.update(text);
    h.update("\n");
    p.identity_text += fmt::format("--- {}\n{}\n", label, text);
  };
  feed("format", std::string(kPointFormat));
  // The version and the build's source identity: a changed cost model is a new point. A tool
  // that compares two builds' outputs (tools/same-outputs.sh) fixes the identity with
  // IPUSIM_SOURCE_IDENTITY, so that their points keep one id.
  const char* identity = std::getenv("IPUSIM_SOURCE_IDENTITY");
  feed("ipusim", fmt::format("{} {}", IPUSIM_VERSION,
                             identity && *identity ? identity : IPUSIM_SOURCE_IDENTITY));
  if (p.kernel_point) {
    std::string k = p.kernel;
    for (const auto& [a, v] : p.args)
      k += v.empty() ? fmt::format(" --{}", a) : fmt::format(" --{} {}", a, v);
    feed("kernel", k);
    if (p.system_file.empty() && p.chip_file.empty()) {
      p.chip_file = resolve_file(spec, "chip", "gc200", "configs/chips", "chip config");
      p.chip_explicit = true;
    }
    // The kernel is planned for the explicit chip or the system's, with the chip.* overrides.
    const std::string kernel_chip =
        !p.chip_file.empty() ? p.chip_file : system_chip_file(p.system_file);
    const LoadedChip kc = load_chip(kernel_chip, select(p.sets, "chip.", true));
    feed("kernel chip", kc.resolved.to_yaml());
    if (!p.chip_explicit) p.chip_file = kernel_chip;
    if (p.system_file.empty()) {
      const LoadedChip c = load_chip(p.chip_file, p.sets);
      feed("chip", c.resolved.to_yaml());
      p.system = c.spec.name;
      p.ipus = 1;
    } else {
      const LoadedSystem s =
          load_system(p.system_file, p.sets, p.chip_explicit ? explicit_chip : std::nullopt);
      feed("system", s.resolved.to_yaml());
      p.system = s.spec.name;
      p.ipus = s.spec.ipus();
    }
    p.workload = p.kernel;
  } else {
    p.run_file = resolve_file(spec, "run", run, "configs/runs", "run config");
    const std::vector<std::string> run_sets = select(p.sets, "run.", true);
    const RunEntry& r = cached_run(p.run_file, run_sets);
    feed("run", r.resolved_yaml);
    p.model_file = model.empty() ? r.loaded.run.model_file
                                 : resolve_file(spec, "model", model, "models", "model file");
    const ModelEntry& m = cached_model(p.model_file);
    compiler::check_run_applies(m.model, r.loaded.run);
    feed("model", m.text);
    if (p.system_file.empty()) p.system_file = r.loaded.run.system_file;
    const LoadedSystem s = load_system(p.system_file, select(p.sets, "run.", false), explicit_chip);
    feed("system", s.resolved.to_yaml());
    p.workload = m.model.name;
    p.system = s.spec.name;
    p.ipus = s.spec.ipus();
  }
  p.id = h.hex();
  return p;
}

}  // namespace

PointPlan plan_point(const Spec& spec, const Point& point) {
  try {
    return plan(spec, point);
  } catch (const Error& e) {
    throw ConfigError(fmt::format("{}:{}: point {} ({}): {}", spec.file, point.line, point.index,
                                  point.label(), e.what()));
  }
}

std::string point_trace_name(const PointPlan& plan) {
  return plan.kernel_point ? "kernel.itb" : "";
}

process::Job point_job(const PointPlan& p, const std::string& exe, const std::string& work_dir) {
  process::Job job;
  job.log_prefix = work_dir + "/log";
  if (!p.kernel_point) {
    // A workload point is one process: the training step is compiled in memory and simulated
    // (run.* keys go to the run config, the others to the system), with no trace file.
    std::vector<std::string> argv{exe,       "run",        "--quiet",  "--run",      p.run_file,
                                  "--model", p.model_file, "--system", p.system_file};
    if (p.chip_explicit) argv.insert(argv.end(), {"--chip", p.chip_file});
    add_sets(argv, p.sets);
    argv.insert(argv.end(), {"--out", work_dir});
    job.steps.push_back(std::move(argv));
    return job;
  }
  const std::string trace = work_dir + "/" + point_trace_name(p);
  std::vector<std::string> argv{exe, "kernel", p.kernel, "--chip", p.chip_file};
  add_sets(argv, select(p.sets, "chip.", true));
  for (const auto& [k, v] : p.args) {
    argv.push_back("--" + k);
    if (!v.empty()) argv.push_back(v);
  }
  argv.insert(argv.end(), {"--out", trace});
  job.steps.push_back(std::move(argv));
  std::vector<std::string> run{exe, "run", "--quiet"};
  if (!p.system_file.empty()) run.insert(run.end(), {"--system", p.system_file});
  if (p.system_file.empty() || p.chip_explicit) run.insert(run.end(), {"--chip", p.chip_file});
  add_sets(run, select(p.sets, "run.", false));
  run.insert(run.end(), {"--out", work_dir, trace});
  job.steps.push_back(std::move(run));
  return job;
}

}  // namespace ipusim::sweep
