#include "ir.hpp"

#include "engines/num/block_scale.hpp"
#include "tessera_program.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace tessera::compiler {

const char* name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::e4m3: return "e4m3";
    case DType::e5m2: return "e5m2";
    case DType::i32: return "i32";
  }
  return "?";
}

unsigned bytes(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
    default: return 1;
  }
}

num::Format format(DType t) {
  switch (t) {
    case DType::f32: return num::Format::FP32;
    case DType::bf16: return num::Format::BF16;
    case DType::f16: return num::Format::FP16;
    case DType::e4m3: return num::Format::E4M3;
    case DType::e5m2: return num::Format::E5M2;
    case DType::i32: return num::Format::INT32;
  }
  return num::Format::FP32;
}

std::vector<std::uint8_t> encode(const std::vector<float>& v, DType dt) {
  const unsigned eb = bytes(dt);
  std::vector<std::uint8_t> out(v.size() * eb);
  num::Convert conv;
  conv.saturate = true;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint32_t code;
    if (dt == DType::f32) std::memcpy(&code, &v[i], 4);
    else code = num::encode(format(dt), v[i], conv);
    std::memcpy(out.data() + i * eb, &code, eb);
  }
  return out;
}

std::vector<float> decode(const std::vector<std::uint8_t>& b, DType dt) {
  const unsigned eb = bytes(dt);
  std::vector<float> out(b.size() / eb);
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint32_t code = 0;
    std::memcpy(&code, b.data() + i * eb, eb);
    if (dt == DType::f32) std::memcpy(&out[i], &code, 4);
    else out[i] = static_cast<float>(num::decode(format(dt), code));
  }
  return out;
}

const char* name(OpKind k) {
  static const char* const names[] = {"matmul", "add",  "sub",     "mul",   "max",   "min",     "swiglu",
                                      "relu",   "relu2", "exp",    "log",   "tanh",  "sigmoid", "silu",
                                      "gelu",   "neg",  "abs",     "rsqrt", "recip", "rmsnorm", "layernorm",
                                      "softmax", "rope", "cast",   "argmax", "reshape", "reduce_sum", "reduce_max", "move",
                                      "route",  "moe",   "gather", "attention", "all_reduce", "all_gather",
                                      "all_to_all", "dispatch", "dispatch_route", "combine"};
  return names[static_cast<unsigned>(k)];
}

bool is_unary(OpKind k) { return k >= OpKind::relu && k <= OpKind::recip; }
bool is_binary(OpKind k) { return k >= OpKind::add && k <= OpKind::swiglu; }
bool is_rowwise(OpKind k) { return k >= OpKind::rmsnorm && k <= OpKind::rope; }

std::vector<float> seeded_values(std::size_t n, std::uint32_t seed, float scale) {
  std::vector<float> v(n);
  std::uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<float>(s >> 8) / 16777216.0f - 0.5f);
  }
  return v;
}

std::uint64_t Tensor::elements() const {
  std::uint64_t n = 1;
  for (unsigned d : shape) n *= d;
  return n;
}

namespace {
std::string shape_text(const std::vector<unsigned>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }
}  // namespace

int Graph::add_tensor(Tensor t) {
  for (const Tensor& o : tensors_)
    if (o.name == t.name) throw std::invalid_argument(fmt::format("graph: two tensors named '{}'", t.name));
  for (unsigned d : t.shape)
    if (!d) throw std::invalid_argument(fmt::format("graph: tensor '{}' has an empty dimension {}", t.name, shape_text(t.shape)));
  if (t.shape.empty()) throw std::invalid_argument(fmt::format("graph: tensor '{}' has no dimensions", t.name));
  if (t.elements() > (1ull << 32))
    throw std::invalid_argument(fmt::format("graph: tensor '{}' {} has more than 2^32 elements", t.name, shape_text(t.shape)));
  tensors_.push_back(std::move(t));
  return static_cast<int>(tensors_.size() - 1);
}

const Tensor& Graph::operand(int t, const char* what) const {
  if (t < 0 || static_cast<std::size_t>(t) >= tensors_.size())
    throw std::invalid_argument(fmt::format("graph: {}: no tensor {}", what, t));
  return tensors_[static_cast<std::size_t>(t)];
}

int Graph::input(const std::string& name, std::vector<unsigned> shape) {
  Tensor t;
  t.name = name, t.shape = std::move(shape), t.role = Role::input;
  return add_tensor(std::move(t));
}

int Graph::weight(const std::string& name, std::vector<unsigned> shape, std::vector<float> values, DType dtype) {
  Tensor t;
  t.name = name, t.shape = std::move(shape), t.role = Role::weight, t.dtype = dtype;
  if (dtype == DType::i32) throw std::invalid_argument(fmt::format("graph: weight '{}': i32 weights are not supported", name));
  if (values.size() != t.elements() && !values.empty())
    throw std::invalid_argument(fmt::format("graph: weight '{}' {} needs {} values, not {}", name, shape_text(t.shape),
                                            t.elements(), values.size()));
  if (!t.elements()) throw std::invalid_argument(fmt::format("graph: weight '{}' {} has no elements", name, shape_text(t.shape)));
  for (float& v : values) v = static_cast<float>(num::quantize(format(dtype), v));
  t.values = std::move(values);
  return add_tensor(std::move(t));
}

int Graph::add_op(Op op, std::vector<unsigned> out_shape, DType out_dtype) {
  if (op.name.empty()) op.name = fmt::format("{}{}", compiler::name(op.kind), ops_.size());
  for (int t : op.in) {
    const int p = producer(t);
    const bool route_reader = op.kind == OpKind::moe || op.kind == OpKind::dispatch || op.kind == OpKind::dispatch_route ||
                              op.kind == OpKind::combine || op.plane_copy;
    if (p >= 0 && ops_[static_cast<std::size_t>(p)].kind == OpKind::route && !route_reader)
      throw std::invalid_argument(fmt::format("graph: {}: '{}' is a route (experts and gates); only moe reads it", op.name,
                                              tensors_[static_cast<std::size_t>(t)].name));
  }
  Tensor t;
  t.name = op.name, t.shape = std::move(out_shape), t.dtype = out_dtype;
  op.out = add_tensor(std::move(t));
  ops_.push_back(std::move(op));
  return ops_.back().out;
}

