// SPDX-License-Identifier: Apache-2.0
// Configuration-space explorer (issue 16, "close the classes" item 3; docs/reliability.md).
// Random chip, system and run parameters are drawn from the ranges their schemas declare
// (chip_schema(), system_schema(), compiler::run_schema(): a parameter added to a schema is
// explored without touching this file), seeded and deterministic. Each point runs one or two
// reference kernels (`ipusim kernel` then `ipusim run`) and, every few points, a reduced workload
// (`ipusim compile` then `ipusim run`), each command under a timeout. Every command must either
// succeed with sane results (stats.json parses; every number finite and non-negative;
// total.cycles > 0 (>= 0 for kernels of syncs only); total.time = total.cycles / chip.clock; shares
// and utilisations in [0, 1]) or fail with one line "error: ..." and a documented exit status (2,
// 3, 4 or 6: docs/errors.md). Never a signal, a hang, an internal error (status 1) or a sanitizer
// report.
//
// The points are split into shards (separate CTest tests, so `ctest -j` runs them side by side).
// IPUSIM_EXPLORER_SEED and IPUSIM_EXPLORER_POINTS (points per shard) override the defaults
// for longer local runs; IPUSIM_EXPLORER_VERBOSE=1 prints every command, its exit status and
// its stderr. On failure the seed, the point and the failing command line are printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_harness.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/chip.hpp"
#include "ipusim/config/config.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/trace/codelet.hpp"
#include "ipusim/trace/program.hpp"
#include "ipusim/util/json_reader.hpp"
#include "ipusim/util/units.hpp"

namespace ipusim::testing {
namespace {

using config::ParamDecl;
using config::ValueKind;

constexpr std::uint64_t kDefaultSeed = 20240616;
constexpr int kShards = 4;
// Points per shard: 4 x 120 = 480 points in the release build (about 30 s on one core);
// fewer under AddressSanitizer, which runs every process several times slower.
constexpr int kPointsPerShard = kUnderAsan ? 30 : 120;
constexpr int kWorkloadEvery = 6;  // every sixth point also compiles and runs a reduced workload
constexpr int kTimeoutSeconds = kUnderAsan ? 300 : 120;  // per command

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// Upper bounds used instead of the declared maximum to keep each point cheap (the declared
// ranges allow chips of 65,536 tiles and systems of a million IPUs; those are exercised by
// dedicated tests, e.g. RoundTwo.LargeCollectiveMemoryIsLinear). Draws stay within
// [declared min, min(declared max, cap)].
const std::map<std::string, double>& caps() {
  static const std::map<std::string, double> c = {
      {"chip.tiles", 2048},        {"chip.exchange.tiles_per_column", 2048},
      {"machine.ipus", 8},         {"system.machines_per_rack", 8},
      {"system.racks", 2},         {"system.host_servers", 8},
      {"run.replicas", 32},        {"run.ipus_per_replica", 2},
      {"run.micro_batch", 16},     {"run.gradient_accumulation", 8},
      {"run.batchnorm_group", 16}, {"run.embedding_serialisation", 8},
  };
  return c;
}

// Lower bounds used instead of the declared minimum where a tiny value makes a point
// needlessly slow rather than exercising anything new.
const std::map<std::string, double>& floors() {
  static const std::map<std::string, double> f = {
      // A clock of 1 MHz with second-long latencies is in range; it only makes cycle counts
      // (not work) larger.
      {"chip.clock", 1e7},
  };
  return f;
}

class Draw {
 public:
  explicit Draw(std::uint64_t seed) : rng_(seed) {}
  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }
  bool chance(double p) { return uniform(0, 1) < p; }
  // Log-uniform in [lo, hi] (lo > 0).
  double log_uniform(double lo, double hi) {
    if (hi <= lo) return lo;
    return std::exp(uniform(std::log(lo), std::log(hi)));
  }
  std::uint64_t count(std::uint64_t lo, std::uint64_t hi) {
    const double v = std::floor(log_uniform(static_cast<double>(std::max<std::uint64_t>(lo, 1)),
                                            static_cast<double>(hi) + 0.999));
    return std::clamp(static_cast<std::uint64_t>(v), lo, hi);
  }
  template <class C>
  const auto& pick(const C& c) {
    return c[std::uniform_int_distribution<std::size_t>(0, c.size() - 1)(rng_)];
  }

