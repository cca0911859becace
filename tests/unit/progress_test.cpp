// SPDX-License-Identifier: Apache-2.0
#include "ipusim/util/progress.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace ipusim {
namespace {

TEST(Progress, LineShowsCountPercentRateAndEta) {
  // 250 of 1000 in 5 s: 50/s, 750 left -> 15 s.
  EXPECT_EQ(Progress::format_line("ipusim run", "", "phases", 250, 1000, 5.0),
            "ipusim run: 250/1000 phases (25.0%), 50 phases/s, ETA 15s, 5s elapsed");
  EXPECT_EQ(Progress::format_line("x", "", "phases", 3000000, 12000000, 100.0),
            "x: 3000000/12000000 phases (25.0%), 30.0k phases/s, ETA 5m00s, 1m40s elapsed");
  // Unknown total: no percentage or ETA.
  EXPECT_EQ(Progress::format_line("x", "", "phases", 10, 0, 2.0),
            "x: 10 phases, 5 phases/s, 2s elapsed");
  // Nothing done yet: the ETA is unknown.
  EXPECT_EQ(Progress::format_line("c", "lowering", "stages", 0, 3, 0.0),
            "c: lowering 0/3 stages (0.0%), 0 stages/s, ETA ?, 0s elapsed");
}

TEST(Progress, SilentWhenDisabledOrNotATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress off("p", "phases", false, f, /*force=*/true);
    EXPECT_FALSE(off.active());
    off.update(1, 2);
    Progress not_tty("p", "phases", true, f);  // a file is not a terminal
    EXPECT_FALSE(not_tty.active());
    not_tty.update(1, 2);
  }
  EXPECT_EQ(std::ftell(f), 0);
  {
    Progress forced("p", "phases", true, f, /*force=*/true);
    forced.update(1, 2);
    forced.finish();
  }
  std::rewind(f);
  char buf[256] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  EXPECT_TRUE(std::string(buf, n).starts_with("\r\x1b[Kp: 1/2 phases (50.0%), ")) << buf;
  EXPECT_NE(std::string(buf, n).find("\r\x1b[K", 3), std::string::npos);  // erased at the end
  std::fclose(f);
}

}  // namespace
}  // namespace ipusim
