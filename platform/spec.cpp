#include "spec.hpp"

#include <map>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <set>

#include "common/input.hpp"
#include "common/paths.hpp"
#include "common/units.hpp"

namespace tessera {
namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw ConfigError(file + ": " + what);  // elaboration-only
}

void check_keys(const nlohmann::json& j, std::initializer_list<const char*> allowed, const std::string& file,
                const std::string& where) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return it.key() == a; })) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(file, where + it.key() + ": unknown key (known: " + list + ")");
    }
}

// "port", "port[3]" or "instance.port[3]".
PortRef parse_port(const std::string& text, bool with_instance, const std::string& file, const std::string& where) {
  PortRef r;
  r.text = text;
  std::string rest = text;
  if (with_instance) {
    auto dot = rest.find('.');
    if (dot == std::string::npos || dot == 0)
      fail(file, where + ": \"" + text + "\" should name an input as instance.port or instance.port[index]");
    r.instance = rest.substr(0, dot);
    rest = rest.substr(dot + 1);
  }
  auto open = rest.find('[');
  r.port = rest.substr(0, open);
  if (open != std::string::npos) {
    if (rest.back() != ']') fail(file, where + ": \"" + text + "\" has an unclosed index");
    try {
      r.index = static_cast<unsigned>(parse_uint(rest.substr(open + 1, rest.size() - open - 2)));
    } catch (const UnitError&) {
      fail(file, where + ": \"" + text + "\" has a bad index");
    }
  }
  if (r.port.empty()) fail(file, where + ": \"" + text + "\" names no port");
  return r;
}

std::uint64_t address_of(const nlohmann::json& j, const std::string& file, const std::string& where) {
  try {
    if (j.is_number_unsigned()) return j.get<std::uint64_t>();
    if (j.is_string()) return parse_size(j.get<std::string>());
  } catch (const UnitError& e) {
    fail(file, where + ": " + e.what());
  }
  fail(file, where + ": expected an address or size such as \"0x8000_0000\" or \"64KiB\", got " + cut(j.dump()));
}

