// SPDX-License-Identifier: Apache-2.0
// The line-based text form of a trace (docs/trace-format.md §2). The reader streams the input
// one line at a time and validates each line as it goes, so that every error names the line.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <istream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::trace {
namespace {

using Tokens = std::vector<std::string_view>;

template <std::size_t N>
std::vector<std::string> to_strings(const std::array<std::string_view, N>& names) {
  return {names.begin(), names.end()};
}

std::string join(const std::vector<std::string>& words, std::string_view sep = ", ") {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : std::string(sep)) + w;
  return out;
}

// " (did you mean 'x'?)" when a candidate is close, otherwise " (expected one of: a, b, c)".
std::string suggest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string close = did_you_mean(word, candidates);
  if (!close.empty() || candidates.empty()) return close;
  return fmt::format(" (expected one of: {})", join(candidates));
}

// "a compute set", "an exchange".
std::string with_article(std::string_view noun) {
  const bool vowel = !noun.empty() && std::string_view("aeiou").find(noun[0]) != noun.npos;
  return fmt::format("{} {}", vowel ? "an" : "a", noun);
}

// The tokens of a line for messages, clipped so that a pathological line stays readable.
std::string join_tokens(const Tokens& tokens) {
  constexpr std::size_t kShown = 120;
  std::string out;
  for (auto t : tokens) {
    if (!out.empty()) out += ' ';
    out += t;
    if (out.size() > kShown) return out.substr(0, kShown) + "...";
  }
  return out;
}

