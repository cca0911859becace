// SPDX-License-Identifier: Apache-2.0
// Worker-pipeline timing engine: the barrel executed turn by turn, with rpt steady states
// detected (the per-context state at the start of a round repeats) and skipped ahead whole
// periods at a time, so a vertex costs O(prologue + period + epilogue) rounds.
#include <algorithm>
#include <cmath>
#include <map>

#include "ipusim/tile/program.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::tile {

Bundle bundle(OpClass main, OpClass aux, bool dep) {
  const OpInfo& m = op_info(main);
  const OpInfo& a = op_info(aux);
  Bundle b;
  b.main = main;
  b.aux = aux;
  b.load_bytes = m.load_bytes + a.load_bytes;
  b.store_bytes = m.store_bytes + a.store_bytes;
  b.pair_load = m.port == Port::kLoadPair || m.port == Port::kLoadPairStore;
  b.dep = dep;
  return b;
}

void WorkerProgram::straight(const Bundle& b, std::uint64_t times) {
  if (times == 0) return;
  if (blocks.empty() || blocks.back().rpt) blocks.push_back(Block{});
  blocks.back().body.insert(blocks.back().body.end(), times, b);
}

void WorkerProgram::rpt(std::vector<Bundle> body, std::uint64_t repeat) {
  if (repeat == 0 || body.empty()) return;
  blocks.push_back(Block{std::move(body), repeat, true, false});
}

void WorkerProgram::loop(std::vector<Bundle> body, std::uint64_t repeat) {
  if (repeat == 0 || body.empty()) return;
  blocks.push_back(Block{std::move(body), repeat, true, true});
}

std::uint64_t WorkerProgram::bundles() const {
  std::uint64_t n = 0;
  for (const Block& b : blocks) n += b.body.size() * (b.rpt ? b.repeat : 1);
  return n;
}

namespace {
SupStep step(SupStep::Kind kind, std::uint64_t count = 1) {
  SupStep s;
  s.kind = kind;
  s.count = count;
  return s;
}
}  // namespace

SupStep simple(std::uint64_t n) { return step(SupStep::Kind::kSimple, n); }
SupStep control(std::uint64_t n) { return step(SupStep::Kind::kControl, n); }
SupStep weight_load(std::uint64_t bytes, std::uint64_t load_bits) {
  SupStep s = step(SupStep::Kind::kWeightLoad);
  s.bytes = bytes;
  s.load_bits = load_bits;
  return s;
}
SupStep run(std::vector<WorkerProgram> workers, std::uint64_t tail_simple,
            std::uint64_t tail_control) {
  SupStep s = step(SupStep::Kind::kRun);
  s.workers = std::move(workers);
  s.tail_simple = tail_simple;
  s.tail_control = tail_control;
  return s;
}
SupStep run_cycles(std::uint64_t cycles) {
  SupStep s = step(SupStep::Kind::kRunCycles);
  s.cycles = cycles;
  return s;
}
SupStep loop(std::uint64_t iterations, SupBlock body) {
  SupStep s = step(SupStep::Kind::kLoop, iterations);
  s.body = std::make_shared<SupBlock>(std::move(body));
  return s;
}

namespace {

using u64 = std::uint64_t;

u64 ceil_bytes(u64 bytes, double rate) {
  if (bytes == 0) return 0;
  if (rate <= 0) throw ModelError("tile model: a memory port rate must be positive");
  return static_cast<u64>(std::ceil(static_cast<double>(bytes) / rate - 1e-9));
}

struct Ctx {
  const WorkerProgram* prog = nullptr;
  std::size_t block = 0;
  u64 iter = 0;
  std::size_t idx = 0;
  bool rpt_pending = false;  // next issue is the rpt bundle that (re)starts this block
  u64 busy = 0;              // further turns held by the last multi-turn bundle
  u64 ready = 0;             // cycle the previous bundle's result is ready
  bool done = false;
  u64 finish = 0;
};

class Barrel {
 public:
  Barrel(const ChipSpec& chip, const std::vector<WorkerProgram>& workers) : chip_(chip) {
    slots_ = std::max<std::size_t>(chip.worker_contexts, 1);
    if (workers.size() > slots_) {
      throw ModelError("tile model: " + std::to_string(workers.size()) + " worker programs for " +
                       std::to_string(slots_) + " contexts");
    }
    ctx_.resize(slots_);
    for (std::size_t i = 0; i < slots_; ++i) {
      Ctx& c = ctx_[i];
      if (i < workers.size()) c.prog = &workers[i];
      enter_block(c);
    }
  }

