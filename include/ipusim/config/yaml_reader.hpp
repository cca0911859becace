// SPDX-License-Identifier: Apache-2.0
// Strict reading of yaml-cpp nodes for ipusim's own YAML files (regression manifests, sweep
// specs): every message starts with "<file>:<line>:<column>" and says what was expected and
// what was found. Include only from .cpp files that link yaml-cpp.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ipusim/util/error.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::config {

class YamlReader {
 public:
  explicit YamlReader(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }

  // Parses `text`, the contents of file(); a syntax error becomes
  // "<file>:<line>:<column>: invalid YAML: ...".
  YAML::Node load(const std::string& text) const {
    try {
      return YAML::Load(text);
    } catch (const YAML::Exception& e) {
      const std::string where = e.mark.line < 0 ? file_
                                                : fmt::format("{}:{}:{}", file_, e.mark.line + 1,
                                                              e.mark.column + 1);
      throw ConfigError(fmt::format("{}: invalid YAML: {}", where, e.msg));
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
    return fmt::format("\"{}\"", node.Scalar());
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
};

}  // namespace ipusim::config
