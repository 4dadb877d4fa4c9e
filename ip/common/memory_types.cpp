// The memory faces as IP types. Kept apart from memory.cpp so that only
// this registration, not the whole framework, is linked in as a whole
// archive.
#include "common/memory.hpp"
#include "common/registry.hpp"

namespace tessera {

TESSERA_REGISTER_IP("ram", Ram, "RAM with DMI and fixed latencies");
TESSERA_REGISTER_IP("rom", Rom, "ROM: writes rejected, DMI read-only, optional image");
TESSERA_REGISTER_IP("sparse_memory", SparseMemory, "memory for huge address spaces, pages allocated on first write");

}  // namespace tessera