  RunTiming run(u64 tail) {
    std::map<std::vector<u64>, Snapshot> seen;
    while (true) {
      bool all_done = true;
      for (const Ctx& c : ctx_) all_done = all_done && c.done;
      if (all_done) break;
      skip_held();
      try_skip(seen);
      for (std::size_t s = 0; s < slots_; ++s) turn(ctx_[s]);
    }
    RunTiming t;
    bool first = true;
    for (std::size_t i = 0; i < slots_; ++i) {
      const Ctx& c = ctx_[i];
      if (c.prog == nullptr) continue;
      t.first_exit = first ? c.finish : std::min(t.first_exit, c.finish);
      t.last_exit = first ? c.finish : std::max(t.last_exit, c.finish);
      first = false;
    }
    t.cycles = first ? tail : std::max(t.last_exit, t.first_exit + tail);
    t.bundles = bundles_;
    t.stall_cycles = stalls_;
    return t;
  }

 private:
  struct Snapshot {
    u64 now, bundles, stalls;
    std::vector<u64> iters;
  };

  const ChipSpec& chip_;
  std::size_t slots_ = 0;
  std::vector<Ctx> ctx_;
  u64 now_ = 0;
  u64 bundles_ = 0;
  u64 stalls_ = 0;

  u64 rpt_max() const { return std::max<u64>(chip_.tile.rpt_count_max, 1); }

  // Skips empty blocks; marks the context done at the end of its program.
  void enter_block(Ctx& c) {
    while (c.prog != nullptr && c.block < c.prog->blocks.size()) {
      const Block& b = c.prog->blocks[c.block];
      if (!b.body.empty() && (!b.rpt || b.repeat > 0)) {
        c.iter = 0;
        c.idx = 0;
        c.rpt_pending = b.rpt && !b.software;
        return;
      }
      ++c.block;
    }
    c.done = true;
    c.finish = now_;
  }

  void advance(Ctx& c) {
    const Block& b = c.prog->blocks[c.block];
    if (++c.idx < b.body.size()) return;
    c.idx = 0;
    if (b.rpt && ++c.iter < b.repeat) {
      return;
    }
    ++c.block;
    enter_block(c);
  }

  u64 turns_of(const Bundle& b) const {
    const OpInfo& m = op_info(b.main);
    const OpInfo& a = op_info(b.aux);
    const bool both = m.pipe != Pipe::kNone && a.pipe != Pipe::kNone;
    if (chip_.tile.issue_width < 2 && both) return m.turns + a.turns;
    return std::max(m.turns, a.turns);
  }

  u64 latency_of(const Bundle& b) const {
    const u64 lm = op_info(b.main).latency, la = op_info(b.aux).latency;
    const u64 base = chip_.tile.result_latency;
    return std::max(lm == 0 ? base : lm, la == 0 ? base : la);
  }

  u64 port_cycles(const Bundle& b) const {
    const double load_rate = b.pair_load ? chip_.memory.interleaved_load_bytes_per_cycle.value
                                         : chip_.memory.load_bytes_per_cycle.value;
    return std::max<u64>({1, ceil_bytes(b.load_bytes, load_rate),
                          ceil_bytes(b.store_bytes, chip_.tile.store_bytes_per_cycle.value)});
  }

  void turn(Ctx& c) {
    if (c.done) {
      ++now_;
      return;
    }
    if (c.busy > 0) {
      --c.busy;
      ++now_;
      if (c.busy == 0 && c.prog != nullptr && c.block >= c.prog->blocks.size()) {
        c.done = true;
        c.finish = now_;
      }
      return;
    }
    static const Bundle kRptBundle = bundle(OpClass::kRpt);
    const Bundle& b = c.rpt_pending ? kRptBundle : c.prog->blocks[c.block].body[c.idx];
    if (b.dep && now_ < c.ready) {  // result not ready: the turn is lost
      ++now_;
      ++stalls_;
      return;
    }
    const u64 cost = port_cycles(b);
    c.ready = now_ + latency_of(b);
    now_ += cost;
    stalls_ += cost - 1;
    ++bundles_;
    c.busy = turns_of(b) - 1 + b.hold;
    if (c.rpt_pending) {
      // A loop longer than rpt_count_max runs as ceil(repeat / max) rpt blocks; their set-up
      // bundles are issued together here (held turns), which times the same as between blocks.
      const u64 repeat = c.prog->blocks[c.block].repeat;
      c.busy += (repeat + rpt_max() - 1) / rpt_max() - 1;
      c.rpt_pending = false;
    } else {
      advance(c);
      if (c.done && c.busy > 0) c.done = false;  // finishes when its held turns end
    }
  }

