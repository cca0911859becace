// SPDX-License-Identifier: Apache-2.0
#include "ipusim/trace/program.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <concepts>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "ipusim/util/error.hpp"

namespace ipusim::trace {

std::string group_name(Group g) {
  std::string out(kGroupKindNames[static_cast<std::size_t>(g.kind)]);
  if (g.size != 0) out += fmt::format(":{}", g.size);
  if (g.stride > 1) out += fmt::format("/{}", g.stride);
  return out;
}

std::string layers_label(const Provenance& p) {
  if (p.layers.empty()) return "";
  std::string all;
  for (const auto& l : p.layers) all += (all.empty() ? "" : "+") + l;
  if (all.size() <= 30 || p.layers.size() == 1) return all;
  return p.layers.front() + " (+" + std::to_string(p.layers.size() - 1) + " more)";
}

std::string_view pass_label(const Provenance& p) {
  return p.pass == Pass::kNone ? std::string_view() : kPassNames[static_cast<std::size_t>(p.pass)];
}

const std::string* find_meta(const Meta& meta, std::string_view key) {
  for (const auto& [k, v] : meta)
    if (k == key) return &v;
  return nullptr;
}
namespace {

constexpr std::array<std::string_view, 7> kStepKindNames{
    "compute", "sync", "exchange", "host", "repeat", "global_exchange", "collective"};

std::string range_text(TileRange r) {
  return r.first == r.last ? fmt::format("tile {}", r.first)
                           : fmt::format("tiles {}..{}", r.first, r.last);
}

std::string step_path(const std::vector<std::size_t>& path) {
  std::string out;
  for (std::size_t i : path) out += (out.empty() ? "" : ".") + std::to_string(i);
  return out;
}

// Prefix naming the IPU, only when the trace has several (single-IPU messages stay short).
std::string ipu_prefix(const Trace& trace, const IpuProgram& ipu) {
  return trace.ipus.size() > 1 ? fmt::format("ipu {} ", ipu.ipu) : std::string();
}

// Checks shared by every structural item.
class StructureChecker {
 public:
  StructureChecker(const Trace& trace, const std::string& origin, bool check_overlaps = true)
      : trace_(trace), origin_(origin), check_overlaps_(check_overlaps) {}

  void run() {
    if (trace_.version < kOldestFormatVersion || trace_.version > kFormatVersion)
      fail(fmt::format(
          "trace format version {} is not supported (this build handles versions {} to {})",
          trace_.version, kOldestFormatVersion, kFormatVersion));
    if (trace_.replicas < 1 || trace_.replicas > kMaxReplicas)
      fail(fmt::format("trace has {} replicas, expected 1..{}", trace_.replicas, kMaxReplicas));
    std::set<std::string_view> keys;
    for (const auto& [key, value] : trace_.meta) {
      if (!is_valid_name(key) || !is_valid_name(value))
        fail(fmt::format("meta '{}' = '{}' is not a valid name pair {}", key, value, kNameRule));
      if (!keys.insert(key).second) fail(fmt::format("meta key '{}' appears twice", key));
    }
    std::set<std::string_view> names;
    for (const GlobalExchange& g : trace_.global_exchanges) {
      check_name("global exchange", g.name, names);
      check_provenance(fmt::format("global exchange '{}'", g.name), g.provenance);
      for (std::size_t i = 0; i < g.copies.size(); ++i) {
        const IpuCopy& c = g.copies[i];
        const std::string item = fmt::format("global exchange '{}' copy {}", g.name, i);
        if (c.src >= kMaxIpus || c.dst >= kMaxIpus)
          fail(fmt::format("{} copies IPU {} to IPU {}, expected IPU indices 0..{}", item, c.src,
                           c.dst, kMaxIpus - 1));
        if (c.src == c.dst) fail(fmt::format("{} copies IPU {} to itself", item, c.src));
        check_count(item, "bytes", c.bytes);
      }
    }
    if (!trace_.name.empty() && !is_valid_name(trace_.name))
      fail(fmt::format("trace name '{}' is not a valid name {}", trace_.name, kNameRule));
    if (trace_.ipus.empty()) fail("trace has no IPU programs");
    std::set<std::uint32_t> seen;
    for (const IpuProgram& ipu : trace_.ipus) {
      if (ipu.ipu >= kMaxIpus)
        fail(fmt::format("ipu {}: expected an IPU index 0..{}", ipu.ipu, kMaxIpus - 1));
      if (!seen.insert(ipu.ipu).second) fail(fmt::format("ipu {} appears twice", ipu.ipu));
      check_ipu(ipu);
    }
  }

 private:
  static constexpr std::string_view kNameRule =
      "(names are 1..4096 characters from [A-Za-z0-9_.:/-])";

  [[noreturn]] void fail(const std::string& what) const {
    throw TraceError(fmt::format("{}: {}", origin_, what));
  }

  void check_name(const std::string& item, const std::string& name,
                  std::set<std::string_view>& seen) const {
    if (!is_valid_name(name))
      fail(fmt::format("{}{} '{}' has an invalid name {}", prefix_, item, name, kNameRule));
    if (!seen.insert(name).second)
      fail(fmt::format("{}two {}s are named '{}'", prefix_, item, name));
  }

  // An item's description, either a string or a function that makes it (only on failure:
  // the checks run for every vertex and transfer of multi-million-item traces).
  static const std::string& describe(const std::string& item) { return item; }
  template <std::invocable F>
  static std::string describe(const F& item) {
    return item();
  }

