#include "compiled.hpp"

#include <fmt/format.h>

#include <cmath>

#include "common/paths.hpp"
#include "tessera_program.h"

namespace tessera::model {

using compiler::DType;
using compiler::Graph;
using compiler::OpKind;

void check_compilable(const Config& c, unsigned chips) {
  if (c.fp8 && (c.d_model % compiler::kScaleBlock || c.hidden % compiler::kScaleBlock))
    throw rt::UsageError(fmt::format("model: the compiled model in FP8 needs d_model ({}) and hidden ({}) in whole {}-column blocks",
                                     c.d_model, c.hidden, compiler::kScaleBlock));
  if (chips <= 1) return;
  auto refuse = [&](const std::string& why) {
    throw rt::UsageError(fmt::format("model: tensor parallel over {} chips with all-reduce: {}", chips, why));
  };
  if (c.fp8) refuse("FP8 weights are not sharded (BF16 only)");
  if (c.heads % chips) refuse(fmt::format("{} heads do not divide over the chips", c.heads));
  if (c.hidden % chips) refuse(fmt::format("the experts' hidden size of {} does not divide over the chips", c.hidden));
  if (c.vocab % chips) refuse(fmt::format("a vocabulary of {} does not divide over the chips", c.vocab));
}

namespace {

// A BF16 matrix's columns [c0, c1), or its rows [r0, r1) (values only).
Matrix columns(const Matrix& m, unsigned c0, unsigned c1) {
  Matrix r;
  r.rows = m.rows, r.cols = c1 - c0;
  for (unsigned i = 0; i < m.rows; ++i)
    r.values.insert(r.values.end(), m.values.begin() + std::ptrdiff_t(std::size_t{i} * m.cols + c0),
                    m.values.begin() + std::ptrdiff_t(std::size_t{i} * m.cols + c1));
  return r;
}
Matrix rows_of(const Matrix& m, unsigned r0, unsigned r1) {
  Matrix r;
  r.rows = r1 - r0, r.cols = m.cols;
  r.values.assign(m.values.begin() + std::ptrdiff_t(std::size_t{r0} * m.cols), m.values.begin() + std::ptrdiff_t(std::size_t{r1} * m.cols));
  return r;
}

}  // namespace

void check_expert_parallel(const Config& c, unsigned chips) {
  auto refuse = [&](const std::string& why) {
    throw rt::UsageError(fmt::format("model: expert parallel over {} chips: {}", chips, why));
  };
  if (chips < 2) refuse("a system of at least two chips");
  if (c.fp8) refuse("FP8 experts are not dispatched (BF16 only)");
  if (c.experts % chips) refuse(fmt::format("{} experts do not divide over the chips", c.experts));
  if (TKP_MOE_MAX_T / chips == 0) refuse(fmt::format("the experts' kernel takes {} rows, not a slot a chip", TKP_MOE_MAX_T));
}

namespace {

// The experts of a layer on this chip, over the rows every chip sent it,
// and their sums brought back (Graph::dispatch): hb the rows (BF16), route
// their choices; this chip's experts e mod N = me.
int dispatched_experts(Graph& g, const Config& c, const Weights::Layer& L, const std::string& p, int hb, int route, unsigned me,
                       unsigned N, unsigned capacity) {
  const unsigned D = c.d_model, F = c.hidden;
  std::vector<float> w1, w3, w2;  // this chip's [E / N, D, F], [E / N, D, F], [E / N, F, D]
  for (unsigned e = me; e < c.experts; e += N) {
    w1.insert(w1.end(), L.w1[e].values.begin(), L.w1[e].values.end());
    w3.insert(w3.end(), L.w3[e].values.begin(), L.w3[e].values.end());
    w2.insert(w2.end(), L.w2[e].values.begin(), L.w2[e].values.end());
  }
  const unsigned E = c.experts / N;
  return g.moe_dispatched(hb, route,
                          {g.weight(p + "w1.weight", {E, D, F}, std::move(w1), DType::bf16), g.weight(p + "w3.weight", {E, D, F}, std::move(w3), DType::bf16),
                           g.weight(p + "w2.weight", {E, F, D}, std::move(w2), DType::bf16)},
                          {}, N, me, capacity, p + "experts");
}

}  // namespace

Graph model_graph(const Config& c, const Weights& w, unsigned rows, const compiler::Shard& shard) {
  if (!shard.chips || shard.chip >= shard.chips) throw rt::UsageError(fmt::format("model: shard {} of {} chips", shard.chip, shard.chips));
  // Expert parallel: every chip the whole model but the experts (no shard of it).
  const unsigned N = shard.experts ? 1 : shard.chips, me = shard.experts ? 0 : shard.chip;
  const unsigned EP = shard.experts ? shard.chips : 1;
  if (shard.experts) check_expert_parallel(c, EP);
  check_compilable(c, N);
  // A shard's heads [h0, h0 + H), hidden columns [f0, f0 + F) and vocabulary columns [v0, v0 + V).
  const unsigned T = rows, D = c.d_model, H = c.heads / N, dh = c.head_dim(), E = c.experts, F = c.hidden / N, V = c.vocab / N;
  const unsigned h0 = me * H, f0 = me * F, v0 = me * V;
  if (c.top_k != 2) throw rt::UsageError("model: the compiled model routes to 2 experts");
  Graph g;
  if (shard.experts && rows == 0) {
    // A chip with no rows in the step: it still runs its experts over the
    // slots the others send it, from one row of zeros of its own (which
    // takes a slot as any row does; its outputs are not read).
    const int hb = g.cast(g.input("idle", {1, c.d_model}), DType::bf16, "idle_in");
    for (unsigned l = 0; l < c.layers; ++l) {
      const Weights::Layer& L = w.layers[l];
      const std::string p = fmt::format("layer{}.", l);
      const int route = g.route(g.matmul(hb, g.weight(p + "router.weight", {L.router.rows, L.router.cols}, L.router.values, DType::bf16),
                                         DType::bf16, p + "router"),
                                2, true, p + "route");
      g.output(dispatched_experts(g, c, L, p, hb, route, shard.chip, EP, shard.capacity));
    }
    return g;
  }
  auto matrix = [&](const std::string& name, const Matrix& m) {
    return g.weight(name, {m.rows, m.cols}, m.values, DType::bf16);
  };
  // FP8: a matrix's E4M3 codes (what each code is worth) and its block
  // scales, as matmul_scaled() and moe_scaled() take them; the codes of
  // several (rows of each, one after another) with `columns` side by side.
  auto codes = [](const std::vector<const Matrix*>& ms, bool columns) {
    std::vector<float> v;
    const Matrix& m0 = *ms[0];
    if (!columns) {
      for (const Matrix* m : ms)
        for (std::uint8_t q : m->codes) v.push_back(static_cast<float>(num::decode(num::Format::E4M3, q)));
      return v;
    }
    for (unsigned r = 0; r < m0.rows; ++r)
      for (const Matrix* m : ms)
        for (unsigned k = 0; k < m->cols; ++k)
          v.push_back(static_cast<float>(num::decode(num::Format::E4M3, m->codes[std::size_t{r} * m->cols + k])));
    return v;
  };
  auto scales = [](const std::vector<const Matrix*>& ms, bool columns) {
    std::vector<float> v;
    const Matrix& m0 = *ms[0];
    if (!columns) {
      for (const Matrix* m : ms) v.insert(v.end(), m->scales.begin(), m->scales.end());
      return v;
    }
    for (unsigned r = 0; r < m0.rows / compiler::kScaleBlock; ++r)
      for (const Matrix* m : ms)
        v.insert(v.end(), m->scales.begin() + std::size_t{r} * m->block_cols(), m->scales.begin() + std::size_t{r + 1} * m->block_cols());
    return v;
  };
  // x times a K x N weight (or, FP8, the columns of several side by side) into FP32.
  auto project = [&](int x, const std::string& name, const std::vector<const Matrix*>& ms, const std::string& op) {
    unsigned cols = 0;
    for (const Matrix* m : ms) cols += m->cols;
    const unsigned K = ms[0]->rows;
    if (!c.fp8) {
      std::vector<float> v;
      v.reserve(std::size_t{K} * cols);
      for (unsigned r = 0; r < K; ++r)
        for (const Matrix* m : ms)
          v.insert(v.end(), m->values.begin() + std::size_t{r} * m->cols, m->values.begin() + std::size_t{r + 1} * m->cols);
      return g.matmul(x, g.weight(name, {K, cols}, std::move(v), DType::bf16), DType::bf16, op);
    }
    unsigned blocks = 0;
    for (const Matrix* m : ms) blocks += m->block_cols();
    const int b = g.weight(name, {K, cols}, codes(ms, true), DType::e4m3);
    return g.matmul_scaled(x, b, g.weight(name + ".scales", {K / compiler::kScaleBlock, blocks}, scales(ms, true)), op);
  };
  auto vector = [&](const std::string& name, const std::vector<float>& v) {
    return g.weight(name, {static_cast<unsigned>(v.size())}, v);
  };
  const int tokens = g.input("tokens", {T}), positions = g.input("positions", {T});
  // Several sequences: each row's, and their page tables into caches of a pool of pages.
  compiler::Paging paging;
  unsigned capacity = c.context;
  if (c.max_sequences > 1) {
    const KvPages pages(c);
    paging.sequences = g.input("sequences", {T});
    paging.table = g.input("pages", {c.max_sequences, pages.per_sequence()});
    paging.page = KvPages::kPage, capacity = pages.pool() * KvPages::kPage;
  }
  // The chips' partial sums added on every chip (the engines' ring, FP32).
  auto summed = [&](int partial, const std::string& name) { return N == 1 ? partial : g.all_reduce(partial, N, false, false, name); };
  int x = g.gather_rows(matrix("embedding.weight", w.embedding), tokens, "embed");
  for (unsigned l = 0; l < c.layers; ++l) {
    const Weights::Layer& L = w.layers[l];
    const std::string p = fmt::format("layer{}.", l);
    const int xn = g.rmsnorm(x, vector(p + "attn_norm.weight", L.attn_norm), 1e-6f, p + "attn_norm");
    // One projection to [Q | K | V]; the attention kernel rotates Q and K at their positions.
    // (A shard: its heads' columns of each.)
    const Matrix q = N == 1 ? Matrix{} : columns(L.wq, h0 * dh, (h0 + H) * dh), k = N == 1 ? Matrix{} : columns(L.wk, h0 * dh, (h0 + H) * dh),
                 v = N == 1 ? Matrix{} : columns(L.wv, h0 * dh, (h0 + H) * dh);
    const int qkv = project(xn, p + "wqkv.weight", N == 1 ? std::vector<const Matrix*>{&L.wq, &L.wk, &L.wv} : std::vector<const Matrix*>{&q, &k, &v},
                            p + "qkv");
    const int kc = g.kv_cache(p + "k_cache", H, capacity, dh), vc = g.kv_cache(p + "v_cache", H, capacity, dh);
    const int o = g.attention_qkv(qkv, kc, vc, positions, H, 1.0f / std::sqrt(static_cast<float>(dh)), true, p + "attention", paging);
    const Matrix wo = N == 1 ? Matrix{} : rows_of(L.wo, h0 * dh, (h0 + H) * dh);
    x = g.binary(OpKind::add, summed(project(o, p + "wo.weight", {N == 1 ? &L.wo : &wo}, p + "wo"), p + "wo_sum"), x, p + "wo_residual");
    const int hn = g.rmsnorm(x, vector(p + "ffn_norm.weight", L.ffn_norm), 1e-6f, p + "ffn_norm");
    // The normed rows in BF16 (the cast fuses into the norm's node): the
    // router's matmul rounds them so anyway, and the experts take them so.
    const int hb = g.cast(hn, DType::bf16, p + "experts_in");
    const int route = g.route(g.matmul(hb, matrix(p + "router.weight", L.router), DType::bf16, p + "router"), 2, true, p + "route");
    g.output(route);
    int y;
    if (shard.experts) {
      x = g.binary(OpKind::add, dispatched_experts(g, c, L, p, hb, route, shard.chip, EP, shard.capacity), x, p + "combine");
      continue;
    }
    auto stacked = [&](const std::vector<Matrix>& ms) {
      std::vector<const Matrix*> v;
      for (const Matrix& m : ms) v.push_back(&m);
      return v;
    };
    if (c.fp8) {  // [E, D, F], [E, D, F], [E, F, D] codes and their blocks' scales
      constexpr unsigned B = compiler::kScaleBlock;
      auto w = [&](const std::string& name, const std::vector<Matrix>& ms, unsigned k, unsigned n) {
        return std::pair{g.weight(name, {E, k, n}, codes(stacked(ms), false), DType::e4m3),
                         g.weight(name + ".scales", {E, k / B, n / B}, scales(stacked(ms), false))};
      };
      const auto [w1, s1] = w(p + "w1.weight", L.w1, D, F);
      const auto [w3, s3] = w(p + "w3.weight", L.w3, D, F);
      const auto [w2, s2] = w(p + "w2.weight", L.w2, F, D);
      y = g.moe_scaled(hb, route, w1, s1, w3, s3, w2, s2, p + "experts");
    } else {
      std::vector<float> w1, w3, w2;  // [E, D, F], [E, D, F], [E, F, D]
      for (unsigned e = 0; e < E; ++e) {  // (a shard: hidden columns [f0, f0 + F) of each)
        Matrix s1, s3, s2;
        if (N > 1) s1 = columns(L.w1[e], f0, f0 + F), s3 = columns(L.w3[e], f0, f0 + F), s2 = rows_of(L.w2[e], f0, f0 + F);
        const Matrix &a = N == 1 ? L.w1[e] : s1, &b = N == 1 ? L.w3[e] : s3, &d = N == 1 ? L.w2[e] : s2;
        w1.insert(w1.end(), a.values.begin(), a.values.end());
        w3.insert(w3.end(), b.values.begin(), b.values.end());
        w2.insert(w2.end(), d.values.begin(), d.values.end());
      }
      y = g.moe(hb, route, g.weight(p + "w1.weight", {E, D, F}, std::move(w1), DType::bf16),
                g.weight(p + "w3.weight", {E, D, F}, std::move(w3), DType::bf16), g.weight(p + "w2.weight", {E, F, D}, std::move(w2), DType::bf16),
                p + "experts");
    }
    x = g.binary(OpKind::add, summed(y, p + "experts_sum"), x, p + "combine");
  }
  const int xn = g.rmsnorm(x, vector("final_norm.weight", w.final_norm), 1e-6f, "final_norm");
  if (N == 1) {
    const int logits = project(xn, "lm_head.weight", {&w.lm_head}, "logits");
    g.output(logits);
    g.output(g.argmax(logits, "next"));
    return g;
  }
  // The shard's vocabulary columns, their argmax and maximum (the host
  // takes the first chip with the greatest: the argmax of the whole row).
  const Matrix head = columns(w.lm_head, v0, v0 + V);
  const int logits = project(xn, "lm_head.weight", {&head}, "logits.part");
  g.output(logits);
  g.output(g.argmax(logits, "next.part"));
  g.output(g.reduce(OpKind::reduce_max, logits, "max.part"));
  return g;
}

CompiledModel::CompiledModel(rt::Device& dev, const Config& c, const Weights& w) : CompiledModel(std::vector<rt::Device*>{&dev}, c, w) {}

CompiledModel::CompiledModel(const std::vector<rt::Device*>& chips, const Config& c, const Weights& w, Layout layout)
    : dev_(*chips.at(0)), c_(c), w_(w), pages_(c, TKP_MOE_MAX_T), layout_(layout) {
  check_compilable(c, layout == Layout::all_reduce ? static_cast<unsigned>(chips.size()) : 1);
  auto program = [](rt::Device& d) { return d.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << d.tiles()) - 1); };
  program_ = program(dev_);
  weights_ = std::make_shared<compiler::WeightStore>(dev_);
  if (layout == Layout::all_reduce) {  // every chip of the system its shard
    if (chips.size() < 2 || chips.size() != dev_.chips())
      throw rt::UsageError(fmt::format("model: the all-reduce layout runs on every chip of a system ({} of {} given)", chips.size(),
                                       dev_.chips()));
    symmetric_ = std::make_shared<compiler::SymmetricStore>(chips);
    for (std::size_t k = 0; k < chips.size(); ++k)
      shards_.push_back({chips[k], k ? program(*chips[k]) : program_, k ? std::make_shared<compiler::WeightStore>(*chips[k]) : weights_, {}, {}});
    return;
  }
  // As many chips as experts at most (as DeviceModel places them): past
  // that the slices only grow thinner.
  for (std::size_t k = 1; k < std::min<std::size_t>(chips.size(), std::max(1u, c.experts)); ++k)
    peers_.push_back({chips[k], program(*chips[k]), std::make_shared<compiler::WeightStore>(*chips[k])});
}

