// SPDX-License-Identifier: Apache-2.0
// The binary form of a trace (docs/trace-format.md §6): magic, version, then little-endian
// records in the order of the text form. The reader consumes the stream field by field, keeps
// the byte offset for messages, and never allocates from a declared count before the data
// behind it has been read (or, given a size hint, before checking that it can fit).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <istream>
#include <limits>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/hash.hpp"

namespace ipusim::trace {
namespace {

constexpr std::array<char, 8> kMagic{'I', 'P', 'U', 'T', 'R', 'A', 'C', 'E'};

// Smallest encoded size of each record, for rejecting impossible counts early.
constexpr std::uint64_t kMinIpuBytes = 4 + 4 + 4 + 4 + 4;
constexpr std::uint64_t kMinNameBytes = 4 + 1;
constexpr std::uint64_t kMinTensorBytes = kMinNameBytes + 1 + 1 + 8 + 8;
// Set in a tensor's kind byte when its lifetime (u64 first, u64 last) follows (v3).
constexpr std::uint8_t kTensorHasLifetime = 0x80;
constexpr std::uint64_t kMinComputeSetBytes = kMinNameBytes + 4;
constexpr std::uint64_t kMinVertexBytes = 1 + 8 + 1 + 8;  // every codelet has >= 1 parameter
constexpr std::uint64_t kMinExchangeBytes = kMinNameBytes + 4;
constexpr std::uint64_t kMinTransferBytes = 8 + 8 + 1 + 4 + 8;  // at least one destination
constexpr std::uint64_t kRangeBytes = 8;
// Version 3 (varint records): flags, source delta, one destination range of two varints.
constexpr std::uint64_t kMinTransferBytesV3 = 1 + 1 + 2;
constexpr std::uint64_t kMinVertexBytesV3 = 1 + 1 + 1 + 1 + 1;
// Version 5: a move's sizes, element bytes and two grids of four varints and an order byte.
constexpr std::uint64_t kMinMoveBytes = 1 + 1 + 1 + 2 * (4 + 1);
// Version 6: a reduce-scatter's four sizes, element bytes and group-run count; a run's four.
constexpr std::uint64_t kMinReduceScatterBytes = 4 + 1 + 4;
constexpr std::uint64_t kMinGroupsBytes = 4;
constexpr std::uint64_t kRangeBytesV3 = 2;

// Transfer record flags (v3, docs/trace-format.md §6).
enum TransferFlag : std::uint8_t {
  kPersonalised = 1 << 0,
  kRun = 1 << 1,
  kSrcRange = 1 << 2,
  kDstRanges = 1 << 3,
  kNewBytes = 1 << 4,
  kSrcStep = 1 << 5,
  kDstStep = 1 << 6,
  kBytesStep = 1 << 7,
};
// Vertex record flags (v3).
enum VertexFlag : std::uint8_t { kVertexRange = 1 << 0, kVertexRun = 1 << 1 };
constexpr std::uint8_t kVertexFlags = kVertexRange | kVertexRun;

std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
std::int64_t unzigzag(std::uint64_t v) {
  return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}
constexpr std::uint64_t kMinStepBytes = 1;

// "a compute set name", "an exchange name".
std::string with_article(std::string_view noun) {
  const bool vowel = !noun.empty() && std::string_view("aeiou").find(noun[0]) != noun.npos;
  return fmt::format("{} {}", vowel ? "an" : "a", noun);
}

// Shows bytes of a malformed name or magic safely (escaped, at most 64 of them).
std::string printable(std::string_view s) {
  constexpr std::size_t kShown = 64;
  std::string out;
  for (unsigned char c : s.substr(0, kShown)) {
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (s.size() > kShown) out += "...";
  return out;
}

// --- writer ----------------------------------------------------------------------------------

// Writes fields at a pointer into room made for them first (BinaryWriter::open): the pointer
// stays in a register through a whole record. The trace identity serialises whole compiled
// traces, millions of records, so a field costs a few instructions.
struct Cursor {
  char* at;
  void u8(std::uint8_t v) { *at++ = static_cast<char>(v); }
  // LEB128, shortest form: at most 10 bytes.
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      *at++ = static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    *at++ = static_cast<char>(v);
  }
  void svarint(std::int64_t v) { varint(zigzag(v)); }
};

// Encodes into a local buffer and hands it to the stream in large blocks.
class BinaryWriter {
 public:
  explicit BinaryWriter(std::ostream& out) : out_(out), buf_(kBlock), at_(buf_.data()) {}

  void u8(std::uint8_t v) {
    Cursor c = open(1);
    c.u8(v);
    close(c);
  }
  void u32(std::uint32_t v) { le(v, 4); }
  void u64(std::uint64_t v) { le(v, 8); }
  void i64(std::int64_t v) { le(static_cast<std::uint64_t>(v), 8); }
  void varint(std::uint64_t v) {
    Cursor c = open(10);
    c.varint(v);
    close(c);
  }
  static std::int64_t delta(std::uint32_t to, std::uint32_t from) {
    return static_cast<std::int64_t>(to) - static_cast<std::int64_t>(from);
  }

  // v3 records: each field relative to the record before it in the same list.
  void vertices(const std::vector<Vertex>& vs) {
    count(vs.size());
    std::uint32_t prev_first = 0;
    for (const Vertex& v : vs) {
      const CodeletSpec& spec = codelet_spec(v.codelet);
      // Codelet, flags and parameter count; tiles, run count and step; the parameters.
      Cursor c = open(3 + 3 * 10 + kMaxVertexParams * 10);
      c.u8(static_cast<std::uint8_t>(v.codelet));
      c.u8((v.tiles.last != v.tiles.first ? kVertexRange : 0) | (v.count > 1 ? kVertexRun : 0));
      c.svarint(delta(v.tiles.first, prev_first));
      prev_first = v.tiles.first;
      if (v.tiles.last != v.tiles.first) c.varint(v.tiles.last - v.tiles.first - 1);
      if (v.count > 1) {
        c.varint(v.count - 2);
        c.svarint(v.step);
      }
      c.u8(static_cast<std::uint8_t>(spec.params.size()));
      for (std::size_t p = 0; p < spec.params.size(); ++p) c.svarint(v.params[p]);
      close(c);
    }
  }

