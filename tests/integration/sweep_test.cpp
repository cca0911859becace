// SPDX-License-Identifier: Apache-2.0
// ipusim sweep (docs/sweeps.md): a kernel over 3 clocks x 2 tile counts gives 6 rows whose step
// times equal the kernel run directly; a second run skips all 6; a changed axis value runs only
// the new points; --jobs 1 and --jobs 2 (and mpirun -np 3) give byte-identical sweep.csv; a point
// that cannot fit its chip fails with its error while the others run; spec errors name
// file:line; an interrupt keeps finished points and removes the rest.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "cli_harness.hpp"

namespace ipusim::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::vector<std::string> split(const std::string& line, char sep = ',') {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, sep)) out.push_back(cell);
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The rows of a sweep.csv without quoted fields, as maps column -> value.
std::vector<std::map<std::string, std::string>> rows(const std::string& csv) {
  const auto ls = lines(csv);
  std::vector<std::map<std::string, std::string>> out;
  if (ls.empty()) return out;
  const auto header = split(ls[0]);
  for (std::size_t i = 1; i < ls.size(); ++i) {
    const auto cells = split(ls[i]);
    std::map<std::string, std::string> row;
    for (std::size_t c = 0; c < header.size() && c < cells.size(); ++c) row[header[c]] = cells[c];
    out.push_back(row);
  }
  return out;
}

std::string kernel_spec(const std::string& clocks, const std::string& extra = "") {
  return "format: ipusim-sweep/1\n"
         "name: matmul-clocks\n"
         "base:\n"
         "  kernel: matmul\n"
         "  args: {m: 256, n: 256, k: 256, dtype: half}\n"
         "  chip: gc200\n"
         "axes:\n"
         "  - chip.clock: [" +
         clocks +
         "]\n"
         "  - chip.tiles: [736, 1472]\n" +
         extra;
}

std::string sweep(const std::string& spec, const std::string& out, const std::string& extra = "") {
  return "sweep " + spec + " --out " + out + " " + extra;
}