CompiledModel::CompiledModel(rt::Device& dev, const Config& c, const Weights& w, const compiler::Shard& experts,
                             std::shared_ptr<compiler::SymmetricStore> symmetric)
    : dev_(dev), c_(c), w_(w), pages_(c, TKP_MOE_MAX_T), experts_(experts), symmetric_(std::move(symmetric)) {
  check_expert_parallel(c, experts.chips);
  program_ = dev_.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev_.tiles()) - 1);
  weights_ = std::make_shared<compiler::WeightStore>(dev_);
  experts_.experts = true;
}

CompiledModel::~CompiledModel() = default;

compiler::Executable& CompiledModel::executable(unsigned rows) {
  if (layout_ == Layout::all_reduce) {  // every chip's shard of the step, compiled together
    if (const auto it = shards_[0].steps.find(rows); it != shards_[0].steps.end()) return *it->second;
    const unsigned n = static_cast<unsigned>(shards_.size());
    try {
      for (unsigned k = 0; k < n; ++k) {
        ShardChip& s = shards_[k];
        compiler::Options o;
        o.state = s.caches, o.weights = s.weights, o.symmetric = symmetric_;
        auto ex = std::make_unique<compiler::Executable>(*s.dev, s.program, model_graph(c_, w_, rows, {k, n}), o);
        if (s.caches.empty()) s.caches = ex->state();
        s.steps.emplace(rows, std::move(ex));
      }
    } catch (const std::invalid_argument& e) {
      for (ShardChip& s : shards_) s.steps.erase(rows);
      throw rt::UsageError(fmt::format("model: compiling a step of {} tokens: {}", rows, e.what()));
    }
    return *shards_[0].steps.at(rows);
  }
  // Expert parallel: a step for these rows and the capacity set.
  const unsigned key = experts_.experts ? rows | capacity_ << 16 : rows;
  auto it = steps_.find(key);
  if (it != steps_.end()) return *it->second;
  compiler::Options o;
  o.state = caches_;  // the first graph's caches, shared by the others
  o.weights = weights_;
  if (experts_.experts) {
    o.symmetric = symmetric_;
    compiler::Shard shard = experts_;
    shard.capacity = capacity_;
    try {
      auto ex = std::make_unique<compiler::Executable>(dev_, program_, model_graph(c_, w_, rows, shard), o);
      if (caches_.empty() && rows) caches_ = ex->state();
      return *steps_.emplace(key, std::move(ex)).first->second;
    } catch (const std::invalid_argument& e) {
      throw rt::UsageError(fmt::format("model: compiling a step of {} tokens ({} slots a chip): {}", rows, capacity_, e.what()));
    }
  }
  o.peers = peers_;
  // The matmuls that gain from it (the LM head, QKV) spread over the chips too.
  o.split_matmuls = compiler::Options::Split::where_faster;
  try {
    auto ex = std::make_unique<compiler::Executable>(dev_, program_, model_graph(c_, w_, rows), o);
    if (caches_.empty()) caches_ = ex->state();
    return *steps_.emplace(rows, std::move(ex)).first->second;
  } catch (const std::invalid_argument& e) {
    throw rt::UsageError(fmt::format("model: compiling a step of {} tokens: {}", rows, e.what()));
  }
}

