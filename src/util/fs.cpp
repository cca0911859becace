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

namespace {

// Writes `write`'s output to the registered temporary `tmp` (throws Error naming `path`).
void write_temporary(const std::string& path, const std::string& tmp,
                     const std::function<void(std::ostream&)>& write, bool binary) {
  std::ofstream out(tmp, binary ? std::ios::binary | std::ios::trunc : std::ios::trunc);
  if (!out) throw Error(fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno)));
  write(out);
  out.flush();
  if (!out) throw Error(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
}

void rename_into_place(const std::string& tmp, const std::string& path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error(fmt::format("{}: cannot rename temporary into place: {}", path,
                            std::strerror(errno)));
}

std::string temporary_for(const std::string& path) {
  return fmt::format("{}.tmp.{}", path, ::getpid());
}

}  // namespace

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write, bool binary) {
  write_files_atomically({FileWriter{path, write, binary}});
}

void write_files_atomically(const std::vector<FileWriter>& files) {
  std::vector<std::string> tmps;
  std::vector<int> slots;
  const auto release = [&](bool remove) {
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (remove) std::remove(tmps[i].c_str());
      unregister_temporary(slots[i]);
    }
  };
  try {
    for (const auto& f : files) {
      tmps.push_back(temporary_for(f.path));
      slots.push_back(register_temporary(tmps.back()));
      write_temporary(f.path, tmps.back(), f.write, f.binary);
    }
    if (files.size() > 1) std::remove(files.back().path.c_str());
    for (std::size_t i = 0; i < files.size(); ++i) rename_into_place(tmps[i], files[i].path);
  } catch (...) {
    release(true);
    throw;
  }
  release(false);
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
