// SPDX-License-Identifier: Apache-2.0
#include "ipusim/plan/cache.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "ipusim/util/hash.hpp"

#if __has_include("ipusim/planner_identity.hpp")
#include "ipusim/planner_identity.hpp"
#else
#define IPUSIM_PLANNER_IDENTITY "none"
#endif

namespace ipusim::plan {
namespace {

// The entry format (bump with any change to how keys or values are written).
constexpr int kFormat = 1;
// An entry is a few hundred bytes to a few KiB; a larger file is not one.
constexpr std::size_t kMaxEntryBytes = 64 * 1024;
// Reads refresh an entry's time (its recency for eviction) when it is older than this; stray
// temporaries (a writer that died) older than this are removed by eviction.
constexpr auto kTouchAfter = std::chrono::hours(1);

// ---- Every member of the planner's inputs and outputs, by name. Structured bindings make a
// member added to the struct a compile error here until it is listed.

template <class A, class F>
void conv_args_fields(A& a, F&& f) {
  auto& [batch, in_chans, height, width, out_chans, kernel, stride, dtype, groups, channel_groups,
         partials, transposed_input, transposed_weights, coeff_load_bits, matmul, weight_update,
         combined_groups] = a;
  f("batch", batch), f("in_chans", in_chans), f("height", height), f("width", width);
  f("out_chans", out_chans), f("kernel", kernel), f("stride", stride), f("dtype", dtype);
  f("groups", groups), f("channel_groups", channel_groups), f("partials", partials);
  f("transposed_input", transposed_input), f("transposed_weights", transposed_weights);
  f("coeff_load_bits", coeff_load_bits), f("matmul", matmul), f("weight_update", weight_update);
  f("combined_groups", combined_groups);
}

template <class P, class F>
void conv_plan_fields(P& p, F&& f) {
  auto& [row_split, out_split, in_split, rows_per_tile, out_per_tile, in_per_tile, estimated_cycles,
         bytes_per_tile, group_split, groups_per_tile, serial_in, serial_out, weight_height,
         swapped, expand_h, expand_w, method, order, joint] = p;
  f("row_split", row_split), f("out_split", out_split), f("in_split", in_split);
  f("rows_per_tile", rows_per_tile), f("out_per_tile", out_per_tile);
  f("in_per_tile", in_per_tile), f("estimated_cycles", estimated_cycles);
  f("bytes_per_tile", bytes_per_tile), f("group_split", group_split);
  f("groups_per_tile", groups_per_tile), f("serial_in", serial_in), f("serial_out", serial_out);
  f("weight_height", weight_height), f("swapped", swapped), f("expand_h", expand_h);
  f("expand_w", expand_w), f("method", method), f("order", order), f("joint", joint);
}

// A fully connected layer's totals (its three plans have a line each).
template <class P, class F>
void fc_totals_fields(P& p, F&& f) {
  auto& [fwd, bwd, wu, joint, joint_cycles, separate_cycles] = p;
  (void)fwd, (void)bwd, (void)wu;
  f("joint", joint), f("joint_cycles", joint_cycles), f("separate_cycles", separate_cycles);
}

template <class F>
void chip_fields(const ChipSpec& c, F&& f) {
  const auto& [name, clock, tiles, tile_memory, worker_contexts, datapath_width, memory, amp,
               tile_model, tile, exchange, sync, host, runtime] = c;
  f("name", name), f("clock", clock), f("tiles", tiles), f("tile_memory", tile_memory);
  f("worker_contexts", worker_contexts), f("datapath_width", datapath_width);
  f("tile_model", tile_model);
  {
    const auto& [load, interleaved, memcpy] = memory;
    f("memory.load", load), f("memory.interleaved_load", interleaved);
    f("memory.memcpy", memcpy);
  }
  {
    const auto& [half_half, half_float, float_float, weights_half, weights_float, macs_half,
                 macs_float, coeff_load, pipeline_depth] = amp;
    const auto& [hh] = half_half;
    const auto& [hf] = half_float;
    const auto& [ff] = float_float;
    f("amp.half_half", hh), f("amp.half_float", hf), f("amp.float_float", ff);
    f("amp.weights_half", weights_half), f("amp.weights_float", weights_float);
    f("amp.macs_half", macs_half), f("amp.macs_float", macs_float);
    f("amp.coeff_load", coeff_load), f("amp.pipeline_depth", pipeline_depth);
  }
  {
    const auto& [issue_width, result_latency, store, simple, control, rpt_max] = tile;
    f("tile.issue_width", issue_width), f("tile.result_latency", result_latency);
    f("tile.store", store), f("tile.supervisor_simple", simple);
    f("tile.supervisor_control", control), f("tile.rpt_count_max", rpt_max);
  }
  {
    const auto& [bytes, per_bus, overhead, per_column, hop] = exchange;
    f("exchange.bytes_per_cycle", bytes), f("exchange.tiles_per_shared_bus", per_bus);
    f("exchange.fixed_overhead", overhead), f("exchange.tiles_per_column", per_column);
    f("exchange.column_hop_latency", hop);
  }
  {
    const auto& [internal] = sync;
    f("sync.internal_latency", internal);
  }
  {
    const auto& [bandwidth, latency] = host;
    f("host.bandwidth", bandwidth), f("host.latency", latency);
  }
  {
    const auto& [vertex_state, stack, code, exchange_code, cs_overhead] = runtime;
    f("runtime.vertex_state", vertex_state), f("runtime.stack", stack);
    f("runtime.codelet_code", code), f("runtime.exchange_code", exchange_code);
    f("runtime.compute_set_overhead", cs_overhead);
  }
}

// ---- Writing values: exact text (doubles in hexadecimal, strings with their length).

void put_value(std::string& out, const std::string& v) { out += fmt::format("{}:{}", v.size(), v); }
void put_value(std::string& out, double v) { out += fmt::format("{:a}", v); }
void put_value(std::string& out, Frequency v) { put_value(out, v.hz); }
void put_value(std::string& out, BytesPerCycle v) { put_value(out, v.value); }
void put_value(std::string& out, Bandwidth v) { put_value(out, v.bytes_per_second); }
void put_value(std::string& out, Duration v) { put_value(out, v.seconds); }
void put_value(std::string& out, Cycles v) { out += std::to_string(v.count); }
void put_value(std::string& out, Bytes v) { out += std::to_string(v.count); }
void put_value(std::string& out, const Spatial& v) { out += fmt::format("{}x{}", v.h, v.w); }
template <class T>
requires std::is_integral_v<T> || std::is_enum_v<T>
void put_value(std::string& out, T v) { out += std::to_string(static_cast<std::uint64_t>(v)); }

struct LineWriter {
  std::string& out;
  template <class T>
  void operator()(std::string_view name, const T& v) const {
    out += ' ';
    out += name;
    out += '=';
    put_value(out, v);
  }
};

// ---- Reading a plan back: every member, in order, by name; anything else fails.

template <class T>
bool get_value(std::string_view text, T& v) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  if constexpr (std::is_same_v<T, Cycles> || std::is_same_v<T, Bytes>) {
    v.count = n;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (n > 1) return false;
    v = n == 1;
  } else if constexpr (std::is_enum_v<T>) {
    using U = std::underlying_type_t<T>;
    if (n > std::numeric_limits<U>::max()) return false;
    v = static_cast<T>(n);
  } else {
    static_assert(std::is_integral_v<T> && std::is_unsigned_v<T>);
    if (n > std::numeric_limits<T>::max()) return false;
    v = static_cast<T>(n);
  }
  return true;
}

// Reads one line "<tag> name=value ..." of `obj`'s members (as `fields` lists them) from
// `text` at `pos`: every member, in order, by name, and nothing else.
template <class T, class Fields>
bool read_line(std::string_view text, std::size_t& pos, std::string_view tag, T& obj,
               Fields fields) {
  const std::size_t eol = text.find('\n', pos);
  if (eol == std::string_view::npos) return false;
  std::string_view line = text.substr(pos, eol - pos);
  pos = eol + 1;
  if (!line.starts_with(tag)) return false;
  line.remove_prefix(tag.size());
  bool ok = true;
  fields(obj, [&](std::string_view name, auto& v) {
    if (!ok || !line.starts_with(' ')) {
      ok = false;
      return;
    }
    line.remove_prefix(1);
    const std::size_t end = std::min(line.find(' '), line.size());
    const std::string_view token = line.substr(0, end);
    line.remove_prefix(end);
    ok = token.size() > name.size() && token.starts_with(name) && token[name.size()] == '=' &&
         get_value(token.substr(name.size() + 1), v);
  });
  return ok && line.empty();
}

template <class T, class Fields>
std::string write_line(std::string_view tag, const T& obj, Fields fields) {
  std::string out(tag);
  fields(obj, LineWriter{out});
  out += '\n';
  return out;
}

constexpr auto kPlanFields = [](auto& p, auto&& f) { conv_plan_fields(p, f); };
constexpr auto kArgsFields = [](auto& a, auto&& f) { conv_args_fields(a, f); };
constexpr auto kTotalsFields = [](auto& p, auto&& f) { fc_totals_fields(p, f); };

std::string checksum(std::string_view text) {
  Fnv1a64 h;
  h.update(text);
  return fmt::format("{:016x}", h.value());
}

std::string errno_text() { return std::strerror(errno); }

std::shared_ptr<const PlanStore>& current_store() {
  static std::shared_ptr<const PlanStore> store;
  return store;
}
std::mutex& store_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

ChipKey chip_key(const ChipSpec& chip) {
  ChipKey k;
  k.text = fmt::format("ipusim plan cache {}\nplanner {} {}\nchip", kFormat, kPlannerVersion,
                       IPUSIM_PLANNER_IDENTITY);
  chip_fields(chip, LineWriter{k.text});
  k.text += '\n';
  return k;
}

std::string conv_key(const ChipKey& chip, const ConvArgs& args, std::uint64_t budget) {
  return chip.text + fmt::format("conv budget={}\n", budget) +
         write_line("args", args, kArgsFields);
}

std::string fully_connected_key(const ChipKey& chip, const ConvArgs& fwd, const ConvArgs& bwd,
                                const ConvArgs& wu, std::uint64_t budget) {
  return chip.text + fmt::format("fully_connected budget={}\n", budget) +
         write_line("fwd", fwd, kArgsFields) + write_line("bwd", bwd, kArgsFields) +
         write_line("wu", wu, kArgsFields);
}

PlanStore::PlanStore(std::filesystem::path folder) : folder_(std::move(folder)) {}

std::filesystem::path PlanStore::entry_path(const std::string& key) const {
  Fnv1a64 h;
  h.update(key);
  const std::string hex = fmt::format("{:016x}", h.value());
  return folder_ / hex.substr(0, 2) / (hex + ".plan");
}

std::optional<std::string> PlanStore::read(const std::string& key) const {
  const std::filesystem::path path = entry_path(key);
  // (Non-blocking: a FIFO planted in its place is refused below, not waited on.)
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;  // not stored (or evicted meanwhile)
  std::string text;
  struct stat st {};
  bool read_ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                 static_cast<std::uint64_t>(st.st_size) <= kMaxEntryBytes;
  if (read_ok) {
    text.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    text.resize(got);
    // Recency for eviction, refreshed at most hourly (a write per read would cost more).
    const auto age = std::chrono::system_clock::now() -
                     std::chrono::system_clock::from_time_t(st.st_mtim.tv_sec);
    if (age > kTouchAfter) (void)::futimens(fd, nullptr);
  }
  ::close(fd);
  const auto corrupted = [&](std::string_view why) -> std::optional<std::string> {
    ++corrupted_;
    spdlog::warn("plan cache: {} is corrupted ({}); planning again and rewriting it", path.string(),
                 why);
    return std::nullopt;
  };
  if (!read_ok) return corrupted("not a plan cache entry: unreadable or too large");
  // The last line is "fnv1a <checksum of everything before it>".
  const std::size_t last = text.size() < 2 ? std::string::npos : text.rfind('\n', text.size() - 2);
  if (text.empty() || text.back() != '\n' || last == std::string::npos)
    return corrupted("truncated");
  const std::string_view body = std::string_view(text).substr(0, last + 1);
  const std::string_view sum = std::string_view(text).substr(last + 1);
  if (sum != "fnv1a " + checksum(body) + "\n") return corrupted("checksum mismatch");
  const std::string head = key + "=\n";
  if (!body.starts_with(head)) {
    // Another key with the same hash (or an older format): not ours, overwritten.
    spdlog::debug("plan cache: {} holds another key; replacing it", path.string());
    return std::nullopt;
  }
  return std::string(body.substr(head.size()));
}

void PlanStore::write(const std::string& key, const std::string& value) const {
  const std::filesystem::path path = entry_path(key);
  const std::filesystem::path dir = path.parent_path();
  std::string text = key + "=\n" + value;
  text += "fnv1a " + checksum(text) + "\n";
  const auto failed = [&](const std::string& why) {
    if (!write_failed_.exchange(true))
      spdlog::warn("plan cache: cannot write {} ({}); plans are not kept", dir.string(), why);
  };
  // A temporary in the same folder, renamed into place: readers see a whole entry or none.
  // The folders are made when the first temporary cannot be (a stat per level otherwise).
  std::string temp = path.string() + ".tmp.XXXXXX";
  int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return failed(ec.message());
    temp = path.string() + ".tmp.XXXXXX";
    fd = ::mkostemp(temp.data(), O_CLOEXEC);
  }
  if (fd < 0) return failed(errno_text());
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const bool closed = ::close(fd) == 0;
  if (done != text.size() || !closed || ::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(temp.c_str());
    return failed(why);
  }
  evict(dir);
}