  void transfers(const Exchange& ex) {
    count(ex.transfers.size());
    std::uint32_t prev_src = 0, prev_dst = 0;
    std::uint64_t prev_bytes = 0;
    for (const Transfer& t : ex.transfers) {
      std::uint8_t flags = 0;
      if (t.mode == TransferMode::kPersonalised) flags |= kPersonalised;
      if (t.count > 1) flags |= kRun;
      if (t.src.last != t.src.first) flags |= kSrcRange;
      if (t.dst_count != 1) flags |= kDstRanges;
      if (t.bytes != prev_bytes) flags |= kNewBytes;
      if (t.src_step != 0) flags |= kSrcStep;
      if (t.dst_step != 0) flags |= kDstStep;
      if (t.bytes_step != 0) flags |= kBytesStep;
      // Flags and four varints, then two per destination range, then four.
      Cursor c = open(1 + 4 * 10);
      c.u8(flags);
      c.svarint(delta(t.src.first, prev_src));
      prev_src = t.src.first;
      if (flags & kSrcRange) c.varint(t.src.last - t.src.first - 1);
      if (flags & kNewBytes) c.varint(t.bytes);
      prev_bytes = t.bytes;
      if (flags & kDstRanges) c.varint(t.dst_count - 2);
      close(c);
      for (const TileRange& r : ex.destinations(t)) {
        c = open(2 * 10);
        c.svarint(delta(r.first, prev_dst));
        prev_dst = r.first;
        c.varint(r.last - r.first);
        close(c);
      }
      c = open(4 * 10);
      if (flags & kRun) c.varint(t.count - 2);
      if (flags & kSrcStep) c.svarint(t.src_step);
      if (flags & kDstStep) c.svarint(t.dst_step);
      if (flags & kBytesStep) c.svarint(t.bytes_step);
      close(c);
    }
  }
  // v5: an exchange's moves.
  void moves(const Exchange& ex) {
    count(ex.moves.size());
    for (const Move& m : ex.moves) {
      Cursor c = open(2 * 10 + 1 + 2 * (4 * 10 + 1));
      c.varint(m.positions);
      c.varint(m.channels);
      c.u8(static_cast<std::uint8_t>(m.element_bytes));
      for (const BlockGrid* g : {&m.from, &m.to}) {
        c.varint(g->first_tile);
        c.varint(g->tile_stride);
        c.varint(g->positions_per_tile);
        c.varint(g->chans_per_tile);
        c.u8(g->channels_outer ? 1 : 0);
      }
      close(c);
    }
  }
  // v6: an exchange's reduce-scatters.
  void reduce_scatters(const Exchange& ex) {
    count(ex.reduce_scatters.size());
    for (const ReduceScatter& r : ex.reduce_scatters) {
      Cursor c = open(4 * 10 + 1);
      c.varint(r.members);
      c.varint(r.member_step);
      c.varint(r.fan_in);
      c.varint(r.stride);
      c.u8(static_cast<std::uint8_t>(r.element_bytes));
      close(c);
      count(r.groups.size());
      for (const ReduceScatter::Groups& g : r.groups) {
        c = open(4 * 10);
        c.varint(g.first);
        c.varint(g.step);
        c.varint(g.count);
        c.varint(g.elements);
        close(c);
      }
    }
  }
  void range(TileRange r) {
    u32(r.first);
    u32(r.last);
  }
  void str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void count(std::size_t n) {
    if (n > std::numeric_limits<std::uint32_t>::max())
      throw TraceError(
          fmt::format("cannot write a count of {} (the binary form allows at most "
                      "2^32-1 records per list)",
                      n));
    u32(static_cast<std::uint32_t>(n));
  }
  void group(Group g) {
    u8(static_cast<std::uint8_t>(g.kind));
    u32(g.size);
    if (g.kind == GroupKind::kReplica && g.size != 0) u32(g.stride);  // IPUs of a replica
  }
  void provenance(const Provenance& p) {  // v3
    u8(static_cast<std::uint8_t>(p.pass));
    u8(static_cast<std::uint8_t>(p.op));
    count(p.layers.size());
    for (const std::string& layer : p.layers) str(layer);
  }
  void raw(const char* p, std::size_t n) {
    if (n > kBlock / 2) {  // a long string: straight to the stream, after what is buffered
      flush();
      out_.write(p, static_cast<std::streamsize>(n));
      return;
    }
    Cursor c = open(n);
    std::memcpy(c.at, p, n);
    close({c.at + n});
  }
  // Call once at the end; also called whenever the buffer fills.
  void flush() {
    out_.write(buf_.data(), at_ - buf_.data());
    at_ = buf_.data();
  }

  void steps(const std::vector<Step>& steps) {
    count(steps.size());
    for (const Step& s : steps) {
      u8(static_cast<std::uint8_t>(s.kind));
      switch (s.kind) {
        case StepKind::kCompute:
        case StepKind::kExchange:
          u32(s.index);
          u8(static_cast<std::uint8_t>(s.provenance.pass));  // v4
          break;
        case StepKind::kSync:
          group(s.group);
          break;
        case StepKind::kHost:
          u8(static_cast<std::uint8_t>(s.direction));
          range(s.tiles);
          u64(s.bytes);
          u8(static_cast<std::uint8_t>(s.memory));
          u8(s.overlap ? 1 : 0);
          provenance(s.provenance);
          break;
        case StepKind::kRepeat:
          u64(s.count);
          this->steps(s.body);
          break;
        case StepKind::kGlobalExchange:
          u32(s.index);
          break;
        case StepKind::kCollective:
          u8(static_cast<std::uint8_t>(s.collective));
          u8(static_cast<std::uint8_t>(s.method));
          u8(static_cast<std::uint8_t>(s.dtype));
          group(s.group);
          u64(s.bytes);
          provenance(s.provenance);
          break;
      }
    }
  }

 private:
  static constexpr std::size_t kBlock = 64 * 1024;

  // Room for `n` more bytes (at most kBlock), after writing out the buffer if it lacks it; the
  // cursor's writes are kept by close().
  Cursor open(std::size_t n) {
    if (static_cast<std::size_t>(buf_.data() + buf_.size() - at_) < n) flush();
    return {at_};
  }
  void close(Cursor c) { at_ = c.at; }
  void le(std::uint64_t v, int n) {
    Cursor c = open(8);
    for (int i = 0; i < n; ++i) c.u8(static_cast<std::uint8_t>((v >> (8 * i)) & 0xff));
    close(c);
  }

