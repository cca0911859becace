// SPDX-License-Identifier: Apache-2.0
// The system side: building a POD's link graph, routing every IPU pair, and a 100 MiB
// all-reduce over all IPUs of a POD64 and a POD256 on a fresh link schedule (what the Fabric
// runs for a gradient all-reduce), with `auto` (all methods tried) and with the ring alone.
#include <benchmark/benchmark.h>

#include <numeric>

#include "bench_common.hpp"
#include "ipusim/topology/link_schedule.hpp"
#include "ipusim/topology/topology.hpp"

namespace ipusim::bench {
namespace {

void BM_TopologyBuildPod256(benchmark::State& state) {
  const SystemSpec& sys = pod("pod256");
  for (auto _ : state) benchmark::DoNotOptimize(topology::Topology(sys));
}
BENCHMARK(BM_TopologyBuildPod256)->Unit(benchmark::kMillisecond);

void BM_RouteAllPairsPod256(benchmark::State& state) {
  const SystemSpec& sys = pod("pod256");
  for (auto _ : state) {
    topology::Topology topo(sys);  // routes are computed on demand (nothing cached)
    std::size_t hops = 0;
    for (std::uint32_t a = 0; a < topo.ipus(); ++a)
      for (std::uint32_t b = 0; b < topo.ipus(); ++b) hops += topo.route(a, b).size();
    benchmark::DoNotOptimize(hops);
  }
}
BENCHMARK(BM_RouteAllPairsPod256)->Unit(benchmark::kMillisecond);

void all_reduce(benchmark::State& state, const std::string& system,
                trace::CollectiveMethod method) {
  const SystemSpec& sys = pod(system);
  topology::Topology topo(sys);
  std::vector<std::uint32_t> members(topo.ipus());
  std::iota(members.begin(), members.end(), 0u);
  {  // a first collective, as in a run (routes are not cached; this warms the allocator)
    topology::LinkSchedule warm(topo);
    topology::run_collective(warm, sys.chip, trace::CollectiveOp::kAllReduce, method, members,
                             100ull << 20, trace::DType::kHalf, 0, topo.sync_cycles(members));
  }
  for (auto _ : state) {
    topology::LinkSchedule links(topo);
    benchmark::DoNotOptimize(
        topology::run_collective(links, sys.chip, trace::CollectiveOp::kAllReduce, method, members,
                                 100ull << 20, trace::DType::kHalf, 0, topo.sync_cycles(members)));
  }
}

void BM_AllReduce100MiBPod64Auto(benchmark::State& state) {
  all_reduce(state, "pod64", trace::CollectiveMethod::kAuto);
}
BENCHMARK(BM_AllReduce100MiBPod64Auto)->Unit(benchmark::kMillisecond);

void BM_AllReduce100MiBPod256Auto(benchmark::State& state) {
  all_reduce(state, "pod256", trace::CollectiveMethod::kAuto);
}
BENCHMARK(BM_AllReduce100MiBPod256Auto)->Unit(benchmark::kMillisecond);

void BM_AllReduce100MiBPod256Ring(benchmark::State& state) {
  all_reduce(state, "pod256", trace::CollectiveMethod::kRing);
}
BENCHMARK(BM_AllReduce100MiBPod256Ring)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ipusim::bench