  template <typename Item>
  void check_range(const Item& item, TileRange r) const {
    if (r.first > r.last)
      fail(fmt::format("{}{} has tile range {}..{} with first > last", prefix_, describe(item),
                       r.first, r.last));
  }

  template <typename Item>
  void check_count(const Item& item, std::string_view field, std::uint64_t value,
                   std::uint64_t min = 0) const {
    if (value < min || value > static_cast<std::uint64_t>(kMaxCount))
      fail(fmt::format("{}{} has {} = {}, expected {}..{}", prefix_, describe(item), field, value,
                       min, kMaxCount));
  }

  template <typename Item>
  void check_provenance(const Item& item, const Provenance& p) const {
    if (static_cast<std::size_t>(p.pass) >= kPassNames.size() ||
        static_cast<std::size_t>(p.op) >= kOpKindNames.size())
      fail(fmt::format("{}{} has an invalid provenance pass or op", prefix_, describe(item)));
    if (p.layers.size() > kMaxProvenanceLayers)
      fail(fmt::format("{}{} names {} layers, expected at most {}", prefix_, describe(item),
                       p.layers.size(), kMaxProvenanceLayers));
    std::set<std::string_view> seen;
    for (const std::string& layer : p.layers) {
      if (!is_valid_name(layer))
        fail(fmt::format("{}{} has an invalid layer name '{}' {}", prefix_, describe(item), layer,
                         kNameRule));
      if (!seen.insert(layer).second)
        fail(fmt::format("{}{} names layer '{}' twice", prefix_, describe(item), layer));
    }
  }

  template <typename Item>
  void check_run(const Item& item, std::optional<std::string> problem) const {
    if (problem) fail(fmt::format("{}{} {}", prefix_, describe(item), *problem));
  }

  void check_ipu(const IpuProgram& ipu) {
    prefix_ = ipu_prefix(trace_, ipu);
    std::set<std::string_view> names;
    for (const Tensor& t : ipu.tensors) {
      const std::string item = fmt::format("tensor '{}'", t.name);
      check_name("tensor", t.name, names);
      if (static_cast<std::size_t>(t.kind) >= kTensorKindNames.size())
        fail(fmt::format("{}{} has invalid kind {}", prefix_, item, static_cast<int>(t.kind)));
      if (static_cast<std::size_t>(t.dtype) >= kDTypeNames.size())
        fail(fmt::format("{}{} has invalid dtype {}", prefix_, item, static_cast<int>(t.dtype)));
      check_range(item, t.tiles);
      check_count(item, "bytes", t.bytes_per_tile);
    }
    names.clear();
    for (const ComputeSet& cs : ipu.compute_sets) {
      check_name("compute set", cs.name, names);
      check_provenance(fmt::format("compute set '{}'", cs.name), cs.provenance);
      for (std::size_t i = 0; i < cs.vertices.size(); ++i) check_vertex(cs, i);
    }
    names.clear();
    for (const Exchange& ex : ipu.exchanges) {
      check_name("exchange", ex.name, names);
      check_provenance(fmt::format("exchange '{}'", ex.name), ex.provenance);
      check_exchange(ex);
    }
    std::vector<std::size_t> path;
    check_steps(ipu, ipu.steps, path);
    check_lifetimes(ipu);
  }

  // A lifetime lies within the program's positions (after check_steps: nesting is bounded).
  void check_lifetimes(const IpuProgram& ipu) const {
    std::optional<std::uint64_t> positions;
    for (const Tensor& t : ipu.tensors) {
      if (!t.live) continue;
      if (t.live->first > t.live->last)
        fail(fmt::format("{}tensor '{}' is live at positions {}..{}, expected first <= last",
                         prefix_, t.name, t.live->first, t.live->last));
      if (!positions) positions = program_positions(ipu.steps);
      if (t.live->last >= *positions)
        fail(fmt::format(
            "{}tensor '{}' is live at positions {}..{}, but the program has {} position(s){}",
            prefix_, t.name, t.live->first, t.live->last, *positions,
            *positions == 0 ? "" : fmt::format(" (0..{})", *positions - 1)));
    }
  }

  void check_vertex(const ComputeSet& cs, std::size_t index) const {
    const Vertex& v = cs.vertices[index];
    const auto item = [&] { return fmt::format("compute set '{}' vertex {}", cs.name, index); };
    if (static_cast<std::size_t>(v.codelet) >= kCodeletCount)
      fail(
          fmt::format("{}{} has unknown codelet {}", prefix_, item(), static_cast<int>(v.codelet)));
    check_range(item, v.tiles);
    check_run(item, run_problem(v));
    const CodeletSpec& spec = codelet_spec(v.codelet);
    for (std::size_t p = 0; p < kMaxVertexParams; ++p) {
      if (p >= spec.params.size()) {
        if (v.params[p] != 0)
          fail(fmt::format("{}{} ({}) has a non-zero value {} in unused parameter slot {}", prefix_,
                           item(), spec.name, v.params[p], p));
        continue;
      }
      if (auto problem = param_problem(v.codelet, p, v.params[p]))
        fail(fmt::format("{}{}: {}", prefix_, item(), *problem));
    }
  }