// Splits at blanks after removing a '#' comment (no token may contain '#').
void tokenize(std::string_view line, Tokens& out) {
  out.clear();
  if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
  std::size_t i = 0;
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; };
  while (i < line.size()) {
    while (i < line.size() && blank(line[i])) ++i;
    std::size_t start = i;
    while (i < line.size() && !blank(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
}

template <typename T>
std::optional<T> parse_integer(std::string_view s) {
  T value{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

// A key=value field expected by a directive.
struct Field {
  std::string_view key;
  std::string_view placeholder;  // for messages: "<range>", "<count>"
  bool required = true;
  std::optional<std::string_view> value;
};

class TextReader {
 public:
  TextReader(std::istream& in, const std::string& origin) : in_(in), origin_(origin) {}

  Trace read() {
    std::string line;
    while (next_line(line)) {
      tokenize(line, tokens_);
      if (tokens_.empty()) continue;
      dispatch();
    }
    if (in_.bad()) fail("expected more input, found a read error");
    finish();
    check_lifetimes();
    // The destination-overlap test ran as each transfer was parsed.
    check_structure_after_read(trace_, origin_);
    return std::move(trace_);
  }

 private:
  enum class Block { kTop, kIpu, kComputeSet, kExchange, kProgram, kGlobalExchange };

  // Where a name was defined: its index among its kind and its line.
  struct Definition {
    std::uint32_t index = 0;
    std::size_t line = 0;
  };
  using NameTable = std::map<std::string, Definition, std::less<>>;

  // Per-IPU name tables, for uniqueness and for program references.
  struct IpuState {
    std::size_t line = 0;
    NameTable tensors, compute_sets, exchanges;
    std::size_t program_line = 0;
  };

  struct OpenBody {
    std::vector<Step>* steps;
    std::size_t line;
  };

  // Longest line accepted: a trace line is a step or an item, at most a few kilobytes;
  // anything longer is not a trace (e.g. a binary file or /dev/zero) and must not be read
  // into memory whole.
  static constexpr std::size_t kMaxLineLength = std::size_t{1} << 20;

  // std::getline with a bound: reads the next line (without its newline) into `line`,
  // counting it; false at the end of the input.
  bool next_line(std::string& line) {
    constexpr int kEof = std::char_traits<char>::eof();
    line.clear();
    std::streambuf* buf = in_.rdbuf();
    int c = buf ? buf->sbumpc() : kEof;
    if (c == kEof) return false;
    ++line_no_;
    for (; c != kEof && c != '\n'; c = buf->sbumpc()) {
      if (line.size() == kMaxLineLength)
        fail(
            fmt::format("expected a line of at most {} bytes, found a longer one "
                        "(is this a text trace?)",
                        kMaxLineLength));
      line.push_back(static_cast<char>(c));
    }
    return true;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw TraceError(fmt::format("{}:{}: {}", origin_, line_no_, what));
  }

  IpuProgram& ipu() { return trace_.ipus.back(); }

  void dispatch() {
    const std::string_view d = tokens_[0];
    if (!header_seen_) {
      if (d != "ipusim-trace")
        fail(fmt::format("expected the header 'ipusim-trace {}', found '{}'", kFormatVersion,
                         join_tokens(tokens_)));
      expect_arity(2, "ipusim-trace <version>");
      auto v = parse_integer<std::uint32_t>(tokens_[1]);
      if (!v) fail(fmt::format("expected a format version number, found '{}'", tokens_[1]));
      if (*v < kOldestFormatVersion || *v > kFormatVersion)
        fail(fmt::format("expected trace format version {} to {}, found version {}",
                         kOldestFormatVersion, kFormatVersion, *v));
      file_version_ = *v;
      header_seen_ = true;
      return;
    }
    switch (block_) {
      case Block::kTop:
        return top_directive(d);
      case Block::kIpu:
        return ipu_directive(d);
      case Block::kComputeSet:
        return compute_set_directive(d);
      case Block::kExchange:
        return exchange_directive(d);
      case Block::kProgram:
        return program_directive(d);
      case Block::kGlobalExchange:
        return global_exchange_directive(d);
    }
  }

  void require_v2(std::string_view what) const {
    if (file_version_ < 2)
      fail(fmt::format("'{}' needs trace format version 2, but the header says version {}", what,
                       file_version_));
  }

  void require_v3(std::string_view what) const {
    if (file_version_ < 3)
      fail(fmt::format("'{}' needs trace format version 3, but the header says version {}", what,
                       file_version_));
  }
  void require_v4(std::string_view what) const {
    if (file_version_ < 4)
      fail(fmt::format("'{}' needs trace format version 4, but the header says version {}", what,
                       file_version_));
  }

  // Run fields (v3): count=N (1..2^32-1) and signed steps.
  std::uint32_t parse_run_count(std::string_view s) const {
    require_v3("count=");
    auto v = parse_integer<std::uint32_t>(s);
    if (!v || *v == 0)
      fail(fmt::format("expected count= in 1..{}, found '{}'",
                       std::numeric_limits<std::uint32_t>::max(), s));
    return *v;
  }
  std::int64_t parse_step(std::string_view s, std::string_view key) const {
    require_v3(fmt::format("{}=", key));
    auto v = parse_integer<std::int64_t>(s);
    if (!v) fail(fmt::format("expected a signed integer for {}=, found '{}'", key, s));
    return *v;
  }
  // Provenance fields (v3) layer=<name>[,<name>...] pass=<pass> op=<op>, as found by collect().
  Provenance parse_provenance(const std::optional<std::string_view>& layer,
                              const std::optional<std::string_view>& pass,
                              const std::optional<std::string_view>& op) const {
    Provenance p;
    if (layer) {
      require_v3("layer=");
      std::string_view list = *layer;
      while (true) {
        const auto comma = list.find(',');
        std::string name = parse_name(list.substr(0, comma), "layer");
        if (std::find(p.layers.begin(), p.layers.end(), name) != p.layers.end())
          fail(fmt::format("expected each layer once in layer=, found '{}' twice", name));
        if (p.layers.size() == kMaxProvenanceLayers)
          fail(fmt::format("expected at most {} layers in layer=", kMaxProvenanceLayers));
        p.layers.push_back(std::move(name));
        if (comma == std::string_view::npos) break;
        list = list.substr(comma + 1);
      }
    }
    if (pass) {
      require_v3("pass=");
      p.pass = static_cast<Pass>(parse_enum(*pass, kPassNames, "pass"));
    }
    if (op) {
      require_v3("op=");
      p.op = static_cast<OpKind>(parse_enum(*op, kOpKindNames, "op kind"));
    }
    return p;
  }
  // A compute or exchange step's own pass (v4): `compute <name> [pass=<pass>]`.
  Pass step_pass(const std::string& what) {
    Field fields[] = {{"pass", "<pass>", false, {}}};
    collect(2, fields, what);
    if (!fields[0].value) return Pass::kNone;
    require_v4("pass=");
    return static_cast<Pass>(parse_enum(*fields[0].value, kPassNames, "pass"));
  }
  // The provenance fields after a block's name: `<directive> <name> [layer=..] [pass=..] [op=..]`.
  Provenance block_provenance(const std::string& what) {
    Field fields[] = {{"layer", "<name>[,<name>...]", false, {}},
                      {"pass", "<pass>", false, {}},
                      {"op", "<op>", false, {}}};
    collect(2, fields, what);
    return parse_provenance(fields[0].value, fields[1].value, fields[2].value);
  }

  void check_single(std::uint32_t count, bool any_step) const {
    if (count == 1 && any_step)
      fail("expected no steps for a single record (count=1), found a non-zero step");
  }

  void expect_arity(std::size_t n, std::string_view usage) const {
    if (tokens_.size() != n)
      fail(fmt::format("expected '{}', found '{}'", usage, join_tokens(tokens_)));
  }

  // An unknown or misplaced directive in a context allowing `allowed`.
  [[noreturn]] void bad_directive(std::string_view d, const std::vector<std::string>& allowed,
                                  std::string_view context) const {
    static const std::map<std::string_view, std::string_view> kHome{
        {"ipusim-trace", "the first line"},
        {"name", "the top, before the first 'ipu'"},
        {"tensor", "an 'ipu' section"},
        {"computeset", "an 'ipu' section"},
        {"program", "an 'ipu' section"},
        {"vertex", "a 'computeset' block"},
        {"transfer", "an 'exchange' block"},
        {"move", "an 'exchange' block"},
        {"reduce_scatter", "an 'exchange' block"},
        {"compute", "a 'program' block"},
        {"sync", "a 'program' block"},
        {"host", "a 'program' block"},
        {"repeat", "a 'program' block"},
        {"collective", "a 'program' block"},
        {"replicas", "the top, before the first 'ipu'"},
        {"copy", "a 'global_exchange' block at the top"},
    };
    if (d == "end")
      fail(fmt::format("expected one of {} {}, found 'end' with no open block", join(allowed),
                       context));
    if (auto it = kHome.find(d); it != kHome.end())
      fail(fmt::format("expected one of {} {}, found '{}' (which belongs in {})", join(allowed),
                       context, d, it->second));
    fail(fmt::format("expected one of {} {}, found unknown directive '{}'{}", join(allowed),
                     context, d, did_you_mean(d, allowed)));
  }

  std::string parse_name(std::string_view s, std::string_view what) const {
    if (!is_valid_name(s))
      fail(fmt::format("expected {} name of 1..{} characters from [A-Za-z0-9_.:/-], found '{}'",
                       with_article(what), kMaxNameLength, s));
    return std::string(s);
  }

  std::uint64_t parse_count(std::string_view s, std::string_view key, std::uint64_t min) const {
    auto v = parse_integer<std::uint64_t>(s);
    if (!v) fail(fmt::format("expected a number for {}=, found '{}'", key, s));
    if (*v < min || *v > static_cast<std::uint64_t>(kMaxCount))
      fail(fmt::format("expected {}= in {}..{}, found {}", key, min, kMaxCount, *v));
    return *v;
  }

  std::uint32_t parse_tile(std::string_view s, std::string_view full, std::string_view key) const {
    auto v = parse_integer<std::uint32_t>(s);
    if (!v)
      fail(fmt::format("expected a tile range like 5 or 0..1471 for {}=, found '{}'", key, full));
    return *v;
  }

  TileRange parse_range(std::string_view s, std::string_view key) const {
    TileRange r;
    if (auto dots = s.find(".."); dots != std::string_view::npos) {
      r.first = parse_tile(s.substr(0, dots), s, key);
      r.last = parse_tile(s.substr(dots + 2), s, key);
    } else {
      r.first = r.last = parse_tile(s, s, key);
    }
    if (r.first > r.last)
      fail(fmt::format("expected a tile range with first <= last for {}=, found '{}'", key, s));
    return r;
  }

  // live=FIRST..LAST or live=POSITION (v3): program positions, each 0..2^40; the program's
  // length is checked once it has been read (check_structure).
  Lifetime parse_lifetime(std::string_view s) const {
    require_v3("live=");
    const auto position = [&](std::string_view p) {
      auto v = parse_integer<std::uint64_t>(p);
      if (!v || *v > static_cast<std::uint64_t>(kMaxCount))
        fail(
            fmt::format("expected program positions like 5 or 0..120 (each 0..{}) for live=, "
                        "found '{}'",
                        kMaxCount, s));
      return *v;
    };
    Lifetime l;
    if (auto dots = s.find(".."); dots != std::string_view::npos) {
      l.first = position(s.substr(0, dots));
      l.last = position(s.substr(dots + 2));
    } else {
      l.first = l.last = position(s);
    }
    if (l.first > l.last)
      fail(fmt::format("expected program positions with first <= last for live=, found '{}'", s));
    return l;
  }

  std::pair<std::string_view, std::string_view> split_key_value(std::string_view tok) const {
    auto eq = tok.find('=');
    if (eq == std::string_view::npos || eq == 0)
      fail(fmt::format("expected key=value, found '{}'", tok));
    return {tok.substr(0, eq), tok.substr(eq + 1)};
  }

  // Fills `fields` from tokens_[from..]; `what` names the item for messages.
  void collect(std::size_t from, std::span<Field> fields, const std::string& what) const {
    for (std::size_t i = from; i < tokens_.size(); ++i) {
      auto [key, value] = split_key_value(tokens_[i]);
      Field* field = nullptr;
      for (Field& f : fields)
        if (f.key == key) field = &f;
      if (!field) {
        std::vector<std::string> keys;
        for (const Field& f : fields) keys.emplace_back(f.key);
        fail(fmt::format("unknown key '{}' for {}{}", key, what, suggest(key, keys)));
      }
      if (field->value) fail(fmt::format("expected {}= once for {}, found it twice", key, what));
      if (value.empty())
        fail(fmt::format("expected {}={} for {}, found nothing after '='", key, field->placeholder,
                         what));
      field->value = value;
    }
    for (const Field& f : fields)
      if (f.required && !f.value)
        fail(fmt::format("expected {}={} for {}, found no {}=", f.key, f.placeholder, what, f.key));
  }

  void define(NameTable& table, const std::string& name, std::string_view what) {
    auto [it, inserted] =
        table.emplace(name, Definition{static_cast<std::uint32_t>(table.size()), line_no_});
    if (!inserted)
      fail(fmt::format("expected a new {} name, found '{}' (already defined at line {})", what,
                       name, it->second.line));
  }

  // --- top level ---------------------------------------------------------------------------

  void top_directive(std::string_view d) {
    if (d == "name") {
      if (name_line_ != 0)
        fail(fmt::format("expected one 'name' directive, found a second (first at line {})",
                         name_line_));
      expect_arity(2, "name <name>");
      trace_.name = parse_name(tokens_[1], "trace");
      name_line_ = line_no_;
    } else if (d == "ipu") {
      start_ipu();
    } else if (d == "replicas") {
      require_v2("replicas");
      expect_arity(2, "replicas <count>");
      if (replicas_line_ != 0)
        fail(fmt::format("expected one 'replicas' directive, found a second (first at line {})",
                         replicas_line_));
      auto n = parse_integer<std::uint32_t>(tokens_[1]);
      if (!n || *n < 1 || *n > kMaxReplicas)
        fail(fmt::format("expected a replica count 1..{}, found '{}'", kMaxReplicas, tokens_[1]));
      trace_.replicas = *n;
      replicas_line_ = line_no_;
    } else if (d == "meta") {
      require_v2("meta");
      expect_arity(3, "meta <key> <value>");
      std::string key = parse_name(tokens_[1], "meta key");
      for (const auto& kv : trace_.meta)
        if (kv.first == key)
          fail(fmt::format("expected each meta key once, found '{}' twice", key));
      trace_.meta.emplace_back(std::move(key), parse_name(tokens_[2], "meta value"));
    } else if (d == "global_exchange") {
      require_v2("global_exchange");
      if (tokens_.size() < 2)
        expect_arity(2, "global_exchange <name> [layer=..] [pass=..] [op=..]");
      std::string name = parse_name(tokens_[1], "global exchange");
      define(global_exchanges_, name, "global exchange");
      Provenance p = block_provenance(fmt::format("global exchange '{}'", name));
      trace_.global_exchanges.push_back(GlobalExchange{std::move(name), {}, std::move(p)});
      open_block(Block::kGlobalExchange);
    } else {
      bad_directive(d, {"name", "replicas", "meta", "global_exchange", "ipu"},
                    "before the first 'ipu' section");
    }
  }

  void global_exchange_directive(std::string_view d) {
    if (d == "end") {
      expect_arity(1, "end");
      block_ = Block::kTop;
    } else if (d == "copy") {
      Field fields[] = {
          {"src", "<ipu>", true, {}}, {"dst", "<ipu>", true, {}}, {"bytes", "<count>", true, {}}};
      collect(1, fields, "copy");
      IpuCopy c;
      auto ipu_index = [&](std::string_view v, std::string_view key) {
        auto n = parse_integer<std::uint32_t>(v);
        if (!n || *n >= kMaxIpus)
          fail(
              fmt::format("expected an IPU index 0..{} for {}=, found '{}'", kMaxIpus - 1, key, v));
        return *n;
      };
      c.src = ipu_index(*fields[0].value, "src");
      c.dst = ipu_index(*fields[1].value, "dst");
      if (c.src == c.dst)
        fail(fmt::format("expected a copy between two IPUs, found src = dst = {}", c.src));
      c.bytes = parse_count(*fields[2].value, "bytes", 0);
      trace_.global_exchanges.back().copies.push_back(c);
    } else {
      bad_directive(d, {"copy", "end"}, "in a 'global_exchange' block");
    }
  }

  Group parse_group(std::string_view v) const {
    Group g;
    std::string_view kind = v.substr(0, v.find(':'));
    auto names = to_strings(kGroupKindNames);
    auto it = std::find(names.begin(), names.end(), kind);
    if (it == names.end()) fail(fmt::format("unknown group '{}'{}", v, suggest(kind, names)));
    g.kind = static_cast<GroupKind>(it - names.begin());
    if (kind.size() != v.size()) {
      // replicas:K, replica:K (K consecutive IPUs) or replica:K/S (K IPUs S apart)
      std::string_view size = v.substr(kind.size() + 1), stride = "1";
      if (g.kind == GroupKind::kReplica && size.find('/') != std::string_view::npos) {
        stride = size.substr(size.find('/') + 1);
        size = size.substr(0, size.find('/'));
      }
      auto n = parse_integer<std::uint32_t>(size);
      auto s = parse_integer<std::uint32_t>(stride);
      if (g.kind == GroupKind::kReplica && (!n || *n < 1 || !s || *s < 1))
        fail(
            fmt::format("expected replica:<count> or replica:<count>/<stride>, counts of at "
                        "least 1, found '{}'",
                        v));
      if (g.kind != GroupKind::kReplica && (g.kind != GroupKind::kReplicas || !n || *n < 1))
        fail(
            fmt::format("expected a group size only as replicas:<count>, replica:<count> or "
                        "replica:<count>/<stride>, found '{}'",
                        v));
      if (g.kind == GroupKind::kReplicas && trace_.replicas % *n != 0)
        fail(fmt::format("expected a group size dividing the {} replicas, found '{}'",
                         trace_.replicas, v));
      g.size = *n;
      if (g.kind == GroupKind::kReplica) g.stride = *s;
    }
    return g;
  }

  template <std::size_t N>
  std::size_t parse_enum(std::string_view v, const std::array<std::string_view, N>& names,
                         std::string_view what) const {
    auto list = to_strings(names);
    auto it = std::find(list.begin(), list.end(), v);
    if (it == list.end()) fail(fmt::format("unknown {} '{}'{}", what, v, suggest(v, list)));
    return static_cast<std::size_t>(it - list.begin());
  }

  void start_ipu() {
    expect_arity(2, "ipu <index>");
    auto index = parse_integer<std::uint32_t>(tokens_[1]);
    if (!index || *index >= kMaxIpus)
      fail(fmt::format("expected an IPU index 0..{}, found '{}'", kMaxIpus - 1, tokens_[1]));
    auto [it, inserted] = ipu_lines_.emplace(*index, line_no_);
    if (!inserted)
      fail(fmt::format("expected each IPU once, found a second 'ipu {}' (first at line {})", *index,
                       it->second));
    trace_.ipus.emplace_back();
    ipu().ipu = *index;
    state_ = IpuState{};
    state_.line = line_no_;
    block_ = Block::kIpu;
  }

  // --- ipu section -------------------------------------------------------------------------

  void ipu_directive(std::string_view d) {
    if (d == "tensor") {
      read_tensor();
    } else if (d == "computeset") {
      if (tokens_.size() < 2) expect_arity(2, "computeset <name> [layer=..] [pass=..] [op=..]");
      std::string name = parse_name(tokens_[1], "compute set");
      define(state_.compute_sets, name, "compute set");
      Provenance p = block_provenance(fmt::format("compute set '{}'", name));
      ipu().compute_sets.push_back(ComputeSet{std::move(name), {}, std::move(p)});
      open_block(Block::kComputeSet);
    } else if (d == "exchange") {
      if (tokens_.size() < 2) expect_arity(2, "exchange <name> [layer=..] [pass=..] [op=..]");
      std::string name = parse_name(tokens_[1], "exchange");
      define(state_.exchanges, name, "exchange");
      Provenance p = block_provenance(fmt::format("exchange '{}'", name));
      ipu().exchanges.push_back(Exchange{std::move(name), {}, {}, std::move(p)});
      open_block(Block::kExchange);
    } else if (d == "program") {
      expect_arity(1, "program");
      if (state_.program_line != 0)
        fail(
            fmt::format("expected one 'program' block per IPU, found a second (first at line "
                        "{})",
                        state_.program_line));
      state_.program_line = line_no_;
      bodies_.push_back(OpenBody{&ipu().steps, line_no_});
      block_ = Block::kProgram;
    } else if (d == "ipu") {
      start_ipu();
    } else {
      bad_directive(d, {"tensor", "computeset", "exchange", "program", "ipu"},
                    "in an 'ipu' section");
    }
  }

  void open_block(Block b) {
    block_ = b;
    block_line_ = line_no_;
  }

  void read_tensor() {
    if (tokens_.size() < 2)
      fail(
          "expected 'tensor <name> tiles=<range> bytes=<count> [kind=<kind>] [dtype=<dtype>] "
          "[live=<positions>]', found 'tensor'");
    std::string name = parse_name(tokens_[1], "tensor");
    define(state_.tensors, name, "tensor");
    Field fields[] = {{"kind", "<kind>", false, {}},
                      {"dtype", "<dtype>", false, {}},
                      {"tiles", "<range>", true, {}},
                      {"bytes", "<count>", true, {}},
                      {"live", "<positions>", false, {}}};
    collect(2, fields, fmt::format("tensor '{}'", name));
    Tensor t;
    t.name = std::move(name);
    if (fields[0].value) {
      auto kinds = to_strings(kTensorKindNames);
      auto it = std::find(kinds.begin(), kinds.end(), *fields[0].value);
      if (it == kinds.end())
        fail(fmt::format("unknown tensor kind '{}'{}", *fields[0].value,
                         suggest(*fields[0].value, kinds)));
      t.kind = static_cast<TensorKind>(it - kinds.begin());
    }
    if (fields[1].value) t.dtype = parse_dtype(*fields[1].value, "dtype of the tensor");
    t.tiles = parse_range(*fields[2].value, "tiles");
    t.bytes_per_tile = parse_count(*fields[3].value, "bytes", 0);
    if (fields[4].value) {
      t.live = parse_lifetime(*fields[4].value);
      lifetimes_.push_back({trace_.ipus.size() - 1, ipu().tensors.size(), line_no_});
    }
    ipu().tensors.push_back(std::move(t));
  }

  [[noreturn]] void unknown_dtype(std::string_view s, std::string_view what) const {
    fail(fmt::format("unknown dtype '{}' for {}{}", s, what, suggest(s, to_strings(kDTypeNames))));
  }

  DType parse_dtype(std::string_view s, std::string_view what) const {
    auto dt = dtype_by_name(s);
    if (!dt) unknown_dtype(s, what);
    return *dt;
  }

  // --- computeset block --------------------------------------------------------------------

  void compute_set_directive(std::string_view d) {
    if (d == "end") {
      expect_arity(1, "end");
      block_ = Block::kIpu;
    } else if (d == "vertex") {
      read_vertex();
    } else {
      bad_directive(d, {"vertex", "end"}, "in a 'computeset' block");
    }
  }

  void read_vertex() {
    constexpr std::string_view kUsage =
        "vertex tiles=<range> [count=<n> step=<tiles>] <codelet> <param>=<value> ...";
    if (tokens_.size() < 3 || !tokens_[1].starts_with("tiles="))
      fail(fmt::format("expected '{}', found '{}'", kUsage, join_tokens(tokens_)));
    Vertex v;
    v.tiles = parse_range(tokens_[1].substr(6), "tiles");
    std::size_t at = 2;
    bool step_given = false;
    for (; at < tokens_.size(); ++at) {
      if (tokens_[at].starts_with("count=") && v.count == 1 && at == 2) {
        v.count = parse_run_count(tokens_[at].substr(6));
      } else if (tokens_[at].starts_with("step=") && !step_given) {
        v.step = parse_step(tokens_[at].substr(5), "step");
        step_given = true;
      } else {
        break;
      }
    }
    if (at >= tokens_.size())
      fail(fmt::format("expected '{}', found '{}'", kUsage, join_tokens(tokens_)));
    check_single(v.count, v.step != 0);
    auto codelet = codelet_by_name(tokens_[at]);
    if (!codelet) {
      std::vector<std::string> names;
      for (const auto& spec : codelet_catalogue()) names.emplace_back(spec.name);
      fail(fmt::format("unknown codelet '{}'{}", tokens_[at], suggest(tokens_[at], names)));
    }
    v.codelet = *codelet;
    const CodeletSpec& spec = codelet_spec(*codelet);
    std::array<bool, kMaxVertexParams> given{};
    for (std::size_t i = at + 1; i < tokens_.size(); ++i) {
      auto [key, value] = split_key_value(tokens_[i]);
      auto index = param_index(*codelet, key);
      if (!index) {
        std::vector<std::string> names;
        for (const auto& p : spec.params) names.emplace_back(p.name);
        fail(fmt::format("unknown parameter '{}' for codelet {}{}", key, spec.name,
                         suggest(key, names)));
      }
      if (given[*index]) fail(fmt::format("expected parameter '{}' once, found it twice", key));
      given[*index] = true;
      v.params[*index] = parse_param(*codelet, *index, value);
    }
    for (std::size_t i = 0; i < spec.params.size(); ++i) {
      if (given[i]) continue;
      const ParamSpec& p = spec.params[i];
      if (!p.default_value)
        fail(
            fmt::format("expected {}=<value> for codelet {} (required, no default), found no "
                        "{}=",
                        p.name, spec.name, p.name));
      v.params[i] = *p.default_value;
    }
    ipu().compute_sets.back().vertices.push_back(v);
  }

  std::int64_t parse_param(Codelet c, std::size_t index, std::string_view value) const {
    const CodeletSpec& spec = codelet_spec(c);
    const ParamSpec& p = spec.params[index];
    std::int64_t v = 0;
    switch (p.kind) {
      case ParamKind::kInt: {
        auto n = parse_integer<std::int64_t>(value);
        if (!n)
          fail(fmt::format("expected an integer for parameter '{}' of {}, found '{}'", p.name,
                           spec.name, value));
        v = *n;
        break;
      }
      case ParamKind::kDType: {
        auto dt = dtype_by_name(value);
        if (!dt) unknown_dtype(value, fmt::format("parameter '{}' of {}", p.name, spec.name));
        v = static_cast<std::int64_t>(*dt);
        break;
      }
      case ParamKind::kOp: {
        auto op = op_by_name(value);
        if (!op || !op_allowed(c, *op)) {
          std::vector<std::string> allowed;
          for (std::size_t i = 0; i < kOpNames.size(); ++i)
            if (op_allowed(c, static_cast<Op>(i))) allowed.emplace_back(kOpNames[i]);
          // A real op that this codelet does not take lists the choices; a typo gets a guess.
          fail(fmt::format(
              "{} '{}' for parameter '{}' of {}{}", op ? "invalid op" : "unknown op", value, p.name,
              spec.name,
              op ? fmt::format(" (expected one of: {})", join(allowed)) : suggest(value, allowed)));
        }
        v = static_cast<std::int64_t>(*op);
        break;
      }
    }
    if (auto problem = param_problem(c, index, v)) fail(*problem);
    return v;
  }

  // --- exchange block ----------------------------------------------------------------------

  void exchange_directive(std::string_view d) {
    if (d == "end") {
      expect_arity(1, "end");
      block_ = Block::kIpu;
    } else if (d == "transfer") {
      const Exchange& ex = ipu().exchanges.back();
      if (!ex.moves.empty() || !ex.reduce_scatters.empty())
        fail(fmt::format(
            "expected {} or 'end' after a {}, found 'transfer' (an exchange lists its transfers, "
            "then its moves, then its reduce-scatters)",
            ex.reduce_scatters.empty() ? "'move'" : "'reduce_scatter'",
            ex.reduce_scatters.empty() ? "move" : "reduce_scatter"));
      read_transfer();
    } else if (d == "move") {
      if (!ipu().exchanges.back().reduce_scatters.empty())
        fail(
            "expected 'reduce_scatter' or 'end' after a reduce_scatter, found 'move' (an "
            "exchange lists its transfers, then its moves, then its reduce-scatters)");
      read_move();
    } else if (d == "reduce_scatter") {
      read_reduce_scatter();
    } else {
      bad_directive(d, {"transfer", "move", "reduce_scatter", "end"}, "in an 'exchange' block");
    }
  }

  // A reduce-scatter's groups (v6): FIRST[/STEP/COUNT]:ELEMENTS[,...].
  std::vector<ReduceScatter::Groups> parse_groups(std::string_view list) const {
    std::vector<ReduceScatter::Groups> out;
    while (true) {
      const std::size_t comma = list.find(',');
      const std::string_view item = list.substr(0, comma);
      const auto bad = [&] {
        fail(fmt::format(
            "expected groups like 0:1024 or 0/1/7:1536 (first tile[/tile step/groups]:elements), "
            "found '{}' in groups=",
            item));
      };
      const std::size_t colon = item.find(':');
      if (colon == std::string_view::npos) bad();
      std::vector<std::string_view> parts;
      const std::string_view tiles = item.substr(0, colon);
      for (std::size_t at = 0;;) {
        const std::size_t slash = tiles.find('/', at);
        parts.push_back(tiles.substr(at, slash == std::string_view::npos ? slash : slash - at));
        if (slash == std::string_view::npos) break;
        at = slash + 1;
      }
      if (parts.size() != 1 && parts.size() != 3) bad();
      ReduceScatter::Groups g;
      const auto first = parse_integer<std::uint32_t>(parts[0]);
      const auto elements = parse_integer<std::uint64_t>(item.substr(colon + 1));
      if (!first || !elements) bad();
      g.first = *first;
      g.elements = *elements;
      if (parts.size() == 3) {
        const auto step = parse_integer<std::uint32_t>(parts[1]);
        const auto count = parse_integer<std::uint32_t>(parts[2]);
        if (!step || !count) bad();
        g.step = *step;
        g.count = *count;
      }
      out.push_back(g);
      if (comma == std::string_view::npos) break;
      list = list.substr(comma + 1);
    }
    return out;
  }

  void read_reduce_scatter() {
    if (file_version_ < 6)
      fail(fmt::format(
          "'reduce_scatter' needs trace format version 6, but the header says version {}",
          file_version_));
    Field fields[] = {{"members", "<count>", true, {}},
                      {"member_step", "<tiles>", true, {}},
                      {"fan_in", "<count>", true, {}},
                      {"stride", "<members>", true, {}},
                      {"element_bytes", "<bytes>", true, {}},
                      {"groups", "<first>[/<step>/<count>]:<elements>[,...]", true, {}}};
    collect(1, fields, "reduce_scatter");
    ReduceScatter r;
    const auto u32 = [&](std::size_t i, std::string_view key, std::uint64_t min) {
      const std::uint64_t v = parse_count(*fields[i].value, key, min);
      if (v > std::numeric_limits<std::uint32_t>::max())
        fail(fmt::format("expected {}= in {}..{}, found {}", key, min,
                         std::numeric_limits<std::uint32_t>::max(), v));
      return static_cast<std::uint32_t>(v);
    };
    r.members = u32(0, "members", 2);
    r.member_step = u32(1, "member_step", 1);
    r.fan_in = u32(2, "fan_in", 2);
    r.stride = u32(3, "stride", 1);
    r.element_bytes = u32(4, "element_bytes", 1);
    r.groups = parse_groups(*fields[5].value);
    if (auto problem = reduce_scatter_problem(r))
      fail(fmt::format("this reduce_scatter {}", *problem));
    ipu().exchanges.back().reduce_scatters.push_back(std::move(r));
  }

  // A move's grid (v5): FIRST/STRIDE/POSITIONSxCHANNELS[/channels_outer].
  BlockGrid parse_grid(std::string_view s, std::string_view key) const {
    const auto bad = [&] {
      fail(fmt::format(
          "expected a block grid like 0/1/64x128 or 4/2/1x64/channels_outer (first tile/tile "
          "stride/positions x channels per block[/channels_outer]) for {}=, found '{}'",
          key, s));
    };
    std::vector<std::string_view> parts;
    for (std::size_t at = 0;;) {
      const std::size_t slash = s.find('/', at);
      parts.push_back(s.substr(at, slash == std::string_view::npos ? slash : slash - at));
      if (slash == std::string_view::npos) break;
      at = slash + 1;
    }
    if (parts.size() < 3 || parts.size() > 4 || (parts.size() == 4 && parts[3] != "channels_outer"))
      bad();
    const std::size_t x = parts[2].find('x');
    if (x == std::string_view::npos) bad();
    const auto first = parse_integer<std::uint32_t>(parts[0]);
    const auto stride = parse_integer<std::uint32_t>(parts[1]);
    const auto ppt = parse_integer<std::uint64_t>(parts[2].substr(0, x));
    const auto cpt = parse_integer<std::uint64_t>(parts[2].substr(x + 1));
    if (!first || !stride || !ppt || !cpt) bad();
    return BlockGrid{*first, *stride, *ppt, *cpt, parts.size() == 4};
  }

  void read_move() {
    if (file_version_ < 5)
      fail(fmt::format("'move' needs trace format version 5, but the header says version {}",
                       file_version_));
    Field fields[] = {{"positions", "<count>", true, {}},
                      {"channels", "<count>", true, {}},
                      {"element_bytes", "<bytes>", true, {}},
                      {"from", "<grid>", true, {}},
                      {"to", "<grid>", true, {}}};
    collect(1, fields, "move");
    Move m;
    m.positions = parse_count(*fields[0].value, "positions", 1);
    m.channels = parse_count(*fields[1].value, "channels", 1);
    m.element_bytes = static_cast<std::uint32_t>(parse_count(*fields[2].value, "element_bytes", 1));
    m.from = parse_grid(*fields[3].value, "from");
    m.to = parse_grid(*fields[4].value, "to");
    if (auto problem = move_problem(m)) fail(fmt::format("this move {}", *problem));
    ipu().exchanges.back().moves.push_back(m);
  }

  void read_transfer() {
    Field fields[] = {
        {"src", "<range>", true, {}},       {"dst", "<range>[,<range>...]", true, {}},
        {"bytes", "<count>", true, {}},     {"mode", "multicast|personalised", false, {}},
        {"count", "<n>", false, {}},        {"src_step", "<tiles>", false, {}},
        {"dst_step", "<tiles>", false, {}}, {"bytes_step", "<bytes>", false, {}}};
    collect(1, fields, "transfer");
    const TileRange src = parse_range(*fields[0].value, "src");
    dst_scratch_.clear();
    std::string_view list = *fields[1].value;
    while (true) {
      auto comma = list.find(',');
      dst_scratch_.push_back(parse_range(list.substr(0, comma), "dst"));
      if (comma == std::string_view::npos) break;
      list = list.substr(comma + 1);
    }
    if (auto tile = first_shared_tile(dst_scratch_))
      fail(
          fmt::format("expected destination ranges that do not overlap, found tile {} twice in "
                      "dst={}",
                      *tile, *fields[1].value));
    const std::uint64_t bytes = parse_count(*fields[2].value, "bytes", 0);
    TransferMode mode = TransferMode::kMulticast;
    if (fields[3].value) {
      auto modes = to_strings(kTransferModeNames);
      auto it = std::find(modes.begin(), modes.end(), *fields[3].value);
      if (it == modes.end())
        fail(fmt::format("unknown transfer mode '{}'{}", *fields[3].value,
                         suggest(*fields[3].value, modes)));
      mode = static_cast<TransferMode>(it - modes.begin());
    }
    const std::uint32_t count = fields[4].value ? parse_run_count(*fields[4].value) : 1;
    const std::int64_t src_step = fields[5].value ? parse_step(*fields[5].value, "src_step") : 0;
    const std::int64_t dst_step = fields[6].value ? parse_step(*fields[6].value, "dst_step") : 0;
    const std::int64_t bytes_step =
        fields[7].value ? parse_step(*fields[7].value, "bytes_step") : 0;
    check_single(count, src_step != 0 || dst_step != 0 || bytes_step != 0);
    // As written: a record per line (Exchange::add would merge transfers into runs).
    ipu().exchanges.back().add_run(src, dst_scratch_, bytes, mode, count, src_step, dst_step,
                                   bytes_step);
  }

  // --- program block -----------------------------------------------------------------------

  std::uint32_t lookup(const NameTable& table, const NameTable& other, std::string_view name,
                       std::string_view what, std::string_view other_what,
                       std::string_view other_directive) const {
    if (auto it = table.find(name); it != table.end()) return it->second.index;
    std::vector<std::string> names;
    for (const auto& entry : table) names.push_back(entry.first);
    std::string hint = did_you_mean(name, names);
    if (!other_what.empty() && other.contains(name))
      hint = fmt::format(" ('{}' is {}: use '{} {}')", name, with_article(other_what),
                         other_directive, name);
    fail(fmt::format("expected the name of {} defined above, found undefined {} '{}'{}",
                     with_article(what), what, name, hint));
  }

  void program_directive(std::string_view d) {
    std::vector<Step>& steps = *bodies_.back().steps;
    Step s;
    if (d == "end") {
      expect_arity(1, "end");
      bodies_.pop_back();
      if (bodies_.empty()) block_ = Block::kIpu;
      return;
    } else if (d == "compute") {
      if (tokens_.size() < 2) expect_arity(2, "compute <compute set> [pass=<pass>]");
      s.kind = StepKind::kCompute;
      s.index = lookup(state_.compute_sets, state_.exchanges, tokens_[1], "compute set", "exchange",
                       "exchange");
      s.provenance.pass = step_pass("compute step");
    } else if (d == "exchange") {
      if (tokens_.size() < 2) expect_arity(2, "exchange <exchange> [pass=<pass>]");
      s.kind = StepKind::kExchange;
      s.index = lookup(state_.exchanges, state_.compute_sets, tokens_[1], "exchange", "compute set",
                       "compute");
      s.provenance.pass = step_pass("exchange step");
    } else if (d == "sync") {
      s.kind = StepKind::kSync;
      if (tokens_.size() > 1) {
        require_v2("sync group=");
        Field fields[] = {{"group", "tile|replica|all|replicas[:K]", true, {}}};
        collect(1, fields, "sync");
        s.group = parse_group(*fields[0].value);
      }
    } else if (d == "global_exchange") {
      require_v2("global_exchange");
      expect_arity(2, "global_exchange <name>");
      s.kind = StepKind::kGlobalExchange;
      s.index = lookup(global_exchanges_, {}, tokens_[1], "global exchange", "", "");
    } else if (d == "collective") {
      require_v2("collective");
      constexpr std::string_view kUsage =
          "collective all_reduce|reduce_scatter|all_gather|broadcast bytes=<count> "
          "[dtype=<dtype>] [group=<group>] [method=<method>]";
      if (tokens_.size() < 2) fail(fmt::format("expected '{}', found 'collective'", kUsage));
      s.kind = StepKind::kCollective;
      s.collective =
          static_cast<CollectiveOp>(parse_enum(tokens_[1], kCollectiveOpNames, "collective"));
      Field fields[] = {{"bytes", "<count>", true, {}},
                        {"dtype", "<dtype>", false, {}},
                        {"group", "replica|all|replicas[:K]", false, {}},
                        {"method", "<method>", false, {}},
                        {"layer", "<name>[,<name>...]", false, {}},
                        {"pass", "<pass>", false, {}},
                        {"op", "<op>", false, {}}};
      collect(2, fields, "collective");
      s.provenance = parse_provenance(fields[4].value, fields[5].value, fields[6].value);
      s.bytes = parse_count(*fields[0].value, "bytes", 0);
      if (fields[1].value) s.dtype = parse_dtype(*fields[1].value, "the collective");
      s.group = fields[2].value ? parse_group(*fields[2].value) : Group{GroupKind::kReplicas, 0};
      if (s.group.kind == GroupKind::kTile)
        fail("expected a group of IPUs for a collective (replica, all or replicas), found tile");
      if (fields[3].value)
        s.method = static_cast<CollectiveMethod>(
            parse_enum(*fields[3].value, kCollectiveMethodNames, "collective method"));
    } else if (d == "host") {
      if (tokens_.size() < 2)
        fail("expected 'host to_ipu|from_ipu tiles=<range> bytes=<count>', found 'host'");
      auto dirs = to_strings(kHostDirectionNames);
      auto it = std::find(dirs.begin(), dirs.end(), tokens_[1]);
      if (it == dirs.end())
        fail(fmt::format("expected a host direction, found '{}'{}", tokens_[1],
                         suggest(tokens_[1], dirs)));
      Field fields[] = {{"tiles", "<range>", true, {}},
                        {"bytes", "<count>", true, {}},
                        {"memory", "host|streaming", false, {}},
                        {"overlap", "yes|no", false, {}},
                        {"layer", "<name>[,<name>...]", false, {}},
                        {"pass", "<pass>", false, {}},
                        {"op", "<op>", false, {}}};
      collect(2, fields, "host step");
      s.provenance = parse_provenance(fields[4].value, fields[5].value, fields[6].value);
      s.kind = StepKind::kHost;
      s.direction = static_cast<HostDirection>(it - dirs.begin());
      s.tiles = parse_range(*fields[0].value, "tiles");
      s.bytes = parse_count(*fields[1].value, "bytes", 0);
      if (fields[2].value) {
        require_v2("host memory=");
        s.memory =
            static_cast<HostMemory>(parse_enum(*fields[2].value, kHostMemoryNames, "memory"));
      }
      if (fields[3].value) {
        require_v2("host overlap=");
        static constexpr std::array<std::string_view, 2> kYesNo{"no", "yes"};
        s.overlap = parse_enum(*fields[3].value, kYesNo, "overlap value") == 1;
      }
    } else if (d == "repeat") {
      expect_arity(2, "repeat <count>");
      // bodies_ holds the program body plus one entry per open repeat.
      if (bodies_.size() > kMaxRepeatDepth)
        fail(fmt::format("expected repeats nested at most {} deep, found a deeper one",
                         kMaxRepeatDepth));
      auto n = parse_integer<std::uint64_t>(tokens_[1]);
      if (!n || *n < 1 || *n > static_cast<std::uint64_t>(kMaxCount))
        fail(fmt::format("expected a repeat count 1..{}, found '{}'", kMaxCount, tokens_[1]));
      s.kind = StepKind::kRepeat;
      s.count = *n;
      steps.push_back(std::move(s));
      // The new body is only appended to until its `end`, so the pointer stays valid.
      bodies_.push_back(OpenBody{&steps.back().body, line_no_});
      return;
    } else {
      bad_directive(
          d,
          {"compute", "sync", "exchange", "host", "repeat", "global_exchange", "collective", "end"},
          "in a 'program' block");
    }
    steps.push_back(std::move(s));
  }

  // Each lifetime ends within its IPU's program, which may follow the tensor in the file.
  void check_lifetimes() {
    for (const auto& [ipu_index, tensor, line] : lifetimes_) {
      const IpuProgram& p = trace_.ipus[ipu_index];
      const std::uint64_t positions = program_positions(p.steps);
      const Lifetime& l = *p.tensors[tensor].live;
      if (l.last >= positions) {
        line_no_ = line;
        fail(
            fmt::format("tensor '{}' is live at positions {}..{}, but the program of ipu {} has "
                        "{} position(s){}",
                        p.tensors[tensor].name, l.first, l.last, p.ipu, positions,
                        positions == 0 ? "" : fmt::format(" (0..{})", positions - 1)));
      }
    }
  }

  void finish() {
    if (!header_seen_)
      fail(fmt::format("expected the header 'ipusim-trace {}', found end of file", kFormatVersion));
    switch (block_) {
      case Block::kTop:
        fail("expected at least one 'ipu <index>' section, found end of file");
      case Block::kIpu:
        break;
      case Block::kComputeSet:
        fail(
            fmt::format("expected 'end' for computeset '{}' opened at line {}, found end of "
                        "file",
                        ipu().compute_sets.back().name, block_line_));
      case Block::kExchange:
        fail(fmt::format("expected 'end' for exchange '{}' opened at line {}, found end of file",
                         ipu().exchanges.back().name, block_line_));
      case Block::kProgram:
        fail(fmt::format("expected 'end' for the {} opened at line {}, found end of file",
                         bodies_.size() > 1 ? "repeat" : "program", bodies_.back().line));
      case Block::kGlobalExchange:
        fail(
            fmt::format("expected 'end' for global_exchange '{}' opened at line {}, found end "
                        "of file",
                        trace_.global_exchanges.back().name, block_line_));
    }
  }

  std::istream& in_;
  const std::string& origin_;
  std::size_t line_no_ = 0;
  Tokens tokens_;
  Trace trace_;
  bool header_seen_ = false;
  std::size_t name_line_ = 0;
  std::size_t replicas_line_ = 0;
  std::uint32_t file_version_ = kFormatVersion;
  struct LifetimeAt {
    std::size_t ipu = 0, tensor = 0, line = 0;
  };
  std::vector<LifetimeAt> lifetimes_;
  NameTable global_exchanges_;
  std::map<std::uint32_t, std::size_t> ipu_lines_;
  Block block_ = Block::kTop;
  std::size_t block_line_ = 0;
  IpuState state_;
  std::vector<OpenBody> bodies_;
  std::vector<TileRange> dst_scratch_;
};

// --- writer ----------------------------------------------------------------------------------

// Formats into a memory buffer and hands it to the stream in large blocks.
class TextWriter {
 public:
  explicit TextWriter(std::ostream& out) : out_(out) {}

  template <typename... Args>
  void put(fmt::format_string<Args...> f, Args&&... args) {
    fmt::format_to(std::back_inserter(buf_), f, std::forward<Args>(args)...);
    if (buf_.size() >= kBlock) flush();
  }
  void range(TileRange r) {
    if (r.first == r.last)
      put("{}", r.first);
    else
      put("{}..{}", r.first, r.last);
  }
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }
  // Provenance fields (v3), each only when set, in the order layer pass op.
  void provenance(const Provenance& p) {
    for (std::size_t i = 0; i < p.layers.size(); ++i) put("{}{}", i ? "," : " layer=", p.layers[i]);
    if (p.pass != Pass::kNone) put(" pass={}", kPassNames[static_cast<std::size_t>(p.pass)]);
    if (p.op != OpKind::kNone) put(" op={}", kOpKindNames[static_cast<std::size_t>(p.op)]);
  }
  void group(Group g) { put("{}", group_name(g)); }
  const Trace* trace_ = nullptr;

  void steps(const IpuProgram& ipu, const std::vector<Step>& steps, std::size_t depth) {
    for (const Step& s : steps) {
      put("{:{}}", "", 2 * depth);
      switch (s.kind) {
        case StepKind::kCompute:
          put("compute {}", ipu.compute_sets[s.index].name);
          provenance(s.provenance);  // v4: the step's own pass, if any
          put("\n");
          break;
        case StepKind::kSync:
          if (s.group.kind == GroupKind::kTile) {
            put("sync\n");
          } else {
            put("sync group=");
            group(s.group);
            put("\n");
          }
          break;
        case StepKind::kGlobalExchange:
          put("global_exchange {}\n", trace_->global_exchanges[s.index].name);
          break;
        case StepKind::kCollective:
          put("collective {} bytes={} dtype={} group=",
              kCollectiveOpNames[static_cast<std::size_t>(s.collective)], s.bytes,
              kDTypeNames[static_cast<std::size_t>(s.dtype)]);
          group(s.group);
          put(" method={}", kCollectiveMethodNames[static_cast<std::size_t>(s.method)]);
          provenance(s.provenance);
          put("\n");
          break;
        case StepKind::kExchange:
          put("exchange {}", ipu.exchanges[s.index].name);
          provenance(s.provenance);  // v4: the step's own pass, if any
          put("\n");
          break;
        case StepKind::kHost:
          put("host {} tiles=", kHostDirectionNames[static_cast<std::size_t>(s.direction)]);
          range(s.tiles);
          put(" bytes={} memory={} overlap={}", s.bytes,
              kHostMemoryNames[static_cast<std::size_t>(s.memory)], s.overlap ? "yes" : "no");
          provenance(s.provenance);
          put("\n");
          break;
        case StepKind::kRepeat:
          put("repeat {}\n", s.count);
          this->steps(ipu, s.body, depth + 1);
          put("{:{}}end\n", "", 2 * depth);
          break;
      }
    }
  }

  void vertex(const Vertex& v) {
    const CodeletSpec& spec = codelet_spec(v.codelet);
    put("  vertex tiles=");
    range(v.tiles);
    if (v.count > 1) put(" count={} step={}", v.count, v.step);
    put(" {}", spec.name);
    for (std::size_t i = 0; i < spec.params.size(); ++i) {
      const ParamSpec& p = spec.params[i];
      const auto value = v.params[i];
      if (p.late && value == p.default_value) continue;
      switch (p.kind) {
        case ParamKind::kDType:
          put(" {}={}", p.name, kDTypeNames[static_cast<std::size_t>(value)]);
          break;
        case ParamKind::kOp:
          put(" {}={}", p.name, kOpNames[static_cast<std::size_t>(value)]);
          break;
        case ParamKind::kInt:
          put(" {}={}", p.name, value);
          break;
      }
    }
    put("\n");
  }

 private:
  static constexpr std::size_t kBlock = 64 * 1024;
  std::ostream& out_;
  fmt::memory_buffer buf_;
};

}  // namespace

Trace read_text(std::istream& in, const std::string& origin, std::string* identity) {
  Trace trace = TextReader(in, origin).read();
  // Text has many spellings of one trace; its identity is that of the binary form.
  if (identity) *identity = trace::identity(trace);
  return trace;
}

void write_text(const Trace& trace, std::ostream& out, Checked checked) {
  if (checked == Checked::kNo)
    check_structure(
        trace, trace.name.empty() ? std::string("trace") : fmt::format("trace '{}'", trace.name));
  TextWriter w(out);
  w.trace_ = &trace;
  w.put("ipusim-trace {}\n", kFormatVersion);
  if (!trace.name.empty()) w.put("name {}\n", trace.name);
  w.put("replicas {}\n", trace.replicas);
  for (const auto& [key, value] : trace.meta) w.put("meta {} {}\n", key, value);
  for (const GlobalExchange& g : trace.global_exchanges) {
    w.put("global_exchange {}", g.name);
    w.provenance(g.provenance);
    w.put("\n");
    for (const IpuCopy& c : g.copies)
      w.put("  copy src={} dst={} bytes={}\n", c.src, c.dst, c.bytes);
    w.put("end\n");
  }
  for (const IpuProgram& ipu : trace.ipus) {
    w.put("ipu {}\n", ipu.ipu);
    for (const Tensor& t : ipu.tensors) {
      w.put("tensor {} kind={} dtype={} tiles=", t.name,
            kTensorKindNames[static_cast<std::size_t>(t.kind)],
            kDTypeNames[static_cast<std::size_t>(t.dtype)]);
      w.range(t.tiles);
      w.put(" bytes={}", t.bytes_per_tile);
      if (t.live) {
        w.put(" live=");
        if (t.live->first == t.live->last)
          w.put("{}", t.live->first);
        else
          w.put("{}..{}", t.live->first, t.live->last);
      }
      w.put("\n");
    }
    for (const ComputeSet& cs : ipu.compute_sets) {
      w.put("computeset {}", cs.name);
      w.provenance(cs.provenance);
      w.put("\n");
      for (const Vertex& v : cs.vertices) w.vertex(v);
      w.put("end\n");
    }
    for (const Exchange& ex : ipu.exchanges) {
      w.put("exchange {}", ex.name);
      w.provenance(ex.provenance);
      w.put("\n");
      for (const Transfer& t : ex.transfers) {
        w.put("  transfer src=");
        w.range(t.src);
        w.put(" dst=");
        bool first = true;
        for (const TileRange& r : ex.destinations(t)) {
          if (!first) w.put(",");
          first = false;
          w.range(r);
        }
        w.put(" bytes={} mode={}", t.bytes, kTransferModeNames[static_cast<std::size_t>(t.mode)]);
        if (t.count > 1)
          w.put(" count={} src_step={} dst_step={} bytes_step={}", t.count, t.src_step, t.dst_step,
                t.bytes_step);
        w.put("\n");
      }
      for (const Move& m : ex.moves) {
        w.put("  move positions={} channels={} element_bytes={}", m.positions, m.channels,
              m.element_bytes);
        for (const auto& [key, g] : {std::pair{"from", &m.from}, std::pair{"to", &m.to}})
          w.put(" {}={}/{}/{}x{}{}", key, g->first_tile, g->tile_stride, g->positions_per_tile,
                g->chans_per_tile, g->channels_outer ? "/channels_outer" : "");
        w.put("\n");
      }
      for (const ReduceScatter& r : ex.reduce_scatters) {
        w.put(
            "  reduce_scatter members={} member_step={} fan_in={} stride={} element_bytes={} "
            "groups=",
            r.members, r.member_step, r.fan_in, r.stride, r.element_bytes);
        for (std::size_t i = 0; i < r.groups.size(); ++i) {
          const ReduceScatter::Groups& g = r.groups[i];
          w.put("{}{}", i == 0 ? "" : ",", g.first);
          if (g.count != 1 || g.step != 0) w.put("/{}/{}", g.step, g.count);
          w.put(":{}", g.elements);
        }
        w.put("\n");
      }
      w.put("end\n");
    }
    w.put("program\n");
    w.steps(ipu, ipu.steps, 1);
    w.put("end\n");
  }
  w.flush();
}

}  // namespace ipusim::trace