// A string-valued key that may be missing ("" then).
std::string optional_string(const nlohmann::json& j, const char* key, const std::string& file, const std::string& where) {
  if (!j.contains(key)) return "";
  if (!j[key].is_string()) fail(file, where + key + ": expected a string, got " + cut(j[key].dump()));
  return j[key].get<std::string>();
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

namespace {

std::string dir_of(const std::string& file) {
  const auto slash = file.find_last_of('/');
  return slash == std::string::npos ? "" : file.substr(0, slash + 1);
}

std::string beside(const std::string& file, const std::string& path) {
  return !path.empty() && path[0] == '/' ? path : dir_of(file) + path;
}

std::string real_path(const std::string& file) {
  char buf[PATH_MAX];
  return ::realpath(file.c_str(), buf) ? std::string(buf) : file;
}

// One file with what it extends folded in (see spec.hpp); `chain` holds
// the files that extend it, to refuse a cycle.
nlohmann::json read_layered(const std::string& file, std::vector<std::string>& chain) {
  nlohmann::json raw = read_json_file(file, "the platform file");
  if (!raw.is_object()) return raw;  // parse() says what is wrong
  if (raw.contains("plugins")) {
    if (!raw["plugins"].is_array()) fail(file, "plugins: expected a list of library files");
    nlohmann::json loaded = nlohmann::json::array();
    for (std::size_t i = 0; i < raw["plugins"].size(); ++i) {
      const auto& p = raw["plugins"][i];
      const std::string w = fmt::format("{}: plugins[{}]", file, i);
      if (!p.is_string() || p.get<std::string>().empty()) throw ConfigError(w + ": expected a library file");
      const std::string path = beside(file, p.get<std::string>());
      IpRegistry::get().load_plugin(path, w);
      loaded.push_back(path);
    }
    raw["plugins"] = loaded;
  }
  if (!raw.contains("extends")) return raw;
  if (!raw["extends"].is_string() || raw["extends"].get<std::string>().empty())
    fail(file, "extends: expected the platform file this one builds on");
  // A bare name ("t1") is a platform Tessera ships; anything else a file beside this one.
  const std::string e = raw["extends"].get<std::string>();
  const bool shipped = e.find('/') == std::string::npos && e.find('.') == std::string::npos;
  const std::string base_file = shipped ? data_file(DataKind::platforms, e + ".json") : beside(file, e);
  chain.push_back(real_path(file));
  if (std::find(chain.begin(), chain.end(), real_path(base_file)) != chain.end())
    fail(file, "extends: " + base_file + " extends this file in turn (a cycle)");
  if (chain.size() > 8) fail(file, "extends: more than 8 files deep");
  nlohmann::json out = read_layered(base_file, chain);
  chain.pop_back();
  if (!out.is_object() || !out.contains("instances") || !out["instances"].is_array())
    fail(base_file, "instances: a list is required");
  // Relative paths in the base's parameters (HBM timing files) are found beside it too.
  out["search_path"].push_back(dir_of(base_file).empty() ? "./" : dir_of(base_file));
  for (auto it = raw.begin(); it != raw.end(); ++it) {
    const std::string& key = it.key();
    if (key == "extends") continue;
    if (key == "plugins") {
      for (const auto& p : *it) out["plugins"].push_back(p);
    } else if (key == "instances" && it->is_array()) {
      for (const auto& j : *it) {
        auto same = std::find_if(out["instances"].begin(), out["instances"].end(), [&](const nlohmann::json& b) {
          return j.is_object() && b.is_object() && j.contains("name") && b.contains("name") && b["name"] == j["name"];
        });
        if (same == out["instances"].end()) {
          out["instances"].push_back(j);
          continue;
        }
        // An instance the base has: its keys replace the base's; params, irq and targets merge key by key.
        for (auto k = j.begin(); k != j.end(); ++k) {
          const bool merge = (k.key() == "params" || k.key() == "irq" || k.key() == "targets") && k->is_object() &&
                             same->contains(k.key()) && (*same)[k.key()].is_object();
          if (merge) (*same)[k.key()].update(*k);
          else (*same)[k.key()] = *k;
        }
      }
    } else {
      out[key] = *it;  // platform, doc, boot; anything else for parse() to name
    }
  }
  return out;
}

}  // namespace

nlohmann::json PlatformSpec::read(const std::string& file) {
  std::vector<std::string> chain;
  return read_layered(file, chain);
}

std::vector<std::string> PlatformSpec::fast_models(const std::string& file, std::vector<std::string> sets) {
  auto set_by_user = [&](const std::string& key) {
    for (const auto& s : sets)
      if (s.rfind(key + "=", 0) == 0) return true;
    return false;
  };
  const nlohmann::json raw = read(file);
  std::vector<std::string> fast;
  for (const auto& inst : raw.value("instances", nlohmann::json::array())) {
    if (!inst.is_object()) continue;
    const std::string type = inst.value("type", ""), name = inst.value("name", "");
    if (type == "noc" && !set_by_user(name + ".model")) fast.push_back(name + ".model=packet");
    if (type == "hbm" && !set_by_user(name + ".mode")) fast.push_back(name + ".mode=fast");
  }
  sets.insert(sets.begin(), fast.begin(), fast.end());
  return sets;
}

void PlatformSpec::apply_set(nlohmann::json& raw, const std::string& file, const std::string& assignment) {
  const std::string where = "--set " + cut(assignment);
  auto eq = assignment.find('=');
  auto dot = assignment.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    throw ConfigError(where + ": expected instance.key=value");
  const std::string inst = assignment.substr(0, dot);
  std::string key = assignment.substr(dot + 1, eq - dot - 1);
  const std::string text = assignment.substr(eq + 1);
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::out_of_range&) {
    throw ConfigError(where + ": " + cut(text) + " is out of range");
  } catch (const nlohmann::json::exception&) {
    value = text;  // a bare word or a quantity such as 30ns
  }
  if (!raw.is_object() || !raw.contains("instances") || !raw["instances"].is_array())
    throw ConfigError(where + ": " + file + " has no instances");
  for (auto& i : raw["instances"]) {
    if (!i.is_object() || !i.contains("name") || i["name"] != inst) continue;
    if (key == "base" || key == "size" || key == "type" || key == "impl") i[key] = value;
    else if (key.rfind("irq.", 0) == 0) i["irq"][key.substr(4)] = value;
    else {
      if (key.rfind("params.", 0) == 0) key = key.substr(7);
      i["params"][key] = value;
    }
    return;
  }
  throw ConfigError(where + ": " + file + " has no instance named \"" + cut(inst) + "\"");
}