TEST(Sweep, KernelOverClocksAndTilesGivesSixRowsEqualToDirectRuns) {
  TempDir dir;
  const std::string spec = dir.file("s.yaml");
  write(spec, kernel_spec("1.33GHz, 1.5GHz, 1.85GHz"));
  const auto r = ipusim(sweep(spec, dir.file("out"), "--jobs 2"));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("6 point(s): 6 ran, 0 skipped"), std::string::npos) << r.out;
  const auto table = rows(read_all(dir.file("out/sweep.csv")));
  ASSERT_EQ(table.size(), 6u);
  const char* clocks[] = {"1.33GHz", "1.33GHz", "1.5GHz", "1.5GHz", "1.85GHz", "1.85GHz"};
  const char* tiles[] = {"736", "1472", "736", "1472", "736", "1472"};
  const double hz[] = {1.33e9, 1.33e9, 1.5e9, 1.5e9, 1.85e9, 1.85e9};
  for (std::size_t i = 0; i < 6; ++i) {
    const auto& row = table[i];
    EXPECT_EQ(row.at("index"), std::to_string(i));
    EXPECT_EQ(row.at("chip.clock"), clocks[i]);
    EXPECT_EQ(row.at("chip.tiles"), tiles[i]);
    EXPECT_EQ(row.at("status"), "ok");
    EXPECT_EQ(row.at("workload"), "matmul");
    EXPECT_EQ(row.at("ipus"), "1");
    EXPECT_EQ(row.at("system_name"), "GC200");
    EXPECT_EQ(row.at("error"), "");
    // step time = cycles / clock
    const double cycles = std::stod(row.at("cycles"));
    EXPECT_GT(cycles, 0);
    EXPECT_NEAR(std::stod(row.at("step_time_s")), cycles / hz[i], 1e-12 * cycles / hz[i]);
    EXPECT_TRUE(fs::is_regular_file(dir.file("out/points/" + row.at("id") + "/stats.json")));
    EXPECT_TRUE(
        fs::is_regular_file(dir.file("out/points/" + row.at("id") + "/config.resolved.yaml")));
    EXPECT_TRUE(fs::is_regular_file(dir.file("out/points/" + row.at("id") + "/trace.id")));
    // Memory (issue 27: sweep.csv had no memory column): the point's fullest tile and a
    // tile's capacity (624 KiB, the GC200's), as its stats.json has them.
    const std::string stats = read_all(dir.file("out/points/" + row.at("id") + "/stats.json"));
    const auto at = [&](const std::string& after) {
      const auto p = stats.find(after);
      return p == std::string::npos ? std::string() : stats.substr(p + after.size());
    };
    const std::string mem = at("\"memory\": {");
    const std::string max = mem.substr(mem.find("\"max\": ") + 7);
    EXPECT_EQ(std::stod(row.at("peak_tile_memory_B")), std::stod(max.substr(0, max.find(','))));
    EXPECT_EQ(row.at("tile_memory_B"), "638976");
  }
  // The same clock gives the same cycles; fewer tiles more cycles.
  EXPECT_EQ(table[0].at("cycles"), table[2].at("cycles"));
  EXPECT_GT(std::stod(table[0].at("cycles")), std::stod(table[1].at("cycles")));

  // The point 1.5GHz x 736 tiles run directly gives the same cycles.
  const std::string t = dir.file("mm.itb");
  ASSERT_EQ(ipusim("kernel matmul --m 256 --n 256 --k 256 --dtype half --chip " +
                   chip_file("gc200") + " --set chip.clock=1.5GHz --set chip.tiles=736 --out " + t)
                .status,
            0);
  ASSERT_EQ(
      ipusim("run -q --chip " + chip_file("gc200") +
             " --set chip.clock=1.5GHz --set chip.tiles=736 --out " + dir.file("direct") + " " + t)
          .status,
      0);
  const std::string direct = read_all(dir.file("direct/stats.json"));
  const double direct_cycles = json_value_after(direct, "\"total\"");
  EXPECT_EQ(std::stod(table[2].at("cycles")), direct_cycles);
  const std::string point = read_all(dir.file("out/points/" + table[2].at("id") + "/stats.json"));
  for (const char* anchor : {"\"total\"", "\"compute\"", "\"exchange\"", "\"sync\""})
    EXPECT_EQ(json_value_after(point, anchor), json_value_after(direct, anchor)) << anchor;

  // sweep.json follows the contract.
  const std::string json = read_all(dir.file("out/sweep.json"));
  EXPECT_NE(json.find("\"spec\": \"" + spec + "\""), std::string::npos);
  EXPECT_NE(json.find("\"run_dir\": \"points/" + table[0].at("id") + "\""), std::string::npos);
  EXPECT_NE(json.find("\"overrides\": {\n        \"chip.clock\": \"1.33GHz\",\n        "
                      "\"chip.tiles\": \"736\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"throughput\": null"), std::string::npos);

  // Re-running skips all 6 and writes the same bytes.
  const std::string before = read_all(dir.file("out/sweep.csv"));
  const auto again = ipusim(sweep(spec, dir.file("out")));
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("6 point(s): 0 ran, 6 skipped"), std::string::npos) << again.out;
  EXPECT_EQ(read_all(dir.file("out/sweep.csv")), before);

  // Changing one axis value runs only the 2 new points.
  write(spec, kernel_spec("1.33GHz, 1.5GHz, 1.6GHz"));
  const auto changed = ipusim(sweep(spec, dir.file("out")));
  ASSERT_EQ(changed.status, 0) << changed.err;
  EXPECT_NE(changed.out.find("6 point(s): 2 ran, 4 skipped"), std::string::npos) << changed.out;
  const auto table2 = rows(read_all(dir.file("out/sweep.csv")));
  ASSERT_EQ(table2.size(), 6u);
  EXPECT_EQ(table2[4].at("chip.clock"), "1.6GHz");
  EXPECT_EQ(table2[0].at("id"), table[0].at("id"));
  EXPECT_NE(table2[4].at("id"), table[4].at("id"));
  EXPECT_NEAR(std::stod(table2[4].at("step_time_s")), std::stod(table2[4].at("cycles")) / 1.6e9,
              1e-15);
}

TEST(Sweep, JobsOneAndTwoGiveByteIdenticalCsv) {
  TempDir dir;
  const std::string spec = dir.file("s.yaml");
  write(spec, kernel_spec("1.33GHz, 1.85GHz"));
  ASSERT_EQ(ipusim(sweep(spec, dir.file("a"), "--jobs 1")).status, 0);
  ASSERT_EQ(ipusim(sweep(spec, dir.file("b"), "--jobs 2")).status, 0);
  const std::string a = read_all(dir.file("a/sweep.csv"));
  EXPECT_EQ(lines(a).size(), 5u);
  EXPECT_EQ(a, read_all(dir.file("b/sweep.csv")));
}

