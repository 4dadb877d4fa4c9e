// reggen: one register description in, every view of it out.
//
//   tessera_reggen <block>.regs.json <out-dir> <doc-dir>
//
// writes <block>_regs.hpp (constexpr table for the model), <block>_regs.h (C
// header for firmware), <block>_regs_cview.c (the C header's values as a
// table, compiled by the C compiler, for the agreement test) and
// <doc-dir>/<block>_regs.md (the register reference). The description is
// checked first: overlapping registers or fields, misaligned offsets and
// registers outside the window are refused with a message naming them.
//
// Besides "registers", a description may hold "enums": named sets of
// values ({"format": {"doc": ..., "values": [{"name": "BF16", "value": 1,
// "doc": ...}]}}) that fields take ("enum": "format") and that firmware and
// models name instead of writing numbers (C: TILE_FORMAT_BF16; C++:
// regs::tile::Format::BF16 and a table of the values); and "fieldsets":
// named lists of fields that several registers share ("fields": "sem").
//
// And "include": other descriptions whose registers, enums and field sets
// become this block's, under this block's name and in its window (paths
// relative to the including file). An engine inside an IP describes its own
// command registers in its own file, which generates its own views for its
// own decoding, and the IP includes it: firmware sees one block. An enum or
// a field set that two included files share must be the same in both.
#include <fmt/format.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

struct Field {
  std::string name, access, doc, enumeration;
  unsigned lsb = 0, width = 0;
};

struct Value {
  std::string name, doc;
  std::uint64_t value = 0;
};

struct Enum {
  std::string name, doc;
  std::vector<Value> values;
};

struct Reg {
  std::string name, access, bank, doc;
  std::uint64_t offset = 0, reset = 0, stride = 0;
  unsigned size = 4, min_access = 0, count = 1;
  bool side_effects = false;
  std::vector<Field> fields;
};

struct Block {
  std::string name, doc, source;
  std::uint64_t window = 0;
  std::vector<Enum> enums;
  std::vector<Reg> regs;
  const Enum* find_enum(const std::string& n) const {
    for (const Enum& e : enums)
      if (e.name == n) return &e;
    return nullptr;
  }
};

bool identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

[[noreturn]] void fail(const std::string& where, const std::string& why) {
  throw std::runtime_error(where + ": " + why);
}

std::uint64_t number(const json& j, const std::string& where) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0) return j.get<std::uint64_t>();
  if (j.is_string()) {
    std::string s;
    for (char c : j.get<std::string>())
      if (c != '_') s += c;
    try {
      std::size_t pos = 0;
      std::uint64_t v = std::stoull(s, &pos, 0);
      if (pos == s.size()) return v;
    } catch (const std::exception&) {
    }
  }
  fail(where, "expected a non-negative integer, got " + j.dump());
}

const std::vector<std::string> kAccess = {"rw", "ro", "wo", "w1c", "w1s"};

std::string access_of(const json& j, const std::string& where, const std::string& dflt) {
  std::string a = j.value("access", dflt);
  for (const auto& k : kAccess)
    if (k == a) return a;
  fail(where, "access must be one of rw, ro, wo, w1c, w1s; got \"" + a + "\"");
}

void check_keys(const json& j, const std::vector<std::string>& allowed, const std::string& where) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const auto& a : allowed) ok |= a == it.key();
    if (!ok) fail(where, "unknown key \"" + it.key() + "\"");
  }
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, "cannot open");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    fail(path, e.what());
  }
}

// j with the registers, enums and field sets of what it includes folded in.
std::vector<std::string> g_included;  // every file folded in (the depfile lists them)

json fold_includes(json j, const std::string& path, unsigned depth) {
  if (!j.is_object() || !j.contains("include")) return j;
  if (depth > 8) fail(path, "include: more than 8 files deep (a cycle?)");
  if (!j["include"].is_array()) fail(path, "include: expected a list of files");
  const std::string dir = path.find('/') == std::string::npos ? "" : path.substr(0, path.find_last_of('/') + 1);
  json regs = j.value("registers", json::array());
  for (const auto& f : j["include"]) {
    if (!f.is_string()) fail(path, "include: expected a list of files, got " + f.dump());
    const std::string inc = f.get<std::string>()[0] == '/' ? f.get<std::string>() : dir + f.get<std::string>();
    g_included.push_back(inc);
    const json part = fold_includes(read_json(inc), inc, depth + 1);
    if (!part.is_object()) fail(inc, "expected an object");
    for (const char* key : {"enums", "fieldsets"}) {
      const json defs = part.value(key, json::object());
      for (auto it = defs.begin(); it != defs.end(); ++it) {
        if (j.contains(key) && j[key].contains(it.key()) && j[key][it.key()] != *it)
          fail(path, std::string(key) + " " + it.key() + ": " + inc + " defines it otherwise");
        j[key][it.key()] = *it;
      }
    }
    const json part_regs = part.value("registers", json::array());
    for (const auto& r : part_regs) regs.push_back(r);
  }
  j["registers"] = regs;
  j.erase("include");
  return j;
}

