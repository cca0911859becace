// SPDX-License-Identifier: Apache-2.0
#include "ipusim/config/config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "ipusim/config/yaml_reader.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::config {
namespace {

constexpr std::size_t kMaxDepth = 16;

std::string location(const std::string& origin, const YAML::Mark& mark) {
  if (mark.line < 0) return origin;
  return fmt::format("{}:{}:{}", origin, mark.line + 1, mark.column + 1);
}

void flatten(const YAML::Node& node, const std::string& prefix, const std::string& origin,
             Document& doc, std::size_t depth, const std::string& key_origin) {
  if (depth > kMaxDepth)
    throw ConfigError(fmt::format("{}: {}: nesting deeper than {} levels",
                                  location(origin, node.Mark()), prefix, kMaxDepth));
  if (node.IsMap()) {
    for (const auto& kv : node) {
      if (!kv.first.IsScalar())
        throw ConfigError(fmt::format("{}: expected a plain key, found a {}",
                                      location(origin, kv.first.Mark()),
                                      kv.first.IsMap() ? "map" : "sequence"));
      const std::string key = kv.first.Scalar();
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      // No valid key has a control character; say so with it escaped, so that a NUL cannot
      // cut the message off (issue 16, defect N).
      if (has_control_characters(key))
        throw ConfigError(
            fmt::format("{}: {}: expected a key of printable characters, found "
                        "a control character",
                        location(origin, kv.first.Mark()), printable(path)));
      if (doc.values.count(path))
        throw ConfigError(
            fmt::format("{}: {}: duplicate key", location(origin, kv.first.Mark()), path));
      flatten(kv.second, path, origin, doc, depth + 1, location(origin, kv.first.Mark()));
    }
    return;
  }
  if (node.IsScalar()) {
    doc.values[prefix] = RawValue{node.Scalar(), location(origin, node.Mark()), key_origin};
    return;
  }
  if (node.IsNull())
    throw ConfigError(fmt::format("{}: {}: expected a value, found nothing",
                                  location(origin, node.Mark()), prefix));
  throw ConfigError(fmt::format("{}: {}: expected a value or a map, found a sequence",
                                location(origin, node.Mark()), prefix));
}

// Records where the first document it is given starts.
class DocumentStart : public IgnoringEventHandler {
 public:
  std::optional<YAML::Mark> mark;
  void OnDocumentStart(const YAML::Mark& m) override {
    if (!mark) mark = m;
  }
};

// Loading is strict: a second document ("---") is an error, not silently ignored (YAML::Load
// reads only the first). The parser is asked for two documents at most: yaml-cpp 0.7's LoadAll
// can return empty documents forever on malformed input (tests/fuzz/config/crashes).
void reject_second_document(const std::string& yaml_text, const std::string& origin) {
  try {
    std::istringstream in(yaml_text);
    YAML::Parser parser(in);
    DocumentStart first, second;
    if (parser.HandleNextDocument(first) && parser.HandleNextDocument(second) && second.mark)
      throw ConfigError(fmt::format("{}: expected one YAML document, found a second one",
                                    location(origin, *second.mark)));
  } catch (const YAML::Exception& e) {
    throw ConfigError(
        fmt::format("{}: invalid YAML: {}", location(origin, e.mark), config::yaml_problem(e)));
  }
}

double base_value(const Value& v) {
  return std::visit(
      [](const auto& x) -> double {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::uint64_t>)
          return static_cast<double>(x);
        else if constexpr (std::is_same_v<T, Frequency>)
          return x.hz;
        else if constexpr (std::is_same_v<T, Bytes>)
          return static_cast<double>(x.count);
        else if constexpr (std::is_same_v<T, Cycles>)
          return static_cast<double>(x.count);
        else if constexpr (std::is_same_v<T, BytesPerCycle>)
          return x.value;
        else if constexpr (std::is_same_v<T, Bandwidth>)
          return x.bytes_per_second;
        else if constexpr (std::is_same_v<T, Duration>)
          return x.seconds;
        else if constexpr (std::is_same_v<T, double>)
          return x;
        else
          return 0.0;
      },
      v);
}

}  // namespace

std::uint64_t parse_count(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw ParseError(fmt::format("expected a whole number such as \"1472\", found \"{}\"", text));
  if (text.size() > 18)
    throw ParseError(
        fmt::format("expected a whole number such as \"1472\", found \"{}\" (too large)", text));
  return std::stoull(text);
}

double parse_ratio(const std::string& text) {
  // Decimal only (no hex floats, no "inf"), the whole text, as every number ipusim reads.
  double v = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::general);
  if (ec == std::errc::result_out_of_range && end == text.data() + text.size())
    throw ParseError(fmt::format(
        "expected a number such as \"0.85\" of magnitude 2.2e-308 to 1.8e308, found \"{}\"", text));
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
    throw ParseError(fmt::format("expected a number such as \"0.85\", found \"{}\"", text));
  return v;
}

