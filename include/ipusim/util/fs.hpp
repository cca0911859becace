// SPDX-License-Identifier: Apache-2.0
// Output files are written whole or not at all: content goes to "<path>.tmp.<pid>" and is
// renamed into place only after a successful flush. Temporaries are registered so that a
// signal handler can remove them (see remove_pending_temporaries()).
#pragma once

#include <functional>
#include <iosfwd>
#include <string>

namespace ipusim {

// Calls `write` with a stream on a temporary file beside `path`, then renames it over `path`.
// On any exception the temporary is removed and the exception propagates; `path` is untouched.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write,
                           bool binary = false);

// Removes every temporary currently being written. Async-signal-safe enough for our handler:
// it only calls unlink() on pre-built C strings.
void remove_pending_temporaries() noexcept;

// Reads a whole file; throws Error naming the path if it cannot be opened.
std::string read_file_text(const std::string& path);

}  // namespace ipusim
