// Processes that reach a point at the same instant pass it in the order of
// a key, not in the order SystemC happened to run them. SystemC leaves the
// order of processes woken at the same time open, and in practice it
// depends on every other process of the simulation; where what happens
// next depends on that order (a queue, a network, a memory written and
// read at once), a gate makes it the same whichever processes share the
// simulation: one process or a system spread over MPI ranks.
//
// pass(key, tie) from a thread: the callers of one instant and delta cycle
// wait one delta, then go on one after another in the order of key, then
// tie (equal both: in the order they came, which SystemC decides: give
// callers that may meet a tie that tells them apart), each running until
// it waits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <systemc>
#include <sysc/kernel/sc_dynamic_processes.h>  // sc_spawn
#include <vector>

#include "common/sim.hpp"

namespace tessera {

class InstantGate {
 public:
  InstantGate() = default;
  InstantGate(const InstantGate&) = delete;
  InstantGate& operator=(const InstantGate&) = delete;

  // Only in windowed runs (sim::windowed(): a system of chips): a chip
  // alone has no other order to agree with and goes on at once.
  void pass(std::uint64_t key, std::uint64_t tie = 0) {
    if (!sim::windowed()) return;
    if (!opener_) {  // the process that opens the gate, made on first use
      sc_core::sc_spawn_options o;
      o.spawn_method();
      o.set_sensitivity(&arrived_);
      o.dont_initialize();
      sc_core::sc_spawn([this] { open(); }, sc_core::sc_gen_unique_name("instant_gate"), &o);
      opener_ = true;
    }
    sc_core::sc_event go;
    batch_.push_back({key, tie, batch_.size(), &go});
    if (batch_.size() == 1) arrived_.notify(sc_core::SC_ZERO_TIME);
    sc_core::wait(go);
  }

 private:
  struct Waiter {
    std::uint64_t key, tie, seq;
    sc_core::sc_event* go;
  };
  void open() {
    std::vector<Waiter> now;
    now.swap(batch_);
    std::sort(now.begin(), now.end(),
              [](const Waiter& a, const Waiter& b) {
                return a.key != b.key ? a.key < b.key : a.tie != b.tie ? a.tie < b.tie : a.seq < b.seq;
              });
    for (const Waiter& w : now) w.go->notify();  // runnable in this order
  }
  bool opener_ = false;
  std::vector<Waiter> batch_;
  sc_core::sc_event arrived_;
};

}  // namespace tessera
