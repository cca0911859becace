// SPDX-License-Identifier: Apache-2.0
// Bidirectional ring pair: the GCL ring used both ways at once, half of the tensor each way.
#include "ipusim/topology/collective.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::topology {
namespace {

class BidirectionalRing final : public RingAlgorithm {
 public:
  trace::CollectiveMethod method() const override {
    return trace::CollectiveMethod::kBidirectionalRing;
  }
  std::vector<RingPass> passes(const std::vector<std::uint32_t>& members,
                               const std::vector<std::uint32_t>& ring,
                               std::uint64_t bytes) const override {
    const std::uint64_t chunk = ceil_div(bytes, 2 * members.size());
    return {{ring, false, chunk}, {ring, true, chunk}};
  }
};

}  // namespace

const CollectiveAlgorithm& bidirectional_ring_algorithm() {
  static const BidirectionalRing instance;
  return instance;
}

}  // namespace ipusim::topology
