// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

#include "ipusim/config/chip_spec.hpp"
#include "ipusim/config/config.hpp"

namespace ipusim {

// The schema of configs/chips/*.yaml: every chip parameter, declared once.
const config::Schema& chip_schema();

struct LoadedChip {
  ChipSpec spec;
  config::Resolved resolved;
};

// Loads a chip config, applies "--set" overrides (keys under "chip."), validates and builds
// the spec. Throws ConfigError on any problem.
LoadedChip load_chip(const std::string& file, const std::vector<std::string>& overrides = {});
ChipSpec chip_from(const config::Resolved& resolved);

// Directory holding configs/ and models/: $IPUSIM_DATA_DIR if set, else the source tree the
// binary was built from.
std::string data_dir();
std::string default_chip_file();

}  // namespace ipusim
