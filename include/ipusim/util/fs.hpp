// SPDX-License-Identifier: Apache-2.0
// Output files are written whole or not at all: content goes to a new temporary beside the
// output, "<path>.tmp.XXXXXX" created exclusively (mkostemp: it never opens a name that exists,
// so a planted file or symlink is never written through), and is renamed into place only
// after a successful flush. An output that is a character device or a FIFO (/dev/null,
// /dev/stdout, `mkfifo`) is written into directly and never replaced; a directory, socket or
// block device is refused. Temporaries are registered so that a signal handler can remove them
// (see remove_pending_temporaries()). A write the file system refuses is an IoError.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ipusim {

// Calls `write` with a stream on a temporary file beside `path`, then renames it over `path`.
// On any exception the temporary is removed and the exception propagates; `path` is untouched.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write,
                           bool binary = false);

// One file of a group written with write_files_atomically().
struct FileWriter {
  std::string path;
  std::function<void(std::ostream&)> write;
  bool binary = false;
};

// Writes a group of files that belong together (a run directory): every file goes to its
// temporary first; only when all are written are they renamed into place, in order. The last
// file marks the group complete: its old version is removed before the first rename, so an
// interruption can leave the group without its marker but never the marker beside files of a
// different run. `stale` files (an earlier group's that this one does not write) are removed
// with the marker, only once every temporary is written. On any exception every temporary is
// removed and no path is touched.
void write_files_atomically(const std::vector<FileWriter>& files,
                            const std::vector<std::string>& stale = {});

// Removes every temporary currently being written, the lock files DirectoryLocks created, then
// the output directories they created if empty. Async-signal-safe enough for our handler: it
// only calls unlink() and rmdir() on pre-built C strings.
void remove_pending_temporaries() noexcept;

// Holds an exclusive lock on a directory for the lifetime of the object: creates `dir` (and its
// parents) and locks `dir/.ipusim.lock` with flock(). A second process that tries to lock the
// same directory gets an Error at once instead of mixing its files with the first one's
// (issue 16, defect H). The kernel drops the lock when the process ends, however it ends, so a
// crashed run never leaves a stale lock. The (empty) lock file stays after a run that
// succeeded; when the object is destroyed by an exception (a failed run), the lock file goes if
// this object created it, and so does the directory if this object created it and nothing else
// is in it: a failed run leaves no empty output directory behind (issue 27). An interrupted one
// neither: the signal handler's remove_pending_temporaries removes them too (issue 55).
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& dir);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
  std::string dir_, path_;
  bool created_dir_ = false, created_file_ = false;
  int exceptions_ = 0;                  // std::uncaught_exceptions() when constructed
  int lock_slot_ = -1, dir_slot_ = -1;  // their entries for the signal handler, if created
};

// Creates the parent directories of an output file that do not exist yet (Error if it cannot).
void create_parent_directories(const std::string& path);

// An input of a command, for check_output_is_not_an_input: what it is ("the run config") and
// its path ("" when not given).
struct NamedInput {
  std::string what, path;
};
// The one output-ownership check of files a command writes (issue 55, part 2): refuses, as a
// UsageError naming the option and the input, an `output` (given by `option`, e.g. "--out")
// that is the same file as one of `inputs` (the same path, or a link to it), so that no command
// replaces its own input.
void check_output_is_not_an_input(const std::string& output, const std::string& option,
                                  const std::vector<NamedInput>& inputs);
// The files a run directory holds (report::write_run_dir, the lock): a file another option of
// the same run would write among them is refused by check_not_in_run_dir.
bool is_run_dir_file_name(const std::string& name);
// Refuses an `output` (given by `option`) that is one of the files run directory `dir` holds,
// which the run would overwrite with its own.
void check_not_in_run_dir(const std::string& output, const std::string& option,
                          const std::string& dir);

// Inputs that are FIFOs or pipes (`mkfifo f`, or a shell's `<(cat chip.yaml)`), which a plain
// open() would wait on forever when nothing writes to them (issue 16, defect L). Returns nullopt
// when `path` is not a FIFO. Otherwise opens it without blocking, waits until a writer has sent
// data or closed (at most IPUSIM_FIFO_TIMEOUT_MS milliseconds, default 10000), then reads it to
// the end and returns the content; throws Error naming the path when no data came in time or
// the content passes `max_bytes`. `what` names the input in messages ("config file", "trace").
std::optional<std::string> read_if_fifo(const std::string& path, std::size_t max_bytes,
                                        const std::string& what);

// The one reader of ipusim's input files (issue 30, defect 8). Reads the whole of `path`, of at
// most `max_bytes`: a regular file (a larger one is refused before it is read, by its size),
// or a FIFO (read_if_fifo: a bounded wait for a writer). A directory, device or socket is
// refused by name. `what` names the input in messages ("config file", "golden"). Throws Error
// (exit status 3) naming the path.
std::string read_input_file(const std::string& path, std::size_t max_bytes,
                            const std::string& what);

// An input file's bytes as read_input_file gives them (same checks and cap), mapped into memory
// where it is a regular file: pages a reader skips (an ONNX model's weights) are never read
// from disk, so memory follows what is read, not the file's size. Other inputs (a FIFO) are
// read whole.
class MappedInput {
 public:
  MappedInput(const std::string& path, std::size_t max_bytes, const std::string& what);
  ~MappedInput();
  MappedInput(const MappedInput&) = delete;
  MappedInput& operator=(const MappedInput&) = delete;
  std::string_view bytes() const {
    return map_ ? std::string_view(static_cast<const char*>(map_), size_) : std::string_view(text_);
  }

 private:
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::string text_;
};

// Checks that `path` can be read as an input that is streamed rather than read whole (a
// trace): a regular file or a FIFO; throws Error as read_input_file does otherwise.
void check_input_file(const std::string& path, const std::string& what);

// Caps of read_input_file by kind of input (docs/reliability.md "Readers"): documents written
// by hand or by ipusim (configs, models, specs, suites, goldens, point records) and the results
// of a run, by file.
inline constexpr std::size_t kMaxDocumentBytes = std::size_t{16} << 20;      // 16 MiB
inline constexpr std::size_t kMaxModelBytes = std::size_t{64} << 20;         // 64 MiB
inline constexpr std::size_t kMaxStatsBytes = std::size_t{1} << 30;          // stats.json, 1 GiB
inline constexpr std::size_t kMaxTilesCsvBytes = std::size_t{256} << 20;     // tiles.csv
inline constexpr std::size_t kMaxLayersCsvBytes = std::size_t{1} << 30;      // layers.csv
inline constexpr std::size_t kMaxPlanCsvBytes = std::size_t{1} << 30;        // plan.csv
inline constexpr std::size_t kMaxSuperstepsCsvBytes = std::size_t{4} << 30;  // supersteps.csv

}  // namespace ipusim
