// type name -> factory. An IP makes itself known with one line in its
// source file:
//
//   TESSERA_REGISTER_IP("uart16550", Uart16550, "16550 UART", R::kBlock.window);
//
// The class needs a nested Config (visit, validate) and a constructor
// (sc_module_name, const Config&). A Config may also list the facts
// firmware must know about the instance (std::vector<Fact> facts() const):
// they go into the generated platform header, and a firmware built against
// that header is refused on a platform whose facts differ. Parsing and building are separate steps,
// so a whole platform description is checked before anything elaborates.
#pragma once

#include <any>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "common/config.hpp"
#include "common/ip.hpp"

namespace tessera {

struct IpType {
  std::string name, doc;
  std::uint64_t default_size;  // address space when the instance names none (0: must name one)
  bool overlay;                // mapped over other ranges (HTIF's tohost in RAM)
  // visit + finish + validate; the result goes to build().
  std::function<std::any(Params&)> parse;
  std::function<std::unique_ptr<Ip>(const char* instance, const std::any& config)> build;
  std::vector<std::string> impls{"tlm"};  // what "impl" may say (IpRegistry::add_impl)
  std::function<std::vector<Fact>(const std::any& config)> facts;  // may be empty
};

namespace detail {
template <class C, class = void>
struct HasFacts : std::false_type {};
template <class C>
struct HasFacts<C, std::void_t<decltype(std::declval<const C&>().facts())>> : std::true_type {};
}  // namespace detail

class IpRegistry {
 public:
  static IpRegistry& get();
  void add(IpType type);
  const IpType* find(const std::string& name) const;
  // `type` also comes as `impl` (after its TESSERA_REGISTER_IP, in the same file).
  void add_impl(const std::string& type, const std::string& impl);
  void set_facts(const std::string& type, std::function<std::vector<Fact>(const std::any&)> facts);
  const std::map<std::string, IpType>& all() const { return types_; }

  // Loads an IP library built outside this tree with tessera_add_plugin
  // (cmake/TesseraFunctions.cmake): its TESSERA_REGISTER_IP lines register
  // its types as it loads. A library loads once however often it is named.
  // Throws ConfigError("<where>: <path>: why"): it cannot be opened or
  // linked (a symbol this program lacks), it is no Tessera plugin, it was
  // built for another Tessera, or it registers a type that is already known.
  void load_plugin(const std::string& path, const std::string& where);
  // The ABI string a plugin must carry (the version it was built against).
  static const char* plugin_abi();

 private:
  std::map<std::string, IpType> types_;
  std::map<std::string, bool> plugins_;  // by real path
  bool loading_ = false;
  std::vector<std::string> clashes_;  // types a loading plugin registered twice
};

template <class T>
struct RegisterIp {
  RegisterIp(const char* type, const char* doc, std::uint64_t default_size = 0, bool overlay = false) {
    using Config = typename T::Config;
    IpRegistry::get().add(IpType{
        type, doc, default_size, overlay,
        [](Params& p) {
          auto c = std::make_shared<Config>();
          c->visit(p);
          p.finish();
          c->validate(p);
          return std::any(std::shared_ptr<const Config>(c));
        },
        [](const char* instance, const std::any& config) -> std::unique_ptr<Ip> {
          return std::make_unique<T>(instance, *std::any_cast<std::shared_ptr<const Config>>(config));
        },
        {"tlm"},
        {}});
    if constexpr (detail::HasFacts<Config>::value)
      IpRegistry::get().set_facts(type, [](const std::any& config) {
        return std::any_cast<std::shared_ptr<const Config>>(config)->facts();
      });
  }
};

// Optional after the doc: the default size of the instance's address range
// (a register block's window) and whether it overlays other ranges.
#define TESSERA_REGISTER_IP(type, Class, ...) \
  static const ::tessera::RegisterIp<Class> tessera_registered_##Class(type, __VA_ARGS__)

struct RegisterImpl {
  RegisterImpl(const char* type, const char* impl) { IpRegistry::get().add_impl(type, impl); }
};

// Another "impl" the type accepts ("rtl"), after its TESSERA_REGISTER_IP in the same file.
#define TESSERA_REGISTER_IMPL(type, Class, impl) \
  static const ::tessera::RegisterImpl tessera_registered_impl_##Class(type, impl)

}  // namespace tessera
