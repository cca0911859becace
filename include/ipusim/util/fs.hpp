// SPDX-License-Identifier: Apache-2.0
// Output files are written whole or not at all: content goes to "<path>.tmp.<pid>" and is
// renamed into place only after a successful flush. Temporaries are registered so that a
// signal handler can remove them (see remove_pending_temporaries()).
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
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
// different run. On any exception every temporary is removed and no path is touched.
void write_files_atomically(const std::vector<FileWriter>& files);

// Removes every temporary currently being written. Async-signal-safe enough for our handler:
// it only calls unlink() on pre-built C strings.
void remove_pending_temporaries() noexcept;

// Reads a whole file; throws Error naming the path if it cannot be opened.
std::string read_file_text(const std::string& path);

}  // namespace ipusim
