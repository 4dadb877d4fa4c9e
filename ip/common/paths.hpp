// Where the simulator's own files are: the platform files, and the firmware
// and kernels built for the chip. An installed tree keeps them under
// <prefix>/share/tessera/{platform,firmware,kernels}; a build tree in the
// source folder (platform/) and the build folder (sw/target/).
//
// Looked up in this order: the environment (TESSERA_DATA_DIR, the root of
// an installed layout, or TESSERA_PLATFORM_DIR for the platform files
// alone); beside the running program when it is installed
// (<bin>/../share/tessera); the SDK a program was built against (below);
// the build tree when the running program is part of it; the prefix the
// build was configured to install to; the build tree.
#pragma once

#include <string>

namespace tessera {

enum class DataKind { platforms, firmware, kernels };

// The folder; it may not exist when nothing was built or installed.
std::string data_dir(DataKind kind);
// data_dir(kind) + "/" + file.
std::string data_file(DataKind kind, const std::string& file);
// The running program's folder ("" when /proc/self/exe cannot be read).
std::string program_dir();

// A program built against an installed SDK is compiled with
// TESSERA_SDK_DATA_DIR (find_package(Tessera) sets it), so it finds that
// SDK's data wherever the SDK was installed.
void set_sdk_data_dir(const char* dir);
#ifdef TESSERA_SDK_DATA_DIR
namespace detail {
inline const bool sdk_data_dir_set = (set_sdk_data_dir(TESSERA_SDK_DATA_DIR), true);
}
#endif

}  // namespace tessera
