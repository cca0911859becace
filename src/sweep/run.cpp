// SPDX-License-Identifier: Apache-2.0
// ipusim sweep's work (run.hpp): expands a sweep spec into points, runs each point in its own
// ipusim child processes (locally with jobs, or spread over MPI ranks under mpirun), skips
// points that finished before with the same inputs, and writes sweep.csv and sweep.json
// (docs/sweeps.md).
#include "ipusim/sweep/run.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>

#include "ipusim/process/runner.hpp"
#include "ipusim/sweep/mpi.hpp"
#include "ipusim/sweep/point.hpp"
#include "ipusim/sweep/results.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/json_reader.hpp"

namespace ipusim::sweep {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kTmpSuffix = ".tmp";

using Clock = std::chrono::steady_clock;

// Progress on stderr when it is a terminal: points done of total, failed, ETA.
class Progress {
 public:
  Progress(std::ostream& err, bool enabled, std::size_t total, std::size_t skipped)
      : err_(err),
        enabled_(enabled),
        total_(total),
        done_(skipped),
        skipped_(skipped),
        start_(Clock::now()) {
    show();
  }
  void point_done(bool ok) {
    ++done_;
    if (!ok) ++failed_;
    show();
  }
  void finish() {
    if (enabled_) err_ << "\n";
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
    err_ << fmt::format("\rsweep: {}/{} points done, {} failed, {}   ", done_, total_, failed_,
                        eta);
    err_.flush();
  }
  std::ostream& err_;
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

// Whether `name` is a point's work directory: "<id>.tmp", the id 16 hexadecimal digits. A
// user's "points/mydata.tmp" is not one and stays.
bool is_work_dir_name(const std::string& name) {
  constexpr std::size_t kIdDigits = 16;
  return name.size() == kIdDigits + kTmpSuffix.size() && name.ends_with(kTmpSuffix) &&
         name.find_first_not_of("0123456789abcdef") == kIdDigits;
}

void remove_stale_work_dirs(const Layout& layout) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(layout.points(), ec)) {
    if (e.is_directory() && is_work_dir_name(e.path().filename().string())) {
      std::error_code rm;
      fs::remove_all(e.path(), rm);
    }
  }
}

// The result of a finished point recorded in its run directory, or nullopt if it must run
// (never ran, failed, or its record is unreadable or belongs to other inputs).
std::optional<PointResult> finished_result(const Layout& layout, const PointPlan& plan) {
  const std::string record = layout.final_dir(plan.id) + "/point.json";
  std::error_code ec;
  if (!fs::is_regular_file(record, ec) ||
      !fs::is_regular_file(layout.final_dir(plan.id) + "/stats.json", ec))
    return std::nullopt;
  try {
    PointResult r =
        parse_point_record(read_input_file(record, kMaxDocumentBytes, "point record"), record);
    if (!r.ok || r.id != plan.id) return std::nullopt;
    return r;
  } catch (const Error& e) {
    spdlog::warn("{}; running the point again", e.what());
    return std::nullopt;
  }
}

// After a point's children ended: reads its stats.json (or its error), writes point.json and
// moves the work directory to points/<id> (replacing an earlier failed attempt).
PointResult finish_point(const Layout& layout, const PointPlan& plan,
                         const process::JobResult& job) {
  const std::string work = layout.work_dir(plan.id);
  const std::string run_dir = "points/" + plan.id;
  PointResult r;
  if (job.ok) {
    const std::string stats_file = work + "/stats.json";
    try {
      r = result_from_stats(
          plan, parse_json(read_input_file(stats_file, kMaxStatsBytes, "stats.json"), stats_file),
          stats_file);
    } catch (const Error& e) {
      r = failed_result(plan, point_error(e.what(), e.what(), work, run_dir));
    }
  } else {
    r = failed_result(plan, point_error(job.stderr_text, job.error, work, run_dir));
  }
  std::error_code ec;
  if (const std::string trace = point_trace_name(plan); !trace.empty())
    fs::remove(work + "/" + trace, ec);  // the kernel's trace: identified by trace.id
  write_file_atomically(work + "/point.json", [&](std::ostream& o) { o << point_record(r); });
  const std::string final_dir = layout.final_dir(plan.id);
  fs::remove_all(final_dir, ec);
  fs::rename(work, final_dir, ec);
  if (ec)
    throw Error(
        fmt::format("{}: cannot move the finished point into place: {}", final_dir, ec.message()));
  return r;
}

// Runs one point in this process's children (an MPI worker) and returns its result.
PointResult run_point(const Layout& layout, const PointPlan& plan, const std::string& exe) {
  const std::string work = layout.work_dir(plan.id);
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::create_directories(work);
  try {
    const auto results = process::run_jobs({point_job(plan, exe, work)}, 1);
    return finish_point(layout, plan, results.front());
  } catch (...) {
    fs::remove_all(work, ec);
    throw;
  }
}

}  // namespace