  void check_exchange(const Exchange& ex) const {
    std::uint64_t next = 0;
    for (std::size_t i = 0; i < ex.transfers.size(); ++i) {
      const Transfer& t = ex.transfers[i];
      const auto item = [&] { return fmt::format("exchange '{}' transfer {}", ex.name, i); };
      check_range([&] { return item() + " source"; }, t.src);
      check_count(item, "bytes", t.bytes);
      if ((t.count != 1 || t.src_step != 0 || t.dst_step != 0 || t.bytes_step != 0) &&
          t.dst_first + std::uint64_t{t.dst_count} <= ex.dst_pool.size())
        check_run(item, run_problem(t, ex.destinations(t)));
      if (static_cast<std::size_t>(t.mode) >= kTransferModeNames.size())
        fail(fmt::format("{}{} has invalid mode {}", prefix_, item(), static_cast<int>(t.mode)));
      if (t.dst_count == 0) fail(fmt::format("{}{} has no destinations", prefix_, item()));
      if (t.dst_first != next)
        fail(
            fmt::format("{}{} destinations start at pool index {}, expected {} (destination "
                        "ranges must be stored back to back in transfer order, as "
                        "Exchange::add does)",
                        prefix_, item(), t.dst_first, next));
      next += t.dst_count;
      if (next > ex.dst_pool.size())
        fail(fmt::format("{}{} destinations run past the end of the pool ({} ranges)", prefix_,
                         item(), ex.dst_pool.size()));
      for (const TileRange& r : ex.destinations(t))
        check_range([&] { return item() + " destination"; }, r);
      if (!check_overlaps_) continue;
      if (auto tile = first_shared_tile(ex.destinations(t)))
        fail(
            fmt::format("{}{} lists destination tile {} twice (destination ranges must not "
                        "overlap)",
                        prefix_, item(), *tile));
    }
    if (next != ex.dst_pool.size())
      fail(fmt::format("{}exchange '{}' has {} unused destination ranges in its pool", prefix_,
                       ex.name, ex.dst_pool.size() - next));
    for (std::size_t i = 0; i < ex.moves.size(); ++i)
      if (auto problem = move_problem(ex.moves[i]))
        fail(fmt::format("{}exchange '{}' move {} {}", prefix_, ex.name, i, *problem));
    for (std::size_t i = 0; i < ex.reduce_scatters.size(); ++i)
      if (auto problem = reduce_scatter_problem(ex.reduce_scatters[i]))
        fail(fmt::format("{}exchange '{}' reduce_scatter {} {}", prefix_, ex.name, i, *problem));
  }

  void check_steps(const IpuProgram& ipu, const std::vector<Step>& steps,
                   std::vector<std::size_t>& path) const {
    for (std::size_t i = 0; i < steps.size(); ++i) {
      path.push_back(i);
      const Step& s = steps[i];
      const auto kind = static_cast<std::size_t>(s.kind);
      if (kind >= kStepKindNames.size())
        fail(fmt::format("{}program step {} has unknown kind {}", prefix_, step_path(path), kind));
      // Described only on failure (a compiled program has tens of thousands of steps).
      const auto item = [&] {
        return fmt::format("program step {} ({})", step_path(path), kStepKindNames[kind]);
      };
      const Step defaults;
      const bool uses_index = s.kind == StepKind::kCompute || s.kind == StepKind::kExchange ||
                              s.kind == StepKind::kGlobalExchange;
      const bool uses_host = s.kind == StepKind::kHost;
      // A compute or exchange step may carry the pass it runs in (v4), nothing else.
      const bool runs_item = s.kind == StepKind::kCompute || s.kind == StepKind::kExchange;
      const bool uses_repeat = s.kind == StepKind::kRepeat;
      const bool uses_collective = s.kind == StepKind::kCollective;
      const bool uses_group = s.kind == StepKind::kSync || uses_collective;
      if ((!uses_index && s.index != 0) || (!uses_repeat && (s.count != 0 || !s.body.empty())) ||
          (!uses_host && !uses_collective && s.bytes != 0) ||
          (!uses_host && (s.tiles != defaults.tiles || s.direction != defaults.direction ||
                          s.memory != defaults.memory || s.overlap != defaults.overlap)) ||
          (!uses_group && s.group != defaults.group) ||
          (!uses_collective && (s.collective != defaults.collective ||
                                s.method != defaults.method || s.dtype != defaults.dtype)) ||
          (!uses_host && !uses_collective && !runs_item && !s.provenance.empty()) ||
          (runs_item && (!s.provenance.layers.empty() || s.provenance.op != OpKind::kNone)))
        fail(
            fmt::format("{}{} sets fields that its kind does not use (they must stay at their "
                        "defaults)",
                        prefix_, describe(item)));
      check_provenance(item, s.provenance);
      switch (s.kind) {
        case StepKind::kCompute:
          if (s.index >= ipu.compute_sets.size())
            fail(fmt::format("{}{} refers to compute set {} but there are {}", prefix_,
                             describe(item), s.index, ipu.compute_sets.size()));
          break;
        case StepKind::kExchange:
          if (s.index >= ipu.exchanges.size())
            fail(fmt::format("{}{} refers to exchange {} but there are {}", prefix_, describe(item),
                             s.index, ipu.exchanges.size()));
          break;
        case StepKind::kSync:
          check_group(item, s.group, true);
          break;
        case StepKind::kGlobalExchange:
          if (s.index >= trace_.global_exchanges.size())
            fail(fmt::format("{}{} refers to global exchange {} but there are {}", prefix_,
                             describe(item), s.index, trace_.global_exchanges.size()));
          break;
        case StepKind::kCollective:
          check_group(item, s.group, false);
          if (static_cast<std::size_t>(s.collective) >= kCollectiveOpNames.size() ||
              static_cast<std::size_t>(s.method) >= kCollectiveMethodNames.size() ||
              static_cast<std::size_t>(s.dtype) >= kDTypeNames.size())
            fail(fmt::format("{}{} has an invalid operation, method or dtype", prefix_,
                             describe(item)));
          check_count(item, "bytes", s.bytes);
          break;
        case StepKind::kHost:
          if (static_cast<std::size_t>(s.direction) >= kHostDirectionNames.size() ||
              static_cast<std::size_t>(s.memory) >= kHostMemoryNames.size())
            fail(fmt::format("{}{} has invalid direction or memory", prefix_, describe(item)));
          check_range(item, s.tiles);
          check_count(item, "bytes", s.bytes);
          break;
        case StepKind::kRepeat:
          check_count(item, "count", s.count, 1);
          if (path.size() > kMaxRepeatDepth)
            fail(fmt::format("{}{} nests repeats deeper than {} levels", prefix_, describe(item),
                             kMaxRepeatDepth));
          check_steps(ipu, s.body, path);
          break;
      }
      path.pop_back();
    }
  }

