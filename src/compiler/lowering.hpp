// SPDX-License-Identifier: Apache-2.0
// The lowering behind compiler::compile (docs/workloads.md): a replica's IPU programs, built
// with IpuBuilder from the model's tensor graph and its forward stages (stage_lowering.cpp),
// and what the graph lowering shares with it.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/compiler/layout.hpp"

namespace ipusim::compiler {

// One replica's step of any model; appends its planned convs and matmuls to `plans` when
// given (compile()).
trace::Trace compile_replica(const ModelDef& m, const RunConfig& run, const SystemSpec& system,
                             std::vector<PlannedConv>* plans);

// The chip the model is planned on: the system's chip less the run's I/O tiles, which are the
// highest-numbered tiles (ConfigError when they leave no compute tile).
ChipSpec compute_chip(const RunConfig& run, const ChipSpec& chip);

// Refuses a program whose machines' Streaming Memory (machine.gateway.streaming_memory) cannot
// hold what their IPUs keep there: `per_program[i]` bytes for program i of every replica
// (IpuBuilder::streaming_memory). A PCIe card has none to check: its transfers use host memory.
void check_streaming_memory(const RunConfig& run, const SystemSpec& system,
                            const std::vector<std::uint64_t>& per_program);

class IpuBuilder;
struct Layout;
// One micro-batch's input stream, `bytes` in all, arriving on `layout` (its 8-bit values) on a
// chip of `all_tiles` tiles. With no I/O tiles: the next micro-batch is prefetched from the
// host into Streaming Memory in the background (a background host step, bounded by the host
// link and NIC shares), and this one is copied inline onto the compute tiles (a blocking
// Streaming Memory step, TensorFlow's StreamCopyMid). With I/O tiles: it lands on them in the
// background and is copied to `layout` by an on-chip exchange.
void stream_input(IpuBuilder& b, std::vector<trace::Step>& out, const RunConfig& run, Layout layout,
                  std::uint64_t bytes, std::uint32_t all_tiles);

// A value in flight: its layout and the elementwise ops not yet applied to it (fused into
// one compute set when the value is next consumed by something that is not elementwise), with
// the layers those ops come from, in order.
struct Value {
  Layout layout;
  std::vector<trace::Op> pending;
  std::vector<std::string> pending_layers;
  // Equal parts on `layout`, each applied every op (a serialised matmul's output slices).
  std::uint32_t slices = 1;
};
// Queues `ops` on `v` as the work of the layers in `b`'s current scope.
void pend(const IpuBuilder& b, Value& v, std::initializer_list<trace::Op> ops);
// Applies `v`'s pending ops (one fused compute set per slice) as the work of the layers they
// come from, whichever layer's scope applies them; none are pending after.
void flush(IpuBuilder& b, std::vector<trace::Step>& out, Value& v);

// The norms below over rows whose channels are split over several IPUs (2-D tensor
// parallelism): appends what shares each row's statistics with the others (an all-reduce of
// them) between their reduction and their broadcast. Empty: the rows are whole.
using ShareStatistics = std::function<void(std::vector<trace::Step>&)>;

// Layer norm over each row's channels (a transformer's tokens): `x`'s pending ops applied, its
// statistics reduced among the tiles holding each row, then (x - mean) inv_std gamma + beta
// left pending on `x`, fused with what follows.
void layer_norm(IpuBuilder& b, std::vector<trace::Step>& out, Value& x,
                const ShareStatistics& share = {});
// Its backward on the gradient `g`'s layout: the kept input (on `x`) brought there and whitened
// again per row, x_hat = (x - mean) inv_std (popnn's norm gradients whiten their input; two
// elementwise ops, poplar-compiler.md §2.3), times g; statistics of g and g x_hat per row, gamma
// and beta gradients per channel; `g` becomes the input gradient, pending (reading x_hat).
void layer_norm_gradient(IpuBuilder& b, std::vector<trace::Step>& out, Value& g, const Layout& x,
                         const ShareStatistics& share = {});

// RMS norm over each row's channels (Llama): the mean square of each row (one statistic,
// popops' SQUARE_ADD) reduced among the tiles holding it, then x inv_rms gamma left pending.
void rms_norm(IpuBuilder& b, std::vector<trace::Step>& out, Value& x,
              const ShareStatistics& share = {});
// Its backward on `g`'s layout: x brought there, g gamma x and its mean per row, the gamma
// gradient per channel; `g` becomes the input gradient, pending.
void rms_norm_gradient(IpuBuilder& b, std::vector<trace::Step>& out, Value& g, const Layout& x,
                       const ShareStatistics& share = {});

inline double available_memory_for(const RunConfig& run, std::size_t ipu) {
  return run.available_memory.size() == 1 ? run.available_memory[0] : run.available_memory[ipu];
}

}  // namespace ipusim::compiler
