// SPDX-License-Identifier: Apache-2.0
#include "ipusim/util/fs.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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
    throw Error(
        fmt::format("{}: cannot rename temporary into place: {}", path, std::strerror(errno)));
}

std::string temporary_for(const std::string& path) {
  return fmt::format("{}.tmp.{}", path, ::getpid());
}

}  // namespace

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write,
                           bool binary) {
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

DirectoryLock::DirectoryLock(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot create output directory: {}", dir, ec.message()));
  const std::string path = dir + "/.ipusim.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error(fmt::format("{}: cannot create lock file: {}", path, std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw Error(fmt::format(
          "{}: another ipusim process is writing into this directory (it holds {}); wait for it "
          "or choose another --out",
          dir, path));
    throw Error(fmt::format("{}: cannot lock: {}", path, std::strerror(err)));
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

void create_parent_directories(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec)
    throw Error(
        fmt::format("{}: cannot create directory {}: {}", path, parent.string(), ec.message()));
}

std::optional<std::string> read_if_fifo(const std::string& path, std::size_t max_bytes,
                                        const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISFIFO(st.st_mode)) return std::nullopt;
  long timeout_ms = 10000;
  if (const char* env = std::getenv("IPUSIM_FIFO_TIMEOUT_MS")) timeout_ms = std::atol(env);
  // O_NONBLOCK: open() returns at once even without a writer (a blocking open would wait for
  // one forever); poll() then waits for data or for a writer that closed.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open {}: {}", path, what, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  pollfd p{fd, POLLIN, 0};
  int ready = 0;
  do {
    ready = ::poll(&p, 1, static_cast<int>(timeout_ms));
  } while (ready < 0 && errno == EINTR);
  if (ready == 0)
    throw Error(fmt::format(
        "{}: cannot read {}: it is a FIFO and nothing wrote to it within {} ms (is its writer "
        "running?)",
        path, what, timeout_ms));
  if (ready < 0)
    throw Error(fmt::format("{}: cannot read {}: {}", path, what, std::strerror(errno)));
  // A writer is there (or was, and closed): read to the end, blocking from now on.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string text;
  char block[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, block, sizeof block);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("{}: cannot read {}: {}", path, what, std::strerror(errno)));
    if (n == 0) break;
    text.append(block, static_cast<std::size_t>(n));
    if (text.size() > max_bytes)
      throw Error(fmt::format("{}: expected a {} of at most {} bytes, found a larger one", path,
                              what, max_bytes));
  }
  return text;
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
