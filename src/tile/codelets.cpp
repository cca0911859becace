// SPDX-License-Identifier: Apache-2.0
// Bundle programs of the codelet families, written for this project from the hardware rules
// in ../shared/reference/ipu-hardware.md §1-§4 (docs/tile-model.md gives each in prose).
// Worker programs: prologue (address and count set-up), an rpt or software-loop body, and an
// epilogue (drain, tails, exit). Supervisor programs: vertex-state loads, loops, weight loads
// and runall/sync. Straight-line set-up is written as counts of integer bundles (overhead());
// the loop bodies are written bundle by bundle, since they carry the timing.
#include "ipusim/tile/codelets.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "ipusim/tile/amp_weight_height.hpp"
#include "ipusim/tile/reduce_plan.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::tile {
namespace {

using u64 = std::uint64_t;
using O = OpClass;
using trace::DType;
using trace::Op;

Bundle B(O main, O aux = O::kFnop, bool dep = false) { return bundle(main, aux, dep); }

u64 eb(DType t) { return trace::dtype_bytes(t); }
u64 contexts(const ChipSpec& c) {
  if (c.worker_contexts == 0) throw ModelError("tile model: chip has 0 worker contexts");
  return c.worker_contexts;
}
u64 vec_bytes(const ChipSpec& c) { return c.datapath_width.count; }
u64 vw(const ChipSpec& c, DType t) {
  const u64 w = vec_bytes(c) / eb(t);
  if (w == 0) throw ModelError("tile model: datapath narrower than one element");
  return w;
}
// Elements [total*i/w, total*(i+1)/w) go to worker i.
u64 share(u64 total, u64 w, u64 i) { return total * (i + 1) / w - total * i / w; }

// A vector load / store of one datapath width on the plain ports.
Bundle vload(const ChipSpec& c, O aux = O::kFnop, bool dep = false) {
  Bundle b = B(O::kLd64, aux, dep);
  b.load_bytes = static_cast<std::uint32_t>(vec_bytes(c));
  return b;
}
Bundle vstore(const ChipSpec& c, O aux = O::kFnop, bool dep = false) {
  Bundle b = B(O::kSt64, aux, dep);
  b.store_bytes = static_cast<std::uint32_t>(vec_bytes(c));
  return b;
}

// n bundles of straight-line integer set-up: vertex-state loads (each next one using the last
// load's address), address arithmetic and tests, in a fixed rotation.
void overhead(WorkerProgram& p, u64 n) {
  static const O kCycle[] = {O::kLd32, O::kAdd, O::kShift, O::kCmp, O::kSetzi, O::kBrCond};
  for (u64 i = 0; i < n; ++i) {
    const O op = kCycle[i % 6];
    p.straight(B(op, O::kFnop, op == O::kAdd || op == O::kBrCond));
  }
}

void exit_worker(WorkerProgram& p) { p.straight(B(O::kExit)); }

// Runs `make(i, k)` for worker i with k = counts[i] iterations of its outer software loop.
// Beyond kUnroll iterations the run is linear in the counts (every extra iteration of each
// worker is the same bundles at the same turns), so with d = min(count) - kUnroll,
// T(c) = T(c - d) + d (T(c - d + 1) - T(c - d)): exact, and bounded in work whatever the
// counts, as long as they differ little between workers (they are shares of one total).
constexpr u64 kUnroll = 8;
u64 timed_run(const ChipSpec& chip, const std::vector<u64>& counts,
              const std::function<WorkerProgram(u64, u64)>& make, u64 tail) {
  auto at = [&](u64 minus, u64 plus) {
    std::vector<WorkerProgram> ws;
    for (u64 i = 0; i < counts.size(); ++i) ws.push_back(make(i, counts[i] - minus + plus));
    return run_workers(chip, ws, tail).cycles;
  };
  const u64 mn = counts.empty() ? 0 : *std::min_element(counts.begin(), counts.end());
  if (mn <= kUnroll) return at(0, 0);
  const u64 d = mn - kUnroll;
  const u64 t0 = at(d, 0), t1 = at(d, 1);
  return t0 + d * (t1 - t0);
}

std::vector<u64> shares(u64 total, u64 w) {
  std::vector<u64> s;
  for (u64 i = 0; i < w; ++i) s.push_back(share(total, w, i));
  return s;
}

// ---------------------------------------------------------------------------------------------
// Elementwise: instructions per vector of each operator. add/sub/mul are one vector
// instruction (§4 c = 1); the other rows are inferred sequences whose issue turns equal the
// poplibs per-op cycles (§4 op tables): §5 lists per-instruction latencies of divide, sqrt,
// exp and log as unknown, so nothing finer is claimed.
// ---------------------------------------------------------------------------------------------

struct Recipe {
  O cls;
  u64 half, fp;  // instructions per vector, half / other types
};

Recipe recipe(Op op) {
  switch (op) {
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
      return {O::kFvArith, 1, 1};
    case Op::kDiv:
      return {O::kFvDivSqrt, 21, 10};
    case Op::kMax:
    case Op::kMin:
      return {O::kFvCmp, 4, 4};  // compare + NaN-select sequence
    case Op::kRelu:
      return {O::kFvCmp, 2, 2};
    case Op::kExp:
      return {O::kFvTranscend, 2, 3};  // 2 turns each: 4 / 6
    case Op::kLog:
      return {O::kFvTranscend, 2, 6};  // 4 / 12
    case Op::kSqrt:
      return {O::kFvDivSqrt, 23, 10};
    case Op::kRsqrt:
      return {O::kFvDivSqrt, 19, 8};
    case Op::kInverse:
      return {O::kFvDivSqrt, 15, 6};
    case Op::kNeg:
      return {O::kFvBitwise, 2, 2};
    case Op::kAbs:
      return {O::kFvBitwise, 1, 1};
    case Op::kTanh:
      return {O::kFvTranscend, 2, 6};
    case Op::kSigmoid:
      return {O::kFvTranscend, 3, 6};
    case Op::kGelu:
      return {O::kFvPoly, 16, 22};
    case Op::kSquare:
      return {O::kFvArith, 2, 2};
  }
  throw ModelError("tile model: unknown operator");
}

bool asm_binary(Op op) { return op == Op::kAdd || op == Op::kSub || op == Op::kMul; }

// `count` dependent aux instructions; past kMaxOpBundles (only fused map expressions get
// there) the rest are held turns of the last bundle, which times the same.
constexpr u64 kMaxOpBundles = 64;
std::vector<Bundle> op_bundles(O cls, u64 count) {
  std::vector<Bundle> v;
  for (u64 i = 0; i < std::min(count, kMaxOpBundles); ++i) v.push_back(B(O::kNop, cls, i == 0));
  if (count > kMaxOpBundles) v.back().hold = (count - kMaxOpBundles) * op_info(cls).turns;
  return v;
}

// Tail of the last worker: one check per power-of-two piece below a vector, and for each
// piece present: its loads, the op, a store.
void tail_pieces(WorkerProgram& p, u64 rem, u64 width, u64 loads, const std::vector<Bundle>& op) {
  for (u64 bit = 1; bit < width; bit <<= 1) {
    p.straight(B(O::kCmp));
    p.straight(B(O::kBrCond, O::kFnop, true));
    if (rem & bit) {
      p.straight(B(O::kLd32), loads);
      for (const Bundle& b : op) p.straight(b);
      p.straight(B(O::kSt32, O::kFnop, true));
    }
  }
}

// 20-bundle prologue of a two-input 1D worker: worker id, four vertex-state loads (in1, in2,
// out, n), n / W by reciprocal multiply, worker offset, three pointer adds, remainder owner
// test, byte count, alignment test, stride, empty test, rpt count.
constexpr u64 kBinaryPrologue = 20;
// 12-bundle prologue of a one-input 1D worker (three state loads, two pointer adds).
constexpr u64 kUnaryPrologue = 12;
// EXPONENT loads its range-reduction constants first (16 bundles).
constexpr u64 kExpConstants = 16;

WorkerProgram elementwise_worker(const ChipSpec& c, u64 vectors, u64 rem, u64 width, u64 inputs,
                                 const std::vector<Bundle>& op, bool assembly, u64 prologue) {
  WorkerProgram p;
  overhead(p, prologue);
  if (vectors > 0 && assembly) {
    // Software-pipelined rpt: loads of vector k+1 beside the op of vector k.
    std::vector<Bundle> body;
    for (u64 i = 0; i < inputs; ++i)
      body.push_back(vload(c, i + 1 == inputs ? op[0].aux : O::kFnop, i + 1 == inputs));
    for (std::size_t i = 1; i < op.size(); ++i) body.push_back(op[i]);
    body.push_back(vstore(c));
    p.straight(vload(c), inputs);  // preload
    p.rpt(body, vectors - 1);
    for (const Bundle& b : op) p.straight(b);  // drain
    p.straight(vstore(c, O::kFnop, true));
  } else if (vectors > 0) {
    // Compiled loop: loads, the op sequence, store, pointer step, loop branch.
    std::vector<Bundle> body;
    for (u64 i = 0; i < inputs; ++i) body.push_back(vload(c));
    for (const Bundle& b : op) body.push_back(b);
    body.push_back(vstore(c, O::kFnop, true));
    body.push_back(B(O::kAdd));
    body.push_back(B(O::kBrnzdec));
    p.loop(body, vectors);
  }
  tail_pieces(p, rem, width, inputs, op);
  exit_worker(p);
  return p;
}

SupBlock elementwise(const ChipSpec& c, DType t, u64 n, u64 inputs, const std::vector<Bundle>& op,
                     bool assembly, u64 prologue, u64 sup_extra) {
  const u64 w = contexts(c), width = vw(c, t);
  const u64 vectors = n / width, rem = n % width;
  std::vector<WorkerProgram> ws;
  for (u64 i = 0; i < w; ++i) {
    ws.push_back(elementwise_worker(c, share(vectors, w, i), i + 1 == w ? rem : 0, width, inputs,
                                    op, assembly, prologue));
  }
  // Supervisor: 3 set-up (state pointer, entry point, worker count) + extra, runall, the
  // run ending in sync, 1 to return.
  return {simple(3 + sup_extra), run(std::move(ws), 0, 1), simple(1)};
}

SupBlock binary_program(const ChipSpec& c, Op op, DType t, u64 n) {
  const Recipe r = recipe(op);
  if (op != Op::kAdd && op != Op::kSub && op != Op::kMul && op != Op::kDiv && op != Op::kMax &&
      op != Op::kMin)
    throw ModelError("tile model: binary: operator is not a binary op");
  const auto ops = op_bundles(r.cls, t == DType::kHalf ? r.half : r.fp);
  return elementwise(c, t, n, 2, ops, asm_binary(op), kBinaryPrologue, 0);
}

// BroadcastVectorInner: the vector stays in registers, so each worker streams one operand
// through the operator (one load and one store per vector).
SupBlock broadcast_binary_program(const ChipSpec& c, Op op, DType t, u64 n) {
  if (op != Op::kAdd && op != Op::kSub && op != Op::kMul)
    throw ModelError("tile model: broadcast_binary: operator is not add, sub or mul");
  const Recipe r = recipe(op);
  const auto ops = op_bundles(r.cls, t == DType::kHalf ? r.half : r.fp);
  return elementwise(c, t, n, 1, ops, true, kBinaryPrologue, 0);
}

SupBlock unary_program(const ChipSpec& c, Op op, DType t, u64 n) {
  if (static_cast<int>(op) < static_cast<int>(Op::kRelu))
    throw ModelError("tile model: unary: operator is not a unary op");
  const Recipe r = recipe(op);
  const auto ops = op_bundles(r.cls, t == DType::kHalf ? r.half : r.fp);
  // UnaryOp1D: the C++ loop plus 9 more supervisor instructions (2D-capable state unpacking).
  return elementwise(c, t, n, 1, ops, false, kUnaryPrologue + (op == Op::kExp ? kExpConstants : 0),
                     9);
}

SupBlock map_program(const ChipSpec& c, DType t, u64 n, u64 op_cycles) {
  // Generated C++ codelet: two input streams, the fused operators' instructions back to back.
  return elementwise(c, t, n, 2, op_bundles(O::kFvArith, std::max<u64>(op_cycles, 1)), false,
                     kBinaryPrologue, 0);
}

// ---------------------------------------------------------------------------------------------
// ScaledAdd: a += s * b, same type, assembly rpt of three bundles per vector.
// ---------------------------------------------------------------------------------------------
SupBlock scaled_add_program(const ChipSpec& c, DType t, u64 n) {
  const u64 w = contexts(c), width = vw(c, t);
  const u64 vectors = n / width, rem = n % width;
  std::vector<WorkerProgram> ws;
  for (u64 i = 0; i < w; ++i) {
    WorkerProgram p;
    overhead(p, 15);  // state loads, worker split, pointers, scale broadcast
    const u64 v = share(vectors, w, i);
    if (v > 0) {
      p.straight(vload(c), 2);
      p.rpt({vload(c), vload(c, O::kFvMac, true), vstore(c)}, v - 1);
      p.straight(B(O::kNop, O::kFvMac, true));
      p.straight(vstore(c, O::kFnop, true));
    }
    p.straight(B(O::kCmp));
    p.straight(B(O::kBrCond, O::kFnop, true));  // remainder?
    p.straight(B(O::kBrCond));                  // final check
    if (i + 1 == w) {
      for (u64 e = 0; e < rem; ++e) {  // tail elements one at a time: the word holding a,
        p.straight(B(O::kLd32));       // the element of b, axpy, merge into the word,
        p.straight(B(O::kLd16Elem));   // store the word, loop branch
        p.straight(B(O::kNop, O::kFvMac, true));
        p.straight(B(O::kAnd, O::kFnop, true), 2);
        p.straight(B(O::kSt32, O::kFnop, true));
        p.straight(B(O::kBrnzdec));
      }
    }
    exit_worker(p);
    ws.push_back(std::move(p));
  }
  // Supervisor: per-type state (3 dependent loads + 3), the basic launch (3), vector count and
  // remainder (one divide step, two with a remainder), the scale tensor's load, the run, and
  // the tail (two dependent instructions).
  return {control(3),
          simple(3),
          simple(3),
          control(rem == 0 ? 1 : 2),
          simple(1),
          control(1),
          run(std::move(ws), 0, 1),
          control(2)};
}

// ---------------------------------------------------------------------------------------------
// Cast: two bundles per 4 elements for half<->float (a paced load+store beside the converts),
// one element per two bundles for other types.
// ---------------------------------------------------------------------------------------------
SupBlock cast_program(const ChipSpec& c, DType from, DType to, u64 n) {
  const u64 w = contexts(c);
  const bool fp = (from == DType::kHalf || from == DType::kFloat) &&
                  (to == DType::kHalf || to == DType::kFloat);
  const u64 per = fp ? 4 : 1;  // elements per loop iteration
  std::vector<WorkerProgram> ws;
  for (u64 i = 0; i < w; ++i) {
    WorkerProgram p;
    overhead(p, 42);  // supervisor-worker entry (23) and the conversion core's set-up (19)
    const u64 m = share(n, w, i);
    std::vector<Bundle> body;
    if (fp) {
      // 4 elements: their loads and stores split evenly over the two bundles (half->float:
      // 4 B in, 8 B out each; float->half: 8 B in, 4 B out each), so no port is exceeded.
      Bundle a = B(O::kLdSt64Pace, O::kFvCvt), b = B(O::kLdSt64Pace, O::kFvCvt, true);
      a.load_bytes = b.load_bytes = static_cast<std::uint32_t>(4 * eb(from) / 2);
      a.store_bytes = b.store_bytes = static_cast<std::uint32_t>(4 * eb(to) / 2);
      body = {a, b};
    } else {
      Bundle a = B(O::kLd32), b = B(O::kSt32, O::kFnop, true);
      a.load_bytes = static_cast<std::uint32_t>(eb(from));
      b.store_bytes = static_cast<std::uint32_t>(eb(to));
      body = {a, b};
    }
    p.rpt(body, m / per);
    for (u64 bit = 1; bit < per; bit <<= 1) {
      p.straight(B(O::kBrCond));
      if ((m % per) & bit) {
        p.straight(B(O::kLd32, O::kFvCvt));
        p.straight(B(O::kSt32, O::kFnop, true));
      }
    }
    exit_worker(p);
    ws.push_back(std::move(p));
  }
  return {simple(12), run(std::move(ws), 0, 1), simple(1)};
}

// ---------------------------------------------------------------------------------------------
// Copy and transpose: a six-worker call with a general-alignment prologue (head and tail
// bytes, source/destination alignment tests: 42 bundles, inferred from the measured ~288-cycle
// call of ipu-hardware.md §1), then the moving loop.
// ---------------------------------------------------------------------------------------------
constexpr u64 kCopyCallPrologue = 42;

SupBlock copy_program(const ChipSpec& c, u64 bytes) {
  const u64 w = contexts(c), vb = vec_bytes(c);
  const u64 words = bytes / vb, rem = bytes % vb;
  std::vector<WorkerProgram> ws;
  for (u64 i = 0; i < w; ++i) {
    WorkerProgram p;
    overhead(p, kCopyCallPrologue);
    const u64 k = share(words, w, i);
    if (k > 0) {
      Bundle ldst = B(O::kLdSt64Pace);
      ldst.load_bytes = ldst.store_bytes = static_cast<std::uint32_t>(vb);
      p.straight(vload(c));
      p.rpt({ldst}, k - 1);
      p.straight(vstore(c, O::kFnop, true));
    }
    if (i + 1 == w) {
      for (u64 bit = 1; bit < vb; bit <<= 1) {
        if (rem & bit) {
          p.straight(B(O::kLd32));
          p.straight(B(O::kSt32, O::kFnop, true));
        }
      }
    }
    exit_worker(p);
    ws.push_back(std::move(p));
  }
  return {simple(3), run(std::move(ws), 0, 1), simple(1)};
}

SupBlock transpose_program(const ChipSpec& c, DType t, u64 n) {
  const u64 w = contexts(c), width = vw(c, t);
  // A width x width block: width row loads, width row stores, and the shuffles that regroup
  // lanes (width/2 per output row), paired with the loads and stores.
  const u64 block = width * width;
  const u64 shuffles = width * std::max<u64>(width / 2, 1);
  std::vector<Bundle> body;
  for (u64 r = 0; r < width; ++r) body.push_back(vload(c));
  for (u64 r = 0; r < width; ++r) body.push_back(vstore(c));
  for (u64 s = 0, j = body.size() - shuffles; s < shuffles && j < body.size(); ++s, ++j) {
    body[j].aux = O::kFvShuffle;
  }
  for (u64 s = body.size(); s < shuffles; ++s) body.push_back(B(O::kNop, O::kFvShuffle));
  const u64 blocks = n / block, rem = n % block;
  std::vector<WorkerProgram> ws;
  for (u64 i = 0; i < w; ++i) {
    WorkerProgram p;
    overhead(p, kCopyCallPrologue);
    p.rpt(body, share(blocks, w, i));
    const u64 e = share(rem, w, i);  // leftover elements one at a time
    if (e > 0) p.rpt({B(O::kLd16Elem), B(O::kSt16Elem, O::kFnop, true)}, e);
    exit_worker(p);
    ws.push_back(std::move(p));
  }
  return {simple(3), run(std::move(ws), 0, 1), simple(1)};
}

// ---------------------------------------------------------------------------------------------
// Reduce: per group of 128-bit accumulator outputs, an rpt over the inputs (load the group's
// bytes, accumulate), then read out, convert if needed, store.
// ---------------------------------------------------------------------------------------------
constexpr u64 kAccBytes = 16;  // 128-bit accumulators, ipu-hardware.md §4 Reduce

// One output: popops' scalar-output reduction (docs/codelets.md "reduce"), the pieces of
// tile::scalar_reduce_pieces each reduced by one worker (9 set-up bundles, an rpt of one
// accumulator's loads per loop, 5 to read the accumulators out and handle the remainder one
// element a bundle, 3 to sum them, 5 more to convert a non-float output, exit), then with more
// than one piece (and not `first_stage` only) a second run in which one worker reduces the
// pieces' results.
SupBlock scalar_reduce_program(const ChipSpec& c, Op op, DType in, DType out, u64 inputs,
                               bool first_stage) {
  const u64 w = contexts(c);
  auto worker = [&](DType from, u64 n) {
    const ReduceVector v = reduce_vector(op == Op::kAdd, eb(from), vec_bytes(c), kAccBytes);
    std::vector<Bundle> body;
    for (u64 l = 0; l < v.loads; ++l)
      body.push_back(vload(c, l + 1 == v.loads ? O::kFvAcc : O::kFnop, l + 1 == v.loads));
    WorkerProgram p;
    overhead(p, 9);
    p.rpt(body, n / v.per_loop());
    overhead(p, 5 + n % v.per_loop());
    p.straight(B(O::kNop, O::kFvAcc, true), 3);
    if (out != DType::kFloat) p.straight(B(O::kNop, O::kFvCvt, true), 5);
    exit_worker(p);
    return p;
  };
  const u64 width = vw(c, in);
  const auto pieces = scalar_reduce_pieces(inputs, w, (op == Op::kAdd ? 2 : 1) * width, width);
  std::vector<WorkerProgram> first;
  for (const u64 n : pieces) first.push_back(worker(in, n));
  SupBlock block{run(std::move(first), 1, 0)};  // worker vertices: no supervisor code
  if (pieces.size() > 1 && !first_stage) {
    std::vector<WorkerProgram> second;
    second.push_back(worker(out, pieces.size()));
    block.push_back(run(std::move(second), 1, 0));
  }
  return block;
}

// popops' strided and continuous reductions (docs/codelets.md "reduce"): the outputs split
// over the workers (strided: in vectors), each worker's vertex a loop over its outputs.
// Strided: 16 set-up bundles; per vector of outputs 6 + the completion and store bundles, then
// one 64-bit load and accumulate a partial. Continuous: 17 set-up bundles; per output 12,
// then one 64-bit load and accumulate per vector of its contiguous partials.
SupBlock popops_reduce_program(const ChipSpec& c, Op op, DType in, DType out, u64 outputs,
                               u64 inputs, trace::ReduceLayout layout) {
  const u64 w = contexts(c), width = vw(c, in);
  const bool strided = layout == trace::ReduceLayout::kStrided;
  const u64 share = output_share(outputs, w, strided ? width : 1);
  const u64 per_vector = reduce_vector(op == Op::kAdd, eb(in), vec_bytes(c), kAccBytes).per_load;
  const u64 post = strided_reduce_post(in == DType::kHalf, op == Op::kAdd, out == DType::kFloat);
  // Worker i's outer-loop count: vectors of outputs (strided) or outputs (continuous).
  std::vector<u64> counts(w);
  for (u64 i = 0; i < w; ++i) {
    const u64 mine = i * share >= outputs ? 0 : std::min(share, outputs - i * share);
    counts[i] = strided ? (mine + per_vector - 1) / per_vector : mine;
  }
  auto make = [&](u64, u64 k) {
    WorkerProgram p;
    if (k > 0) {
      overhead(p, strided ? 16 : 17 + (inputs % 2 == 1 ? 2 : 0));
      for (u64 j = 0; j < k; ++j) {
        overhead(p, strided ? 6 + post : 12);
        p.rpt({vload(c, O::kFvAcc, true)}, strided ? inputs - 1 : inputs / per_vector);
      }
    }
    exit_worker(p);
    return p;
  };
  // timed_run extrapolates long loops, so the work is bounded whatever the output count.
  return {run_cycles(timed_run(c, counts, make, 1))};  // worker vertices: no supervisor code
}

SupBlock reduce_program(const ChipSpec& c, Op op, DType in, DType out, u64 outputs, u64 inputs,
                        trace::ReduceLayout layout, bool first_stage) {
  if (op != Op::kAdd && op != Op::kMul && op != Op::kMax && op != Op::kMin)
    throw ModelError("tile model: reduce: operator is not a reduction");
  const u64 w = contexts(c);
  const u64 acc = std::max<u64>(kAccBytes / eb(in), 1);
  if (outputs == 1 && inputs > 1) return scalar_reduce_program(c, op, in, out, inputs, first_stage);
  if (layout != trace::ReduceLayout::kPartialSums)
    return popops_reduce_program(c, op, in, out, outputs, inputs, layout);
  const u64 groups = (outputs + acc - 1) / acc;
  const u64 loads = std::max<u64>((acc * eb(in) + vec_bytes(c) - 1) / vec_bytes(c), 1);
  std::vector<Bundle> per_input;
  for (u64 l = 0; l < loads; ++l)
    per_input.push_back(vload(c, l + 1 == loads ? O::kFvAcc : O::kFnop, l + 1 == loads));
  const u64 out_stores = std::max<u64>((acc * eb(out) + vec_bytes(c) - 1) / vec_bytes(c), 1);
  auto make = [&](u64, u64 k) {
    WorkerProgram p;
    overhead(p, 19);
    for (u64 g = 0; g < k; ++g) {
      p.straight(B(O::kSetzi, O::kFvAcc));  // clear the accumulators
      p.rpt(per_input, inputs);
      p.straight(B(O::kNop, O::kFvAcc, true), 2);  // read the 128-bit accumulator out
      if (in != out) p.straight(B(O::kNop, O::kFvCvt, true), (acc + 1) / 2);  // 2 lanes each
      p.straight(vstore(c, O::kFnop, true), out_stores);
      p.straight(B(O::kAdd));
      p.straight(B(O::kBrnzdec));
    }
    exit_worker(p);
    return p;
  };
  const u64 cycles = timed_run(c, shares(groups, w), make, c.tile.supervisor_control_cycles);
  // Supervisor: 3 set-up + 3 dependent state loads + 4, runall, the run, 1 to return.
  return {simple(7), control(3), run_cycles(cycles), simple(1)};
}

// ---------------------------------------------------------------------------------------------
// Dot products (non-AMP): per output, an rpt of paired loads beside a vector MAC.
// ---------------------------------------------------------------------------------------------
SupBlock dot_program(const ChipSpec& c, DType in, DType partials, u64 length, u64 count) {
  const bool fp = [](DType t) { return t == DType::kHalf || t == DType::kFloat; }(in);
  if (!fp || (in == DType::kFloat && partials == DType::kHalf) ||
      !(partials == DType::kHalf || partials == DType::kFloat))
    throw ModelError("tile model: dot: unsupported types");
  const u64 w = contexts(c), width = vw(c, in);
  const u64 vectors = (length + width - 1) / width;
  const bool half = in == DType::kHalf;
  Bundle mac = B(O::kLd2x64Pace, O::kFvMac, true);
  mac.load_bytes = static_cast<std::uint32_t>(2 * vec_bytes(c));
  auto make = [&](u64, u64 k) {
    WorkerProgram p;
    overhead(p, 35);  // worker set-up and the worklist entry
    for (u64 o = 0; o < k; ++o) {
      overhead(p, 7 + (half ? 5 : 3));  // per output: pointers, accumulator clear, set-up
      p.rpt({mac}, vectors);
    }
    exit_worker(p);
    return p;
  };
  const u64 cycles = timed_run(c, shares(count, w), make, c.tile.supervisor_control_cycles);
  return {simple(half ? 11 : 10), control(half ? 8 : 7), run_cycles(cycles), simple(1)};
}

// DynamicSlice: per copied row, offset checks and addressing, then a load and a store per
// 64-bit word (arbitrary source and destination: no pacing).
SupBlock slice_program(const ChipSpec& c, DType t, u64 elems, u64 copies) {
  const u64 w = contexts(c);
  const u64 vectors = ((elems + w - 1) / w) / vw(c, t);
  auto make = [&](u64, u64 k) {
    WorkerProgram p;
    overhead(p, 39);
    for (u64 r = 0; r < k; ++r) {
      overhead(p, 23);
      p.rpt({vload(c), vstore(c, O::kFnop, true)}, vectors);
    }
    exit_worker(p);
    return p;
  };
  std::vector<u64> counts(w, copies);
  const u64 cycles = timed_run(c, counts, make, c.tile.supervisor_control_cycles);
  return {simple(7), control(2), run_cycles(cycles), simple(1)};
}

// ---------------------------------------------------------------------------------------------
// AMP convolutions. Per output position the worker issues `phases` AMP instructions (weights
// per engine / MACs per engine per instruction), each beside a paced feed that loads its slice
// of input and of partials and stores a slice of finished partials. The engines hold
// `pipeline_depth` positions: the first depth-1 positions only fill, then each position in the
// rpt body retires one, and depth-1 positions of drain flush the last ones.
// ---------------------------------------------------------------------------------------------
struct Amp {
  u64 engines, weights, phases, in_bytes, partial_bytes, depth;
  bool half_in, half_partials, fast;
};

Amp amp_of(const ChipSpec& c, DType in, DType partials) {
  const AmpPath* path = nullptr;
  if (in == DType::kHalf && partials == DType::kHalf) path = &c.amp.half_half;
  if (in == DType::kHalf && partials == DType::kFloat) path = &c.amp.half_float;
  if (in == DType::kFloat && partials == DType::kFloat) path = &c.amp.float_float;
  if (path == nullptr || path->engines == 0)
    throw ModelError("tile model: AMP has no such input/partials path");
  Amp a{};
  a.half_in = in == DType::kHalf;
  a.half_partials = partials == DType::kHalf;
  a.engines = path->engines;
  a.weights = a.half_in ? c.amp.weights_per_engine_half : c.amp.weights_per_engine_float;
  const u64 macs = a.half_in ? c.amp.macs_per_engine_half : c.amp.macs_per_engine_float;
  if (a.weights == 0 || macs == 0) throw ModelError("tile model: AMP without weights or MACs");
  a.phases = (a.weights + macs - 1) / macs;
  a.in_bytes = (a.weights * eb(in) + a.phases - 1) / a.phases;
  a.partial_bytes = (a.engines * eb(partials) + a.phases - 1) / a.phases;
  a.depth = std::max<u64>(c.amp.pipeline_depth, 1);
  // The path that clears partials through $FP_CLR instead of storing zeros (§4 "c = 1").
  a.fast = a.half_in && (!a.half_partials || a.engines >= 16);
  return a;
}

// Feed bundle: input slice + partials slice in, partials slice out, beside an AMP.
Bundle amp_feed(const Amp& a, bool load_in, bool load_partials, bool store) {
  Bundle b = B(O::kLd2xSt64Pace, O::kAmp);
  b.load_bytes = static_cast<std::uint32_t>((load_in ? a.in_bytes : 0) +
                                            (load_partials ? a.partial_bytes : 0));
  b.store_bytes = static_cast<std::uint32_t>(store ? a.partial_bytes : 0);
  b.pair_load = load_in && load_partials;
  return b;
}

// The n-position stream of one worklist entry: fill, rpt body, drain.
void amp_stream(WorkerProgram& p, const Amp& a, u64 n, bool zeroing) {
  if (n == 0) return;
  const bool read_partials = !(zeroing && a.fast);  // $FP_CLR replaces reading zeros
  const u64 fill = std::min(n, a.depth - 1);
  for (u64 i = 0; i < fill; ++i)
    for (u64 ph = 0; ph < a.phases; ++ph) p.straight(amp_feed(a, true, read_partials, false));
  std::vector<Bundle> body;
  for (u64 ph = 0; ph < a.phases; ++ph) body.push_back(amp_feed(a, true, read_partials, true));
  p.rpt(body, n - fill);
  for (u64 i = 0; i < a.depth - 1; ++i)
    for (u64 ph = 0; ph < a.phases; ++ph) p.straight(amp_feed(a, false, false, true));
  if (a.half_partials) p.straight(B(O::kNop, O::kFvCvt));  // pack the last half partials
}

// Slow paths zero their outputs with stores before accumulating (§4 zeroing 2 + z n).
void amp_zero(WorkerProgram& p, const Amp& a, u64 n) {
  p.straight(B(O::kSetzi));
  p.straight(B(O::kCmp));
  Bundle st = B(O::kSt64);
  p.rpt({st}, n * ((a.engines * (a.half_partials ? 2 : 4) + 7) / 8));
}

// ConvPartial1x1 worker: 11 set-up bundles (worker id, worklist entry loads, pointers,
// strides, empty test, accumulator clear or zero test), the stream, exit. On the common path
// the workers retain their state between runs (poplibs conv1x1WorkerRetentionSavings): 7 of the
// set-up bundles are done once a vertex and 3 once an input group (amp1x1_program), so a run
// costs 4.
constexpr u64 kAmp1x1Retained = 7, kAmp1x1RetainedPerInGroup = 3;
WorkerProgram amp1x1_worker(const Amp& a, u64 n, bool zeroing) {
  WorkerProgram p;
  overhead(p, a.fast ? 11 - kAmp1x1Retained : 12);
  if (zeroing && !a.fast) amp_zero(p, a, n);
  amp_stream(p, a, n, zeroing);
  exit_worker(p);
  return p;
}

SupBlock amp1x1_program(const ChipSpec& c, DType in, DType partials, u64 positions, u64 in_chans,
                        u64 out_chans, u64 groups, u64 load_bits) {
  const Amp a = amp_of(c, in, partials);
  const u64 w = contexts(c);
  const u64 cg = std::max<u64>(groups, 1);
  const u64 ig = std::max<u64>((in_chans + a.weights - 1) / a.weights, 1);
  const u64 og = std::max<u64>((out_chans + a.engines - 1) / a.engines, 1);
  const u64 weight_bytes = a.engines * a.weights * eb(in);
  // One output group: its pointer update and dependent load, put $CCCSLOAD, the weight
  // load, the zero flag, runall and the run (tail: sync + 2 pointer updates).
  auto out_group = [&](bool zeroing) {
    std::vector<WorkerProgram> ws;
    for (u64 i = 0; i < w; ++i) ws.push_back(amp1x1_worker(a, share(positions, w, i), zeroing));
    return SupBlock{simple(1),
                    control(1),
                    control(1),
                    weight_load(weight_bytes, load_bits),
                    simple(zeroing ? 1 : 0),
                    run(std::move(ws), 2, 1)};
  };
  // The common outer-loop path ("c"): half in with 16 engines, or float partials.
  const u64 cc = a.fast || !a.half_partials ? 1 : 0;
  // The retained worker state, W x (7 + 3 x (IG x CG - 1)) cycles of the estimator's: W x 4
  // once and W x 3 in every input group.
  const u64 retained_per_group = a.fast ? w * kAmp1x1RetainedPerInGroup : 0;
  const u64 retained_once = a.fast ? w * (kAmp1x1Retained - kAmp1x1RetainedPerInGroup) : 0;
  // Input groups: the last one zeroes (or clears) the partials, the others accumulate; each
  // loop's brnzdec is charged by loop().
  SupBlock zero_group{simple(5 + retained_per_group), loop(og, out_group(true))};
  SupBlock other_group{simple(4 - cc + retained_per_group), control(1), loop(og, out_group(false))};
  SupBlock conv_group{simple(cc), control(2), loop(ig - 1, other_group)};
  for (auto& s : zero_group) conv_group.push_back(s);
  // Vertex state: 8 independent + 7 dependent loads.
  return {simple(8 + retained_once), control(7), loop(cg, conv_group)};
}

// ConvPartialnx1 worker for one kernel position: 17 set-up bundles (+1 to pack half partials),
// then per worklist entry (one per output row its share touches) 3 bundles and the stream.
WorkerProgram ampnx1_worker(const Amp& a, u64 head, u64 full_rows, u64 width, u64 tail) {
  WorkerProgram p;
  overhead(p, 16 + (a.half_partials ? 1 : 0));
  auto entry = [&](u64 n) {
    overhead(p, 3);
    amp_stream(p, a, n, false);
  };
  if (head > 0) entry(head);
  for (u64 r = 0; r < full_rows; ++r) entry(width);
  if (tail > 0) entry(tail);
  exit_worker(p);
  return p;
}

SupBlock ampnx1_program(const ChipSpec& c, DType in, DType partials, u64 positions, u64 in_chans,
                        u64 out_chans, u64 groups, u64 kh, u64 kw, u64 width, u64 load_bits,
                        u64 height) {
  const Amp a = amp_of(c, in, partials);
  const u64 w = contexts(c);
  height = std::max<u64>(height, 1);
  if (!valid_weight_height(height, a.weights))
    throw ModelError("tile model: amp_convnx1 weight height must be 1, 2 or 4");
  // Weight height h: weights / h input channels of h kernel rows per engine load.
  const u64 chans = a.weights / height;
  const u64 cg = std::max<u64>(groups, 1);
  const u64 ig = std::max<u64>((in_chans + chans - 1) / chans, 1);
  const u64 og = std::max<u64>((out_chans + a.engines - 1) / a.engines, 1);
  kh = (std::max<u64>(kh, 1) + height - 1) / height;
  kw = std::max<u64>(kw, 1);
  // Worker i's share [b, e) cut at row ends: head, full rows, tail.
  struct Share {
    u64 head, rows, tail;
  };
  std::vector<Share> sh(w);
  std::vector<u64> counts(w);
  for (u64 i = 0; i < w; ++i) {
    const u64 b = positions * i / w, e = positions * (i + 1) / w;
    if (width == 0 || e <= b) {
      sh[i] = {e - b, 0, 0};
    } else if (b / width == (e - 1) / width) {
      sh[i] = {e - b, 0, 0};
    } else {
      const u64 first = b / width, last = (e - 1) / width;
      sh[i] = {(first + 1) * width - b, last - first - 1, e - last * width};
    }
    counts[i] = sh[i].rows;
  }
  auto make = [&](u64 i, u64 rows) {
    return ampnx1_worker(a, sh[i].head, rows, width, sh[i].tail);
  };
  const u64 tail = 1 * c.tile.supervisor_control_cycles + 3 * c.tile.supervisor_simple_cycles;
  const u64 kpos = timed_run(c, counts, make, tail);
  const u64 weight_bytes = a.engines * a.weights * eb(in);
  // Per kernel column: weight addressing (6 + 3), put $CCCSLOAD + the weight-height cost of
  // ld128putcs set-up (2 control + 3), the load, runall and the run. Heights 2 and 4 shuffle
  // the weights of their rows first: the estimator's 46 and 60 cycles in place of 15
  // (ipu-hardware.md §4 h_cost; no instruction listing is public, so the extra 31 and 45 are
  // charged as control steps of 6 and simple steps), and height 4 loads with ld64 (at most
  // 64 bits a cycle).
  const u64 shuffle = weight_height_setup(height) - weight_height_setup(1);
  const u64 height4_bits = 8 * kHeight4LoadBytesPerCycle;
  if (height == 4 && (load_bits == 0 || load_bits > height4_bits)) load_bits = height4_bits;
  SupBlock per_kx{simple(9 + shuffle % 6), control(3 + shuffle / 6),
                  weight_load(weight_bytes, load_bits), simple(3), run_cycles(kpos)};
  SupBlock per_ky{simple(2), control(1), loop(kw, per_kx)};
  SupBlock per_og{simple(2), control(1), loop(kh, per_ky)};
  SupBlock per_ig{simple(2), control(1), loop(og, per_og)};
  SupBlock per_cg{simple(4), control(1), loop(ig, per_ig)};
  // Outer set-up: vertex state (13 + 16 dependent), per-worker state (9 + 9|10 each), output
  // pointers per conv and out group (5 + 2 dependent each).
  SupBlock per_worker{simple(a.half_partials ? 7 : 6), control(1)};
  SupBlock outs{simple(5), control(2)};
  // Zeroing the partials first (poplinCycleEstimators.cpp ConvPartialnx1): per output group a
  // run in which each worker stores its share of the group's positions x engines partials,
  // one 64-bit store a bundle, after 4 set-up bundles and before its exit.
  const u64 per_store = std::max<u64>(c.datapath_width.count / eb(partials), 1);
  std::vector<WorkerProgram> zero;
  for (u64 i = 0; i < w; ++i) {
    WorkerProgram p;
    overhead(p, 4);
    const u64 n = (positions * a.engines + w - 1) / w;
    p.rpt({B(O::kSt64)}, (n + per_store - 1) / per_store);
    exit_worker(p);
    zero.push_back(std::move(p));
  }
  SupBlock zero_group{run(std::move(zero), 0, 0)};
  return {simple(13),
          control(16),
          loop(w, per_worker),
          loop(cg, SupBlock{loop(og, outs)}),
          loop(cg, SupBlock{loop(og, zero_group)}),
          loop(cg, per_cg)};
}

// ---------------------------------------------------------------------------------------------

u64 count_at(const trace::Vertex& v, std::size_t slot) {
  const std::int64_t x = v.params[slot];
  if (x < 0) throw ModelError("tile model: negative vertex parameter");
  return static_cast<u64>(x);
}
DType dtype_at(const trace::Vertex& v, std::size_t slot) {
  const std::int64_t x = v.params[slot];
  if (x < 0 || static_cast<std::size_t>(x) >= trace::kDTypeNames.size())
    throw ModelError("tile model: vertex parameter is not a dtype");
  return static_cast<DType>(x);
}
Op op_at(const trace::Vertex& v, std::size_t slot) {
  const std::int64_t x = v.params[slot];
  if (x < 0 || static_cast<std::size_t>(x) >= trace::kOpNames.size())
    throw ModelError("tile model: vertex parameter is not an operator");
  return static_cast<Op>(x);
}

// The micro-architecture fields the programs and engine read, as a memo key prefix.
std::vector<double> chip_key(const ChipSpec& c) {
  return {static_cast<double>(c.worker_contexts),
          static_cast<double>(c.datapath_width.count),
          c.memory.load_bytes_per_cycle.value,
          c.memory.interleaved_load_bytes_per_cycle.value,
          c.memory.memcpy_bytes_per_cycle.value,
          static_cast<double>(c.amp.half_half.engines),
          static_cast<double>(c.amp.half_float.engines),
          static_cast<double>(c.amp.float_float.engines),
          static_cast<double>(c.amp.weights_per_engine_half),
          static_cast<double>(c.amp.weights_per_engine_float),
          static_cast<double>(c.amp.macs_per_engine_half),
          static_cast<double>(c.amp.macs_per_engine_float),
          c.amp.coeff_load_bytes_per_cycle.value,
          static_cast<double>(c.amp.pipeline_depth),
          static_cast<double>(c.tile.issue_width),
          static_cast<double>(c.tile.result_latency),
          c.tile.store_bytes_per_cycle.value,
          static_cast<double>(c.tile.supervisor_simple_cycles),
          static_cast<double>(c.tile.supervisor_control_cycles),
          static_cast<double>(c.tile.rpt_count_max)};
}

std::mutex& memo_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::vector<double>, u64>& memo() {
  static std::map<std::vector<double>, u64> m;
  return m;
}

}  // namespace

