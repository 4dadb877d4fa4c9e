#include "riscv/gdb_server.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "riscv/hart.hpp"
#include "riscv/riscv_cpu.hpp"

namespace tessera::riscv {
namespace {

std::string hex_bytes(const std::uint8_t* p, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

std::vector<std::uint8_t> parse_hex(const std::string& s) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2) out.push_back(static_cast<std::uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  return out;
}

std::string reg_hex(std::uint64_t v, unsigned xlen) {
  std::uint8_t b[8];
  std::memcpy(b, &v, 8);
  return hex_bytes(b, xlen / 8);
}

std::uint64_t reg_value(const std::string& hex) {
  std::uint64_t v = 0;
  const auto bytes = parse_hex(hex);
  std::memcpy(&v, bytes.data(), std::min<std::size_t>(8, bytes.size()));
  return v;
}

// GDB's RISC-V register numbers: x0-x31, pc, f0-f31 (33-64), then CSRs
// from 65 (fflags 66, frm 67, fcsr 68).
constexpr unsigned kF0 = 33, kFflags = 66, kFrm = 67, kFcsr = 68, kCsr0 = 65;

// The CSRs the target description names (the csr feature), by number.
struct CsrName {
  unsigned number;
  const char* name;
};
constexpr CsrName kCsrs[] = {
    {0x300, "mstatus"}, {0x301, "misa"},     {0x302, "medeleg"},  {0x303, "mideleg"}, {0x304, "mie"},
    {0x305, "mtvec"},   {0x306, "mcounteren"}, {0x340, "mscratch"}, {0x341, "mepc"},  {0x342, "mcause"},
    {0x343, "mtval"},   {0x344, "mip"},      {0x3a0, "pmpcfg0"},  {0x3b0, "pmpaddr0"}, {0x100, "sstatus"},
    {0x104, "sie"},     {0x105, "stvec"},    {0x106, "scounteren"}, {0x140, "sscratch"}, {0x141, "sepc"},
    {0x142, "scause"},  {0x143, "stval"},    {0x144, "sip"},      {0x180, "satp"},    {0x7a0, "tselect"},
    {0x7a1, "tdata1"},  {0x7a2, "tdata2"},   {0xb00, "mcycle"},   {0xb02, "minstret"}, {0xf14, "mhartid"}};

std::string target_xml(const HartBase& h, unsigned xlen, unsigned flen) {
  std::string x = fmt::format(
      "<?xml version=\"1.0\"?><!DOCTYPE target SYSTEM \"gdb-target.dtd\"><target version=\"1.0\">"
      "<architecture>riscv:rv{}</architecture><feature name=\"org.gnu.gdb.riscv.cpu\">",
      xlen);
  for (unsigned i = 0; i < 32; ++i)
    x += fmt::format("<reg name=\"{}\" bitsize=\"{}\" type=\"{}\"/>", i == 0 ? "zero" : reg_name(i), xlen,
                     i == 1 || i == 2 ? (i == 1 ? "code_ptr" : "data_ptr") : "int");
  x += fmt::format("<reg name=\"pc\" bitsize=\"{}\" type=\"code_ptr\"/></feature>", xlen);
  if (flen) {
    x += "<feature name=\"org.gnu.gdb.riscv.fpu\">";
    for (unsigned i = 0; i < 32; ++i)
      x += fmt::format("<reg name=\"{}\" bitsize=\"{}\" type=\"{}\" regnum=\"{}\"/>", freg_name(i), flen,
                       flen == 64 ? "ieee_double" : "ieee_single", kF0 + i);
    x += fmt::format("<reg name=\"fflags\" bitsize=\"32\" type=\"int\" regnum=\"{}\"/>"
                     "<reg name=\"frm\" bitsize=\"32\" type=\"int\" regnum=\"{}\"/>"
                     "<reg name=\"fcsr\" bitsize=\"32\" type=\"int\" regnum=\"{}\"/></feature>",
                     kFflags, kFrm, kFcsr);
  }
  // The CSRs this hart has (an S-mode CSR only with S mode).
  x += "<feature name=\"org.gnu.gdb.riscv.csr\">";
  for (const CsrName& c : kCsrs) {
    std::uint64_t v;
    if (const_cast<HartBase&>(h).debug_csr(c.number, v))
      x += fmt::format("<reg name=\"{}\" bitsize=\"{}\" type=\"int\" regnum=\"{}\"/>", c.name, xlen, kCsr0 + c.number);
  }
  return x + "</feature></target>";
}

}  // namespace

GdbServer::GdbServer(unsigned port) : port_(port) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener_ < 0) throw std::runtime_error("--gdb: cannot create a socket");
  int one = 1;
  ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_, 1) != 0) {
    ::close(listener_);
    throw std::runtime_error(fmt::format("--gdb: cannot listen on localhost:{} ({})", port, std::strerror(errno)));
  }
}