void PlanStore::evict(const std::filesystem::path& dir) const {
  std::error_code ec;
  std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> entries;
  std::size_t count = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".plan") ++count;
  }
  if (ec || count <= kPlansPerFolder) return;
  // Over the bound: the least recently used quarter goes, and stray temporaries.
  const auto now = std::filesystem::file_time_type::clock::now();
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code time_ec;
    const auto time = e.last_write_time(time_ec);
    if (time_ec) continue;  // removed meanwhile
    if (e.path().extension() == ".plan")
      entries.emplace_back(time, e.path());
    else if (e.path().filename().string().find(".tmp.") != std::string::npos &&
             now - time > kTouchAfter)
      std::filesystem::remove(e.path(), time_ec);
  }
  std::sort(entries.begin(), entries.end());
  const std::size_t keep = kPlansPerFolder * 3 / 4;
  for (std::size_t i = 0; i + keep < entries.size(); ++i) {
    std::error_code remove_ec;  // another process may have removed it first
    std::filesystem::remove(entries[i].second, remove_ec);
  }
}

ConvPlan PlanStore::plan_conv(const ChipSpec& chip, const ChipKey& chip_key, const ConvArgs& args,
                              std::uint64_t budget) const {
  const std::string key = conv_key(chip_key, args, budget);
  if (const auto value = read(key)) {
    ConvPlan p;
    std::size_t pos = 0;
    if (read_line(*value, pos, "plan", p, kPlanFields) && pos == value->size()) {
      ++hits_;
      return p;
    }
    ++corrupted_;
    spdlog::warn(
        "plan cache: {} is corrupted (its plan does not parse); planning again and "
        "rewriting it",
        entry_path(key).string());
  }
  ++misses_;
  const ConvPlan p = ipusim::plan::plan_conv(chip, args, budget);
  write(key, write_line("plan", p, kPlanFields));
  return p;
}

