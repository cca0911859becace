// SPDX-License-Identifier: Apache-2.0
#include "ipusim/util/fs.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "ipusim/util/error.hpp"

namespace ipusim {
namespace {

// A fixed table of paths, readable from a signal handler: a slot is taken with an atomic flag
// and holds its path as a C string.
class SignalSafePaths {
 public:
  // The slot `path` took, or -1 (too long, or the table is full: the path is then not removed
  // on a signal, as before the table).
  int add(const std::string& path) {
    if (path.size() + 1 > kMaxPath) return -1;
    for (std::size_t i = 0; i < kMaxPaths; ++i) {
      bool expected = false;
      if (used_[i].compare_exchange_strong(expected, true)) {
        std::memcpy(paths_[i].data(), path.c_str(), path.size() + 1);
        return static_cast<int>(i);
      }
    }
    return -1;
  }
  void remove(int slot) {
    if (slot >= 0) used_[static_cast<std::size_t>(slot)].store(false);
  }
  // Calls `f` (async-signal-safe) with each path held.
  template <class F>
  void each(F f) const noexcept {
    for (std::size_t i = 0; i < kMaxPaths; ++i)
      if (used_[i].load()) f(paths_[i].data());
  }

 private:
  static constexpr std::size_t kMaxPaths = 16;
  static constexpr std::size_t kMaxPath = 4096;
  std::array<std::array<char, kMaxPath>, kMaxPaths> paths_{};
  std::array<std::atomic<bool>, kMaxPaths> used_{};
};

// Temporaries in flight and the lock files DirectoryLocks created (unlinked on a signal), and
// the output directories they created (removed after them, if empty).
SignalSafePaths g_temporaries;
SignalSafePaths g_created_dirs;

int register_temporary(const std::string& path) { return g_temporaries.add(path); }
void unregister_temporary(int slot) { g_temporaries.remove(slot); }
int register_created_dir(const std::string& path) { return g_created_dirs.add(path); }
void unregister_created_dir(int slot) { g_created_dirs.remove(slot); }

}  // namespace

namespace {

// A stream buffer over a file descriptor it does not own: buffered writes, retried on EINTR;
// the first failing write() sets error() (its errno) and every later write is dropped.
class FdBuf : public std::streambuf {
 public:
  explicit FdBuf(int fd) : fd_(fd) { setp(buf_.data(), buf_.data() + buf_.size()); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const char* p = pbase();
    while (p < pptr() && error_ == 0) {
      const ssize_t n = ::write(fd_, p, static_cast<std::size_t>(pptr() - p));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) error_ = errno;
      if (n > 0) p += n;
    }
    setp(buf_.data(), buf_.data() + buf_.size());
    return error_ == 0;
  }
  int fd_;
  int error_ = 0;
  std::array<char, 64 * 1024> buf_{};
};

// Runs `write` on a stream over `fd`; throws IoError naming `path` if any write failed.
void write_to_fd(const std::string& path, int fd, const std::function<void(std::ostream&)>& write) {
  FdBuf buf(fd);
  std::ostream out(&buf);
  write(out);
  out.flush();
  if (buf.error() != 0 || !out)
    throw IoError(fmt::format("{}: write failed: {}", path,
                              std::strerror(buf.error() != 0 ? buf.error() : EIO)));
}

// How an output path is written.
enum class Target { kReplace, kStream };

// kStream for an existing character device or FIFO (written into, never replaced), kReplace
// for a regular file or a path that does not exist yet; IoError for anything else.
Target target_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Target::kReplace;  // new (or a dangling link)
  if (S_ISREG(st.st_mode)) return Target::kReplace;
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return Target::kStream;
  throw IoError(fmt::format("{}: cannot write an output here: it is {}", path,
                            S_ISDIR(st.st_mode)    ? "a directory"
                            : S_ISSOCK(st.st_mode) ? "a socket"
                                                   : "a block device"));
}

// Writes into a character device or FIFO in place. A FIFO nobody reads is an error at once
// (opened without blocking: ENXIO), not a hang.
void write_stream(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    throw IoError(errno == ENXIO
                      ? fmt::format("{}: cannot write: it is a FIFO and nothing reads it", path)
                      : fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  write_to_fd(path, fd, write);
}

// Creates a new temporary beside `path` (mkostemp: exclusive, never an existing name) with
// the permissions a new file gets (0666 less the umask) and registers it; returns its name and
// an open descriptor.
std::pair<std::string, int> create_temporary(const std::string& path, int& slot) {
  std::string name = path + ".tmp.XXXXXX";
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0)
    throw IoError(fmt::format("{}: cannot create a temporary file beside it: {}", path,
                              std::strerror(errno)));
  slot = register_temporary(name);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  return {name, fd};
}

