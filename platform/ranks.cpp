#include "ranks.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

namespace tessera {

unsigned launched_ranks() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!size) size = std::getenv("PMI_SIZE");
  const int n = size ? std::atoi(size) : 1;
  return n > 1 ? static_cast<unsigned>(n) : 1;
}

unsigned launched_rank() {
  if (launched_ranks() == 1) return 0;
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!rank) rank = std::getenv("PMI_RANK");
  const int r = rank ? std::atoi(rank) : 0;
  return r > 0 ? static_cast<unsigned>(r) : 0;
}

std::unique_ptr<Ranks> open_ranks(int* argc, char*** argv, std::string& error) {
  if (launched_ranks() == 1) return nullptr;
  // Beside the program (an installed tree), else where the build put it.
  std::string self(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  self.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  const std::string dir = self.substr(0, self.rfind('/'));
  void* lib = nullptr;
  std::string tried, why;
  for (const std::string& p : {dir + "/../" TESSERA_MPI_INSTALLED, std::string(TESSERA_MPI_LIBRARY)}) {
    tried += (tried.empty() ? "" : ", ") + p;
    if ((lib = ::dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL))) break;
    if (const char* e = ::dlerror(); e && ::access(p.c_str(), F_OK) == 0) why = std::string(": ") + e;
  }
  if (!lib) {
    error = "running under mpirun, but libtessera_mpi.so could not be loaded (tried " + tried + why +
            "; build it with libopenmpi-dev installed)";
    return nullptr;
  }
  using Open = Ranks* (*)(int*, char***);
  auto open = reinterpret_cast<Open>(::dlsym(lib, "tessera_mpi_open"));
  if (!open) {
    error = "libtessera_mpi.so has no tessera_mpi_open";
    return nullptr;
  }
  return std::unique_ptr<Ranks>(open(argc, argv));
}

}  // namespace tessera