PlatformSpec PlatformSpec::parse(const std::string& file, const nlohmann::json& raw) {
  PlatformSpec spec;
  spec.file = file;
  if (!raw.is_object()) fail(file, "the top level must be an object");
  check_keys(raw, {"platform", "doc", "boot", "instances", "plugins", "search_path"}, file, "");
  for (const char* key : {"plugins", "search_path"})  // read() loads and finds these; here they are only checked
    if (raw.contains(key)) {
      if (!raw[key].is_array()) fail(file, std::string(key) + ": expected a list of files");
      for (const auto& f : raw[key]) {
        if (!f.is_string()) fail(file, std::string(key) + ": expected a list of files, got " + cut(f.dump()));
        (key[0] == 'p' ? spec.plugins : spec.search_path).push_back(f.get<std::string>());
      }
    }
  if (!raw.contains("platform") || !raw["platform"].is_string()) fail(file, "platform: a name is required");
  spec.name = raw["platform"].get<std::string>();
  spec.doc = optional_string(raw, "doc", file, "");
  if (!raw.contains("instances") || !raw["instances"].is_array()) fail(file, "instances: a list is required");

  std::set<std::string> names, upper_names;
  for (const auto& j : raw["instances"]) {
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string())
      fail(file, "instances: every instance needs a \"name\"");
    InstanceSpec s;
    s.name = j["name"].get<std::string>();
    if (s.name.empty() || s.name.size() > 64 || !std::all_of(s.name.begin(), s.name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        }))
      fail(file, "instances: \"" + cut(s.name, 40) + "\": an instance name is 1 to 64 letters, digits and _");
    const std::string w = s.name + ".";
    if (!names.insert(s.name).second) fail(file, w + "name: two instances have this name");
    // The generated header spells names in capitals: uart0 and UART0 would define the same macros.
    if (!upper_names.insert(upper(s.name)).second)
      fail(file, w + "name: another instance's name differs from it only in case");
    check_keys(j, {"name", "type", "impl", "base", "size", "irq", "params", "targets", "attach", "doc"}, file, w);
    if (!j.contains("type") || !j["type"].is_string()) fail(file, w + "type: required");
    s.type = j["type"].get<std::string>();
    s.ip = IpRegistry::get().find(s.type);
    if (!s.ip) {
      std::string known;
      for (const auto& [n, t] : IpRegistry::get().all()) known += (known.empty() ? "" : ", ") + n;
      fail(file, w + "type: unknown type \"" + cut(s.type) + "\" (known: " + known + ")");
    }
    s.impl = j.contains("impl") ? optional_string(j, "impl", file, w) : "tlm";
    if (std::find(s.ip->impls.begin(), s.ip->impls.end(), s.impl) == s.ip->impls.end()) {
      std::string available;
      for (const auto& i : s.ip->impls) available += (available.empty() ? "" : ", ") + i;
      fail(file, w + "impl: \"" + cut(s.impl) + "\" is not available for type " + s.type + " (available: " + available + ")");
    }
    s.doc = optional_string(j, "doc", file, w);
    if (j.contains("base")) s.base = address_of(j["base"], file, w + "base");
    s.size = j.contains("size") ? address_of(j["size"], file, w + "size") : s.ip->default_size;
    if (s.base && s.size == 0) fail(file, w + "size: required for type " + s.type);
    if (s.base && *s.base + (s.size - 1) < *s.base) fail(file, w + "size: the range runs past the end of the address space");
    if (j.contains("attach")) {
      const std::string a = j["attach"].is_string() ? j["attach"].get<std::string>() : "";
      const auto at = a.find('@');
      try {
        if (at == std::string::npos || at == 0) throw UnitError("");
        const std::string where = a.substr(at + 1);
        const auto comma = where.find(',');
        if (comma == std::string::npos) {
          s.attach_node = static_cast<unsigned>(parse_uint(where));
        } else {
          s.attach_x = static_cast<int>(parse_uint(where.substr(0, comma)));
          s.attach_y = static_cast<int>(parse_uint(where.substr(comma + 1)));
        }
      } catch (const UnitError&) {
        fail(file, w + "attach: expected \"noc@node\" or \"noc@x,y\", got " + cut(j["attach"].dump()));
      }
      s.attach = a.substr(0, at);
    }
    if (j.contains("targets")) {
      if (!j["targets"].is_object()) fail(file, w + "targets: expected an object of socket: base");
      for (auto it = j["targets"].begin(); it != j["targets"].end(); ++it)
        s.targets.emplace_back(it.key(), address_of(*it, file, w + "targets." + it.key()));
    }
    if (j.contains("irq")) {
      if (!j["irq"].is_object()) fail(file, w + "irq: expected an object of output: input");
      for (auto it = j["irq"].begin(); it != j["irq"].end(); ++it) {
        const std::string iw = w + "irq." + it.key();
        PortRef from = parse_port(it.key(), false, file, iw);
        auto targets = it->is_array() ? *it : nlohmann::json::array({*it});
        for (const auto& t : targets) {
          if (!t.is_string()) fail(file, iw + ": expected \"instance.port[index]\", got " + cut(t.dump()));
          s.irqs.push_back({from, parse_port(t.get<std::string>(), true, file, iw)});
        }
      }
    }
    Params p(file, s.name, j.contains("params") ? j["params"] : nlohmann::json(), s.size, s.impl);
    p.set_instance_base(s.base);
    p.set_search_path(spec.search_path);
    s.config = s.ip->parse(p);
    s.params = p.effective();
    spec.instances.push_back(std::move(s));
  }

  if (raw.contains("boot")) {
    if (!raw["boot"].is_string()) fail(file, "boot: expected the name of a processor instance");
    spec.boot = raw["boot"].get<std::string>();
    const InstanceSpec* b = spec.find(spec.boot);
    if (!b) fail(file, "boot: no instance named \"" + spec.boot + "\"");
    if (b->type != "riscv") fail(file, "boot: " + spec.boot + " is a " + b->type + ", not a processor");
  }

  for (const auto& s : spec.instances)
    if (!s.attach.empty()) {
      const InstanceSpec* n = spec.find(s.attach);
      if (!n || n->type != "noc")
        fail(file, s.name + ".attach: \"" + s.attach + "\" is not a network-on-chip instance of this platform");
    }

  // Interrupts must name instances that exist; ports are checked once built.
  for (const auto& s : spec.instances)
    for (const auto& w : s.irqs)
      if (!names.count(w.to.instance))
        fail(file, s.name + ".irq." + w.from.text + ": \"" + w.to.text + "\" is wired to nothing (no instance \"" +
                       w.to.instance + "\")");

  // Address ranges: no overlaps, except an overlay over something else.
  for (std::size_t a = 0; a < spec.instances.size(); ++a)
    for (std::size_t b = a + 1; b < spec.instances.size(); ++b) {
      const auto& x = spec.instances[a];
      const auto& y = spec.instances[b];
      if (!x.base || !y.base || x.ip->overlay != y.ip->overlay) continue;
      if (*x.base <= y.last() && *y.base <= x.last())
        fail(file, fmt::format("{}.base: [{:#x}, {:#x}] overlaps {} [{:#x}, {:#x}]", y.name, *y.base, y.last(), x.name,
                               *x.base, x.last()));
    }
  return spec;
}