std::vector<float> CompiledModel::step(const std::vector<Seq>& batch, std::vector<std::uint32_t>* next,
                                       std::vector<std::vector<std::uint32_t>>* routes) {
  start(batch);
  return finish(next, routes);
}

void CompiledModel::start(const std::vector<Seq>& batch) {
  if (started_) throw std::logic_error("CompiledModel::start: the last step was not finished");
  // The batch checked and its pages given (one sequence: the unpaged graphs
  // read the positions only).
  std::vector<std::uint32_t> tokens;
  auto st = std::make_unique<Started>();
  if (experts_.experts && batch.empty()) {  // no sequence here this step: the experts alone
    st->ex = &executable(0);
    st->t0 = dev_.simulated_seconds();
    st->ex->start({{"idle", std::vector<float>(c_.d_model, 0.0f)}});
    started_ = std::move(st);
    return;
  }
  st->parts = pages_.admit(batch, tokens);
  st->rows = static_cast<unsigned>(tokens.size());
  std::map<std::string, std::vector<float>> in;
  std::vector<float>& positions = in["positions"];
  for (const KvPages::Part& q : st->parts)
    for (unsigned r = 0; r < q.rows; ++r) positions.push_back(static_cast<float>(q.pos + r));
  if (c_.max_sequences > 1) {
    std::vector<float>&sequences = in["sequences"], &table = in["pages"];
    for (const KvPages::Part& q : st->parts) sequences.insert(sequences.end(), q.rows, static_cast<float>(q.seq));
    table.assign(std::size_t{c_.max_sequences} * pages_.per_sequence(), 0.0f);
    for (unsigned s = 0; s < c_.max_sequences; ++s)
      for (std::size_t i = 0; i < pages_.pages(s).size(); ++i) table[s * pages_.per_sequence() + i] = static_cast<float>(pages_.pages(s)[i]);
  }
  in["tokens"].assign(tokens.begin(), tokens.end());
  st->ex = &executable(st->rows);
  st->t0 = dev_.simulated_seconds();
  if (layout_ == Layout::all_reduce) {  // every chip's shard, run together (the step over when this returns)
    for (ShardChip& s : shards_) st->shards.push_back(s.steps.at(st->rows).get());
    st->outputs = compiler::run_together(st->shards, std::vector<std::map<std::string, std::vector<float>>>(shards_.size(), in));
  } else {
    st->ex->start(in);
  }
  started_ = std::move(st);
}