TEST(Sweep, ASecondSweepIntoTheSameDirectoryIsRefusedWithALockMessage) {
  // Issue 30, defect 4: two sweeps into one --out both failed ("points/<id>.tmp/point.json:
  // cannot open for writing", no sweep.csv). The second is refused at once; the first, holding
  // the directory's lock (as a running sweep does), is not disturbed.
  TempDir dir;
  const std::string spec = dir.file("s.yaml"), out = dir.file("o");
  write(spec, kernel_spec("1.33GHz, 1.85GHz"));
  std::filesystem::create_directories(out);
  const int fd = ::open((out + "/.ipusim.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const auto r = ipusim(sweep(spec, out));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("error: " + out +
                       ": another ipusim process is writing into this "
                       "directory (it holds " +
                       out + "/.ipusim.lock)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(out + "/sweep.csv"));
  EXPECT_FALSE(std::filesystem::exists(out + "/points"));
  ::close(fd);
  EXPECT_EQ(ipusim(sweep(spec, out)).status, 0);
  EXPECT_EQ(lines(read_all(out + "/sweep.csv")).size(), 5u);
}

TEST(Sweep, AFinishedPointWhoseRecordIsDamagedRunsAgain) {
  // Issue 30, defect 15: a point.json with a string for `cycles` counted as finished and left
  // the column empty. Such a record is damaged: the point runs again, with a warning.
  TempDir dir;
  const std::string spec = dir.file("s.yaml"), out = dir.file("o");
  write(spec, kernel_spec("1.33GHz, 1.85GHz"));
  ASSERT_EQ(ipusim(sweep(spec, out)).status, 0);
  const auto table = rows(read_all(out + "/sweep.csv"));
  ASSERT_EQ(table.size(), 4u);
  const std::string cycles = table[0].at("cycles");
  ASSERT_FALSE(cycles.empty());
  const std::string record = out + "/points/" + table[0].at("id") + "/point.json";
  std::string text = read_all(record);
  const std::string field = "\"cycles\": " + cycles;
  const auto at = text.find(field);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, field.size(), "\"cycles\": \"" + cycles + "\"");
  write(record, text);
  const auto r = ipusim(sweep(spec, out));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(
      r.err.find(record + ": cycles: expected a number or null, found a string; running the point "
                          "again"),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("4 point(s): 1 ran, 3 skipped (finished before), 0 failed"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(rows(read_all(out + "/sweep.csv"))[0].at("cycles"), cycles);
}

TEST(Sweep, PointThatDoesNotFitFailsWithItsErrorWhileOthersRun) {
  TempDir dir;
  const std::string spec = dir.file("s.yaml");
  write(spec,
        "format: ipusim-sweep/1\n"
        "base:\n"
        "  kernel: matmul\n"
        "  args: {m: 256, n: 256, k: 256}\n"
        "axes:\n"
        "  - chip.tile_memory: [624KiB, 1KiB, 256KiB]\n");
  const auto r = ipusim(sweep(spec, dir.file("out"), "--jobs 2"));
  EXPECT_EQ(r.status, 5) << r.out << r.err;
  EXPECT_NE(r.out.find("3 point(s): 3 ran, 0 skipped (finished before), 1 failed"),
            std::string::npos)
      << r.out;
  const auto table = rows(read_all(dir.file("out/sweep.csv")));
  ASSERT_EQ(table.size(), 3u);
  EXPECT_EQ(table[0].at("status"), "ok");
  EXPECT_EQ(table[2].at("status"), "ok");
  EXPECT_EQ(table[1].at("status"), "failed");
  EXPECT_EQ(table[1].at("step_time_s"), "");
  // The kernel step's own message, without "error: " (exit status 4 of 'ipusim kernel').
  EXPECT_EQ(table[1].at("error"),
            "no tile mapping fits: even the finest split needs more than the 0 B per tile "
            "available for tensors on "
            "GC200 (1472 tiles)");
  EXPECT_NE(read_all(dir.file("out/sweep.json")).find("\"status\": \"failed\""), std::string::npos);
  // The failed point's logs are kept; a re-run tries it again and skips the others.
  EXPECT_TRUE(fs::is_regular_file(dir.file("out/points/" + table[1].at("id") + "/point.json")));
  const auto again = ipusim(sweep(spec, dir.file("out")));
  EXPECT_EQ(again.status, 5);
  EXPECT_NE(again.out.find("1 ran, 2 skipped"), std::string::npos) << again.out;
}

TEST(Sweep, ZippedWorkloadAxesResolveTheirFiles) {
  TempDir dir;
  const std::string spec = dir.file("s.yaml");
  write(spec,
        "format: ipusim-sweep/1\n"
        "base:\n"
        "  run: resnet50-pod16\n"
        "combine: zip\n"
        "axes:\n"
        "  - run: [resnet50-pod16, bert-large-pod64]\n"
        "    system: [pod16, pod64]\n"
        "  - run.gradient_accumulation: [10, 20]\n");
  const auto r = ipusim("sweep --list " + spec);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 2u);
  EXPECT_NE(ls[0].find("run=resnet50-pod16, system=pod16, run.gradient_accumulation=10"),
            std::string::npos);
  EXPECT_NE(ls[1].find("run=bert-large-pod64, system=pod64, run.gradient_accumulation=20"),
            std::string::npos);
}

TEST(Sweep, ReportOfARealSweepDrawsEveryPoint) {
  // The sweep -> report contract end to end: a reduced ResNet on POD16 and POD64, then
  // 'ipusim report' on the sweep directory draws both points with the values of sweep.csv.
  TempDir dir;
  const std::string data = source_dir() + "/tests/data/workloads/";
  const std::string spec = dir.file("s.yaml");
  write(spec,
        "format: ipusim-sweep/1\n"
        "base:\n"
        "  model: " +
            data +
            "resnet_tiny.yaml\n"
            "  run: " +
            data +
            "resnet_tiny-pod16.yaml\n"
            "axes:\n"
            "  - system: [pod16, pod64]\n"
            "    run.replicas: [16, 64]\n");
  const auto r = ipusim(sweep(spec, dir.file("out"), "--jobs 2"));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const auto table = rows(read_all(dir.file("out/sweep.csv")));
  ASSERT_EQ(table.size(), 2u);
  const double t16 = std::stod(table[0].at("throughput"));
  const double t64 = std::stod(table[1].at("throughput"));
  EXPECT_EQ(table[0].at("ipus"), "16");
  EXPECT_EQ(table[1].at("ipus"), "64");
  // A workload point is one process ('ipusim run --run', issue 14): one log, no trace file.
  const std::string point = dir.file("out/points/" + table[0].at("id"));
  EXPECT_TRUE(fs::is_regular_file(point + "/log.0.err"));
  EXPECT_FALSE(fs::exists(point + "/log.1.err"));
  EXPECT_NE(read_all(point + "/trace.id").find("identity: "), std::string::npos);
  for (const auto& e : fs::directory_iterator(point))
    EXPECT_NE(e.path().extension(), ".itb") << e.path();
  const auto rep = ipusim("report " + dir.file("out") + " --out " + dir.file("s.html"));
  ASSERT_EQ(rep.status, 0) << rep.err;
  const std::string html = read_all(dir.file("s.html"));
  EXPECT_NE(html.find("id=\"chart-sweep-throughput-0\""), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-sweep-efficiency-0\""), std::string::npos);
  EXPECT_NE(html.find(fmt::format("ResNet-tiny: 64 IPUs: {:.0f}<", t64)), std::string::npos) << t64;
  // Efficiency: (throughput / IPUs) relative to the 16-IPU point, 4 significant digits.
  EXPECT_NE(html.find(fmt::format("ResNet-tiny: 16 IPUs: 1<")), std::string::npos);
  EXPECT_NE(html.find(fmt::format("ResNet-tiny: 64 IPUs: {:.4g}<", (t64 / 64) / (t16 / 16))),
            std::string::npos);
}

TEST(Sweep, SpecErrorsNameFileLineAndKey) {
  TempDir dir;
  const std::string spec = dir.file("bad.yaml");
  write(spec, kernel_spec("1.33GHz", "  - chip.clok: [1GHz]\n"));
  auto r = ipusim(sweep(spec, dir.file("out")));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find(spec + ":10:5: axes[2]: expected a config key"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown key 'chip.clok' (did you mean 'chip.clock'?)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir.file("out")));

  write(spec, "format: ipusim-sweep/1\nbase:\n  kernel: matmul\n  chipp: gc200\n");
  r = ipusim(sweep(spec, dir.file("out")));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find(spec + ":4:3: base: expected one of the keys"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'chip'?"), std::string::npos) << r.err;

  write(spec,
        "format: ipusim-sweep/1\nbase: {kernel: matmul}\ncombine: zip\naxes:\n  - chip.tiles: "
        "[736, 1472]\n"
        "  - chip.clock: [1GHz]\n");
  r = ipusim(sweep(spec, dir.file("out")));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(
      r.err.find(spec + ":6:5: axes[1]: expected 2 values as axes[0] (combine: zip), found 1"),
      std::string::npos)
      << r.err;

  // A value out of range names the point and the key.
  write(spec,
        "format: ipusim-sweep/1\nbase: {kernel: matmul}\naxes:\n  - chip.clock: [1GHz, 99THz]\n");
  r = ipusim(sweep(spec, dir.file("out")));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find(spec + ":4: point 1 (chip.clock=99THz): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chip.clock"), std::string::npos) << r.err;
}

