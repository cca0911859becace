// SPDX-License-Identifier: Apache-2.0
// The check of a name the compiler writes into a trace, shared by the model and run loaders.
#pragma once

#include <fmt/format.h>

#include <string>

#include "ipusim/trace/program.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::compiler {

// A name the trace will carry (a model, layer or run name) must be a trace name
// (trace::is_valid_name): checked where it is written, not when a trace holding it is read.
inline void check_trace_name(const std::string& where_in_file, const std::string& key,
                             const std::string& name) {
  if (!trace::is_valid_name(name))
    throw ConfigError(
        fmt::format("{}: {}: expected a name of 1..{} characters from [A-Za-z0-9_.:/-] (it goes "
                    "into the trace), found \"{}\"",
                    where_in_file, key, trace::kMaxNameLength, name));
}

}  // namespace ipusim::compiler