  template <typename Item>
  void check_group(const Item& item, Group g, bool tile_allowed) const {
    if (static_cast<std::size_t>(g.kind) >= kGroupKindNames.size())
      fail(fmt::format("{}{} has an invalid group", prefix_, describe(item)));
    if (g.kind == GroupKind::kTile && !tile_allowed)
      fail(fmt::format("{}{} needs a group of IPUs (replica, all or replicas), found tile", prefix_,
                       describe(item)));
    if (g.kind != GroupKind::kReplicas && g.kind != GroupKind::kReplica && g.size != 0)
      fail(fmt::format("{}{} gives a group size, which only 'replicas' and 'replica' take", prefix_,
                       describe(item)));
    if ((g.kind == GroupKind::kReplica && g.size != 0) != (g.stride != 0))
      fail(
          fmt::format("{}{} gives a group stride of {} with a size of {}: a stride goes with "
                      "a 'replica' group's size",
                      prefix_, describe(item), g.stride, g.size));
    if (g.kind == GroupKind::kReplica && g.size != 0) {
      // Blocks of size x stride programs tile the replica.
      const std::uint64_t block = std::uint64_t{g.size} * g.stride;
      if (!programs_) programs_ = trace_.ipus_per_replica();
      const std::uint32_t p = *programs_;
      if (p % block != 0)
        fail(
            fmt::format("{}{} groups {} IPUs {} apart (blocks of {}), which does not divide "
                        "the replica's {} IPUs",
                        prefix_, describe(item), g.size, g.stride, block, p));
    }
    if (g.kind == GroupKind::kReplicas && g.size != 0 && trace_.replicas % g.size != 0)
      fail(fmt::format("{}{} groups replicas in {}s, which does not divide the {} replicas",
                       prefix_, describe(item), g.size, trace_.replicas));
  }

  const Trace& trace_;
  const std::string& origin_;
  bool check_overlaps_ = true;
  std::string prefix_;
  mutable std::optional<std::uint32_t> programs_;  // trace_.ipus_per_replica(), when needed
};

class TileChecker {
 public:
  TileChecker(std::uint32_t tile_count, const std::string& origin)
      : tile_count_(tile_count), origin_(origin) {}

  // `r` shifted by 0..count-1 steps (a run): checks its extreme positions.
  void check(const std::string& item, std::string_view verb, TileRange r, std::uint32_t count = 1,
             std::int64_t step = 0) const {
    if (count > 1 && step != 0) {
      const TileRange a{Transfer::shift(r.first, step, count - 1),
                        Transfer::shift(r.last, step, count - 1)};
      if (step > 0) r = a;
    }
    if (r.last < tile_count_) return;
    throw TraceError(fmt::format("{}: {}{} {} {} but the chip has {} tiles", origin_, prefix_, item,
                                 verb, range_text(r), tile_count_));
  }

  void check_steps(const std::vector<Step>& steps, std::vector<std::size_t>& path) const {
    for (std::size_t i = 0; i < steps.size(); ++i) {
      path.push_back(i);
      const Step& s = steps[i];
      if (s.kind == StepKind::kHost)
        check(fmt::format("program step {} (host)", step_path(path)), "uses", s.tiles);
      if (s.kind == StepKind::kRepeat) check_steps(s.body, path);
      path.pop_back();
    }
  }

  std::string prefix_;

