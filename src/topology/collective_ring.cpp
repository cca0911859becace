// SPDX-License-Identifier: Apache-2.0
// Ring: GCL's clockwise ring (up one ladder rail, down the other: Topology::ring), the whole
// tensor in k chunks, k - 1 steps per reduce-scatter or all-gather.
#include "ipusim/topology/collective.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::topology {
namespace {

class Ring final : public RingAlgorithm {
 public:
  trace::CollectiveMethod method() const override { return trace::CollectiveMethod::kRing; }
  std::vector<RingPass> passes(const std::vector<std::uint32_t>& members,
                               const std::vector<std::uint32_t>& ring,
                               std::uint64_t bytes) const override {
    return {{ring, false, ceil_div(bytes, members.size())}};
  }
};

}  // namespace

const CollectiveAlgorithm& ring_algorithm() {
  static const Ring instance;
  return instance;
}

}  // namespace ipusim::topology