// Renames the temporary written through `fd` over `path`, after checking that its name still
// names that file: a name replaced while it was written (unlinked and planted as a symlink, in
// a directory others may write to) is refused, not renamed into place.
void rename_into_place(const std::string& tmp, int fd, const std::string& path) {
  struct stat ours {
  }, named{};
  if (::fstat(fd, &ours) != 0 || ::lstat(tmp.c_str(), &named) != 0 || ours.st_dev != named.st_dev ||
      ours.st_ino != named.st_ino)
    throw IoError(fmt::format(
        "{}: the temporary {} was replaced by another file while it was written; not renamed "
        "into place",
        path, tmp));
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw IoError(
        fmt::format("{}: cannot rename temporary into place: {}", path, std::strerror(errno)));
}

}  // namespace

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write,
                           bool binary) {
  // Written through a file descriptor: text and binary are the same on POSIX.
  write_files_atomically({FileWriter{path, write, binary}});
}

void write_files_atomically(const std::vector<FileWriter>& files,
                            const std::vector<std::string>& stale) {
  std::vector<Target> targets;
  for (const auto& f : files) targets.push_back(target_of(f.path));
  std::vector<std::string> tmps;  // per file: its temporary ("" for a streamed one)
  std::vector<int> slots, fds;
  const auto release = [&](bool remove) {
    for (std::size_t i = 0; i < tmps.size(); ++i) {
      if (remove && !tmps[i].empty()) ::unlink(tmps[i].c_str());
      if (fds[i] >= 0) ::close(fds[i]);
      unregister_temporary(slots[i]);
    }
  };
  try {
    for (std::size_t i = 0; i < files.size(); ++i) {
      const auto& f = files[i];
      if (targets[i] == Target::kStream) {
        tmps.emplace_back();
        slots.push_back(-1);
        fds.push_back(-1);
        write_stream(f.path, f.write);
        continue;
      }
      int slot = -1;
      auto [tmp, fd] = create_temporary(f.path, slot);
      tmps.push_back(tmp);
      slots.push_back(slot);
      fds.push_back(fd);
      write_to_fd(f.path, fd, f.write);
    }
    // The group's marker (its last file) goes first, so that an interruption between the
    // renames never leaves the old marker beside new files.
    if (files.size() > 1 && targets.back() == Target::kReplace)
      std::remove(files.back().path.c_str());
    for (const auto& path : stale) std::remove(path.c_str());
    for (std::size_t i = 0; i < files.size(); ++i)
      if (targets[i] == Target::kReplace) rename_into_place(tmps[i], fds[i], files[i].path);
  } catch (...) {
    release(true);
    throw;
  }
  release(false);
}

DirectoryLock::DirectoryLock(const std::string& dir)
    : dir_(dir), path_(dir + "/.ipusim.lock"), exceptions_(std::uncaught_exceptions()) {
  std::error_code ec;
  created_dir_ = std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError(fmt::format("{}: cannot create output directory: {}", dir, ec.message()));
  const std::string& path = path_;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ >= 0)
    created_file_ = true;
  else if (errno == EEXIST)
    fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    if (created_dir_) ::rmdir(dir.c_str());
    throw IoError(fmt::format("{}: cannot create lock file: {}", path, std::strerror(err)));
  }
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
  // An interrupted run (SIGINT, SIGTERM, ...) leaves what a failed one leaves: no lock file it
  // created, no empty directory it created (remove_pending_temporaries, from the handler).
  if (created_file_) lock_slot_ = register_temporary(path_);
  if (created_dir_) dir_slot_ = register_created_dir(dir_);
}

DirectoryLock::~DirectoryLock() {
  if (fd_ < 0) return;
  unregister_temporary(lock_slot_);
  unregister_created_dir(dir_slot_);
  // Unlinked while still locked, so no other process can lock this file in between.
  if (std::uncaught_exceptions() > exceptions_) {
    if (created_file_) ::unlink(path_.c_str());
    if (created_dir_) ::rmdir(dir_.c_str());  // fails, as it should, unless it is empty
  }
  ::close(fd_);  // closing releases the lock
}