std::vector<float> CompiledModel::finish(std::vector<std::uint32_t>* next, std::vector<std::vector<std::uint32_t>>* routes) {
  wait();
  return collect(next, routes);
}

void CompiledModel::wait() {
  if (!started_) throw std::logic_error("CompiledModel::wait: no step was started");
  if (layout_ == Layout::all_reduce) return;  // (run together in start())
  try {
    started_->ex->wait();
    started_->ex->fetch();
  } catch (...) {  // the step is over
    started_.reset();
    throw;
  }
}

std::vector<float> CompiledModel::collect(std::vector<std::uint32_t>* next, std::vector<std::vector<std::uint32_t>>* routes) {
  if (!started_) throw std::logic_error("CompiledModel::collect: no step was waited for");
  const std::unique_ptr<Started> st = std::move(started_);
  compiler::Executable& ex = *st->ex;
  std::map<std::string, std::vector<float>> out;
  const roofline::Report* bound = &ex.last_bound();
  if (layout_ == Layout::all_reduce) {
    // The chips' columns of the logits side by side; a row's next token
    // the argmax of the first chip whose maximum is the greatest; chip 0's
    // routes (every chip's are the same); the bound the slowest chip's.
    out = st->outputs[0];
    out["logits"] = compiler::side_by_side(st->outputs, "logits.part", c_.vocab);
    std::vector<float>& next = out["next"];
    next = st->outputs[0].at("next.part");
    const std::vector<float>& best0 = st->outputs[0].at("max.part");
    for (std::size_t r = 0; r < next.size(); ++r) {
      float best = best0[r];
      for (std::size_t k = 1; k < st->outputs.size(); ++k)
        if (st->outputs[k].at("max.part")[r] > best)
          best = st->outputs[k].at("max.part")[r], next[r] = static_cast<float>(k * (c_.vocab / st->outputs.size())) + st->outputs[k].at("next.part")[r];
    }
    double slowest = -1;
    for (const compiler::Executable* x : st->shards)
      if (x->last_seconds() > slowest) slowest = x->last_seconds(), bound = &x->last_bound();
  } else {
    dev_.wait_io();
    out = ex.outputs();
  }
  if (st->rows == 0) {  // the experts alone: no rows to give
    if (next) next->clear();
    if (routes) routes->assign(c_.layers, {});
    return {};
  }
  const double took = dev_.simulated_seconds() - st->t0;
  // Each node's time to its phase (by the name of the op that anchors it).
  const std::vector<double> node = ex.node_seconds();
  double kernels = 0;
  for (std::size_t gi = 0; gi < node.size(); ++gi) {
    const std::string& n = ex.graph().ops()[static_cast<std::size_t>(ex.groups()[gi].ops[0])].name;
    const std::string phase = n.substr(n.find('.') + 1);
    double* bucket = &profile_.head;
    if (n == "embed") bucket = &profile_.embed;
    else if (n == "next") bucket = &profile_.argmax;
    else if (phase == "wo") bucket = &profile_.wo;
    else if (phase == "ffn_norm" || phase == "router" || phase == "route") bucket = &profile_.router;
    else if (phase == "experts") bucket = &profile_.experts;
    else if (phase == "combine" || phase == "experts_back") bucket = &profile_.combine;
    else if (phase == "wo_sum" || phase == "experts_sum" || phase.rfind("experts.", 0) == 0) bucket = &profile_.comm;  // (the dispatch's)
    else if (n.rfind("layer", 0) == 0) bucket = &profile_.attention;
    *bucket += node[gi];
    kernels += node[gi];
  }
  profile_.kernels += kernels;
  profile_.host_io += took - kernels;
  profile_.bounds["step"].add(*bound, took);
  const std::vector<float>& rows_next = out.at("next");
  if (next) {
    next->clear();
    for (const KvPages::Part& q : st->parts) next->push_back(static_cast<std::uint32_t>(rows_next[q.row0 + q.rows - 1]));
  }
  if (routes) {
    routes->assign(c_.layers, {});
    for (unsigned l = 0; l < c_.layers; ++l) {
      const std::vector<float>& r = out.at(fmt::format("layer{}.route", l));
      for (unsigned i = 0; i < 2 * st->rows; ++i) (*routes)[l].push_back(static_cast<std::uint32_t>(r[i]));
    }
  }
  return std::move(out.at("logits"));
}

