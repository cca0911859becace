// SPDX-License-Identifier: Apache-2.0
// Exact fast-forward of repeated loop iterations (docs/architecture.md, "Fast-forward"): every
// shipped run config gives the same run directory, byte for byte, with and without
// --no-fast-forward; a long gradient accumulation gives statistics that grow exactly by one
// period per micro-batch; hand-written programs check the cases the run configs do not have
// (a loop with only background transfers, replicas simulated in full).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "cli_harness.hpp"

namespace ipusim::testing {
namespace {

namespace fs = std::filesystem;

// Every file of a run directory, by name.
std::map<std::string, std::string> run_dir(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    files[e.path().filename().string()] = read_all(e.path().string());
  return files;
}

// The first line where two texts differ, or "" if they are equal.
std::string first_difference(const std::string& a, const std::string& b) {
  if (a == b) return "";
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(sa, la));
    const bool more_b = static_cast<bool>(std::getline(sb, lb));
    if (!more_a && !more_b) return "texts differ";
    if (la != lb || more_a != more_b)
      return fmt_args("line ", line, ": '", more_a ? la : "<end>", "' vs '", more_b ? lb : "<end>",
                      "'");
  }
}

// `text` without its info lines (timings; the fast-forwards).
std::string without_info(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line))
    if (line.rfind("[info]", 0) != 0) out += line + "\n";
  return out;
}

enum class Skips { kSome, kNone, kAny };

// Runs `args` with and without fast-forward and expects the same run directory (and
// warnings), and that fast-forward skipped iterations (kSome) or not (kNone).
void expect_same_as_full(const std::string& args, Skips skips = Skips::kAny) {
  TempDir dir;
  const auto ff = ipusim("run -q --log-level info " + args + " --out " + dir.file("ff"));
  ASSERT_EQ(ff.status, 0) << args << ": " << ff.err;
  const auto full =
      ipusim("run -q --log-level info --no-fast-forward " + args + " --out " + dir.file("full"));
  ASSERT_EQ(full.status, 0) << args << ": " << full.err;
  EXPECT_EQ(without_info(ff.err), without_info(full.err)) << args;
  EXPECT_EQ(full.err.find("fast-forward:"), std::string::npos) << args;
  if (skips != Skips::kAny) {
    EXPECT_EQ(ff.err.find("] fast-forward:") != std::string::npos, skips == Skips::kSome)
        << args << ": " << ff.err;
  }
  const auto a = run_dir(dir.file("ff")), b = run_dir(dir.file("full"));
  ASSERT_TRUE(a.count("stats.json")) << args;
  ASSERT_EQ(a.size(), b.size()) << args;
  for (const auto& [name, text] : a) {
    ASSERT_TRUE(b.count(name)) << args << ": " << name;
    EXPECT_EQ(first_difference(text, b.at(name)), "") << args << ": " << name;
  }
}

// The shipped run configs (all of them; a few under AddressSanitizer, where the slowest
// full simulations would take minutes).
std::vector<std::string> run_configs() {
  const std::vector<std::string> asan_subset = {
      "resnet50-pod16",        "bert-large-pod16",
      "gpt2-small-pod16",      "vit-b16-pod16",
      "efficientnet-b0-pod16", "resnet50-inference-m2000",
      "bert-large-pod64",      "bert-base-squad-inference-c600"};
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(source_dir() + "/configs/runs"))
    if (e.path().extension() == ".yaml") {
      const std::string name = e.path().stem().string();
      if (!kUnderAsan || std::count(asan_subset.begin(), asan_subset.end(), name) != 0)
        names.push_back(name);
    }
  std::sort(names.begin(), names.end());
  return names;
}

class EveryRunConfig : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryRunConfig, FastForwardGivesTheFullSimulationsRunDirectory) {
  expect_same_as_full("--run " + source_dir() + "/configs/runs/" + GetParam() + ".yaml");
}