int Graph::matmul(int a, int b, DType format, const std::string& name) {
  const Tensor &A = operand(a, "matmul"), &B = operand(b, "matmul");
  const std::string n = name.empty() ? fmt::format("matmul{}", ops_.size()) : name;
  if (B.shape.size() != 2 && B.shape.size() != 3)
    throw std::invalid_argument(fmt::format("graph: {}: b '{}' must be K x N (or G x K x N), not {}", n, B.name, shape_text(B.shape)));
  const bool batched = B.shape.size() == 3;
  if (A.cols() != B.shape[batched])
    throw std::invalid_argument(fmt::format("graph: {}: a '{}' {} and b '{}' {} disagree on K", n, A.name,
                                            shape_text(A.shape), B.name, shape_text(B.shape)));
  if (batched && (B.shape[0] == 0 || A.rows() % B.shape[0] || A.shape.size() < 2))
    throw std::invalid_argument(fmt::format("graph: {}: a '{}' {} has no rows in {} equal blocks, one for each matrix of b '{}' {}", n,
                                            A.name, shape_text(A.shape), B.shape[0], B.name, shape_text(B.shape)));
  if (format == DType::f32 || format == DType::i32)
    throw std::invalid_argument(fmt::format("graph: {}: the tensor core takes bf16, f16, e4m3 or e5m2, not {}", n,
                                            compiler::name(format)));
  if (A.dtype == DType::i32 || B.dtype == DType::i32)
    throw std::invalid_argument(fmt::format("graph: {}: integer operands are not supported", n));
  std::vector<unsigned> shape = A.shape;
  shape.back() = B.shape.back();
  Op op;
  op.kind = OpKind::matmul, op.name = n, op.in = {a, b}, op.format = format;
  return add_op(std::move(op), std::move(shape), DType::f32);
}

MatmulDims matmul_dims(const Graph& g, const Op& op) {
  const Tensor &A = g.tensor(op.in[0]), &B = g.tensor(op.in[1]);
  MatmulDims d;
  const bool batched = B.shape.size() == 3;
  d.batches = batched ? B.shape[0] : 1, d.K = B.shape[batched], d.N = B.shape.back();
  d.M = A.rows() / d.batches;
  return d;
}

bool block_scaled(const Op& op) {
  return (op.kind == OpKind::matmul && op.in.size() == 3) || (op.kind == OpKind::moe && op.in.size() == 8);
}

int Graph::matmul_scaled(int a, int b, int b_scales, const std::string& name) {
  const Tensor &B = operand(b, "matmul_scaled"), &S = operand(b_scales, "matmul_scaled");
  const std::string n = name.empty() ? fmt::format("matmul{}", ops_.size()) : name;
  if (B.dtype != DType::e4m3 && B.dtype != DType::e5m2)
    throw std::invalid_argument(fmt::format("graph: {}: b '{}' must hold e4m3 or e5m2 codes, not {}", n, B.name,
                                            compiler::name(B.dtype)));
  if (B.role != Role::weight || S.role != Role::weight)
    throw std::invalid_argument(fmt::format("graph: {}: b '{}' and its scales '{}' must be weights", n, B.name, S.name));
  const bool batched = B.shape.size() == 3;
  if ((B.shape.size() == 2 || batched) && B.shape[batched] % kScaleBlock)
    throw std::invalid_argument(fmt::format("graph: {}: K ({}) must be a multiple of {} (the blocks' rows, a's groups)", n,
                                            B.shape[batched], kScaleBlock));
  if (B.shape.size() == 2 || batched) {
    std::vector<unsigned> blocks = {B.shape[batched] / kScaleBlock, (B.shape.back() + kScaleBlock - 1) / kScaleBlock};
    if (batched) blocks.insert(blocks.begin(), B.shape[0]);
    if (S.dtype != DType::f32 || S.shape != blocks)
      throw std::invalid_argument(fmt::format("graph: {}: scales '{}' must be f32 {} (a scale per {} x {} block of b), not {} {}",
                                              n, S.name, shape_text(blocks), kScaleBlock, kScaleBlock,
                                              compiler::name(S.dtype), shape_text(S.shape)));
  }
  const int out = matmul(a, b, B.dtype, n);  // the other checks of the shapes
  ops_.back().in.push_back(b_scales);
  return out;
}

std::pair<int, int> Graph::weight_scaled(const std::string& name, std::vector<unsigned> shape, const std::vector<float>& values,
                                         DType dtype) {
  if (dtype != DType::e4m3 && dtype != DType::e5m2)
    throw std::invalid_argument(fmt::format("graph: weight '{}': block scaling takes e4m3 or e5m2, not {}", name,
                                            compiler::name(dtype)));
  const bool stacked = shape.size() == 3;  // [E, K, N]: each of E matrices in blocks of its own
  std::uint64_t n = 1;
  for (unsigned d : shape) n *= d;
  if ((shape.size() != 2 && !stacked) || (values.size() != n && !values.empty()) || !n)
    throw std::invalid_argument(fmt::format("graph: weight '{}' {}: a block-scaled weight is K x N (or E x K x N) with as many "
                                            "values ({} given)", name, shape_text(shape), values.size()));
  const unsigned E = stacked ? shape[0] : 1, K = shape[stacked], N = shape[stacked + 1];
  if (values.empty()) {  // shape only: the codes' and the scales' shapes
    std::vector<unsigned> blocks = {(K + kScaleBlock - 1) / kScaleBlock, (N + kScaleBlock - 1) / kScaleBlock};
    if (stacked) blocks.insert(blocks.begin(), E);
    const int b = weight(name, shape, {}, dtype);
    return {b, weight(name + ".scales", std::move(blocks), {})};
  }
  num::Convert conv;
  conv.saturate = true;
  std::vector<float> codes(values.size()), scales;
  unsigned per_row = 0;
  for (unsigned e = 0; e < E; ++e) {
    const std::size_t at = std::size_t{e} * K * N;
    const num::BlockQuantized q = num::block_quantize(values.data() + at, K, N, format(dtype), num::ScaleFormat::FP32,
                                                      kScaleBlock, kScaleBlock, conv);
    for (std::size_t i = 0; i < q.codes.size(); ++i) codes[at + i] = static_cast<float>(num::decode(format(dtype), q.codes[i]));
    scales.insert(scales.end(), q.scales.begin(), q.scales.end());
    per_row = q.blocks_per_row();
  }
  std::vector<unsigned> blocks = {(K + kScaleBlock - 1) / kScaleBlock, per_row};
  if (stacked) blocks.insert(blocks.begin(), E);
  const int b = weight(name, shape, std::move(codes), dtype);
  const int s = weight(name + ".scales", std::move(blocks), std::move(scales));
  return {b, s};
}