#ifdef IPUSIM_MPIEXEC
// Runs 'mpirun ... ipusim sweep' through the shell; returns the exit status.
int mpirun(int ranks, const std::string& args, const TempDir& dir) {
  // In an ASan build (tools/run-tests.sh --asan) LeakSanitizer would report OpenMPI's own
  // allocations left at MPI_Finalize: suppress those (with full stacks, since OpenMPI's
  // libraries lack frame pointers); ipusim's code stays checked. No effect in other builds.
  // use_stacks=0 as in tools/run-tests.sh (SystemC's coroutine stacks at exit).
  const std::string lsan =
      "LSAN_OPTIONS=suppressions=" + source_dir() +
      "/tests/integration/lsan-openmpi.supp:fast_unwind_on_malloc=0:use_stacks=0 ";
  // Containers often forbid the cross-memory attach OpenMPI's shared-memory transport uses for
  // large messages; ours are small, but do not depend on it.
  const std::string cma = "OMPI_MCA_btl_vader_single_copy_mechanism=none ";
  const std::string cmd = lsan + cma + std::string(IPUSIM_MPIEXEC) +
                          " --allow-run-as-root --oversubscribe -np " + std::to_string(ranks) +
                          " " + IPUSIM_BINARY + " " + args + " >" + dir.file("mpi.out") + " 2>" +
                          dir.file("mpi.err") + " </dev/null";
  // Bounded (system_bounded): an MPI launch that hangs in some environment fails the test
  // with status kTimedOut instead of holding the suite.
  return system_bounded(cmd, 300);
}

