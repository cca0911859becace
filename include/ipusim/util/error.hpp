// SPDX-License-Identifier: Apache-2.0
// Typed exceptions. Libraries throw; only the CLI's main catches, prints and picks the exit code.
#pragma once

#include <stdexcept>
#include <string>

#include "ipusim/util/strings.hpp"

namespace ipusim {

// Process exit codes used by the CLI (documented in docs/errors.md).
enum class ExitCode : int {
  kOk = 0,
  kInternal = 1,      // a bug: an unexpected exception
  kUsage = 2,         // bad command line
  kBadInput = 3,      // a config or trace file is malformed or out of range
  kModelError = 4,    // the input is well-formed but cannot run (e.g. a tile is out of memory)
  kResource = 6,      // the simulator itself would exceed a resource (host memory, a size cap)
  kIo = 7,            // an output could not be written (disk full, no permission, no reader)
  kInterrupted = 130  // SIGINT / SIGTERM
};

// Base of every user-facing error: what() is the complete one-line message. Control
// characters in it (a user's value quoted in a message: an ESC, a newline, a NUL from a binary
// file) are escaped here, once for every message, so that none reaches a terminal raw and
// none cuts what() short.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(printable(message)) {}
  virtual ExitCode exit_code() const { return ExitCode::kBadInput; }
};

// A value could not be parsed (no location yet; callers add file/line/key).
class ParseError : public Error {
 public:
  using Error::Error;
};

// A config file or --set override is invalid. Message names file:line and key path.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A trace file is invalid. Message names file:line (text) or file@offset (binary).
class TraceError : public Error {
 public:
  using Error::Error;
};

// A well-formed program that the modelled hardware cannot run (e.g. out of tile memory).
class ModelError : public Error {
 public:
  using Error::Error;
  ExitCode exit_code() const override { return ExitCode::kModelError; }
};

// Running the input would exhaust the host (memory), or a limit guarding against that was hit.
class ResourceError : public Error {
 public:
  using Error::Error;
  ExitCode exit_code() const override { return ExitCode::kResource; }
};

// An output could not be written: the file system refused it (disk full, read-only, no
// permission) or the target cannot take it (a FIFO with no reader). Not the input's fault.
class IoError : public Error {
 public:
  using Error::Error;
  ExitCode exit_code() const override { return ExitCode::kIo; }
};

// Bad command-line usage.
class UsageError : public Error {
 public:
  using Error::Error;
  ExitCode exit_code() const override { return ExitCode::kUsage; }
};

}  // namespace ipusim
