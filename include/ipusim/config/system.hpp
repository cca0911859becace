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

// The schema a system or part document is checked against: system_schema(), or, for a PCIe
// card (machine.host_attach: pcie), the same without the machine.gateway.* and
// machine.host_link.* keys, which such a document must not give (ConfigError at the key).
const config::Schema& system_part_schema(const config::Document& doc);

struct LoadedSystem {
  SystemSpec spec;
  config::Resolved resolved;
  // --set keys this system does not use (GW-Links on one rack, IPU-Links on one IPU), one
  // message each: the commands print them as warnings (`run` also in stats.json; --strict
  // makes them errors).
  std::vector<std::string> warnings;
};

// Loads configs/systems/<file> with its included parts, applies "--set" overrides (any key of
// system_schema()), validates the whole and builds the spec. `chip_file`, when given, replaces
// the chip the system includes. Throws ConfigError on any problem, naming file:line and key.
LoadedSystem load_system(const std::string& file, const std::vector<std::string>& overrides = {},
                         const std::optional<std::string>& chip_file = std::nullopt);

}  // namespace ipusim
