// SPDX-License-Identifier: Apache-2.0
// The IPU-Fabric of a system as a SystemC module: it owns the link graph and the link
// schedule, and runs every group operation — external syncs, global exchanges (inter-IPU
// copies) and collectives — as a barrier: each taking part IPU's thread calls in and blocks;
// when the last expected member arrives, the operation is timed from that moment over the
// shared links and every member is released at its end.
//
// One program per replica: Poplar compiles a replica's IPUs into one program, and every
// external sync of it involves every IPU of the replica (Poplar SyncType::EXTERNAL: "all the
// other tiles in all IPUs in the device"). So the group steps of a replica run one at a time,
// whichever of its IPUs they belong to: a collective of IPU 3's weights waits until IPU 5's
// has ended, and its syncs span every IPU of the replicas involved (docs/topology.md
// "Sync domain"). Unless the trace says each IPU is its own Poplar replica (meta
// engine.single_ipu_replicas: tensor parallelism as the PopXL examples run it).
//
// Replica symmetry: when only replica 0 is simulated, a group's expected members are the
// simulated ones, but collectives still move every member's data over the links (other
// replicas are assumed to arrive at the same time, which holds for symmetric programs).
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <systemc>
#include <vector>

#include "ipusim/config/system_spec.hpp"
#include "ipusim/model/fast_forward.hpp"
#include "ipusim/stats/run_stats.hpp"
#include "ipusim/topology/link_schedule.hpp"
#include "ipusim/topology/topology.hpp"
#include "ipusim/trace/program.hpp"

namespace ipusim::model {

// Where a simulated IPU sits: program i of replica r runs on system IPU r x P + i.
struct Placement {
  std::uint32_t system_ipu = 0;
  std::uint32_t program = 0;
  std::uint32_t replica = 0;
};

// When a group operation began and ended for the calling IPU (cycles).
struct GroupTiming {
  std::uint64_t barrier = 0;  // last member's arrival
  std::uint64_t synced = 0;   // after the external sync
  std::uint64_t end = 0;      // operation done (x times)
};

// Charges a group step begun at `start` and timed `t` (`times` executions), as both engines
// do: waiting for the other members (from `start` to the last arrival), the external sync,
// then the collective or inter-IPU copy, to `phases` and `counts` and to its kind's row of
// `by_kind`.
void charge_group_step(const trace::Step& step, std::uint64_t start, const GroupTiming& t,
                       std::uint64_t times, PhaseCycles& phases, PhaseCounts& counts,
                       GroupStepCycles& by_kind);

// A simulated IPU as a party of the Fabric's fast-forward cuts (fast_forward.hpp): the
// releases of group steps that every simulated IPU takes part in. Called while it waits there.
class LoopParty {
 public:
  // Its state at a cut at `time` (counters left empty); false if it runs no loop iteration by
  // iteration.
  virtual bool cut_state(std::uint64_t time, CutState& out) const = 0;
  virtual void cut_counters(std::vector<std::uint64_t>& out) const = 0;
  // To apply when its group step returns, which the Fabric releases `periods` x `cycles`
  // later: `periods` x `counters` more statistics, `periods` x `iterations` more iterations of
  // its innermost loop and `periods` x `cycles` more time.
  virtual void skip(std::uint64_t periods, std::uint64_t cycles,
                    std::vector<std::uint64_t> counters, std::uint64_t iterations) = 0;

 protected:
  ~LoopParty() = default;
};

class Fabric : public sc_core::sc_module {
 public:
  Fabric(sc_core::sc_module_name name, const SystemSpec& system, const trace::Trace& trace,
         bool simulate_all_replicas);

  // Blocks the calling IPU thread until the group step is done for every member. `now` is the
  // caller's exact cycle count; `times` > 1 when a memoised loop runs the step several times.
  // `party` (null: none) takes part in fast-forward; when every simulated IPU does and a cut
  // proves a steady state, the step is released whole periods later and each party told
  // (LoopParty::skip).
  GroupTiming group_step(const Placement& who, const trace::Step& step, std::uint64_t now,
                         std::uint64_t times, LoopParty* party = nullptr);

  // Host or Streaming Memory transfer of one IPU through its machine's gateway, in cycles.
  std::uint64_t host_cycles(const trace::Step& step) const;
  // Sets host_streamers_ and machine_host_streamers_ from the trace's programs.
  void count_host_streamers(const trace::Trace& trace);

  const topology::Topology& topology() const { return topology_; }
  std::uint32_t replicas_simulated() const { return simulated_replicas_; }
  std::uint32_t ipus_simulated() const { return simulated_ipus_; }
  // Operations still waiting for members (a mismatched or missing step), for diagnostics.
  std::vector<std::string> stuck() const;
  std::vector<LinkUse> link_use() const;

 private:
  struct Pending {
    std::string what;  // description, to check that members agree
    std::uint32_t expected = 0;
    std::uint32_t arrived = 0;
    std::uint64_t barrier = 0;
    std::uint64_t times = 0;
    GroupTiming timing;
    std::vector<std::uint32_t> waiting;
    std::vector<LoopParty*> parties;  // as `waiting`
    std::unique_ptr<sc_core::sc_event> done;
  };

