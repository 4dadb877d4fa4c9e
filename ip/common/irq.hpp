// Interrupt wires. An IrqOut drives any number of IrqIn; an IrqIn has one
// driver. Level changes are delivered by a direct call, in the driver's
// process, with no delta cycle: a core sees its interrupt pending on the
// very next instruction, and nothing costs host time while levels stay put.
#pragma once

#include <functional>
#include <vector>

namespace tessera {

class IrqIn {
 public:
  using Handler = std::function<void(bool level)>;
  IrqIn() = default;
  explicit IrqIn(Handler h) : handler_(std::move(h)) {}
  IrqIn(const IrqIn&) = delete;
  IrqIn& operator=(const IrqIn&) = delete;
  IrqIn(IrqIn&&) = default;

  void set_handler(Handler h) { handler_ = std::move(h); }
  void set(bool level) {
    if (level == level_) return;
    level_ = level;
    if (handler_) handler_(level);
  }
  bool level() const { return level_; }
  bool driven() const { return driven_; }

 private:
  friend class IrqOut;
  Handler handler_;
  bool level_ = false;
  bool driven_ = false;
};

class IrqOut {
 public:
  IrqOut() = default;
  IrqOut(const IrqOut&) = delete;
  IrqOut& operator=(const IrqOut&) = delete;
  IrqOut(IrqOut&&) = default;

  // The caller (the platform) checks that `in` has no driver yet.
  void bind(IrqIn& in) {
    in.driven_ = true;
    sinks_.push_back(&in);
    in.set(level_);
  }
  void write(bool level) {
    if (level == level_) return;
    level_ = level;
    if (observer_) observer_(level);
    for (IrqIn* in : sinks_) in->set(level);
  }
  // Told of every change (the waveforms).
  void observe(std::function<void(bool)> f) { observer_ = std::move(f); }
  bool read() const { return level_; }
  bool bound() const { return !sinks_.empty(); }
  bool observed() const { return static_cast<bool>(observer_); }

 private:
  std::vector<IrqIn*> sinks_;
  std::function<void(bool)> observer_;
  bool level_ = false;
};

}  // namespace tessera