INSTANTIATE_TEST_SUITE_P(FastForward, EveryRunConfig, ::testing::ValuesIn(run_configs()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

std::string resnet50_pod16(std::uint64_t ga) {
  return fmt_args("--run ", source_dir(), "/configs/runs/resnet50-pod16.yaml --set ",
                  "run.gradient_accumulation=", ga);
}

TEST(FastForward, ResNet50Pod16Accumulating200MicroBatchesIdentical) {
  expect_same_as_full(resnet50_pod16(200), Skips::kSome);
}

// CSV cells; numbers as integers where they are.
std::vector<std::vector<std::string>> csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

bool integer(const std::string& s, long long& v) {
  if (s.empty() || s.find_first_not_of("-0123456789") != std::string::npos) return false;
  v = std::stoll(s);
  return true;
}

// Past the first micro-batches every one repeats the same period: each superstep's and each
// tile's statistics at GA 10^4 are those at GA 200 plus 9,800 times the difference between GA
// 201 and 200 (integers exactly; every other cell is the same).
TEST(FastForward, ResNet50Pod16StatisticsGrowByOnePeriodPerMicroBatch) {
  TempDir dir;
  const std::vector<std::uint64_t> gas = {200, 201, 10000};
  for (const auto ga : gas) {
    const auto r = ipusim("run -q " + resnet50_pod16(ga) + " --out " + dir.file(fmt_args(ga)));
    ASSERT_EQ(r.status, 0) << r.err;
  }
  for (const std::string file : {"supersteps.csv", "tiles.csv"}) {
    const auto a = csv(read_all(dir.file("200/" + file)));
    const auto b = csv(read_all(dir.file("201/" + file)));
    const auto c = csv(read_all(dir.file("10000/" + file)));
    ASSERT_GT(a.size(), 100u) << file;
    ASSERT_EQ(a.size(), b.size()) << file;
    ASSERT_EQ(a.size(), c.size()) << file;
    std::size_t growing = 0;
    for (std::size_t r = 0; r < a.size(); ++r) {
      ASSERT_EQ(a[r].size(), c[r].size()) << file << " row " << r;
      for (std::size_t k = 0; k < a[r].size(); ++k) {
        long long x = 0, y = 0, z = 0;
        if (integer(a[r][k], x) && integer(b[r][k], y) && integer(c[r][k], z)) {
          EXPECT_EQ(z, x + (10000 - 200) * (y - x)) << file << " row " << r << " column " << k;
          growing += y != x;
        } else {
          EXPECT_EQ(a[r][k], c[r][k]) << file << " row " << r << " column " << k;
        }
      }
    }
    EXPECT_GT(growing, a.size()) << file;  // the loop's supersteps and every tile grow
  }
  // The step takes 10^4 micro-batches' time: more than 40 times GA 200's.
  const double t200 = json_value_after(read_all(dir.file("200/stats.json")), "\"total\"");
  const double t10k = json_value_after(read_all(dir.file("10000/stats.json")), "\"total\"");
  EXPECT_GT(t10k, 40 * t200);
}

// A loop with background host transfers and no group step on one chip: its iterations are
// fast-forwarded on their own (a cut at each iteration's start). Against full simulation and,
// fewer iterations, the reference engine.
std::string background_loop(int iterations, bool nested = false) {
  const std::string inner = nested ? R"(
    repeat 6
      host to_ipu tiles=0..15 bytes=30000 overlap=yes
      compute work
      exchange shuffle
    end)"
                                   : R"(
    repeat 3
      compute work
    end)";
  return fmt_args(R"(ipusim-trace 2
name background
ipu 0
tensor a kind=activation dtype=half tiles=0..15 bytes=4096
computeset work
  vertex tiles=0..7 amp_conv1x1 in=half partials=float positions=64 in_chans=32 out_chans=16
  vertex tiles=4..15 binary op=mul dtype=half n=300
end
exchange shuffle
  transfer src=0..7 dst=0..15 bytes=100 mode=personalised
end
program
  repeat )",
                  iterations, R"(
    host to_ipu tiles=0..15 bytes=65536 overlap=yes
    compute work
    sync
    exchange shuffle)",
                  inner, R"(
  end
  host from_ipu tiles=0..15 bytes=1024