  std::ostream& out_;
  std::vector<char> buf_;  // kBlock bytes, written up to at_
  char* at_;
};

// --- reader ----------------------------------------------------------------------------------

// Hashes the blocks the reader has consumed on a second thread, in order, while the reader
// parses the next ones (FNV-1a is serial: about a quarter of the reading time of a large
// trace if done inline).
class BackgroundHasher {
 public:
  BackgroundHasher() : thread_([this] { loop(); }) {}
  BackgroundHasher(const BackgroundHasher&) = delete;
  BackgroundHasher& operator=(const BackgroundHasher&) = delete;
  ~BackgroundHasher() { finish(); }

  // Queues a consumed block (waiting while kDepth blocks are queued) and returns a spare
  // buffer for the next one.
  std::vector<char> submit(std::vector<char> block) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return queue_.size() < kDepth; });
    const bool was_empty = queue_.empty();
    queue_.push_back(std::move(block));
    std::vector<char> spare;
    if (!spares_.empty()) {
      spare = std::move(spares_.back());
      spares_.pop_back();
    }
    lock.unlock();
    if (was_empty) changed_.notify_all();  // only an empty queue can have the hasher waiting
    return spare;
  }

  // Waits until every queued block is hashed; returns the hash.
  const Fnv1a64& finish() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
    return hash_;
  }

 private:
  static constexpr std::size_t kDepth = 32;  // blocks of 64 KiB

  void loop() {
    for (;;) {
      std::vector<char> block;
      bool full = false;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return !queue_.empty() || done_; });
        if (queue_.empty()) return;
        full = queue_.size() == kDepth;
        block = std::move(queue_.front());
        queue_.pop_front();
      }
      if (full) changed_.notify_all();  // only a full queue can have the reader waiting
      hash_.update(block.data(), block.size());
      std::lock_guard lock(mutex_);
      spares_.push_back(std::move(block));
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::vector<char>> queue_;
  std::vector<std::vector<char>> spares_;
  bool done_ = false;
  Fnv1a64 hash_;
  std::thread thread_;  // last: starts once the members above exist
};

class BinaryReader {
 public:
  BinaryReader(std::istream& in, const std::string& origin, std::uint64_t size_hint,
               bool hash_bytes)
      : in_(in), origin_(origin), size_hint_(size_hint) {
    if (hash_bytes) hasher_ = std::make_unique<BackgroundHasher>();
  }

  // The hash of every byte read (the whole stream once read() has returned), when asked for.
  const Fnv1a64& hash() { return hasher_->finish(); }
  // The format version of the stream read.
  std::uint32_t version() const { return version_; }
  // False when a vertex lacked late parameters: the bytes are not what write_binary writes.
  bool canonical() const { return canonical_; }

  Trace read() {
    char magic[8];
    const std::size_t got = read_some(magic, sizeof magic);
    if (got < sizeof magic || std::memcmp(magic, kMagic.data(), sizeof magic) != 0)
      fail_at(0, fmt::format("expected the magic 'IPUTRACE' of a binary trace, found '{}'",
                             printable(std::string_view(magic, got))));
    const std::uint64_t version_at = offset_;
    const std::uint32_t version = u32("format version");
    if (version < kOldestFormatVersion || version > kFormatVersion)
      fail_at(version_at, fmt::format("expected trace format version {} to {}, found version {}",
                                      kOldestFormatVersion, kFormatVersion, version));
    version_ = version;
    Trace trace;
    trace.version = kFormatVersion;  // an older file reads as the same program in the current form
    trace.name = name("trace name", /*allow_empty=*/true);
    if (version_ >= 2) read_v2_header(trace);
    const std::uint64_t count_at = offset_;
    const std::uint32_t ipus = count("IPU programs", kMinIpuBytes);
    if (ipus == 0) fail_at(count_at, "expected at least one IPU program, found 0");
    std::set<std::uint32_t> seen;
    for (std::uint32_t i = 0; i < ipus; ++i) {
      const std::uint64_t at = offset_;
      IpuProgram& ipu = trace.ipus.emplace_back();
      ipu.ipu = u32("IPU index");
      if (ipu.ipu >= kMaxIpus)
        fail_at(at, fmt::format("expected an IPU index 0..{}, found {}", kMaxIpus - 1, ipu.ipu));
      if (!seen.insert(ipu.ipu).second)
        fail_at(at, fmt::format("expected each IPU once, found ipu {} a second time", ipu.ipu));
      read_ipu(ipu);
    }
    if (!at_end())
      fail_at(offset_,
              "expected the end of the file after the last IPU program, found more "
              "bytes");
    // The destination-overlap test ran in read_transfer, once per transfer.
    check_structure_after_read(trace, origin_);
    return trace;
  }

 private:
  [[noreturn]] void fail_at(std::uint64_t at, const std::string& what) const {
    throw TraceError(fmt::format("{}@{}: {}", origin_, at, what));
  }

