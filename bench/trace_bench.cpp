// SPDX-License-Identifier: Apache-2.0
// Trace I/O: binary and text write and read of the 2048^3 matmul trace in memory, the
// structure check every reader runs, and the identity hash `ipusim run --out` writes.
#include <benchmark/benchmark.h>

#include <sstream>

#include "bench_common.hpp"
#include "ipusim/trace/trace_io.hpp"

namespace ipusim::bench {
namespace {

std::string serialised(bool binary) {
  std::ostringstream out;
  if (binary)
    trace::write_binary(matmul_2048(), out);
  else
    trace::write_text(matmul_2048(), out);
  return out.str();
}

void BM_TraceWriteBinary(benchmark::State& state) {
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::ostringstream out;
    trace::write_binary(matmul_2048(), out);
    bytes = out.str().size();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_TraceWriteBinary)->Unit(benchmark::kMillisecond);

void BM_TraceReadBinary(benchmark::State& state) {
  const std::string data = serialised(true);
  for (auto _ : state) {
    std::istringstream in(data);
    benchmark::DoNotOptimize(trace::read_binary(in, "bench.itb", data.size()));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(data.size()));
}
BENCHMARK(BM_TraceReadBinary)->Unit(benchmark::kMillisecond);

void BM_TraceWriteText(benchmark::State& state) {
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::ostringstream out;
    trace::write_text(matmul_2048(), out);
    bytes = out.str().size();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_TraceWriteText)->Unit(benchmark::kMillisecond);

void BM_TraceReadText(benchmark::State& state) {
  const std::string data = serialised(false);
  for (auto _ : state) {
    std::istringstream in(data);
    benchmark::DoNotOptimize(trace::read_text(in, "bench.trace"));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(data.size()));
}
BENCHMARK(BM_TraceReadText)->Unit(benchmark::kMillisecond);

void BM_TraceCheckStructure(benchmark::State& state) {
  for (auto _ : state) trace::check_structure(matmul_2048(), "bench");
}
BENCHMARK(BM_TraceCheckStructure)->Unit(benchmark::kMillisecond);

void BM_TraceIdentity(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(trace::identity(matmul_2048()));
}
BENCHMARK(BM_TraceIdentity)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ipusim::bench
