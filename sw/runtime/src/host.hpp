// The runtime's side of a chip, inside the simulation: the host's agent
// (its accesses through the host port, the completions it collects when
// the command processor rings), and, for a Cluster, the link that carries
// the host's requests to the chips and what they answer, in rounds that
// every MPI rank takes together (one process: one rank). Internal to the
// runtime.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <systemc>
#include <tlm>
#include <vector>

#include "common/payload.hpp"
#include "mailbox_regs.hpp"
#include "platform.hpp"
#include "session.hpp"
#include "tessera/protocol.h"
#include "tessera/runtime.hpp"

namespace tessera::rt::detail {

namespace M = regs::mailbox;

// What the host knows of its chip's command processor: booted (and the
// protocol it speaks), and the completions collected, as they came.
struct AgentState {
  bool ready = false;
  std::uint32_t version = 0;
  std::map<std::uint32_t, tp_completion> completions;
  std::vector<tp_completion> order;
  std::uint32_t completed() const { return static_cast<std::uint32_t>(order.size()); }
  void add(const tp_completion& c) {
    completions[c.id] = c;
    order.push_back(c);
  }
};

// The host's side of the chip: the host port into the bus (HBM, through
// the NoC) and the mailbox's host window. Runs the host's accesses in
// SystemC threads so they take simulated time, and collects completions
// when the CP rings.
class HostAgent : public sc_core::sc_module {
 public:
  HostAgent(const sc_core::sc_module_name& n, Platform& p, std::uint64_t ring_base)
      : sc_core::sc_module(n), p_(p), mailbox_(p.target("mailbox", "host_target")), ring_(ring_base) {
    IrqOut* line = p.find("mailbox")->irq_out("host_irq_out", 0);
    if (!line) throw ConfigError("the platform's mailbox has no host interrupt (host_irq_out)");  // elaboration-only
    bell_in_.set_handler([this](bool level) {
      if (level) bell_.notify(sc_core::SC_ZERO_TIME);
    });
    line->bind(bell_in_);
    SC_HAS_PROCESS(HostAgent);
    SC_THREAD(collect);
  }

  // Device-memory access from a SystemC thread, through the platform's host
  // port when it has one (else the system bus): up to kInFlight chunks at
  // once, as a DMA engine on the host side would keep them.
  void access(tlm::tlm_command cmd, std::uint64_t addr, void* data, std::uint64_t len) {
    auto* bytes = static_cast<std::uint8_t*>(data);
    std::uint64_t next = 0;
    unsigned active = 0;
    std::string error;
    sc_core::sc_event finished;
    auto worker = [&] {
      while (next < len && error.empty()) {
        const std::uint64_t at = next;
        const unsigned chunk = static_cast<unsigned>(std::min<std::uint64_t>(len - at, kChunk));
        next += chunk;
        sc_core::sc_time d;
        tlm::tlm_response_status s;
        if (port_) {
          tlm::tlm_generic_payload t;
          set_access(t, cmd, addr + at, bytes + at, chunk);
          port_->b_transport(t, d);
          s = t.get_response_status();
        } else {
          s = p_.transport(cmd, addr + at, bytes + at, chunk, d);
        }
        sc_core::wait(d);
        if (s != tlm::TLM_OK_RESPONSE && error.empty())
          error = fmt::format("host port: {} of {} bytes at {:#x} failed ({})",
                              cmd == tlm::TLM_READ_COMMAND ? "read" : "write", chunk, addr + at, static_cast<int>(s));
      }
      if (--active == 0) finished.notify(sc_core::SC_ZERO_TIME);
    };
    const std::uint64_t chunks = (len + kChunk - 1) / kChunk;
    active = static_cast<unsigned>(std::min<std::uint64_t>(kInFlight, chunks));
    if (!active) return;
    for (unsigned i = 0, n = active; i < n; ++i) sc_core::sc_spawn(worker);
    while (active) sc_core::wait(finished);
    if (!error.empty()) throw UsageError(error);
  }
  void mailbox_write(unsigned reg, std::uint32_t v) { mailbox_access(tlm::TLM_WRITE_COMMAND, reg, v); }
  std::uint32_t mailbox_read(unsigned reg) { return mailbox_access(tlm::TLM_READ_COMMAND, reg, 0); }

  AgentState state;
  std::function<void()> on_news;

 private:
  static constexpr unsigned kChunk = 4096, kInFlight = 32;
  tlm::tlm_fw_transport_if<>* port_ = nullptr;  // the platform's host port, if any

 public:
  void use_port(tlm::tlm_fw_transport_if<>& port) { port_ = &port; }

 private:

  std::uint32_t mailbox_access(tlm::tlm_command cmd, unsigned reg, std::uint32_t v) {
    sc_core::sc_time d;
    {
      // The payload ends before the wait: a thread the simulation leaves
      // suspended holds nothing on its stack.
      tlm::tlm_generic_payload t;
      set_access(t, cmd, M::kBlock.regs[reg].offset, &v, 4);
      mailbox_.b_transport(t, d);
    }
    sc_core::wait(d);
    return v;
  }