SupBlock vertex_program(const ChipSpec& chip, const trace::Vertex& v) {
  namespace s = trace::slot;
  using trace::Codelet;
  switch (v.codelet) {
    case Codelet::kAmpConv1x1:
      return amp1x1_program(chip, dtype_at(v, s::kAmpIn), dtype_at(v, s::kAmpPartials),
                            count_at(v, s::kAmpPositions), count_at(v, s::kAmpInChans),
                            count_at(v, s::kAmpOutChans), count_at(v, s::kAmpGroups),
                            count_at(v, s::kAmp1x1CoeffLoadBits));
    case Codelet::kAmpConvNx1:
      return ampnx1_program(
          chip, dtype_at(v, s::kAmpIn), dtype_at(v, s::kAmpPartials), count_at(v, s::kAmpPositions),
          count_at(v, s::kAmpInChans), count_at(v, s::kAmpOutChans), count_at(v, s::kAmpGroups),
          count_at(v, s::kAmpKernelH), count_at(v, s::kAmpKernelW), count_at(v, s::kAmpWidth),
          count_at(v, s::kAmpNx1CoeffLoadBits), count_at(v, s::kAmpNx1WeightHeight));
    case Codelet::kDot:
      return dot_program(chip, dtype_at(v, s::kDotIn), dtype_at(v, s::kDotPartials),
                         count_at(v, s::kDotLength), count_at(v, s::kDotCount));
    case Codelet::kReduce:
      return reduce_program(chip, op_at(v, s::kReduceOp), dtype_at(v, s::kReduceIn),
                            dtype_at(v, s::kReduceOut), count_at(v, s::kReduceOutputs),
                            count_at(v, s::kReduceInputs),
                            static_cast<trace::ReduceLayout>(count_at(v, s::kReduceLayout)),
                            count_at(v, s::kReduceFirstStage) != 0);
    case Codelet::kUnary:
      return unary_program(chip, op_at(v, s::kEltOp), dtype_at(v, s::kEltDType),
                           count_at(v, s::kEltN));
    case Codelet::kBinary:
      return binary_program(chip, op_at(v, s::kEltOp), dtype_at(v, s::kEltDType),
                            count_at(v, s::kEltN));
    case Codelet::kScaledAdd:
      return scaled_add_program(chip, dtype_at(v, s::kScaledAddDType), count_at(v, s::kScaledAddN));
    case Codelet::kCast:
      return cast_program(chip, dtype_at(v, s::kCastFrom), dtype_at(v, s::kCastTo),
                          count_at(v, s::kCastN));
    case Codelet::kCopy:
      return copy_program(chip, count_at(v, s::kCopyBytes));
    case Codelet::kDynamicSlice:
      return slice_program(chip, dtype_at(v, s::kSliceDType), count_at(v, s::kSliceElems),
                           count_at(v, s::kSliceCopies));
    case Codelet::kMap:
      return map_program(chip, dtype_at(v, s::kMapDType), count_at(v, s::kMapN),
                         count_at(v, s::kMapOpCycles));
    case Codelet::kTranspose:
      return transpose_program(chip, dtype_at(v, s::kTransposeDType), count_at(v, s::kTransposeN));
    case Codelet::kBroadcastBinary:
      return broadcast_binary_program(chip, op_at(v, s::kBroadcastOp),
                                      dtype_at(v, s::kBroadcastDType), count_at(v, s::kBroadcastN));
    case Codelet::kAmpSlic:
    case Codelet::kConvHmac:
      throw ModelError("tile model: " + std::string(trace::codelet_spec(v.codelet).name) +
                       " has no instruction-level program (has_isa_program)");
  }
  throw ModelError("tile model: unknown codelet");
}

bool has_isa_program(trace::Codelet c) {
  return c != trace::Codelet::kAmpSlic && c != trace::Codelet::kConvHmac;
}

std::uint64_t isa_vertex_cycles(const ChipSpec& chip, const trace::Vertex& v) {
  std::vector<double> key = chip_key(chip);
  key.push_back(static_cast<double>(v.codelet));
  for (const std::int64_t p : v.params) key.push_back(static_cast<double>(p));
  {
    std::lock_guard<std::mutex> lock(memo_mutex());
    const auto it = memo().find(key);
    if (it != memo().end()) return it->second;
  }
  const u64 cycles = supervisor_cycles(chip, vertex_program(chip, v));
  std::lock_guard<std::mutex> lock(memo_mutex());
  memo().emplace(std::move(key), cycles);
  return cycles;
}

std::size_t isa_memo_size() {
  std::lock_guard<std::mutex> lock(memo_mutex());
  return memo().size();
}

}  // namespace ipusim::tile
