// SPDX-License-Identifier: Apache-2.0
// Runs jobs, each a sequence of child processes, with at most N running at once. Each child
// is its own process (SystemC elaborates once per process); stdin is /dev/null and stdout and
// stderr go to files. On SIGINT or SIGTERM the running children are terminated and
// run_jobs() throws Interrupted (exit status 130), so that callers unwind and clean up.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "ipusim/util/error.hpp"

namespace ipusim::process {

class Interrupted : public Error {
 public:
  using Error::Error;
  ExitCode exit_code() const override { return ExitCode::kInterrupted; }
};

struct Job {
  std::vector<std::vector<std::string>> steps;  // argv of each child, run in order
  std::string log_prefix;                       // step i writes <prefix>.<i>.out and .err
};

struct JobResult {
  bool ok = false;
  int failed_step = -1;     // index of the step that failed
  int exit_status = 0;      // its exit status (or 128 + signal)
  std::string error;        // one line: which command failed and the last line of its stderr
  std::string stderr_text;  // the failed step's stderr (bounded)
  double seconds = 0;       // wall time of all its steps
};

// Called as each job ends (ok or failed), before the next one starts in its slot, with the
// job's index; an exception it throws stops the running children and propagates.
using JobDone = std::function<void(std::size_t job, const JobResult& result)>;

// Runs every job and returns their results in the same order. `parallel` >= 1. Children get
// our environment without the OMPI_*, PMIX_* and PMI_* variables of an MPI launcher.
std::vector<JobResult> run_jobs(const std::vector<Job>& jobs, unsigned parallel,
                                const JobDone& on_done = {});

// The path of the running executable (/proc/self/exe).
std::string self_executable();

}  // namespace ipusim::process