bool broadcasts_to(const Tensor& b, const Tensor& a) {
  if (b.elements() == 1) return true;
  if (b.shape.size() > a.shape.size()) return false;
  const std::size_t lead = a.shape.size() - b.shape.size();
  return std::equal(b.shape.begin(), b.shape.end(), a.shape.begin() + static_cast<std::ptrdiff_t>(lead));
}

bool per_row(const Tensor& b, const Tensor& a) {
  // One element, or a's trailing dimensions, broadcast as numpy does first.
  if (broadcasts_to(b, a) || a.shape.size() < 2 || a.cols() <= 1 || b.shape.size() != a.shape.size() || b.shape.back() != 1)
    return false;
  return std::equal(a.shape.begin(), a.shape.end() - 1, b.shape.begin());
}

int Graph::binary(OpKind k, int a, int b, const std::string& name) {
  if (!is_binary(k)) throw std::invalid_argument(fmt::format("graph: {} is not a binary operation", compiler::name(k)));
  const Tensor &A = operand(a, compiler::name(k)), &B = operand(b, compiler::name(k));
  if (per_row(B, A) && k != OpKind::mul)
    throw std::invalid_argument(fmt::format("graph: {} of '{}' {} and '{}' {}: only mul takes a value per row",
                                            name.empty() ? compiler::name(k) : name, A.name, shape_text(A.shape), B.name,
                                            shape_text(B.shape)));
  if (A.shape != B.shape && !broadcasts_to(B, A) && !per_row(B, A))
    throw std::invalid_argument(fmt::format("graph: {} of '{}' {} and '{}' {}: b must have a's shape, its trailing "
                                            "dimensions, one element, or (mul) one value per row",
                                            name.empty() ? compiler::name(k) : name, A.name, shape_text(A.shape),
                                            B.name, shape_text(B.shape)));
  Op op;
  op.kind = k, op.name = name, op.in = {a, b};
  return add_op(std::move(op), A.shape, DType::f32);
}

int Graph::unary(OpKind k, int x, const std::string& name) {
  if (!is_unary(k)) throw std::invalid_argument(fmt::format("graph: {} is not a unary operation", compiler::name(k)));
  const Tensor& X = operand(x, compiler::name(k));
  Op op;
  op.kind = k, op.name = name, op.in = {x};
  return add_op(std::move(op), X.shape, DType::f32);
}

int Graph::rmsnorm(int x, int w, float eps, const std::string& name) {
  const Tensor &X = operand(x, "rmsnorm"), &W = operand(w, "rmsnorm");
  if (W.dtype != DType::f32 || W.elements() != X.cols())
    throw std::invalid_argument(fmt::format("graph: rmsnorm of '{}': its weight '{}' must be {} f32 values",
                                            X.name, W.name, X.cols()));
  Op op;
  op.kind = OpKind::rmsnorm, op.name = name, op.in = {x, w}, op.eps = eps;
  return add_op(std::move(op), X.shape, DType::f32);
}

int Graph::layernorm(int x, int gamma, int beta, float eps, const std::string& name) {
  const Tensor &X = operand(x, "layernorm"), &G = operand(gamma, "layernorm"), &B = operand(beta, "layernorm");
  for (const Tensor* w : {&G, &B})
    if (w->dtype != DType::f32 || w->elements() != X.cols())
      throw std::invalid_argument(fmt::format("graph: layernorm of '{}': '{}' must be {} f32 values", X.name,
                                              w->name, X.cols()));
  Op op;
  op.kind = OpKind::layernorm, op.name = name, op.in = {x, gamma, beta}, op.eps = eps;
  return add_op(std::move(op), X.shape, DType::f32);
}

int Graph::rope_at(int x, unsigned head_dim, int positions, unsigned rows_per_position, const std::string& name) {
  const Tensor &X = operand(x, "rope"), &P = operand(positions, "rope");
  const std::uint64_t want = rows_per_position ? (X.rows() + rows_per_position - 1) / rows_per_position : 0;
  if (P.role != Role::input || P.elements() != want || (P.dtype != DType::f32 && P.dtype != DType::i32))
    throw std::invalid_argument(fmt::format("graph: rope{}{}: positions '{}' must be an input of {} values", name.empty() ? "" : " ",
                                            name, P.name, want));
  const int r = rope(x, head_dim, 0, rows_per_position, name);
  ops_.back().in.push_back(positions);
  return r;
}

int Graph::softmax(int x, const std::string& name) {
  Op op;
  op.kind = OpKind::softmax, op.name = name, op.in = {x};
  return add_op(std::move(op), operand(x, "softmax").shape, DType::f32);
}

int Graph::rope(int x, unsigned head_dim, unsigned position, unsigned rows_per_position, const std::string& name) {
  const Tensor& X = operand(x, "rope");
  if (!head_dim || head_dim % 2 || X.cols() % head_dim || !rows_per_position)
    throw std::invalid_argument(fmt::format("graph: rope of '{}' {}: head_dim {} must be even and divide the last "
                                            "dimension, rows_per_position {} above zero",
                                            X.name, shape_text(X.shape), head_dim, rows_per_position));
  Op op;
  op.kind = OpKind::rope, op.name = name, op.in = {x}, op.head_dim = head_dim, op.position = position;
  op.rows_per_position = rows_per_position;
  return add_op(std::move(op), X.shape, DType::f32);
}

int Graph::cast(int x, DType to, const std::string& name) {
  const Tensor& X = operand(x, "cast");
  if (to == DType::i32) throw std::invalid_argument(fmt::format("graph: cast of '{}' to i32 is not supported", X.name));
  Op op;
  op.kind = OpKind::cast, op.name = name, op.in = {x}, op.format = to;
  return add_op(std::move(op), X.shape, to);
}