  // Copies up to `n` bytes from the read-ahead block (refilled from the stream in blocks of
  // kBlock bytes); returns how many were available before the end of the stream.
  std::size_t read_some(char* p, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      if (pos_ == block_.size() && !refill()) break;
      const std::size_t take = std::min(n - got, block_.size() - pos_);
      std::memcpy(p + got, block_.data() + pos_, take);
      pos_ += take;
      got += take;
    }
    offset_ += got;
    return got;
  }

  // Called once the block is consumed (pos_ == block_.size()).
  bool refill() {
    if (hasher_ && !block_.empty()) block_ = hasher_->submit(std::move(block_));
    block_.resize(kBlock);
    in_.read(block_.data(), static_cast<std::streamsize>(kBlock));
    block_.resize(static_cast<std::size_t>(in_.gcount()));
    pos_ = 0;
    if (in_.bad()) fail_at(offset_, "expected more bytes, found a read error");
    return !block_.empty();
  }

  bool at_end() { return pos_ == block_.size() && !refill(); }

  // `what` names the item in an error as "<prefix><what>" (formatted only on failure: this
  // runs for every field of multi-million-item traces).
  void read_exact(char* p, std::size_t n, std::string_view what, std::string_view prefix = {}) {
    if (pos_ + n <= block_.size()) {  // the common case: the bytes are in the block
      std::memcpy(p, block_.data() + pos_, n);
      pos_ += n;
      offset_ += n;
      return;
    }
    const std::uint64_t at = offset_;
    const std::size_t got = read_some(p, n);
    if (got < n)
      fail_at(at + got, fmt::format("truncated {}{}: expected {} more bytes, file ends", prefix,
                                    what, n - got));
  }

  std::uint64_t le(int n, std::string_view what, std::string_view prefix = {}) {
    unsigned char buf[8];
    read_exact(reinterpret_cast<char*>(buf), static_cast<std::size_t>(n), what, prefix);
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | buf[i];
    return v;
  }
  std::uint8_t u8(std::string_view what) { return static_cast<std::uint8_t>(le(1, what)); }
  std::uint32_t u32(std::string_view what, std::string_view prefix = {}) {
    return static_cast<std::uint32_t>(le(4, what, prefix));
  }
  std::uint64_t u64(std::string_view what) { return le(8, what); }

  // An enum byte, checked against its number of values.
  template <typename E>
  E enumeration(std::string_view what, std::size_t values) {
    const std::uint64_t at = offset_;
    const std::uint8_t v = u8(what);
    if (v >= values)
      fail_at(at, fmt::format("expected {} 0..{}, found {}", with_article(what), values - 1, v));
    return static_cast<E>(v);
  }

  // A u32 count of records of at least `min_bytes` each; with a size hint, rejects counts that
  // cannot fit in the rest of the file before anything is allocated for them.
  std::uint32_t count(std::string_view what, std::uint64_t min_bytes) {
    const std::uint64_t at = offset_;
    const std::uint32_t n = u32(what, "count of ");
    if (size_hint_ != 0) {
      const std::uint64_t remaining = size_hint_ > offset_ ? size_hint_ - offset_ : 0;
      if (n > remaining / min_bytes)
        fail_at(at, fmt::format("expected a count of {} that fits in the remaining {} bytes, "
                                "found {} (at least {} byte{} each)",
                                what, remaining, n, min_bytes, min_bytes == 1 ? "" : "s"));
    }
    return n;
  }

  // Reserves room for `n` items read by count(): all of them when count() checked n against
  // the file size, else a bounded number (a stream's counts are not checked before reading).
  template <typename T>
  void reserve(std::vector<T>& v, std::uint32_t n) const {
    v.reserve(size_hint_ != 0 ? n : std::min<std::uint32_t>(n, 4096));
  }

  std::uint64_t size(std::string_view what, std::uint64_t min = 0) {
    const std::uint64_t at = offset_;
    const std::uint64_t v = u64(what);
    if (v < min || v > static_cast<std::uint64_t>(kMaxCount))
      fail_at(at, fmt::format("expected {} in {}..{}, found {}", what, min, kMaxCount, v));
    return v;
  }

  TileRange range(std::string_view what) {
    const std::uint64_t at = offset_;
    TileRange r;
    r.first = u32(what);
    r.last = u32(what);
    if (r.first > r.last)
      fail_at(at,
              fmt::format("expected {} with first <= last, found {}..{}", what, r.first, r.last));
    return r;
  }

  std::string name(std::string_view what, bool allow_empty = false) {
    const std::uint64_t at = offset_;
    const std::uint32_t n = u32(what, "length of ");
    if (n > kMaxNameLength)
      fail_at(at, fmt::format("expected {} of at most {} bytes, found length {}",
                              with_article(what), kMaxNameLength, n));
    std::string s(n, '\0');
    read_exact(s.data(), n, what);
    if (!(allow_empty && s.empty()) && !is_valid_name(s))
      fail_at(at, fmt::format("expected {} of characters [A-Za-z0-9_.:/-], found '{}'",
                              with_article(what), printable(s)));
    return s;
  }

  void unique(std::set<std::string>& names, const std::string& name, std::uint64_t at,
              std::string_view what) const {
    if (!names.insert(name).second)
      fail_at(at, fmt::format("expected a new {} name, found '{}' a second time", what, name));
  }

  void read_ipu(IpuProgram& ipu) {
    std::set<std::string> names;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> lifetimes;  // (offset, last position)
    const std::uint32_t tensors = count("tensors", kMinTensorBytes);
    for (std::uint32_t i = 0; i < tensors; ++i) {
      Tensor& t = ipu.tensors.emplace_back();
      const std::uint64_t at = offset_;
      t.name = name("tensor name");
      unique(names, t.name, at, "tensor");
      // The kind byte's top bit (v3) says a lifetime follows the tensor's bytes.
      const std::uint64_t kind_at = offset_;
      std::uint8_t kind = u8("tensor kind");
      const bool has_lifetime = (kind & kTensorHasLifetime) != 0 && version_ >= 3;
      if (has_lifetime) kind &= ~kTensorHasLifetime;
      if (kind >= kTensorKindNames.size())
        fail_at(kind_at,
                fmt::format("expected a tensor kind 0..{}{}, found {}", kTensorKindNames.size() - 1,
                            version_ >= 3 ? ", or 128 more with a lifetime" : "",
                            kind | (has_lifetime ? kTensorHasLifetime : 0)));
      t.kind = static_cast<TensorKind>(kind);
      t.dtype = enumeration<DType>("dtype", kDTypeNames.size());
      t.tiles = range("tensor tile range");
      t.bytes_per_tile = size("tensor bytes per tile");
      if (has_lifetime) {
        Lifetime& l = t.live.emplace();
        l.first = size("first live position");
        const std::uint64_t last_at = offset_;
        l.last = size("last live position");
        if (l.last < l.first)
          fail_at(last_at, fmt::format("expected a last live position >= the first ({}), found {}",
                                       l.first, l.last));
        lifetimes.emplace_back(last_at, l.last);
      }
    }
    names.clear();
    const std::uint32_t sets = count("compute sets", kMinComputeSetBytes);
    for (std::uint32_t i = 0; i < sets; ++i) {
      ComputeSet& cs = ipu.compute_sets.emplace_back();
      const std::uint64_t at = offset_;
      cs.name = name("compute set name");
      unique(names, cs.name, at, "compute set");
      if (version_ >= 3) cs.provenance = provenance();
      const std::uint32_t vertices =
          count("vertices", version_ >= 3 ? kMinVertexBytesV3 : kMinVertexBytes);
      reserve(cs.vertices, vertices);
      prev_first_ = 0;
      for (std::uint32_t v = 0; v < vertices; ++v) {
        if (version_ >= 3)
          read_vertex_v3(cs.vertices.emplace_back());
        else
          read_vertex(cs.vertices.emplace_back());
      }
    }
    names.clear();
    const std::uint32_t exchanges = count("exchanges", kMinExchangeBytes);
    for (std::uint32_t i = 0; i < exchanges; ++i) {
      Exchange& ex = ipu.exchanges.emplace_back();
      const std::uint64_t at = offset_;
      ex.name = name("exchange name");
      unique(names, ex.name, at, "exchange");
      if (version_ >= 3) ex.provenance = provenance();
      const std::uint32_t transfers =
          count("transfers", version_ >= 3 ? kMinTransferBytesV3 : kMinTransferBytes);
      reserve(ex.transfers, transfers);
      reserve(ex.dst_pool, transfers);  // at least one destination range each
      prev_src_ = prev_dst_ = 0;
      prev_bytes_ = 0;
      for (std::uint32_t t = 0; t < transfers; ++t) {
        if (version_ >= 3)
          read_transfer_v3(ex);
        else
          read_transfer(ex);
      }
      if (version_ >= 5) {
        const std::uint32_t moves = count("moves", kMinMoveBytes);
        reserve(ex.moves, moves);
        for (std::uint32_t m = 0; m < moves; ++m) read_move(ex.moves.emplace_back());
      }
      if (version_ >= 6) {
        const std::uint32_t scatters = count("reduce-scatters", kMinReduceScatterBytes);
        reserve(ex.reduce_scatters, scatters);
        for (std::uint32_t r = 0; r < scatters; ++r)
          read_reduce_scatter(ex.reduce_scatters.emplace_back());
      }
    }
    ipu.steps = read_steps(ipu, 0);
    if (lifetimes.empty()) return;
    const std::uint64_t positions = program_positions(ipu.steps);
    for (const auto& [at, last] : lifetimes)
      if (last >= positions)
        fail_at(at, fmt::format("expected a last live position below the program's {} "
                                "position(s), found {}",
                                positions, last));
  }

  // A vertex holds every parameter of its codelet, or all but trailing late ones (added after
  // traces were written; they take their defaults). `first_missing`: the first parameter the
  // file lacks, once parameters that an older version did not know are accounted for.
  void check_param_count(std::uint64_t at, const CodeletSpec& spec, std::size_t params,
                         std::size_t first_missing) {
    bool ok = params <= spec.params.size();
    for (std::size_t p = first_missing; ok && p < spec.params.size(); ++p) ok = spec.params[p].late;
    if (!ok)
      fail_at(at, fmt::format("expected {} parameters for codelet {}, found {}", spec.params.size(),
                              spec.name, params));
    if (params < spec.params.size()) canonical_ = false;
  }

  void read_vertex(Vertex& v) {
    v.codelet = enumeration<Codelet>("codelet", kCodeletCount);
    const CodeletSpec& spec = codelet_spec(v.codelet);
    v.tiles = range("vertex tile range");
    const std::uint64_t at = offset_;
    const std::uint8_t params = u8("parameter count");
    // amp_convnx1 gained its width late in version 2: v2 files written before hold one
    // parameter fewer, which takes its default (as do the late parameters).
    const bool without_width = v.codelet == Codelet::kAmpConvNx1 && params < spec.params.size() &&
                               spec.params[params].name == "width";
    check_param_count(at, spec, params, without_width ? params + 1 : params);
    for (std::size_t p = params; p < spec.params.size(); ++p)
      v.params[p] = *spec.params[p].default_value;
    for (std::size_t p = 0; p < params; ++p) {
      const std::uint64_t param_at = offset_;
      v.params[p] = static_cast<std::int64_t>(u64("codelet parameter"));
      if (auto problem = param_problem(v.codelet, p, v.params[p])) fail_at(param_at, *problem);
    }
  }

  // --- v3 ---

  Provenance provenance() {
    Provenance p;
    p.pass = enumeration<Pass>("provenance pass", kPassNames.size());
    p.op = enumeration<OpKind>("provenance op", kOpKindNames.size());
    const std::uint64_t at = offset_;
    const std::uint32_t n = count("provenance layers", kMinNameBytes);
    if (n > kMaxProvenanceLayers)
      fail_at(at, fmt::format("expected at most {} provenance layers, found {}",
                              kMaxProvenanceLayers, n));
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint64_t name_at = offset_;
      std::string layer = name("layer name");
      if (std::find(p.layers.begin(), p.layers.end(), layer) != p.layers.end())
        fail_at(name_at,
                fmt::format("expected each provenance layer once, found '{}' twice", layer));
      p.layers.push_back(std::move(layer));
    }
    return p;
  }

  // A varint that must fit 32 bits (a tile, a count of a v5 or v6 record), named at its offset
  // when it does not.
  std::uint32_t varint_u32(std::string_view what) {
    const std::uint64_t at = offset_;
    const std::uint64_t v = varint(what);
    if (v > std::numeric_limits<std::uint32_t>::max())
      fail_at(at, fmt::format("expected a {} in 0..2^32-1, found {}", what, v));
    return static_cast<std::uint32_t>(v);
  }

  std::uint64_t varint(std::string_view what) {
    // The common case, one byte in the block (values below 128).
    if (pos_ < block_.size() && !(block_[pos_] & 0x80)) {
      ++offset_;
      return static_cast<std::uint8_t>(block_[pos_++]);
    }
    const std::uint64_t at = offset_;
    std::uint64_t v = 0;
    for (int i = 0; i < 10; ++i) {
      std::uint8_t b;
      if (pos_ < block_.size()) {
        b = static_cast<std::uint8_t>(block_[pos_++]);
        ++offset_;
      } else {
        b = static_cast<std::uint8_t>(le(1, what));
      }
      if (i == 9 && b > 1)
        fail_at(at, fmt::format("expected {} of at most 64 bits, found a longer varint", what));
      v |= static_cast<std::uint64_t>(b & 0x7f) << (7 * i);
      if (!(b & 0x80)) {
        if (b == 0 && i > 0)
          fail_at(at,
                  fmt::format("expected {} in its shortest varint form, found a padded one", what));
        return v;
      }
    }
    fail_at(at, fmt::format("expected {} of at most 10 varint bytes, found more", what));
  }
  std::int64_t svarint(std::string_view what) { return unzigzag(varint(what)); }

  // A tile index given as a signed delta from `prev`.
  std::uint32_t tile_delta(std::uint32_t prev, std::string_view what) {
    const std::uint64_t at = offset_;
    const std::int64_t d = svarint(what);
    const std::int64_t t = static_cast<std::int64_t>(prev) + d;
    if (d < -static_cast<std::int64_t>(prev) ||
        d > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()) - prev)
      fail_at(at, fmt::format("expected {} giving a tile 0..{}, found {} after tile {}", what,
                              std::numeric_limits<std::uint32_t>::max(), d, prev));
    return static_cast<std::uint32_t>(t);
  }
  std::uint32_t tile_span(std::uint32_t first, std::uint64_t extra, std::string_view what,
                          std::uint64_t at) {
    if (extra > std::numeric_limits<std::uint32_t>::max() - std::uint64_t{first})
      fail_at(at, fmt::format("expected {} ending at a tile 0..{}, found {} tiles after {}", what,
                              std::numeric_limits<std::uint32_t>::max(), extra, first));
    return static_cast<std::uint32_t>(first + extra);
  }
  std::uint32_t run_count(std::string_view what) {
    const std::uint64_t at = offset_;
    const std::uint64_t n = varint(what);
    if (n > std::numeric_limits<std::uint32_t>::max() - 2)
      fail_at(at, fmt::format("expected {} of at most 2^32-1, found {}", what, n + 2));
    return static_cast<std::uint32_t>(n + 2);
  }

  void read_vertex_v3(Vertex& v) {
    v.codelet = enumeration<Codelet>("codelet", kCodeletCount);
    const CodeletSpec& spec = codelet_spec(v.codelet);
    const std::uint64_t flags_at = offset_;
    const std::uint8_t flags = u8("vertex flags");
    if (flags & ~kVertexFlags)
      fail_at(flags_at, fmt::format("expected vertex flags 0..3, found {}", flags));
    v.tiles.first = tile_delta(prev_first_, "vertex tile delta");
    prev_first_ = v.tiles.first;
    v.tiles.last = v.tiles.first;
    if (flags & kVertexRange) {
      const std::uint64_t at = offset_;
      v.tiles.last =
          tile_span(v.tiles.first, varint("vertex tile range") + 1, "vertex tile range", at);
    }
    if (flags & kVertexRun) {
      const std::uint64_t at = offset_;
      v.count = run_count("vertex run count");
      v.step = svarint("vertex run step");
      if (auto problem = run_problem(v))
        fail_at(at,
                fmt::format("expected a vertex run within bounds, found one that {}", *problem));
    }
    const std::uint64_t at = offset_;
    const std::uint8_t params = u8("parameter count");
    check_param_count(at, spec, params, params);
    for (std::size_t p = params; p < spec.params.size(); ++p)
      v.params[p] = *spec.params[p].default_value;
    for (std::size_t p = 0; p < params; ++p) {
      const std::uint64_t param_at = offset_;
      v.params[p] = svarint("codelet parameter");
      if (auto problem = param_problem(v.codelet, p, v.params[p])) fail_at(param_at, *problem);
    }
  }

  // v5: a move, checked whole (move_problem) once read.
  void read_move(Move& m) {
    const std::uint64_t move_at = offset_;
    m.positions = varint("move positions");
    m.channels = varint("move channels");
    const std::uint64_t at = offset_;
    m.element_bytes = u8("move element bytes");
    if (m.element_bytes == 0 || m.element_bytes > kMaxElementBytes)
      fail_at(at, fmt::format("expected move element bytes 1..{}, found {}", kMaxElementBytes,
                              m.element_bytes));
    for (BlockGrid* g : {&m.from, &m.to}) {
      g->first_tile = varint_u32("move first tile");
      g->tile_stride = varint_u32("move tile stride");
      g->positions_per_tile = varint("move positions per tile");
      g->chans_per_tile = varint("move channels per tile");
      const std::uint64_t order_at = offset_;
      const std::uint8_t order = u8("move block order");
      if (order > 1)
        fail_at(order_at, fmt::format("expected a move block order 0 (positions outer) or 1 "
                                      "(channels outer), found {}",
                                      order));
      g->channels_outer = order == 1;
    }
    if (auto problem = move_problem(m))
      fail_at(move_at, fmt::format("expected a valid move, found one that {}", *problem));
  }

  // v6: a reduce-scatter, checked whole (reduce_scatter_problem) once read.
  void read_reduce_scatter(ReduceScatter& r) {
    const std::uint64_t record_at = offset_;
    r.members = varint_u32("reduce-scatter members");
    r.member_step = varint_u32("reduce-scatter member step");
    r.fan_in = varint_u32("reduce-scatter fan-in");
    r.stride = varint_u32("reduce-scatter stride");
    const std::uint64_t at = offset_;
    r.element_bytes = u8("reduce-scatter element bytes");
    if (r.element_bytes == 0 || r.element_bytes > kMaxElementBytes)
      fail_at(at, fmt::format("expected reduce-scatter element bytes 1..{}, found {}",
                              kMaxElementBytes, r.element_bytes));
    const std::uint32_t runs = count("reduce-scatter group runs", kMinGroupsBytes);
    reserve(r.groups, runs);
    for (std::uint32_t i = 0; i < runs; ++i) {
      ReduceScatter::Groups& g = r.groups.emplace_back();
      g.first = varint_u32("reduce-scatter first tile");
      g.step = varint_u32("reduce-scatter group step");
      g.count = varint_u32("reduce-scatter group count");
      g.elements = varint("reduce-scatter group elements");
    }
    if (auto problem = reduce_scatter_problem(r))
      fail_at(record_at,
              fmt::format("expected a valid reduce-scatter, found one that {}", *problem));
  }

  void read_transfer_v3(Exchange& ex) {
    const std::uint8_t flags = u8("transfer flags");
    const std::uint64_t flags_at = offset_ - 1;
    if ((flags & (kSrcStep | kDstStep | kBytesStep)) && !(flags & kRun))
      fail_at(flags_at,
              fmt::format("expected transfer flags with steps only for a run, found {}", flags));
    TileRange src;
    src.first = tile_delta(prev_src_, "transfer source delta");
    prev_src_ = src.first;
    src.last = src.first;
    if (flags & kSrcRange) {
      const std::uint64_t at = offset_;
      src.last =
          tile_span(src.first, varint("transfer source range") + 1, "transfer source range", at);
    }
    std::uint64_t bytes = prev_bytes_;
    if (flags & kNewBytes) {
      const std::uint64_t at = offset_;
      bytes = varint("transfer bytes");
      if (bytes > static_cast<std::uint64_t>(kMaxCount))
        fail_at(at, fmt::format("expected transfer bytes in 0..{}, found {}", kMaxCount, bytes));
      if (bytes == prev_bytes_)
        fail_at(at, fmt::format("expected new transfer bytes (the flag says they differ from the "
                                "previous transfer's), found the same {}",
                                bytes));
    }
    prev_bytes_ = bytes;
    std::uint64_t n = 1;
    const std::uint64_t at = offset_;
    if (flags & kDstRanges) {
      n = varint("count of destination ranges") + 2;
      if (size_hint_ != 0) {
        const std::uint64_t remaining = size_hint_ > offset_ ? size_hint_ - offset_ : 0;
        if (n > remaining / kRangeBytesV3)
          fail_at(at, fmt::format("expected a count of destination ranges that fits in the "
                                  "remaining {} bytes, found {}",
                                  remaining, n));
      }
      if (n > std::numeric_limits<std::uint32_t>::max())
        fail_at(at, fmt::format("expected at most 2^32-1 destination ranges, found {}", n));
    }
    dst_.clear();
    for (std::uint64_t i = 0; i < n; ++i) {
      TileRange r;
      r.first = tile_delta(prev_dst_, "transfer destination delta");
      prev_dst_ = r.first;
      const std::uint64_t span_at = offset_;
      r.last = tile_span(r.first, varint("transfer destination range"),
                         "transfer destination range", span_at);
      dst_.push_back(r);
    }
    if (auto tile = n < 2 ? std::nullopt : first_shared_tile(dst_))  // one range: none
      fail_at(at, fmt::format("expected destination ranges that do not overlap, found tile {} "
                              "twice",
                              *tile));
    std::uint32_t count = 1;
    std::int64_t src_step = 0, dst_step = 0, bytes_step = 0;
    if (flags & kRun) count = run_count("transfer run count");
    const auto step = [&](std::uint8_t flag, std::string_view what) -> std::int64_t {
      if (!(flags & flag)) return 0;
      const std::uint64_t step_at = offset_;
      const std::int64_t v = svarint(what);
      if (v == 0)
        fail_at(step_at,
                fmt::format("expected a non-zero {} (the flag says there is one), found 0", what));
      return v;
    };
    const std::uint64_t run_at = offset_;
    src_step = step(kSrcStep, "source step");
    dst_step = step(kDstStep, "destination step");
    bytes_step = step(kBytesStep, "bytes step");
    if (count > 1) {
      Transfer t;
      t.src = src;
      t.bytes = bytes;
      t.count = count;
      t.src_step = src_step;
      t.dst_step = dst_step;
      t.bytes_step = bytes_step;
      if (auto problem = run_problem(t, dst_))
        fail_at(run_at,
                fmt::format("expected a transfer run within bounds, found one that {}", *problem));
    }
    ex.add_run(src, dst_, bytes,
               (flags & kPersonalised) ? TransferMode::kPersonalised : TransferMode::kMulticast,
               count, src_step, dst_step, bytes_step);
  }

  void read_transfer(Exchange& ex) {
    const TileRange src = range("transfer source range");
    const std::uint64_t bytes = size("transfer bytes");
    const auto mode = enumeration<TransferMode>("transfer mode", kTransferModeNames.size());
    const std::uint64_t at = offset_;
    const std::uint32_t n = count("destination ranges", kRangeBytes);
    if (n == 0) fail_at(at, "expected at least one destination range, found 0");
    dst_.clear();
    for (std::uint32_t i = 0; i < n; ++i) dst_.push_back(range("transfer destination range"));
    if (auto tile = first_shared_tile(dst_))
      fail_at(at, fmt::format("expected destination ranges that do not overlap, found tile {} "
                              "twice",
                              *tile));
    ex.add_run(src, dst_, bytes, mode, 1, 0, 0, 0);  // as written: one record per transfer
  }

  Group group(std::string_view what) {
    Group g;
    g.kind = enumeration<GroupKind>(what, kGroupKindNames.size());
    const std::uint64_t at = offset_;
    g.size = u32("group size");
    if (g.size != 0 && g.kind != GroupKind::kReplicas && g.kind != GroupKind::kReplica)
      fail_at(at, fmt::format("expected group size 0 for a {} group, found {}",
                              kGroupKindNames[static_cast<std::size_t>(g.kind)], g.size));
    if (g.kind == GroupKind::kReplicas && g.size != 0 && replicas_ % g.size != 0)
      fail_at(at, fmt::format("expected a group size dividing the {} replicas, found {}", replicas_,
                              g.size));
    if (g.kind == GroupKind::kReplica && g.size != 0) {  // some IPUs of the replica
      const std::uint64_t stride_at = offset_;
      g.stride = u32("group stride");
      if (g.stride == 0) fail_at(stride_at, "expected a group stride of at least 1, found 0");
    }
    return g;
  }

  void read_v2_header(Trace& trace) {
    const std::uint64_t at = offset_;
    trace.replicas = u32("replica count");
    if (trace.replicas < 1 || trace.replicas > kMaxReplicas)
      fail_at(at, fmt::format("expected 1..{} replicas, found {}", kMaxReplicas, trace.replicas));
    replicas_ = trace.replicas;
    const std::uint32_t metas = count("meta entries", 2 * kMinNameBytes);
    for (std::uint32_t i = 0; i < metas; ++i) {
      const std::uint64_t meta_at = offset_;
      std::string key = name("meta key");
      for (const auto& kv : trace.meta)
        if (kv.first == key)
          fail_at(meta_at, fmt::format("expected each meta key once, found '{}' twice", key));
      trace.meta.emplace_back(std::move(key), name("meta value"));
    }
    const std::uint32_t n = count("global exchanges", kMinNameBytes + 4);
    std::set<std::string> names;
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint64_t name_at = offset_;
      GlobalExchange& g = trace.global_exchanges.emplace_back();
      g.name = name("global exchange name");
      unique(names, g.name, name_at, "global exchange");
      if (version_ >= 3) g.provenance = provenance();
      const std::uint32_t copies = count("copies", 16);
      for (std::uint32_t c = 0; c < copies; ++c) {
        IpuCopy copy;
        const std::uint64_t copy_at = offset_;
        copy.src = u32("copy source IPU");
        copy.dst = u32("copy destination IPU");
        if (copy.src >= kMaxIpus || copy.dst >= kMaxIpus)
          fail_at(copy_at, fmt::format("expected copy IPU indices 0..{}, found src = {}, dst = {}",
                                       kMaxIpus - 1, copy.src, copy.dst));
        if (copy.src == copy.dst)
          fail_at(copy_at,
                  fmt::format("expected a copy between two IPUs, found src = dst = {}", copy.src));
        copy.bytes = size("copy bytes");
        g.copies.push_back(copy);
      }
    }
    global_exchanges_ = n;
  }

  // `depth` is the number of repeats enclosing these steps.
  std::vector<Step> read_steps(const IpuProgram& ipu, std::size_t depth) {
    std::vector<Step> steps;
    const std::uint32_t n = count("steps", kMinStepBytes);
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint64_t at = offset_;
      Step s;
      s.kind = enumeration<StepKind>("step kind", version_ >= 2 ? 7 : 5);
      switch (s.kind) {
        case StepKind::kCompute:
        case StepKind::kExchange: {
          const bool compute = s.kind == StepKind::kCompute;
          const std::uint64_t index_at = offset_;
          s.index = u32("step index");
          const std::size_t defined = compute ? ipu.compute_sets.size() : ipu.exchanges.size();
          if (s.index >= defined)
            fail_at(index_at,
                    fmt::format("expected {} index below {}, found {}",
                                compute ? "a compute set" : "an exchange", defined, s.index));
          if (version_ >= 4) s.provenance.pass = enumeration<Pass>("step pass", kPassNames.size());
          break;
        }
        case StepKind::kSync:
          if (version_ >= 2) s.group = group("sync group");
          break;
        case StepKind::kHost:
          s.direction = enumeration<HostDirection>("host direction", kHostDirectionNames.size());
          s.tiles = range("host tile range");
          s.bytes = size("host bytes");
          if (version_ >= 2) {
            s.memory = enumeration<HostMemory>("host memory", kHostMemoryNames.size());
            s.overlap = enumeration<std::uint8_t>("host overlap flag", 2) == 1;
          }
          if (version_ >= 3) s.provenance = provenance();
          break;
        case StepKind::kGlobalExchange: {
          const std::uint64_t index_at = offset_;
          s.index = u32("global exchange index");
          if (s.index >= global_exchanges_)
            fail_at(index_at, fmt::format("expected a global exchange index below {}, found {}",
                                          global_exchanges_, s.index));
          break;
        }
        case StepKind::kCollective:
          s.collective = enumeration<CollectiveOp>("collective", kCollectiveOpNames.size());
          s.method =
              enumeration<CollectiveMethod>("collective method", kCollectiveMethodNames.size());
          s.dtype = enumeration<DType>("collective dtype", kDTypeNames.size());
          s.group = group("collective group");
          s.bytes = size("collective bytes");
          if (version_ >= 3) s.provenance = provenance();
          break;
        case StepKind::kRepeat:
          if (depth + 1 > kMaxRepeatDepth)
            fail_at(at, fmt::format("expected repeats nested at most {} deep, found a deeper one",
                                    kMaxRepeatDepth));
          s.count = size("repeat count", 1);
          s.body = read_steps(ipu, depth + 1);
          break;
      }
      steps.push_back(std::move(s));
    }
    return steps;
  }

  std::istream& in_;
  const std::string& origin_;
  std::uint64_t size_hint_;
  std::unique_ptr<BackgroundHasher> hasher_;  // with an identity to compute
  std::uint64_t offset_ = 0;
  static constexpr std::size_t kBlock = 64 * 1024;
  std::vector<char> block_;  // read-ahead from the stream; bytes [pos_, size) are unread
  std::size_t pos_ = 0;
  std::vector<TileRange> dst_;
  // v3 delta bases: previous vertex first tile, transfer source, destination and bytes.
  std::uint32_t prev_first_ = 0, prev_src_ = 0, prev_dst_ = 0;
  std::uint64_t prev_bytes_ = 0;
  std::uint32_t version_ = kFormatVersion;
  bool canonical_ = true;

  std::uint32_t global_exchanges_ = 0;
  std::uint32_t replicas_ = 1;
};

}  // namespace

