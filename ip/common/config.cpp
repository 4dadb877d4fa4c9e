#include "common/config.hpp"
#include "common/input.hpp"

#include <unistd.h>

#include <algorithm>

namespace tessera {
namespace {
bool non_negative_integer(const nlohmann::json* j) {
  return j && (j->is_number_unsigned() || (j->is_number_integer() && j->get<std::int64_t>() >= 0));
}
}  // namespace

Params::Params(std::string where, std::string instance, const nlohmann::json& raw, std::uint64_t instance_size,
               std::string impl)
    : where_(std::move(where)), instance_(std::move(instance)), impl_(std::move(impl)), raw_(raw), instance_size_(instance_size) {
  if (!raw_.is_null() && !raw_.is_object()) fail("params", "must be an object");
}

std::string Params::resolve(const std::string& path) const {
  if (path.empty() || path[0] == '/') return path;
  const auto slash = where_.find_last_of('/');
  const std::string own = slash == std::string::npos ? path : where_.substr(0, slash + 1) + path;
  if (::access(own.c_str(), F_OK) == 0) return own;
  for (const std::string& dir : search_path_)
    if (const std::string p = dir + path; ::access(p.c_str(), F_OK) == 0) return p;
  return own;
}

void Params::fail(const std::string& key, const std::string& why) const {
  throw ConfigError(where_ + ": " + instance_ + "." + key + ": " + why);  // elaboration-only
}

void Params::finish() const {
  if (!raw_.is_object()) return;
  for (auto it = raw_.begin(); it != raw_.end(); ++it)
    if (std::find(asked_.begin(), asked_.end(), it.key()) == asked_.end()) {
      std::string known;
      for (const auto& k : asked_) known += (known.empty() ? "" : ", ") + k;
      fail(it.key(), "unknown parameter (known: " + (known.empty() ? std::string("none") : known) + ")");
    }
}

const nlohmann::json* Params::find(const char* key, const char* doc) {
  asked_.emplace_back(key);
  docs_[key] = doc;
  if (!raw_.is_object()) return nullptr;
  auto it = raw_.find(key);
  return it == raw_.end() ? nullptr : &*it;
}

template <class F>
void Params::read(const char* key, const char* doc, F&& convert) {
  const nlohmann::json* j = find(key, doc);
  try {
    convert(j);
  } catch (const UnitError& e) {
    fail(key, e.what());
  } catch (const nlohmann::json::exception&) {
    fail(key, "has the wrong type: " + cut(j->dump(), 60));
  }
}

void Params::operator()(const char* key, bool& v, const char* doc) {
  read(key, doc, [&](const nlohmann::json* j) {
    if (j && !j->is_boolean()) fail(key, "expected true or false, got " + cut(j->dump(), 60));
    if (j) v = j->get<bool>();
    effective_[key] = v;
  });
}

void Params::operator()(const char* key, std::uint64_t& v, const char* doc) {
  read(key, doc, [&](const nlohmann::json* j) {
    if (non_negative_integer(j)) v = j->get<std::uint64_t>();
    else if (j && j->is_string()) v = parse_uint(j->get<std::string>());
    else if (j) fail(key, "expected a non-negative integer, got " + cut(j->dump(), 60));
    effective_[key] = v;
  });
}

void Params::operator()(const char* key, unsigned& v, const char* doc) {
  std::uint64_t wide = v;
  (*this)(key, wide, doc);
  if (wide > 0xffffffffull) fail(key, "value " + std::to_string(wide) + " is too large");
  v = static_cast<unsigned>(wide);
}

void Params::operator()(const char* key, double& v, const char* doc) {
  read(key, doc, [&](const nlohmann::json* j) {
    if (j && !j->is_number()) fail(key, "expected a number, got " + cut(j->dump(), 60));
    if (j) v = j->get<double>();
    effective_[key] = v;
  });
}

void Params::operator()(const char* key, std::string& v, const char* doc) {
  read(key, doc, [&](const nlohmann::json* j) {
    if (j && !j->is_string()) fail(key, "expected a string, got " + cut(j->dump(), 60));
    if (j) v = j->get<std::string>();
    effective_[key] = v;
  });
}

void Params::operator()(const char* key, sc_core::sc_time& v, const char* doc) {
  read(key, doc, [&](const nlohmann::json* j) {
    if (j && j->is_number() && j->get<double>() == 0) v = sc_core::SC_ZERO_TIME;
    else if (j && j->is_string()) v = parse_time(j->get<std::string>());
    else if (j) fail(key, "expected a time such as \"30ns\", got " + cut(j->dump(), 60));
    effective_[key] = format_time(v);
  });
}

void Params::operator()(const char* key, Hertz& v, const char* doc) {
  read(key, doc, [&](const nlohmann::json* j) {
    if (j && j->is_string()) v = parse_frequency(j->get<std::string>());
    else if (j) fail(key, "expected a frequency such as \"1GHz\", got " + cut(j->dump(), 60));
    effective_[key] = format_frequency(v);
  });
}

void Params::size(const char* key, std::uint64_t& v, const char* doc) {
  read(key, doc, [&](const nlohmann::json* j) {
    if (non_negative_integer(j)) v = j->get<std::uint64_t>();
    else if (j && j->is_string()) v = parse_size(j->get<std::string>());
    else if (j) fail(key, "expected a size such as \"64KiB\", got " + cut(j->dump(), 60));
    effective_[key] = format_size(v);
  });
}

void Params::address(const char* key, std::uint64_t& v, const char* doc) {
  read(key, doc, [&](const nlohmann::json* j) {
    if (non_negative_integer(j)) v = j->get<std::uint64_t>();
    else if (j && j->is_string()) v = parse_uint(j->get<std::string>());
    else if (j) fail(key, "expected an address such as \"0x8000_0000\", got " + cut(j->dump(), 60));
    effective_[key] = format_hex(v);
  });
}

}  // namespace tessera