 private:
  std::uint32_t tile_count_;
  const std::string& origin_;
};

}  // namespace

namespace {

// A run (v3): count >= 1; a single record (count 1) has zero steps; every shifted tile range
// stays within 0..2^32-1 and the bytes within 0..kMaxCount for every member of the run.
// Each check tests integers and builds a message only for a run that breaks it (every transfer
// and vertex of a program is checked).
const char* count_problem(std::uint32_t count, bool any_step) {  // nullptr: none
  if (count == 0) return "has count 0, expected at least 1";
  if (count == 1 && any_step)
    return "has count 1 and a non-zero step (a single record has no steps)";
  return nullptr;
}

// 128-bit intermediates: a count times a 64-bit step cannot overflow them (a GCC/Clang
// extension, hence __extension__ for -Wpedantic).
__extension__ using Wide = __int128;

// `r` shifted by 0..count-1 steps stays within the tile indices (count >= 1).
bool range_fits(std::uint32_t count, std::int64_t step, TileRange r) {
  if (step == 0) return true;  // r itself
  const Wide last = count - 1;
  const Wide lo = static_cast<Wide>(r.first) + (step < 0 ? last * step : 0);
  const Wide hi = static_cast<Wide>(r.last) + (step > 0 ? last * step : 0);
  return lo >= 0 && hi <= std::numeric_limits<std::uint32_t>::max();
}

std::string range_problem(std::uint32_t count, std::int64_t step, TileRange r) {
  return fmt::format("steps tile range {}..{} by {} over {} copies, past the tile indices 0..{}",
                     r.first, r.last, step, count, std::numeric_limits<std::uint32_t>::max());
}

}  // namespace

std::optional<std::string> run_problem(const Vertex& v) {
  if (const char* p = count_problem(v.count, v.step != 0)) return p;
  if (!range_fits(v.count, v.step, v.tiles)) return range_problem(v.count, v.step, v.tiles);
  return std::nullopt;
}

std::optional<std::string> run_problem(const Transfer& t, std::span<const TileRange> dst) {
  if (const char* p =
          count_problem(t.count, t.src_step != 0 || t.dst_step != 0 || t.bytes_step != 0))
    return p;
  if (t.count == 1) return std::nullopt;
  if (!range_fits(t.count, t.src_step, t.src)) return range_problem(t.count, t.src_step, t.src);
  for (const TileRange& r : dst)
    if (!range_fits(t.count, t.dst_step, r)) return range_problem(t.count, t.dst_step, r);
  const Wide end = static_cast<Wide>(t.bytes) + static_cast<Wide>(t.count - 1) * t.bytes_step;
  if (end < 0 || end > static_cast<Wide>(kMaxCount))
    return fmt::format("steps bytes {} by {} over {} transfers, past 0..{}", t.bytes, t.bytes_step,
                       t.count, kMaxCount);
  return std::nullopt;
}

std::uint64_t program_positions(const std::vector<Step>& steps) {
  std::uint64_t n = 0;
  for (const Step& s : steps) {
    const std::uint64_t here = 1 + (s.kind == StepKind::kRepeat ? program_positions(s.body) : 0);
    n = here > std::numeric_limits<std::uint64_t>::max() - n
            ? std::numeric_limits<std::uint64_t>::max()
            : n + here;
  }
  return n;
}

std::optional<std::uint32_t> first_shared_tile_of_several(std::span<const TileRange> ranges) {
  // Fast path: ranges in ascending order that do not touch (what the compiler writes).
  bool ordered = true;
  for (std::size_t i = 1; i < ranges.size() && ordered; ++i)
    ordered = ranges[i].first > ranges[i - 1].last && ranges[i - 1].first <= ranges[i - 1].last;
  if (ordered) return std::nullopt;
  std::vector<TileRange> sorted(ranges.begin(), ranges.end());
  std::sort(sorted.begin(), sorted.end(),
            [](TileRange a, TileRange b) { return a.first < b.first; });
  std::optional<std::uint32_t> shared;
  std::uint32_t reach = sorted[0].last;  // highest tile covered so far
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i].first <= reach && (!shared || sorted[i].first < *shared))
      shared = sorted[i].first;
    reach = std::max(reach, sorted[i].last);
  }
  return shared;
}

bool is_valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == ':' || c == '/' || c == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {

// Whether transfer `b` is transfer `a` shifted by `k` x (src, dst, bytes) steps.
bool shifted_by(const Exchange& ex, const Transfer& a, std::int64_t k, std::int64_t src,
                std::int64_t dst, std::int64_t bytes, TileRange b_src,
                std::span<const TileRange> b_dst, std::uint64_t b_bytes, TransferMode b_mode) {
  if (a.mode != b_mode || a.dst_count != b_dst.size() || a.dst_count == 0) return false;
  if (static_cast<std::int64_t>(b_src.first) != a.src.first + k * src ||
      static_cast<std::int64_t>(b_src.last) != a.src.last + k * src ||
      static_cast<std::int64_t>(b_bytes) != static_cast<std::int64_t>(a.bytes) + k * bytes)
    return false;
  const auto da = ex.destinations(a);
  for (std::size_t j = 0; j < da.size(); ++j)
    if (static_cast<std::int64_t>(b_dst[j].first) != da[j].first + k * dst ||
        static_cast<std::int64_t>(b_dst[j].last) != da[j].last + k * dst)
      return false;
  return true;
}

}  // namespace

