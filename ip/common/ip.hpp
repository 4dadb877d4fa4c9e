// The base of every IP: an sc_module that names its ports so the platform
// can bind them from the platform description, and that reports its
// activity counters for the statistics.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <systemc>
#include <tlm>
#include <vector>

#include "common/irq.hpp"

namespace tessera {

class Ip : public sc_core::sc_module {
 public:
  struct Target {
    tlm::tlm_target_socket<>* socket;
    std::uint64_t size;  // address space it answers (0: the instance's "size")
  };

  explicit Ip(const sc_core::sc_module_name& n) : sc_core::sc_module(n) {}

  const std::string& path() const { return path_; }

  // The target mapped at the instance's base is the first one exposed.
  const std::vector<std::pair<std::string, Target>>& targets() const { return targets_; }
  const std::vector<std::pair<std::string, tlm::tlm_initiator_socket<>*>>& initiators() const { return initiators_; }
  // nullptr when the port or the index does not exist.
  IrqOut* irq_out(const std::string& port, unsigned index);
  IrqIn* irq_in(const std::string& port, unsigned index);
  // "name[count]" for each interrupt port, for error messages.
  std::string irq_ports(bool outputs) const;

  // Adds this IP's counters to `out` (an object); called at the end of a run.
  virtual void report_stats(nlohmann::ordered_json& out) const {}
  // Adds what this IP can do at most, from its parameters at its nominal
  // clocks (bytes or operations per second), for the roofline
  // (platform/roofline.hpp); nothing when it bounds nothing.
  virtual void report_limits(nlohmann::ordered_json& out) const {}

 protected:
  void expose_target(const char* port, tlm::tlm_target_socket<>& s, std::uint64_t size = 0);
  void expose_initiator(const char* port, tlm::tlm_initiator_socket<>& s);
  void expose_irq_out(const char* port, std::vector<IrqOut>& lines);
  void expose_irq_out(const char* port, IrqOut& line);
  void expose_irq_in(const char* port, std::vector<IrqIn>& lines);
  void expose_irq_in(const char* port, IrqIn& line);
  // Entries may be null: indices that exist in numbering but not as wires.
  void expose_irq_in(const char* port, const std::vector<IrqIn*>& lines);

 private:
  std::string path_ = name();
  std::vector<std::pair<std::string, Target>> targets_;
  std::vector<std::pair<std::string, tlm::tlm_initiator_socket<>*>> initiators_;
  std::map<std::string, std::vector<IrqOut*>> irq_outs_;
  std::map<std::string, std::vector<IrqIn*>> irq_ins_;
};

}  // namespace tessera