const InstanceSpec* PlatformSpec::find(const std::string& name) const {
  for (const auto& s : instances)
    if (s.name == name) return &s;
  return nullptr;
}

nlohmann::ordered_json PlatformSpec::effective() const {
  nlohmann::ordered_json out;
  out["platform"] = name;
  if (!boot.empty()) out["boot"] = boot;
  if (!plugins.empty()) out["plugins"] = plugins;
  out["instances"] = nlohmann::ordered_json::array();
  for (const auto& s : instances) {
    nlohmann::ordered_json i;
    i["name"] = s.name;
    i["type"] = s.type;
    i["impl"] = s.impl;
    if (s.base) i["base"] = format_hex(*s.base);
    if (s.size) i["size"] = format_hex(s.size);
    for (const auto& [port, base] : s.targets) i["targets"][port] = format_hex(base);
    if (!s.attach.empty())
      i["attach"] = s.attach + "@" + (s.attach_x >= 0 ? fmt::format("{},{}", s.attach_x, s.attach_y)
                                                      : std::to_string(s.attach_node));
    if (!s.irqs.empty()) {
      nlohmann::ordered_json irq = nlohmann::ordered_json::object();
      for (const auto& w : s.irqs) {
        auto& slot = irq[w.from.text];
        if (slot.is_null()) slot = w.to.text;
        else if (slot.is_string()) slot = nlohmann::ordered_json::array({slot, w.to.text});
        else slot.push_back(w.to.text);
      }
      i["irq"] = irq;
    }
    i["params"] = s.params;
    out["instances"].push_back(i);
  }
  return out;
}

