// SPDX-License-Identifier: Apache-2.0
// Broadcast-reduce: every member sends its data (or its 1/n share) straight to every other
// member at once and reduces what it receives; a broadcast is the root sending to all. Not
// ring-based, so an all-reduce over several racks runs flat.
#include "ipusim/topology/collective.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::topology {
namespace {

class BroadcastReduce final : public CollectiveAlgorithm {
 public:
  trace::CollectiveMethod method() const override {
    return trace::CollectiveMethod::kBroadcastReduce;
  }
  std::uint64_t run(CollectiveContext& c, trace::CollectiveOp op,
                    const std::vector<std::uint32_t>& members, std::uint64_t bytes,
                    std::uint64_t t) const override {
    const std::uint64_t n = members.size();
    switch (op) {
      case trace::CollectiveOp::kAllReduce:
        return c.direct(members, bytes, t) + c.reduce(bytes, n);
      case trace::CollectiveOp::kReduceScatter:
        return c.direct(members, ceil_div(bytes, n), t) + c.reduce(ceil_div(bytes, n), n);
      case trace::CollectiveOp::kAllGather:
        return c.direct(members, ceil_div(bytes, n), t);
      case trace::CollectiveOp::kBroadcast: {
        std::vector<Flow> flows;
        for (std::size_t i = 1; i < n; ++i) flows.push_back({members[0], members[i], bytes});
        return c.links().run(flows, c.begin_step(t, members));
      }
    }
    return t;
  }
};

}  // namespace

const CollectiveAlgorithm& broadcast_reduce_algorithm() {
  static const BroadcastReduce instance;
  return instance;
}

}  // namespace ipusim::topology
