// Hardware counting semaphores, as a tile has them to order its DMA,
// tensor core and vector unit and its core. An engine command may name one
// semaphore to wait on before it starts (the engine's thread blocks until
// the count is above zero, then takes one) and one to signal when it has
// finished (count + 1). Numbering in commands: 0 means none, i + 1 means
// semaphore i. Counts saturate at 2^32 - 1; nothing a program does can
// overflow or underflow them.
#pragma once

#include <cstdint>
#include <functional>
#include <systemc>
#include <vector>

namespace tessera {

class Semaphores {
 public:
  explicit Semaphores(unsigned count) : count_(count, 0), events_(count) {}

  unsigned size() const { return static_cast<unsigned>(count_.size()); }
  std::uint32_t value(unsigned i) const { return count_.at(i); }
  void set(unsigned i, std::uint32_t v) {
    count_.at(i) = v;
    if (v) events_[i].notify(sc_core::SC_ZERO_TIME);
  }
  void signal(unsigned i, std::uint32_t n = 1) {
    std::uint32_t& c = count_.at(i);
    c = c > UINT32_MAX - n ? UINT32_MAX : c + n;
    ++signals_;
    events_[i].notify(sc_core::SC_ZERO_TIME);
    if (on_signal_) on_signal_(i);
  }
  // Takes one if the count is above zero.
  bool try_take(unsigned i) {
    std::uint32_t& c = count_.at(i);
    if (!c) return false;
    --c;
    return true;
  }
  // From an SC_THREAD: blocks until one can be taken and takes it, or
  // until `abort` fires (a queue reset): false then.
  bool take(unsigned i, const sc_core::sc_event& abort) {
    while (!try_take(i)) {
      sc_core::wait(events_.at(i) | abort);
      if (abort.triggered()) return false;
    }
    return true;
  }
  // For an engine's command: takes semaphore `number` (0: none, i + 1:
  // semaphore i), adding the cycles of `period` it waited to `waited`;
  // false if `abort` fired first (the command is dropped).
  bool acquire(unsigned number, const sc_core::sc_event& abort, const sc_core::sc_time& period, std::uint64_t& waited) {
    if (!number) return true;
    const sc_core::sc_time start = sc_core::sc_time_stamp();
    const bool taken = take(number - 1, abort);
    waited += static_cast<std::uint64_t>((sc_core::sc_time_stamp() - start) / period);
    return taken;
  }
  // For an engine's finished command: signals semaphores `a` and `b` (0: none).
  void signal_numbers(unsigned a, unsigned b) {
    if (a) signal(a - 1);
    if (b) signal(b - 1);
  }
  void reset() {
    for (auto& c : count_) c = 0;
  }
  // Called on every signal (the tile raises its SEM interrupt).
  void on_signal(std::function<void(unsigned)> f) { on_signal_ = std::move(f); }
  std::uint64_t signals() const { return signals_; }

  // A command's wait/signal number (0 none, i + 1 semaphore i) is valid
  // for `sems` (which may be null: then only 0 is).
  static bool valid(const Semaphores* sems, unsigned number) {
    return number == 0 || (sems && number <= sems->size());
  }

 private:
  std::vector<std::uint32_t> count_;
  std::vector<sc_core::sc_event> events_;
  std::function<void(unsigned)> on_signal_;
  std::uint64_t signals_ = 0;
};

}  // namespace tessera