std::vector<std::pair<std::string, std::uint64_t>> PlatformSpec::facts() const {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  std::set<std::string> types;
  for (const auto& s : instances) {
    if (!s.ip || !s.ip->facts) continue;
    for (const Fact& f : s.ip->facts(s.config)) {
      if (!f.of_type) out.emplace_back(s.name + "." + f.name, f.value);
      else if (!types.count(s.type)) out.emplace_back("type." + s.type + "." + f.name, f.value);
    }
    types.insert(s.type);
  }
  return out;
}

std::string PlatformSpec::facts_string() const {
  std::string o;
  for (const auto& [k, v] : facts()) o += fmt::format("{}{}={:#x}", o.empty() ? "" : ";", k, v);
  return o;
}

std::string PlatformSpec::facts_mismatch(const std::string& program_facts) const {
  std::map<std::string, std::string> mine;
  for (const auto& [k, v] : facts()) mine[k] = fmt::format("{:#x}", v);
  std::size_t at = 0;
  while (at < program_facts.size()) {
    std::size_t end = program_facts.find(';', at);
    if (end == std::string::npos) end = program_facts.size();
    const std::string item = program_facts.substr(at, end - at);
    at = end + 1;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) return "its platform facts are malformed (\"" + cut(item) + "\")";
    auto it = mine.find(item.substr(0, eq));
    if (it != mine.end() && it->second != item.substr(eq + 1))
      return fmt::format("it was built for {}={}, and {} has {} (rebuild it against the header tessera-vp --gen-header "
                         "writes with the same --set)",
                         it->first, item.substr(eq + 1), file, it->second);
  }
  return "";
}

