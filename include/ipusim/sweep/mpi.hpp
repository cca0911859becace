// SPDX-License-Identifier: Apache-2.0
// Spreading sweep points over MPI ranks (docs/sweeps.md): rank 0 hands out point indices on
// request (dynamic load balancing), runs points itself as well, and collects each point's
// result; ranks 1..N-1 run the points they are given. Compiled in only with IPUSIM_MPI (the
// IPUSIM_HAVE_MPI definition); without it built() is false and Session throws.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace ipusim::sweep::mpi {

// True if this ipusim was built with MPI.
bool built();

// True if an MPI launcher (mpirun, mpiexec, srun) started this process: it sets
// OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_SIZE. Outside a launcher MPI is never initialised.
bool launched();

// MPI_Init on construction, MPI_Finalize on destruction; if destroyed while an exception
// propagates, MPI_Abort (so that the other ranks stop too).
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

// Rank 0: gives the indices of `order` (first first) to the worker ranks as they ask and,
// with `run_local`, runs them itself too on a thread of its own (so N ranks run N points at
// once); calls on_result(index, payload) on the calling thread with each result, a worker's
// or its own, and `idle` while waiting (every few milliseconds; it may throw to stop).
// Returns, once every point has been reported and every worker told to stop, the number of
// points rank 0 ran itself; an exception from run_local stops the local thread and is
// rethrown here.
std::size_t serve(const Session& session, const std::vector<std::size_t>& order,
                  const std::function<void(std::size_t, const std::string&)>& on_result,
                  const std::function<void()>& idle,
                  const std::function<std::string(std::size_t)>& run_local = {});

// Ranks > 0: asks rank 0 for work and runs it (`run(index)` returns the payload sent back)
// until told to stop.
void work(const Session& session, const std::function<std::string(std::size_t)>& run);

}  // namespace ipusim::sweep::mpi
