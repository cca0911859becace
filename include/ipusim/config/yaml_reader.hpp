// SPDX-License-Identifier: Apache-2.0
// Strict reading of yaml-cpp nodes for ipusim's own YAML files (regression manifests, sweep
// specs): every message starts with "<file>:<line>:<column>" and says what was expected and
// what was found. Include only from .cpp files that link yaml-cpp.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ipusim/util/error.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::config {

// Most nodes a YAML document may have with its aliases expanded. yaml-cpp shares an aliased
// node rather than copying it, so a 1 KB file of nested aliases ("billion laughs") parses
// quickly but expands to 10^9 nodes when converted; every reader walks the expanded tree. Real
// files have a few thousand nodes (issue 16, defect E).
inline constexpr std::size_t kMaxExpandedYamlNodes = 100000;

// What a yaml-cpp exception says, for "<where>: invalid YAML: <problem>". Its depth guard
// says only "bad file"; that is a document nested too deeply.
inline std::string yaml_problem(const YAML::Exception& e) {
  if (const auto* deep = dynamic_cast<const YAML::DeepRecursion*>(&e))
    return fmt::format("nested too deeply (the parser stops at a depth of {})", deep->depth());
  return e.msg;
}

// A YAML event handler that ignores every event; a reader overrides the ones it wants.
class IgnoringEventHandler : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

namespace detail {
// Counts the aliases (*name) of a YAML text's first document, to say why it is too large.
class AliasCounter : public IgnoringEventHandler {
 public:
  std::size_t aliases = 0;
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { ++aliases; }
};

inline std::size_t count_aliases(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  AliasCounter counter;
  parser.HandleNextDocument(counter);
  return counter.aliases;
}

// Throws the "too many nodes" error at `node`. `text` (the document) is read again for its
// aliases only here, on the way out: a file of nested aliases and a plainly huge file are
// different mistakes.
[[noreturn]] inline void too_many_nodes(const YAML::Node& node,
                                        const std::vector<std::string>& path,
                                        const std::string& file, const std::string& text,
                                        std::size_t max_nodes) {
  const YAML::Mark m = node.Mark();
  const std::string where =
      m.line < 0 ? file : fmt::format("{}:{}:{}", file, m.line + 1, m.column + 1);
  const std::string key =
      path.empty() ? std::string("(top)") : printable(fmt::format("{}", fmt::join(path, ".")));
  if (count_aliases(text) == 0)
    throw ConfigError(fmt::format(
        "{}: {}: expected at most {} YAML nodes, found more (the file has no aliases: it is "
        "that large)",
        where, key, max_nodes));
  throw ConfigError(
      fmt::format("{}: {}: expected at most {} YAML nodes with aliases expanded, found more "
                  "(aliases that refer to aliases multiply)",
                  where, key, max_nodes));
}

inline void count_expanded(const YAML::Node& node, std::vector<std::string>& path,
                           std::size_t& count, const std::string& file, const std::string& text,
                           std::size_t max_nodes) {
  if (++count > max_nodes) too_many_nodes(node, path, file, text, max_nodes);
  if (path.size() > 256) return;  // deeper nesting is refused by the readers themselves
  if (node.IsMap()) {
    for (const auto& kv : node) {
      path.push_back(kv.first.IsScalar() ? kv.first.Scalar() : std::string("?"));
      count_expanded(kv.first, path, count, file, text, max_nodes);
      count_expanded(kv.second, path, count, file, text, max_nodes);
      path.pop_back();
    }
  } else if (node.IsSequence()) {
    std::size_t i = 0;
    for (const auto& item : node) {
      path.push_back(fmt::format("[{}]", i++));
      count_expanded(item, path, count, file, text, max_nodes);
      path.pop_back();
    }
  }
}
}  // namespace detail

// Throws ConfigError naming the file, the position and the key path where a document's
// alias-expanded size passes `max_nodes`. Costs at most that many node visits. `text` is the
// document `root` was parsed from.
inline void check_expanded_size(const YAML::Node& root, const std::string& file,
                                const std::string& text,
                                std::size_t max_nodes = kMaxExpandedYamlNodes) {
  std::vector<std::string> path;
  std::size_t count = 0;
  detail::count_expanded(root, path, count, file, text, max_nodes);
}

