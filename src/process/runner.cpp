// SPDX-License-Identifier: Apache-2.0
#include "ipusim/process/runner.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"

extern char** environ;

namespace ipusim::process {
namespace {

using Clock = std::chrono::steady_clock;

// Children in flight, readable from the signal handler.
constexpr std::size_t kMaxChildren = 256;
std::array<std::atomic<pid_t>, kMaxChildren> g_children{};

volatile std::sig_atomic_t g_interrupted = 0;

// Stops the running children and lets run_jobs() unwind (so that the caller can remove its
// temporary files) by interrupting its waitpid().
extern "C" void on_check_signal(int sig) {
  g_interrupted = sig;
  for (auto& c : g_children) {
    const pid_t pid = c.load();
    if (pid > 0) ::kill(pid, SIGTERM);
  }
}

std::string tail(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > max_bytes) s = "..." + s.substr(s.size() - max_bytes);
  return s;
}

std::string last_line(const std::string& text) {
  std::size_t end = text.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  const std::size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end - (start == std::string::npos ? 0 : start + 1) + 1);
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (i) out += ' ';
    out += i == 0 ? std::filesystem::path(argv[i]).filename().string() : argv[i];
  }
  return out;
}

// The environment of the children: ours without the variables of an MPI launcher (OMPI_*,
// PMIX_*, PMI_*), so that a child of an MPI rank does not take itself for one.
std::vector<char*> child_environment() {
  std::vector<char*> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view v(*e);
    if (v.starts_with("OMPI_") || v.starts_with("PMIX_") || v.starts_with("PMI_")) continue;
    env.push_back(*e);
  }
  env.push_back(nullptr);
  return env;
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& out_file,
            const std::string& err_file) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  std::vector<char*> env = child_environment();
  const int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw Error(fmt::format("cannot start {}: {}", argv[0], std::strerror(rc)));
  return pid;
}

struct Running {
  std::size_t job = 0;
  std::size_t step = 0;
  std::size_t slot = 0;
  Clock::time_point started;
};

}  // namespace

std::string self_executable() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw Error(
        fmt::format("cannot find the ipusim executable (/proc/self/exe): {}", ec.message()));
  return p.string();
}

std::vector<JobResult> run_jobs(const std::vector<Job>& jobs, unsigned parallel,
                                const JobDone& on_done) {
  const std::size_t width = std::clamp<std::size_t>(parallel, 1, kMaxChildren);
  std::vector<JobResult> results(jobs.size());
  std::deque<std::size_t> pending;
  for (std::size_t i = 0; i < jobs.size(); ++i) pending.push_back(i);
  std::vector<std::pair<pid_t, Running>> running;

  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = on_check_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);

  auto start = [&](std::size_t job, std::size_t step, std::size_t slot) {
    const Job& j = jobs[job];
    const std::string prefix = fmt::format("{}.{}", j.log_prefix, step);
    const pid_t pid = spawn(j.steps[step], prefix + ".out", prefix + ".err");
    g_children[slot].store(pid);
    running.push_back({pid, Running{job, step, slot, Clock::now()}});
  };
  auto start_next_job = [&](std::size_t slot) {
    while (!pending.empty()) {
      const std::size_t job = pending.front();
      pending.pop_front();
      if (jobs[job].steps.empty()) {
        results[job].ok = true;
        if (on_done) on_done(job, results[job]);
        continue;
      }
      start(job, 0, slot);
      return;
    }
  };

  g_interrupted = 0;
  try {
    for (std::size_t s = 0; s < width && !g_interrupted; ++s) start_next_job(s);
    while (!running.empty()) {
      if (g_interrupted) throw Interrupted("interrupted; running child processes stopped");
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, 0);
      if (pid < 0) {
        if (errno == EINTR) continue;
        throw Error(fmt::format("waiting for a child process: {}", std::strerror(errno)));
      }
      auto it = std::find_if(running.begin(), running.end(),
                             [&](const auto& r) { return r.first == pid; });
      if (it == running.end()) continue;  // not one of ours
      const Running r = it->second;
      running.erase(it);
      g_children[r.slot].store(0);
      JobResult& res = results[r.job];
      res.seconds += std::chrono::duration<double>(Clock::now() - r.started).count();
      const int code = WIFEXITED(status) ? WEXITSTATUS(status)
                                         : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
      const Job& j = jobs[r.job];
      if (code == 0 && r.step + 1 < j.steps.size()) {
        start(r.job, r.step + 1, r.slot);
        continue;
      }
      if (code == 0) {
        res.ok = true;
      } else {
        const std::string err_file = fmt::format("{}.{}.err", j.log_prefix, r.step);
        res.failed_step = static_cast<int>(r.step);
        res.exit_status = code;
        res.stderr_text = tail(err_file, 8192);
        const std::string last = last_line(res.stderr_text);
        res.error = fmt::format("'{}' exited with status {}{}", command_line(j.steps[r.step]), code,
                                last.empty() ? "" : ": " + last);
      }
      if (g_interrupted) continue;  // a child stopped by our SIGTERM is not a result
      if (on_done) on_done(r.job, res);
      start_next_job(r.slot);
    }
  } catch (...) {
    for (const auto& [pid, r] : running) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
      g_children[r.slot].store(0);
    }
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    throw;
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (g_interrupted) throw Interrupted("interrupted; running child processes stopped");
  return results;
}

}  // namespace ipusim::process
