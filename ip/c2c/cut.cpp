#include "c2c/cut.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <systemc>

#include "c2c/c2c.hpp"

namespace tessera::c2c {
namespace {

template <class T>
void put(std::vector<std::uint8_t>& out, T v) {
  const std::size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(&out[at], &v, sizeof v);
}

template <class T>
bool get(const std::uint8_t*& p, const std::uint8_t* end, T& v) {
  if (static_cast<std::size_t>(end - p) < sizeof v) return false;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return true;
}

}  // namespace

void Message::append_to(std::vector<std::uint8_t>& out) const {
  for (std::uint8_t b : {kind, write, lost, status}) put(out, b);
  for (std::uint32_t w : {from_chip, to_chip, to_port, dest, len}) put(out, w);
  for (std::uint64_t w : {tag, seq, at, local, flits, crc_errors}) put(out, w);
  put(out, static_cast<std::uint64_t>(data.size()));
  out.insert(out.end(), data.begin(), data.end());
}

bool Message::parse(const std::uint8_t*& p, const std::uint8_t* end, Message& m) {
  std::uint64_t size = 0;
  if (!(get(p, end, m.kind) && get(p, end, m.write) && get(p, end, m.lost) && get(p, end, m.status) &&
        get(p, end, m.from_chip) && get(p, end, m.to_chip) && get(p, end, m.to_port) && get(p, end, m.dest) &&
        get(p, end, m.len) && get(p, end, m.tag) && get(p, end, m.seq) && get(p, end, m.at) && get(p, end, m.local) &&
        get(p, end, m.flits) && get(p, end, m.crc_errors) && get(p, end, size)))
    return false;
  if (static_cast<std::uint64_t>(end - p) < size) return false;
  m.data.assign(p, p + size);
  p += size;
  return true;
}

void Cut::post(Message&& m) {
  if (local(m.to_chip)) fabrics_[m.to_chip]->receive(std::move(m));
  else outbox_.push_back(std::move(m));
}

std::vector<std::vector<Message>> Cut::take_outbox() {
  std::vector<std::vector<Message>> by_rank;
  for (Message& m : outbox_) {
    const unsigned r = owner_.at(m.to_chip);
    if (by_rank.size() <= r) by_rank.resize(r + 1);
    by_rank[r].push_back(std::move(m));
  }
  outbox_.clear();
  return by_rank;
}

void Cut::deliver(std::vector<Message>& in) {
  std::sort(in.begin(), in.end());
  const std::uint64_t now = sc_core::sc_time_stamp().value();
  for (Message& m : in) {
    if (!local(m.to_chip) || !fabrics_[m.to_chip])
      throw std::runtime_error(fmt::format("a link message for chip {} reached rank {}, which does not hold it", m.to_chip, rank_));
    if (m.at < now)
      throw std::runtime_error(fmt::format("a link message from chip {} to chip {} arrives at {} ps, before this rank's "
                                           "present ({} ps): the window exceeds the lookahead",
                                           m.from_chip, m.to_chip, m.at, now));
    fabrics_[m.to_chip]->receive(std::move(m));
  }
}

}  // namespace tessera::c2c