namespace {

Value parse_value(ValueKind kind, const std::string& text) {
  switch (kind) {
    case ValueKind::kCount:
      return parse_count(text);
    case ValueKind::kFrequency:
      return parse_frequency(text);
    case ValueKind::kBytes:
      return parse_bytes(text);
    case ValueKind::kCycles:
      return parse_cycles(text);
    case ValueKind::kBytesPerCycle:
      return parse_bytes_per_cycle(text);
    case ValueKind::kBandwidth:
      return parse_bandwidth(text);
    case ValueKind::kDuration:
      return parse_duration(text);
    case ValueKind::kRatio:
      return parse_ratio(text);
    case ValueKind::kString:
    case ValueKind::kInclude:
      // A name or a path is shown in summaries and reports: a control character in it would
      // reach the terminal raw (an ESC sequence in system.name recoloured the summary).
      if (has_control_characters(text))
        throw ParseError(
            fmt::format("expected text without control characters, found \"{}\"", text));
      return text;
  }
  return text;
}

std::string format_bound(ValueKind kind, double v) {
  switch (kind) {
    case ValueKind::kFrequency:
      return format(Frequency{v});
    case ValueKind::kBytes:
      return format(Bytes{static_cast<std::uint64_t>(v)});
    case ValueKind::kCycles:
      return format(Cycles{static_cast<std::uint64_t>(v)});
    case ValueKind::kBytesPerCycle:
      return format(BytesPerCycle{v});
    case ValueKind::kBandwidth:
      return format(Bandwidth{v});
    case ValueKind::kDuration:
      return format(Duration{v});
    default:
      return fmt::format("{:.12g}", v);
  }
}

}  // namespace

Schema::Schema(std::string root, std::vector<ParamDecl> params)
    : root_(std::move(root)), params_(std::move(params)) {}

const ParamDecl* Schema::find(const std::string& path) const {
  for (const auto& p : params_)
    if (p.path == path) return &p;
  return nullptr;
}

std::optional<std::string> Schema::suggest(const std::string& path) const {
  std::vector<std::string> paths;
  for (const auto& p : params_) paths.push_back(p.path);
  if (auto m = closest_match(path, paths)) return m;
  // A right leaf in the wrong section ("chip.internal_latency" -> "chip.sync.internal_latency").
  const std::string leaf = path.substr(path.rfind('.') + 1);
  for (const auto& p : paths)
    if (p.substr(p.rfind('.') + 1) == leaf) return p;
  return std::nullopt;
}

std::string Schema::unknown_key_hint(const std::string& path) const {
  std::vector<std::string> inside;
  for (const auto& p : params_)
    if (p.path.size() > path.size() + 1 && p.path.compare(0, path.size(), path) == 0 &&
        p.path[path.size()] == '.')
      inside.push_back(p.path);
  auto hint = suggest(path);
  if (!inside.empty()) {
    constexpr std::size_t kShown = 12;
    const std::size_t more = inside.size() > kShown ? inside.size() - kShown : 0;
    inside.resize(inside.size() - more);
    // A section whose name begins a key's beside it (chip.tile, chip.tiles) suggests that key.
    const bool beside =
        hint && hint->starts_with(path) && hint->find('.', path.size()) == std::string::npos;
    return fmt::format(" ({}{} is a section; its keys are {}{})",
                       beside ? fmt::format("did you mean {}? ", *hint) : std::string(), path,
                       fmt::join(inside, ", "),
                       more ? fmt::format(" and {} more", more) : std::string());
  }
  return hint ? fmt::format(" (did you mean {}?)", *hint) : std::string();
}

Document parse_document(const std::string& yaml_text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(
        fmt::format("{}: invalid YAML: {}", location(origin, e.mark), config::yaml_problem(e)));
  }
  Document doc;
  doc.file = origin;
  if (!root.IsMap())
    throw ConfigError(fmt::format("{}: expected a map of settings at the top level", origin));
  reject_second_document(yaml_text, origin);
  check_expanded_size(root, origin, yaml_text);
  flatten(root, "", origin, doc, 0, origin);
  return doc;
}