int Graph::argmax(int x, const std::string& name) { return reduce(OpKind::argmax, x, name); }

int Graph::reduce(OpKind kind, int x, const std::string& name) {
  if (!is_reduction(kind)) throw std::invalid_argument(fmt::format("graph: {} is no reduction", compiler::name(kind)));
  const Tensor& X = operand(x, compiler::name(kind));
  std::vector<unsigned> shape(X.shape.begin(), X.shape.end() - 1);
  if (shape.empty()) shape = {1};
  Op op;
  op.kind = kind, op.name = name, op.in = {x};
  return add_op(std::move(op), std::move(shape), kind == OpKind::argmax ? DType::i32 : DType::f32);
}

int Graph::reshape(int x, std::vector<unsigned> shape, const std::string& name) {
  const Tensor& X = operand(x, "reshape");
  std::uint64_t n = 1;
  for (unsigned d : shape) n *= d;
  if (n != X.elements())
    throw std::invalid_argument(fmt::format("graph: reshape of '{}' {} to {}: the element counts differ", X.name,
                                            shape_text(X.shape), shape_text(shape)));
  Op op;
  op.kind = OpKind::reshape, op.name = name, op.in = {x};
  return add_op(std::move(op), std::move(shape), X.dtype);
}

int Graph::move(std::vector<int> inputs, std::vector<unsigned> shape, std::vector<Move> moves, const std::string& name) {
  const std::string n = name.empty() ? fmt::format("move{}", ops_.size()) : name;
  if (inputs.empty() || moves.empty()) throw std::invalid_argument(fmt::format("graph: {}: no inputs or no moves", n));
  const DType dt = operand(inputs[0], "move").dtype;
  std::uint64_t elements = 1;
  for (unsigned d : shape) elements *= d;
  std::vector<std::uint8_t> written(elements, 0);
  for (const Move& m : moves) {
    if (m.src >= inputs.size() || !m.len || !m.count)
      throw std::invalid_argument(fmt::format("graph: {}: a move from input {} of {} x {} elements", n, m.src, m.count, m.len));
    const Tensor& S = operand(inputs[m.src], "move");
    if (S.dtype != dt) throw std::invalid_argument(fmt::format("graph: {}: inputs of two formats", n));
    if (m.count > 1 && (m.from_stride < 1 || m.to_stride < m.len))
      throw std::invalid_argument(fmt::format("graph: {}: a move's runs overlap or repeat (strides {} and {})", n,
                                              m.from_stride, m.to_stride));
    const std::uint64_t last = std::uint64_t{m.count - 1};
    if (m.from + last * m.from_stride + m.len > S.elements() || m.to + last * m.to_stride + m.len > elements)
      throw std::invalid_argument(fmt::format("graph: {}: a move past the end of '{}' or of the output", n, S.name));
    for (std::uint64_t i = 0; i <= last; ++i)
      for (unsigned j = 0; j < m.len; ++j)
        if (written[m.to + i * m.to_stride + j]++)
          throw std::invalid_argument(fmt::format("graph: {}: element {} written twice", n, m.to + i * m.to_stride + j));
  }
  for (std::uint64_t i = 0; i < elements; ++i)
    if (!written[i]) throw std::invalid_argument(fmt::format("graph: {}: element {} is never written", n, i));
  Op op;
  op.kind = OpKind::move, op.name = n, op.in = std::move(inputs), op.moves = std::move(moves);
  return add_op(std::move(op), std::move(shape), dt);
}

int Graph::route(int logits, unsigned k, bool softmax_gates, const std::string& name) {
  const Tensor& L = operand(logits, "route");
  const std::string n = name.empty() ? fmt::format("route{}", ops_.size()) : name;
  if (L.dtype != DType::f32)
    throw std::invalid_argument(fmt::format("graph: {}: the logits '{}' must be f32, not {}", n, L.name, compiler::name(L.dtype)));
  if (k < 1 || k > 8 || k > L.cols())
    throw std::invalid_argument(fmt::format("graph: {}: k {} must be 1 to 8 and at most the {} experts of '{}'", n, k,
                                            L.cols(), L.name));
  Op op;
  op.kind = OpKind::route, op.name = n, op.in = {logits}, op.k = k, op.gate_softmax = softmax_gates;
  return add_op(std::move(op), {2, static_cast<unsigned>(L.rows()), k}, DType::i32);
}

int Graph::route_grouped(int choice, int weights, unsigned k, unsigned groups, unsigned topk_group, float scale, bool normalize,
                         const std::string& name) {
  const Tensor &C = operand(choice, "route_grouped"), &W = operand(weights, "route_grouped");
  const std::string n = name.empty() ? fmt::format("route{}", ops_.size()) : name;
  if (C.dtype != DType::f32 || W.dtype != DType::f32 || C.shape != W.shape)
    throw std::invalid_argument(fmt::format("graph: {}: '{}' {} and '{}' {} must be f32 of one shape", n, C.name,
                                            shape_text(C.shape), W.name, shape_text(W.shape)));
  const unsigned E = C.cols();
  if (!groups || groups > 64 || E % groups || !topk_group || topk_group > groups || k < 1 || k > 8 || k > E || E > 1024)
    throw std::invalid_argument(fmt::format("graph: {}: {} experts in {} groups (at most 64, dividing them), {} kept, top {} "
                                            "(1 to 8): not a routing the cores take",
                                            n, E, groups, topk_group, k));
  Op op;
  op.kind = OpKind::route, op.name = n, op.in = {choice, weights}, op.k = k, op.gate_softmax = false;
  op.groups = groups, op.topk_group = topk_group, op.route_scale = scale, op.normalize = normalize;
  return add_op(std::move(op), {2, static_cast<unsigned>(C.rows()), k}, DType::i32);
}

