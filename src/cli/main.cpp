// SPDX-License-Identifier: Apache-2.0
// ipusim: the command-line driver. The only place that catches errors, prints them and picks
// the exit code (docs/errors.md).
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <string>
#include <systemc>

#include "common.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"

namespace {

constexpr const char* kOverview = R"(ipusim - a cycle-level simulator of Graphcore IPU systems

Usage: ipusim <command> [options]

Commands:
  compile   lower a model's training or inference step (CNNs, transformers) onto a chip and system
  run       simulate a compiled program trace on a chip or system (or, with --run, compile a
            model's step in memory and simulate it) and report where the time went; --out
            writes a run directory (stats.json, CSVs of tiles, supersteps, layers and plans)
  kernel    write a reference kernel trace (matmul, conv2d, reduce, elementwise,
            exchange-all-to-all, exchange-broadcast, sync-loop; on a system link-p2p,
            allreduce, collective, sync), planned for a chip
  validate  check config, model, sweep, suite and trace files without simulating
  import    write the model file an ONNX model is read as (run --model takes .onnx too)
  info      print a chip's (or --system's) resolved parameters and derived peaks, or the
            config and run key references
  check     run a regression suite and compare it with its golden results (--update rewrites
            them, --junit writes a JUnit XML file)
  sweep     run every point of a sweep spec (locally or under mpirun) into sweep.csv/json and
            a run directory per point
  report    write a self-contained HTML report of a run (or sweep) directory
  compare   explain the differences between two run directories: time by phase and layer,
            plan changes, settings and stats

Run 'ipusim <command> --help' for the options of a command.

Examples:
  ipusim kernel matmul --m 2048 --n 2048 --k 2048 --dtype half --out mm.trace
  ipusim run --chip configs/chips/gc200.yaml --out out mm.trace
  ipusim run --set chip.clock=1.85GHz mm.trace
  ipusim info --chip configs/chips/bow.yaml
  ipusim sweep configs/sweeps/scaling.yaml --out out/scaling
  mpirun -np 3 ipusim sweep configs/sweeps/scaling.yaml --out out/scaling
  ipusim report out                  # out/report.html: charts and tile maps, works offline
)";

extern "C" void on_signal(int sig) {
  ipusim::remove_pending_temporaries();
  const char msg[] = "ipusim: interrupted; partial outputs removed\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)sig;
  ::_exit(static_cast<int>(ipusim::ExitCode::kInterrupted));
}

// Every signal whose default action ends the process without a chance to clean up, and that a
// user or the system sends to stop a run: Ctrl-C, kill, a closed terminal (SIGHUP), a CPU-time
// limit (SIGXCPU, ulimit -t) and a reader that went away (SIGPIPE). Each removes the partial
// temporaries and exits 130 (issue 16, defect J: SIGHUP, SIGXCPU and SIGPIPE left them).
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGXCPU, SIGPIPE};

int dispatch(int argc, char** argv) {
  using namespace ipusim::cli;
  if (argc < 2) {
    std::cerr << kOverview;
    return static_cast<int>(ipusim::ExitCode::kUsage);
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kOverview;
    return 0;
  }
  if (command == "--version") {
    std::cout << "ipusim " << IPUSIM_VERSION << "\n";
    return 0;
  }
  if (command == "run") return run_command(argc - 1, argv + 1);
  if (command == "compile") return compile_command(argc - 1, argv + 1);
  if (command == "kernel") return kernel_command(argc - 1, argv + 1);
  if (command == "validate") return validate_command(argc - 1, argv + 1);
  if (command == "import") return import_command(argc - 1, argv + 1);
  if (command == "info") return info_command(argc - 1, argv + 1);
  if (command == "check") return check_command(argc - 1, argv + 1);
  if (command == "sweep") return sweep_command(argc - 1, argv + 1);
  if (command == "report") return report_command(argc - 1, argv + 1);
  if (command == "compare") return compare_command(argc - 1, argv + 1);
  throw ipusim::UsageError("ipusim: unknown command '" + command +
                           "' (commands: compile, run, kernel, validate, import, info, check, "
                           "sweep, report, compare; see 'ipusim --help')");
}

}  // namespace

// Our own main() takes precedence over the one in libsystemc, which would print the SystemC
// banner before anything else runs. The banner is off unless IPUSIM_SYSTEMC_BANNER=1, so
// that stdout and stderr carry only ipusim's own output.
int main(int argc, char* argv[]) {
  if (!std::getenv("IPUSIM_SYSTEMC_BANNER")) ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  for (int sig : kCleanupSignals) std::signal(sig, on_signal);
  try {
    return dispatch(argc, argv);
  } catch (const ipusim::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return static_cast<int>(e.exit_code());
  } catch (const std::bad_alloc& e) {
    // Not a bug: the input needs more memory than the process may use (issue 16, defect O).
    std::cerr << "error: out of memory (" << e.what()
              << "): the input needs more memory than is available; reduce it or raise the "
                 "memory limit\n";
    return static_cast<int>(ipusim::ExitCode::kResource);
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return static_cast<int>(ipusim::ExitCode::kInternal);
  }
}

// Never called (main above replaces SystemC's), but libsystemc refers to it.
int sc_main(int, char*[]) { return 1; }
