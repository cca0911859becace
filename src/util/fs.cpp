// SPDX-License-Identifier: Apache-2.0
#include "ipusim/util/fs.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ipusim/util/error.hpp"

namespace ipusim {
namespace {

// A fixed table of temporaries in flight, readable from a signal handler.
constexpr std::size_t kMaxPending = 16;
constexpr std::size_t kMaxPath = 4096;
std::array<std::array<char, kMaxPath>, kMaxPending> g_pending{};
std::array<std::atomic<bool>, kMaxPending> g_used{};

int register_temporary(const std::string& path) {
  if (path.size() + 1 > kMaxPath) return -1;
  for (std::size_t i = 0; i < kMaxPending; ++i) {
    bool expected = false;
    if (g_used[i].compare_exchange_strong(expected, true)) {
      std::memcpy(g_pending[i].data(), path.c_str(), path.size() + 1);
      return static_cast<int>(i);
    }
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot >= 0) g_used[static_cast<std::size_t>(slot)].store(false);
}

}  // namespace

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write, bool binary) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int slot = register_temporary(tmp);
  try {
    {
      std::ofstream out(tmp, binary ? std::ios::binary | std::ios::trunc : std::ios::trunc);
      if (!out) throw Error(fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno)));
      write(out);
      out.flush();
      if (!out) throw Error(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw Error(fmt::format("{}: cannot rename temporary into place: {}", path,
                              std::strerror(errno)));
  } catch (...) {
    std::remove(tmp.c_str());
    unregister_temporary(slot);
    throw;
  }
  unregister_temporary(slot);
}

void remove_pending_temporaries() noexcept {
  for (std::size_t i = 0; i < kMaxPending; ++i)
    if (g_used[i].load()) ::unlink(g_pending[i].data());
}

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ipusim
