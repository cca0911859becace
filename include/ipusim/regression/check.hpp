// SPDX-License-Identifier: Apache-2.0
// A regression check, as 'ipusim check' does it (docs/regression.md): the selected cases of a
// suite, each run in its own ipusim child processes, compared with their goldens (or, with
// update, written into them). The command parses and checks its options into a CheckRequest;
// check() does the rest, so that it can be tested without a process of its own.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace ipusim::regression {

// Exit status when a case moved beyond its tolerance, lacks a golden or could not be run.
constexpr int kCheckFailed = 5;

struct CheckRequest {
  std::string suite;                   // the manifest file
  std::vector<std::string> filters;    // --filter globs (none: every case)
  std::vector<std::string> overrides;  // --set KEY=VALUE, checked for their form
  std::string junit;                   // also write JUnit XML here (empty: not written)
  std::string work_dir;                // keep the cases' outputs here (empty: a removed temp)
  unsigned jobs = 1;                   // cases run in parallel, 1 to 256
  bool update = false;                 // rewrite the goldens of the selected cases
  bool list = false;                   // print the selected cases and stop
  bool verbose = false;                // one line per case
  std::string executable;              // the ipusim binary the cases run (empty: this one)
};

struct CheckResult {
  std::size_t passed = 0;
  std::size_t failed = 0;  // moved, without a golden, or not run
  int exit_code() const { return failed ? kCheckFailed : 0; }
};

// Runs the request, writing the report on `out` and warnings (stray goldens, an update that
// wrote nothing) on `err`. Throws ConfigError for a bad manifest or override and UsageError for
// filters that select no case.
CheckResult check(const CheckRequest& request, std::ostream& out, std::ostream& err);

}  // namespace ipusim::regression