  // All system IPUs of a group as seen from `who`, and a key naming that group instance.
  std::vector<std::uint32_t> members(const Placement& who, trace::Group group,
                                     std::uint64_t& instance) const;
  std::uint32_t simulated_count(const std::vector<std::uint32_t>& members) const;
  std::string describe(const trace::Step& step) const;
  // The replicas a group's members belong to, ascending.
  std::vector<std::uint32_t> replicas_of(const std::vector<std::uint32_t>& group) const;
  // Cycles of the external sync of a group step of `group` (system IPUs), whose members
  // belong to `replicas`, and of each later step of a collective in every one of its phases:
  // every IPU of the run, or (replicas syncing independently) every IPU of those replicas, or
  // of the group itself when each IPU is its own Poplar replica.
  std::uint64_t domain_sync(const std::vector<std::uint32_t>& replicas,
                            const std::vector<std::uint32_t>& group) const;
  GroupTiming run(const Placement& who, const trace::Step& step,
                  const std::vector<std::uint32_t>& group, std::uint64_t barrier,
                  std::uint64_t times);
  // A cut at the release of `p`, a step of every simulated IPU (fast_forward.hpp): the cycles
  // by which a proved steady state moves its release (0: none), after moving the Fabric's
  // own state and statistics on by as many periods.
  std::uint64_t fast_forward(const Pending& p);
  void cut_state(std::uint64_t time, const Pending& p, CutState& out) const;
  void cut_counters(std::vector<std::uint64_t>& out) const;

  const SystemSpec& system_;
  const trace::Trace& trace_;
  topology::Topology topology_;
  topology::LinkSchedule links_;
  std::uint32_t programs_;
  // Host-memory transfers (host input and output) share the host servers' NICs among the IPUs
  // of every replica that make them, and a machine's host link among its IPUs that make them;
  // Streaming Memory transfers share a machine's DDR among its IPUs that make them (a
  // pipeline's first stage alone reads the input: PopART puts an input's stream copy on the IPU
  // of the op that reads it). At least 1 each.
  std::uint32_t host_streamers_ = 1, machine_host_streamers_ = 1, machine_ddr_streamers_ = 1;
  std::vector<bool> has_program_;  // by program index
  std::uint32_t simulated_replicas_;
  sc_core::sc_time period_;
  // Poplar's engine option target.syncReplicasIndependently (trace meta
  // engine.sync_replicas_independently, default false): when false every external sync
  // spans all the IPUs the trace uses, whatever the group, and takes `all_ipus_sync_` cycles.
  bool sync_replicas_independently_ = false;
  std::uint64_t all_ipus_sync_ = 0;
  // Trace meta engine.single_ipu_replicas (default false): each IPU is its own Poplar replica
  // running the same program (the PopXL examples' tensor parallelism: replication factor = data
  // parallel x tensor parallel, tensor-parallel groups as replica groupings), so a replica's
  // group steps are not run one at a time and an independent sync spans the group's IPUs.
  bool single_ipu_replicas_ = false;
  // By replica: the cycle its last group step ended. A replica's group steps run one at a
  // time (one program per replica, above).
  std::vector<std::uint64_t> replica_free_;
  // (group instance, sequence number) -> operation waiting for members
  std::map<std::pair<std::uint64_t, std::uint64_t>, Pending> pending_;
  // (system IPU, group instance) -> group steps it has started
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> sequence_;
  // No flow scheduled so far occupies any link at or after this cycle (every channel a flow
  // uses is free again by the time the flow arrives).
  std::uint64_t links_idle_at_ = 0;
  // The method `auto` chose for a collective that started on idle links.
  struct AutoKey {
    trace::CollectiveOp op;
    trace::DType dtype;
    std::uint64_t bytes;
    std::vector<std::uint32_t> members;
    auto operator<=>(const AutoKey&) const = default;
  };
  std::map<AutoKey, trace::CollectiveMethod> auto_choice_;
  // Collectives that started on idle links: how long each took and what it did to the links,
  // relative to its start (LinkSchedule::Effect), by what it is, the method asked for and the
  // sync cycles of its later steps. The same collective on idle links again takes as long and
  // does the same (the link timing depends only on differences of cycles): replayed, exact.
  struct IdleKey {
    AutoKey what;
    trace::CollectiveMethod method;
    std::uint64_t domain;
    auto operator<=>(const IdleKey&) const = default;
  };
  struct IdleRun {
    std::uint64_t cycles = 0;
    topology::LinkSchedule::Effect links;
  };
  std::map<IdleKey, IdleRun> idle_runs_;
  std::uint32_t simulated_ipus_ = 0;  // IPU modules: simulated replicas x programs
  // The steady-state searches, one per nesting (the parties' loops, summed): an outer loop's
  // iterations are compared at its own group steps while an inner loop's are compared within
  // each of them.
  std::map<std::size_t, SteadyState> steady_;
  // Two operations started in the same cycle since the last cut (their order, which SystemC
  // picks, could matter), and when the last one started.
  bool tie_ = false;
  std::optional<std::uint64_t> last_start_;
};

}  // namespace ipusim::model
