// The processes of a run spread over MPI ranks (`mpirun -np R tessera-vp
// -p SYSTEM.json ...`). The simulator itself needs no MPI: under mpirun it
// loads libtessera_mpi.so (platform/mpi), which links OpenMPI, and alone it
// runs as one process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

class Ranks {
 public:
  virtual ~Ranks() = default;
  virtual unsigned rank() const = 0;
  virtual unsigned size() const = 0;
  // Collective (every rank calls it, in the same order): sends out[r] to
  // rank r and returns what each rank sent this one, by rank (its own
  // entry is out[rank()]). Throws std::runtime_error when a peer is gone.
  virtual std::vector<std::vector<std::uint8_t>> exchange(const std::vector<std::vector<std::uint8_t>>& out) = 0;
  // Ends every rank now with `code` (after a failure on this one).
  [[noreturn]] virtual void abort(int code) = 0;
};

// Under mpirun with more than one rank: how many, and which this process
// is (from the launcher's environment, before MPI is opened); alone: 1, 0.
unsigned launched_ranks();
unsigned launched_rank();

// Under mpirun (OMPI_COMM_WORLD_SIZE or PMI_SIZE in the environment, more
// than one rank): the MPI ranks, initialised; alone: nullptr. `error` says
// why MPI could not be opened (then nullptr too).
std::unique_ptr<Ranks> open_ranks(int* argc, char*** argv, std::string& error);

}  // namespace tessera