TEST(SweepMpi, ThreeRanksGiveTheLocalCsvByteForByte) {
  ASSERT_TRUE(fs::exists(IPUSIM_MPIEXEC))
      << "MPI is built in but " << IPUSIM_MPIEXEC << " is missing";
  TempDir dir;
  const std::string spec = dir.file("s.yaml");
  // A failing point too, so that errors travel from the ranks to rank 0 identically.
  write(spec, kernel_spec("1.33GHz, 1.5GHz, 1.85GHz", "  - chip.tile_memory: [624KiB, 1KiB]\n"));
  const auto local = ipusim(sweep(spec, dir.file("local"), "--jobs 2"));
  ASSERT_EQ(local.status, 5) << local.out << local.err;
  const int status = mpirun(3, sweep(spec, dir.file("mpi")), dir);
  const std::string out = read_all(dir.file("mpi.out")), err = read_all(dir.file("mpi.err"));
  ASSERT_EQ(status, 5) << out << err;
  EXPECT_NE(out.find("12 point(s): 12 ran, 0 skipped (finished before), 6 failed (3 MPI ranks; "),
            std::string::npos)
      << out << err;
  // Rank 0 runs points as well as handing them out: with 3 ranks three points run at once.
  const std::smatch on_rank0 = [&] {
    std::smatch m;
    std::regex_search(out, m, std::regex(R"(; (\d+) of the points run on rank 0\))"));
    return m;
  }();
  ASSERT_FALSE(on_rank0.empty()) << out;
  EXPECT_GE(std::stoi(on_rank0[1]), 1) << out;
  EXPECT_LE(std::stoi(on_rank0[1]), 11) << out;
  const std::string csv = read_all(dir.file("local/sweep.csv"));
  EXPECT_EQ(lines(csv).size(), 13u);
  EXPECT_EQ(read_all(dir.file("mpi/sweep.csv")), csv);
  // Every point's run directory was written by a rank; a second MPI run skips them all.
  for (const auto& row : rows(csv))
    EXPECT_TRUE(fs::is_regular_file(dir.file("mpi/points/" + row.at("id") + "/point.json")));
  ASSERT_EQ(mpirun(2, sweep(spec, dir.file("mpi")), dir), 5) << read_all(dir.file("mpi.err"));
  EXPECT_NE(read_all(dir.file("mpi.out")).find("12 point(s): 6 ran, 6 skipped"), std::string::npos)
      << read_all(dir.file("mpi.out"));
  EXPECT_EQ(read_all(dir.file("mpi/sweep.csv")), csv);
}
#endif