DataParallel::DataParallel(const std::vector<rt::Device*>& chips, const Config& c, const Weights& w, bool experts)
    : c_(c), local_(c), experts_(experts), chips_(chips) {
  const unsigned n = static_cast<unsigned>(chips.size());
  if (n == 0) throw rt::UsageError("model: data parallel on no chips");
  local_.max_sequences = (c.max_sequences + n - 1) / n;
  if (experts) {  // every chip of the system, its experts only
    check_expert_parallel(c, n);
    if (n != chips[0]->chips())
      throw rt::UsageError(fmt::format("model: expert parallel runs on every chip of a system ({} of {} given)", n, chips[0]->chips()));
    symmetric_ = std::make_shared<compiler::SymmetricStore>(chips);
    for (unsigned k = 0; k < n; ++k)
      replicas_.push_back(std::make_unique<CompiledModel>(*chips[k], local_, w, compiler::Shard{k, n, true, 0}, symmetric_));
    return;
  }
  for (rt::Device* d : chips) replicas_.push_back(std::make_unique<CompiledModel>(*d, local_, w));
}

DataParallel::~DataParallel() = default;

std::vector<std::vector<Model::Seq>> DataParallel::split(const std::vector<Seq>& batch, std::vector<std::vector<std::size_t>>* index) const {
  const unsigned n = chips();
  std::vector<std::vector<Seq>> by(n);
  if (index) index->assign(n, {});
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].seq >= c_.max_sequences)
      throw rt::UsageError(fmt::format("model: sequence {} of a batch model of {} sequences", batch[i].seq, c_.max_sequences));
    Seq s = batch[i];
    s.seq = batch[i].seq / n;
    by[batch[i].seq % n].push_back(std::move(s));
    if (index) (*index)[batch[i].seq % n].push_back(i);
  }
  return by;
}

