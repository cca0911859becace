// SPDX-License-Identifier: Apache-2.0
// Runs the real ipusim binary in a child process and captures its output and exit status.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ipusim::testing {

// True when the tests (and so the ipusim binary they run) are built with AddressSanitizer.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAsan = true;
#else
inline constexpr bool kUnderAsan = false;
#endif
#else
inline constexpr bool kUnderAsan = false;
#endif

// Under AddressSanitizer, an exception thrown on a SystemC thread's own stack (model errors)
// makes ASan print a three-line warning that it cannot unpoison that stack (SystemC switches
// stacks; google/sanitizers#189). It is not ipusim's output, so the checks below ignore it.
inline std::string without_asan_stack_warning(std::string err) {
  const std::string marker = "WARNING: ASan is ignoring requested __asan_handle_no_return";
  const auto at = err.find(marker);
  if (at == std::string::npos) return err;
  const auto begin = err.rfind('\n', at) == std::string::npos ? 0 : err.rfind('\n', at) + 1;
  auto end = begin;
  for (int line = 0; line < 3 && end != std::string::npos; ++line) {
    end = err.find('\n', end);
    if (end != std::string::npos) ++end;
  }
  err.erase(begin, end == std::string::npos ? std::string::npos : end - begin);
  return err;
}

struct CommandResult {
  int status = -1;
  std::string out;
  std::string err;
};

inline std::string source_dir() { return IPUSIM_SOURCE_DIR; }
inline std::string chip_file(const std::string& name) {
  return source_dir() + "/configs/chips/" + name + ".yaml";
}

// A fresh temporary directory per test, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ipusim-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Concatenates arguments into one command-line string.
template <class... T>
std::string fmt_args(const T&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command line under coreutils' `timeout`: SIGTERM after `seconds`, SIGKILL 10 s
// later. For tools outside ipusim (Chromium, mpirun, script) whose hang in some environment
// would otherwise hold the whole test suite. Returns the exit status; kTimedOut when it was
// stopped, -1 when it did not exit normally.
inline constexpr int kTimedOut = 124;
inline int system_bounded(const std::string& cmd, int seconds) {
  const std::string bounded =
      "timeout -k 10 " + std::to_string(seconds) + " sh -c " + shell_quote(cmd);
  const int raw = std::system(bounded.c_str());
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

// Runs `ipusim <args>`; stdout and stderr are captured separately through temp files.
inline CommandResult ipusim(const std::string& args) {
  TempDir tmp;
  const std::string cmd = std::string("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 ") + IPUSIM_BINARY +
                          " " + args + " >" + tmp.file("out") + " 2>" + tmp.file("err") +
                          " </dev/null";
  CommandResult r;
  const int raw = std::system(cmd.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_all(tmp.file("out"));
  r.err = read_all(tmp.file("err"));
  return r;
}

// Extracts a number after `"key": {"value": ` paths is overkill here; tests read stats.json
// with this tiny helper: the first "value" that follows the given quoted key.
inline double json_value_after(const std::string& json, const std::string& anchor) {
  auto pos = json.find(anchor);
  if (pos == std::string::npos) return -1;
  pos = json.find("\"value\": ", pos);
  if (pos == std::string::npos) return -1;
  return std::stod(json.substr(pos + 9));
}

}  // namespace ipusim::testing
