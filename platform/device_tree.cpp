// The device tree of a platform, as QEMU's virt machine describes itself,
// with the compatible strings OpenSBI, U-Boot and Linux know; and its
// compilation with Debian's device-tree-compiler (dtc).
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/units.hpp"
#include "spec.hpp"

namespace tessera {
namespace {

std::string cells(std::uint64_t v) { return fmt::format("{:#x} {:#x}", v >> 32, v & 0xffffffffu); }

std::string param(const InstanceSpec& s, const char* key) {
  const auto it = s.params.find(key);
  if (it == s.params.end()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

std::string PlatformSpec::device_tree() const {
  // Harts: each riscv instance, by hart id, with its interrupt controller's label.
  std::map<std::string, std::string> intc;  // instance -> label
  std::string cpus;
  std::uint64_t timebase = 0;
  for (const auto& s : instances)
    if (s.type == "clint" && !timebase) timebase = static_cast<std::uint64_t>(parse_frequency(param(s, "timebase")).value);
  for (const auto& s : instances) {
    if (s.type != "riscv") continue;
    const std::string xlen = param(s, "xlen"), ext = param(s, "extensions"), id = param(s, "hartid");
    const bool s_mode = param(s, "s_mode") == "true";
    std::string isa = "rv" + xlen;
    for (char c : std::string("imafdc"))
      if (ext.find(c) != std::string::npos || (ext.find('g') != std::string::npos && std::string("imafd").find(c) != std::string::npos))
        isa += c;
    const std::string label = "cpu" + id + "_intc";
    intc[s.name] = label;
    cpus += fmt::format(
        "\t\tcpu@{0} {{\n\t\t\tdevice_type = \"cpu\";\n\t\t\treg = <{0}>;\n\t\t\tstatus = \"okay\";\n"
        "\t\t\tcompatible = \"riscv\";\n\t\t\triscv,isa = \"{1}_zicsr_zifencei\";\n{2}"
        "\t\t\tclock-frequency = <{3}>;\n"
        "\t\t\t{4}: interrupt-controller {{\n\t\t\t\t#interrupt-cells = <1>;\n\t\t\t\tinterrupt-controller;\n"
        "\t\t\t\tcompatible = \"riscv,cpu-intc\";\n\t\t\t}};\n\t\t}};\n",
        id, isa, s_mode && xlen == "64" ? "\t\t\tmmu-type = \"riscv,sv39\";\n" : "",
        static_cast<std::uint64_t>(parse_frequency(param(s, "clock")).value), label);
  }
  // Where an interrupt line ends: "<&cpu0_intc 11>" for "cp.meip".
  auto hart_irq = [&](const PortRef& to) -> std::string {
    static const std::map<std::string, int> bits = {{"msip", 3}, {"mtip", 7}, {"meip", 11}, {"seip", 9}};
    const auto c = intc.find(to.instance);
    const auto b = bits.find(to.port);
    if (c == intc.end() || b == bits.end()) return "";
    return fmt::format("&{} {}", c->second, b->second);
  };
  std::string soc, memory, chosen;
  std::string plic_label;
  for (const auto& s : instances)
    if (s.type == "plic") plic_label = s.name;
  for (const auto& s : instances) {
    if (!s.base) continue;
    const std::uint64_t base = *s.base;
    const std::string reg = fmt::format("reg = <{} {}>;", cells(base), cells(s.size));
    if (s.type == "ram") {
      memory += fmt::format("\tmemory@{:x} {{\n\t\tdevice_type = \"memory\";\n\t\t{}\n\t}};\n", base, reg);
    } else if (s.type == "clint") {
      std::string ext;
      for (const auto& w : s.irqs)
        if (const std::string h = hart_irq(w.to); !h.empty()) ext += (ext.empty() ? "" : " ") + h;
      soc += fmt::format("\t\tclint@{:x} {{\n\t\t\tcompatible = \"sifive,clint0\", \"riscv,clint0\";\n\t\t\t{}\n"
                         "\t\t\tinterrupts-extended = <{}>;\n\t\t}};\n", base, reg, ext);
    } else if (s.type == "plic") {
      std::string ext;
      for (const auto& w : s.irqs)
        if (const std::string h = hart_irq(w.to); !h.empty()) ext += (ext.empty() ? "" : " ") + h;
      soc += fmt::format("\t\t{}: plic@{:x} {{\n\t\t\tcompatible = \"sifive,plic-1.0.0\", \"riscv,plic0\";\n\t\t\t{}\n"
                         "\t\t\t#address-cells = <0>;\n\t\t\t#interrupt-cells = <1>;\n\t\t\tinterrupt-controller;\n"
                         "\t\t\triscv,ndev = <{}>;\n\t\t\tinterrupts-extended = <{}>;\n\t\t}};\n",
                         s.name, base, reg, param(s, "sources"), ext);
    } else if (s.type == "uart16550") {
      std::string irq;
      for (const auto& w : s.irqs)
        if (w.to.instance == plic_label) irq = fmt::format("\t\t\tinterrupt-parent = <&{}>;\n\t\t\tinterrupts = <{}>;\n", plic_label, w.to.index);
      soc += fmt::format("\t\tserial@{:x} {{\n\t\t\tcompatible = \"ns16550a\";\n\t\t\t{}\n"
                         "\t\t\tclock-frequency = <3686400>;\n\t\t\tcurrent-speed = <115200>;\n{}\t\t}};\n",
                         base, reg, irq);
      if (chosen.empty()) chosen = fmt::format("\tchosen {{\n\t\tstdout-path = \"/soc/serial@{:x}\";\n\t}};\n", base);
    } else if (s.type == "test_finisher") {
      // SiFive's test device: OpenSBI's reset driver (SBI SRST) powers off
      // with it; no syscon-poweroff node, since its register reads nothing.
      soc += fmt::format("\t\ttest@{:x} {{\n\t\t\tcompatible = \"sifive,test1\", \"sifive,test0\";\n\t\t\t{}\n\t\t}};\n",
                         base, reg);
    }
  }
  return fmt::format(
      "/dts-v1/;\n\n/* Generated by tessera-vp from {} */\n/ {{\n\t#address-cells = <2>;\n\t#size-cells = <2>;\n"
      "\tcompatible = \"tessera,t1\", \"riscv-virtio\";\n\tmodel = \"Tessera {}\";\n\n{}{}"
      "\tcpus {{\n\t\t#address-cells = <1>;\n\t\t#size-cells = <0>;\n\t\ttimebase-frequency = <{}>;\n{}\t}};\n\n"
      "\tsoc {{\n\t\t#address-cells = <2>;\n\t\t#size-cells = <2>;\n\t\tcompatible = \"simple-bus\";\n\t\tranges;\n{}\t}};\n}};\n",
      file, name, chosen, memory, timebase, cpus, soc);
}

std::vector<std::uint8_t> compile_device_tree(const std::string& dts) {
  char dir[] = "/tmp/tessera-dtb-XXXXXX";
  if (!::mkdtemp(dir)) throw ConfigError("--boot: cannot make a temporary folder for the device tree");
  const std::string src = std::string(dir) + "/t.dts", out = std::string(dir) + "/t.dtb", err = std::string(dir) + "/err";
  std::ofstream(src) << dts;
  const std::string cmd = "timeout 60 dtc -q -I dts -O dtb -o " + out + " " + src + " 2>" + err;
  const int rc = std::system(cmd.c_str());
  std::ifstream in(out, std::ios::binary);
  std::vector<std::uint8_t> dtb((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::stringstream why;
  why << std::ifstream(err).rdbuf();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  if (rc != 0 || dtb.empty()) {
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 127)
      throw ConfigError("--boot: the device tree compiler dtc is not installed (Debian's device-tree-compiler)");
    throw ConfigError("--boot: dtc refused the generated device tree: " + why.str());
  }
  return dtb;
}

}  // namespace tessera
