// SPDX-License-Identifier: Apache-2.0
// A one-line progress reporter for long commands (docs/reports.md): prints
// "label: what done/total (pct%) rate/s ETA" on stderr, redrawn in place at most ten times a
// second, and erases itself when finished. Silent unless stderr is a terminal and it is
// enabled (commands pass !--quiet), so pipes, logs and machine-readable output never see it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace ipusim {

class Progress {
 public:
  // `unit` names what is counted ("phases"); `enabled` false makes every call a no-op.
  // `force` draws even when `out` is not a terminal (tests of the formatting only).
  Progress(std::string label, std::string unit, bool enabled, std::FILE* out = stderr,
           bool force = false);
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  bool active() const { return active_; }
  // `done` of `total` units (total 0 = unknown: no percentage or ETA). Cheap when throttled.
  void update(std::uint64_t done, std::uint64_t total);
  // A named stage of a command with a few coarse stages (e.g. compile): "what (i/n)".
  void stage(std::string_view what, std::uint64_t index, std::uint64_t count);
  // A phase without a count (e.g. "reading trace"): "label: what, Ns elapsed".
  void message(std::string_view what);
  // Erases the line (idempotent).
  void finish();

  // The text drawn for these numbers (no control characters); exposed for unit tests.
  static std::string format_line(std::string_view label, std::string_view what,
                                 std::string_view unit, std::uint64_t done, std::uint64_t total,
                                 double elapsed_s);

 private:
  void draw(const std::string& line);
  std::string label_, unit_;
  std::FILE* out_;
  bool active_ = false;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace ipusim