void Exchange::add_general(TileRange src, std::span<const TileRange> dst, std::uint64_t bytes,
                           TransferMode mode) {
  // add()'s rule in full: extend the last run if this transfer continues it; turn the last
  // two single transfers and this one into a run if the three are affine; else append a
  // single transfer.
  const std::size_t n = transfers.size();
  if (n >= 1) {
    Transfer& last = transfers.back();
    if (last.count >= 2 && last.count < std::numeric_limits<std::uint32_t>::max() &&
        shifted_by(*this, last, last.count, last.src_step, last.dst_step, last.bytes_step, src, dst,
                   bytes, mode)) {
      ++last.count;
      return;
    }
    if (last.count == 1 && n >= 2 && transfers[n - 2].count == 1 && !dst.empty() &&
        last.dst_count == dst.size()) {
      Transfer& a = transfers[n - 2];
      const auto db = destinations(last);
      const std::int64_t s = static_cast<std::int64_t>(last.src.first) - a.src.first;
      const std::int64_t d = static_cast<std::int64_t>(db[0].first) -
                             static_cast<std::int64_t>(dst_pool[a.dst_first].first);
      const std::int64_t b =
          static_cast<std::int64_t>(last.bytes) - static_cast<std::int64_t>(a.bytes);
      if (shifted_by(*this, a, 1, s, d, b, last.src, db, last.bytes, last.mode) &&
          shifted_by(*this, a, 2, s, d, b, src, dst, bytes, mode)) {
        dst_pool.resize(dst_pool.size() - last.dst_count);
        transfers.pop_back();
        Transfer& run = transfers.back();
        run.count = 3;
        run.src_step = s;
        run.dst_step = d;
        run.bytes_step = b;
        return;
      }
    }
  }
  add_run(src, dst, bytes, mode, 1, 0, 0, 0);
}

void Exchange::add_run(TileRange src, std::span<const TileRange> dst, std::uint64_t bytes,
                       TransferMode mode, std::uint32_t count, std::int64_t src_step,
                       std::int64_t dst_step, std::int64_t bytes_step) {
  if (dst_pool.size() + dst.size() > std::numeric_limits<std::uint32_t>::max())
    throw TraceError(fmt::format("exchange '{}' has more than 2^32-1 destination ranges", name));
  Transfer t;
  t.src = src;
  t.dst_first = static_cast<std::uint32_t>(dst_pool.size());
  t.dst_count = static_cast<std::uint32_t>(dst.size());
  t.bytes = bytes;
  t.mode = mode;
  t.count = count;
  t.src_step = src_step;
  t.dst_step = dst_step;
  t.bytes_step = bytes_step;
  dst_pool.insert(dst_pool.end(), dst.begin(), dst.end());
  transfers.push_back(t);
}

std::uint64_t Exchange::transfer_count() const {
  std::uint64_t n = 0;
  for (const Transfer& t : transfers) n += t.count;
  for (const Move& m : moves)
    m.for_each_piece([&](std::uint32_t, std::uint32_t, std::uint64_t) { ++n; });
  for (const ReduceScatter& r : reduce_scatters)
    r.for_each_tile(
        [&](std::uint32_t, std::uint64_t, std::uint64_t received, auto...) { n += received; });
  return n;
}

namespace {

std::uint64_t gcd(std::uint64_t a, std::uint64_t b) {
  while (b != 0) a = std::exchange(b, a % b);
  return a;
}

// The cells of the common refinement of two cuts of n elements into blocks of a and of b: one
// more than the distinct boundaries inside (0, n), the multiples of a, of b, and of both.
std::uint64_t refined_cells(std::uint64_t n, std::uint64_t a, std::uint64_t b) {
  const std::uint64_t g = gcd(a, b);
  const auto lcm = static_cast<Wide>(a / g) * b;
  const std::uint64_t shared = lcm >= n ? 0 : (n - 1) / static_cast<std::uint64_t>(lcm);
  return Move::blocks(n, a) + Move::blocks(n, b) - 1 - shared;
}

}  // namespace

std::uint64_t Move::cells() const {
  return refined_cells(positions, from.positions_per_tile, to.positions_per_tile) *
         refined_cells(channels, from.chans_per_tile, to.chans_per_tile);
}

std::uint64_t Move::last_tile() const {
  const auto last = [&](const BlockGrid& g) {
    const auto b = static_cast<Wide>(blocks(positions, g.positions_per_tile)) *
                   blocks(channels, g.chans_per_tile);
    const Wide t = g.first_tile + (b - 1) * g.tile_stride;
    return t > std::numeric_limits<std::uint64_t>::max() ? std::numeric_limits<std::uint64_t>::max()
                                                         : static_cast<std::uint64_t>(t);
  };
  return std::max(last(from), last(to));
}

std::optional<std::string> move_problem(const Move& m) {
  if (m.positions == 0 || m.channels == 0)
    return fmt::format("moves an empty tensor of {} x {} elements", m.positions, m.channels);
  if (m.element_bytes == 0 || m.element_bytes > kMaxElementBytes)
    return fmt::format("has element_bytes = {}, expected 1..{}", m.element_bytes, kMaxElementBytes);
  if (m.positions > static_cast<std::uint64_t>(kMaxCount) ||
      m.channels > static_cast<std::uint64_t>(kMaxCount) ||
      static_cast<Wide>(m.positions) * m.channels * m.element_bytes >
          static_cast<std::uint64_t>(kMaxCount))
    return fmt::format("moves {} x {} elements of {} bytes, more than {} bytes", m.positions,
                       m.channels, m.element_bytes, kMaxCount);
  for (const auto* g : {&m.from, &m.to}) {
    const char* which = g == &m.from ? "from" : "to";
    if (g->positions_per_tile == 0 || g->positions_per_tile > m.positions ||
        g->chans_per_tile == 0 || g->chans_per_tile > m.channels)
      return fmt::format("has {} blocks of {} x {} elements, expected 1..{} x 1..{}", which,
                         g->positions_per_tile, g->chans_per_tile, m.positions, m.channels);
    if (g->tile_stride == 0) return fmt::format("has {} tile stride 0, expected at least 1", which);
  }
  if (const std::uint64_t last = m.last_tile(); last > std::numeric_limits<std::uint32_t>::max())
    return fmt::format("places blocks on tile {}, past 2^32 - 1", last);
  if (const std::uint64_t cells = m.cells(); cells > kMaxMoveCells)
    return fmt::format("cuts the tensor into {} pieces, expected at most {}", cells, kMaxMoveCells);
  return std::nullopt;
}

