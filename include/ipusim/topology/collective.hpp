// SPDX-License-Identifier: Apache-2.0
// Collective algorithms: the extension point for how GCL-style collectives move data over the
// links (docs/topology.md "Collectives"). Each algorithm is a CollectiveAlgorithm in a file of
// its own (src/topology/collective_<name>.cpp) and a line of the registry
// (collective_algorithms() in src/topology/collective.cpp); it is named in traces by its
// trace::CollectiveMethod. `auto`, as GCL's, broadcasts small collectives and otherwise tries
// every ring-based algorithm on a copy of the link state and runs the fastest. All-reduces,
// reduce-scatters and all-gathers over several racks are composed hierarchically from the
// chosen algorithm (reduce-scatter in each rack, ring all-reduce of the shards between racks,
// all-gather in each rack; a reduce-scatter or all-gather does its half) unless the algorithm
// opts out.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ipusim/topology/link_schedule.hpp"

namespace ipusim::topology {

// One ring pass: members in ring order, each sending `chunk` bytes to its successor (or
// predecessor when reversed) at every step.
struct RingPass {
  std::vector<std::uint32_t> order;
  bool reverse = false;
  std::uint64_t chunk = 0;
};

class CollectiveAlgorithm;

// What an algorithm runs on: the links (shared with everything else in flight), the chip
// that reduces received data, and the steps every algorithm is made of. Times are tile clock
// cycles; every function takes the cycle its work is ready and returns the cycle it ends.
class CollectiveContext {
 public:
  // `domain_sync`: cycles of the external sync each step after the first starts with when
  // every sync spans a whole domain; none: each step syncs just the IPUs it involves (the
  // first step's sync is the group step's own, paid before `ready`).
  CollectiveContext(LinkSchedule& links, const ChipSpec& chip, trace::DType dtype,
                    std::optional<std::uint64_t> domain_sync);

  LinkSchedule& links() { return links_; }
  const ChipSpec& chip() const { return chip_; }
  trace::DType dtype() const { return dtype_; }
  // Every step of a collective is a BSP superstep over the links (syncful GCL): its
  // inter-IPU exchange follows an external sync of the domain, or of `members` (the IPUs the
  // step involves) when replicas sync independently. The first step's sync is the one the
  // group step started with. Returns the cycle the step's flows may start.
  std::uint64_t begin_step(std::uint64_t t, std::span<const std::uint32_t> members);
  // On-chip reduction of `inputs` vectors of `bytes` each (reduce_cycles for this dtype).
  std::uint64_t reduce(std::uint64_t bytes, std::uint64_t inputs) const;

  // `steps` ring steps of every pass at once; with `reduce`, each step ends with an on-chip
  // reduction of the received chunk. Each step starts with begin_step.
  // `groups` are the member sets whose rings the passes lay out (what each step syncs).
  std::uint64_t ring_steps(const std::vector<RingPass>& passes,
                           std::span<const std::vector<std::uint32_t>> groups, std::size_t steps,
                           bool reduce, std::uint64_t t);
  // Reduce-scatter (`reduce`) or all-gather of `bytes` per member within each of `groups`,
  // over the rings `algorithm` lays out (RingAlgorithm::passes), all groups at once.
  std::uint64_t ring_phase(const std::vector<std::vector<std::uint32_t>>& groups,
                           const CollectiveAlgorithm& algorithm, std::uint64_t bytes, bool reduce,
                           std::uint64_t t);
  // One step: every member sends `bytes` to every other member at once.
  std::uint64_t direct(const std::vector<std::uint32_t>& members, std::uint64_t bytes,
                       std::uint64_t t);

 private:
  LinkSchedule& links_;
  const ChipSpec& chip_;
  trace::DType dtype_;
  // The sync a step of `members` starts with: the domain's, or the members' own.
  std::uint64_t group_sync(std::span<const std::uint32_t> members) const;
  // begin_step with the step's sync already known (`sync` cycles unless it is the first).
  std::uint64_t begin_step_with(std::uint64_t t, std::uint64_t sync);

  std::optional<std::uint64_t> domain_sync_;
  bool started_ = false;  // a step has begun
};

class CollectiveAlgorithm {
 public:
  virtual ~CollectiveAlgorithm() = default;
  // The name traces and run directories use for it.
  virtual trace::CollectiveMethod method() const = 0;
  // `op` over `members` (system IPUs in replica order, at least 2) on `bytes` per member.
  virtual std::uint64_t run(CollectiveContext& c, trace::CollectiveOp op,
                            const std::vector<std::uint32_t>& members, std::uint64_t bytes,
                            std::uint64_t t) const = 0;
  // The ring passes one reduce-scatter or all-gather step of `members` uses (a ring in the
  // topology's order is `ring`); empty for algorithms that are not ring-based, which then
  // cannot be composed hierarchically over racks.
  virtual std::vector<RingPass> passes(const std::vector<std::uint32_t>& members,
                                       const std::vector<std::uint32_t>& ring,
                                       std::uint64_t bytes) const {
    (void)members;
    (void)ring;
    (void)bytes;
    return {};
  }
};

// Ring-based algorithms: run() is the ring reduce-scatter and/or all-gather over passes().
class RingAlgorithm : public CollectiveAlgorithm {
 public:
  std::uint64_t run(CollectiveContext& c, trace::CollectiveOp op,
                    const std::vector<std::uint32_t>& members, std::uint64_t bytes,
                    std::uint64_t t) const override;
};

// The registered algorithms, in the order `auto` tries them (a tie keeps the first).
const std::vector<const CollectiveAlgorithm*>& collective_algorithms();
// The registered algorithm for `method` (not kAuto); throws ModelError if there is none.
const CollectiveAlgorithm& collective_algorithm(trace::CollectiveMethod method);

// One instance of each algorithm, defined in its own file (the registry lists them).
const CollectiveAlgorithm& ring_algorithm();
const CollectiveAlgorithm& bidirectional_ring_algorithm();
const CollectiveAlgorithm& quad_ring_algorithm();
const CollectiveAlgorithm& broadcast_reduce_algorithm();

}  // namespace ipusim::topology