GdbServer::~GdbServer() {
  if (client_ >= 0) ::close(client_);
  if (listener_ >= 0) ::close(listener_);
}

bool GdbServer::accept_client(bool block) {
  if (client_ >= 0) return true;
  pollfd p{listener_, POLLIN, 0};
  if (::poll(&p, 1, block ? -1 : 0) <= 0) return false;
  client_ = ::accept(listener_, nullptr, nullptr);
  if (client_ < 0) return false;
  int one = 1;
  ::setsockopt(client_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  no_ack_ = false;
  return true;
}

bool GdbServer::poll() {
  if (client_ < 0) return accept_client(false);  // a new debugger stops the target
  pollfd p{client_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  char c = 0;
  if (::recv(client_, &c, 1, MSG_PEEK) <= 0) {
    ::close(client_);
    client_ = -1;
    return false;
  }
  if (c == 0x03) {
    ::recv(client_, &c, 1, 0);
    return true;
  }
  return false;
}

bool GdbServer::read_packet(std::string& packet) {
  // $payload#xx, skipping acks and stray bytes; Ctrl-C outside a packet is ignored here.
  char c;
  for (;;) {
    if (::recv(client_, &c, 1, 0) <= 0) return false;
    if (c == '$') break;
  }
  packet.clear();
  for (;;) {
    if (::recv(client_, &c, 1, 0) <= 0) return false;
    if (c == '#') break;
    packet += c;
  }
  char sum[2];
  if (::recv(client_, sum, 1, MSG_WAITALL) <= 0 || ::recv(client_, sum + 1, 1, MSG_WAITALL) <= 0) return false;
  if (!no_ack_) ::send(client_, "+", 1, MSG_NOSIGNAL);
  return true;
}

void GdbServer::send(const std::string& payload) {
  unsigned sum = 0;
  for (unsigned char c : payload) sum += c;
  const std::string frame = fmt::format("${}#{:02x}", payload, sum & 0xff);
  ::send(client_, frame.data(), frame.size(), MSG_NOSIGNAL);
  if (!no_ack_) {
    char ack;
    ::recv(client_, &ack, 1, 0);
  }
}

void GdbServer::exited(int code) {
  if (client_ < 0 || !running_) return;
  send(fmt::format("W{:02x}", code & 0xff));
  running_ = false;
}

RiscvCpu* GdbServer::thread_cpu(long id) const {
  if (id <= 0) return current_;
  return static_cast<std::size_t>(id) <= harts_.size() ? harts_[id - 1] : nullptr;
}

GdbServer::Action GdbServer::stopped(RiscvCpu* cpu, unsigned sig, const std::string& reason) {
  if (client_ < 0) running_ = false;
  if (!accept_client(true)) return Action::detach;
  current_ = selected_ = cpu;
  const auto tid = std::find(harts_.begin(), harts_.end(), cpu) - harts_.begin() + 1;
  last_stop_ = fmt::format("T{:02x}{}thread:{:x};", sig, reason, tid);
  if (running_) send(last_stop_);  // the answer to the c or s that resumed the target
  running_ = false;
  Action action = Action::resume;
  std::string packet;
  for (bool done = false; !done;) {
    if (!read_packet(packet)) {  // the debugger went away: run on
      ::close(client_);
      client_ = -1;
      for (RiscvCpu* h : harts_) {
        h->hart().breakpoints.clear();
        h->hart().watchpoints.clear();
        h->hart().stepping = false;
      }
      return Action::detach;
    }
    const std::string reply = handle(packet, action, done);
    if (!done || action != Action::resume) send(reply);
    if (start_no_ack_) no_ack_ = true, start_no_ack_ = false;
  }
  if (action == Action::resume) running_ = true;
  if (action == Action::detach) {
    ::close(client_);
    client_ = -1;
  }
  return action;
}

std::string GdbServer::handle(const std::string& p, Action& action, bool& done) {
  RiscvCpu* cpu = selected_ ? selected_ : current_;
  HartBase& h = cpu->hart();
  const unsigned xlen = h.xlen();
  auto resume = [&](bool step) {
    for (RiscvCpu* c : harts_) c->hart().stepping = false;
    current_->hart().stepping = step;
    action = Action::resume;
    done = true;
    return std::string();
  };
  switch (p.empty() ? 0 : p[0]) {
    case '?': return last_stop_;
    case 'g': {
      std::string s;
      for (unsigned i = 0; i < 32; ++i) s += reg_hex(h.reg(i), xlen);
      return s + reg_hex(h.pc(), xlen);
    }
    case 'G': {
      const unsigned w = xlen / 4;
      for (unsigned i = 0; i < 33 && (i + 1) * w <= p.size() - 1; ++i) {
        const std::uint64_t v = reg_value(p.substr(1 + i * w, w));
        if (i < 32) h.set_reg(i, v);
        else h.set_pc(v);
      }
      return "OK";
    }
    case 'p': {
      const unsigned n = static_cast<unsigned>(std::stoul(p.substr(1), nullptr, 16));
      if (n < 32) return reg_hex(h.reg(n), xlen);
      if (n == 32) return reg_hex(h.pc(), xlen);
      if (h.flen() && n >= kF0 && n < kF0 + 32) return reg_hex(h.freg(n - kF0), h.flen());
      if (h.flen() && n == kFflags) return reg_hex(h.fcsr() & 31, 32);
      if (h.flen() && n == kFrm) return reg_hex(h.fcsr() >> 5, 32);
      if (h.flen() && n == kFcsr) return reg_hex(h.fcsr(), 32);
      if (std::uint64_t v; n >= kCsr0 && n < kCsr0 + 4096 && h.debug_csr(n - kCsr0, v)) return reg_hex(v, xlen);
      return "E01";
    }
    case 'P': {
      const auto eq = p.find('=');
      const unsigned n = static_cast<unsigned>(std::stoul(p.substr(1, eq - 1), nullptr, 16));
      const std::uint64_t v = reg_value(p.substr(eq + 1));
      if (n < 32) h.set_reg(n, v);
      else if (n == 32) h.set_pc(v);
      else if (h.flen() && n >= kF0 && n < kF0 + 32) h.set_freg(n - kF0, v);
      else if (h.flen() && n == kFflags) h.set_fcsr((h.fcsr() & ~31ull) | (v & 31));
      else if (h.flen() && n == kFrm) h.set_fcsr((h.fcsr() & 31) | ((v & 7) << 5));
      else if (h.flen() && n == kFcsr) h.set_fcsr(v);
      else if (!(n >= kCsr0 && n < kCsr0 + 4096 && h.debug_set_csr(n - kCsr0, v))) return "E01";
      return "OK";
    }
    case 'm': {
      const auto comma = p.find(',');
      const std::uint64_t addr = std::stoull(p.substr(1, comma - 1), nullptr, 16);
      const unsigned len = std::min<unsigned>(static_cast<unsigned>(std::stoul(p.substr(comma + 1), nullptr, 16)), 0x1000);
      std::vector<std::uint8_t> buf(len);
      const unsigned n = h.debug_access(addr, buf.data(), len, false);
      return n == 0 ? "E14" : hex_bytes(buf.data(), n);
    }
    case 'M':
    case 'X': {
      const auto comma = p.find(','), colon = p.find(':');
      const std::uint64_t addr = std::stoull(p.substr(1, comma - 1), nullptr, 16);
      const unsigned len = static_cast<unsigned>(std::stoul(p.substr(comma + 1, colon - comma - 1), nullptr, 16));
      std::vector<std::uint8_t> data;
      if (p[0] == 'M') {
        data = parse_hex(p.substr(colon + 1));
      } else {
        for (std::size_t i = colon + 1; i < p.size(); ++i)
          data.push_back(p[i] == 0x7d && i + 1 < p.size() ? static_cast<std::uint8_t>(p[++i] ^ 0x20)
                                                          : static_cast<std::uint8_t>(p[i]));
      }
      if (len == 0) return "OK";
      data.resize(len);
      return h.debug_access(addr, data.data(), len, true) == len ? "OK" : "E14";
    }
    case 'Z':
    case 'z': {
      const unsigned type = static_cast<unsigned>(p[1] - '0');
      const auto c1 = p.find(','), c2 = p.find(',', c1 + 1);
      const std::uint64_t addr = std::stoull(p.substr(c1 + 1, c2 - c1 - 1), nullptr, 16);
      const std::uint64_t len = std::stoull(p.substr(c2 + 1), nullptr, 16);
      const bool insert = p[0] == 'Z';
      for (RiscvCpu* c : harts_) {  // breakpoints and watchpoints apply to every hart
        HartBase& t = c->hart();
        // Hardware breakpoints and watchpoints on the hart's triggers where
        // one is free, else (and software breakpoints always) in the lists.
        if (type >= 1 && type <= 4 && t.debug_trigger(insert, type, addr, std::max<std::uint64_t>(len, 1))) continue;
        if (type <= 1) {
          auto& v = t.breakpoints;
          if (insert) v.push_back(addr);
          else if (auto it = std::find(v.begin(), v.end(), addr); it != v.end()) v.erase(it);
        } else if (type <= 4) {
          auto& v = t.watchpoints;
          const bool rd = type == 3 || type == 4, wr = type == 2 || type == 4;
          if (insert) v.push_back({addr, std::max<std::uint64_t>(len, 1), rd, wr});
          else
            v.erase(std::remove_if(v.begin(), v.end(),
                                   [&](const HartBase::Watch& w) { return w.addr == addr && w.read == rd && w.write == wr; }),
                    v.end());
        } else {
          return "";
        }
      }
      return "OK";
    }
    case 'c': return resume(false);
    case 's': return resume(true);
    case 'k':
      action = Action::kill;
      done = true;
      return "OK";
    case 'D':
      action = Action::detach;
      done = true;
      for (RiscvCpu* c : harts_) {
        c->hart().breakpoints.clear();
        c->hart().watchpoints.clear();
        c->hart().stepping = false;
      }
      return "OK";
    case 'H': {
      const long id = std::stol(p.substr(2), nullptr, 16);
      if (p[1] == 'g' && id > 0) {
        RiscvCpu* c = thread_cpu(id);
        if (!c) return "E02";
        selected_ = c;
      }
      return "OK";
    }
    case 'T': return thread_cpu(std::stol(p.substr(1), nullptr, 16)) ? "OK" : "E02";
    case 'v':
      if (p == "vCont?") return "vCont;c;C;s;S";
      if (p.rfind("vCont;", 0) == 0) {
        const char kind = p[6];
        return resume(kind == 's' || kind == 'S');
      }
      if (p == "vMustReplyEmpty") return "";
      return "";
    case 'q':
      if (p.rfind("qSupported", 0) == 0) return "PacketSize=4000;qXfer:features:read+;swbreak+;hwbreak+;vContSupported+;QStartNoAckMode+";
      if (p == "qAttached") return "1";
      if (p == "qC") return fmt::format("QC{:x}", std::find(harts_.begin(), harts_.end(), current_) - harts_.begin() + 1);
      if (p == "qfThreadInfo") {
        std::string s = "m";
        for (std::size_t i = 0; i < harts_.size(); ++i) s += fmt::format("{}{:x}", i ? "," : "", i + 1);
        return s;
      }
      if (p == "qsThreadInfo") return "l";
      if (p.rfind("qThreadExtraInfo,", 0) == 0) {
        RiscvCpu* c = thread_cpu(std::stol(p.substr(17), nullptr, 16));
        const std::string name = c ? std::string(c->name()) : "?";
        return hex_bytes(reinterpret_cast<const std::uint8_t*>(name.data()), name.size());
      }
      if (p.rfind("qXfer:features:read:target.xml:", 0) == 0) {
        const std::string xml = target_xml(h, xlen, h.flen());
        const auto args = p.substr(31);
        const auto comma = args.find(',');
        const std::size_t off = std::stoul(args.substr(0, comma), nullptr, 16);
        const std::size_t len = std::stoul(args.substr(comma + 1), nullptr, 16);
        if (off >= xml.size()) return "l";
        const std::string part = xml.substr(off, len);
        return (off + part.size() >= xml.size() ? "l" : "m") + part;
      }
      if (p == "qSymbol::") return "OK";
      if (p == "qOffsets") return "Text=0;Data=0;Bss=0";
      return "";
    case 'Q':
      if (p == "QStartNoAckMode") {
        start_no_ack_ = true;  // after this answer
        return "OK";
      }
      return "";
    default: return "";
  }
}

}  // namespace tessera::riscv