int Graph::all_reduce(int x, unsigned chips, bool tree, bool pull, const std::string& name) {
  const Tensor& X = operand(x, "all_reduce");
  if (chips == 0 || chips > 64) throw std::invalid_argument(fmt::format("graph: all_reduce of '{}': {} chips (1 to 64)", X.name, chips));
  if (X.dtype != DType::f32 && X.dtype != DType::bf16 && X.dtype != DType::e4m3)
    throw std::invalid_argument(fmt::format("graph: all_reduce of '{}': the engines sum f32, bf16 or e4m3, not {}", X.name, compiler::name(X.dtype)));
  if (X.role == Role::state) throw std::invalid_argument(fmt::format("graph: all_reduce of '{}': a cache is no operand", X.name));
  Op op;
  op.kind = OpKind::all_reduce, op.name = name, op.in = {x}, op.chips = chips, op.tree = tree, op.pull = pull;
  return add_op(std::move(op), X.shape, X.dtype);
}

int Graph::all_gather(int x, unsigned chips, bool pull, const std::string& name) {
  const Tensor& X = operand(x, "all_gather");
  if (chips == 0 || chips > 64) throw std::invalid_argument(fmt::format("graph: all_gather of '{}': {} chips (1 to 64)", X.name, chips));
  if (X.role == Role::state) throw std::invalid_argument(fmt::format("graph: all_gather of '{}': a cache is no operand", X.name));
  std::vector<unsigned> shape = X.shape.empty() ? std::vector<unsigned>{1} : X.shape;
  shape[0] *= chips;
  Op op;
  op.kind = OpKind::all_gather, op.name = name, op.in = {x}, op.chips = chips, op.pull = pull;
  return add_op(std::move(op), std::move(shape), X.dtype);
}

int Graph::all_to_all(int x, unsigned chips, bool pull, const std::string& name) {
  const Tensor& X = operand(x, "all_to_all");
  if (chips == 0 || chips > 64) throw std::invalid_argument(fmt::format("graph: all_to_all of '{}': {} chips (1 to 64)", X.name, chips));
  if (X.role == Role::state) throw std::invalid_argument(fmt::format("graph: all_to_all of '{}': a cache is no operand", X.name));
  if (X.shape.empty() || X.shape[0] % chips)
    throw std::invalid_argument(fmt::format("graph: all_to_all of '{}' {}: its first dimension is not {} equal blocks", X.name,
                                            shape_text(X.shape), chips));
  if (pull && X.role == Role::weight)
    throw std::invalid_argument(fmt::format("graph: all_to_all of '{}': a pulled operand lies at one address on every chip, a "
                                            "weight does not (push it)", X.name));
  Op op;
  op.kind = OpKind::all_to_all, op.name = name, op.in = {x}, op.chips = chips, op.pull = pull;
  return add_op(std::move(op), X.shape, X.dtype);
}

int Graph::gather_rows(int table, int indices, const std::string& name) {
  const Tensor &Tb = operand(table, "gather_rows"), &I = operand(indices, "gather_rows");
  const std::string n = name.empty() ? fmt::format("gather{}", ops_.size()) : name;
  if (Tb.shape.size() != 2)
    throw std::invalid_argument(fmt::format("graph: {}: the table '{}' {} must be 2-D (rows x D)", n, Tb.name, shape_text(Tb.shape)));
  if (I.dtype != DType::i32 && I.dtype != DType::f32)
    throw std::invalid_argument(fmt::format("graph: {}: the indices '{}' must be i32 or f32, not {}", n, I.name, compiler::name(I.dtype)));
  if (I.elements() > 65535)
    throw std::invalid_argument(fmt::format("graph: {}: {} indices (at most 65535)", n, I.elements()));
  if (std::uint64_t{Tb.cols()} * bytes(Tb.dtype) > (1u << 24))
    throw std::invalid_argument(fmt::format("graph: {}: rows of {} bytes (at most 16 MiB)", n, std::uint64_t{Tb.cols()} * bytes(Tb.dtype)));
  Op op;
  op.kind = OpKind::gather, op.name = n, op.in = {table, indices};
  std::vector<unsigned> shape = I.shape;
  shape.push_back(Tb.cols());
  return add_op(std::move(op), std::move(shape), Tb.dtype);
}

int Graph::kv_cache(const std::string& name, unsigned kv_heads, unsigned capacity, unsigned dim) {
  if (!kv_heads || !capacity || !dim || capacity > kPool || dim > 65535 || kv_heads > 65535)
    throw std::invalid_argument(fmt::format("graph: KV cache '{}': {} heads x {} positions x {} (1 to 65535 heads and values, 1 to {} "
                                            "positions)", name, kv_heads, capacity, dim, kPool));
  Tensor t;
  t.name = name, t.shape = {kv_heads, capacity, dim}, t.role = Role::state, t.dtype = DType::bf16;
  return add_tensor(std::move(t));
}

Op Graph::attention_op(int kcache, int vcache, int positions, unsigned heads, float scale, std::uint64_t T, const Paging& paging,
                       const std::string& n) const {
  const Tensor &KC = operand(kcache, "attention"), &VC = operand(vcache, "attention"), &P = operand(positions, "attention");
  auto bad = [&](const std::string& what) { return std::invalid_argument(fmt::format("graph: {}: {}", n, what)); };
  for (const Tensor* c : {&KC, &VC})
    if (c->role != Role::state || c->shape.size() != 3)
      throw bad(fmt::format("'{}' is no kv_cache()", c->name));
  const unsigned KVh = KC.shape[0], C = KC.shape[1];
  if (VC.shape[0] != KVh || VC.shape[1] != C)
    throw bad(fmt::format("the caches '{}' {} and '{}' {} disagree on heads or positions", KC.name, shape_text(KC.shape), VC.name,
                          shape_text(VC.shape)));
  if (!heads || heads > 65535 || !KVh || heads % KVh)
    throw bad(fmt::format("{} query heads over {} KV heads (a whole number of query heads per KV head)", heads, KVh));
  if (T > C) throw bad(fmt::format("{} rows in a cache of {} positions", T, C));
  const bool paged = paging.sequences >= 0 || paging.table >= 0 || paging.page;
  if (!paged && C > 65535)
    throw bad(fmt::format("an unpaged cache of {} positions (at most 65535; a paged one's pool holds up to {})", C, kPool));
  if (P.role != Role::input || P.elements() != T || (P.dtype != DType::f32 && P.dtype != DType::i32))
    throw bad(fmt::format("positions '{}' must be an input of {} values", P.name, T));
  if (!(scale > 0) || !std::isfinite(scale)) throw bad(fmt::format("scale {} (must be positive)", scale));
  Op op;
  op.kind = OpKind::attention, op.name = n, op.heads = heads, op.scale = scale;
  if (paged) {
    const Tensor &Sq = operand(paging.sequences, "attention"), &Tb = operand(paging.table, "attention");
    if (Sq.role != Role::input || Sq.elements() != T || (Sq.dtype != DType::f32 && Sq.dtype != DType::i32))
      throw bad(fmt::format("sequences '{}' must be an input of {} values", Sq.name, T));
    if (Tb.role != Role::input || Tb.shape.size() != 2 || (Tb.dtype != DType::f32 && Tb.dtype != DType::i32))
      throw bad(fmt::format("page table '{}' {} must be an input of sequences x pages", Tb.name, shape_text(Tb.shape)));
    if (!paging.page || C % paging.page || paging.page > 65535 || Tb.shape[1] > 65535 || Tb.elements() > 65536)
      throw bad(fmt::format("pages of {} positions in a cache of {} (a divisor of it), {} tables of {} pages (at most 65536 entries)",
                            paging.page, C, Tb.shape[0], Tb.shape[1]));
    op.page = paging.page;
  }
  return op;
}

