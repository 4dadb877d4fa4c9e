#include "model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>

#include "common/paths.hpp"
#include "engines/num/block_scale.hpp"
#include "engines/num/formats.hpp"
#include "engines/num/vector_ops.hpp"

namespace tessera::model {

using rt::Buffer;
using rt::Fmt;
using rt::Sem;
using rt::TileProgram;
using rt::VecOp;

namespace {

constexpr unsigned kMaxBlock = KvPages::kMaxTokens;  // tokens per step
constexpr unsigned kPage = KvPages::kPage;           // positions per page of the KV cache

// BF16 is the upper half of an FP32: its value is exact as a float.
float bf16_value(std::uint16_t code) {
  const std::uint32_t bits = static_cast<std::uint32_t>(code) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// A random matrix: normal values scaled by `scale`, stored as BF16, or as
// E4M3 with 128 x 128 block scales.
Matrix random_matrix(unsigned rows, unsigned cols, float scale, bool fp8, std::mt19937_64& rng) {
  std::normal_distribution<float> g(0.0f, scale);
  Matrix m;
  m.rows = rows, m.cols = cols, m.fp8 = fp8;
  const std::size_t n = std::size_t{rows} * cols;
  std::vector<float> x(n);
  for (auto& v : x) v = g(rng);
  m.values.resize(n);
  if (!fp8) {
    m.bf16.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      m.bf16[i] = static_cast<std::uint16_t>(num::encode(num::Format::BF16, x[i]));
      m.values[i] = bf16_value(m.bf16[i]);
    }
    return m;
  }
  num::Convert sat;
  sat.saturate = true;
  const num::BlockQuantized q = num::block_quantize(x.data(), rows, cols, num::Format::E4M3, num::ScaleFormat::FP32, 128, 128, sat);
  m.codes = q.codes;
  m.scales = q.scales;
  for (unsigned r = 0; r < rows; ++r)
    for (unsigned c = 0; c < cols; ++c) m.values[std::size_t{r} * cols + c] = static_cast<float>(q.value(r, c));
  return m;
}

std::vector<float> random_norm(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(0.8f, 1.2f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// A bump allocator over a tile's scratchpad, between the kernel image and
// the program.
struct Spm {
  std::uint32_t at = 0x10000;
  std::uint32_t operator()(std::uint64_t bytes) {
    const std::uint32_t here = at;
    const std::uint64_t next = (static_cast<std::uint64_t>(at) + bytes + 255) & ~std::uint64_t(255);
    if (next > TKP_PROGRAM_OFFSET)
      throw rt::UsageError(fmt::format("model: a phase needs more than the scratchpad's {} KiB for buffers",
                                       (TKP_PROGRAM_OFFSET - 0x10000) / 1024));
    at = static_cast<std::uint32_t>(next);
    return here;
  }
};

TileProgram::Vec vec(VecOp op, std::uint32_t rows, std::uint32_t cols, std::uint32_t src0, std::uint32_t src1,
                     std::uint32_t dst) {
  TileProgram::Vec v;
  v.op = op, v.rows = rows, v.cols = cols, v.src0 = src0, v.src1 = src1, v.dst = dst;
  return v;
}
TileProgram::Vec cast_bf16(std::uint32_t rows, std::uint32_t cols, std::uint32_t src, std::uint32_t dst) {
  TileProgram::Vec v = vec(VecOp::cast_to, rows, cols, src, 0, dst);
  v.format = Fmt::bf16;
  return v;
}
TileProgram::Gemm gemm(std::uint32_t m, std::uint32_t n, std::uint32_t k, std::uint32_t a, std::uint32_t b,
                       std::uint32_t c) {
  TileProgram::Gemm g;
  g.m = m, g.n = n, g.k = k, g.a = a, g.b = b, g.c = c;
  return g;
}

}  // namespace

std::string Config::check() const {
  if (!layers || !d_model || !heads || !experts || !hidden || !vocab || !context) return "every size must be above zero";
  if (d_model % heads) return fmt::format("d_model {} is not a multiple of heads {}", d_model, heads);
  if (head_dim() % 2) return "the head dimension must be even (RoPE rotates pairs)";
  if (top_k != 2) return "the device runner routes each token to exactly 2 experts";
  if (experts < 2) return "top-2 routing needs at least 2 experts";
  if (hidden % hidden_chunk) return fmt::format("hidden {} is not a multiple of hidden_chunk {}", hidden, hidden_chunk);
  return {};
}

std::uint64_t Weights::count() const {
  auto m = [](const Matrix& x) { return std::uint64_t{x.rows} * x.cols; };
  std::uint64_t n = m(embedding) + m(lm_head) + final_norm.size();
  for (const Layer& L : layers) {
    n += L.attn_norm.size() + L.ffn_norm.size() + m(L.wq) + m(L.wk) + m(L.wv) + m(L.wo) + m(L.router);
    for (const std::vector<Matrix>* e : {&L.w1, &L.w3, &L.w2})
      for (const Matrix& x : *e) n += m(x);
  }
  return n;
}

Weights Weights::random(const Config& c) {
  std::mt19937_64 rng(c.seed);
  const unsigned d = c.d_model;
  const float s = 1.0f / std::sqrt(static_cast<float>(d));
  const bool f8 = c.fp8;
  Weights w;
  w.embedding = random_matrix(c.vocab, d, 1.0f, false, rng);
  for (unsigned l = 0; l < c.layers; ++l) {
    Layer L;
    L.attn_norm = random_norm(d, rng);
    L.ffn_norm = random_norm(d, rng);
    L.wq = random_matrix(d, d, s, f8, rng);
    L.wk = random_matrix(d, d, s, f8, rng);
    L.wv = random_matrix(d, d, s, f8, rng);
    L.wo = random_matrix(d, d, s, f8, rng);
    L.router = random_matrix(d, c.experts, s, false, rng);
    for (unsigned e = 0; e < c.experts; ++e) {
      L.w1.push_back(random_matrix(d, c.hidden, s, f8, rng));
      L.w3.push_back(random_matrix(d, c.hidden, s, f8, rng));
      L.w2.push_back(random_matrix(c.hidden, d, 1.0f / std::sqrt(static_cast<float>(c.hidden)), f8, rng));
    }
    w.layers.push_back(std::move(L));
  }
  w.final_norm = random_norm(d, rng);
  w.lm_head = random_matrix(d, c.vocab, s, f8, rng);
  return w;
}

// ---- the host reference -------------------------------------------------

Reference::Reference(const Config& c, const Weights& w) : c_(c), w_(w) {
  const std::size_t per_layer = std::size_t{c.heads} * c.context * c.head_dim();
  kcache_.assign(c.layers, std::vector<float>(per_layer, 0.0f));
  vcache_.assign(c.layers, std::vector<float>(per_layer, 0.0f));
}

namespace {
// y (rows x n) = x (rows x k) . W (k x n values, row-major)
void matmul(const float* x, unsigned rows, unsigned k, const Matrix& m, float* y) {
  const unsigned n = m.cols;
  for (unsigned r = 0; r < rows; ++r) {
    float* out = y + std::size_t{r} * n;
    std::fill(out, out + n, 0.0f);
    for (unsigned p = 0; p < k; ++p) {
      const float a = x[std::size_t{r} * k + p];
      const float* wr = m.values.data() + std::size_t{p} * n;
      for (unsigned j = 0; j < n; ++j) out[j] += a * wr[j];
    }
  }
}
void rmsnorm(const float* x, const float* w, unsigned n, float* y) {
  double ss = 0;
  for (unsigned i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / n + 1e-6));
  for (unsigned i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
}
void rope(float* x, unsigned n, unsigned pos) {
  for (unsigned i = 0; i + 1 < n; i += 2) {
    const double ang = pos * std::pow(10000.0, -double(i) / n), c = std::cos(ang), s = std::sin(ang);
    const double a = x[i], b = x[i + 1];
    x[i] = static_cast<float>(a * c - b * s);
    x[i + 1] = static_cast<float>(a * s + b * c);
  }
}
}  // namespace

std::vector<float> Reference::step(const std::vector<std::uint32_t>& tokens, unsigned pos,
                                   const std::vector<std::vector<std::uint32_t>>& routes,
                                   unsigned* route_disagreements) {
  const unsigned T = static_cast<unsigned>(tokens.size()), D = c_.d_model, H = c_.heads, dh = c_.head_dim();
  std::vector<float> x(std::size_t{T} * D), h(x.size()), attn(x.size()), tmp(x.size());
  for (unsigned t = 0; t < T; ++t)
    for (unsigned j = 0; j < D; ++j) x[t * D + j] = w_.embedding.values[std::size_t{tokens[t]} * D + j];
  for (unsigned l = 0; l < c_.layers; ++l) {
    const Weights::Layer& L = w_.layers[l];
    for (unsigned t = 0; t < T; ++t) rmsnorm(&x[t * D], L.attn_norm.data(), D, &h[t * D]);
    std::vector<float> q(std::size_t{T} * D), k(q.size()), v(q.size());
    matmul(h.data(), T, D, L.wq, q.data());
    matmul(h.data(), T, D, L.wk, k.data());
    matmul(h.data(), T, D, L.wv, v.data());
    for (unsigned hd = 0; hd < H; ++hd) {
      float* kc = &kcache_[l][std::size_t{hd} * c_.context * dh];
      float* vc = &vcache_[l][std::size_t{hd} * c_.context * dh];
      for (unsigned t = 0; t < T; ++t) {
        rope(&q[t * D + hd * dh], dh, pos + t);
        rope(&k[t * D + hd * dh], dh, pos + t);
        std::copy_n(&k[t * D + hd * dh], dh, kc + std::size_t{pos + t} * dh);
        std::copy_n(&v[t * D + hd * dh], dh, vc + std::size_t{pos + t} * dh);
      }
      for (unsigned t = 0; t < T; ++t) {
        const unsigned seen = pos + t + 1;
        std::vector<double> s(seen);
        double mx = -1e300, sum = 0;
        for (unsigned j = 0; j < seen; ++j) {
          double dot = 0;
          for (unsigned i = 0; i < dh; ++i) dot += double(q[t * D + hd * dh + i]) * kc[std::size_t{j} * dh + i];
          s[j] = dot / std::sqrt(double(dh));
          mx = std::max(mx, s[j]);
        }
        for (double& e : s) e = std::exp(e - mx), sum += e;
        for (unsigned i = 0; i < dh; ++i) {
          double o = 0;
          for (unsigned j = 0; j < seen; ++j) o += s[j] / sum * vc[std::size_t{j} * dh + i];
          attn[t * D + hd * dh + i] = static_cast<float>(o);
        }
      }
    }
    matmul(attn.data(), T, D, L.wo, tmp.data());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += tmp[i];
    // MoE FFN.
    for (unsigned t = 0; t < T; ++t) rmsnorm(&x[t * D], L.ffn_norm.data(), D, &h[t * D]);
    std::vector<float> logits(std::size_t{T} * c_.experts);
    matmul(h.data(), T, D, L.router, logits.data());
    std::vector<float> out(x.size(), 0.0f);
    for (unsigned t = 0; t < T; ++t) {
      std::vector<unsigned> idx(c_.experts);
      for (unsigned e = 0; e < c_.experts; ++e) idx[e] = e;
      std::stable_sort(idx.begin(), idx.end(),
                       [&](unsigned a, unsigned b) { return logits[t * c_.experts + a] > logits[t * c_.experts + b]; });
      unsigned chosen[2] = {idx[0], idx[1]};
      if (!routes.empty()) {
        const auto& r = routes[l];
        if (!((r[2 * t] == chosen[0] && r[2 * t + 1] == chosen[1]))) {
          if (route_disagreements) ++*route_disagreements;
          chosen[0] = r[2 * t], chosen[1] = r[2 * t + 1];
        }
      }
      const double a = logits[t * c_.experts + chosen[0]], b = logits[t * c_.experts + chosen[1]];
      const double m = std::max(a, b), ea = std::exp(a - m), eb = std::exp(b - m);
      const double gate[2] = {ea / (ea + eb), eb / (ea + eb)};
      for (unsigned s = 0; s < 2; ++s) {
        const unsigned e = chosen[s], F = c_.hidden;
        std::vector<float> h1(F), h3(F), y(D);
        matmul(&h[t * D], 1, D, L.w1[e], h1.data());
        matmul(&h[t * D], 1, D, L.w3[e], h3.data());
        for (unsigned j = 0; j < F; ++j) h1[j] = static_cast<float>(h1[j] / (1 + std::exp(-double(h1[j]))) * h3[j]);
        matmul(h1.data(), 1, F, L.w2[e], y.data());
        for (unsigned j = 0; j < D; ++j) out[t * D + j] += static_cast<float>(gate[s] * y[j]);
      }
    }
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += out[i];
  }
  for (unsigned t = 0; t < T; ++t) rmsnorm(&x[t * D], w_.final_norm.data(), D, &h[t * D]);
  std::vector<float> logits(std::size_t{T} * c_.vocab);
  matmul(h.data(), T, D, w_.lm_head, logits.data());
  return logits;
}

// ---- the device ------------------------------------------------------------

namespace {
// Columns [c0, c0 + cols) of m as a matrix of their own (FP8: whole
// 128-column blocks, or a part of one block, so the block scales split with
// them).
Matrix columns(const Matrix& m, unsigned c0, unsigned cols) {
  Matrix p;
  p.rows = m.rows, p.cols = cols, p.fp8 = m.fp8;
  for (unsigned r = 0; r < m.rows; ++r) {
    const std::size_t at = std::size_t{r} * m.cols + c0;
    if (m.fp8) p.codes.insert(p.codes.end(), m.codes.begin() + at, m.codes.begin() + at + cols);
    else p.bf16.insert(p.bf16.end(), m.bf16.begin() + at, m.bf16.begin() + at + cols);
    p.values.insert(p.values.end(), m.values.begin() + at, m.values.begin() + at + cols);
  }
  if (m.fp8)
    for (unsigned br = 0; br < m.rows / 128; ++br)
      for (unsigned bc = c0 / 128; bc <= (c0 + cols - 1) / 128; ++bc) p.scales.push_back(m.scales[br * m.block_cols() + bc]);
  return p;
}
}  // namespace

DeviceModel::DevMatrix DeviceModel::upload(const Matrix& m, rt::Device& dev, int at) {
  // Matrices go round-robin over the HBM stacks, so the tiles' streams
  // spread over all of them (or to the stack `at` names).
  const unsigned stack = at >= 0 ? static_cast<unsigned>(at) % dev.hbm_stacks() : next_stack_++ % dev.hbm_stacks();
  DevMatrix d;
  d.rows = m.rows, d.cols = m.cols, d.fp8 = m.fp8;
  if (!m.fp8) {
    d.data = dev.alloc(m.bf16.size() * 2, stack);
    dev.write(d.data, m.bf16.data(), m.bf16.size() * 2);
  } else {
    d.data = dev.alloc(m.codes.size(), stack);
    dev.write(d.data, m.codes.data(), m.codes.size());
    d.scales = dev.alloc(m.scales.size() * 4, stack);
    dev.write(d.scales, m.scales.data(), m.scales.size() * 4);
  }
  return d;
}

DeviceModel::Slice DeviceModel::load_b(TileProgram& g, const DevMatrix& m, unsigned r0, unsigned rows, unsigned c0,
                                       unsigned cols, std::uint32_t data, std::uint32_t scales) {
  const unsigned eb = m.fp8 ? 1 : 2;
  g.load_rows(m.data.address + (std::uint64_t{r0} * m.cols + c0) * eb, m.cols * eb, data, rows, cols * eb);
  Slice s{data, 0};
  if (m.fp8) {
    // The slice's block scales: its K blocks x the block columns it touches.
    const unsigned bc0 = c0 / 128, bcs = (c0 + cols - 1) / 128 - bc0 + 1, bcols = (m.cols + 127) / 128;
    g.load_rows(m.scales.address + (std::uint64_t{r0 / 128} * bcols + bc0) * 4, bcols * 4, scales, rows / 128, bcs * 4);
    s.scales = scales;
  }
  return s;
}

void DeviceModel::matmul(TileProgram& g, unsigned m, unsigned n, unsigned k, std::uint32_t a, std::uint32_t sa,
                         const Slice& b, std::uint32_t c, bool accumulate) {
  TileProgram::Gemm gm = gemm(m, n, k, a, b.data, c);
  gm.accumulate = accumulate;
  if (c_.fp8) {
    gm.input = Fmt::e4m3, gm.block_scaled = true, gm.sa = sa, gm.sb = b.scales, gm.group = 128;
  }
  g.gemm(gm);
}

void DeviceModel::to_a(TileProgram& g, unsigned rows, unsigned cols, std::uint32_t src, std::uint32_t dst,
                       std::uint32_t sa) {
  TileProgram::Vec v = cast_bf16(rows, cols, src, dst);
  if (c_.fp8) v.format = Fmt::e4m3, v.group = 128, v.aux = sa;
  g.vec(v);
}

DeviceModel::DeviceModel(rt::Device& dev, const Config& c, const Weights& w)
    : DeviceModel(std::vector<rt::Device*>{&dev}, c, w) {}

DeviceModel::DeviceModel(const std::vector<rt::Device*>& chips, const Config& c, const Weights& w)
    : dev_(*chips.at(0)), chips_(chips),
      prefix_(chips.size() > 1 ? fmt::format("chip{}.", chips[0]->chip()) : std::string("device.")), c_(c),
      program_(dev_.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev_.tiles()) - 1)),
      tiles_(dev_.tiles()), pages_(c) {
  if (const std::string why = c.check(); !why.empty()) throw rt::UsageError("model: " + why);
  const unsigned N = static_cast<unsigned>(chips_.size());
  if (N > 1) {
    if (c.device_dispatch) throw rt::UsageError("model: on several chips the host dispatches the experts (no --device-dispatch)");
    for (unsigned k = 0; k < N; ++k)
      if (chips_[k]->tiles() != tiles_)
        throw rt::UsageError(fmt::format("model: chip {} has {} tiles, chip 0 {}", k, chips_[k]->tiles(), tiles_));
    // The rows that travel between chips live at the same address on every
    // chip (the engines' all-to-all writes where the sender's buffer is):
    // allocated first, in the last HBM stack, the same way everywhere.
    const std::uint64_t rows = 2ull * kMaxBlock, D = c.d_model;
    for (unsigned k = 0; k < N; ++k) {
      rt::Device& d = *chips_[k];
      const unsigned last = d.hbm_stacks() - 1;
      const Buffer r = d.alloc(2 * rows * D, last), o = d.alloc(4 * rows * D, last), b = d.alloc(4 * rows * D, last);
      if (k == 0) recv_ = r, out_ = o, ret_ = b;
      else if (r.address != recv_.address || o.address != out_.address || b.address != ret_.address)
        throw rt::UsageError(fmt::format("model: chip {}'s exchange buffers are not where chip 0's are", k));
      tables_.push_back(d.alloc(6 * 8 * N)), tables_.push_back(d.alloc(6 * 8 * N));
      chip_programs_.push_back(k == 0 ? program_ : d.load_kernel(data_file(DataKind::kernels, "program.elf"),
                                                                 (1u << d.tiles()) - 1));
    }
    send_ = dev_.alloc(2 * rows * D), gates_ = dev_.alloc(4 * rows);
  }
  if (c.d_model % tiles_ || c.vocab % tiles_)
    throw rt::UsageError(fmt::format("model: d_model {} and vocab {} must split evenly over {} tiles", c.d_model,
                                     c.vocab, tiles_));
  if (c.fp8) {
    // Every B slice must be whole 128-row blocks and stay inside, or be
    // whole, 128-column blocks.
    auto fits = [](unsigned w) { return w % 128 == 0 || (w < 128 && 128 % w == 0); };
    if (c.d_model % 128 || c.hidden_chunk % 128 || !fits(c.head_dim()) || !fits(c.d_model / tiles_) ||
        !fits(c.vocab / tiles_))
      throw rt::UsageError(fmt::format(
          "model: FP8 needs d_model ({}) and hidden_chunk ({}) in 128s, and head_dim ({}), d_model/tiles ({}) and "
          "vocab/tiles ({}) either multiples of 128 or dividing it",
          c.d_model, c.hidden_chunk, c.head_dim(), c.d_model / tiles_, c.vocab / tiles_));
  }
  const unsigned D = c.d_model, T = kMaxBlock;
  auto put = [&](const auto& v) {
    const Buffer b = dev_.alloc(v.size() * sizeof(v[0]));
    dev_.write(b, v.data(), v.size() * sizeof(v[0]));
    return b;
  };
  if (c.device_dispatch) plan_experts();
  embedding_ = upload(w.embedding);
  final_norm_ = put(w.final_norm);
  // The LM head, the largest matrix, is read by every tile at once (its
  // vocabulary split over them): one panel of columns per tile, the panels
  // spread over the stacks, so no one stack's way into the NoC carries it
  // all (the roofline named that port as the head phase's bound).
  if (const unsigned vw = c.vocab / tiles_; !c.fp8 || vw % 128 == 0) {
    for (unsigned j = 0; j < tiles_; ++j) lm_panels_.push_back(upload(columns(w.lm_head, j * vw, vw), dev_, static_cast<int>(j)));
  } else {
    lm_head_ = upload(w.lm_head);
  }
  // The KV cache in pages of kPage positions, a pool per layer and head
  // (a page holds its K rows, then its V rows, so one DMA moves both); page
  // i is the same in every pool (a sequence's page table holds one list).
  const unsigned pages = pages_.pool();
  // The experts' partial sums, a block (slot, token) a slice, in the
  // slice's stack (its tiles write near, the combine reads from them all).
  for (unsigned sl = 0; sl < moe_slices_ && device_dispatch_; ++sl)
    partials_.push_back(dev_.alloc(4ull * 2 * kMaxBlock * D, moe_stacks_[sl % moe_stacks_.size()]));
  for (const Weights::Layer& L : w.layers) {
    LayerBuffers b;
    b.attn_norm = put(L.attn_norm), b.ffn_norm = put(L.ffn_norm);
    // Memory planning: each tile's share of a matrix is a panel of its own,
    // contiguous, in the stack nearest that tile (the heads' Q, K and V
    // columns, the output projection's columns), so the tiles stream their
    // weights over their own columns of the NoC and from every stack at once.
    for (unsigned h = 0; h < c.heads; ++h) {
      const int near = static_cast<int>(dev_.stack_near(h % tiles_));
      const unsigned dh = c.head_dim();
      b.wq.push_back(upload(columns(L.wq, h * dh, dh), dev_, near));
      b.wk.push_back(upload(columns(L.wk, h * dh, dh), dev_, near));
      b.wv.push_back(upload(columns(L.wv, h * dh, dh), dev_, near));
      b.kv.push_back(dev_.alloc(2ull * 2 * pages * kPage * dh, static_cast<unsigned>(near)));
    }
    for (unsigned j = 0; j < tiles_; ++j)
      b.wo.push_back(upload(columns(L.wo, j * (D / tiles_), D / tiles_), dev_, static_cast<int>(dev_.stack_near(j))));
    b.router = upload(L.router);
    if (device_dispatch_) {
      // The experts in slices of their hidden layer, slice s in stack
      // moe_stacks_[s % stacks]: the tiles near that stack run it.
      std::vector<std::uint64_t> table;  // by expert, then slice: w1, w3, w2, the slice's partial sums
      const unsigned Fs = c.hidden / moe_slices_;
      for (unsigned e = 0; e < c.experts; ++e)
        for (unsigned sl = 0; sl < moe_slices_; ++sl) {
          const int stack = static_cast<int>(moe_stacks_[sl % moe_stacks_.size()]);
          Matrix w2;
          w2.rows = Fs, w2.cols = D;
          w2.bf16.assign(L.w2[e].bf16.begin() + std::size_t{sl} * Fs * D, L.w2[e].bf16.begin() + std::size_t{sl + 1} * Fs * D);
          const DevMatrix a = upload(columns(L.w1[e], sl * Fs, Fs), dev_, stack);
          const DevMatrix g = upload(columns(L.w3[e], sl * Fs, Fs), dev_, stack);
          const DevMatrix d = upload(w2, dev_, stack);
          table.insert(table.end(), {a.data.address, g.data.address, d.data.address, partials_[sl].address});
        }
      b.expert_table = put(table);
    } else {
      for (unsigned e = 0; e < c.experts; ++e) {
        // Expert e lives on chip e % chips, near the tile that mostly runs it
        // there (its place among the chip's experts, round robin over the tiles).
        rt::Device& home = *chips_[e % N];
        const int near = static_cast<int>(home.stack_near(e / N % home.tiles()));
        b.w1.push_back(upload(L.w1[e], home, near)), b.w3.push_back(upload(L.w3[e], home, near));
        b.w2.push_back(upload(L.w2[e], home, near));
      }
    }
    layers_.push_back(std::move(b));
  }

  // The activations, each read by every tile in some phase, spread over the
  // stacks so no one stack's way into the NoC carries them all.
  const unsigned stacks = dev_.hbm_stacks();
  x_ = dev_.alloc(4ull * T * D, 1 % stacks), hb_ = dev_.alloc(2ull * T * D, 2 % stacks);
  attn_ = dev_.alloc(4ull * T * D, 3 % stacks);
  y0_ = dev_.alloc(4ull * T * D, 1 % stacks), y1_ = dev_.alloc(4ull * T * D, 2 % stacks);
  logits_ = dev_.alloc(4ull * T * c.vocab, 3 % stacks), topk_ = dev_.alloc(4ull * T * 2 * 3);
  mask_ = dev_.alloc(4ull * T * c.context, 2 % stacks);
  // The next tokens (one a sequence), then (graph mode) every layer's
  // routing, read in one go.
  next_ = dev_.alloc(4ull * T + 8ull * T * c.layers);
  qscale_ = put(std::vector<float>(std::size_t{T} * c.head_dim(), 1.0f / std::sqrt(static_cast<float>(c.head_dim()))));
  if (c.graph && !device_dispatch_)
    throw rt::UsageError("model: a step as one graph needs the experts dispatched on the device (BF16, one chip)");
  graph_mode_ = c.graph;
}

void DeviceModel::plan_experts() {
  // Expert dispatch on the device (BF16, one chip): each expert in S slices
  // of its hidden layer, spread over the stacks that are some tile's
  // nearest, each slice run by a tile near its stack. S: a multiple of those
  // stacks, the least whose buffers fit a scratchpad (two of each, for the
  // kernel's pipeline; sw/kernels/program/program.c).
  if (c_.fp8) throw rt::UsageError("model: device dispatch runs BF16 experts only, not FP8");
  if (chips_.size() > 1) throw rt::UsageError("model: on several chips the host dispatches the experts");
  device_dispatch_ = true;
  const rt::MoeSplit split = rt::MoeSplit::plan(dev_, tiles_, c_.experts, c_.hidden, c_.d_model, kMaxBlock);
  if (split.chunk)
    throw rt::UsageError(fmt::format("model: device dispatch lays the experts out whole; a d_model of {} needs them in chunks (the compiled path)",
                                     c_.d_model));
  moe_stacks_ = split.stacks;
  moe_slices_ = split.slices;
  moe_words_ = split.words;
}

TileProgram DeviceModel::experts_on_tile(const LayerBuffers& L, unsigned t, unsigned T) const {
  TileProgram g;
  g.moe({rt::lo(topk_.address), rt::hi(topk_.address), rt::lo(hb_.address), rt::hi(hb_.address),
         rt::lo(L.expert_table.address), rt::hi(L.expert_table.address), c_.d_model, c_.hidden / moe_slices_,
         c_.experts | T << 16, moe_slices_, static_cast<std::uint32_t>(moe_stacks_.size()), moe_words_[t].first,
         moe_words_[t].second});
  return g;
}

double DeviceModel::run_phase(std::vector<std::pair<std::uint32_t, TileProgram>>& programs, double& bucket,
                              const char* name) {
  std::vector<std::pair<unsigned, TileProgram>> per_tile;
  for (auto& [t, p] : programs)
    if (!p.ops().empty()) per_tile.emplace_back(t, std::move(p));
  if (per_tile.empty()) return 0;
  if (graph_) {
    graph_->node(node_prefix_ + name, std::move(per_tile));
    graph_buckets_.push_back(&bucket);
    return 0;
  }
  nlohmann::ordered_json before = dev_.stats();
  const double t0 = dev_.simulated_seconds();
  dev_.wait(dev_.run(program_, per_tile));
  const double took = dev_.simulated_seconds() - t0;
  bucket += took;
  std::vector<unsigned> tiles;
  for (const auto& [t, p] : per_tile) tiles.push_back(t);
  count_kernels(before, took, tiles, name);
  return took;
}

void PhaseBound::add(const roofline::Report& r, double took) {
  achieved += took;
  bound += r.seconds();
  for (const roofline::Bound& b : r.bounds) by_resource[b.resource] += b.seconds;
  if (!r.bounds.empty()) binding[r.binding().resource] += r.seconds();
}

std::string PhaseBound::binding_resource() const {
  std::string best;
  double most = -1;
  for (const auto& [resource, s] : binding)
    if (s > most) most = s, best = resource;
  return best;
}

void DeviceModel::count_kernels(const nlohmann::ordered_json& before, double took, const std::vector<unsigned>& tiles,
                                const char* phase) {
  // The longest kernel among the phase's tiles (its core's cycles at 1 GHz).
  const nlohmann::ordered_json after = dev_.stats();
  profile_.bounds[phase].add(dev_.roofline(before, after), took);
  double longest = 0;
  for (unsigned t : tiles) {
    const std::string k = prefix_ + "tile" + std::to_string(t);
    longest = std::max(longest, (after[k]["core_cycles"].get<double>() - before[k]["core_cycles"].get<double>()) * 1e-9);
  }
  profile_.kernels += std::min(longest, took);
}

void DeviceModel::expert_program(TileProgram& g, const LayerBuffers& L, unsigned e, const std::vector<std::uint64_t>& rows,
                                 const std::vector<std::uint64_t>& gates, const std::vector<std::uint64_t>& outs) {
  const unsigned D = c_.d_model, F = c_.hidden, fc = c_.hidden_chunk, ab = c_.fp8 ? 1 : 2;
  const unsigned n = static_cast<unsigned>(rows.size());
  Spm s;
  const std::uint32_t XA = s(ab * n * D), SA = s(4ull * n * D / 128 + 4), GS = s(4ull * n);
  const std::uint32_t W1 = s(2ull * D * fc), W3 = s(2ull * D * fc), W2 = s(2ull * fc * D);
  const std::uint32_t S1 = s(4ull * D / 128 * (fc / 128 + 1)), S3 = s(4ull * D / 128 * (fc / 128 + 1));
  const std::uint32_t S2 = s(4ull * (fc / 128 + 1) * (D / 128 + 1));
  const std::uint32_t H1 = s(4ull * n * fc), H3 = s(4ull * n * fc), GA = s(ab * n * fc), SG = s(4ull * n * fc / 128 + 4);
  const std::uint32_t Y = s(4ull * n * D);
  for (unsigned i = 0; i < n; ++i) {
    // The token's normed row (BF16), as the A operand (cast to E4M3 with its scales in FP8).
    TileProgram::Dma r;
    r.src = rows[i], r.dst = XA + ab * i * D, r.dst_local = true, r.len0 = D;
    if (c_.fp8) {
      r.cast = true, r.from = Fmt::bf16, r.to = Fmt::e4m3, r.group = 128;
      r.scales = SA + 4 * i * (D / 128), r.scales_local = true;
    } else {
      r.len0 = 2 * D;
    }
    g.dma(r);
    // Its gate: the softmax of its two choices, from the router's output.
    if (!gates.empty()) g.load(gates[i], GS + 4 * i, 4);
  }
  for (unsigned c0 = 0; c0 < F; c0 += fc) {
    const Slice b1 = load_b(g, L.w1[e], 0, D, c0, fc, W1, S1), b3 = load_b(g, L.w3[e], 0, D, c0, fc, W3, S3);
    const Slice b2 = load_b(g, L.w2[e], c0, fc, 0, D, W2, S2);
    g.drain();
    matmul(g, n, fc, D, XA, SA, b1, H1);
    matmul(g, n, fc, D, XA, SA, b3, H3);
    g.drain().vec(vec(VecOp::swiglu, n, fc, H1, H3, H1));
    to_a(g, n, fc, H1, GA, SG);
    g.drain();
    matmul(g, n, D, fc, GA, SG, b2, Y, c0 > 0);
    g.drain();
  }
  if (!gates.empty()) g.vec(vec(VecOp::scale_rows, n, D, Y, GS, Y)).drain();
  for (unsigned i = 0; i < n; ++i) g.store(Y + 4 * i * D, outs[i], 4 * D);
  g.drain();
}

void DeviceModel::experts_across_chips(const LayerBuffers& L, const std::vector<std::uint32_t>& chosen, unsigned T) {
  const unsigned N = static_cast<unsigned>(chips_.size()), E = c_.experts, D = c_.d_model;
  using Programs = std::vector<std::pair<std::uint32_t, TileProgram>>;
  auto fresh = [&] {
    Programs p;
    for (unsigned t = 0; t < tiles_; ++t) p.emplace_back(t, TileProgram{});
    return p;
  };
  // Rows in dispatch order: by the expert's chip, then expert, then token.
  struct Row {
    unsigned t, k, e;
  };
  std::vector<std::vector<Row>> by_chip(N);
  for (unsigned e = 0; e < E; ++e)
    for (unsigned t = 0; t < T; ++t)
      for (unsigned k = 0; k < 2; ++k) {
        if (chosen[2 * t + k] >= E)
          throw rt::UsageError(fmt::format("model: the router chose expert {} of {}", chosen[2 * t + k], E));
        if (chosen[2 * t + k] == e) by_chip[e % N].push_back({t, k, e});
      }
  std::vector<std::uint64_t> first(N + 1, 0);
  std::vector<Row> order;
  for (unsigned c = 0; c < N; ++c) {
    first[c + 1] = first[c] + by_chip[c].size();
    order.insert(order.end(), by_chip[c].begin(), by_chip[c].end());
  }
  // Pack on chip 0: the routed rows and their gates, in that order.
  {
    Programs p = fresh();
    TileProgram& g = p[0].second;
    Spm s;
    const std::uint32_t HB = s(2ull * T * D), G = s(8ull * T);
    g.load(hb_.address, HB, 2 * T * D).load(topk_.address + 8ull * T, G, 8 * T).drain();
    for (std::size_t i = 0; i < order.size(); ++i)
      g.store(HB + 2 * D * order[i].t, send_.address + 2ull * D * i, 2 * D)
          .store(G + 4 * (2 * order[i].t + order[i].k), gates_.address + 4ull * i, 4);
    g.drain();
    run_phase(p, profile_.comm, "comm");
  }
  // Dispatch and combine are all-to-alls on every chip's engine; the host
  // writes the per-peer tables (a few hundred bytes).
  auto exchange = [&](unsigned table, std::uint32_t type, std::uint64_t bytes_per_row, const Buffer& src,
                      const Buffer& dst, bool out) {
    const double t0 = dev_.simulated_seconds();
    for (unsigned k = 0; k < N; ++k) {
      std::vector<std::uint64_t> t(6 * N, 0);
      for (unsigned q = 0; q < N; ++q) {
        std::uint64_t* e = &t[6 * q];
        if (out) {  // chip 0 sends chip q its rows; each chip takes its own from chip 0
          if (k == 0) e[0] = bytes_per_row * first[q], e[1] = bytes_per_row * (first[q + 1] - first[q]);
          if (q == 0) e[4] = bytes_per_row * (first[k + 1] - first[k]), e[5] = bytes_per_row * first[k];
        } else {  // every chip sends its results to chip 0, which puts them back in order
          if (q == 0) e[1] = bytes_per_row * (first[k + 1] - first[k]), e[2] = bytes_per_row * first[k];
          if (k == 0) e[3] = bytes_per_row * first[q], e[4] = bytes_per_row * (first[q + 1] - first[q]);
        }
      }
      chips_[k]->write(tables_[2 * k + table], t.data(), t.size() * 8);
    }
    const double t1 = dev_.simulated_seconds();
    std::vector<rt::Event> events;
    for (unsigned k = 0; k < N; ++k) {
      // The exchange buffers sit at the same address on every chip.
      Buffer from = k == 0 || !out ? src : dst, to = dst;
      from.chip = to.chip = k;
      events.push_back(chips_[k]->collective(TP_CE_ALL_TO_ALL | TP_CE_DIRECT | TP_CE_PUSH | type, from, to, 0,
                                             &tables_[2 * k + table]));
    }
    for (unsigned k = 0; k < N; ++k) chips_[k]->wait(events[k]);
    profile_.host_io += t1 - t0;
    profile_.comm += dev_.simulated_seconds() - t1;
  };
  exchange(0, TP_CE_BF16, 2ull * D, send_, recv_, true);
  // The experts, on every chip at once.
  {
    const double t0 = dev_.simulated_seconds();
    std::vector<rt::Event> events;
    std::vector<std::vector<std::pair<unsigned, TileProgram>>> work(N);
    for (unsigned c = 0; c < N; ++c) {
      Programs p = fresh();
      unsigned slot = 0;
      for (std::size_t i = 0; i < by_chip[c].size();) {
        const unsigned e = by_chip[c][i].e;
        std::vector<std::uint64_t> rows, outs;
        for (; i < by_chip[c].size() && by_chip[c][i].e == e; ++i) {
          rows.push_back(recv_.address + 2ull * D * i);
          outs.push_back(out_.address + 4ull * D * i);
        }
        expert_program(p[slot++ % tiles_].second, L, e, rows, {}, outs);
      }
      for (auto& [t, g] : p)
        if (!g.ops().empty()) work[c].emplace_back(t, std::move(g));
      if (!work[c].empty()) events.push_back(chips_[c]->run(chip_programs_[c], work[c]));
      else events.push_back({});
    }
    for (unsigned c = 0; c < N; ++c)
      if (!work[c].empty()) chips_[c]->wait(events[c]);
    profile_.experts += dev_.simulated_seconds() - t0;
  }
  exchange(1, TP_CE_FP32, 4ull * D, out_, ret_, false);
  // Unpack on chip 0: each row scaled by its gate, into its token's Y0 / Y1 row.
  {
    Programs p = fresh();
    const unsigned R = static_cast<unsigned>(order.size()), parts = std::min(tiles_, std::max(R, 1u));
    for (unsigned j = 0; j < parts; ++j) {
      const unsigned r0 = R * j / parts, r1 = R * (j + 1) / parts, n = r1 - r0;
      if (!n) continue;
      TileProgram& g = p[j].second;
      Spm s;
      const std::uint32_t Y = s(4ull * n * D), G = s(4ull * n);
      g.load(ret_.address + 4ull * D * r0, Y, 4 * n * D).load(gates_.address + 4ull * r0, G, 4 * n).drain();
      g.vec(vec(VecOp::scale_rows, n, D, Y, G, Y)).drain();
      for (unsigned i = 0; i < n; ++i) {
        const Row& r = order[r0 + i];
        g.store(Y + 4 * D * i, (r.k ? y1_ : y0_).address + 4ull * r.t * D, 4 * D);
      }
      g.drain();
    }
    run_phase(p, profile_.comm, "comm");
  }
}

std::vector<float> Model::step(const std::vector<std::uint32_t>& tokens, unsigned pos, std::uint32_t* next,
                               std::vector<std::vector<std::uint32_t>>* routes) {
  std::vector<std::uint32_t> nexts;
  std::vector<float> logits = step(std::vector<Seq>{{0, tokens, pos}}, &nexts, routes);
  if (next) *next = nexts.at(0);
  return logits;
}

KvPages::KvPages(const Config& c, unsigned max_tokens) : c_(c), max_tokens_(max_tokens) {
  if (!c.max_sequences) throw rt::UsageError("model: max_sequences must be at least 1");
  per_sequence_ = (c.context + kPage - 1) / kPage;
  pool_ = c.max_sequences * per_sequence_;
  pages_.assign(c.max_sequences, {});
  held_.assign(c.max_sequences, 0);
  for (unsigned i = pool_; i-- > 0;) free_.push_back(i);
}

void KvPages::release(unsigned seq) {
  if (seq >= pages_.size()) return;
  for (unsigned page : pages_[seq]) free_.push_back(page);
  pages_[seq].clear();
  held_[seq] = 0;
}

std::vector<KvPages::Part> KvPages::check(const std::vector<Model::Seq>& batch, std::vector<std::uint32_t>& tokens) const {
  std::vector<Part> parts;
  tokens.clear();
  if (batch.empty()) throw rt::UsageError("model: a step of no sequences");
  for (const Model::Seq& q : batch) {
    if (q.seq >= c_.max_sequences)
      throw rt::UsageError(fmt::format("model: sequence {} (the model holds {})", q.seq, c_.max_sequences));
    for (const Part& o : parts)
      if (o.seq == q.seq) throw rt::UsageError(fmt::format("model: sequence {} twice in one step", q.seq));
    if (q.tokens.empty()) throw rt::UsageError(fmt::format("model: sequence {} has no tokens in the step", q.seq));
    if (q.pos + q.tokens.size() > c_.context)
      throw rt::UsageError(fmt::format("model: sequence {}: position {} is past the context of {}", q.seq,
                                       q.pos + q.tokens.size(), c_.context));
    if (q.pos > held_[q.seq])
      throw rt::UsageError(fmt::format("model: sequence {} resumes at position {}, but holds {} positions", q.seq, q.pos,
                                       held_[q.seq]));
    for (std::uint32_t t : q.tokens)
      if (t >= c_.vocab) throw rt::UsageError(fmt::format("model: token {} is not in the vocabulary of {}", t, c_.vocab));
    parts.push_back({q.seq, static_cast<unsigned>(tokens.size()), static_cast<unsigned>(q.tokens.size()), q.pos});
    tokens.insert(tokens.end(), q.tokens.begin(), q.tokens.end());
  }
  if (tokens.size() > max_tokens_)
    throw rt::UsageError(fmt::format("model: {} tokens in one step (1 to {})", tokens.size(), max_tokens_));
  return parts;
}

std::vector<KvPages::Part> KvPages::admit(const std::vector<Model::Seq>& batch, std::vector<std::uint32_t>& tokens) {
  const std::vector<Part> parts = check(batch, tokens);
  // Each sequence's pages cover its positions.
  for (const Part& q : parts) {
    std::vector<unsigned>& own = pages_[q.seq];
    if (q.pos == 0) release(q.seq);
    while (own.size() * kPage < q.pos + q.rows) {
      if (free_.empty()) throw rt::UsageError("model: the KV cache's pages are all taken");
      own.push_back(free_.back());
      free_.pop_back();
    }
    held_[q.seq] = q.pos + q.rows;
  }
  return parts;
}

std::vector<float> DeviceModel::step(const std::vector<Seq>& batch, std::vector<std::uint32_t>* next,
                                     std::vector<std::vector<std::uint32_t>>* routes) {
  const unsigned D = c_.d_model, H = c_.heads, dh = c_.head_dim(), E = c_.experts, V = c_.vocab;
  const unsigned ab = c_.fp8 ? 1 : 2;  // bytes of an A-operand element
  // The batch's rows: each sequence's tokens in turn, its pages given.
  using Part = KvPages::Part;
  std::vector<std::uint32_t> tokens;
  const std::vector<Part> parts = pages_.admit(batch, tokens);
  const unsigned T = static_cast<unsigned>(tokens.size());
  using Programs = std::vector<std::pair<std::uint32_t, TileProgram>>;
  auto fresh = [&] {
    Programs p;
    for (unsigned t = 0; t < tiles_; ++t) p.emplace_back(t, TileProgram{});
    return p;
  };
  // The causal mask of the sequences with several tokens: token t of a
  // sequence at pos sees positions 0 .. pos + t.
  bool masked = false;
  for (const Part& q : parts) masked |= q.rows > 1;
  if (masked) {
    std::vector<float> mask(std::size_t{T} * c_.context, 0.0f);
    for (const Part& q : parts)
      for (unsigned t = 0; t < q.rows; ++t)
        for (unsigned j = q.pos + t + 1; j < q.pos + q.rows; ++j) mask[(q.row0 + t) * c_.context + j] = -INFINITY;
    const double t0 = dev_.simulated_seconds();
    dev_.write(mask_, mask.data(), mask.size() * 4);
    profile_.host_io += dev_.simulated_seconds() - t0;
  }
  const std::uint64_t xcur = x_.address;  // the residual stream
  // Prefetch: a tile's first head's Q, K and V panels for a layer load in
  // the phase before its attention (the embedding, or the previous layer's
  // combine), into the top of the scratchpad, which nothing in between uses;
  // the attention then starts on them.
  const std::uint64_t panel = 2ull * D * dh, scales = 4ull * D / 128 + 16;
  auto up = [](std::uint64_t b) { return (b + 255) & ~std::uint64_t{255}; };
  const std::uint32_t pf = static_cast<std::uint32_t>(TKP_PROGRAM_OFFSET - 3 * (up(panel) + up(scales)));
  // A head's buffers before its KV cache, in its tile's scratchpad.
  struct HeadBuffers {
    std::uint32_t X, NW, HN, HA, SA, WQ, WK, WV, SQ, SK, SV, Q, K, Vv, QS, Q16, O;
  };
  auto head_buffers = [&](Spm& s) {
    HeadBuffers b;
    b.X = s(4ull * T * D), b.NW = s(4ull * D), b.HN = s(4ull * T * D), b.HA = s(ab * T * D), b.SA = s(4ull * T * D / 128 + 4);
    b.WQ = s(panel), b.WK = s(panel), b.WV = s(panel), b.SQ = s(scales), b.SK = s(scales), b.SV = s(scales);
    b.Q = s(4ull * T * dh), b.K = s(4ull * T * dh), b.Vv = s(4ull * T * dh), b.QS = s(4ull * T * dh);
    b.Q16 = s(2ull * T * dh), b.O = s(4ull * T * dh);
    return b;
  };
  Spm fixed;  // they must lie below the prefetched panels
  head_buffers(fixed);
  const bool prefetch = fixed.at <= pf;
  std::vector<std::array<Slice, 3>> pre(tiles_);
  auto prefetch_attention = [&](std::vector<std::pair<std::uint32_t, TileProgram>>& p, unsigned l) {
    const LayerBuffers& L = layers_[l];
    for (unsigned j = 0; j < std::min(H, tiles_); ++j) {
      std::uint32_t at = pf;
      const DevMatrix* m[3] = {&L.wq[j], &L.wk[j], &L.wv[j]};
      for (unsigned i = 0; i < 3; ++i) {
        pre[j][i] = load_b(p[j].second, *m[i], 0, D, 0, dh, at, static_cast<std::uint32_t>(at + up(panel)));
        at += static_cast<std::uint32_t>(up(panel) + up(scales));
      }
    }
  };
  rt::Graph graph;
  graph_buckets_.clear();
  node_prefix_.clear();
  graph_ = graph_mode_ ? &graph : nullptr;
  // Embed: rows of the BF16 table, cast to FP32, into x.
  {
    Programs p = fresh();
    for (unsigned t = 0; t < T; ++t) {
      TileProgram::Dma d;
      d.src = embedding_.data.address + 2ull * tokens[t] * D, d.dst = xcur + 4ull * t * D, d.len0 = D;
      d.cast = true, d.from = Fmt::bf16, d.to = Fmt::fp32;
      p[0].second.dma(d);
    }
    if (prefetch) prefetch_attention(p, 0);
    run_phase(p, profile_.embed, "embed");
  }
  if (routes) routes->assign(c_.layers, {});
  const std::uint32_t page_bytes = 2 * kPage * dh;
  for (unsigned l = 0; l < c_.layers; ++l) {
    // Layer 0's attention weights, prefetched during the embedding (the
    // later layers' during the combine before them).
    const LayerBuffers& L = layers_[l];
    node_prefix_ = fmt::format("layer{}.", l);
    // Attention: a head per tile; each sequence over its own cache.
    {
      Programs p = fresh();
      for (unsigned hd = 0; hd < H; ++hd) {
        TileProgram& g = p[hd % tiles_].second;
        Spm s;  // each head reuses the tile's buffers after a drain
        const HeadBuffers hb = head_buffers(s);
        const std::uint32_t X = hb.X, NW = hb.NW, HN = hb.HN, HA = hb.HA, SA = hb.SA, WQ = hb.WQ, WK = hb.WK, WV = hb.WV;
        const std::uint32_t SQ = hb.SQ, SK = hb.SK, SV = hb.SV, Q = hb.Q, K = hb.K, Vv = hb.Vv, QS = hb.QS, Q16 = hb.Q16, O = hb.O;
        const std::uint64_t pool = L.kv[hd].address;
        g.load(xcur, X, 4 * T * D).load(L.attn_norm.address, NW, 4 * D).load(qscale_.address, QS, 4 * T * dh);
        const bool ready = prefetch && hd < tiles_;  // the panels are already here
        const Slice bq = ready ? pre[hd][0] : load_b(g, L.wq[hd], 0, D, 0, dh, WQ, SQ);
        const Slice bk = ready ? pre[hd][1] : load_b(g, L.wk[hd], 0, D, 0, dh, WK, SK);
        const Slice bv = ready ? pre[hd][2] : load_b(g, L.wv[hd], 0, D, 0, dh, WV, SV);
        g.drain().vec(vec(VecOp::rmsnorm, T, D, X, NW, HN));
        to_a(g, T, D, HN, HA, SA);
        g.drain();
        matmul(g, T, dh, D, HA, SA, bq, Q);
        matmul(g, T, dh, D, HA, SA, bk, K);
        matmul(g, T, dh, D, HA, SA, bv, Vv);
        g.drain();
        for (const Part& q : parts)
          for (unsigned t = 0; t < q.rows; ++t) {
            const unsigned row = q.row0 + t;
            TileProgram::Vec rq = vec(VecOp::rope, 1, dh, Q + 4 * row * dh, 0, Q + 4 * row * dh), rk = rq;
            rq.position = rk.position = q.pos + t;
            rk.src0 = rk.dst = K + 4 * row * dh;
            g.vec(rq).vec(rk);
          }
        g.vec(vec(VecOp::mul, T, dh, Q, QS, Q)).vec(cast_bf16(T, dh, Q, Q16));
        // The sequences in groups whose caches fit the scratchpad at once:
        // each group's pages load together, then its scores, softmaxes and
        // outputs run back to back on the engines.
        for (std::size_t first = 0; first < parts.size();) {
          Spm gs = s;
          struct Buffers {
            std::uint32_t kc, vc, sc, m, p16;
          };
          std::vector<Buffers> bufs;
          std::size_t last = first;
          for (; last < parts.size(); ++last) {
            const Part& q = parts[last];
            const std::uint64_t n = q.pos + q.rows;
            const std::uint64_t want = 2 * (2 * n * dh) + q.rows * n * (4 + (q.rows > 1 ? 4 : 0) + 2) + 5 * 256;
            if (last > first && gs.at + want > TKP_PROGRAM_OFFSET) break;
            Buffers b;
            b.kc = gs(2 * n * dh), b.vc = gs(2 * n * dh), b.sc = gs(4 * q.rows * n);
            b.m = q.rows > 1 ? gs(4 * q.rows * n) : 0;
            b.p16 = gs(2 * q.rows * n);
            bufs.push_back(b);
          }
          // The cached positions, page by page; the new rows cast into place.
          for (std::size_t i = first; i < last; ++i) {
            const Part& q = parts[i];
            const Buffers& b = bufs[i - first];
            const std::vector<unsigned>& own = pages_.pages(q.seq);
            for (unsigned at = 0; at < q.pos; at += kPage) {
              TileProgram::Dma d;  // the page's K rows and its V rows
              d.src = pool + 2ull * own[at / kPage] * page_bytes, d.sstride1 = page_bytes;
              d.dst = b.kc + 2 * at * dh, d.dst_local = true, d.dstride1 = b.vc - b.kc;
              d.len0 = 2 * std::min(kPage, q.pos - at) * dh, d.count1 = 2;
              g.dma(d);
            }
            if (q.rows > 1) g.load_rows(mask_.address + 4ull * q.row0 * c_.context, 4 * c_.context, b.m, q.rows, 4 * (q.pos + q.rows));
            g.vec(cast_bf16(q.rows, dh, K + 4 * q.row0 * dh, b.kc + 2 * q.pos * dh));
            g.vec(cast_bf16(q.rows, dh, Vv + 4 * q.row0 * dh, b.vc + 2 * q.pos * dh));
          }
          g.drain();
          // The new rows to their pages; the scores.
          for (std::size_t i = first; i < last; ++i) {
            const Part& q = parts[i];
            const Buffers& b = bufs[i - first];
            const std::vector<unsigned>& own = pages_.pages(q.seq);
            for (unsigned at = q.pos; at < q.pos + q.rows;) {
              const unsigned n = std::min(kPage - at % kPage, q.pos + q.rows - at);
              TileProgram::Dma d;
              d.src = b.kc + 2 * at * dh, d.src_local = true, d.sstride1 = b.vc - b.kc;
              d.dst = pool + 2ull * own[at / kPage] * page_bytes + 2ull * (at % kPage) * dh, d.dstride1 = page_bytes;
              d.len0 = 2 * n * dh, d.count1 = 2;
              g.dma(d);
              at += n;
            }
            TileProgram::Gemm sc = gemm(q.rows, q.pos + q.rows, dh, Q16 + 2 * q.row0 * dh, b.kc, b.sc);
            sc.trans_b = true;
            g.gemm(sc);
          }
          g.drain();
          for (std::size_t i = first; i < last; ++i) {
            const Part& q = parts[i];
            const Buffers& b = bufs[i - first];
            const unsigned n = q.pos + q.rows;
            if (q.rows > 1) g.vec(vec(VecOp::add, q.rows, n, b.sc, b.m, b.sc));
            g.vec(vec(VecOp::softmax, q.rows, n, b.sc, 0, b.sc)).vec(cast_bf16(q.rows, n, b.sc, b.p16));
          }
          g.drain();
          for (std::size_t i = first; i < last; ++i) {
            const Part& q = parts[i];
            const Buffers& b = bufs[i - first];
            g.gemm(gemm(q.rows, dh, q.pos + q.rows, b.p16, b.vc, O + 4 * q.row0 * dh));
          }
          g.drain();
          first = last;
        }
        g.store_rows(O, attn_.address + 4ull * hd * dh, 4 * D, T, 4 * dh).drain();
      }
      run_phase(p, profile_.attention, "attention");
    }
    // Wo and the residual: output columns split over tiles.
    {
      Programs p = fresh();
      const unsigned cw = D / tiles_;
      for (unsigned j = 0; j < tiles_; ++j) {
        TileProgram& g = p[j].second;
        Spm s;
        const std::uint32_t AA = s(ab * T * D), SA = s(4ull * T * D / 128 + 4), WO = s(2ull * D * cw);
        const std::uint32_t SO = s(4ull * D / 128 * (cw / 128 + 1)), OC = s(4ull * T * cw), XC = s(4ull * T * cw);
        // The attention output cast by the DMA on its way in.
        TileProgram::Dma a;
        a.src = attn_.address, a.dst = AA, a.dst_local = true, a.len0 = D, a.count1 = T, a.cast = true;
        a.from = Fmt::fp32, a.to = c_.fp8 ? Fmt::e4m3 : Fmt::bf16;
        if (c_.fp8) a.group = 128, a.scales = SA, a.scales_local = true;
        g.dma(a);
        const Slice bo = load_b(g, L.wo[j], 0, D, 0, cw, WO, SO);
        g.load_rows(xcur + 4ull * j * cw, 4 * D, XC, T, 4 * cw).drain();
        matmul(g, T, cw, D, AA, SA, bo, OC);
        g.drain().vec(vec(VecOp::add, T, cw, XC, OC, XC)).drain();
        g.store_rows(XC, xcur + 4ull * j * cw, 4 * D, T, 4 * cw);
      }
      run_phase(p, profile_.wo, "wo");
    }
    // Router: norm, logits, top-2 and their softmax, on tile 0 (BF16).
    std::vector<std::uint32_t> chosen(2ull * T);
    {
      Programs p = fresh();
      TileProgram& g = p[0].second;
      Spm s;
      const std::uint32_t X = s(4ull * T * D), NW = s(4ull * D), HN = s(4ull * T * D), HB = s(2ull * T * D);
      const std::uint32_t WR = s(2ull * D * E), RL = s(4ull * T * E), TK = s(16ull * T), GT = s(8ull * T);
      g.load(xcur, X, 4 * T * D).load(L.ffn_norm.address, NW, 4 * D).load(L.router.data.address, WR, 2 * D * E).drain();
      g.vec(vec(VecOp::rmsnorm, T, D, X, NW, HN)).vec(cast_bf16(T, D, HN, HB)).drain();
      g.store(HB, hb_.address, 2 * T * D).gemm(gemm(T, E, D, HB, WR, RL)).drain();
      TileProgram::Vec top = vec(VecOp::topk, T, E, RL, 0, TK);
      top.k = 2;
      g.vec(top).drain().vec(vec(VecOp::softmax, T, 2, TK, 0, GT)).drain();
      g.store(TK + 8 * T, topk_.address, 8 * T).store(GT, topk_.address + 8ull * T, 8 * T);
      if (graph_) g.store(TK + 8 * T, next_.address + 4 * kMaxBlock + 8ull * T * l, 8 * T);  // read with the tokens
      run_phase(p, profile_.router, "router");
      if (!device_dispatch_) {
        // The host reads the choices to dispatch the experts; the gates stay
        // on the device.
        const double t0 = dev_.simulated_seconds();
        dev_.read(topk_, chosen.data(), 8ull * T);
        profile_.host_io += dev_.simulated_seconds() - t0;
      }
      if (routes && !device_dispatch_) (*routes)[l] = chosen;
    }
    // Experts on the device: every tile runs its experts over the tokens the
    // router sent them (the program kernel's MoE mode); the host only reads
    // the choices back for the reference, while the experts run.
    if (chips_.size() > 1) {
      experts_across_chips(L, chosen, T);
    } else if (device_dispatch_) {
      Programs p;
      for (unsigned t = 0; t < tiles_; ++t) p.emplace_back(t, experts_on_tile(L, t, T));
      run_phase(p, profile_.experts, "experts");
      if (routes && !graph_) {
        // The choices are still the router's (the next layer's router overwrites them).
        const double t0 = dev_.simulated_seconds();
        dev_.read(topk_, chosen.data(), 8ull * T);
        profile_.host_io += dev_.simulated_seconds() - t0;
        (*routes)[l] = chosen;
      }
    } else {
      Programs p = fresh();
      std::vector<std::vector<std::pair<unsigned, unsigned>>> tokens_of(E);  // (token, slot)
      for (unsigned t = 0; t < T; ++t)
        for (unsigned k = 0; k < 2; ++k) {
          if (chosen[2 * t + k] >= E)
            throw rt::UsageError(fmt::format("model: the router chose expert {} of {}", chosen[2 * t + k], E));
          tokens_of[chosen[2 * t + k]].emplace_back(t, k);
        }
      for (unsigned e = 0; e < E; ++e) {
        const auto& list = tokens_of[e];
        if (list.empty()) continue;
        std::vector<std::uint64_t> rows, gates, outs;
        for (const auto& [t, k] : list) {
          rows.push_back(hb_.address + 2ull * t * D);
          gates.push_back(topk_.address + 8ull * T + 4ull * (2 * t + k));
          outs.push_back((k ? y1_ : y0_).address + 4ull * t * D);
        }
        expert_program(p[e % tiles_].second, L, e, rows, gates, outs);
      }
      run_phase(p, profile_.experts, "experts");
    }
    // Combine: x += Y0 + Y1, rows split over tiles.
    {
      Programs p = fresh();
      for (unsigned j = 0; j < tiles_ && j < T; ++j) {
        const unsigned r0 = T * j / std::min(tiles_, T), r1 = T * (j + 1) / std::min(tiles_, T), rows = r1 - r0;
        if (!rows) continue;
        TileProgram& g = p[j].second;
        Spm s;
        const std::uint32_t X = s(4ull * rows * D), A = s(4ull * rows * D), B = s(4ull * rows * D);
        g.load(xcur + 4ull * r0 * D, X, 4 * rows * D);
        if (device_dispatch_) {
          // Y0 and Y1 are the sums of the experts' slices (slice by slice, in order).
          std::vector<std::uint32_t> part(2ull * moe_slices_);
          for (unsigned k = 0; k < 2; ++k)
            for (unsigned sl = 0; sl < moe_slices_; ++sl) {
              part[k * moe_slices_ + sl] = sl == 0 ? (k ? B : A) : s(4ull * rows * D);
              g.load(partials_[sl].address + 4ull * (k * T + r0) * D, part[k * moe_slices_ + sl], 4 * rows * D);
            }
          g.drain();
          for (unsigned k = 0; k < 2; ++k)
            for (unsigned sl = 1; sl < moe_slices_; ++sl)
              g.vec(vec(VecOp::add, rows, D, k ? B : A, part[k * moe_slices_ + sl], k ? B : A));
        } else {
          g.load(y0_.address + 4ull * r0 * D, A, 4 * rows * D).load(y1_.address + 4ull * r0 * D, B, 4 * rows * D).drain();
        }
        g.vec(vec(VecOp::add, rows, D, X, A, X)).vec(vec(VecOp::add, rows, D, X, B, X)).drain();
        g.store(X, xcur + 4ull * r0 * D, 4 * rows * D);
      }
      if (prefetch && l + 1 < c_.layers) prefetch_attention(p, l + 1);
      run_phase(p, profile_.combine, "combine");
    }
  }
  node_prefix_.clear();
  // Head: final norm and the vocabulary split over tiles.
  {
    Programs p = fresh();
    const unsigned vw = V / tiles_;
    for (unsigned j = 0; j < tiles_; ++j) {
      TileProgram& g = p[j].second;
      Spm s;
      const std::uint32_t X = s(4ull * T * D), NW = s(4ull * D), HN = s(4ull * T * D), HA = s(ab * T * D);
      const std::uint32_t SA = s(4ull * T * D / 128 + 4), WH = s(2ull * D * vw), SH = s(4ull * D / 128 * (vw / 128 + 1));
      const std::uint32_t LG = s(4ull * T * vw);
      g.load(xcur, X, 4 * T * D).load(final_norm_.address, NW, 4 * D);
      const Slice bh = lm_panels_.empty() ? load_b(g, lm_head_, 0, D, j * vw, vw, WH, SH)
                                          : load_b(g, lm_panels_[j], 0, D, 0, vw, WH, SH);
      g.drain().vec(vec(VecOp::rmsnorm, T, D, X, NW, HN));
      to_a(g, T, D, HN, HA, SA);
      g.drain();
      matmul(g, T, vw, D, HA, SA, bh, LG);
      g.drain().store_rows(LG, logits_.address + 4ull * j * vw, 4 * V, T, 4 * vw);
    }
    run_phase(p, profile_.head, "head");
  }
  // Greedy: the argmax of each sequence's last logits, a sequence per tile in turn.
  {
    Programs p = fresh();
    for (std::size_t i = 0; i < parts.size(); ++i) {
      TileProgram& g = p[i % tiles_].second;
      Spm s;
      const std::uint32_t LG = s(4ull * V), AM = s(4);
      g.load(logits_.address + 4ull * (parts[i].row0 + parts[i].rows - 1) * V, LG, 4 * V).drain();
      g.vec(vec(VecOp::argmax, 1, V, LG, 0, AM)).drain().store(AM, next_.address + 4 * i, 4).drain();
    }
    run_phase(p, profile_.argmax, "argmax");
  }
  if (graph_) {
    // The step's graph: written to the device, launched once, waited for;
    // each node's time from the device's marks.
    graph_ = nullptr;
    double t0 = dev_.simulated_seconds();
    const rt::GraphExec x = dev_.instantiate(graph);
    const double upload = dev_.simulated_seconds() - t0;
    profile_.upload += upload, profile_.host_io += upload;
    const nlohmann::ordered_json before = dev_.stats();
    t0 = dev_.simulated_seconds();
    try {
      dev_.wait(dev_.launch_graph(program_, x));
    } catch (...) {
      dev_.free(x);
      throw;
    }
    const double took = dev_.simulated_seconds() - t0;
    const std::vector<double> nodes = dev_.node_seconds(x);
    dev_.free(x);
    // The nodes' times as the device measured them, scaled to the launch
    // (which also holds the start and the end of the kernel).
    double sum = 0;
    for (double n : nodes) sum += n;
    for (std::size_t k = 0; k < nodes.size(); ++k) *graph_buckets_[k] += sum > 0 ? nodes[k] / sum * took : 0;
    std::vector<unsigned> all(tiles_);
    for (unsigned t = 0; t < tiles_; ++t) all[t] = t;
    count_kernels(before, took, all, "graph");
  }
  std::vector<float> logits(std::size_t{T} * V);
  const double t0 = dev_.simulated_seconds();
  dev_.read(logits_, logits.data(), logits.size() * 4);
  const std::size_t at = kMaxBlock;  // the routes (graph mode) follow the tokens
  std::vector<std::uint32_t> tail(at + 2ull * T * c_.layers);
  dev_.read(next_, tail.data(), graph_mode_ ? tail.size() * 4 : 4 * parts.size());
  if (next) next->assign(tail.begin(), tail.begin() + static_cast<std::ptrdiff_t>(parts.size()));
  if (graph_mode_ && routes)
    for (unsigned l = 0; l < c_.layers; ++l)
      (*routes)[l].assign(tail.begin() + at + 2ull * T * l, tail.begin() + at + 2ull * T * (l + 1));
  profile_.host_io += dev_.simulated_seconds() - t0;
  return logits;
}

}  // namespace tessera::model