FcPlans PlanStore::plan_fully_connected(const ChipSpec& chip, const ChipKey& chip_key,
                                        const ConvArgs& fwd, const ConvArgs& bwd,
                                        const ConvArgs& wu, std::uint64_t budget) const {
  const std::string key = fully_connected_key(chip_key, fwd, bwd, wu, budget);
  if (const auto value = read(key)) {
    FcPlans p;
    std::size_t pos = 0;
    if (read_line(*value, pos, "fwd", p.fwd, kPlanFields) &&
        read_line(*value, pos, "bwd", p.bwd, kPlanFields) &&
        read_line(*value, pos, "wu", p.wu, kPlanFields) &&
        read_line(*value, pos, "totals", p, kTotalsFields) && pos == value->size()) {
      ++hits_;
      return p;
    }
    ++corrupted_;
    spdlog::warn(
        "plan cache: {} is corrupted (its plans do not parse); planning again and "
        "rewriting it",
        entry_path(key).string());
  }
  ++misses_;
  const FcPlans p = ipusim::plan::plan_fully_connected(chip, fwd, bwd, wu, budget);
  write(key, write_line("fwd", p.fwd, kPlanFields) + write_line("bwd", p.bwd, kPlanFields) +
                 write_line("wu", p.wu, kPlanFields) + write_line("totals", p, kTotalsFields));
  return p;
}

void set_plan_store(std::shared_ptr<const PlanStore> store) {
  const std::lock_guard lock(store_mutex());
  current_store() = std::move(store);
}

std::shared_ptr<const PlanStore> plan_store() {
  const std::lock_guard lock(store_mutex());
  return current_store();
}

void log_plan_store_use() {
  if (const auto store = plan_store())
    spdlog::info("plan cache {}: {} plan(s) read, {} searched and stored", store->folder().string(),
                 store->hits(), store->misses());
}

std::optional<std::filesystem::path> default_plan_cache_folder() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg == '/') return std::filesystem::path(xdg) / "ipusim" / "plans";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::filesystem::path(home) / ".cache" / "ipusim" / "plans";
  return std::nullopt;
}

bool plan_cache_disabled_by_environment() {
  const char* v = std::getenv("IPUSIM_PLAN_CACHE");
  if (!v) return false;
  const std::string_view s(v);
  return s == "off" || s == "0" || s == "false" || s == "no";
}

}  // namespace ipusim::plan