int Graph::attention(int q, int k, int v, int kcache, int vcache, int positions, unsigned heads, float scale,
                     const std::string& name, bool rotary, const Paging& paging) {
  const Tensor &Q = operand(q, "attention"), &K = operand(k, "attention"), &V = operand(v, "attention");
  const std::string n = name.empty() ? fmt::format("attention{}", ops_.size()) : name;
  Op op = attention_op(kcache, vcache, positions, heads, scale, Q.rows(), paging, n);
  auto bad = [&](const std::string& what) { return std::invalid_argument(fmt::format("graph: {}: {}", n, what)); };
  const Tensor &KC = tensor(kcache), &VC = tensor(vcache);
  const unsigned KVh = KC.shape[0], dh = KC.shape[2], dv = VC.shape[2];
  const std::uint64_t T = Q.rows();
  for (const Tensor* x : {&Q, &K, &V})
    if (x->dtype != DType::f32) throw bad(fmt::format("'{}' must be f32, not {}", x->name, compiler::name(x->dtype)));
  if (Q.cols() != std::uint64_t{heads} * dh) throw bad(fmt::format("q '{}' {} needs {} x {} columns", Q.name, shape_text(Q.shape), heads, dh));
  if (K.rows() != T || K.cols() != std::uint64_t{KVh} * dh)
    throw bad(fmt::format("k '{}' {} needs {} rows of {} x {}", K.name, shape_text(K.shape), T, KVh, dh));
  if (V.rows() != T || V.cols() != std::uint64_t{KVh} * dv)
    throw bad(fmt::format("v '{}' {} needs {} rows of {} x {}", V.name, shape_text(V.shape), T, KVh, dv));
  if (rotary && dh % 2) throw bad(fmt::format("rotary embeddings need an even head_dim, not {}", dh));
  for (const Tensor* x : {&K, &V})
    if (x->cols() > kRowWord) throw bad(fmt::format("rows of {} values in '{}' (at most {})", x->cols(), x->name, kRowWord));
  op.in = {q, k, v, kcache, vcache, positions}, op.rotary = rotary;
  if (op.page) op.in.insert(op.in.end(), {paging.sequences, paging.table});
  std::vector<unsigned> shape = Q.shape;
  shape.back() = heads * dv;
  return add_op(std::move(op), std::move(shape), DType::f32);
}

int Graph::attention_qkv(int qkv, int kcache, int vcache, int positions, unsigned heads, float scale, bool rotary,
                         const std::string& name, const Paging& paging) {
  const Tensor& X = operand(qkv, "attention");
  const std::string n = name.empty() ? fmt::format("attention{}", ops_.size()) : name;
  Op op = attention_op(kcache, vcache, positions, heads, scale, X.rows(), paging, n);
  const Tensor &KC = tensor(kcache), &VC = tensor(vcache);
  const unsigned KVh = KC.shape[0], dh = KC.shape[2], dv = VC.shape[2];
  const std::uint64_t want = std::uint64_t{heads} * dh + std::uint64_t{KVh} * (dh + dv);
  if (X.dtype != DType::f32 || X.cols() != want || want > kRowWord)
    throw std::invalid_argument(fmt::format("graph: {}: qkv '{}' {} {} needs f32 columns of {} queries, then {} keys and {} values "
                                            "({} in all, at most 65535)",
                                            n, X.name, compiler::name(X.dtype), shape_text(X.shape), heads, KVh, KVh, want));
  if (rotary && dh % 2) throw std::invalid_argument(fmt::format("graph: {}: rotary embeddings need an even head_dim, not {}", n, dh));
  op.in = {qkv, qkv, qkv, kcache, vcache, positions}, op.rotary = rotary;
  if (op.page) op.in.insert(op.in.end(), {paging.sequences, paging.table});
  op.k_col = heads * dh, op.v_col = (heads + KVh) * dh;
  std::vector<unsigned> shape = X.shape;
  shape.back() = heads * dv;
  return add_op(std::move(op), std::move(shape), DType::f32);
}

int Graph::route_indices(int route, const std::string& name) { return route_plane(route, 0, name); }
int Graph::route_values(int route, const std::string& name) { return route_plane(route, 1, name); }

int Graph::route_plane(int route, unsigned plane, const std::string& name) {
  const Tensor& R = operand(route, "route plane");
  const int rp = producer(route);
  if (rp < 0 || ops_[static_cast<std::size_t>(rp)].kind != OpKind::route)
    throw std::invalid_argument(fmt::format("graph: '{}' is no route()'s output", R.name));
  const unsigned rows = R.shape[1], k = R.shape[2];
  Op op;
  op.kind = OpKind::move, op.name = name.empty() ? fmt::format("{}.{}", R.name, plane ? "values" : "indices") : name;
  op.in = {route}, op.plane_copy = true;
  op.moves.push_back({0, std::uint64_t{plane} * rows * k, 0, rows * k, 1, 0, 0});
  return add_op(std::move(op), {rows, k}, plane ? DType::f32 : DType::i32);
}

int Graph::moe(int x, int route, int w1, int w3, int w2, const std::string& name) {
  return moe_op(x, route, {w1, w3, w2}, {}, name);
}

