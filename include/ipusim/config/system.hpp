// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ipusim/config/config.hpp"
#include "ipusim/config/system_spec.hpp"

namespace ipusim {

// The schema of a system: chip.*, machine.*, fabric.* and system.* keys.
const config::Schema& system_schema();

struct LoadedSystem {
  SystemSpec spec;
  config::Resolved resolved;
};

// Loads configs/systems/<file> with its included parts, applies "--set" overrides (any key of
// system_schema()), validates the whole and builds the spec. `chip_file`, when given, replaces
// the chip the system includes. Throws ConfigError on any problem, naming file:line and key.
LoadedSystem load_system(const std::string& file, const std::vector<std::string>& overrides = {},
                         const std::optional<std::string>& chip_file = std::nullopt);

}  // namespace ipusim