end
)");
}

TEST(FastForward, LoopWithBackgroundTransfersIdentical) {
  TempDir dir;
  for (const int n : {5, 3000}) {
    const std::string trace = dir.file(fmt_args("bg", n, ".trace"));
    std::ofstream(trace) << background_loop(n);
    expect_same_as_full("--set chip.tiles=16 " + trace, Skips::kSome);
  }
  // Nested: the inner loop's iterations within each outer one, then the outer loop's.
  const std::string nested = dir.file("nested.trace");
  std::ofstream(nested) << background_loop(400, true);
  expect_same_as_full("--set chip.tiles=16 " + nested, Skips::kSome);
  const std::string trace = dir.file("bg5.trace");
  const auto fast = ipusim("run -q --set chip.tiles=16 --out " + dir.file("f") + " " + trace);
  const auto ref =
      ipusim("run -q --set chip.tiles=16 --engine reference --out " + dir.file("r") + " " + trace);
  ASSERT_EQ(fast.status, 0) << fast.err;
  ASSERT_EQ(ref.status, 0) << ref.err;
  EXPECT_EQ(read_all(dir.file("f/stats.json")), read_all(dir.file("r/stats.json")));
}

// Training steps in a loop, each a gradient-accumulation loop with a collective and
// background transfers, then the weight update's collective on one IPU of a replica-symmetric
// POD16: the inner loop is fast-forwarded within each step, then the steps themselves.
TEST(FastForward, NestedLoopsWithGroupStepsIdentical) {
  TempDir dir;
  const std::string trace = dir.file("steps.trace");
  std::ofstream(trace) << R"(ipusim-trace 2
name steps
replicas 16
ipu 0
computeset c
  vertex tiles=0..31 copy bytes=4096
end
program
  repeat 30
    repeat 20
      compute c
      collective all_reduce bytes=65536 dtype=half group=replicas method=auto
      host to_ipu tiles=0..31 bytes=100000 overlap=yes
    end
    compute c
    collective all_reduce bytes=8388608 dtype=half group=replicas method=auto
  end
end
)";
  const std::string sys =
      "--system " + source_dir() + "/configs/systems/pod16.yaml --set chip.tiles=32 ";
  expect_same_as_full(sys + trace, Skips::kSome);
}

// A 2-stage pipeline x 2 replicas in a long loop: stages of different lengths, an inter-IPU
// copy, syncs and a collective. Replica 0 alone (its two IPUs meet at every group step: cuts)
// and every replica simulated (group steps of some IPUs only: no cut, full simulation).
TEST(FastForward, PipelineLoopIdentical) {
  TempDir dir;
  const std::string trace = dir.file("pipe.trace");
  std::ofstream(trace) << R"(ipusim-trace 2
name pipeline_loop
replicas 2
global_exchange acts
  copy src=0 dst=1 bytes=1048576
end
ipu 0
tensor x kind=activation dtype=half tiles=0..31 bytes=8000
computeset fwd
  vertex tiles=0..31 copy bytes=8000
end
program
  repeat 3
    compute fwd
    global_exchange acts
  end
  repeat 500
    compute fwd
    global_exchange acts
    sync group=replica
    host to_ipu tiles=0..31 bytes=100000 overlap=yes
  end
end
ipu 1
tensor y kind=activation dtype=half tiles=0..31 bytes=8000
computeset fwd
  vertex tiles=0..15 copy bytes=16000
end
program
  repeat 3
    global_exchange acts
    compute fwd
  end
  repeat 500
    global_exchange acts
    compute fwd
    sync group=replica
    collective all_reduce bytes=4194304 dtype=half group=replicas method=auto
  end
end
)";
  const std::string sys =
      "--system " + source_dir() + "/configs/systems/pod16.yaml --set chip.tiles=32 ";
  expect_same_as_full(sys + trace, Skips::kSome);
  expect_same_as_full(sys + "--all-replicas " + trace, Skips::kNone);
}

}  // namespace
}  // namespace ipusim::testing
