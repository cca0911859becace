// SPDX-License-Identifier: Apache-2.0
#include "ipusim/trace/trace_io.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <streambuf>

#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/hash.hpp"

namespace ipusim::trace {
namespace {

// A stream buffer that hashes what is written instead of storing it.
class HashingBuffer : public std::streambuf {
 public:
  const Fnv1a64& hash() const { return hash_; }

 protected:
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      const char ch = traits_type::to_char_type(c);
      hash_.update(&ch, 1);
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    hash_.update(s, static_cast<std::size_t>(n));
    return n;
  }

 private:
  Fnv1a64 hash_;
};

// A stream buffer that hashes what is written and passes it on to another buffer.
class TeeHashingBuffer : public std::streambuf {
 public:
  explicit TeeHashingBuffer(std::streambuf* next) : next_(next) {}
  const Fnv1a64& hash() const { return hash_; }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    hash_.update(&ch, 1);
    return next_->sputc(ch);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    hash_.update(s, static_cast<std::size_t>(n));
    return next_->sputn(s, n);
  }
  int sync() override { return next_->pubsync(); }

 private:
  std::streambuf* next_;
  Fnv1a64 hash_;
};

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Trace read_file(const std::string& path, std::string* identity) {
  std::error_code ec;
  // A regular file (streamed) or a FIFO; a directory or a device (/dev/zero) is refused by name.
  try {
    check_input_file(path, "trace");
  } catch (const Error& e) {
    throw TraceError(e.what());
  }
  // A FIFO (or a shell's <(...)) is read whole first: it cannot be rewound, and without a
  // writer opening it would block forever (read_if_fifo waits a bounded time).
  if (auto text = read_if_fifo(path, std::size_t{1} << 32, "trace")) {
    const bool bin = text->size() >= 8 && std::memcmp(text->data(), "IPUTRACE", 8) == 0;
    const std::uint64_t bytes = text->size();
    std::istringstream fin(std::move(*text));
    return bin ? read_binary(fin, path, bytes, identity) : read_text(fin, path, identity);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TraceError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  const auto size = std::filesystem::file_size(path, ec);
  const std::uint64_t size_hint = ec ? 0 : static_cast<std::uint64_t>(size);

  char magic[8] = {};
  in.read(magic, sizeof magic);
  const bool binary = in.gcount() == sizeof magic && std::memcmp(magic, "IPUTRACE", 8) == 0;
  in.clear();
  in.seekg(0);
  if (!in) throw TraceError(fmt::format("{}: cannot rewind after reading the first bytes", path));
  return binary ? read_binary(in, path, size_hint, identity) : read_text(in, path, identity);
}

void write_file(const Trace& trace, const std::string& path, Format format, Checked checked,
                std::string* identity) {
  const bool binary = format == Format::kBinary;
  write_file_atomically(
      path,
      [&](std::ostream& out) {
        if (binary && identity) {
          // Hash the bytes on their way to the file: they are the identity's serialisation.
          TeeHashingBuffer tee(out.rdbuf());
          std::ostream both(&tee);
          write_binary(trace, both, checked);
          both.flush();
          if (!both) throw Error(fmt::format("{}: write failed", path));
          *identity = tee.hash().hex();
        } else if (binary) {
          write_binary(trace, out, checked);
        } else {
          write_text(trace, out, checked);
        }
      },
      binary);
  if (identity && !binary) *identity = trace::identity(trace);
}

Format format_for_path(const std::string& path) {
  return ends_with(path, ".trace") || ends_with(path, ".txt") ? Format::kText : Format::kBinary;
}

std::string identity(const Trace& trace) {
  HashingBuffer buffer;
  std::ostream out(&buffer);
  write_binary(trace, out, Checked::kYes);
  return buffer.hash().hex();
}

}  // namespace ipusim::trace
