// SPDX-License-Identifier: Apache-2.0
#include "ipusim/sweep/mpi.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <exception>
#include <thread>

#include "ipusim/util/error.hpp"

#ifdef IPUSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace ipusim::sweep::mpi {

bool launched() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_SIZE");
}

#ifdef IPUSIM_HAVE_MPI

namespace {

// Worker -> rank 0: "ready", with the previous point's "<index>\n<payload>" (empty at first).
constexpr int kTagReady = 1;
// Rank 0 -> worker: the next point's index, or -1: stop.
constexpr int kTagWork = 2;

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(fmt::format("MPI: {} failed (error {})", what, rc));
}

}  // namespace

bool built() { return true; }

Session::Session() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) check(MPI_Init(nullptr, nullptr), "MPI_Init");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

Session::~Session() {
  if (std::uncaught_exceptions() > 0) {
    MPI_Abort(MPI_COMM_WORLD, static_cast<int>(ExitCode::kInterrupted));
    return;
  }
  MPI_Finalize();
}

void serve(const Session& session, const std::vector<std::size_t>& order,
           const std::function<void(std::size_t, const std::string&)>& on_result, const std::function<void()>& idle) {
  std::deque<std::size_t> pending(order.begin(), order.end());
  int active = session.size() - 1;
  while (active > 0) {
    int flag = 0;
    MPI_Status status;
    check(MPI_Iprobe(MPI_ANY_SOURCE, kTagReady, MPI_COMM_WORLD, &flag, &status), "MPI_Iprobe");
    if (!flag) {
      // Polling with a short sleep instead of a blocking receive, which spins a core in
      // OpenMPI: rank 0 shares the machine with the workers' children.
      if (idle) idle();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    int count = 0;
    MPI_Get_count(&status, MPI_CHAR, &count);
    std::string message(static_cast<std::size_t>(count), '\0');
    check(MPI_Recv(message.data(), count, MPI_CHAR, status.MPI_SOURCE, kTagReady, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
          "MPI_Recv");
    if (!message.empty()) {
      const std::size_t nl = message.find('\n');
      on_result(std::stoull(message.substr(0, nl)), nl == std::string::npos ? "" : message.substr(nl + 1));
    }
    long long next = -1;
    if (!pending.empty()) {
      next = static_cast<long long>(pending.front());
      pending.pop_front();
    } else {
      --active;
    }
    check(MPI_Send(&next, 1, MPI_LONG_LONG, status.MPI_SOURCE, kTagWork, MPI_COMM_WORLD), "MPI_Send");
  }
}

void work(const Session&, const std::function<std::string(std::size_t)>& run) {
  std::string message;
  while (true) {
    check(MPI_Send(message.data(), static_cast<int>(message.size()), MPI_CHAR, 0, kTagReady, MPI_COMM_WORLD),
          "MPI_Send");
    long long next = -1;
    check(MPI_Recv(&next, 1, MPI_LONG_LONG, 0, kTagWork, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
    if (next < 0) return;
    const auto index = static_cast<std::size_t>(next);
    message = fmt::format("{}\n{}", index, run(index));
  }
}

#else

bool built() { return false; }

Session::Session() {
  throw UsageError("this ipusim was built without MPI (configure with -DIPUSIM_MPI=ON and an MPI library "
                   "installed, see tools/install-deps.sh); run the sweep without mpirun");
}
Session::~Session() = default;

void serve(const Session&, const std::vector<std::size_t>&, const std::function<void(std::size_t, const std::string&)>&,
           const std::function<void()>&) {}
void work(const Session&, const std::function<std::string(std::size_t)>&) {}

#endif

}  // namespace ipusim::sweep::mpi
