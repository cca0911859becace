// SPDX-License-Identifier: Apache-2.0
// ipusim sweep: expands a sweep spec into points, runs each point in its own ipusim child
// processes (locally with --jobs, or spread over MPI ranks under mpirun), skips points that
// finished before with the same inputs, and writes sweep.csv and sweep.json (docs/sweeps.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "common.hpp"
#include "ipusim/process/runner.hpp"
#include "ipusim/sweep/mpi.hpp"
#include "ipusim/sweep/point.hpp"
#include "ipusim/sweep/results.hpp"
#include "ipusim/sweep/spec.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/json_reader.hpp"

namespace ipusim::cli {
namespace {

namespace fs = std::filesystem;
namespace sw = ipusim::sweep;

// Exit status when at least one point failed (the others ran and were recorded).
constexpr int kSweepFailed = 5;
constexpr std::string_view kTmpSuffix = ".tmp";

using Clock = std::chrono::steady_clock;

// Progress on stderr when it is a terminal: points done of total, failed, ETA.
class Progress {
 public:
  Progress(bool enabled, std::size_t total, std::size_t skipped)
      : enabled_(enabled), total_(total), done_(skipped), skipped_(skipped), start_(Clock::now()) {
    show();
  }
  void point_done(bool ok) {
    ++done_;
    if (!ok) ++failed_;
    show();
  }
  void finish() {
    if (enabled_) std::cerr << "\n";
  }

 private:
  void show() {
    if (!enabled_) return;
    const std::size_t ran = done_ - skipped_;
    std::string eta = "ETA --";
    if (ran > 0 && done_ < total_) {
      const double per =
          std::chrono::duration<double>(Clock::now() - start_).count() / static_cast<double>(ran);
      eta = fmt::format("ETA {:.0f} s", per * static_cast<double>(total_ - done_));
    } else if (done_ >= total_) {
      eta = "done";
    }
    std::cerr << fmt::format("\rsweep: {}/{} points done, {} failed, {}   ", done_, total_, failed_,
                             eta);
    std::cerr.flush();
  }
  bool enabled_;
  std::size_t total_, done_, skipped_, failed_ = 0;
  Clock::time_point start_;
};

// Where the sweep keeps its points: <out>/points/<id> (finished) and <out>/points/<id>.tmp
// (running; removed on interrupt and at the start of the next sweep).
struct Layout {
  std::string out;
  std::string points() const { return out + "/points"; }
  std::string final_dir(const std::string& id) const { return points() + "/" + id; }
  std::string work_dir(const std::string& id) const {
    return points() + "/" + id + std::string(kTmpSuffix);
  }
};

void remove_stale_work_dirs(const Layout& layout) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(layout.points(), ec)) {
    if (e.is_directory() && e.path().filename().string().ends_with(kTmpSuffix)) {
      std::error_code rm;
      fs::remove_all(e.path(), rm);
    }
  }
}

// The result of a finished point recorded in its run directory, or nullopt if it must run
// (never ran, failed, or its record is unreadable or belongs to other inputs).
std::optional<sw::PointResult> finished_result(const Layout& layout, const sw::PointPlan& plan) {
  const std::string record = layout.final_dir(plan.id) + "/point.json";
  std::error_code ec;
  if (!fs::is_regular_file(record, ec) ||
      !fs::is_regular_file(layout.final_dir(plan.id) + "/stats.json", ec))
    return std::nullopt;
  try {
    sw::PointResult r = sw::parse_point_record(read_file_text(record), record);
    if (!r.ok || r.id != plan.id) return std::nullopt;
    return r;
  } catch (const Error& e) {
    spdlog::warn("{}; running the point again", e.what());
    return std::nullopt;
  }
}

// After a point's children ended: reads its stats.json (or its error), writes point.json and
// moves the work directory to points/<id> (replacing an earlier failed attempt).
sw::PointResult finish_point(const Layout& layout, const sw::PointPlan& plan,
                             const process::JobResult& job) {
  const std::string work = layout.work_dir(plan.id);
  const std::string run_dir = "points/" + plan.id;
  sw::PointResult r;
  if (job.ok) {
    const std::string stats_file = work + "/stats.json";
    try {
      r = sw::result_from_stats(plan, parse_json(read_file_text(stats_file), stats_file),
                                stats_file);
    } catch (const Error& e) {
      r = sw::failed_result(plan, sw::point_error(e.what(), e.what(), work, run_dir));
    }
  } else {
    r = sw::failed_result(plan, sw::point_error(job.stderr_text, job.error, work, run_dir));
  }
  std::error_code ec;
  if (const std::string trace = sw::point_trace_name(plan); !trace.empty())
    fs::remove(work + "/" + trace, ec);  // the kernel's trace: identified by trace.id
  write_file_atomically(work + "/point.json", [&](std::ostream& o) { o << sw::point_record(r); });
  const std::string final_dir = layout.final_dir(plan.id);
  fs::remove_all(final_dir, ec);
  fs::rename(work, final_dir, ec);
  if (ec)
    throw Error(
        fmt::format("{}: cannot move the finished point into place: {}", final_dir, ec.message()));
  return r;
}

