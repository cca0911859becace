// SPDX-License-Identifier: Apache-2.0
#include "ipusim/util/hash.hpp"

#include <fmt/format.h>

namespace ipusim {

std::string Fnv1a64::hex() const { return fmt::format("{:016x}", state_); }

}  // namespace ipusim