// A child ipusim in the background (for the interrupt test).
class Background {
 public:
  Background(const std::vector<std::string>& args, const std::string& out, const std::string& err) {
    std::vector<std::string> all{IPUSIM_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (o < 0 || e < 0) ::_exit(127);
      ::dup2(o, 1);
      ::dup2(e, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  int wait(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) return -2;
      std::this_thread::sleep_for(10ms);
    }
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Sweep, InterruptKeepsFinishedPointsAndRemovesTheRest) {
  TempDir dir;
  const std::string spec = dir.file("s.yaml");
  // One quick point (a ResNet-50 training step, about 0.05 s), finished first, then one that
  // runs for many seconds (compiling GPT-3 175B for IPU-POD256), interrupted while it runs.
  write(spec,
        "format: ipusim-sweep/1\n"
        "base:\n"
        "  run: resnet50-pod16\n"
        "axes:\n"
        "  - run: [resnet50-pod16, gpt3-175b-pod256]\n");
  // Make the first point quick: run it alone first.
  write(dir.file("first.yaml"),
        "format: ipusim-sweep/1\nbase:\n  run: resnet50-pod16\naxes:\n  - "
        "run: [resnet50-pod16]\n");
  ASSERT_EQ(ipusim(sweep(dir.file("first.yaml"), dir.file("out"))).status, 0);
  const auto finished = entries(dir.file("out/points"));
  ASSERT_EQ(finished.size(), 1u);
  // A workload row: its model, system and IPUs, and throughput = samples per step / step time
  // (16 replicas x 20 images x 10 micro-batches).
  const auto table = rows(read_all(dir.file("out/sweep.csv")));
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0].at("run"), "resnet50-pod16");
  EXPECT_EQ(table[0].at("workload"), "ResNet-50-v1.5");
  EXPECT_EQ(table[0].at("system_name"), "IPU-POD16");
  EXPECT_EQ(table[0].at("ipus"), "16");
  EXPECT_EQ(table[0].at("throughput_unit"), "images/s");
  EXPECT_NEAR(std::stod(table[0].at("throughput")), 3200 / std::stod(table[0].at("step_time_s")),
              1e-9 * std::stod(table[0].at("throughput")));
  EXPECT_GT(std::stod(table[0].at("compute_s")), 0);
  EXPECT_EQ(json_value_after(read_all(dir.file("out/points/" + finished[0] + "/stats.json")),
                             "\"samples_per_step\""),
            3200);
  const std::string record = read_all(dir.file("out/points/" + finished[0] + "/point.json"));

  Background bg({"sweep", spec, "--out", dir.file("out"), "--jobs", "1"}, dir.file("bg.out"),
                dir.file("bg.err"));
  // Wait until the second point's work directory exists, then interrupt it.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (entries(dir.file("out/points")).size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  ASSERT_EQ(entries(dir.file("out/points")).size(), 2u);
  std::this_thread::sleep_for(50ms);
  ASSERT_EQ(::kill(bg.pid(), SIGINT), 0);
  EXPECT_EQ(bg.wait(20s), 130) << read_all(dir.file("bg.err"));
  EXPECT_NE(read_all(dir.file("bg.err")).find("interrupted"), std::string::npos)
      << read_all(dir.file("bg.err"));
  // The finished point is intact, the running one gone, no sweep files half-written.
  EXPECT_EQ(entries(dir.file("out/points")), finished);
  EXPECT_EQ(read_all(dir.file("out/points/" + finished[0] + "/point.json")), record);
  for (const auto& e : entries(dir.file("out"))) EXPECT_EQ(e.find(".tmp"), std::string::npos) << e;
}

}  // namespace
}  // namespace ipusim::testing
