#include <algorithm>

#include "common/payload.hpp"
#include "riscv/hart.hpp"

namespace tessera::riscv {

std::size_t g_reservations = 0;

namespace {

// Reservations of all harts, for LR/SC across harts sharing memory.
std::vector<HartBase*>& harts_with_reservation() {
  static std::vector<HartBase*> v;
  return v;
}

}  // namespace

const char* cause_name(unsigned cause, bool interrupt) {
  if (interrupt) {
    switch (cause) {
      case kIrqMsoft: return "machine software interrupt";
      case kIrqMtimer: return "machine timer interrupt";
      case kIrqMext: return "machine external interrupt";
      case kIrqSsoft: return "supervisor software interrupt";
      case kIrqStimer: return "supervisor timer interrupt";
      case kIrqSext: return "supervisor external interrupt";
      default: return "interrupt";
    }
  }
  static const char* const names[] = {"instruction address misaligned",
                                      "instruction access fault",
                                      "illegal instruction",
                                      "breakpoint",
                                      "load address misaligned",
                                      "load access fault",
                                      "store/AMO address misaligned",
                                      "store/AMO access fault",
                                      "ecall from U-mode",
                                      "ecall from S-mode",
                                      "reserved",
                                      "ecall from M-mode",
                                      "instruction page fault",
                                      "load page fault",
                                      "reserved",
                                      "store/AMO page fault"};
  return cause < 16 ? names[cause] : "reserved";
}

void HartBase::invalidate_dmi(std::uint64_t start, std::uint64_t end) {
  auto overlaps = [&](const DmiRegion& r) { return r.limit && r.base <= end && start <= r.base + r.limit - 1; };
  drop_fetch();  // (it may be a virtual page's window)
  regions_.erase(std::remove_if(regions_.begin(), regions_.end(), overlaps), regions_.end());
  last_read_ = last_write_ = &none_;
  // A target that invalidates may grant again: forget denials too.
  denied_.clear();
}

void HartBase::drop_fetch() {
  fetch_ = DmiRegion{};
  for (FetchContext& c : contexts_) c = FetchContext{};
  fetch_gen_ = new_fetch_gen();
  contexts_[0] = {fetch_key_, fetch_gen_};
  next_context_ = 1;
}

void HartBase::enter_fetch_context(const FetchKey& key) {
  if (key == fetch_key_) return;
  fetch_key_ = key;
  for (const FetchContext& c : contexts_)
    if (c.gen && c.key == key) {
      fetch_gen_ = c.gen;
      return;
    }
  fetch_gen_ = new_fetch_gen();
  contexts_[next_context_] = {key, fetch_gen_};
  next_context_ = (next_context_ + 1) % kFetchContexts;
}

std::uint32_t HartBase::new_fetch_gen() {
  if (++last_gen_ == 0) {
    restart_fetch_gen();
    for (FetchContext& c : contexts_) c = FetchContext{};
    last_gen_ = 1;
  }
  return last_gen_;
}

DmiRegion* HartBase::find_dmi(std::uint64_t addr, unsigned len, bool write) {
  for (auto& r : regions_)
    if (addr - r.base < r.limit && r.limit - (addr - r.base) >= len && (write ? r.write : r.read)) return &r;
  if (!env_.dmi) return nullptr;
  for (const auto& [lo, hi] : denied_)
    if (addr >= lo && addr <= hi) return nullptr;
  unsigned char dummy = 0;
  tlm::tlm_generic_payload t;
  set_access(t, write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND, addr, &dummy, 1);
  tlm::tlm_dmi dmi;
  if (!env_.bus->get_direct_mem_ptr(t, dmi) || !(write ? dmi.is_write_allowed() : dmi.is_read_allowed())) {
    if (denied_.size() > 32) denied_.clear();
    denied_.emplace_back(dmi.get_start_address(), dmi.get_end_address());
    return nullptr;
  }
  DmiRegion r;
  r.base = dmi.get_start_address();
  r.limit = dmi.get_end_address() - dmi.get_start_address() + 1;
  r.ptr = dmi.get_dmi_ptr();
  r.read = dmi.is_read_allowed();
  r.write = dmi.is_write_allowed();
  r.read_cycles = (dmi.get_read_latency().value() + env_.period_ticks - 1) / env_.period_ticks;
  r.write_cycles = (dmi.get_write_latency().value() + env_.period_ticks - 1) / env_.period_ticks;
  if (regions_.size() >= 8) {  // keep pointers into regions_ stable: never grow past the reserve
    regions_.erase(regions_.begin());
    last_read_ = last_write_ = &none_;
  }
  regions_.push_back(r);
  DmiRegion* found = &regions_.back();
  return addr - found->base < found->limit && found->limit - (addr - found->base) >= len ? found : nullptr;
}

bool HartBase::fetch_window(std::uint64_t pc) {
  DmiRegion* r = find_dmi(pc, 2, false);
  if (!r) return false;
  fetch_ = *r;
  return true;
}

namespace {
// A b_transport from the hart's local time. The target may annotate more
// delay or wait() (simulation time moves on); either way the hart's clock
// moves to the end of the access, and the part still ahead of simulation
// time stays unsynchronised.
bool transport(tlm::tlm_fw_transport_if<>* bus, tlm::tlm_generic_payload& t, std::uint64_t& cycle,
               std::uint64_t& synced, std::uint64_t period) {
  const std::uint64_t start = sc_core::sc_time_stamp().value() + (cycle - synced) * period;
  sc_core::sc_time delay = sc_core::sc_time::from_value((cycle - synced) * period);
  bus->b_transport(t, delay);
  const std::uint64_t end = sc_core::sc_time_stamp().value() + delay.value();
  cycle += (end - start + period - 1) / period;
  synced = cycle - (delay.value() + period - 1) / period;
  return t.get_response_status() == tlm::TLM_OK_RESPONSE;
}
}  // namespace

bool HartBase::bus_read(std::uint64_t addr, void* data, unsigned len) {
  ++bus_accesses;
  set_access(trans_, tlm::TLM_READ_COMMAND, addr, data, len);
  const bool ok = transport(env_.bus, trans_, cycle_, synced_, env_.period_ticks);
  status_ = trans_.get_response_status();
  return ok;
}

bool HartBase::bus_write(std::uint64_t addr, const void* data, unsigned len) {
  ++bus_accesses;
  set_access(trans_, tlm::TLM_WRITE_COMMAND, addr, const_cast<void*>(data), len);
  const bool ok = transport(env_.bus, trans_, cycle_, synced_, env_.period_ticks);
  status_ = trans_.get_response_status();
  if (ok && g_reservations) store_seen(addr, len);
  return ok;
}

unsigned HartBase::debug_access(std::uint64_t addr, std::uint8_t* data, unsigned len, bool write) {
  if (!env_.bus) return 0;
  unsigned done = 0;
  while (done < len) {  // page by page: each page translates on its own
    const std::uint64_t va = addr + done;
    const unsigned chunk = static_cast<unsigned>(std::min<std::uint64_t>(len - done, 0x1000 - (va & 0xfff)));
    std::uint64_t pa;
    if (!debug_translate(va, pa)) break;
    tlm::tlm_generic_payload t;
    set_access(t, write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND, pa, data + done, chunk);
    const unsigned n = env_.bus->transport_dbg(t);
    done += n;
    if (n < chunk) break;
  }
  return done;
}

void HartBase::store_seen(std::uint64_t addr, unsigned len) {
  auto& all = harts_with_reservation();
  const std::uint64_t first = addr & ~7ull, last = (addr + len - 1) & ~7ull;
  for (HartBase* h : all)
    if (h != this && (h->reservation_ == first || h->reservation_ == last)) h->reservation_ = ~0ull;
}

void register_reservation(HartBase* h, bool hold) {
  auto& all = harts_with_reservation();
  auto it = std::find(all.begin(), all.end(), h);
  if (hold && it == all.end()) all.push_back(h);
  if (!hold && it != all.end()) all.erase(it);
  g_reservations = all.size();
}

}  // namespace tessera::riscv