Trace read_binary(std::istream& in, const std::string& origin, std::uint64_t size_hint,
                  std::string* identity) {
  BinaryReader reader(in, origin, size_hint, identity != nullptr);
  Trace trace = reader.read();
  if (identity) {
    // The current version's encoding is canonical (fixed-width fields, no alternatives, no
    // trailing bytes), so the bytes read are exactly what write_binary would write. An older
    // version's bytes are not, nor are those of a file whose vertices lack late parameters:
    // their identity is that of their current-version serialisation.
    *identity = reader.version() == kFormatVersion && reader.canonical() ? reader.hash().hex()
                                                                         : trace::identity(trace);
  }
  return trace;
}

void write_binary(const Trace& trace, std::ostream& out, Checked checked) {
  if (checked == Checked::kNo)
    check_structure(
        trace, trace.name.empty() ? std::string("trace") : fmt::format("trace '{}'", trace.name));
  BinaryWriter w(out);
  w.raw(kMagic.data(), kMagic.size());
  w.u32(kFormatVersion);
  w.str(trace.name);
  w.u32(trace.replicas);
  w.count(trace.meta.size());
  for (const auto& [key, value] : trace.meta) {
    w.str(key);
    w.str(value);
  }
  w.count(trace.global_exchanges.size());
  for (const GlobalExchange& g : trace.global_exchanges) {
    w.str(g.name);
    w.provenance(g.provenance);
    w.count(g.copies.size());
    for (const IpuCopy& c : g.copies) {
      w.u32(c.src);
      w.u32(c.dst);
      w.u64(c.bytes);
    }
  }
  w.count(trace.ipus.size());
  for (const IpuProgram& ipu : trace.ipus) {
    w.u32(ipu.ipu);
    w.count(ipu.tensors.size());
    for (const Tensor& t : ipu.tensors) {
      w.str(t.name);
      w.u8(static_cast<std::uint8_t>(static_cast<std::uint8_t>(t.kind) |
                                     (t.live ? kTensorHasLifetime : 0)));
      w.u8(static_cast<std::uint8_t>(t.dtype));
      w.range(t.tiles);
      w.u64(t.bytes_per_tile);
      if (t.live) {
        w.u64(t.live->first);
        w.u64(t.live->last);
      }
    }
    w.count(ipu.compute_sets.size());
    for (const ComputeSet& cs : ipu.compute_sets) {
      w.str(cs.name);
      w.provenance(cs.provenance);
      w.vertices(cs.vertices);
    }
    w.count(ipu.exchanges.size());
    for (const Exchange& ex : ipu.exchanges) {
      w.str(ex.name);
      w.provenance(ex.provenance);
      w.transfers(ex);
      w.moves(ex);
      w.reduce_scatters(ex);
    }
    w.steps(ipu.steps);
  }
  w.flush();
}

}  // namespace ipusim::trace