 private:
  std::mt19937_64 rng_;
};

// An available-memory proportion, log-uniform over [1e-6, 1], written with enough digits.
std::string proportion(Draw& r) {
  std::ostringstream os;
  os.precision(9);
  os << r.log_uniform(1e-6, 1.0);
  return os.str();
}

// A value for `d`, spelled as a config would spell it, or "" if the parameter is not drawn
// (names, files, free-form strings).
std::string draw_value(Draw& r, const ParamDecl& d) {
  if (d.kind == ValueKind::kString || d.kind == ValueKind::kInclude)
    return d.choices.empty() ? "" : std::string(r.pick(d.choices));
  double lo = d.min, hi = d.max;
  if (auto c = caps().find(d.path); c != caps().end()) hi = std::min(hi, c->second);
  if (auto f = floors().find(d.path); f != floors().end()) lo = std::max(lo, f->second);
  // Either end of the range now and then, otherwise log-uniform (uniform for ratios).
  const double edge = r.uniform(0, 1);
  double v;
  if (edge < 0.05)
    v = lo;
  else if (edge < 0.10)
    v = hi;
  else if (d.kind == ValueKind::kRatio)
    v = r.uniform(lo, hi);
  else
    v = r.log_uniform(std::max(lo, hi * 1e-9), hi);
  switch (d.kind) {
    case ValueKind::kCount: {
      const auto c =
          static_cast<std::uint64_t>(std::clamp(std::round(v), std::ceil(lo), std::floor(hi)));
      return std::to_string(c);
    }
    case ValueKind::kFrequency:
      return format(Frequency{v});
    case ValueKind::kBytes:
      return format(Bytes{static_cast<std::uint64_t>(std::round(v))});
    case ValueKind::kCycles:
      return format(Cycles{static_cast<std::uint64_t>(std::round(v))});
    case ValueKind::kBytesPerCycle:
      return format(BytesPerCycle{v});
    case ValueKind::kBandwidth:
      return format(Bandwidth{v});
    case ValueKind::kDuration:
      return format(Duration{v});
    default: {
      std::ostringstream s;
      s.precision(6);
      s << v;
      return s.str();
    }
  }
}

// --set options for a random subset of `schema`'s parameters whose path starts with one of
// `prefixes` (each drawn with probability `p`), recorded in `values`.
std::string draw_sets(Draw& r, const config::Schema& schema,
                      const std::vector<std::string>& prefixes, double p,
                      std::map<std::string, std::string>& values) {
  std::string out;
  for (const auto& d : schema.params()) {
    if (std::none_of(prefixes.begin(), prefixes.end(),
                     [&](const std::string& x) { return d.path.rfind(x, 0) == 0; }))
      continue;
    if (!r.chance(p)) continue;
    const std::string v = draw_value(r, d);
    if (v.empty()) continue;
    values[d.path] = v;
    out += " --set " + shell_quote(d.path + "=" + v);
  }
  return out;
}

std::uint64_t value_or(const std::map<std::string, std::string>& values, const std::string& key,
                       std::uint64_t fallback) {
  auto it = values.find(key);
  return it == values.end() ? fallback : std::strtoull(it->second.c_str(), nullptr, 10);
}

// One command of a point and what came of it.
struct Outcome {
  std::string command;
  CommandResult result;
};

// Runs `ipusim ARGS` under a timeout. Status 124 is the timeout; 128 + N a signal.
Outcome run_ipusim(const std::string& args) {
  const std::string timeout = "timeout -k 10 " + std::to_string(kTimeoutSeconds) + " ";
  TempDir tmp;
  Outcome o;
  o.command = "ipusim " + args;
  const std::string cmd = "SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 " + timeout + IPUSIM_BINARY + " " +
                          args + " >" + tmp.file("out") + " 2>" + tmp.file("err") + " </dev/null";
  const int raw = std::system(cmd.c_str());
  o.result.status =
      WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + (WIFSIGNALED(raw) ? WTERMSIG(raw) : 0);
  o.result.out = read_all(tmp.file("out"));
  o.result.err = without_asan_stack_warning(read_all(tmp.file("err")));
  if (std::getenv("IPUSIM_EXPLORER_VERBOSE"))
    std::printf("[%d] %s\n%s", o.result.status, o.command.c_str(), o.result.err.c_str());
  return o;
}

// "" if `o` is acceptable (success, or a one-line error with a documented status), else why not.
std::string judge_status(const Outcome& o) {
  const int s = o.result.status;
  if (s == 0) return "";
  if (s == 124) return "timed out after " + std::to_string(kTimeoutSeconds) + " s (a hang?)";
  if (s > 128) return "killed by signal " + std::to_string(s - 128);
  if (s != 2 && s != 3 && s != 4 && s != 6)
    return "exit status " + std::to_string(s) + " is not a documented error status";
  // Warnings may come first ("ipusim run: warning: ...": a drawn --set key of links the drawn
  // system lacks, docs/topology.md); then exactly one error line.
  std::string err = o.result.err;
  while (err.rfind("ipusim ", 0) == 0 && err.find(": warning: ") < err.find('\n'))
    err.erase(0, err.find('\n') + 1);
  if (err.rfind("error: ", 0) != 0 || err.find('\n') != err.size() - 1)
    return "status " + std::to_string(s) + " without exactly one line \"error: ...\" on stderr";
  return "";
}

// Checks every number of stats.json; "" if sane, else what is wrong.
// `may_be_zero`: a kernel of syncs only, whose time is the drawn sync latencies (which may be 0).
std::string judge_stats(const std::string& text, bool may_be_zero = false) {
  JsonValue root;
  try {
    root = parse_json(text, "stats.json");
  } catch (const std::exception& e) {
    return std::string("stats.json does not parse: ") + e.what();
  }
  std::string problem;
  // Walks the document; `unit` is the unit of the quantity a "value" belongs to.
  auto walk = [&](auto&& self, const JsonValue& v, const std::string& path) -> void {
    if (!problem.empty()) return;
    if (v.kind == JsonValue::Kind::kNumber) {
      if (!std::isfinite(v.number.d)) problem = path + " is not finite: " + v.number.text;
      return;
    }
    if (v.kind == JsonValue::Kind::kArray) {
      for (std::size_t i = 0; i < v.items.size(); ++i)
        self(self, v.items[i], path + "[" + std::to_string(i) + "]");
      return;
    }
    if (v.kind != JsonValue::Kind::kObject) return;
    const auto* value = v.find("value");
    const auto* unit = v.find("unit");
    if (value && unit && value->kind == JsonValue::Kind::kNumber) {
      const double x = value->number.d;
      if (!std::isfinite(x)) {
        problem = path + " is not finite";
        return;
      }
      if (x < 0) {
        problem = path + " is negative: " + value->number.text;
        return;
      }
      // Shares and link utilisations are at most 1. Throughput utilisations, the run's and
      // each layer's, are fractions of the FP16.16 peak, which a drawn chip may make lower than
      // its FP16.32 or FP32 peak (engines_half_float > engines_half_half is in range): not
      // checked, docs/reliability.md.
      const bool of_fp16_peak =
          path.rfind("throughput.", 0) == 0 || path.ends_with(".compute_phase_utilisation");
      const bool fraction = unit->string.rfind("fraction", 0) == 0 && !of_fp16_peak;
      if (fraction && x > 1 + 1e-9)
        problem = path + " (" + unit->string + ") exceeds 1: " + value->number.text;
      return;
    }
    for (const auto& m : v.members) self(self, m.value, path.empty() ? m.key : path + "." + m.key);
  };
  walk(walk, root, "");
  if (!problem.empty()) return problem;
  const auto* cycles = json_field(root, "total.cycles");
  const auto* total_time = json_field(root, "total.time");
  const auto* chip_clock = json_field(root, "chip.clock");
  if (!cycles || !total_time || !chip_clock)
    return "stats.json lacks total.cycles, total.time or chip.clock";
  if (!(cycles->number.d > 0) && !(may_be_zero && cycles->number.d == 0))
    return "total.cycles is not positive: " + cycles->number.text;
  if (!(chip_clock->number.d > 0)) return "chip.clock is not positive";
  const double expect = cycles->number.d / chip_clock->number.d;
  if (std::abs(total_time->number.d - expect) > 1e-6 * expect)
    return "total.time " + total_time->number.text +
           " s is not total.cycles / chip.clock = " + std::to_string(expect) + " s";
  return "";
}

struct PointReport {
  std::string description;
  std::vector<std::string> failures;
  int commands = 0, errors = 0;
};

// `kernel ARGS`, then `run` of its trace; both judged.
void kernel_then_run(PointReport& rep, const TempDir& dir, const std::string& kernel_args,
                     const std::string& chip_sets, const std::string& run_args, int n) {
  const std::string trace = dir.file("k" + std::to_string(n) + ".trace");
  const std::string out = dir.file("run-k" + std::to_string(n));
  const Outcome k = run_ipusim("kernel " + kernel_args + chip_sets + " --out " + trace);
  ++rep.commands;
  if (auto why = judge_status(k); !why.empty()) {
    rep.failures.push_back(why + "\n  command: " + k.command + "\n  stderr: " + k.result.err);
    return;
  }
  if (k.result.status != 0) {
    ++rep.errors;
    return;
  }
  const Outcome r = run_ipusim("run -q" + run_args + " --out " + out + " " + trace);
  ++rep.commands;
  if (auto why = judge_status(r); !why.empty()) {
    rep.failures.push_back(why + "\n  command: " + r.command + "\n  stderr: " + r.result.err);
    return;
  }
  if (r.result.status != 0) {
    ++rep.errors;
    return;
  }
  const bool syncs_only = kernel_args.rfind("sync", 0) == 0;  // sync, sync-loop
  if (auto why = judge_stats(read_all(out + "/stats.json"), syncs_only); !why.empty())
    rep.failures.push_back(why + "\n  command: " + r.command);
}

std::string single_chip_kernel(Draw& r, std::uint64_t tiles) {
  static const std::vector<std::string> kinds = {
      "matmul",   "conv2d", "reduce", "elementwise", "exchange-all-to-all", "exchange-broadcast",
      "sync-loop"};
  const std::string k = r.pick(kinds);
  std::string a = k;
  const auto num = [&](const char* opt, std::uint64_t lo, std::uint64_t hi) {
    a += std::string(" --") + opt + " " + std::to_string(r.count(lo, hi));
  };
  if (r.chance(0.3)) a += " --dtype float";
  if (k == "matmul" || k == "conv2d") {
    if (r.chance(0.3)) a += " --pass training";
    if (r.chance(0.3)) a += " --partials float";
    // Log-uniform over (1e-6, 1]: tiny proportions once hung the planner (issue 16, D).
    if (r.chance(0.5)) a += " --available-memory " + proportion(r);
  }
  if (k == "matmul") {
    num("m", 1, 512);
    num("n", 1, 512);
    num("k", 1, 512);
    if (r.chance(0.2)) num("groups", 1, 8);
  } else if (k == "conv2d") {
    num("batch", 1, 4);
    num("channels", 1, 64);
    num("height", 1, 32);
    num("width", 1, 32);
    num("filters", 1, 64);
    num("kernel", 1, 3);
    num("stride", 1, 2);
  } else if (k == "reduce") {
    num("outputs", 1, 4096);
    num("inputs", 1, 64);
  } else if (k == "elementwise") {
    a += " --op " + std::string(r.pick(trace::kOpNames));
    num("n", 1, 100000);
  } else if (k == "exchange-all-to-all") {
    num("bytes", 1, 4096);
    if (r.chance(0.7)) num("tiles", 1, std::min<std::uint64_t>(tiles, 64));
  } else if (k == "exchange-broadcast") {
    num("bytes", 1, 65536);
    const std::uint64_t t = r.count(1, tiles);
    a += " --tiles " + std::to_string(t) + " --src " + std::to_string(r.count(1, t) - 1);
  } else {
    num("iterations", 1, 1000);
  }
  return a;
}

std::string system_kernel(Draw& r, std::uint64_t ipus) {
  static const std::vector<std::string> kinds = {"link-p2p", "allreduce", "collective", "sync"};
  const std::string k = r.pick(kinds);
  std::string a = k;
  const std::uint64_t group = r.count(1, std::max<std::uint64_t>(ipus, 1));
  if (k == "link-p2p") {
    a += " --bytes " + std::to_string(r.count(1, 1 << 20)) + " --src-ipu " +
         std::to_string(r.count(1, ipus) - 1) + " --dst-ipu " +
         std::to_string(r.count(1, ipus) - 1);
  } else if (k == "allreduce" || k == "collective") {
    if (k == "collective") a += " --collective " + std::string(r.pick(trace::kCollectiveOpNames));
    a += " --bytes " + std::to_string(r.count(1, 1 << 22)) + " --group " + std::to_string(group);
    if (r.chance(0.7)) a += " --method " + std::string(r.pick(trace::kCollectiveMethodNames));
    if (r.chance(0.3)) a += " --dtype float";
  } else {
    a += " --group " + std::to_string(group) + " --iterations " + std::to_string(r.count(1, 100));
  }
  return a;
}

PointReport run_point(std::uint64_t seed, int index) {
  Draw r(seed * 1000003 + static_cast<std::uint64_t>(index));
  PointReport rep;
  TempDir dir;
  const std::string systems = source_dir() + "/configs/systems/";
  // One point in ten changes every parameter; the others about a quarter of them.
  const double p = r.chance(0.1) ? 1.0 : 0.25;
  std::map<std::string, std::string> values;
  const std::string chip_sets = draw_sets(r, chip_schema(), {"chip."}, p, values);
  const std::uint64_t tiles = value_or(values, "chip.tiles", 1472);

  // 1. A single-chip kernel on the drawn chip.
  const std::string k1 = single_chip_kernel(r, tiles);
  rep.description += "kernel " + k1 + chip_sets;
  kernel_then_run(rep, dir, k1, chip_sets, chip_sets, 1);

  // 2. Every other point: a system kernel on a drawn system (POD16 or POD64 with drawn parts).
  std::string system_sets;
  const std::string system = systems + (r.chance(0.7) ? "pod16.yaml" : "pod64.yaml");
  if (index % 2 == 1) {
    system_sets = draw_sets(r, system_schema(), {"machine.", "fabric.", "system."}, p, values);
    const std::uint64_t ipus =
        value_or(values, "machine.ipus", 4) *
        value_or(values, "system.machines_per_rack", system.ends_with("pod16.yaml") ? 4 : 16) *
        value_or(values, "system.racks", 1);
    const std::string k2 = system_kernel(r, std::min<std::uint64_t>(ipus, 64));
    rep.description += "\n  kernel " + k2 + chip_sets + " --system " + system + system_sets;
    kernel_then_run(rep, dir, k2, chip_sets, " --system " + system + chip_sets + system_sets, 2);
  }

  // 3. Every kWorkloadEvery-th point: a reduced workload with drawn run parameters.
  if (index % kWorkloadEvery == 0) {
    const bool bert = (index / kWorkloadEvery) % 2 == 1;
    const std::string run_file = source_dir() + "/tests/data/workloads/" +
                                 (bert ? "bert_tiny-pod16.yaml" : "resnet_tiny-pod16.yaml");
    std::map<std::string, std::string> run_values;
    std::string run_sets = draw_sets(r, compiler::run_schema(), {"run."}, p, run_values);
    // Replicas x IPUs per replica must fill the POD16 most of the time to get past the
    // structural checks; otherwise the drawn (usually mismatched) values stand.
    if (r.chance(0.7)) {
      const std::uint64_t per = bert ? 2 : 1;
      run_sets += " --set run.ipus_per_replica=" + std::to_string(per) +
                  " --set run.replicas=" + std::to_string(16 / per);
      if (bert) run_sets += " --set " + shell_quote("run.pipeline_placement=ipu1=1,1 ipu0=1,1");
    }
    run_sets += " --set run.available_memory_proportion=" + proportion(r);
    const std::string itb = dir.file("w.itb");
    const std::string out = dir.file("run-w");
    const Outcome c =
        run_ipusim("compile --run " + run_file + chip_sets + run_sets + " --out " + itb);
    rep.description += "\n  compile --run " + run_file + chip_sets + run_sets;
    ++rep.commands;
    if (auto why = judge_status(c); !why.empty()) {
      rep.failures.push_back(why + "\n  command: " + c.command + "\n  stderr: " + c.result.err);
    } else if (c.result.status != 0) {
      ++rep.errors;
    } else {
      const Outcome w = run_ipusim("run -q --system " + systems + "pod16.yaml" + chip_sets +
                                   " --out " + out + " " + itb);
      ++rep.commands;
      if (auto why_run = judge_status(w); !why_run.empty())
        rep.failures.push_back(why_run + "\n  command: " + w.command +
                               "\n  stderr: " + w.result.err);
      else if (w.result.status != 0)
        ++rep.errors;
      else if (auto bad = judge_stats(read_all(out + "/stats.json")); !bad.empty())
        rep.failures.push_back(bad + "\n  command: " + w.command);
    }
  }
  return rep;
}

class Explorer : public ::testing::TestWithParam<int> {};

TEST_P(Explorer, EveryPointSucceedsSanelyOrFailsCleanly) {
  const std::uint64_t seed = env_number("IPUSIM_EXPLORER_SEED", kDefaultSeed);
  const int points = static_cast<int>(env_number("IPUSIM_EXPLORER_POINTS", kPointsPerShard));
  const int shard = GetParam();
  int commands = 0, errors = 0, failed = 0;
  for (int i = 0; i < points; ++i) {
    const int index = shard + kShards * i;
    const PointReport rep = run_point(seed, index);
    commands += rep.commands;
    errors += rep.errors;
    if (!rep.failures.empty()) ++failed;
    for (const auto& f : rep.failures)
      ADD_FAILURE() << "explorer seed " << seed << " point " << index << ": " << f
                    << "\n  point: " << rep.description;
  }
  std::printf(
      "explorer seed %llu shard %d: %d points, %d commands, %d clean errors, %d failing points\n",
      static_cast<unsigned long long>(seed), shard, points, commands, errors, failed);
}

INSTANTIATE_TEST_SUITE_P(Shards, Explorer, ::testing::Range(0, kShards));

}  // namespace
}  // namespace ipusim::testing