int Graph::moe_scaled(int x, int route, int w1, int w1_scales, int w3, int w3_scales, int w2, int w2_scales,
                      const std::string& name) {
  return moe_op(x, route, {w1, w3, w2}, {w1_scales, w3_scales, w2_scales}, name);
}

int Graph::moe_local(int x, int route, int w1, int w3, int w2, unsigned chip, const std::string& name) {
  return moe_op(x, route, {w1, w3, w2}, {}, name, static_cast<int>(chip));
}

int Graph::moe_local_scaled(int x, int route, int w1, int w1_scales, int w3, int w3_scales, int w2, int w2_scales, unsigned chip,
                            const std::string& name) {
  return moe_op(x, route, {w1, w3, w2}, {w1_scales, w3_scales, w2_scales}, name, static_cast<int>(chip));
}

int Graph::moe_dispatched(int x, int route, std::array<int, 3> w, std::vector<int> scales, unsigned chips, unsigned chip,
                          unsigned capacity, const std::string& name, bool pull) {
  const int xs = all_to_all(dispatch(x, route, chips, capacity, name + ".dispatch"), chips, pull, name + ".sent");
  const int rs = all_to_all(dispatch_route(route, chips, capacity, name + ".dispatch_route"), chips, pull, name + ".sent_route");
  const int y = moe_op(xs, rs, w, std::move(scales), name, static_cast<int>(chip));
  return combine(all_to_all(y, chips, pull, name + ".sent_back"), route, chips, capacity, name + "_back");
}

unsigned Graph::dispatch_capacity(const char* what, int route, unsigned chips, unsigned capacity, const std::string& name) {
  const Tensor& R = operand(route, what);
  const int rp = producer(route);
  if (rp < 0 || ops_[static_cast<std::size_t>(rp)].kind != OpKind::route)
    throw std::invalid_argument(fmt::format("graph: {}: '{}' is no route()'s output", name, R.name));
  const unsigned T = R.shape[1], E = operand(ops_[static_cast<std::size_t>(rp)].in[0], what).cols();
  if (chips < 2 || chips > 64 || E % chips)
    throw std::invalid_argument(fmt::format("graph: {}: {} chips (2 to 64, dividing the {} experts)", name, chips, E));
  const unsigned c = capacity ? capacity : T;
  if (std::uint64_t{chips} * c > TKP_MOE_MAX_T)
    throw std::invalid_argument(fmt::format("graph: {}: capacity {} ({} chips' slots at most {} in all)", name, c, chips, TKP_MOE_MAX_T));
  return c;
}

int Graph::dispatch(int x, int route, unsigned chips, unsigned capacity, const std::string& name) {
  const Tensor &X = operand(x, "dispatch"), &R = operand(route, "dispatch");
  const std::string n = name.empty() ? fmt::format("dispatch{}", ops_.size()) : name;
  const unsigned c = dispatch_capacity("dispatch", route, chips, capacity, n);
  if (X.shape.size() != 2 || X.shape[0] != R.shape[1])
    throw std::invalid_argument(fmt::format("graph: {}: x '{}' {} must be 2-D with the route's {} rows", n, X.name, shape_text(X.shape),
                                            R.shape[1]));
  Op op;
  op.kind = OpKind::dispatch, op.name = n, op.in = {x, route}, op.chips = chips, op.capacity = c, op.k = R.shape[2];
  return add_op(std::move(op), {chips * c, X.cols()}, X.dtype);
}

int Graph::dispatch_route(int route, unsigned chips, unsigned capacity, const std::string& name) {
  const Tensor& R = operand(route, "dispatch_route");
  const std::string n = name.empty() ? fmt::format("dispatch_route{}", ops_.size()) : name;
  const unsigned c = dispatch_capacity("dispatch_route", route, chips, capacity, n);
  Op op;
  op.kind = OpKind::dispatch_route, op.name = n, op.in = {route}, op.chips = chips, op.capacity = c, op.k = R.shape[2];
  return add_op(std::move(op), {chips, 2, c, R.shape[2]}, DType::i32);
}

int Graph::combine(int y, int route, unsigned chips, unsigned capacity, const std::string& name) {
  const Tensor &Y = operand(y, "combine"), &R = operand(route, "combine");
  const std::string n = name.empty() ? fmt::format("combine{}", ops_.size()) : name;
  const unsigned c = dispatch_capacity("combine", route, chips, capacity, n);
  if (Y.shape.size() != 2 || Y.shape[0] != chips * c || Y.dtype != DType::f32)
    throw std::invalid_argument(fmt::format("graph: {}: y '{}' {} {} must be f32 [{}, D] (the chips' slots)", n, Y.name,
                                            compiler::name(Y.dtype), shape_text(Y.shape), chips * c));
  Op op;
  op.kind = OpKind::combine, op.name = n, op.in = {y, route}, op.chips = chips, op.capacity = c, op.k = R.shape[2];
  return add_op(std::move(op), {R.shape[1], Y.cols()}, DType::f32);
}