Document load_document(const std::string& file) {
  // The one input reader: capped at 16 MiB, regular files and FIFOs only, so that a
  // directory, /dev/zero or a huge file gives a clear ConfigError (docs/errors.md).
  std::string text;
  try {
    text = read_input_file(file, kMaxDocumentBytes, "config file");
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
  // A sweep resolves its system, and so reads the same few files, for every point: a file is
  // parsed again only when its text differs from the last time it was read (the text is read
  // every time, so a rewritten file is never served stale). At most 64 files are kept.
  struct Parsed {
    std::string text;
    Document doc;
  };
  static std::mutex mutex;
  static std::map<std::string, Parsed> parsed;
  {
    const std::lock_guard lock(mutex);
    if (const auto it = parsed.find(file); it != parsed.end() && it->second.text == text)
      return it->second.doc;
  }
  Document doc = parse_document(text, file);
  const std::lock_guard lock(mutex);
  if (parsed.size() >= 64) parsed.clear();
  parsed[file] = Parsed{std::move(text), doc};
  return doc;
}

namespace {

Document load_tree(const std::string& file, const Schema& schema, std::vector<std::string>& stack) {
  namespace fs = std::filesystem;
  // The key that detects a cycle. A path the file system refuses (too long, say) keeps its
  // lexical form; load_document() then reports why it cannot be read.
  std::error_code ec;
  std::string canonical = fs::weakly_canonical(fs::path(file), ec).string();
  if (ec) canonical = fs::path(file).lexically_normal().string();
  if (std::find(stack.begin(), stack.end(), canonical) != stack.end()) {
    std::string chain;
    for (const auto& f : stack) chain += f + " -> ";
    throw ConfigError(fmt::format("{}: cyclic include: {}{}", file, chain, canonical));
  }
  if (stack.size() >= kMaxDepth)
    throw ConfigError(fmt::format("{}: includes nested deeper than {} files", file, kMaxDepth));
  Document doc = load_document(file);
  Document merged = doc;
  stack.push_back(canonical);
  for (auto& [path, raw] : doc.values) {
    const ParamDecl* decl = schema.find(path);
    if (!decl || decl->kind != ValueKind::kInclude) continue;
    const std::string target =
        (fs::path(file).parent_path() / raw.text).lexically_normal().string();
    std::error_code exists_ec;
    const bool exists = fs::exists(target, exists_ec);
    if (exists_ec)
      throw ConfigError(fmt::format("{}: {}: included file \"{}\" cannot be read: {}", raw.origin,
                                    path, target, exists_ec.message()));
    if (!exists)
      throw ConfigError(
          fmt::format("{}: {}: included file \"{}\" does not exist", raw.origin, path, target));
    merged.values[path].text = target;
    const Document sub = load_tree(target, schema, stack);
    for (const auto& [sub_path, sub_raw] : sub.values) {
      auto [it, inserted] = merged.values.emplace(sub_path, sub_raw);
      if (!inserted)
        throw ConfigError(fmt::format("{}: {}: already set at {}", sub_raw.key_origin, sub_path,
                                      it->second.key_origin));
    }
  }
  stack.pop_back();
  return merged;
}

}  // namespace

Document load_document_tree(const std::string& file, const Schema& schema) {
  std::vector<std::string> stack;
  return load_tree(file, schema, stack);
}

std::optional<Override> parse_override(std::string_view text) {
  // Spaces and tabs around the key and the value are dropped ("chip.clock = 1.5GHz" as a
  // shell user types it quoted); spaces inside the value are kept, and other control
  // characters stay for the value checks to refuse.
  constexpr std::string_view kBlanks = " \t";
  const auto eq = text.find('=');
  if (eq == std::string_view::npos) return std::nullopt;
  const std::string_view key = trim(text.substr(0, eq), kBlanks);
  if (key.empty()) return std::nullopt;
  return Override{std::string(key), std::string(trim(text.substr(eq + 1), kBlanks))};
}

std::string override_form_error(std::string_view text) {
  return fmt::format("expected KEY=VALUE such as chip.clock=1.85GHz, found \"{}\"", text);
}

void apply_override(Document& doc, const std::string& assignment, const Schema& schema) {
  const auto o = parse_override(assignment);
  if (!o) throw ConfigError("--set: " + override_form_error(assignment));
  const std::string& key = o->key;
  const ParamDecl* decl = schema.find(key);
  if (!decl) {
    throw ConfigError(fmt::format("--set {}: unknown key{}", key, schema.unknown_key_hint(key)));
  }
  if (decl->kind == ValueKind::kInclude)
    throw ConfigError(fmt::format(
        "--set {}: names an included file; choose the file with --chip or --system instead", key));
  doc.values[key] = RawValue{o->value, "--set", "--set"};
}

const Value& Resolved::at(const std::string& path) const {
  auto it = values_.find(path);
  if (it == values_.end()) throw std::logic_error("undeclared config key read: " + path);
  return it->second;
}

Resolved resolve(const Document& doc, const Schema& schema) {
  for (const auto& [path, raw] : doc.values) {
    if (schema.find(path)) continue;
    throw ConfigError(
        fmt::format("{}: {}: unknown key{}", raw.key_origin, path, schema.unknown_key_hint(path)));
  }
  Resolved out;
  for (const auto& decl : schema.params()) {
    auto it = doc.values.find(decl.path);
    RawValue fallback;
    if (it == doc.values.end() && !decl.default_text)
      throw ConfigError(fmt::format("{}: {}: missing required key ({}, {})", doc.file, decl.path,
                                    kind_name(decl.kind), decl.description));
    if (it == doc.values.end())
      fallback = RawValue{*decl.default_text, doc.file + " (default)", doc.file};
    const RawValue& raw = it == doc.values.end() ? fallback : it->second;
    Value v;
    try {
      v = parse_value(decl.kind, raw.text);
    } catch (const ParseError& e) {
      throw ConfigError(fmt::format("{}: {}: {}", raw.origin, decl.path, e.what()));
    }
    if (!decl.choices.empty() &&
        std::find(decl.choices.begin(), decl.choices.end(), raw.text) == decl.choices.end()) {
      std::string list;
      for (const auto& c : decl.choices) list += (list.empty() ? "" : ", ") + c;
      throw ConfigError(fmt::format("{}: {}: expected one of {}, found \"{}\"{}", raw.origin,
                                    decl.path, list, raw.text,
                                    did_you_mean(raw.text, decl.choices)));
    }
    if (decl.kind != ValueKind::kString && decl.kind != ValueKind::kInclude) {
      const double b = base_value(v);
      if (b < decl.min || b > decl.max)
        throw ConfigError(fmt::format("{}: {}: expected {} to {}, found \"{}\"", raw.origin,
                                      decl.path, format_bound(decl.kind, decl.min),
                                      format_bound(decl.kind, decl.max), raw.text));
    }
    out.values_[decl.path] = std::move(v);
  }
  return out;
}

std::string format_value(const Value& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::uint64_t>)
          return std::to_string(x);
        else if constexpr (std::is_same_v<T, double>)
          return fmt::format("{:.12g}", x);
        else if constexpr (std::is_same_v<T, std::string>)
          return x;
        else
          return format(x);
      },
      v);
}

