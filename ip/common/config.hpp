// The checked layer of configuration. Each IP has a Config struct with
// named defaults and two members:
//
//   void visit(Params& p)                 one line per parameter
//   void validate(const Params& p) const  refuses bad combinations
//
// Params reads the raw JSON of one instance, converts units, remembers the
// effective value of every parameter (for --dump-config), and reports any
// problem as "file: instance.key: why" through ConfigError. Keys nobody
// asked for are errors, so typos never pass silently.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <optional>
#include <string>
#include <systemc>
#include <vector>

#include "common/units.hpp"

namespace tessera {

// A number firmware depends on: TESSERA_<INSTANCE>_<NAME> in the platform
// header, or TESSERA_TYPE_<TYPE>_<NAME> for facts of the type (the same for
// every instance: the tile's local map).
struct Fact {
  std::string name;  // upper case: TIMEBASE_HZ
  std::uint64_t value;
  std::string doc;
  bool of_type = false;
};

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Params {
 public:
  // `where` is the file, `instance` the instance name; `raw` the params
  // object (may be null). `instance_size` is the instance's "size" (0 = not
  // given), which memory-like IPs read through instance_size().
  Params(std::string where, std::string instance, const nlohmann::json& raw, std::uint64_t instance_size = 0,
         std::string impl = "tlm");

  void operator()(const char* key, bool& v, const char* doc);
  void operator()(const char* key, unsigned& v, const char* doc);
  void operator()(const char* key, std::uint64_t& v, const char* doc);
  void operator()(const char* key, double& v, const char* doc);
  void operator()(const char* key, std::string& v, const char* doc);
  void operator()(const char* key, sc_core::sc_time& v, const char* doc);
  void operator()(const char* key, Hertz& v, const char* doc);
  // Byte counts and addresses print with units or in hex.
  void size(const char* key, std::uint64_t& v, const char* doc);
  void address(const char* key, std::uint64_t& v, const char* doc);

  std::uint64_t instance_size() const { return instance_size_; }
  // The instance's "base" on the bus, if it has one (a window whose layout
  // the model derives from where it lies: the chip-to-chip fabric).
  const std::optional<std::uint64_t>& instance_base() const { return instance_base_; }
  void set_instance_base(std::optional<std::uint64_t> base) { instance_base_ = base; }
  // A path relative to the platform file's folder, or to the folder of a
  // file it extends where the file is found there (absolute paths stay).
  std::string resolve(const std::string& path) const;
  void set_search_path(std::vector<std::string> dirs) { search_path_ = std::move(dirs); }
  const std::string& instance() const { return instance_; }
  // The instance's "impl": "tlm", or "rtl" where the type has RTL.
  const std::string& impl() const { return impl_; }

  // Throws ConfigError("where: instance.key: why"). // elaboration-only
  [[noreturn]] void fail(const std::string& key, const std::string& why) const;
  // Fails on any raw key no visit() asked for.
  void finish() const;

  const nlohmann::ordered_json& effective() const { return effective_; }
  const nlohmann::ordered_json& docs() const { return docs_; }

 private:
  const nlohmann::json* find(const char* key, const char* doc);
  template <class F>
  void read(const char* key, const char* doc, F&& convert);

  std::string where_, instance_, impl_;
  nlohmann::json raw_;
  std::uint64_t instance_size_;
  std::optional<std::uint64_t> instance_base_;
  std::vector<std::string> search_path_;
  nlohmann::ordered_json effective_ = nlohmann::ordered_json::object();
  nlohmann::ordered_json docs_ = nlohmann::ordered_json::object();
  std::vector<std::string> asked_;
};

}  // namespace tessera