// Runs one point in this process's children (an MPI worker) and returns its result.
sw::PointResult run_point(const Layout& layout, const sw::PointPlan& plan, const std::string& exe) {
  const std::string work = layout.work_dir(plan.id);
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::create_directories(work);
  try {
    const auto results = process::run_jobs({sw::point_job(plan, exe, work)}, 1);
    return finish_point(layout, plan, results.front());
  } catch (...) {
    fs::remove_all(work, ec);
    throw;
  }
}

}  // namespace

int sweep_command(int argc, char** argv) {
  CommonOptions common;
  std::string spec_file, out_dir;
  bool quiet = false, list = false;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  unsigned jobs = cores;
  std::uint64_t max_points = sw::kDefaultMaxPoints;
  po::options_description desc("Options");
  add_common_options(desc, common);
  desc.add_options()(
      "out,o", po::value(&out_dir)->value_name("DIR"),
      "write sweep.csv, sweep.json and each point's run directory (points/<id>/) into DIR; "
      "points already finished there with the same inputs are not run again")(
      "jobs,j", unsigned_value(&jobs)->default_value(cores)->value_name("N"),
      "points run in parallel (default: the number of cores); under mpirun each rank but rank 0 "
      "runs one point at a time instead")(
      "max-points",
      unsigned_value(&max_points)->default_value(sw::kDefaultMaxPoints)->value_name("N"),
      "refuse a spec that expands to more than N points (counted before expanding)")(
      "list", po::bool_switch(&list), "print the expanded points (index, id, overrides) and exit")(
      "quiet,q", po::bool_switch(&quiet),
      "no progress line on stderr (it is shown only on a terminal anyway)")(
      "spec", po::value(&spec_file)->value_name("SPEC"), "the sweep spec (YAML, docs/sweeps.md)");
  po::positional_options_description pos;
  pos.add("spec", 1);
  parse("sweep", argc, argv, desc, &pos);
  if (common.help) {
    print_help(
        "ipusim sweep SPEC --out DIR [--jobs N]\n       mpirun -np N ipusim sweep SPEC --out DIR",
        "Runs every point of a sweep spec: a base run (a reference kernel, or a training\n"
        "step compiled from a run config) under each combination of the spec's axes\n"
        "(config keys as with --set, the system, chip, run or model file, kernel\n"
        "arguments), as a product or zipped, minus excluded points. Each point runs in\n"
        "its own ipusim processes ('kernel' then 'run --out', or one 'run --run --out'\n"
        "that compiles the training step in memory) and gets its own run directory\n"
        "DIR/points/<id>, where <id> is a hash of all its resolved\n"
        "inputs: re-running skips finished points and runs failed or changed ones.\n"
        "Writes DIR/sweep.csv and DIR/sweep.json, one row per point in spec order, the\n"
        "same bytes whatever --jobs or the MPI rank count. Under mpirun, rank 0 hands\n"
        "points to the other ranks (largest first) and writes the files.\n"
        "Exits 0 if every point ran, 5 if some failed (recorded with their error), 3 on\n"
        "a bad spec, 130 when interrupted (finished points are kept). See docs/sweeps.md.",
        desc);
    return 0;
  }
  apply_log_level(common.log_level);
  if (spec_file.empty()) throw UsageError("ipusim sweep: missing SPEC (see 'ipusim sweep --help')");
  if (jobs < 1 || jobs > 256)
    throw UsageError(fmt::format("--jobs: expected 1 to 256, found {}", jobs));

  const sw::Spec spec = sw::load_spec(spec_file);
  const std::vector<sw::Point> points = sw::expand(spec, max_points);
  if (points.empty())
    throw ConfigError(fmt::format(
        "{}: expected at least one point, found none (every combination is excluded)", spec_file));
  std::vector<sw::PointPlan> plans;
  for (const auto& p : points) plans.push_back(sw::plan_point(spec, p));
  if (list) {
    for (const auto& p : plans) std::cout << fmt::format("{}  {}  {}\n", p.index, p.id, p.label);
    return 0;
  }
  if (out_dir.empty())
    throw UsageError("ipusim sweep: missing --out DIR (see 'ipusim sweep --help')");

  std::optional<sw::mpi::Session> session;
  if (sw::mpi::launched()) session.emplace();
  const int rank = session ? session->rank() : 0;
  const int ranks = session ? session->size() : 1;
  const Layout layout{out_dir};
  const std::string exe = process::self_executable();

  // One point in a child process, its result as the record ranks send to rank 0.
  auto run_record = [&](std::size_t index) {
    const sw::PointPlan& plan = plans.at(index);
    try {
      return sw::point_record(run_point(layout, plan, exe));
    } catch (const process::Interrupted&) {
      throw;  // aborts the MPI job (Session)
    } catch (const Error& e) {
      return sw::point_record(
          sw::failed_result(plan, e.what()));  // e.g. a full disk: this point only
    }
  };
  if (rank > 0) {
    sw::mpi::work(*session, run_record);
    return 0;
  }

  fs::create_directories(layout.points());
  remove_stale_work_dirs(layout);
  // One run per distinct id (two axis values may resolve to the same inputs).
  std::map<std::string, sw::PointResult> by_id;
  std::vector<std::size_t> pending;
  std::size_t skipped = 0;
  {
    std::map<std::string, bool> seen;
    for (const auto& p : plans) {
      if (seen.count(p.id)) continue;
      seen[p.id] = true;
      if (auto r = finished_result(layout, p)) {
        by_id[p.id] = *r;
        ++skipped;
      } else {
        pending.push_back(p.index);
      }
    }
  }
  // Largest points first (by IPU count), so that the last to finish are short ones.
  std::stable_sort(pending.begin(), pending.end(),
                   [&](std::size_t a, std::size_t b) { return plans[a].ipus > plans[b].ipus; });
  const std::size_t distinct = pending.size() + skipped;
  Progress progress(!quiet && ::isatty(STDERR_FILENO), distinct, skipped);
  std::size_t ran = 0;

  std::size_t on_rank0 = 0;
  if (ranks > 1 && !pending.empty()) {
    on_rank0 = sw::mpi::serve(
        *session, pending,
        [&](std::size_t index, const std::string& payload) {
          const sw::PointPlan& plan = plans.at(index);
          sw::PointResult r;
          try {
            r = sw::parse_point_record(payload, fmt::format("rank result for point {}", index));
          } catch (const Error& e) {
            r = sw::failed_result(plan, e.what());
          }
          by_id[plan.id] = r;
          ++ran;
          progress.point_done(r.ok);
        },
        {}, run_record);
  } else if (ranks > 1) {
    sw::mpi::serve(*session, {}, [](std::size_t, const std::string&) {}, {});
  } else if (!pending.empty()) {
    std::vector<process::Job> job_list;
    for (std::size_t i : pending) {
      const std::string work = layout.work_dir(plans[i].id);
      fs::create_directories(work);
      job_list.push_back(sw::point_job(plans[i], exe, work));
    }
    try {
      process::run_jobs(job_list, std::min<unsigned>(jobs, static_cast<unsigned>(job_list.size())),
                        [&](std::size_t j, const process::JobResult& res) {
                          const sw::PointPlan& plan = plans[pending[j]];
                          sw::PointResult r = finish_point(layout, plan, res);
                          by_id[plan.id] = r;
                          ++ran;
                          progress.point_done(r.ok);
                        });
    } catch (...) {
      progress.finish();
      remove_stale_work_dirs(layout);  // the points that were running; finished ones stay
      throw;
    }
  }
  progress.finish();

  std::vector<sw::PointResult> results;
  std::size_t failed = 0;
  for (const auto& plan : plans) {
    sw::PointResult r = by_id.at(plan.id);
    r.index = plan.index;
    r.values = plan.values;
    r.workload = plan.workload;
    r.system = plan.system;
    r.ipus = plan.ipus;
    if (!r.ok) ++failed;
    results.push_back(std::move(r));
  }
  const std::string csv = sw::sweep_csv(spec.axis_keys(), results);
  write_file_atomically(out_dir + "/sweep.csv", [&](std::ostream& o) { o << csv; });
  const std::string json = sw::sweep_json(spec_file, spec.name, results);
  write_file_atomically(out_dir + "/sweep.json", [&](std::ostream& o) { o << json; });
  std::cout << fmt::format(
      "sweep: {} point(s): {} ran, {} skipped (finished before), {} failed{}\n", results.size(),
      ran, skipped, failed,
      ranks > 1 ? fmt::format(" ({} MPI ranks; {} of the points run on rank 0)", ranks, on_rank0)
                : "");
  for (const auto& r : results)
    if (!r.ok)
      std::cout << fmt::format("FAILED point {} ({}): {}\n", r.index, plans[r.index].label,
                               r.error);
  std::cout << fmt::format("sweep: results in {}/sweep.csv and {}/sweep.json\n", out_dir, out_dir);
  return failed ? kSweepFailed : 0;
}

}  // namespace ipusim::cli
