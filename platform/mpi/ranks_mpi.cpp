// The MPI ranks behind tessera::Ranks (platform/ranks.hpp): OpenMPI,
// loaded by tessera-vp only under mpirun. Errors come back from MPI calls
// (MPI_ERRORS_RETURN) so a peer that died ends this rank with one line
// instead of a hang.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "ranks.hpp"

namespace tessera {
namespace {

class MpiRanks : public Ranks {
 public:
  MpiRanks(int* argc, char*** argv) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int r = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    rank_ = static_cast<unsigned>(r);
    size_ = static_cast<unsigned>(n);
  }
  ~MpiRanks() override { MPI_Finalize(); }
  unsigned rank() const override { return rank_; }
  unsigned size() const override { return size_; }

  std::vector<std::vector<std::uint8_t>> exchange(const std::vector<std::vector<std::uint8_t>>& out) override {
    std::vector<long long> send_n(size_, 0), recv_n(size_, 0);
    for (unsigned r = 0; r < size_ && r < out.size(); ++r) send_n[r] = static_cast<long long>(out[r].size());
    check(MPI_Alltoall(send_n.data(), 1, MPI_LONG_LONG, recv_n.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD), "Alltoall");
    std::vector<int> sc(size_), sd(size_), rc(size_), rd(size_);
    std::vector<std::uint8_t> send, recv;
    long long s = 0, q = 0;
    for (unsigned r = 0; r < size_; ++r) {
      if (send_n[r] > (1ll << 30) || recv_n[r] > (1ll << 30)) throw std::runtime_error("a window's messages exceed 1 GiB");
      sc[r] = static_cast<int>(send_n[r]);
      sd[r] = static_cast<int>(s);
      rc[r] = static_cast<int>(recv_n[r]);
      rd[r] = static_cast<int>(q);
      s += send_n[r];
      q += recv_n[r];
      if (r < out.size()) send.insert(send.end(), out[r].begin(), out[r].end());
    }
    recv.resize(static_cast<std::size_t>(q));
    check(MPI_Alltoallv(send.data(), sc.data(), sd.data(), MPI_BYTE, recv.data(), rc.data(), rd.data(), MPI_BYTE,
                        MPI_COMM_WORLD),
          "Alltoallv");
    std::vector<std::vector<std::uint8_t>> in(size_);
    for (unsigned r = 0; r < size_; ++r) in[r].assign(recv.begin() + rd[r], recv.begin() + rd[r] + rc[r]);
    return in;
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  static void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw std::runtime_error(std::string("MPI_") + what + " failed: " + text);
  }
  unsigned rank_ = 0, size_ = 1;
};

}  // namespace
}  // namespace tessera

extern "C" tessera::Ranks* tessera_mpi_open(int* argc, char*** argv) { return new tessera::MpiRanks(argc, argv); }
