// GDB remote serial protocol server for the RISC-V harts of a platform,
// on a TCP port of localhost (`tessera-vp --gdb PORT`, `--gdb-wait`).
//
// Each hart given to a server is a GDB thread (`--gdb`: the platform's
// riscv instances, thread 1 the first, usually the CP; `--gdb-tiles`: the
// tiles' RV32 cores, on a server of their own, since one GDB target has one
// XLEN), with one memory view per hart (its own bus, through
// transport_dbg: a tile core sees its local scratchpad at 0x8000_0000).
// Supported: ?, g/G, p/P, m/M/X, Z0/Z1 breakpoints, Z2/Z3/Z4 watchpoints,
// s, c, vCont (c, s), Ctrl-C, qSupported, the target description (XML with
// riscv:rv32 or riscv:rv64), thread queries, H, T, k (ends the run), D.
// While the debugger holds a hart, the whole simulation stands still: the
// server answers from inside the hart's SystemC thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::riscv {

class RiscvCpu;

class GdbServer {
 public:
  enum class Action { resume, kill, detach };

  // Listens on 127.0.0.1:port; throws std::runtime_error on failure.
  explicit GdbServer(unsigned port);
  ~GdbServer();

  void add_hart(RiscvCpu* cpu) { harts_.push_back(cpu); }
  const std::vector<RiscvCpu*>& harts() const { return harts_; }
  unsigned port() const { return port_; }

  // Blocks until GDB connects, then serves it with `cpu` stopped (signal
  // `sig`; `reason` such as "swbreak:;" goes into the stop reply) until it
  // resumes the target.
  Action stopped(RiscvCpu* cpu, unsigned sig, const std::string& reason);
  // Called between slices: accepts a late connection or a Ctrl-C; true if
  // the target must stop for the debugger.
  bool poll();
  bool connected() const { return client_ >= 0; }
  // Tells a connected debugger that the program ended with `code`.
  void exited(int code);

 private:
  bool accept_client(bool block);
  bool read_packet(std::string& packet);
  void send(const std::string& payload);
  std::string handle(const std::string& packet, Action& action, bool& done);
  RiscvCpu* thread_cpu(long id) const;

  unsigned port_;
  int listener_ = -1, client_ = -1;
  std::vector<RiscvCpu*> harts_;
  RiscvCpu* current_ = nullptr;  // the hart that stopped
  RiscvCpu* selected_ = nullptr;  // Hg
  std::string last_stop_;
  bool no_ack_ = false, start_no_ack_ = false;
  bool running_ = false;  // resumed by c/s: the next stop sends its reply unasked
};

}  // namespace tessera::riscv