int Graph::moe_op(int x, int route, std::array<int, 3> w, std::vector<int> scales, const std::string& name, int ep_chip) {
  const int w1 = w[0], w3 = w[1], w2 = w[2];
  const bool scaled = !scales.empty();
  const Tensor &X = operand(x, "moe"), &R = operand(route, "moe");
  const Tensor &W1 = operand(w1, "moe"), &W3 = operand(w3, "moe"), &W2 = operand(w2, "moe");
  const std::string n = name.empty() ? fmt::format("moe{}", ops_.size()) : name;
  int rp = producer(route);
  // moe_local: the route a dispatch_route()'s, brought by an all_to_all
  // (or not: one chip's own slots).
  unsigned ep_chips = 0;
  if (ep_chip >= 0) {
    if (rp >= 0 && ops_[static_cast<std::size_t>(rp)].kind == OpKind::all_to_all) rp = producer(ops_[static_cast<std::size_t>(rp)].in[0]);
    if (rp < 0 || ops_[static_cast<std::size_t>(rp)].kind != OpKind::dispatch_route)
      throw std::invalid_argument(fmt::format("graph: {}: '{}' is no dispatch_route()'s output (nor its all_to_all's)", n, R.name));
    const Op& d = ops_[static_cast<std::size_t>(rp)];
    ep_chips = d.chips;
    if (static_cast<unsigned>(ep_chip) >= ep_chips)
      throw std::invalid_argument(fmt::format("graph: {}: chip {} of {}", n, ep_chip, ep_chips));
    rp = producer(d.in[0]);
  } else if (rp < 0 || ops_[static_cast<std::size_t>(rp)].kind != OpKind::route) {
    throw std::invalid_argument(fmt::format("graph: {}: '{}' is no route()'s output", n, R.name));
  }
  if (X.dtype != DType::bf16)
    throw std::invalid_argument(fmt::format("graph: {}: x '{}' must be stored bf16 (cast it), not {}", n, X.name, compiler::name(X.dtype)));
  const unsigned T = static_cast<unsigned>(X.rows()), D = X.cols();
  const unsigned route_rows = ep_chips ? R.shape[0] * R.shape[2] : R.shape[1];
  if (route_rows != T)
    throw std::invalid_argument(fmt::format("graph: {}: x '{}' has {} rows, the route '{}' {}", n, X.name, T, R.name, route_rows));
  const unsigned E = operand(ops_[static_cast<std::size_t>(rp)].in[0], "moe").cols() / (ep_chips ? ep_chips : 1);
  const unsigned F = W1.shape.size() == 3 ? W1.shape[2] : 0;
  const DType wt = scaled ? W1.dtype : DType::bf16;
  if (scaled && wt != DType::e4m3 && wt != DType::e5m2)
    throw std::invalid_argument(fmt::format("graph: {}: w1 '{}' must hold e4m3 or e5m2 codes, not {}", n, W1.name, compiler::name(wt)));
  auto check = [&](const Tensor& w, unsigned d1, unsigned d2, const char* want) {
    if (w.role != Role::weight || w.dtype != wt || w.shape != std::vector<unsigned>{E, d1, d2} || !F)
      throw std::invalid_argument(fmt::format("graph: {}: '{}' {} {} must be a {} weight {} (E {}, D {}, F as w1's)", n, w.name,
                                              compiler::name(w.dtype), shape_text(w.shape), compiler::name(wt), want, E, D));
  };
  check(W1, D, F, "[E, D, F]");
  check(W3, D, F, "[E, D, F]");
  check(W2, F, D, "[E, F, D]");
  if (scaled) {
    if (D % kScaleBlock || F % kScaleBlock)
      throw std::invalid_argument(fmt::format("graph: {}: D ({}) and F ({}) must be multiples of {} (the blocks)", n, D, F, kScaleBlock));
    const unsigned dims[3][2] = {{D, F}, {D, F}, {F, D}};
    for (int i = 0; i < 3; ++i) {
      const Tensor& S = operand(scales[static_cast<std::size_t>(i)], "moe");
      const std::vector<unsigned> want = {E, dims[i][0] / kScaleBlock, dims[i][1] / kScaleBlock};
      if (S.role != Role::weight || S.dtype != DType::f32 || S.shape != want)
        throw std::invalid_argument(fmt::format("graph: {}: scales '{}' must be an f32 weight {} (a scale per {} x {} block), not {} {}",
                                                n, S.name, shape_text(want), kScaleBlock, kScaleBlock, compiler::name(S.dtype),
                                                shape_text(S.shape)));
    }
  }
  Op op;
  op.kind = OpKind::moe, op.name = n, op.in = {x, route, w1, w3, w2}, op.k = R.shape.back();
  if (ep_chips) op.ep_chips = ep_chips, op.ep_chip = static_cast<unsigned>(ep_chip), op.capacity = R.shape[2];
  op.in.insert(op.in.end(), scales.begin(), scales.end());
  op.format = wt;
  std::vector<unsigned> shape = X.shape;
  return add_op(std::move(op), std::move(shape), DType::f32);
}

void Graph::output(int t) {
  const Tensor& T = operand(t, "output");
  if (T.role != Role::intermediate)
    throw std::invalid_argument(fmt::format("graph: output '{}' is an input, a weight or state, not computed", T.name));
  if (!is_output(t)) outputs_.push_back(t);
}

int Graph::producer(int t) const {
  for (std::size_t i = 0; i < ops_.size(); ++i)
    if (ops_[i].out == t) return static_cast<int>(i);
  return -1;
}

std::vector<int> Graph::consumers(int t) const {
  std::vector<int> c;
  for (std::size_t i = 0; i < ops_.size(); ++i)
    if (std::find(ops_[i].in.begin(), ops_[i].in.end(), t) != ops_[i].in.end()) c.push_back(static_cast<int>(i));
  return c;
}

void Graph::store_as(int t, DType dtype) {
  Tensor& T = tensors_.at(static_cast<std::size_t>(t));
  if (T.role != Role::intermediate || T.dtype != DType::f32 || is_output(t))
    throw std::logic_error(fmt::format("graph: '{}' is no FP32 intermediate to store narrower", T.name));
  T.dtype = dtype;
}

void Graph::split_experts(int op, unsigned slices, std::vector<unsigned> chips, unsigned chunk, unsigned expert_chips) {
  Op& o = ops_.at(static_cast<std::size_t>(op));
  const unsigned F = tensor(o.in[2]).shape[2], D = tensor(o.in[2]).shape[1];
  if (o.kind != OpKind::moe || !slices || F % slices || (block_scaled(o) && (F / slices) % kScaleBlock) ||
      (!chips.empty() && chips.size() != slices) || (chunk && (D % chunk || (block_scaled(o) && chunk % kScaleBlock))) ||
      (expert_chips > 1 && !chips.empty()))
    throw std::logic_error(fmt::format("graph: {}: no moe op to split in {} slices over {} chips in chunks of {}{}", o.name, slices,
                                       chips.size(), chunk,
                                       expert_chips > 1 ? fmt::format(", its experts over {} chips", expert_chips) : ""));
  o.slices = slices;
  o.slice_chips = std::move(chips);
  o.moe_chunk = chunk;
  o.expert_chips = expert_chips > 1 ? expert_chips : 0;
}

bool Graph::is_output(int t) const { return std::find(outputs_.begin(), outputs_.end(), t) != outputs_.end(); }

}  // namespace tessera::compiler