  // Rounds in which every running context only sits out a held turn: each costs one cycle
  // per slot, so they are skipped together (all but the last, which may end a program).
  void skip_held() {
    u64 k = ~u64{0};
    for (const Ctx& c : ctx_) {
      if (c.done) continue;
      if (c.busy == 0) return;
      k = std::min(k, c.busy);
    }
    if (k == ~u64{0} || k < 2) return;
    for (Ctx& c : ctx_)
      if (!c.done) c.busy -= k - 1;
    now_ += (k - 1) * slots_;
  }

  // Steady-state skip: all running contexts inside rpt bodies, and the round-start state
  // (position in body, held turns, pending latency) seen before: the rounds in between repeat.
  void try_skip(std::map<std::vector<u64>, Snapshot>& seen) {
    std::vector<u64> key;
    key.reserve(ctx_.size() * 5);
    for (const Ctx& c : ctx_) {
      if (c.done) {
        key.push_back(~u64{0});
        continue;
      }
      if (c.block >= c.prog->blocks.size()) {  // last bundle's held turns
        seen.clear();
        return;
      }
      const Block& b = c.prog->blocks[c.block];
      if (!b.rpt || c.rpt_pending) {
        seen.clear();
        return;
      }
      key.insert(key.end(), {c.block, c.idx, c.busy, c.ready > now_ ? c.ready - now_ : 0});
    }
    Snapshot snap{now_, bundles_, stalls_, {}};
    for (const Ctx& c : ctx_) snap.iters.push_back(c.iter);
    const auto it = seen.find(key);
    if (it == seen.end()) {
      if (seen.size() > 512) seen.clear();
      seen.emplace(std::move(key), std::move(snap));
      return;
    }
    const Snapshot& then = it->second;
    u64 k = ~u64{0};
    for (std::size_t i = 0; i < ctx_.size(); ++i) {
      const Ctx& c = ctx_[i];
      if (c.done) continue;
      const u64 d = c.iter - then.iters[i];
      if (d == 0) {
        seen.clear();
        return;
      }
      const Block& b = c.prog->blocks[c.block];
      const u64 room = b.repeat - c.iter - 1;  // whole iterations left in the block
      k = std::min(k, room / d);
    }
    if (k != ~u64{0} && k > 0) {
      const u64 dt = now_ - then.now;
      for (std::size_t i = 0; i < ctx_.size(); ++i) {
        Ctx& c = ctx_[i];
        if (c.done) continue;
        c.iter += k * (c.iter - then.iters[i]);
        c.ready += k * dt;
      }
      bundles_ += k * (bundles_ - then.bundles);
      stalls_ += k * (stalls_ - then.stalls);
      now_ += k * dt;
    }
    seen.clear();
  }
};

u64 block_cycles(const ChipSpec& chip, const SupBlock& steps);

u64 step_cycles(const ChipSpec& chip, const SupStep& s) {
  const u64 simple_c = chip.tile.supervisor_simple_cycles;
  const u64 control_c = chip.tile.supervisor_control_cycles;
  switch (s.kind) {
    case SupStep::Kind::kSimple:
      return s.count * simple_c;
    case SupStep::Kind::kControl:
      return s.count * control_c;
    case SupStep::Kind::kWeightLoad: {
      // ld128putcs at the chip's rate; ld64putcs (load_bits 64) at most 8 B per cycle.
      double rate = chip.amp.coeff_load_bytes_per_cycle.value;
      if (s.load_bits > 0) rate = std::min(rate, static_cast<double>(s.load_bits) / 8.0);
      return ceil_bytes(s.bytes, rate);
    }
    case SupStep::Kind::kRun: {
      const u64 tail = s.tail_simple * simple_c + s.tail_control * control_c;
      return control_c + run_workers(chip, s.workers, tail).cycles;  // runall + the run
    }
    case SupStep::Kind::kRunCycles:
      return control_c + s.cycles;
    case SupStep::Kind::kLoop: {
      if (s.count == 0) return 0;
      const u64 body = block_cycles(chip, *s.body);
      return s.count * body + (s.count - 1) * control_c + simple_c;  // brnzdec
    }
  }
  return 0;
}

u64 block_cycles(const ChipSpec& chip, const SupBlock& steps) {
  u64 total = 0;
  for (const SupStep& s : steps) total += step_cycles(chip, s);
  return total;
}

}  // namespace

RunTiming run_workers(const ChipSpec& chip, const std::vector<WorkerProgram>& workers,
                      std::uint64_t tail_cycles) {
  Barrel barrel(chip, workers);
  return barrel.run(tail_cycles);
}

std::uint64_t supervisor_cycles(const ChipSpec& chip, const SupBlock& program) {
  return block_cycles(chip, program);
}

}  // namespace ipusim::tile
