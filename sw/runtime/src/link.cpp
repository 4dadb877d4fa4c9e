#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "host.hpp"

namespace tessera::rt::detail {

namespace {

// Bytes on the wire between ranks (one machine's byte order: the ranks of a
// run are the same program on the same architecture).
struct Put {
  std::vector<std::uint8_t>& out;
  void raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  template <class T>
  void operator()(T v) {
    raw(&v, sizeof v);
  }
  void text(const std::string& t) {
    (*this)(static_cast<std::uint64_t>(t.size()));
    raw(t.data(), t.size());
  }
};

struct Get {
  const std::uint8_t* p;
  const std::uint8_t* end;
  void raw(void* to, std::size_t n) {
    if (static_cast<std::size_t>(end - p) < n) throw std::runtime_error("the host's link: a short message between ranks");
    std::memcpy(to, p, n);
    p += n;
  }
  template <class T>
  T get() {
    T v{};
    raw(&v, sizeof v);
    return v;
  }
  std::string text() {
    const auto n = get<std::uint64_t>();
    if (static_cast<std::uint64_t>(end - p) < n) throw std::runtime_error("the host's link: a short message between ranks");
    std::string t(reinterpret_cast<const char*>(p), n);
    p += n;
    return t;
  }
};

enum Head : std::uint8_t { kNews = 1, kGo = 2, kFinish = 4, kHalted = 8 };
constexpr std::uint8_t kTimed = 0xff;  // a request's operation: host port accesses (else an untimed one)

}  // namespace

Link::Link(Session& s, Untimed untimed)
    : s_(s),
      untimed_(std::move(untimed)),
      agents_(s.chips(), nullptr),
      mirrors_(s.chips()),
      sent_(s.chips(), 0),
      sent_ready_(s.chips(), false),
      requests_(s.ranks()),
      request_counts_(s.ranks(), 0) {}

void Link::hold(unsigned chip, HostAgent& agent) {
  agents_.at(chip) = &agent;
  agent.on_news = [this] { news_ = true; };
}

std::uint64_t Link::request(unsigned chip, std::uint8_t op) {
  const std::uint64_t id = next_id_++;
  const unsigned r = s_.owner(chip);
  Put put{requests_[r]};
  put(id);
  put(static_cast<std::uint32_t>(chip));
  put(op);
  ++request_counts_[r];
  return id;
}

std::uint64_t Link::post(unsigned chip, const std::vector<Step>& steps) {
  const std::uint64_t id = request(chip, kTimed);
  Put put{requests_[s_.owner(chip)]};
  put(static_cast<std::uint32_t>(steps.size()));
  for (const Step& st : steps) {
    put(static_cast<std::uint8_t>(st.kind));
    put(st.addr);
    put(st.len);
    if (st.kind == Step::write) put.raw(st.data, st.len);
    if (st.kind == Step::mailbox) put.raw(st.data, 4);
  }
  return id;
}

std::string Link::ask(unsigned chip, std::uint8_t op, const std::string& arg) {
  if (local(chip)) return untimed_(chip, op, arg);
  const std::uint64_t id = request(chip, op);
  Put{requests_[s_.owner(chip)]}.text(arg);
  // No time passes: rounds without windows until the owner has answered.
  while (!answered(id)) round(false, false);
  Answer a = take(id);
  if (!a.error.empty()) throw UsageError(a.error);
  return a.data;
}

Link::Answer Link::take(std::uint64_t id) {
  auto it = answers_.find(id);
  Answer a = std::move(it->second);
  answers_.erase(it);
  return a;
}

// A request from rank 0 for a chip of this rank: untimed ones answered now,
// timed ones started (they run in the next window) and answered when done.
void Link::execute(unsigned chip, std::uint64_t id, std::vector<std::uint8_t> request) {
  auto answer = [this, id](const std::string& error, const std::string& data) {
    Put put{answers_out_};
    put(id);
    put.text(error);
    put.text(data);
    ++answers_out_count_;
  };
  Get get{request.data(), request.data() + request.size()};
  const auto op = get.get<std::uint8_t>();
  if (op != kTimed) {
    const std::string arg = get.text();
    try {
      answer("", untimed_(chip, op, arg));
    } catch (const std::exception& e) {
      answer(e.what(), "");
    }
    return;
  }
  HostAgent* agent = agents_.at(chip);
  if (!agent) throw std::runtime_error(fmt::format("the host's link: a request for chip {}, held elsewhere", chip));
  struct Job {
    std::vector<Step> steps;
    std::vector<std::vector<std::uint8_t>> bytes;  // each step's
  };
  auto job = std::make_shared<Job>();
  const auto n = get.get<std::uint32_t>();
  for (std::uint32_t i = 0; i < n; ++i) {
    Step st;
    st.kind = static_cast<Step::Kind>(get.get<std::uint8_t>());
    st.addr = get.get<std::uint64_t>();
    st.len = get.get<std::uint64_t>();
    std::vector<std::uint8_t> b(st.kind == Step::mailbox ? 4 : st.len);
    if (st.kind != Step::read) get.raw(b.data(), b.size());
    job->steps.push_back(st);
    job->bytes.push_back(std::move(b));
  }
  // Named by the request: the same process names whichever rank starts it.
  sc_core::sc_spawn([this, agent, job, answer] {
    std::string error, data;
    try {
      for (std::size_t i = 0; i < job->steps.size(); ++i) {
        const Step& st = job->steps[i];
        std::vector<std::uint8_t>& b = job->bytes[i];
        if (st.kind == Step::mailbox) {
          std::uint32_t v = 0;
          std::memcpy(&v, b.data(), 4);
          agent->mailbox_write(static_cast<unsigned>(st.addr), v);
        } else {
          agent->access(st.kind == Step::write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND, st.addr, b.data(), st.len);
          if (st.kind == Step::read) data.append(reinterpret_cast<const char*>(b.data()), b.size());
        }
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    answer(error, data);
    news_ = true;
  }, fmt::format("host_request_chip{}_{}", chip, id).c_str());
}

bool Link::round(bool go, bool finish) {
  const unsigned ranks = s_.ranks(), me = s_.rank();
  std::vector<std::vector<std::uint8_t>> out(ranks);
  const std::uint8_t head = (news_ ? kNews : 0) | (me == 0 && go ? kGo : 0) | (me == 0 && finish ? kFinish : 0) |
                            (s_.halted().empty() ? 0 : kHalted);
  news_ = false;
  for (unsigned r = 0; r < ranks; ++r) {
    Put put{out[r]};
    put(head);
    // To rank 0: what this rank's chips did for the host, and its answers.
    std::vector<std::uint8_t> news;
    if (r == 0) {
      Put n{news};
      std::uint32_t chips = 0;
      for (unsigned k = 0; k < agents_.size(); ++k) {
        const HostAgent* a = agents_[k];
        if (a && (a->state.ready != sent_ready_[k] || a->state.order.size() > sent_[k])) ++chips;
      }
      n(chips);
      for (unsigned k = 0; k < agents_.size(); ++k) {
        const HostAgent* a = agents_[k];
        if (!a || (a->state.ready == sent_ready_[k] && a->state.order.size() == sent_[k])) continue;
        n(static_cast<std::uint32_t>(k));
        n(static_cast<std::uint8_t>(a->state.ready));
        n(a->state.version);
        n(static_cast<std::uint32_t>(a->state.order.size() - sent_[k]));
        n.raw(a->state.order.data() + sent_[k], (a->state.order.size() - sent_[k]) * sizeof(tp_completion));
        sent_ready_[k] = a->state.ready;
        sent_[k] = a->state.order.size();
      }
      n(answers_out_count_);
      n.raw(answers_out_.data(), answers_out_.size());
      answers_out_.clear();
      answers_out_count_ = 0;
    }
    put(static_cast<std::uint64_t>(news.size()));
    put.raw(news.data(), news.size());
    // From rank 0: the host's requests for rank r's chips.
    put(request_counts_[r]);
    put.raw(requests_[r].data(), requests_[r].size());
    requests_[r].clear();
    request_counts_[r] = 0;
  }
  std::vector<std::vector<std::uint8_t>> in;
  try {
    in = s_.exchange(out);
  } catch (const std::exception& e) {
    // A peer gone, a malformed exchange: this rank cannot go on alone, nor may the others wait for it.
    std::fprintf(stderr, "tessera runtime: error: rank %u: %s\n", me, e.what());
    s_.abort(3);
  }
  bool news = false, halted = false, rank0_go = false, rank0_finish = false;
  for (unsigned r = 0; r < in.size(); ++r) {
    Get get{in[r].data(), in[r].data() + in[r].size()};
    const auto h = get.get<std::uint8_t>();
    news = news || (h & kNews);
    halted = halted || (h & kHalted);
    if (r == 0) rank0_go = h & kGo, rank0_finish = h & kFinish;
    const auto news_bytes = get.get<std::uint64_t>();
    if (news_bytes) {
      if (me != 0) throw std::runtime_error("the host's link: news for a rank other than 0");
      Get n{get.p, get.p + news_bytes};
      const auto chips = n.get<std::uint32_t>();
      for (std::uint32_t i = 0; i < chips; ++i) {
        const auto k = n.get<std::uint32_t>();
        AgentState& m = mirrors_.at(k);
        m.ready = n.get<std::uint8_t>() != 0;
        m.version = n.get<std::uint32_t>();
        const auto count = n.get<std::uint32_t>();
        for (std::uint32_t c = 0; c < count; ++c) m.add(n.get<tp_completion>());
      }
      const auto answers = n.get<std::uint32_t>();
      for (std::uint32_t i = 0; i < answers; ++i) {
        const auto id = n.get<std::uint64_t>();
        Answer a;
        a.error = n.text();
        a.data = n.text();
        answers_[id] = std::move(a);
      }
      get.p += news_bytes;
    }
    const auto requests = get.get<std::uint32_t>();
    if (requests && r != 0) throw std::runtime_error("the host's link: requests from a rank other than 0");
    for (std::uint32_t i = 0; i < requests; ++i) {
      const auto id = get.get<std::uint64_t>();
      const auto chip = get.get<std::uint32_t>();
      // The request's own bytes: its operation onwards, up to the next request.
      const std::uint8_t* from = get.p;
      const auto op = get.get<std::uint8_t>();
      if (op == kTimed) {
        const auto steps = get.get<std::uint32_t>();
        for (std::uint32_t k = 0; k < steps; ++k) {
          const auto kind = get.get<std::uint8_t>();
          get.get<std::uint64_t>();
          const auto len = get.get<std::uint64_t>();
          const std::uint64_t skip = kind == Step::write ? len : kind == Step::mailbox ? 4 : 0;
          if (static_cast<std::uint64_t>(get.end - get.p) < skip)
            throw std::runtime_error("the host's link: a short message between ranks");
          get.p += skip;
        }
      } else {
        get.text();
      }
      execute(chip, id, std::vector<std::uint8_t>(from, get.p));
    }
  }
  if (rank0_finish) return false;
  if (rank0_go && !news && !halted && s_.halted().empty()) s_.advance();
  return true;
}

void Link::serve() {
  while (round(false, false)) {
  }
}

}  // namespace tessera::rt::detail
