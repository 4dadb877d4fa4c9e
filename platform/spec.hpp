// The platform description, checked. A platform file is JSON:
//
//   { "platform": "t1", "doc": "...", "boot": "cp",
//     "instances": [
//       { "name": "uart0", "type": "uart16550", "base": "0x1000_0000",
//         "irq": { "irq_out": "plic.src[10]" }, "params": { "tx": "stdout" } }, ...] }
//
// Instance keys: name, type, base, size, irq, params, impl ("tlm" or
// "rtl"), targets (other sockets at their own bases), attach ("noc@node":
// behind a network-on-chip rather than on the system bus), doc. `size` defaults to the type's register window. `irq` maps an
// output of this instance ("port" or "port[i]") to one input, or a list of
// inputs, of other instances ("instance.port[i]").
//
// A platform file may build on another: "extends": "t1.json" (beside this
// file; a bare name such as "t1" is a platform Tessera ships) takes that
// file's instances, and this file's instances are added to
// them, or, where one has the name of a base instance, replace the base's
// keys (params, irq and targets merge key by key); platform, doc and boot
// replace the base's. "plugins": ["libmy_ip.so"] loads IP libraries built
// with tessera_add_plugin before the instances are read, so their types can
// be used (paths beside the file that names them).
//
// Loading goes raw JSON -> --set overrides -> PlatformSpec, where every IP's
// Config is built and validated and address ranges are checked, so a bad
// description stops before anything elaborates, with one line naming the
// file, the instance and the key.
#pragma once

#include <any>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "common/registry.hpp"

namespace tessera {

struct PortRef {
  std::string instance;  // empty for the instance's own port
  std::string port;
  unsigned index = 0;
  std::string text;  // as written
};

struct IrqWire {
  PortRef from;  // on the owning instance
  PortRef to;
};

struct InstanceSpec {
  std::string name, type, impl = "tlm", doc;
  std::optional<std::uint64_t> base;
  std::uint64_t size = 0;
  // Further target sockets mapped at their own bases ("targets": {"csr_target": "0x..."}).
  std::vector<std::pair<std::string, std::uint64_t>> targets;
  // "attach": "noc@5" or "noc@1,3": reached through that network-on-chip at
  // node 5, or at the router at x 1, y 3, instead of the system bus.
  std::string attach;
  unsigned attach_node = 0;
  int attach_x = -1, attach_y = -1;  // "noc@x,y": router coordinates instead of a node number
  std::vector<IrqWire> irqs;
  const IpType* ip = nullptr;
  std::any config;                        // the IP's validated Config
  nlohmann::ordered_json params;          // effective parameters
  std::uint64_t last() const { return *base + size - 1; }
};

struct PlatformSpec {
  std::string file, name, doc;
  std::string boot;  // the processor that starts at the firmware's entry point (optional)
  std::vector<InstanceSpec> instances;
  std::vector<std::string> plugins;      // loaded by read()
  std::vector<std::string> search_path;  // folders of the files it extends

  // Reads a platform file, folds in what it extends and loads its plugins;
  // throws ConfigError.
  static nlohmann::json read(const std::string& file);
  // Applies "instance.key=value" (key: base, size, type, impl, irq.<port>,
  // or a parameter, also written params.<key>). Throws ConfigError.
  static void apply_set(nlohmann::json& raw, const std::string& file, const std::string& assignment);
  // `sets` with the fast models chosen first, where `sets` does not choose:
  // every NoC of `file` packet level, every HBM in its fast mode (long
  // full-system runs take them unless told otherwise: `--set
  // noc.model=flit`, `--set hbm0.mode=detailed` ... keep the detailed ones).
  // Throws ConfigError (the file).
  static std::vector<std::string> fast_models(const std::string& file, std::vector<std::string> sets);
  // Checks everything and builds every IP's Config. Throws ConfigError.
  static PlatformSpec parse(const std::string& file, const nlohmann::json& raw);

  const InstanceSpec* find(const std::string& name) const;
  // What --dump-config prints: every instance with every parameter.
  nlohmann::ordered_json effective() const;
  // The facts firmware depends on (the instances' and the types' Fact
  // lists): "clint.TIMEBASE_HZ" and "type.tile.LOCAL_SPM" -> value.
  std::vector<std::pair<std::string, std::uint64_t>> facts() const;
  // The same as one string, as the platform header's TESSERA_FACTS holds it
  // and the BSP puts it in a program (tessera_platform_facts): "k=v;k=v".
  std::string facts_string() const;
  // Where a program's facts string disagrees with this platform's: one line
  // naming the first fact; empty if none does (facts only one side has agree).
  std::string facts_mismatch(const std::string& program_facts) const;
  // The memory-map header and linker symbols for firmware.
  std::string c_header() const;
  std::string linker_symbols() const;
  // The device tree source (QEMU virt's conventions: the harts, memory,
  // CLINT, PLIC, UART, test device, stdout-path), for OpenSBI, U-Boot and
  // Linux (device_tree.cpp).
  std::string device_tree() const;
};

// dtc's binary of a device tree source. Throws ConfigError (dtc missing, or
// refusing the source, with its message).
std::vector<std::uint8_t> compile_device_tree(const std::string& dts);

}  // namespace tessera
