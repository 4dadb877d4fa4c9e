#include "scratchpad/scratchpad.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/log.hpp"
#include "common/storage.hpp"

namespace tessera::scratchpad {

const power::Event kSpmByte = power::declare_event("spm_byte", "tiles", 0.15, "a scratchpad byte read or written (engines' streams included)");

void BankGeometry::rows_per_bank(const std::uint64_t* addrs, unsigned count, unsigned bytes,
                                 std::vector<unsigned>& rows) const {
  // Distinct global rows, then one per bank each.
  std::vector<std::uint64_t> wanted;
  wanted.reserve(count * 2u);
  for (unsigned i = 0; i < count; ++i) {
    const std::uint64_t first = addrs[i] / row_bytes, last = (addrs[i] + std::max(1u, bytes) - 1) / row_bytes;
    for (std::uint64_t r = first; r <= last; ++r) wanted.push_back(r);
  }
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  rows.assign(banks, 0);
  for (const std::uint64_t r : wanted) ++rows[r % banks];
}

void BankGeometry::rows_per_bank(std::uint64_t addr, std::uint64_t len, std::vector<unsigned>& rows) const {
  rows.assign(banks, 0);
  if (len == 0) return;
  const std::uint64_t first = addr / row_bytes, last = (addr + len - 1) / row_bytes, n = last - first + 1;
  // Rows first .. last, dealt round the banks from first's bank: each bank
  // n / banks of them, and the n % banks banks from first's one more.
  const unsigned full = static_cast<unsigned>(n / banks), extra = static_cast<unsigned>(n % banks);
  const unsigned fb = static_cast<unsigned>(first % banks);
  for (unsigned b = 0; b < banks; ++b) {
    const unsigned offset = b >= fb ? b - fb : b + banks - fb;  // rows after `first` to reach bank b
    rows[b] = full + (offset < extra ? 1 : 0);
  }
}

std::uint64_t BankGeometry::cycles(const std::uint64_t* addrs, unsigned count, unsigned bytes) const {
  std::vector<unsigned> rows;
  rows_per_bank(addrs, count, bytes, rows);
  return *std::max_element(rows.begin(), rows.end());
}

std::uint64_t BankGeometry::cycles(std::uint64_t addr, std::uint64_t len) const {
  std::vector<unsigned> rows;
  rows_per_bank(addr, len, rows);
  return *std::max_element(rows.begin(), rows.end());
}

void Scratchpad::Config::visit(Params& p) {
  size = p.instance_size() ? p.instance_size() : size;
  p("banks", banks, "SRAM banks (a power of two)");
  p("row_bytes", row_bytes, "bytes a bank serves per cycle (a power of two)");
  p("clock", clock, "SRAM clock");
  p("latency", latency, "cycles from the last row read to the data");
}

void Scratchpad::Config::validate(const Params& p) const {
  if (size == 0) p.fail("size", "a scratchpad needs a size");
  if (size > (1ull << 32)) p.fail("size", "is larger than 4 GiB, which no tile holds");
  if (banks == 0 || (banks & (banks - 1)) || banks > 1024) p.fail("banks", "must be a power of two from 1 to 1024");
  if (row_bytes < 4 || (row_bytes & (row_bytes - 1)) || row_bytes > 4096)
    p.fail("row_bytes", "must be a power of two from 4 to 4096");
  if (size % (static_cast<std::uint64_t>(row_bytes) * banks))
    p.fail("size", "must be a whole number of rows across all banks (banks x row_bytes)");
  if (!(clock.value > 0)) p.fail("clock", "must be above zero");
}

Scratchpad::Scratchpad(const sc_core::sc_module_name& n, const Config& c)
    : Ip(n),
      mem_target("mem_target"),
      config_(c),
      geometry_{c.banks, c.row_bytes},
      period_(c.clock.period()),
      storage_(c.size),
      bank_free_(c.banks, 0) {
  mem_target.register_b_transport(this, &Scratchpad::b_transport);
  mem_target.register_transport_dbg(this, &Scratchpad::transport_dbg);
  expose_target("mem_target", mem_target, c.size);
}

void Scratchpad::engine_stream(const sc_core::sc_time& start, const sc_core::sc_time& end, std::uint64_t bytes) {
  meter_->charge(kSpmByte, static_cast<double>(bytes), start, end);
  const double p = static_cast<double>(period_.value());
  const auto from = static_cast<std::uint64_t>(std::llround(static_cast<double>(clk_->nominal(start)) / p)),
             to = static_cast<std::uint64_t>(std::llround(static_cast<double>(clk_->nominal(end)) / p));
  if (to <= from || !bytes) return;
  const double per_cycle = static_cast<double>(geometry_.banks) * geometry_.row_bytes;
  streams_.push_back({from, to, std::min(1.0, static_cast<double>(bytes) / (per_cycle * static_cast<double>(to - from)))});
}

Scratchpad::Timing Scratchpad::book(const sc_core::sc_time& start) {
  const std::uint64_t s = clk_->cycle(start, period_.value());
  // Engines streaming now take their share of every bank.
  double share = 0;
  std::size_t keep = 0;
  for (const Stream& st : streams_) {
    if (st.from <= s && s < st.to) share += st.share;
    if (st.to > s) streams_[keep++] = st;
  }
  streams_.resize(keep);
  const double stretch = 1.0 / (1.0 - std::min(share, 0.9));
  std::uint64_t done = s, ideal = 0;
  for (unsigned b = 0; b < geometry_.banks; ++b) {
    if (!rows_[b]) continue;
    const std::uint64_t from = std::max(s, bank_free_[b]);
    const std::uint64_t cost = share > 0 ? static_cast<std::uint64_t>(std::ceil(rows_[b] * stretch - 1e-9)) : rows_[b];
    shared_cycles_ += cost - rows_[b];
    bank_free_[b] = from + cost;
    done = std::max(done, bank_free_[b]);
    ideal = std::max<std::uint64_t>(ideal, rows_[b]);
  }
  Timing t;
  t.stalls = done - s - ideal;  // waiting for other accesses, or sharing with engines
  t.cycles = done - s + config_.latency;
  busy_cycles_ += ideal;
  stall_cycles_ += t.stalls;
  return t;
}

Scratchpad::Timing Scratchpad::access(const std::uint64_t* addrs, unsigned count, unsigned bytes, bool write,
                                      const sc_core::sc_time& start) {
  geometry_.rows_per_bank(addrs, count, bytes, rows_);
  // Rows beyond one per bank are the wave's own bank conflicts.
  const unsigned busiest = *std::max_element(rows_.begin(), rows_.end());
  if (busiest > 1) conflict_cycles_ += busiest - 1;
  ++waves_;
  (write ? bytes_written_ : bytes_read_) += static_cast<std::uint64_t>(count) * bytes;
  return book(start);
}

bool Scratchpad::copy(tlm::tlm_generic_payload& trans, bool debug) {
  return copy_payload(trans, debug, config_.size, 0, [this](std::uint64_t, bool) { return storage_.data(); });
}

void Scratchpad::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  if (trans.get_byte_enable_ptr() && trans.get_byte_enable_length() == 0) {
    trans.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
    return;
  }
  if (!trans.is_read() && !trans.is_write()) {
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  if (!copy(trans, false)) {
    ++errors_;
    log::guest_error(path(), "scratchpad/range", "access of {} bytes at offset {:#x} runs past the end ({:#x} bytes)",
                     trans.get_data_length(), trans.get_address(), config_.size);
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  const unsigned len = trans.get_data_length();
  const unsigned sw = std::max(1u, trans.get_streaming_width());
  // A streaming access rereads its window: the rows of the window, once per pass.
  geometry_.rows_per_bank(trans.get_address(), std::min(len, sw), rows_);
  if (sw < len)
    for (auto& r : rows_) r *= (len + sw - 1) / sw;
  if (trans.is_read()) ++reads_, bytes_read_ += len;
  else ++writes_, bytes_written_ += len;
  meter_->charge(kSpmByte, len, sc_core::sc_time_stamp() + delay);
  const Timing t = book(sc_core::sc_time_stamp() + delay);
  delay += clk_->span(period_ * static_cast<double>(t.cycles));
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
}

unsigned Scratchpad::transport_dbg(tlm::tlm_generic_payload& trans) {
  return debug_transport(trans, config_.size, [this](tlm::tlm_generic_payload& t) { copy(t, true); });
}

void Scratchpad::report_stats(nlohmann::ordered_json& out) const {
  out["reads"] = reads_;
  out["writes"] = writes_;
  out["bytes_read"] = bytes_read_;
  out["bytes_written"] = bytes_written_;
  out["engine_waves"] = waves_;
  out["engine_stream_bytes_read"] = engine_bytes_read_;
  out["engine_stream_bytes_written"] = engine_bytes_written_;
  out["busy_cycles"] = busy_cycles_;
  out["bank_conflict_cycles"] = conflict_cycles_;
  out["stall_cycles"] = stall_cycles_;
  out["engine_shared_cycles"] = shared_cycles_;
  out["errors"] = errors_;
}

}  // namespace tessera::scratchpad
