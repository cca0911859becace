// SPDX-License-Identifier: Apache-2.0
#include "ipusim/util/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>

#include "ipusim/util/strings.hpp"

namespace ipusim {
namespace {

std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto t = static_cast<std::uint64_t>(std::llround(s));
  if (t >= 3600) return fmt::format("{}h{:02d}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02d}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::string rate(double r) {
  if (r >= 1e6) return fmt::format("{:.1f}M", r / 1e6);
  if (r >= 1e3) return fmt::format("{:.1f}k", r / 1e3);
  return fmt::format("{:.0f}", r);
}

}  // namespace

Progress::Progress(std::string label, std::string unit, bool enabled, std::FILE* out, bool force)
    : label_(std::move(label)), unit_(std::move(unit)), out_(out) {
  active_ = enabled && out_ != nullptr && (force || ::isatty(::fileno(out_)) == 1);
  start_ = last_ = std::chrono::steady_clock::now();
}

std::string Progress::format_line(std::string_view label, std::string_view what,
                                  std::string_view unit, std::uint64_t done, std::uint64_t total,
                                  double elapsed_s) {
  std::string line = fmt::format("{}: {}", label, what.empty() ? "" : fmt::format("{} ", what));
  const double r = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0.0;
  if (total > 0) {
    const double pct = 100.0 * static_cast<double>(done) / static_cast<double>(total);
    line += fmt::format("{}/{} {} ({:.1f}%)", done, total, unit, pct);
    if (!unit.empty()) line += fmt::format(", {} {}/s", rate(r), unit);
    const double eta = r > 0 ? static_cast<double>(total - std::min(done, total)) / r : -1;
    line += fmt::format(", ETA {}", duration(eta));
  } else {
    line += fmt::format("{} {}, {} {}/s", done, unit, rate(r), unit);
  }
  line += fmt::format(", {} elapsed", duration(elapsed_s));
  return line;
}

void Progress::draw(const std::string& line) {
  // Carriage return + erase to end of line: the line is redrawn in place.
  std::fprintf(out_, "\r\x1b[K%s", line.c_str());
  std::fflush(out_);
  drawn_ = true;
}

void Progress::update(std::uint64_t done, std::uint64_t total) {
  if (!active_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(100) && done < total) return;
  last_ = now;
  draw(format_line(label_, "", unit_, done, total,
                   std::chrono::duration<double>(now - start_).count()));
}

void Progress::stage(std::string_view what, std::uint64_t index, std::uint64_t count) {
  if (!active_) return;
  const auto now = std::chrono::steady_clock::now();
  last_ = now;
  draw(format_line(label_, what, "stages", index, count,
                   std::chrono::duration<double>(now - start_).count()));
}

void Progress::message(std::string_view what) {
  if (!active_) return;
  const auto now = std::chrono::steady_clock::now();
  last_ = now;
  // `what` may quote a user's file name: its control characters are escaped.
  draw(fmt::format("{}: {}, {} elapsed", label_, printable(what),
                   duration(std::chrono::duration<double>(now - start_).count())));
}

void Progress::finish() {
  if (active_ && drawn_) {
    std::fprintf(out_, "\r\x1b[K");
    std::fflush(out_);
  }
  drawn_ = false;
}

}  // namespace ipusim
