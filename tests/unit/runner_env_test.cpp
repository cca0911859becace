// SPDX-License-Identifier: Apache-2.0
// The child-process runner shared by 'ipusim check' and 'ipusim sweep': children do not inherit
// an MPI launcher's OMPI_*, PMIX_* and PMI_* variables (a sweep rank's children must not take
// themselves for MPI ranks), keep the rest of the environment, and report each job as it ends.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ipusim/process/runner.hpp"

namespace ipusim::process {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Runner, ChildrenGetNoMpiLauncherVariables) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "ipusim-runner-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  ::setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  ::setenv("PMIX_RANK", "1", 1);
  ::setenv("PMI_SIZE", "3", 1);
  ::setenv("IPUSIM_RUNNER_TEST", "kept", 1);
  Job env_job;
  env_job.steps = {{"/usr/bin/env"}};
  env_job.log_prefix = tmpl + "/env";
  Job fail_job;
  fail_job.steps = {{"/bin/sh", "-c", "echo 'error: broken' >&2; exit 4"}};
  fail_job.log_prefix = tmpl + "/fail";
  std::vector<std::size_t> done;
  const auto results =
      run_jobs({env_job, fail_job}, 1, [&](std::size_t j, const JobResult&) { done.push_back(j); });
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("PMIX_RANK");
  ::unsetenv("PMI_SIZE");
  ::unsetenv("IPUSIM_RUNNER_TEST");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].ok);
  const std::string env = slurp(tmpl + "/env.0.out");
  EXPECT_NE(env.find("IPUSIM_RUNNER_TEST=kept\n"), std::string::npos) << env;
  EXPECT_EQ(env.find("OMPI_"), std::string::npos) << env;
  EXPECT_EQ(env.find("PMIX_"), std::string::npos) << env;
  EXPECT_EQ(env.find("PMI_"), std::string::npos) << env;
  EXPECT_FALSE(results[1].ok);
  EXPECT_EQ(results[1].exit_status, 4);
  EXPECT_EQ(results[1].stderr_text, "error: broken\n");
  EXPECT_EQ(done, (std::vector<std::size_t>{0, 1}));
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace ipusim::process