std::string PlatformSpec::c_header() const {
  std::string o = fmt::format("/* DO NOT EDIT: generated by tessera-vp from {}. Plain numbers: C and assembly. */\n", file);
  o += "#ifndef TESSERA_PLATFORM_H\n#define TESSERA_PLATFORM_H\n\n";
  o += fmt::format("#define TESSERA_PLATFORM \"{}\"\n\n", name);
  for (const auto& s : instances) {
    const std::string p = "TESSERA_" + upper(s.name);
    if (s.base) {
      o += fmt::format("#define {}_BASE {:#x}\n", p, *s.base);
      o += fmt::format("#define {}_SIZE {:#x}\n", p, s.size);
    }
    for (const auto& [port, base] : s.targets) {
      std::string q = upper(port);
      if (q.size() > 7 && q.compare(q.size() - 7, 7, "_TARGET") == 0) q.resize(q.size() - 7);
      o += fmt::format("#define {}_{}_BASE {:#x}\n", p, q, base);
    }
    for (const auto& w : s.irqs)  // the interrupt number seen by the controller
      o += fmt::format("#define {}_IRQ{} {} /* {} */\n", p, w.from.port == "irq_out" ? "" : "_" + upper(w.from.port),
                       w.to.index, w.to.text);
  }
  // The facts firmware depends on, the instances of each type, and the
  // facts as one string, which the BSP keeps in the program so that the
  // loader can refuse a platform that differs.
  std::map<std::string, std::vector<std::string>> of_type;
  for (const auto& s : instances) of_type[s.type].push_back(upper(s.name));
  std::set<std::string> typed;
  for (const auto& s : instances) {
    if (!s.ip || !s.ip->facts) continue;
    for (const Fact& f : s.ip->facts(s.config)) {
      if (f.of_type && typed.count(s.type)) continue;
      const std::string name = f.of_type ? "TESSERA_TYPE_" + upper(s.type) : "TESSERA_" + upper(s.name);
      o += fmt::format("#define {}_{} {:#x} /* {} */\n", name, f.name, f.value, f.doc);
    }
    typed.insert(s.type);
  }
  o += "\n/* Each type's instances: TESSERA_TYPE_<TYPE>_LIST(X) calls X(INSTANCE) for each, in order. */\n";
  for (const auto& [type, names] : of_type) {
    o += fmt::format("#define TESSERA_TYPE_{}_COUNT {}\n#define TESSERA_TYPE_{}_LIST(X)", upper(type), names.size(), upper(type));
    for (const std::string& n : names) o += " X(" + n + ")";
    o += "\n";
  }
  o += fmt::format("\n#define TESSERA_FACTS \"{}\"\n", facts_string());
  // The same windows as a table for code that walks the map (X-macro):
  // X(name, "type", base, size); size 0 for a further target socket, whose
  // size the description does not hold.
  o += "\n/* Every mapped window: X(name, \"type\", base, size); size 0: a further target socket. */\n";
  o += "#define TESSERA_WINDOWS(X)";
  for (const auto& s : instances) {
    if (s.base) o += fmt::format(" \\\n  X({}, \"{}\", {:#x}, {:#x})", s.name, s.type, *s.base, s.size);
    for (const auto& [port, base] : s.targets) o += fmt::format(" \\\n  X({}_{}, \"{}\", {:#x}, 0)", s.name, port, s.type, base);
  }
  o += "\n\n#endif /* TESSERA_PLATFORM_H */\n";
  return o;
}

std::string PlatformSpec::linker_symbols() const {
  std::string o = fmt::format("/* DO NOT EDIT: generated by tessera-vp from {}. */\n", file);
  for (const auto& [k, v] : facts()) {
    std::string sym = k;
    for (char& c : sym) c = c == '.' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    o += fmt::format("__tessera_{} = {:#x};\n", sym, v);
  }
  for (const auto& s : instances)
    if (s.base) {
      o += fmt::format("__tessera_{}_base = {:#x};\n", s.name, *s.base);
      o += fmt::format("__tessera_{}_size = {:#x};\n", s.name, s.size);
    }
  return o;
}

}  // namespace tessera
