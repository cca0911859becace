// SPDX-License-Identifier: Apache-2.0
// Quad-directional ring: a second ring in plain IPU order beside the GCL ring, each used both
// ways, a quarter of the tensor on each of the four passes.
#include <algorithm>

#include "ipusim/topology/collective.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::topology {
namespace {

class QuadRing final : public RingAlgorithm {
 public:
  trace::CollectiveMethod method() const override { return trace::CollectiveMethod::kQuadRing; }
  std::vector<RingPass> passes(const std::vector<std::uint32_t>& members,
                               const std::vector<std::uint32_t>& ring,
                               std::uint64_t bytes) const override {
    const std::uint64_t chunk = ceil_div(bytes, 4 * members.size());
    auto plain = members;
    std::sort(plain.begin(), plain.end());
    std::vector<RingPass> out;
    for (const auto& order : {ring, plain}) {
      out.push_back({order, false, chunk});
      out.push_back({order, true, chunk});
    }
    return out;
  }
};

}  // namespace

const CollectiveAlgorithm& quad_ring_algorithm() {
  static const QuadRing instance;
  return instance;
}

}  // namespace ipusim::topology
