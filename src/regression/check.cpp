// SPDX-License-Identifier: Apache-2.0
// ipusim check's work (check.hpp): runs the regression suite described by a manifest, each case
// in its own ipusim child processes, and compares the results with the golden files
// (docs/regression.md).
#include "ipusim/regression/check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/chip.hpp"
#include "ipusim/config/config.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/process/runner.hpp"
#include "ipusim/regression/compare.hpp"
#include "ipusim/regression/golden.hpp"
#include "ipusim/regression/junit.hpp"
#include "ipusim/regression/manifest.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/json_reader.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::regression {
namespace {

namespace fs = std::filesystem;

// A temporary folder for the children's outputs, removed on scope exit unless kept.
class WorkDir {
 public:
  explicit WorkDir(const std::string& keep) {
    if (!keep.empty()) {
      std::error_code ec;
      fs::create_directories(keep, ec);
      if (ec) throw Error(fmt::format("--work-dir {}: cannot create: {}", keep, ec.message()));
      path_ = keep;
      keep_ = true;
      return;
    }
    std::string tmpl = (fs::temp_directory_path() / "ipusim-check-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      throw Error(fmt::format("cannot create a temporary folder in {}",
                              fs::temp_directory_path().string()));
    path_ = tmpl;
  }
  ~WorkDir() {
    if (keep_) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool keep_ = false;
};

bool has_prefix(const std::string& assignment, const char* prefix) {
  return assignment.starts_with(prefix);
}

// Every override of case `c`: its own, then those of the command line that concern it. A chip
// case takes only the chip.* keys of the command line (machine.*, fabric.* and system.* keys
// concern system cases, run.* keys compile cases).
std::vector<std::string> case_overrides(const Case& c, const std::vector<std::string>& extra) {
  std::vector<std::string> out = c.overrides;
  for (const auto& s : extra) {
    const bool wanted =
        has_prefix(s, "chip.") || (has_prefix(s, "run.") ? c.is_compile() : c.is_system());
    if (wanted) out.push_back(s);
  }
  return out;
}

// The subset of `overrides` whose key starts with `prefix` (keep) or does not (drop).
std::vector<std::string> select(const std::vector<std::string>& overrides, const char* prefix,
                                bool keep) {
  std::vector<std::string> out;
  for (const auto& s : overrides)
    if (has_prefix(s, prefix) == keep) out.push_back(s);
  return out;
}

// Kernel planning sees the chip only; 'ipusim run' takes no run.* keys; 'ipusim compile' all.
std::vector<std::string> kernel_overrides(const std::vector<std::string>& o) {
  return select(o, "chip.", true);
}
std::vector<std::string> run_overrides(const std::vector<std::string>& o) {
  return select(o, "run.", false);
}

// Checks each case's configs and overrides before anything runs, so that a typo fails once,
// naming the manifest line, instead of once per child.
void check_configs(const Manifest& m, const std::vector<const Case*>& cases,
                   const std::vector<std::string>& extra) {
  // Command-line keys outside chip.* must at least exist in the system or run schema.
  for (const auto& s : extra) {
    const std::string key = s.substr(0, s.find('='));
    const config::Schema& schema = has_prefix(s, "run.") ? compiler::run_schema() : system_schema();
    if (has_prefix(s, "chip.") || schema.find(key)) continue;
    const auto near = schema.suggest(key);
    throw ConfigError(
        fmt::format("--set {}: unknown key{}", key, near ? " (did you mean " + *near + "?)" : ""));
  }
  std::set<std::string> done;
  for (const Case* c : cases) {
    std::string key = c->compile_path + "\n" + c->system_file + "\n" + c->chip_file;
    for (const auto& s : c->overrides) key += "\n" + s;
    if (!done.insert(key).second) continue;
    const auto chip = c->chip.empty() ? std::nullopt : std::optional(c->chip_file);
    auto load = [&](const std::vector<std::string>& overrides) {
      if (c->is_compile()) compiler::load_run(c->compile_path, select(overrides, "run.", true));
      if (c->is_system()) load_system(c->system_file, run_overrides(overrides), chip);
      if (c->is_kernel() || !c->is_system())
        load_chip(c->chip_file, c->is_system() ? kernel_overrides(overrides) : overrides);
    };
    try {
      load(c->overrides);
    } catch (const Error& e) {
      throw ConfigError(fmt::format("{}:{}: case '{}': {}", m.file, c->line, c->name, e.what()));
    }
    if (!extra.empty()) load(case_overrides(*c, extra));  // names the bad --set itself
  }
}

process::Job job_for(const Case& c, const std::string& exe, const std::string& dir,
                     const std::vector<std::string>& extra) {
  const std::vector<std::string> overrides = case_overrides(c, extra);
  auto sets = [](std::vector<std::string>& argv, const std::vector<std::string>& list) {
    for (const auto& s : list) argv.insert(argv.end(), {"--set", s});
  };
  process::Job job;
  job.log_prefix = dir + "/log";
  std::string trace = c.trace_path;
  if (c.is_kernel()) {
    trace = dir + "/kernel.itb";
    std::vector<std::string> argv{exe, "kernel", c.kernel, "--chip", c.chip_file};
    sets(argv, c.is_system() ? kernel_overrides(overrides) : overrides);
    for (const auto& [k, v] : c.args) {
      argv.push_back("--" + k);
      if (!v.empty()) argv.push_back(v);
    }
    argv.insert(argv.end(), {"--out", trace});
    job.steps.push_back(std::move(argv));
  } else if (c.is_compile()) {
    // One process, no trace file (a full step's trace is 70 to 220 MB): the step is compiled
    // in memory and run; run.* keys go to the run config, the others to the system.
    std::vector<std::string> argv{exe,        "run",        "--quiet", "--run", c.compile_path,
                                  "--system", c.system_file};
    if (!c.chip.empty()) argv.insert(argv.end(), {"--chip", c.chip_file});
    sets(argv, overrides);
    argv.insert(argv.end(), {"--out", dir + "/run"});
    job.steps.push_back(std::move(argv));
    return job;
  }
  std::vector<std::string> run{exe, "run", "--quiet"};
  if (c.is_system()) run.insert(run.end(), {"--system", c.system_file});
  if (!c.is_system() || !c.chip.empty()) run.insert(run.end(), {"--chip", c.chip_file});
  sets(run, run_overrides(overrides));
  run.insert(run.end(), {"--out", dir + "/run", trace});
  job.steps.push_back(std::move(run));
  return job;
}

// Golden files under the goldens folder that belong to no case.
std::vector<std::string> stray_goldens(const Manifest& m) {
  std::set<std::string> known;
  for (const auto& c : m.cases)
    known.insert(fs::path(golden_path(m, c)).lexically_normal().string());
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(m.goldens_dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(m.goldens_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file() && it->path().extension() == ".yaml" &&
        !known.count(it->path().lexically_normal().string()))
      out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

const char* status_word(CaseOutcome::Status s) {
  switch (s) {
    case CaseOutcome::Status::kPassed:
      return "PASS";
    case CaseOutcome::Status::kFailed:
      return "FAIL";
    case CaseOutcome::Status::kError:
      return "ERROR";
  }
  return "?";
}

}  // namespace

CheckResult check(const CheckRequest& request, std::ostream& out, std::ostream& err) {
  const std::string& suite = request.suite;
  const std::vector<std::string>& filters = request.filters;
  const std::vector<std::string>& overrides = request.overrides;
  const bool update = request.update;
  const Manifest manifest = load_manifest(suite);
  std::vector<const Case*> selected;
  for (const auto& c : manifest.cases)
    if (matches_filter(c.name, filters)) selected.push_back(&c);
  if (selected.empty())
    throw UsageError(fmt::format("ipusim check: --filter {} matches none of the {} cases of {}",
                                 fmt::join(filters, " --filter "), manifest.cases.size(), suite));
  if (request.list) {
    for (const Case* c : selected) out << fmt::format("{}  {}\n", c->name, c->definition());
    return CheckResult{};
  }
  check_configs(manifest, selected, overrides);

  const auto started = std::chrono::steady_clock::now();
  const WorkDir work(request.work_dir);
  const std::string exe =
      request.executable.empty() ? process::self_executable() : request.executable;
  std::vector<process::Job> job_list;
  for (std::size_t i = 0; i < selected.size(); ++i) {
    const std::string dir = fmt::format("{}/case-{:03}", work.path(), i);
    fs::create_directories(dir);
    job_list.push_back(job_for(*selected[i], exe, dir, overrides));
  }
  const unsigned parallel =
      std::min<unsigned>(request.jobs, static_cast<unsigned>(selected.size()));
  out << fmt::format(
      "check: {} {} case(s) of {} with {} job(s){}\n", update ? "updating" : "running",
      selected.size(), suite, parallel,
      overrides.empty() ? "" : fmt::format(" (--set {})", fmt::join(overrides, " --set ")));
  out.flush();
  const std::vector<process::JobResult> results = process::run_jobs(job_list, parallel);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  // Compare.
  std::vector<CaseOutcome> outcomes;
  std::vector<std::vector<std::pair<std::string, JsonNumber>>> values(selected.size());
  for (std::size_t i = 0; i < selected.size(); ++i) {
    const Case& c = *selected[i];
    const std::string golden_file = golden_path(manifest, c);
    CaseOutcome o;
    o.name = c.name;
    if (!results[i].ok) {
      o.status = CaseOutcome::Status::kError;
      o.error =
          fmt::format("{}:{}: case '{}': {}", manifest.file, c.line, c.name, results[i].error);
      o.output = results[i].stderr_text;
      o.seconds = results[i].seconds;
      outcomes.push_back(std::move(o));
      continue;
    }
    try {
      const std::string stats_file = fmt::format("{}/case-{:03}/run/stats.json", work.path(), i);
      const JsonValue stats =
          parse_json(read_input_file(stats_file, kMaxStatsBytes, "stats.json"), stats_file);
      values[i] = extract_fields(c, stats, stats_file);
    } catch (const Error& e) {
      o.status = CaseOutcome::Status::kError;
      o.error = fmt::format("{}:{}: case '{}': {}", manifest.file, c.line, c.name, e.what());
      o.seconds = results[i].seconds;
      outcomes.push_back(std::move(o));
      continue;
    }
    std::optional<Golden> golden;
    std::string golden_problem;
    if (fs::exists(golden_file)) {
      try {
        golden = read_golden(golden_file);
      } catch (const Error& e) {
        golden_problem = e.what();
      }
    }
    o = compare_case(c, golden, values[i], golden_file);
    if (!golden_problem.empty()) {
      o.new_golden = false;
      o.problems.assign(1, "unreadable golden: " + golden_problem);
    }
    o.seconds = results[i].seconds;
    outcomes.push_back(std::move(o));
  }

  const auto count = [&](CaseOutcome::Status s) {
    return std::count_if(outcomes.begin(), outcomes.end(),
                         [&](const auto& o) { return o.status == s; });
  };
  const auto errors = count(CaseOutcome::Status::kError);

  // Update: all or nothing, each file atomically.
  if (update) {
    if (errors) {
      err << fmt::format("check --update: wrote no goldens: {} case(s) could not be run\n", errors);
    } else {
      std::size_t changed = 0, added = 0;
      for (std::size_t i = 0; i < selected.size(); ++i) {
        const Case& c = *selected[i];
        Golden g{c.name, c.definition(), values[i]};
        const std::string text = golden_text(g);
        const std::string path = golden_path(manifest, c);
        const bool existed = fs::exists(path);
        if (existed && read_input_file(path, kMaxDocumentBytes, "golden") == text) continue;
        fs::create_directories(fs::path(path).parent_path());
        write_file_atomically(path, [&](std::ostream& o) { o << text; });
        ++(existed ? changed : added);
      }
      for (auto& o : outcomes) {
        o.status = CaseOutcome::Status::kPassed;  // its golden now holds these results
      }
      if (changed + added == 0)
        out << fmt::format("update: all {} golden(s) already match\n", selected.size());
      else
        out << fmt::format("update: wrote {} golden file(s) in {} ({} changed, {} new)\n",
                           changed + added, manifest.goldens_dir, changed, added);
    }
  }

  // Report.
  if (request.verbose)
    for (const auto& o : outcomes)
      out << fmt::format("  {:<5} {} ({:.2f} s)\n", status_word(o.status), o.name, o.seconds);
  const std::string table = moved_table(outcomes, update && errors == 0);
  if (!table.empty()) out << (update ? "changed fields:\n" : "moved fields:\n") << table;
  const bool updated = update && !errors;
  for (const auto& o : outcomes) {
    if (o.status == CaseOutcome::Status::kError) {
      out << fmt::format("ERROR {}: {}\n", o.name, o.error);
    } else if (updated && o.new_golden) {
      out << fmt::format("new   {}: {}\n", o.name,
                         golden_path(manifest, *selected[&o - outcomes.data()]));
    } else {
      for (const auto& p : o.problems)
        out << fmt::format("{} {}: {}\n", updated ? "fixed" : "FAIL ", o.name, p);
    }
  }
  if (filters.empty())
    for (const auto& f : stray_goldens(manifest))
      err << fmt::format("warning: {} belongs to no case of {} (delete it if the case is gone)\n",
                         printable(f), printable(suite));
  if (!request.junit.empty()) {
    const std::string xml =
        junit_xml(manifest.name.empty() ? suite : manifest.name, outcomes, seconds);
    write_file_atomically(request.junit, [&](std::ostream& o) { o << xml; });
  }
  const auto passed = count(CaseOutcome::Status::kPassed);
  const auto failed = static_cast<long>(outcomes.size()) - passed;
  out << fmt::format("check: {} case(s) in {:.1f} s with {} job(s){}\n", outcomes.size(), seconds,
                     parallel, errors ? fmt::format(", {} could not be run", errors) : "");
  out << fmt::format("check: {} passed, {} failed\n", passed, failed);
  return CheckResult{static_cast<std::size_t>(passed), static_cast<std::size_t>(failed)};
}

}  // namespace ipusim::regression
