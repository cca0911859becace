// SPDX-License-Identifier: Apache-2.0
#include "ipusim/sweep/mpi.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

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

std::size_t serve(const Session& session, const std::vector<std::size_t>& order,
                  const std::function<void(std::size_t, const std::string&)>& on_result,
                  const std::function<void()>& idle,
                  const std::function<std::string(std::size_t)>& run_local) {
  // The queue is shared with rank 0's own worker thread, which runs points as the remote
  // ranks do; its results come back through `done` and are reported from this thread.
  std::mutex mutex;
  std::deque<std::size_t> pending(order.begin(), order.end());
  std::deque<std::pair<std::size_t, std::string>> done;
  std::exception_ptr local_error;
  std::size_t ran_locally = 0;
  bool local_running = static_cast<bool>(run_local) && !pending.empty();
  std::thread local;
  if (local_running)
    local = std::thread([&] {
      while (true) {
        std::size_t index = 0;
        {
          std::lock_guard lock(mutex);
          if (pending.empty() || local_error) break;
          index = pending.front();
          pending.pop_front();
        }
        try {
          std::string payload = run_local(index);
          std::lock_guard lock(mutex);
          done.emplace_back(index, std::move(payload));
        } catch (...) {
          std::lock_guard lock(mutex);
          local_error = std::current_exception();
          break;
        }
      }
      std::lock_guard lock(mutex);
      local_running = false;
    });
  struct Join {
    std::thread& t;
    std::mutex& m;
    std::deque<std::size_t>& q;
    ~Join() {
      if (!t.joinable()) return;
      {
        std::lock_guard lock(m);
        q.clear();  // on an exception: let the local point in progress be the last
      }
      t.join();
    }
  } join{local, mutex, pending};
  auto drain = [&] {
    std::deque<std::pair<std::size_t, std::string>> results;
    std::exception_ptr error;
    {
      std::lock_guard lock(mutex);
      results.swap(done);
      error = local_error;
    }
    for (const auto& [index, payload] : results) on_result(index, payload);
    ran_locally += results.size();
    if (error) std::rethrow_exception(error);
  };
  auto local_busy = [&] {
    std::lock_guard lock(mutex);
    return local_running;
  };
  int active = session.size() - 1;
  while (active > 0 || local_busy()) {
    drain();
    int flag = 0;
    MPI_Status status;
    if (active > 0)
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
    check(MPI_Recv(message.data(), count, MPI_CHAR, status.MPI_SOURCE, kTagReady, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "MPI_Recv");
    if (!message.empty()) {
      const std::size_t nl = message.find('\n');
      on_result(std::stoull(message.substr(0, nl)),
                nl == std::string::npos ? "" : message.substr(nl + 1));
    }
    long long next = -1;
    {
      std::lock_guard lock(mutex);
      if (!pending.empty()) {
        next = static_cast<long long>(pending.front());
        pending.pop_front();
      }
    }
    if (next < 0) --active;
    check(MPI_Send(&next, 1, MPI_LONG_LONG, status.MPI_SOURCE, kTagWork, MPI_COMM_WORLD),
          "MPI_Send");
  }
  if (local.joinable()) local.join();
  drain();
  return ran_locally;
}

void work(const Session&, const std::function<std::string(std::size_t)>& run) {
  std::string message;
  while (true) {
    check(MPI_Send(message.data(), static_cast<int>(message.size()), MPI_CHAR, 0, kTagReady,
                   MPI_COMM_WORLD),
          "MPI_Send");
    long long next = -1;
    check(MPI_Recv(&next, 1, MPI_LONG_LONG, 0, kTagWork, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
          "MPI_Recv");
    if (next < 0) return;
    const auto index = static_cast<std::size_t>(next);
    message = fmt::format("{}\n{}", index, run(index));
  }
}

#else

bool built() { return false; }

Session::Session() {
  throw UsageError(
      "this ipusim was built without MPI (configure with -DIPUSIM_MPI=ON and an MPI library "
      "installed, see tools/install-deps.sh); run the sweep without mpirun");
}
Session::~Session() = default;

std::size_t serve(const Session&, const std::vector<std::size_t>&,
                  const std::function<void(std::size_t, const std::string&)>&,
                  const std::function<void()>&, const std::function<std::string(std::size_t)>&) {
  return 0;
}
void work(const Session&, const std::function<std::string(std::size_t)>&) {}

#endif

}  // namespace ipusim::sweep::mpi