unsigned DataParallel::slots(const std::vector<std::vector<Seq>>& by, std::vector<unsigned>* rows) const {
  unsigned most = 1;
  if (rows) rows->assign(chips(), 0);
  for (unsigned k = 0; k < chips(); ++k) {
    unsigned n = 0;
    for (const Seq& s : by[k]) n += static_cast<unsigned>(s.tokens.size());
    if (rows) (*rows)[k] = n;
    most = std::max(most, n);
  }
  return most;
}

void DataParallel::prepare(const std::vector<Seq>& batch) {
  const std::vector<std::vector<Seq>> by = split(batch, nullptr);
  std::vector<unsigned> rows;
  const unsigned capacity = slots(by, &rows);
  for (unsigned k = 0; k < chips(); ++k) {
    if (experts_) replicas_[k]->set_capacity(capacity);
    if (rows[k] || experts_) replicas_[k]->executable(rows[k]);
  }
}

std::vector<float> DataParallel::step(const std::vector<Seq>& batch, std::vector<std::uint32_t>* next,
                                      std::vector<std::vector<std::uint32_t>>* routes) {
  std::vector<std::vector<std::size_t>> index;
  const std::vector<std::vector<Seq>> by = split(batch, &index);
  // Each chip's rows in the batch's order: where each sequence's rows begin.
  std::vector<unsigned> row0(batch.size());
  unsigned rows = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) row0[i] = rows, rows += static_cast<unsigned>(batch[i].tokens.size());
  if (batch.empty()) throw rt::UsageError("model: a step of no sequences");
  // The batch checked whole before any chip starts (a chip refusing its
  // share would leave those started before it having run theirs): each
  // sequence on its chip, named as the batch names it, then each chip's
  // share (a sequence twice, more tokens than a chip's step).
  for (const Seq& q : batch) {
    const unsigned k = q.seq % chips();
    try {
      replicas_[k]->check({{q.seq / chips(), q.tokens, q.pos}});
    } catch (const rt::UsageError& e) {
      throw rt::UsageError(fmt::format("{} (the batch's sequence {}: chip {}'s sequence {})", e.what(), q.seq, k, q.seq / chips()));
    }
  }
  for (unsigned k = 0; k < chips(); ++k) {
    try {
      if (!by[k].empty()) replicas_[k]->check(by[k]);
    } catch (const rt::UsageError& e) {
      throw rt::UsageError(fmt::format("{} (chip {}'s share of the batch: its sequence j is the batch's j * {} + {})", e.what(), k,
                                       chips(), k));
    }
  }
  // Expert parallel: every chip runs the step, with as many slots a chip
  // as the most rows a chip has (none dropped), within the experts' kernel's rows.
  const unsigned capacity = slots(by, nullptr);
  if (experts_) {
    if (capacity > max_step_tokens())
      throw rt::UsageError(fmt::format("model: a chip's share of {} tokens in an expert-parallel step over {} chips (at most {} a chip: "
                                       "the experts' kernel takes {} rows)",
                                       capacity, chips(), max_step_tokens(), TKP_MOE_MAX_T));
    for (unsigned k = 0; k < chips(); ++k) replicas_[k]->set_capacity(capacity);
  }
  // Every chip's step queued, then each waited for (a chip whose start
  // failed leaves the ones started before it to be finished first). Each
  // chip's inputs and launch go as one request, posted without waiting:
  // the host reaches every chip in the same window.
  std::vector<unsigned> started;
  try {
    for (unsigned k = 0; k < chips(); ++k)
      if (!by[k].empty() || experts_) {
        chips_[k]->hold_io();
        started.push_back(k);
        replicas_[k]->start(by[k]);
        chips_[k]->send_io();
      }
    for (unsigned k : started) chips_[k]->wait_io();
  } catch (...) {
    for (unsigned k : started) {
      try {
        chips_[k]->wait_io();  // what a failed start kept goes, as it would have gone at once
      } catch (...) {
      }
      try {
        replicas_[k]->finish(nullptr, nullptr);
      } catch (...) {
      }
    }
    throw;
  }
  std::vector<float> logits(std::size_t{rows} * c_.vocab);
  if (next) next->assign(batch.size(), 0);
  if (routes) routes->assign(c_.layers, std::vector<std::uint32_t>(2 * std::size_t{rows}));
  // Each chip waited for (its outputs' reads then posted), then each
  // chip's outputs collected: the chips' reads overlap. A failing chip's
  // error goes up once the other chips' steps are over.
  std::exception_ptr failed;
  std::vector<unsigned> waited;
  for (unsigned k : started) {
    try {
      replicas_[k]->wait();
      waited.push_back(k);
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  for (unsigned k : waited) {
    std::vector<std::uint32_t> own_next;
    std::vector<std::vector<std::uint32_t>> own_routes;
    std::vector<float> own;
    try {
      own = replicas_[k]->collect(&own_next, &own_routes);
    } catch (...) {
      if (!failed) failed = std::current_exception();
      continue;
    }
    std::size_t r = 0;  // the chip's rows, in its sequences' order
    for (std::size_t j = 0; j < by[k].size(); ++j) {
      const std::size_t i = index[k][j], n = batch[i].tokens.size();
      std::copy_n(own.begin() + static_cast<std::ptrdiff_t>(r * c_.vocab), n * c_.vocab,
                  logits.begin() + static_cast<std::ptrdiff_t>(std::size_t{row0[i]} * c_.vocab));
      if (next) (*next)[i] = own_next[j];
      if (routes)
        for (unsigned l = 0; l < c_.layers; ++l)
          std::copy_n(own_routes[l].begin() + static_cast<std::ptrdiff_t>(2 * r), 2 * n,
                      (*routes)[l].begin() + static_cast<std::ptrdiff_t>(2 * std::size_t{row0[i]}));
      r += n;
    }
  }
  if (failed) std::rethrow_exception(failed);
  return logits;
}

void DataParallel::release(unsigned seq) { replicas_[seq % chips()]->release(seq / chips()); }

const Profile& DataParallel::profile() const {
  const CompiledModel* busiest = replicas_[0].get();
  for (const auto& r : replicas_)
    if (r->profile().total() > busiest->profile().total()) busiest = r.get();
  return busiest->profile();
}

}  // namespace tessera::model
