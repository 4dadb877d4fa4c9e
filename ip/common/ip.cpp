#include "common/ip.hpp"

namespace tessera {

void Ip::expose_target(const char* port, tlm::tlm_target_socket<>& s, std::uint64_t size) {
  targets_.push_back({port, Target{&s, size}});
}

void Ip::expose_initiator(const char* port, tlm::tlm_initiator_socket<>& s) { initiators_.push_back({port, &s}); }

void Ip::expose_irq_out(const char* port, std::vector<IrqOut>& lines) {
  for (auto& l : lines) irq_outs_[port].push_back(&l);
}
void Ip::expose_irq_out(const char* port, IrqOut& line) { irq_outs_[port].push_back(&line); }
void Ip::expose_irq_in(const char* port, std::vector<IrqIn>& lines) {
  for (auto& l : lines) irq_ins_[port].push_back(&l);
}
void Ip::expose_irq_in(const char* port, IrqIn& line) { irq_ins_[port].push_back(&line); }
void Ip::expose_irq_in(const char* port, const std::vector<IrqIn*>& lines) {
  for (IrqIn* l : lines) irq_ins_[port].push_back(l);
}

IrqOut* Ip::irq_out(const std::string& port, unsigned index) {
  auto it = irq_outs_.find(port);
  return it == irq_outs_.end() || index >= it->second.size() ? nullptr : it->second[index];
}

IrqIn* Ip::irq_in(const std::string& port, unsigned index) {
  auto it = irq_ins_.find(port);
  return it == irq_ins_.end() || index >= it->second.size() ? nullptr : it->second[index];
}

std::string Ip::irq_ports(bool outputs) const {
  std::string s;
  auto add = [&](const std::string& name, std::size_t n) {
    s += (s.empty() ? "" : ", ") + name + (n > 1 ? "[" + std::to_string(n) + "]" : "");
  };
  if (outputs)
    for (const auto& [name, v] : irq_outs_) add(name, v.size());
  else
    for (const auto& [name, v] : irq_ins_) add(name, v.size());
  return s.empty() ? "none" : s;
}

}  // namespace tessera
