#include "common/registry.hpp"

#include "common/log.hpp"

namespace tessera {

IpRegistry& IpRegistry::get() {
  static IpRegistry r;
  return r;
}

void IpRegistry::add(IpType type) {
  std::string name = type.name;
  if (!types_.emplace(name, std::move(type)).second)
    log::internal("tessera", "IP type \"{}\" registered twice", name);  // elaboration-only
}

void IpRegistry::add_impl(const std::string& type, const std::string& impl) {
  auto it = types_.find(type);
  if (it == types_.end()) log::internal("tessera", "impl \"{}\" for unknown IP type \"{}\"", impl, type);  // elaboration-only
  else it->second.impls.push_back(impl);
}

void IpRegistry::set_facts(const std::string& type, std::function<std::vector<Fact>(const std::any&)> facts) {
  types_.at(type).facts = std::move(facts);
}

const IpType* IpRegistry::find(const std::string& name) const {
  auto it = types_.find(name);
  return it == types_.end() ? nullptr : &it->second;
}

}  // namespace tessera