Block parse(const std::string& path) {
  const json j = fold_includes(read_json(path), path, 0);
  Block b;
  b.source = path;
  check_keys(j, {"block", "doc", "window", "enums", "fieldsets", "registers"}, path);
  b.name = j.at("block").get<std::string>();
  std::string stem = path.substr(path.find_last_of('/') + 1);
  if (stem != b.name + ".regs.json") fail(path, "the file must be named " + b.name + ".regs.json after its block");
  b.doc = j.value("doc", "");
  b.window = number(j.at("window"), path + ": window");
  const json enums = j.value("enums", json::object());
  for (const auto& [name, je] : enums.items()) {
    const std::string where = path + ": enum " + name;
    if (!identifier(name)) fail(where, "the name must be an identifier");
    check_keys(je, {"doc", "values"}, where);
    Enum e;
    e.name = name;
    e.doc = je.value("doc", "");
    for (const auto& jv : je.at("values")) {
      Value v;
      v.name = jv.at("name").get<std::string>();
      const std::string vw = where + " value " + v.name;
      check_keys(jv, {"name", "value", "doc"}, vw);
      if (!identifier(v.name)) fail(vw, "the name must be an identifier");
      v.value = number(jv.at("value"), vw);
      v.doc = jv.value("doc", "");
      for (const Value& o : e.values)
        if (o.name == v.name || o.value == v.value) fail(vw, "repeats the name or the value of " + o.name);
      e.values.push_back(v);
    }
    if (e.values.empty()) fail(where, "has no values");
    b.enums.push_back(e);
  }
  const json fieldsets = j.value("fieldsets", json::object());
  for (const auto& jr : j.at("registers")) {
    Reg r;
    r.name = jr.at("name").get<std::string>();
    std::string where = path + ": register " + r.name;
    check_keys(jr, {"name", "offset", "size", "min_access", "count", "stride", "access", "reset",
                    "bank", "side_effects", "fields", "doc"},
               where);
    r.offset = number(jr.at("offset"), where + ".offset");
    r.size = static_cast<unsigned>(number(jr.value("size", json(4)), where + ".size"));
    if (r.size != 1 && r.size != 2 && r.size != 4 && r.size != 8) fail(where, "size must be 1, 2, 4 or 8");
    r.min_access = static_cast<unsigned>(number(jr.value("min_access", json(r.size)), where + ".min_access"));
    if (r.min_access == 0 || r.min_access > r.size || (r.min_access & (r.min_access - 1)))
      fail(where, "min_access must be a power of two no larger than size");
    r.count = static_cast<unsigned>(number(jr.value("count", json(1)), where + ".count"));
    r.stride = number(jr.value("stride", json(r.size)), where + ".stride");
    if (r.count == 0) fail(where, "count must be at least 1");
    if (r.count > 1 && r.stride < r.size) fail(where, "stride is smaller than size");
    r.access = access_of(jr, where, "rw");
    r.reset = number(jr.value("reset", json(0)), where + ".reset");
    r.bank = jr.value("bank", "");
    r.side_effects = jr.value("side_effects", false);
    r.doc = jr.value("doc", "");
    if (r.offset % r.size) fail(where, "offset is not aligned to the register size");
    if (r.offset + (r.count - 1) * r.stride + r.size > b.window) fail(where, "lies outside the window");
    std::uint64_t width_mask = r.size == 8 ? ~0ull : ((1ull << (r.size * 8)) - 1);
    if (r.reset & ~width_mask) fail(where, "reset value does not fit the register");
    std::uint64_t used = 0;
    json jfields = jr.value("fields", json::array());
    if (jfields.is_string()) {  // a shared field set
      if (!fieldsets.contains(jfields.get<std::string>()))
        fail(where, "fields: no field set " + jfields.dump() + " in \"fieldsets\"");
      jfields = fieldsets[jfields.get<std::string>()];
    }
    for (const auto& jf : jfields) {
      Field f;
      f.name = jf.at("name").get<std::string>();
      std::string fw = where + " field " + f.name;
      check_keys(jf, {"name", "bits", "access", "enum", "doc"}, fw);
      std::string bits = jf.at("bits").get<std::string>();
      unsigned hi = 0, lo = 0;
      auto colon = bits.find(':');
      try {
        hi = static_cast<unsigned>(std::stoul(bits.substr(0, colon)));
        lo = colon == std::string::npos ? hi : static_cast<unsigned>(std::stoul(bits.substr(colon + 1)));
      } catch (const std::exception&) {
        fail(fw, "bits must be \"hi:lo\" or \"bit\", got \"" + bits + "\"");
      }
      if (hi < lo || hi >= r.size * 8) fail(fw, "bits " + bits + " do not fit the register");
      f.lsb = lo;
      f.width = hi - lo + 1;
      f.access = access_of(jf, fw, r.access);
      f.doc = jf.value("doc", "");
      std::uint64_t m = (f.width >= 64 ? ~0ull : ((1ull << f.width) - 1)) << f.lsb;
      if (used & m) fail(fw, "overlaps another field");
      f.enumeration = jf.value("enum", "");
      if (!f.enumeration.empty()) {
        const Enum* e = b.find_enum(f.enumeration);
        if (!e) fail(fw, "enum: no enum \"" + f.enumeration + "\" in \"enums\"");
        for (const Value& v : e->values)
          if (f.width < 64 && v.value >> f.width) fail(fw, "value " + v.name + " of enum " + e->name + " does not fit");
      }
      used |= m;
      r.fields.push_back(f);
    }
    b.regs.push_back(r);
  }
  // Two registers may share bytes only if they are told apart by the
  // direction of the access (a read-only and a write-only register) or by
  // different bank selectors.
  for (std::size_t i = 0; i < b.regs.size(); ++i)
    for (std::size_t k = i + 1; k < b.regs.size(); ++k) {
      const Reg& a = b.regs[i];
      const Reg& c = b.regs[k];
      bool distinct = a.bank != c.bank || (a.access == "ro" && c.access == "wo") ||
                      (a.access == "wo" && c.access == "ro");
      if (distinct) continue;
      for (unsigned ea = 0; ea < a.count; ++ea)
        for (unsigned ec = 0; ec < c.count; ++ec) {
          std::uint64_t a0 = a.offset + ea * a.stride, c0 = c.offset + ec * c.stride;
          if (a0 < c0 + c.size && c0 < a0 + a.size)
            fail(path, "registers " + a.name + " and " + c.name + " overlap");
        }
    }
  return b;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string cstr(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

std::string access_enum(const std::string& a) { return "Access::" + upper(a); }

// An enum's C++ name: format -> Format, vector_op -> VectorOp.
std::string camel(const std::string& s) {
  std::string o;
  bool up = true;
  for (char c : s) {
    if (c == '_') {
      up = true;
      continue;
    }
    o += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return o;
}

std::string banner(const Block& b, const char* open, const char* close) {
  return fmt::format("{} DO NOT EDIT: generated by tools/reggen from {}. {}\n", open, b.source, close);
}

void write_if_changed(const std::string& path, const std::string& text) {
  {
    std::ifstream in(path);
    std::stringstream old;
    old << in.rdbuf();
    if (in && old.str() == text) return;
  }
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error(path + ": cannot write");
}

std::string cpp_view(const Block& b) {
  std::string o = banner(b, "//", "");
  o += "#pragma once\n\n#include \"common/regs_cview.h\"\n#include \"common/regs_desc.hpp\"\n\n";
  o += fmt::format("namespace tessera::regs::{} {{\n\n", b.name);
  o += "enum Reg : unsigned {\n";
  for (std::size_t i = 0; i < b.regs.size(); ++i) o += fmt::format("  {} = {},\n", b.regs[i].name, i);
  o += "};\n\n";
  for (const Enum& e : b.enums) {
    const std::string n = camel(e.name);
    o += fmt::format("// {}\nenum class {} : std::uint32_t {{\n", e.doc, n);
    for (const Value& v : e.values) o += fmt::format("  {} = {:#x},\n", v.name, v.value);
    o += "};\n";
    o += fmt::format("inline constexpr EnumValueDesc k{}Values[] = {{\n", n);
    for (const Value& v : e.values) o += fmt::format("    {{{}, {:#x}, {}}},\n", cstr(v.name), v.value, cstr(v.doc));
    o += "};\n";
    o += fmt::format("inline constexpr EnumDesc k{}Enum{{{}, k{}Values, {}, {}}};\n\n", n, cstr(e.name), n,
                     e.values.size(), cstr(e.doc));
  }
  if (!b.enums.empty()) {
    o += "inline constexpr const EnumDesc* kEnums[] = {";
    for (const Enum& e : b.enums) o += fmt::format("&k{}Enum, ", camel(e.name));
    o += "};\n\n";
  }
  for (const auto& r : b.regs) {
    if (r.fields.empty()) continue;
    o += fmt::format("inline constexpr FieldDesc k{}Fields[] = {{\n", r.name);
    for (const auto& f : r.fields)
      o += fmt::format("    {{{}, {}, {}, {}, {}}},\n", cstr(f.name), f.lsb, f.width, access_enum(f.access),
                       cstr(f.doc));
    o += "};\n";
    o += fmt::format("namespace {}_f {{\n", r.name);
    for (const auto& f : r.fields) {
      std::uint64_t m = (f.width >= 64 ? ~0ull : ((1ull << f.width) - 1)) << f.lsb;
      o += fmt::format("inline constexpr unsigned {}_SHIFT = {};\n", f.name, f.lsb);
      o += fmt::format("inline constexpr std::uint64_t {}_MASK = {:#x}ull;\n", f.name, m);
    }
    o += fmt::format("}}  // namespace {}_f\n\n", r.name);
  }
  o += "inline constexpr RegDesc kRegs[] = {\n";
  for (const auto& r : b.regs) {
    o += fmt::format("    {{{}, {:#x}, {}, {}, {}, {:#x}, {}, {:#x}ull, {}, {}, {}, {}, {}}},\n", cstr(r.name),
                     r.offset, r.size, r.min_access, r.count, r.stride, access_enum(r.access), r.reset,
                     cstr(r.bank), r.side_effects ? "true" : "false",
                     r.fields.empty() ? "nullptr" : "k" + r.name + "Fields", r.fields.size(), cstr(r.doc));
  }
  o += "};\n\n";
  o += fmt::format("inline constexpr RegBlockDesc kBlock{{{}, {:#x}, kRegs, {}, {}, {}, {}}};\n\n", cstr(b.name),
                   b.window, b.regs.size(), cstr(b.doc), b.enums.empty() ? "nullptr" : "kEnums", b.enums.size());
  o += "}  // namespace tessera::regs::" + b.name + "\n\n";
  o += fmt::format("extern \"C\" const struct tessera_reg_cview {}_regs_cview[];\n", b.name);
  o += fmt::format("extern \"C\" const struct tessera_field_cview {}_fields_cview[];\n", b.name);
  o += fmt::format("extern \"C\" const struct tessera_value_cview {}_values_cview[];\n", b.name);
  return o;
}

std::string c_view(const Block& b) {
  std::string up = upper(b.name);
  std::string o = banner(b, "/*", "*/");
  o += "/* Plain numbers, so assembly can include this too. */\n";
  o += fmt::format("#ifndef TESSERA_{0}_REGS_H\n#define TESSERA_{0}_REGS_H\n\n", up);
  o += fmt::format("#define {}_WINDOW_SIZE {:#x}\n\n", up, b.window);
  for (const Enum& e : b.enums) {
    o += fmt::format("/* {} */\n", e.doc);
    for (const Value& v : e.values) o += fmt::format("#define {}_{}_{} {:#x}\n", up, upper(e.name), v.name, v.value);
    // The same as an X-macro, X(NAME, name, value), for headers that name the values their own way.
    o += fmt::format("#define {}_{}_VALUES(X)", up, upper(e.name));
    for (const Value& v : e.values) {
      std::string lower = v.name;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      o += fmt::format(" X({}, {}, {:#x})", v.name, lower, v.value);
    }
    o += "\n\n";
  }
  for (const auto& r : b.regs) {
    std::string p = up + "_" + r.name;
    o += fmt::format("/* {} */\n", r.doc);
    o += fmt::format("#define {}_OFFSET {:#x}\n", p, r.offset);
    o += fmt::format("#define {}_SIZE {}\n", p, r.size);
    o += fmt::format("#define {}_RESET {:#x}\n", p, r.reset);
    if (r.count > 1) {
      o += fmt::format("#define {}_COUNT {}\n", p, r.count);
      o += fmt::format("#define {}_STRIDE {:#x}\n", p, r.stride);
    }
    for (const auto& f : r.fields) {
      std::uint64_t m = (f.width >= 64 ? ~0ull : ((1ull << f.width) - 1)) << f.lsb;
      o += fmt::format("#define {}_{}_SHIFT {}\n", p, f.name, f.lsb);
      o += fmt::format("#define {}_{}_MASK {:#x}\n", p, f.name, m);
    }
    o += "\n";
  }
  o += fmt::format("#endif /* TESSERA_{}_REGS_H */\n", up);
  return o;
}

std::string c_check(const Block& b) {
  std::string up = upper(b.name);
  std::string o = banner(b, "/*", "*/");
  o += fmt::format("#include \"{}_regs.h\"\n#include \"common/regs_cview.h\"\n\n", b.name);
  o += fmt::format("const struct tessera_reg_cview {}_regs_cview[] = {{\n", b.name);
  for (const auto& r : b.regs) {
    std::string p = up + "_" + r.name;
    o += fmt::format("  {{\"{}\", {}_OFFSET, {}_SIZE, {}, {}, {}_RESET}},\n", r.name, p, p,
                     r.count > 1 ? p + "_COUNT" : "1", r.count > 1 ? p + "_STRIDE" : p + "_SIZE", p);
  }
  o += "  {0, 0, 0, 0, 0, 0}\n};\n\n";
  o += fmt::format("const struct tessera_field_cview {}_fields_cview[] = {{\n", b.name);
  for (const auto& r : b.regs)
    for (const auto& f : r.fields) {
      std::string p = up + "_" + r.name + "_" + f.name;
      o += fmt::format("  {{\"{}\", \"{}\", {}_SHIFT, {}_MASK}},\n", r.name, f.name, p, p);
    }
  o += "  {0, 0, 0, 0}\n};\n\n";
  o += fmt::format("const struct tessera_value_cview {}_values_cview[] = {{\n", b.name);
  for (const Enum& e : b.enums)
    for (const Value& v : e.values)
      o += fmt::format("  {{\"{}\", \"{}\", {}_{}_{}}},\n", e.name, v.name, up, upper(e.name), v.name);
  o += "  {0, 0, 0}\n};\n";
  return o;
}

std::string markdown(const Block& b) {
  std::string o = banner(b, "<!--", "-->");
  o += fmt::format("# {} registers\n\n{}\n\nWindow: {:#x} bytes.\n\n", b.name, b.doc, b.window);
  o += "| offset | name | size | access | reset | description |\n|---|---|---|---|---|---|\n";
  for (const auto& r : b.regs) {
    std::string off = fmt::format("{:#x}", r.offset);
    if (r.count > 1) off += fmt::format(" + {:#x}·n (n < {})", r.stride, r.count);
    std::string doc = r.doc;
    if (!r.bank.empty()) doc += fmt::format(" (when {} is selected)", r.bank);
    if (r.side_effects) doc += " Reading has side effects.";
    o += fmt::format("| {} | {} | {} | {} | {:#x} | {} |\n", off, r.name, r.size, upper(r.access), r.reset, doc);
  }
  for (const auto& r : b.regs) {
    if (r.fields.empty()) continue;
    o += fmt::format("\n## {}\n\n| bits | field | access | description |\n|---|---|---|---|\n", r.name);
    for (const auto& f : r.fields) {
      std::string bits = f.width == 1 ? fmt::format("{}", f.lsb) : fmt::format("{}:{}", f.lsb + f.width - 1, f.lsb);
      const std::string doc = f.enumeration.empty() ? f.doc : f.doc + " (values: " + f.enumeration + ", below)";
      o += fmt::format("| {} | {} | {} | {} |\n", bits, f.name, upper(f.access), doc);
    }
  }
  for (const Enum& e : b.enums) {
    o += fmt::format("\n## Values: {}\n\n{}\n\n| value | name | description |\n|---|---|---|\n", e.name, e.doc);
    for (const Value& v : e.values) o += fmt::format("| {:#x} | {} | {} |\n", v.value, v.name, v.doc);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: tessera_reggen <block>.regs.json <out-dir> <doc-dir>\n";
    return 2;
  }
  try {
    Block b = parse(argv[1]);
    std::string out = argv[2], docs = argv[3];
    write_if_changed(out + "/" + b.name + "_regs.hpp", cpp_view(b));
    write_if_changed(out + "/" + b.name + "_regs.h", c_view(b));
    write_if_changed(out + "/" + b.name + "_regs_cview.c", c_check(b));
    write_if_changed(docs + "/" + b.name + "_regs.md", markdown(b));
    // What the outputs depend on besides the description: the files it includes.
    std::string dep = out + "/" + b.name + "_regs.hpp:";
    for (const std::string& f : g_included) dep += " " + f;
    write_if_changed(out + "/" + b.name + "_regs.d", dep + "\n");
  } catch (const std::exception& e) {
    std::cerr << "tessera_reggen: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
