// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
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
  // --set keys this chip's timing does not read (unused_chip_key), one message each, printed
  // as warnings as LoadedSystem::warnings are.
  std::vector<std::string> warnings;
};

// Why chip key `key` has no effect on `chip` ("" when it may have): the instruction-level
// tile model's keys under the closed-form model, and a result latency the barrel hides.
std::string unused_chip_key(const ChipSpec& chip, const std::string& key);
// "--set KEY has no effect: why" for each override whose key `why` (key -> reason, "" when
// used) explains; overrides that do not parse are skipped (they were refused when applied).
std::vector<std::string> overrides_without_effect(
    const std::vector<std::string>& overrides,
    const std::function<std::string(const std::string&)>& why);

// Loads a chip config, applies "--set" overrides (keys under "chip."), validates and builds
// the spec. Throws ConfigError on any problem.
LoadedChip load_chip(const std::string& file, const std::vector<std::string>& overrides = {});
ChipSpec chip_from(const config::Resolved& resolved);

// Directory holding configs/ and models/: $IPUSIM_DATA_DIR if set, else the source tree the
// binary was built from.
std::string data_dir();
std::string default_chip_file();

}  // namespace ipusim
