// SPDX-License-Identifier: Apache-2.0
// A schema row bound to the member of a spec struct that holds its value. The row's value kind
// follows from the member's type (a count for integers, bytes for Bytes, ...), so a parameter
// is declared by one row naming one member, and assign_fields fills a spec from a resolved
// config with no per-parameter code: a row without a member, or a member of the wrong type,
// does not compile.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ipusim/config/config.hpp"

namespace ipusim::config {

template <class Spec>
struct Field {
  ParamDecl decl;
  // Sets the bound member from the resolved value of decl.path; empty for rows that no member
  // holds (includes, values a spec derives in code).
  std::function<void(Spec&, const Resolved&)> assign;
};

namespace detail {
template <class T>
constexpr ValueKind kind_of() {
  if constexpr (std::is_same_v<T, Frequency>) return ValueKind::kFrequency;
  if constexpr (std::is_same_v<T, Bytes>) return ValueKind::kBytes;
  if constexpr (std::is_same_v<T, Cycles>) return ValueKind::kCycles;
  if constexpr (std::is_same_v<T, BytesPerCycle>) return ValueKind::kBytesPerCycle;
  if constexpr (std::is_same_v<T, Bandwidth>) return ValueKind::kBandwidth;
  if constexpr (std::is_same_v<T, Duration>) return ValueKind::kDuration;
  if constexpr (std::is_same_v<T, double>) return ValueKind::kRatio;
  if constexpr (std::is_same_v<T, std::string>) return ValueKind::kString;
  if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) return ValueKind::kCount;
  static_assert(std::is_same_v<T, Frequency> || std::is_same_v<T, Bytes> ||
                    std::is_same_v<T, Cycles> || std::is_same_v<T, BytesPerCycle> ||
                    std::is_same_v<T, Bandwidth> || std::is_same_v<T, Duration> ||
                    std::is_same_v<T, double> || std::is_same_v<T, std::string> ||
                    (std::is_integral_v<T> && std::is_unsigned_v<T>),
                "a config field must be a unit type, a ratio, a string or an unsigned count");
  return ValueKind::kString;
}
}  // namespace detail

// A row bound to the member `access(spec)` points to, e.g.
//   field<ChipSpec>("chip.tiles", 1, 65536, "Tiles per IPU", "§1 Tiles",
//                   [](ChipSpec& c) { return &c.tiles; })
// [min, max] is in the kind's base unit; a count's max must fit the member.
template <class Spec, class Access>
Field<Spec> field(std::string path, double min, double max, std::string description,
                  std::string source, Access access, bool uncertain = false,
                  std::optional<std::string> default_text = std::nullopt) {
  using Member = std::remove_pointer_t<decltype(access(std::declval<Spec&>()))>;
  constexpr ValueKind kind = detail::kind_of<Member>();
  if constexpr (kind == ValueKind::kCount) {
    if (max > static_cast<double>(std::numeric_limits<Member>::max()))
      throw std::logic_error("config field " + path + ": max does not fit its member");
  }
  Field<Spec> f;
  f.decl = ParamDecl{path,
                     kind,
                     min,
                     max,
                     std::move(description),
                     std::move(source),
                     uncertain,
                     std::move(default_text)};
  f.assign = [path, access](Spec& s, const Resolved& r) {
    const Value& v = r.at(path);
    if constexpr (kind == ValueKind::kCount)
      *access(s) = static_cast<Member>(std::get<std::uint64_t>(v));
    else
      *access(s) = std::get<Member>(v);
  };
  return f;
}

// A string row whose value `convert` turns into the member (an enum, a flag).
template <class Spec, class Convert>
Field<Spec> choice_field(std::string path, std::vector<std::string> choices,
                         std::string description, std::string source, Convert convert,
                         std::optional<std::string> default_text = std::nullopt) {
  Field<Spec> f;
  f.decl = ParamDecl{path,  ValueKind::kString,     0, 0, std::move(description), std::move(source),
                     false, std::move(default_text)};
  f.decl.choices = std::move(choices);
  f.assign = [path, convert](Spec& s, const Resolved& r) { convert(s, r.string(path)); };
  return f;
}

// A choice row whose values name the members of an enum, one table of (name, value) in the
// order the docs list them: the name is read once, here, never compared as text elsewhere.
template <class Spec, class E, std::size_t N, class Access>
Field<Spec> enum_field(std::string path,
                       const std::array<std::pair<std::string_view, E>, N>& values,
                       std::string description, std::string source, Access access,
                       std::optional<std::string> default_text = std::nullopt) {
  std::vector<std::string> names;
  for (const auto& [name, value] : values) names.emplace_back(name);
  return choice_field<Spec>(
      std::move(path), std::move(names), std::move(description), std::move(source),
      [&values, access](Spec& s, const std::string& v) {
        for (const auto& [name, value] : values)
          if (name == v) *access(s) = value;
      },
      std::move(default_text));
}

// The name of `value` in an enum_field's table ("" if none).
template <class E, std::size_t N>
std::string_view enum_name(const std::array<std::pair<std::string_view, E>, N>& values, E value) {
  for (const auto& [name, v] : values)
    if (v == value) return name;
  return {};
}

// A row no member holds (an include, or a value the spec's loader interprets itself).
template <class Spec>
Field<Spec> unbound(ParamDecl decl) {
  return Field<Spec>{std::move(decl), {}};
}

// The rows' declarations, in order (a Schema's parameters).
template <class Spec>
std::vector<ParamDecl> decls_of(const std::vector<Field<Spec>>& fields) {
  std::vector<ParamDecl> out;
  out.reserve(fields.size());
  for (const auto& f : fields) out.push_back(f.decl);
  return out;
}

// Sets every bound member of `spec` from `r`.
template <class Spec>
void assign_fields(const std::vector<Field<Spec>>& fields, const Resolved& r, Spec& spec) {
  for (const auto& f : fields)
    if (f.assign) f.assign(spec, r);
}

}  // namespace ipusim::config
