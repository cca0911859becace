// SPDX-License-Identifier: Apache-2.0
// Cost models: one vertex of each codelet, a whole compute set and exchanges of the 2048^3
// matmul on 1,472 tiles, a large all-to-all exchange, and the per-tile memory map. These are
// what the fast engine evaluates once per distinct phase and the reference engine on every
// tile for every execution.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "bench_common.hpp"
#include "ipusim/cost/codelet_models.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/trace/trace_io.hpp"

namespace ipusim::bench {
namespace {

void BM_VertexCost(benchmark::State& state) {
  const auto& cs = matmul_2048().ipus[0].compute_sets;
  // One vertex of each compute set of the matmul (AMP conv, reduce).
  std::vector<trace::Vertex> vertices;
  for (const auto& c : cs) vertices.push_back(c.vertices.front());
  for (auto _ : state)
    for (const auto& v : vertices) benchmark::DoNotOptimize(cost::vertex_cost(gc200(), v));
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(vertices.size()));
}
BENCHMARK(BM_VertexCost);

void BM_CodeletModels(benchmark::State& state) {
  const ChipSpec& chip = gc200();
  cost::AmpConvArgs amp;
  amp.positions = 196;
  amp.in_chans = 64;
  amp.out_chans = 64;
  cost::AmpConvArgs nx1 = amp;
  nx1.kernel_h = nx1.kernel_w = 3;
  for (auto _ : state) {
    benchmark::DoNotOptimize(cost::amp_conv1x1(chip, amp));
    benchmark::DoNotOptimize(cost::amp_convnx1(chip, nx1));
    benchmark::DoNotOptimize(cost::dot(chip, trace::DType::kHalf, trace::DType::kFloat, 256, 16));
    benchmark::DoNotOptimize(
        cost::reduce(chip, trace::Op::kAdd, trace::DType::kFloat, trace::DType::kHalf, 512, 8));
    benchmark::DoNotOptimize(cost::unary(chip, trace::Op::kGelu, trace::DType::kHalf, 4096));
    benchmark::DoNotOptimize(cost::binary(chip, trace::Op::kAdd, trace::DType::kHalf, 4096));
    benchmark::DoNotOptimize(cost::scaled_add(chip, trace::DType::kHalf, 4096));
    benchmark::DoNotOptimize(cost::cast(chip, trace::DType::kFloat, trace::DType::kHalf, 4096));
    benchmark::DoNotOptimize(cost::copy(chip, 8192));
    benchmark::DoNotOptimize(cost::dynamic_slice(chip, trace::DType::kHalf, 1024, 4));
  }
  state.SetItemsProcessed(state.iterations() * 10);
}
BENCHMARK(BM_CodeletModels);

void BM_ComputeSetCost(benchmark::State& state) {
  const auto& cs = matmul_2048().ipus[0].compute_sets.front();
  for (auto _ : state) benchmark::DoNotOptimize(cost::compute_set_cost(gc200(), cs));
  state.counters["vertices"] = static_cast<double>(cs.vertices.size());
}
BENCHMARK(BM_ComputeSetCost)->Unit(benchmark::kMicrosecond);

void BM_ExchangeCostMatmulFetch(benchmark::State& state) {
  const auto& ex = matmul_2048().ipus[0].exchanges.front();
  for (auto _ : state) benchmark::DoNotOptimize(cost::exchange_cost(gc200(), ex));
  state.counters["transfers"] = static_cast<double>(ex.transfer_count());
}
BENCHMARK(BM_ExchangeCostMatmulFetch)->Unit(benchmark::kMicrosecond);

// Every tile sends a distinct block to every other: the largest exchange a trace can express
// in one transfer (1,472 x 1,471 tile pairs).
void BM_ExchangeCostAllToAll(benchmark::State& state) {
  const trace::Trace t = kernels::exchange_all_to_all(gc200(), 64, gc200().tiles);
  const auto& ex = t.ipus[0].exchanges.front();
  for (auto _ : state) benchmark::DoNotOptimize(cost::exchange_cost(gc200(), ex));
}
BENCHMARK(BM_ExchangeCostAllToAll)->Unit(benchmark::kMicrosecond);

// One source multicasting to every tile, 1,472 times over (a broadcast from every tile): the
// multicast path is O(sources x destinations).
void BM_ExchangeCostManyBroadcasts(benchmark::State& state) {
  trace::Exchange ex;
  ex.name = "bcast";
  const std::uint32_t n = static_cast<std::uint32_t>(state.range(0));
  const trace::TileRange all{0, gc200().tiles - 1};
  for (std::uint32_t s = 0; s < n; ++s) ex.add({s, s}, std::span(&all, 1), 256);
  for (auto _ : state) benchmark::DoNotOptimize(cost::exchange_cost(gc200(), ex));
  state.counters["transfers"] = n;
}
BENCHMARK(BM_ExchangeCostManyBroadcasts)->Arg(16)->Arg(256)->Unit(benchmark::kMicrosecond);

void BM_MemoryMap(benchmark::State& state) {
  const auto& program = matmul_2048().ipus[0];
  for (auto _ : state) benchmark::DoNotOptimize(cost::memory_map(gc200(), program));
}
BENCHMARK(BM_MemoryMap)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ipusim::bench

// The same over a whole compiled program: set IPUSIM_BENCH_TRACE to a trace file (e.g. from
// `ipusim compile`); every exchange, every compute set and the memory map of its first IPU.
namespace ipusim::bench {
namespace {

const trace::IpuProgram* program_from_env(benchmark::State& state) {
  static const trace::Trace* loaded = [] {
    const char* path = std::getenv("IPUSIM_BENCH_TRACE");
    return path ? new trace::Trace(trace::read_file(path)) : nullptr;
  }();
  if (!loaded) state.SkipWithError("set IPUSIM_BENCH_TRACE to a trace file");
  return loaded ? &loaded->ipus.front() : nullptr;
}

void BM_ProgramExchangeCosts(benchmark::State& state) {
  const auto* program = program_from_env(state);
  if (!program) return;
  std::size_t transfers = 0;
  for (const auto& ex : program->exchanges) transfers += ex.transfer_count();
  for (auto _ : state)
    for (const auto& ex : program->exchanges)
      benchmark::DoNotOptimize(cost::exchange_cost(gc200(), ex));
  state.counters["transfers"] = static_cast<double>(transfers);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(transfers));
}
BENCHMARK(BM_ProgramExchangeCosts)->Unit(benchmark::kMillisecond);

void BM_ProgramComputeSetCosts(benchmark::State& state) {
  const auto* program = program_from_env(state);
  if (!program) return;
  for (auto _ : state)
    for (const auto& cs : program->compute_sets)
      benchmark::DoNotOptimize(cost::compute_set_cost(gc200(), cs));
  state.counters["compute_sets"] = static_cast<double>(program->compute_sets.size());
}
BENCHMARK(BM_ProgramComputeSetCosts)->Unit(benchmark::kMillisecond);

void BM_ProgramMemoryMap(benchmark::State& state) {
  const auto* program = program_from_env(state);
  if (!program) return;
  for (auto _ : state) benchmark::DoNotOptimize(cost::memory_map(gc200(), *program));
}
BENCHMARK(BM_ProgramMemoryMap)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ipusim::bench