class YamlReader {
 public:
  // `max_nodes` bounds the alias-expanded document (a generated document, e.g. an imported
  // ONNX model's, may take more than a hand-written file).
  explicit YamlReader(std::string file, std::size_t max_nodes = kMaxExpandedYamlNodes)
      : file_(std::move(file)), max_nodes_(max_nodes) {}

  const std::string& file() const { return file_; }

  // Parses `text`, the contents of file(); a syntax error becomes
  // "<file>:<line>:<column>: invalid YAML: ...".
  YAML::Node load(const std::string& text) const {
    try {
      YAML::Node root = YAML::Load(text);
      check_expanded_size(root, file_, text, max_nodes_);
      return root;
    } catch (const YAML::Exception& e) {
      const std::string where =
          e.mark.line < 0 ? file_
                          : fmt::format("{}:{}:{}", file_, e.mark.line + 1, e.mark.column + 1);
      throw ConfigError(fmt::format("{}: invalid YAML: {}", where, yaml_problem(e)));
    }
  }

  // "<file>:<line>:<column>" of a node, or the file alone when the node has no position.
  std::string loc(const YAML::Node& node) const {
    const YAML::Mark m = node.Mark();
    if (m.line < 0) return file_;
    return fmt::format("{}:{}:{}", file_, m.line + 1, m.column + 1);
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& what) const {
    throw ConfigError(fmt::format("{}: {}", loc(node), what));
  }

  // What a node is, for "found ..." in messages.
  static std::string kind_of(const YAML::Node& node) {
    if (!node.IsDefined() || node.IsNull()) return "nothing";
    if (node.IsMap()) return "a map";
    if (node.IsSequence()) return "a list";
    return fmt::format("\"{}\"", printable(node.Scalar()));
  }

  std::string scalar(const YAML::Node& node, const std::string& key,
                     const std::string& expected) const {
    if (!node.IsScalar())
      fail(node, fmt::format("{}: expected {}, found {}", key, expected, kind_of(node)));
    return node.Scalar();
  }

  // Calls f(key, key_node, value_node) for each member of a map, rejecting non-scalar and
  // duplicate keys and keys not in `known` (when `known` is not empty).
  template <class F>
  void each_member(const YAML::Node& map, const std::string& what,
                   const std::vector<std::string>& known, F&& f) const {
    if (!map.IsMap()) fail(map, fmt::format("{}: expected a map, found {}", what, kind_of(map)));
    std::set<std::string> seen;
    for (const auto& kv : map) {
      if (!kv.first.IsScalar())
        fail(kv.first, fmt::format("{}: expected a plain key, found {}", what, kind_of(kv.first)));
      const std::string key = kv.first.Scalar();
      if (has_control_characters(key))
        fail(kv.first, fmt::format("{}: expected a key of printable characters, found '{}'", what,
                                   printable(key)));
      if (!known.empty() && std::find(known.begin(), known.end(), key) == known.end())
        fail(kv.first, fmt::format("{}: expected one of the keys {}, found unknown key '{}'{}",
                                   what, fmt::join(known, ", "), key, did_you_mean(key, known)));
      if (!seen.insert(key).second)
        fail(kv.first, fmt::format("{}: duplicate key '{}'", what, key));
      f(key, kv.first, kv.second);
    }
  }

  // A scalar or a list of scalars, as a list.
  std::vector<std::string> string_list(const YAML::Node& node, const std::string& key,
                                       const std::string& expected) const {
    std::vector<std::string> out;
    if (node.IsScalar()) {
      out.push_back(node.Scalar());
      return out;
    }
    if (!node.IsSequence())
      fail(node, fmt::format("{}: expected a list of {}, found {}", key, expected, kind_of(node)));
    for (const auto& item : node) out.push_back(scalar(item, key, expected));
    return out;
  }

 private:
  std::string file_;
  std::size_t max_nodes_;
};

}  // namespace ipusim::config