  void collect() {
    mailbox_write(M::IRQ_ENABLE, M::IRQ_ENABLE_f::DOORBELL_MASK);
    for (;;) {
      std::uint32_t bells = mailbox_read(M::DOORBELL);
      while (!bells) {
        sc_core::wait(bell_);
        bells = mailbox_read(M::DOORBELL);
      }
      mailbox_write(M::DOORBELL, bells);
      if (bells & TP_BELL_READY) {
        access(tlm::TLM_READ_COMMAND, ring_ + TP_READY, &state.version, 4);
        state.ready = true;
      }
      if (bells & TP_BELL_COMPLETIONS) {
        std::uint32_t count = 0;
        access(tlm::TLM_READ_COMMAND, ring_ + TP_COMPLETED, &count, 4);
        while (state.completed() != count) {
          tp_completion c;
          access(tlm::TLM_READ_COMMAND, ring_ + TP_CPL_RING + (state.completed() % TP_RING_ENTRIES) * sizeof c, &c,
                 sizeof c);
          state.add(c);
        }
      }
      if (on_news) on_news();
    }
  }

  Platform& p_;
  tlm::tlm_fw_transport_if<>& mailbox_;
  std::uint64_t ring_;
  IrqIn bell_in_;
  sc_core::sc_event bell_;
};

// One access of a host operation: a write or a read of device memory, or a
// write of a mailbox register (addr: the register; data: its 4-byte value).
struct Step {
  enum Kind : std::uint8_t { write = 0, read = 1, mailbox = 2 };
  Kind kind = write;
  std::uint64_t addr = 0, len = 0;
  void* data = nullptr;  // the host's bytes: written from, read into
};

// A Cluster's chips as the host sees them. The host program runs on rank
// 0; every rank (rank 0 too) holds some chips and their agents. Time moves
// in rounds: an exchange among the ranks (the host's requests out, each
// chip's news and answers back, and what crossed the chip-to-chip links),
// then, unless something came back that the host may be waiting for, one
// window of simulated time (the system's lookahead). Every state the host
// sees changes only at an exchange, and a window runs only on what every
// rank knows after it, so a system gives the same times and results on
// one rank as on several.
class Link {
 public:
  // Untimed requests (counters, debug reads, facts): the operation's
  // number and argument, answered by the chip's owner with bytes.
  using Untimed = std::function<std::string(unsigned chip, std::uint8_t op, const std::string& arg)>;
  struct Answer {
    std::string error;  // a failed request: why (a UsageError on the host)
    std::string data;   // what a read or an untimed request returns
  };

  Link(Session& s, Untimed untimed);
  void hold(unsigned chip, HostAgent& agent);  // a chip this rank holds
  bool local(unsigned chip) const { return s_.owner(chip) == s_.rank(); }
  Session& session() { return s_; }

  // The host (rank 0). A timed request (host port accesses in order) is
  // started on its chip at the next round, at that simulated time; an
  // untimed one is answered at once (this rank's chip) or a round later.
  std::uint64_t post(unsigned chip, const std::vector<Step>& steps);
  std::string ask(unsigned chip, std::uint8_t op, const std::string& arg);
  bool answered(std::uint64_t id) const { return answers_.count(id) != 0; }
  Answer take(std::uint64_t id);
  const AgentState& state(unsigned chip) const { return mirrors_.at(chip); }

  // Every rank: one round. `go` (rank 0): run a window after the exchange
  // unless news came; `finish` (rank 0): the other ranks stop serving.
  // Returns false once rank 0 has finished.
  bool round(bool go, bool finish);
  // The other ranks: rounds until rank 0 finishes.
  void serve();

 private:
  // A request's head (its id, chip and operation) for the chip's rank; its body follows.
  std::uint64_t request(unsigned chip, std::uint8_t op);
  void execute(unsigned chip, std::uint64_t id, std::vector<std::uint8_t> request);
  Session& s_;
  Untimed untimed_;
  std::vector<HostAgent*> agents_;   // by chip: this rank's
  std::vector<AgentState> mirrors_;  // by chip: as the host last heard (rank 0)
  std::vector<std::size_t> sent_;    // by chip: completions sent to rank 0
  std::vector<bool> sent_ready_;
  bool news_ = false;                // something for the host happened in the last window
  std::vector<std::vector<std::uint8_t>> requests_;  // rank 0: for each rank, since the last round
  std::vector<std::uint32_t> request_counts_;
  std::vector<std::uint8_t> answers_out_;  // this rank's answers for rank 0
  std::uint32_t answers_out_count_ = 0;
  std::map<std::uint64_t, Answer> answers_;  // rank 0: by request
  std::uint64_t next_id_ = 1;
};

}  // namespace tessera::rt::detail