void create_parent_directories(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec)
    throw IoError(
        fmt::format("{}: cannot create directory {}: {}", path, parent.string(), ec.message()));
}

namespace {
// Whether two paths name one file: equal when made absolute and normal, or, when both exist,
// the same file (a link, a second path).
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::absolute(a, ec).lexically_normal() == fs::absolute(b, ec).lexically_normal()) return true;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec);
}
}  // namespace

void check_output_is_not_an_input(const std::string& output, const std::string& option,
                                  const std::vector<NamedInput>& inputs) {
  for (const NamedInput& in : inputs)
    if (!in.path.empty() && !output.empty() && same_file(output, in.path))
      throw UsageError(
          fmt::format("{} {}: is {} ({}): an output never replaces an input; "
                      "write it to another file",
                      option, output, in.what, in.path));
}

bool is_run_dir_file_name(const std::string& name) {
  for (const char* f : {"stats.json", "tiles.csv", "config.resolved.yaml", "trace.id",
                        "supersteps.csv", "layers.csv", "plan.csv", "report.html", ".ipusim.lock"})
    if (name == f) return true;
  return false;
}

void check_not_in_run_dir(const std::string& output, const std::string& option,
                          const std::string& dir) {
  if (output.empty() || dir.empty()) return;
  const std::filesystem::path p(output);
  if (is_run_dir_file_name(p.filename().string()) &&
      same_file(p.parent_path().empty() ? "." : p.parent_path().string(), dir))
    throw UsageError(
        fmt::format("{} {}: is a file of the run directory --out {}, which the run "
                    "writes itself; write it to another file",
                    option, output, dir));
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
  g_temporaries.each([](const char* path) { ::unlink(path); });
  g_created_dirs.each([](const char* path) { ::rmdir(path); });  // only if empty
}

namespace {

// "a directory", "a character device", ... for a file that is neither regular nor a FIFO.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The file's status, for an input: Error if it cannot be read or is neither a regular file
// nor a FIFO.
struct stat input_status(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(fmt::format("{}: cannot open {}: {}", path, what, std::strerror(errno)));
  if (S_ISDIR(st.st_mode))
    throw Error(fmt::format("{}: cannot read a {}: it is a directory", path, what));
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    throw Error(fmt::format("{}: cannot read a {}: it is {} (expected a regular file or a FIFO)",
                            path, what, kind_of(st.st_mode)));
  return st;
}

std::string larger_than(const std::string& path, const std::string& what, std::size_t max_bytes) {
  return fmt::format("{}: expected a {} of at most {} bytes, found a larger one", path, what,
                     max_bytes);
}

}  // namespace

void check_input_file(const std::string& path, const std::string& what) {
  (void)input_status(path, what);
}

std::string read_input_file(const std::string& path, std::size_t max_bytes,
                            const std::string& what) {
  const struct stat st = input_status(path, what);
  if (S_ISFIFO(st.st_mode)) {
    if (auto text = read_if_fifo(path, max_bytes, what)) return std::move(*text);
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw Error(larger_than(path, what, max_bytes));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(fmt::format("{}: cannot open {}: {}", path, what, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char block[64 * 1024];
  for (;;) {  // to the end, which may have moved since stat(): the cap still holds
    const ssize_t n = ::read(fd, block, sizeof block);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("{}: cannot read {}: {}", path, what, std::strerror(errno)));
    if (n == 0) break;
    text.append(block, static_cast<std::size_t>(n));
    if (text.size() > max_bytes) throw Error(larger_than(path, what, max_bytes));
  }
  return text;
}

MappedInput::MappedInput(const std::string& path, std::size_t max_bytes, const std::string& what) {
  const struct stat st = input_status(path, what);
  if (!S_ISREG(st.st_mode) || st.st_size == 0) {
    text_ = read_input_file(path, max_bytes, what);
    return;
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw Error(larger_than(path, what, max_bytes));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open {}: {}", path, what, std::strerror(errno)));
  const auto size = static_cast<std::size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {  // (a file system without mmap: read it whole)
    text_ = read_input_file(path, max_bytes, what);
    return;
  }
  map_ = map;
  size_ = size;
}

MappedInput::~MappedInput() {
  if (map_) ::munmap(map_, size_);
}

}  // namespace ipusim
