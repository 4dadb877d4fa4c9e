#include "common/paths.hpp"

#include <cstdlib>
#include <unistd.h>

namespace tessera {
namespace {

bool is_dir(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

const char* sub(DataKind k) {
  switch (k) {
    case DataKind::platforms: return "platform";
    case DataKind::firmware: return "firmware";
    case DataKind::kernels: return "kernels";
  }
  return "";
}

std::string build_tree(DataKind k) {
  return k == DataKind::platforms ? std::string(TESSERA_SOURCE_DIR) + "/platform"
                                  : std::string(TESSERA_BINARY_DIR) + "/sw/target/" + sub(k);
}

bool under(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

std::string& sdk_dir() {
  static std::string dir;
  return dir;
}

}  // namespace

void set_sdk_data_dir(const char* dir) { sdk_dir() = dir ? dir : ""; }

std::string program_dir() {
  std::string self(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (n <= 0) return "";
  self.resize(static_cast<std::size_t>(n));
  return self.substr(0, self.rfind('/'));
}

std::string data_dir(DataKind k) {
  if (k == DataKind::platforms)
    if (const char* d = std::getenv("TESSERA_PLATFORM_DIR"); d && *d) return d;
  if (const char* d = std::getenv("TESSERA_DATA_DIR"); d && *d) return std::string(d) + "/" + sub(k);
  const std::string bin = program_dir();
  if (const std::string beside = bin + "/../share/tessera/" + sub(k); !bin.empty() && is_dir(beside)) return beside;
  if (const std::string sdk = sdk_dir() + "/" + sub(k); !sdk_dir().empty() && is_dir(sdk)) return sdk;
  if (under(bin, TESSERA_BINARY_DIR) || !is_dir(std::string(TESSERA_INSTALL_DATADIR) + "/" + sub(k)))
    return build_tree(k);
  return std::string(TESSERA_INSTALL_DATADIR) + "/" + sub(k);
}

std::string data_file(DataKind k, const std::string& file) { return data_dir(k) + "/" + file; }

}  // namespace tessera
