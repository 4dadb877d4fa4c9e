#include "common/registry.hpp"

#include <dlfcn.h>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/log.hpp"

namespace tessera {

IpRegistry& IpRegistry::get() {
  static IpRegistry r;
  return r;
}

void IpRegistry::add(IpType type) {
  std::string name = type.name;
  if (!types_.emplace(name, std::move(type)).second) {
    if (loading_) return clashes_.push_back(name);  // the loader reports it
    log::internal("tessera", "IP type \"{}\" registered twice", name);  // elaboration-only
  }
}

void IpRegistry::add_impl(const std::string& type, const std::string& impl) {
  auto it = types_.find(type);
  if (it == types_.end()) log::internal("tessera", "impl \"{}\" for unknown IP type \"{}\"", impl, type);  // elaboration-only
  else it->second.impls.push_back(impl);
}

void IpRegistry::set_facts(const std::string& type, std::function<std::vector<Fact>(const std::any&)> facts) {
  types_.at(type).facts = std::move(facts);
}

const char* IpRegistry::plugin_abi() { return "tessera-" TESSERA_VERSION; }

void IpRegistry::load_plugin(const std::string& path, const std::string& where) {
  const std::string w = where + ": " + path + ": ";
  char real[PATH_MAX];
  if (!::realpath(path.c_str(), real)) throw ConfigError(w + std::strerror(errno));
  if (plugins_.count(real)) return;
  // dlopen wants a path with a slash, or it searches the library path.
  loading_ = true;
  clashes_.clear();
  void* h = ::dlopen(real, RTLD_NOW | RTLD_LOCAL);
  loading_ = false;
  if (!h) {
    const char* e = ::dlerror();
    throw ConfigError(w + "cannot load it: " + (e ? e : "unknown error"));
  }
  plugins_[real] = true;  // never closed: its types' code stays in use
  using Abi = const char* (*)();
  auto abi = reinterpret_cast<Abi>(::dlsym(h, "tessera_plugin_abi"));
  if (!abi) throw ConfigError(w + "not a Tessera plugin (it defines no tessera_plugin_abi; build it with tessera_add_plugin)");
  if (std::strcmp(abi(), plugin_abi()) != 0)
    throw ConfigError(w + "built for " + abi() + ", this is " + plugin_abi() + "; rebuild it against this Tessera");
  if (!clashes_.empty()) throw ConfigError(w + "IP type \"" + clashes_.front() + "\" is already known");
}

const IpType* IpRegistry::find(const std::string& name) const {
  auto it = types_.find(name);
  return it == types_.end() ? nullptr : &it->second;
}

}  // namespace tessera