std::uint64_t ReduceScatter::transfer_bound() const {
  Wide groups_total = 0;
  for (const Groups& g : groups) groups_total += g.count;
  const Wide bound = groups_total * members * (std::min(fan_in, members) - Wide{1});
  return bound > std::numeric_limits<std::uint64_t>::max()
             ? std::numeric_limits<std::uint64_t>::max()
             : static_cast<std::uint64_t>(bound);
}

std::uint64_t ReduceScatter::last_tile(const Groups& g) const {
  // Up to about 2^65 for fields of 32 bits: in 128 bits, saturated.
  const Wide last = Wide{g.first} + Wide{g.count - 1} * g.step + Wide{members - 1} * member_step;
  return last > std::numeric_limits<std::uint64_t>::max()
             ? std::numeric_limits<std::uint64_t>::max()
             : static_cast<std::uint64_t>(last);
}

std::uint64_t ReduceScatter::last_tile() const {
  std::uint64_t last = 0;
  for (const Groups& g : groups) last = std::max(last, last_tile(g));
  return last;
}

std::optional<std::string> reduce_scatter_problem(const ReduceScatter& r) {
  if (r.members < 2) return fmt::format("has {} members per group, expected at least 2", r.members);
  if (r.member_step == 0) return "has member_step 0, expected at least 1";
  if (r.fan_in < 2) return fmt::format("has fan_in {}, expected at least 2", r.fan_in);
  if (r.stride == 0) return "has stride 0, expected at least 1";
  if (r.element_bytes == 0 || r.element_bytes > kMaxElementBytes)
    return fmt::format("has element_bytes = {}, expected 1..{}", r.element_bytes, kMaxElementBytes);
  if (r.groups.empty()) return "has no groups";
  for (std::size_t i = 0; i < r.groups.size(); ++i) {
    const ReduceScatter::Groups& g = r.groups[i];
    if (g.count == 0) return fmt::format("has group run {} of 0 groups, expected at least 1", i);
    if (g.elements == 0 ||
        static_cast<Wide>(g.elements) * r.element_bytes > static_cast<std::uint64_t>(kMaxCount))
      return fmt::format("has group run {} of {} elements of {} bytes, expected 1..{} bytes", i,
                         g.elements, r.element_bytes, kMaxCount);
  }
  if (const std::uint64_t last = r.last_tile(); last > std::numeric_limits<std::uint32_t>::max())
    return fmt::format("places members on tile {}, past 2^32 - 1", last);
  if (const std::uint64_t bound = r.transfer_bound(); bound > kMaxReduceScatterTransfers)
    return fmt::format(
        "may stand for {} transfers (groups x members x (fan_in - 1)), expected "
        "at most {}",
        bound, kMaxReduceScatterTransfers);
  return std::nullopt;
}

TileRange move_tiles(const Move& m, const BlockGrid& g) {
  const std::uint64_t b =
      Move::blocks(m.positions, g.positions_per_tile) * Move::blocks(m.channels, g.chans_per_tile);
  return {g.first_tile, static_cast<std::uint32_t>(g.first_tile + (b - 1) * g.tile_stride)};
}

Exchange expanded(const Exchange& exchange) {
  Exchange out;
  out.name = exchange.name;
  out.provenance = exchange.provenance;
  out.transfers.reserve(exchange.transfer_count());
  exchange.for_each(
      [&](const TransferView& t) { out.add_run(t.src, t.dst, t.bytes, t.mode, 1, 0, 0, 0); });
  return out;
}

ComputeSet expanded(const ComputeSet& compute_set) {
  ComputeSet out = compute_set;
  out.vertices.clear();
  for (const Vertex& v : compute_set.vertices)
    for (std::uint32_t i = 0; i < v.count; ++i) out.vertices.push_back(v.copy(i));
  return out;
}

void coalesce(Exchange& exchange) {
  Exchange out;
  out.name = exchange.name;
  out.provenance = exchange.provenance;
  // Moves and reduce-scatters stay as they are; the records coalesce.
  out.moves = std::exchange(exchange.moves, {});
  out.reduce_scatters = std::exchange(exchange.reduce_scatters, {});
  exchange.for_each([&](const TransferView& t) { out.add(t.src, t.dst, t.bytes, t.mode); });
  out.transfers.shrink_to_fit();
  out.dst_pool.shrink_to_fit();
  exchange = std::move(out);
}