SweepResult run_sweep(const SweepRequest& request, std::ostream& out, std::ostream& err) {
  const std::string& spec_file = request.spec_file;
  const std::string& out_dir = request.out_dir;
  const Spec spec = load_spec(spec_file);
  const std::vector<Point> points = expand(spec, request.max_points);
  if (points.empty())
    throw ConfigError(fmt::format(
        "{}: expected at least one point, found none (every combination is excluded)", spec_file));
  std::vector<PointPlan> plans;
  for (const auto& p : points) plans.push_back(plan_point(spec, p));
  if (request.list) {
    for (const auto& p : plans) out << fmt::format("{}  {}  {}\n", p.index, p.id, p.label);
    return SweepResult{};
  }
  if (out_dir.empty())
    throw UsageError("ipusim sweep: missing --out DIR (see 'ipusim sweep --help')");

  std::optional<mpi::Session> session;
  if (mpi::launched()) session.emplace();
  const int rank = session ? session->rank() : 0;
  const int ranks = session ? session->size() : 1;
  const Layout layout{out_dir};
  const std::string exe =
      request.executable.empty() ? process::self_executable() : request.executable;

  // One point in a child process, its result as the record ranks send to rank 0.
  auto run_record = [&](std::size_t index) {
    const PointPlan& plan = plans.at(index);
    try {
      return point_record(run_point(layout, plan, exe));
    } catch (const process::Interrupted&) {
      throw;  // aborts the MPI job (Session)
    } catch (const Error& e) {
      return point_record(failed_result(plan, e.what()));  // e.g. a full disk: this point only
    }
  };
  if (rank > 0) {
    mpi::work(*session, run_record);
    return SweepResult{};
  }

  // One sweep at a time in an output directory: a second is refused at once (as `run --out`
  // is), before it removes the first one's work directories.
  const DirectoryLock lock(layout.out);
  fs::create_directories(layout.points());
  remove_stale_work_dirs(layout);
  // One run per distinct id (two axis values may resolve to the same inputs).
  std::map<std::string, PointResult> by_id;
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
  Progress progress(err, request.progress, distinct, skipped);
  std::size_t ran = 0;

  std::size_t on_rank0 = 0;
  if (ranks > 1 && !pending.empty()) {
    on_rank0 = mpi::serve(
        *session, pending,
        [&](std::size_t index, const std::string& payload) {
          const PointPlan& plan = plans.at(index);
          PointResult r;
          try {
            r = parse_point_record(payload, fmt::format("rank result for point {}", index));
          } catch (const Error& e) {
            r = failed_result(plan, e.what());
          }
          by_id[plan.id] = r;
          ++ran;
          progress.point_done(r.ok);
        },
        {}, run_record);
  } else if (ranks > 1) {
    mpi::serve(*session, {}, [](std::size_t, const std::string&) {}, {});
  } else if (!pending.empty()) {
    std::vector<process::Job> job_list;
    for (std::size_t i : pending) {
      const std::string work = layout.work_dir(plans[i].id);
      fs::create_directories(work);
      job_list.push_back(point_job(plans[i], exe, work));
    }
    try {
      process::run_jobs(job_list,
                        std::min<unsigned>(request.jobs, static_cast<unsigned>(job_list.size())),
                        [&](std::size_t j, const process::JobResult& res) {
                          const PointPlan& plan = plans[pending[j]];
                          PointResult r = finish_point(layout, plan, res);
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

  std::vector<PointResult> results;
  std::size_t failed = 0;
  for (const auto& plan : plans) {
    PointResult r = by_id.at(plan.id);
    r.index = plan.index;
    r.values = plan.values;
    r.workload = plan.workload;
    r.system = plan.system;
    r.ipus = plan.ipus;
    if (!r.ok) ++failed;
    results.push_back(std::move(r));
  }
  const std::string csv = sweep_csv(spec.axis_keys(), results);
  write_file_atomically(out_dir + "/sweep.csv", [&](std::ostream& o) { o << csv; });
  const std::string json = sweep_json(spec_file, spec.name, results);
  write_file_atomically(out_dir + "/sweep.json", [&](std::ostream& o) { o << json; });
  out << fmt::format(
      "sweep: {} point(s): {} ran, {} skipped (finished before), {} failed{}\n", results.size(),
      ran, skipped, failed,
      ranks > 1 ? fmt::format(" ({} MPI ranks; {} of the points run on rank 0)", ranks, on_rank0)
                : "");
  for (const auto& r : results)
    if (!r.ok)
      out << fmt::format("FAILED point {} ({}): {}\n", r.index, plans[r.index].label, r.error);
  out << fmt::format("sweep: results in {}/sweep.csv and {}/sweep.json\n", out_dir, out_dir);
  return SweepResult{results.size(), ran, skipped, failed};
}

}  // namespace ipusim::sweep