namespace {

// `text` as YAML writes a scalar (quoted where it must be), as yaml-cpp's emitter gives it; each
// distinct text is emitted once per process (a sweep writes the same values for every point).
std::string yaml_scalar(const std::string& text) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::string> emitted;
  const std::lock_guard lock(mutex);
  if (const auto it = emitted.find(text); it != emitted.end()) return it->second;
  YAML::Emitter scalar;
  scalar << text;
  if (emitted.size() >= 4096) emitted.clear();
  return emitted.emplace(text, scalar.c_str()).first->second;
}

}  // namespace

std::string Resolved::to_yaml() const {
  // values_ is sorted by path, so keys sharing a prefix are contiguous: emit each new map
  // level where the path departs from the previous one.
  std::string out;
  std::vector<std::string> previous;
  for (const auto& [path, value] : values_) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (std::size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1)
      parts.push_back(path.substr(start, dot - start));
    parts.push_back(path.substr(start));
    std::size_t common = 0;
    while (common + 1 < parts.size() && common + 1 < previous.size() &&
           parts[common] == previous[common])
      ++common;
    for (std::size_t i = common; i + 1 < parts.size(); ++i)
      out += std::string(2 * i, ' ') + parts[i] + ":\n";
    out += std::string(2 * (parts.size() - 1), ' ') + parts.back() + ": " +
           yaml_scalar(format_value(value)) + "\n";
    previous = std::move(parts);
  }
  return out;
}

std::string kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kCount:
      return "count";
    case ValueKind::kFrequency:
      return "frequency";
    case ValueKind::kBytes:
      return "size";
    case ValueKind::kCycles:
      return "cycles";
    case ValueKind::kBytesPerCycle:
      return "bytes/cycle";
    case ValueKind::kBandwidth:
      return "bandwidth";
    case ValueKind::kDuration:
      return "time";
    case ValueKind::kRatio:
      return "number";
    case ValueKind::kString:
      return "string";
    case ValueKind::kInclude:
      return "file";
  }
  return "?";
}

std::string reference_markdown(const Schema& schema) {
  std::string out = "| key | kind | range | meaning | source |\n|---|---|---|---|---|\n";
  for (const auto& p : schema.params()) {
    std::string range;
    if (!p.choices.empty()) {
      for (const auto& c : p.choices) range += (range.empty() ? "" : ", ") + ("`" + c + "`");
    } else if (p.kind == ValueKind::kString || p.kind == ValueKind::kInclude) {
      range = "-";
    } else {
      range = fmt::format("{} .. {}", format_bound(p.kind, p.min), format_bound(p.kind, p.max));
    }
    if (p.default_text) range += fmt::format(" (default `{}`)", *p.default_text);
    out += fmt::format("| `{}` | {} | {} | {} | {}{} |\n", p.path, kind_name(p.kind), range,
                       p.description, p.source, p.uncertain ? " **(uncertain)**" : "");
  }
  return out;
}

}  // namespace ipusim::config
