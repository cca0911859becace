// SPDX-License-Identifier: Apache-2.0
// Reading and writing traces. The text form (".trace") is for people and hand-written kernels;
// the binary form (".itb") is compact for large compiled programs. Both serialise the same
// Trace exactly: read(write(t)) == t in either form. See docs/trace-format.md.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "ipusim/trace/program.hpp"

namespace ipusim::trace {

enum class Format { kText, kBinary };

// Whether a trace handed to a writer has already passed check_structure (the compiler's and
// the kernel generators' results, a trace just read): kYes skips the writer's own check.
enum class Checked { kNo, kYes };

// Reads text from a stream line by line. Errors throw TraceError "<origin>:<line>: ...".
// The result has passed check_structure. With `identity`, also stores the trace's identity()
// (computed once from the trace just read, without checking it again).
Trace read_text(std::istream& in, const std::string& origin, std::string* identity = nullptr);
// Reads binary from a stream record by record. Errors throw TraceError
// "<origin>@<byte offset>: ...". `size_hint` (total bytes, or 0 if unknown) lets the reader
// reject declared counts that cannot fit in the remaining bytes before allocating. The trace
// must extend to the end of the stream (trailing bytes are an error); the reader reads ahead in
// blocks. The result has passed check_structure. With `identity`, also stores the trace's
// identity(): for a file of the current version, the hash of the bytes as they are read (the
// binary form is canonical, so they are the bytes write_binary would produce); for an older
// version, the hash of the trace's serialisation in the current version.
Trace read_binary(std::istream& in, const std::string& origin, std::uint64_t size_hint = 0,
                  std::string* identity = nullptr);

// Unless `checked` is kYes, writers first run check_structure (throwing TraceError "trace
// '<name>': ..."), so that every file written can be read back. The text writer emits the
// canonical form (every parameter, fixed key order), so write_text(read_text(write_text(t)))
// is byte-identical.
void write_text(const Trace& trace, std::ostream& out, Checked checked = Checked::kNo);
void write_binary(const Trace& trace, std::ostream& out, Checked checked = Checked::kNo);

// Detects the format from the first bytes (binary magic "IPUTRACE") and reads the file.
// `identity` as for read_text and read_binary.
Trace read_file(const std::string& path, std::string* identity = nullptr);
// Writes atomically (temporary file, then rename). Format from `format`. With `identity`,
// also stores the trace's identity() (for the binary form, the hash of the bytes written).
void write_file(const Trace& trace, const std::string& path, Format format,
                Checked checked = Checked::kNo, std::string* identity = nullptr);
// Text for paths ending in ".trace" or ".txt", binary otherwise (".itb").
Format format_for_path(const std::string& path);

// A stable identity of the trace content: FNV-1a 64 over its binary serialisation in the
// current format version, as 16 hex digits. Text and binary files of the same trace have the
// same identity. Does not check the trace: call it on one that passed check_structure (every
// reader's and the compiler's result has). Readers and write_file can give it without a
// second serialisation (their `identity` argument).
std::string identity(const Trace& trace);

}  // namespace ipusim::trace