void coalesce(ComputeSet& compute_set) {
  // The vertex instances added in order by the one rule (ComputeSet::add, §4.2: a run starts
  // only where three consecutive instances are affine, so that a pair does not take the head of
  // a longer run with another step, then extends while the next instance continues it), the
  // rest of a record's run at once where the run being built continues with its step: linear
  // in the records, with no expanded copy.
  ComputeSet out;
  out.vertices.reserve(compute_set.vertices.size());
  for (const Vertex& v : compute_set.vertices)
    for (std::uint32_t i = 0; i < v.count; ++i) {
      const Vertex one = v.copy(i);
      if (out.continues_last_run(one, v.count - i) && out.vertices.back().step == v.step) {
        out.vertices.back().count += v.count - i;
        break;
      }
      out.add(one);
    }
  out.vertices.shrink_to_fit();
  compute_set.vertices = std::move(out.vertices);
}

void coalesce(Trace& trace) {
  for (IpuProgram& ipu : trace.ipus) {
    for (ComputeSet& cs : ipu.compute_sets) coalesce(cs);
    for (Exchange& ex : ipu.exchanges) coalesce(ex);
  }
}

std::uint32_t Trace::ipus_per_replica() const {
  std::uint32_t p = 0;
  for (const IpuProgram& ipu : ipus) p = std::max(p, ipu.ipu + 1);
  return p;
}

namespace {
bool steps_use_system(const std::vector<Step>& steps) {
  for (const Step& s : steps) {
    if (s.kind == StepKind::kGlobalExchange || s.kind == StepKind::kCollective) return true;
    if (s.kind == StepKind::kSync && s.group.kind != GroupKind::kTile) return true;
    if (s.kind == StepKind::kRepeat && steps_use_system(s.body)) return true;
  }
  return false;
}
// Group steps: a sync or a collective over a group of IPUs (a global exchange names its
// IPUs itself: a point-to-point copy leaves the others out).
bool steps_use_groups(const std::vector<Step>& steps) {
  for (const Step& s : steps) {
    if (s.kind == StepKind::kCollective) return true;
    if (s.kind == StepKind::kSync && s.group.kind != GroupKind::kTile) return true;
    if (s.kind == StepKind::kRepeat && steps_use_groups(s.body)) return true;
  }
  return false;
}
}  // namespace

bool Trace::uses_system() const {
  return std::any_of(ipus.begin(), ipus.end(),
                     [](const IpuProgram& p) { return steps_use_system(p.steps); });
}

void check_ipu_sections(const Trace& trace, const std::string& origin) {
  if (std::none_of(trace.ipus.begin(), trace.ipus.end(),
                   [](const IpuProgram& p) { return steps_use_groups(p.steps); }))
    return;
  std::vector<bool> present(trace.ipus_per_replica(), false);
  for (const IpuProgram& p : trace.ipus) present[p.ipu] = true;
  const auto missing = std::find(present.begin(), present.end(), false);
  if (missing == present.end()) return;
  std::vector<std::uint32_t> have;
  for (const IpuProgram& p : trace.ipus) have.push_back(p.ipu);
  std::sort(have.begin(), have.end());
  throw TraceError(fmt::format(
      "{}: expected a section for every IPU 0 to {} (the program syncs or reduces over groups "
      "of IPUs), found none for IPU {} (sections: {})",
      origin, present.size() - 1, missing - present.begin(), fmt::join(have, ", ")));
}

void check_structure(const Trace& trace, const std::string& origin) {
  StructureChecker(trace, origin).run();
}

void check_structure_after_read(const Trace& trace, const std::string& origin) {
  StructureChecker(trace, origin, /*check_overlaps=*/false).run();
}

void check_tiles(const Trace& trace, std::uint32_t tile_count, const std::string& origin) {
  TileChecker checker(tile_count, origin);
  for (const IpuProgram& ipu : trace.ipus) {
    checker.prefix_ = ipu_prefix(trace, ipu);
    for (const Tensor& t : ipu.tensors)
      checker.check(fmt::format("tensor '{}'", t.name), "is placed on", t.tiles);
    for (const ComputeSet& cs : ipu.compute_sets)
      for (std::size_t i = 0; i < cs.vertices.size(); ++i)
        checker.check(fmt::format("compute set '{}' vertex {}", cs.name, i), "uses",
                      cs.vertices[i].tiles, cs.vertices[i].count, cs.vertices[i].step);
    for (const Exchange& ex : ipu.exchanges) {
      for (std::size_t i = 0; i < ex.transfers.size(); ++i) {
        const Transfer& t = ex.transfers[i];
        const std::string item = fmt::format("exchange '{}' transfer {}", ex.name, i);
        checker.check(item, "sends from", t.src, t.count, t.src_step);
        for (const TileRange& r : ex.destinations(t))
          checker.check(item, "sends to", r, t.count, t.dst_step);
      }
      for (std::size_t i = 0; i < ex.moves.size(); ++i) {
        const Move& m = ex.moves[i];
        const std::string item = fmt::format("exchange '{}' move {}", ex.name, i);
        checker.check(item, "sends from", move_tiles(m, m.from));
        checker.check(item, "sends to", move_tiles(m, m.to));
      }
      for (std::size_t i = 0; i < ex.reduce_scatters.size(); ++i) {
        const ReduceScatter& r = ex.reduce_scatters[i];
        const std::string item = fmt::format("exchange '{}' reduce_scatter {}", ex.name, i);
        for (const ReduceScatter::Groups& g : r.groups)
          checker.check(item, "uses", {g.first, static_cast<std::uint32_t>(r.last_tile(g))});
      }
    }
    std::vector<std::size_t> path;
    checker.check_steps(ipu.steps, path);
  }
}

}  // namespace ipusim::trace
