#include "onnx_import.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <limits>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>

#include "engines/num/formats.hpp"

namespace tessera::onnx_import {

using compiler::DType;
using compiler::OpKind;
using TP = onnx::TensorProto;

std::uint64_t HostTensor::elements() const {
  std::uint64_t n = 1;
  for (unsigned d : shape) n *= d;
  return n;
}

namespace {

const char* type_name(int t) {
  switch (t) {
    case TP::FLOAT: return "FLOAT";
    case TP::UINT8: return "UINT8";
    case TP::INT8: return "INT8";
    case TP::UINT16: return "UINT16";
    case TP::INT16: return "INT16";
    case TP::INT32: return "INT32";
    case TP::INT64: return "INT64";
    case TP::STRING: return "STRING";
    case TP::BOOL: return "BOOL";
    case TP::FLOAT16: return "FLOAT16";
    case TP::DOUBLE: return "DOUBLE";
    case TP::UINT32: return "UINT32";
    case TP::UINT64: return "UINT64";
    case TP::BFLOAT16: return "BFLOAT16";
    default: return "an unknown type";
  }
}

bool is_float(int t) { return t == TP::FLOAT || t == TP::FLOAT16 || t == TP::BFLOAT16; }
bool is_int(int t) { return t == TP::INT64 || t == TP::INT32 || t == TP::BOOL; }

std::string shape_text(const std::vector<unsigned>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

}  // namespace

HostTensor read_tensor(const onnx::TensorProto& t) {
  HostTensor h;
  h.name = t.name(), h.elem_type = t.data_type();
  for (std::int64_t d : t.dims()) {
    if (d < 0 || d > (1ll << 31)) throw std::runtime_error(fmt::format("tensor '{}': dimension {}", t.name(), d));
    h.shape.push_back(static_cast<unsigned>(d));
  }
  const std::uint64_t n = h.elements();
  if (t.data_location() == TP::EXTERNAL) throw std::runtime_error(fmt::format("tensor '{}': external data", t.name()));
  const std::string& raw = t.raw_data();
  auto need = [&](std::uint64_t have) {
    if (have != n)
      throw std::runtime_error(fmt::format("tensor '{}' {}: {} {} values for {} elements", t.name(), shape_text(h.shape),
                                           have, type_name(h.elem_type), n));
  };
  // The raw data's elements of `size` bytes each, as unsigned codes.
  auto raw_codes = [&](unsigned size) {
    if (raw.size() % size) throw std::runtime_error(fmt::format("tensor '{}': raw data of {} bytes", t.name(), raw.size()));
    need(raw.size() / size);
    std::vector<std::uint64_t> codes(n);
    for (std::uint64_t i = 0; i < n; ++i) std::memcpy(&codes[i], raw.data() + size * i, size);
    return codes;
  };
  switch (h.elem_type) {
    case TP::FLOAT:
      if (!raw.empty()) {
        for (std::uint64_t c : raw_codes(4)) {
          const auto bits = static_cast<std::uint32_t>(c);
          float v;
          std::memcpy(&v, &bits, 4);
          h.f.push_back(v);
        }
      } else {
        need(static_cast<std::uint64_t>(t.float_data_size()));
        h.f.assign(t.float_data().begin(), t.float_data().end());
      }
      break;
    case TP::FLOAT16: case TP::BFLOAT16: {
      const num::Format f = h.elem_type == TP::FLOAT16 ? num::Format::FP16 : num::Format::BF16;
      std::vector<std::uint64_t> codes;
      if (!raw.empty()) {
        codes = raw_codes(2);
      } else {
        need(static_cast<std::uint64_t>(t.int32_data_size()));
        for (std::int32_t c : t.int32_data()) codes.push_back(static_cast<std::uint32_t>(c) & 0xffff);
      }
      for (std::uint64_t c : codes) h.f.push_back(static_cast<float>(num::decode(f, static_cast<std::uint32_t>(c))));
      break;
    }
    case TP::INT64: case TP::INT32: case TP::BOOL: {
      const unsigned size = h.elem_type == TP::INT64 ? 8 : h.elem_type == TP::INT32 ? 4 : 1;
      if (!raw.empty()) {
        for (std::uint64_t c : raw_codes(size))  // sign-extended from its width
          h.i.push_back(size == 8 ? static_cast<std::int64_t>(c) : size == 4 ? static_cast<std::int32_t>(c) : static_cast<std::int64_t>(c));
      } else if (h.elem_type == TP::INT64) {
        need(static_cast<std::uint64_t>(t.int64_data_size()));
        h.i.assign(t.int64_data().begin(), t.int64_data().end());
      } else {
        need(static_cast<std::uint64_t>(t.int32_data_size()));
        h.i.assign(t.int32_data().begin(), t.int32_data().end());
      }
      break;
    }
    default:
      throw Unsupported(t.name(), "tensor", fmt::format("data type {}", type_name(h.elem_type)));
  }
  return h;
}

HostTensor read_tensor_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TP t;
  if (!f || !t.ParseFromIstream(&f)) throw std::runtime_error(fmt::format("{}: not a readable TensorProto", path));
  try {
    return read_tensor(t);
  } catch (const Unsupported&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
  }
}

void write_tensor_file(const HostTensor& h, const std::string& path) {
  TP t;
  t.set_name(h.name);
  t.set_data_type(h.elem_type);
  for (unsigned d : h.shape) t.add_dims(d);
  std::string raw;
  if (h.elem_type == TP::FLOAT) {
    raw.assign(reinterpret_cast<const char*>(h.f.data()), h.f.size() * 4);
  } else if (h.elem_type == TP::FLOAT16 || h.elem_type == TP::BFLOAT16) {
    const num::Format f = h.elem_type == TP::FLOAT16 ? num::Format::FP16 : num::Format::BF16;
    for (float v : h.f) {
      const auto c = static_cast<std::uint16_t>(num::encode(f, v));
      raw.append(reinterpret_cast<const char*>(&c), 2);
    }
  } else if (h.elem_type == TP::INT64) {
    raw.assign(reinterpret_cast<const char*>(h.i.data()), h.i.size() * 8);
  } else {
    throw std::runtime_error(fmt::format("{}: writing {} is not supported", path, type_name(h.elem_type)));
  }
  t.set_raw_data(raw);
  std::ofstream f(path, std::ios::binary);
  if (!f || !t.SerializeToOstream(&f)) throw std::runtime_error(fmt::format("{}: cannot be written", path));
}

std::string compare(const HostTensor& want, const HostTensor& got, double rtol, double atol) {
  if (want.elem_type != got.elem_type)
    return fmt::format("{} expected, {} produced", type_name(want.elem_type), type_name(got.elem_type));
  if (want.shape != got.shape) return fmt::format("shape {} expected, {} produced", shape_text(want.shape), shape_text(got.shape));
  const std::size_t n = want.elements();
  auto at = [](const HostTensor& t, std::size_t i) { return t.f.empty() ? static_cast<double>(t.i.at(i)) : t.f.at(i); };
  for (std::size_t i = 0; i < n; ++i) {
    const double w = at(want, i), g = at(got, i);
    const bool ok = std::isnan(w) ? std::isnan(g) : std::isinf(w) ? g == w : std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok) return fmt::format("element {}: {} expected, {} produced", i, w, g);
  }
  return "";
}

onnx::ModelProto read_model(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  onnx::ModelProto m;
  if (!f) throw std::runtime_error(fmt::format("{}: cannot be read", path));
  if (!m.ParseFromIstream(&f)) throw std::runtime_error(fmt::format("{}: not an ONNX model (no ModelProto parses)", path));
  return m;
}

Unsupported::Unsupported(const std::string& node, const std::string& op_type, const std::string& why_)
    : std::runtime_error(op_type == "tensor" || op_type == "input" ? fmt::format("{} '{}': {}", op_type, node, why_)
                                                                 : fmt::format("node '{}' ({}): {}", node, op_type, why_)),
      op(op_type), why(why_) {}

namespace {

// What a name stands for while importing: a tensor of the graph, or a
// value known now.
struct Value {
  int tensor = -1;              // the graph's, or -1: constant
  std::vector<unsigned> shape;  // the ONNX shape
  HostTensor c;                 // a constant's data
  bool constant() const { return tensor < 0; }
};

std::uint64_t count(const std::vector<unsigned>& s) {
  std::uint64_t n = 1;
  for (unsigned d : s) n *= d;
  return n;
}

class Importer {
 public:
  Importer(const onnx::ModelProto& m, Precision p) : m_(m), precision_(p) {
    for (const auto& o : m.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = static_cast<int>(o.version());
  }

  Imported run(const std::map<std::string, HostTensor>& inputs) {
    const onnx::GraphProto& gp = m_.graph();
    // Opsets from 7 on (numpy broadcasting): an op whose attributes or
    // defaults changed since is handled per opset or refused by its attribute.
    if (opset_ < 7 || opset_ > 17)
      throw Unsupported("(model)", "opset", fmt::format("opset {} (7 to 17 are supported)", opset_));
    std::set<std::string> inits;
    for (const TP& t : gp.initializer()) {
      Value v;
      v.c = read_tensor(t);
      v.shape = v.c.shape;
      values_[t.name()] = std::move(v);
      inits.insert(t.name());
    }
    for (const auto& in : gp.input()) {
      if (inits.count(in.name())) continue;
      if (!in.type().has_tensor_type()) throw Unsupported(in.name(), "input", "a sequence, map or optional value");
      const auto it = inputs.find(in.name());
      if (it == inputs.end()) throw std::invalid_argument(fmt::format("input '{}' is missing", in.name()));
      const HostTensor& h = it->second;
      const int declared = in.type().tensor_type().elem_type();
      if (declared != h.elem_type)
        throw std::invalid_argument(fmt::format("input '{}' is {}, the model declares {}", in.name(),
                                                type_name(h.elem_type), type_name(declared)));
      // Dynamic axes are bound by the input; fixed ones must agree.
      const auto& dims = in.type().tensor_type().shape().dim();
      if (in.type().tensor_type().has_shape() && static_cast<std::size_t>(dims.size()) != h.shape.size())
        throw std::invalid_argument(fmt::format("input '{}' has {} dimensions, the model declares {}", in.name(),
                                                h.shape.size(), dims.size()));
      for (int k = 0; k < dims.size(); ++k)
        if (dims[k].has_dim_value() && static_cast<unsigned>(dims[k].dim_value()) != h.shape[static_cast<std::size_t>(k)])
          throw std::invalid_argument(fmt::format("input '{}' is {}, the model declares dimension {} as {}", in.name(),
                                                  shape_text(h.shape), k, dims[k].dim_value()));
      Value v;
      v.shape = h.shape;
      if (is_float(h.elem_type)) {
        if (h.elem_type != TP::FLOAT) throw Unsupported(in.name(), "input", fmt::format("data type {}", type_name(h.elem_type)));
        if (!count(h.shape)) throw Unsupported(in.name(), "input", "an empty tensor");
        v.tensor = g_.input(in.name(), ir_shape(h.shape));
        given_[v.tensor] = h;  // what a parameter input (Resize's scales) is bound to
        out_.inputs.push_back(in.name());
      } else {
        v.c = h;  // integers: known now (shapes, axes, indices)
      }
      values_[in.name()] = std::move(v);
    }
    for (const onnx::NodeProto& n : gp.node()) node(n);
    for (const auto& o : gp.output()) {
      const Value& v = value(o.name(), "(outputs)", "output");
      Imported::Output out;
      out.name = o.name(), out.shape = v.shape;
      out.elem_type = v.constant() ? v.c.elem_type : elem_type_.count(v.tensor) ? elem_type_.at(v.tensor) : TP::FLOAT;
      if (v.constant()) {  // known now: nothing to run for it
        out.known = v.c, out.known.name = o.name();
        out_.outputs.push_back(out);
        continue;
      }
      out.tensor = v.tensor;
      // An output the graph already has, or one it does not compute, is copied.
      if (g_.tensor(v.tensor).role != compiler::Role::intermediate || g_.is_output(v.tensor))
        out.tensor = g_.reshape(v.tensor, g_.tensor(v.tensor).shape, fresh("copy"));
      g_.output(out.tensor);
      out.tensor_name = g_.tensor(out.tensor).name;
      out_.outputs.push_back(out);
    }
    out_.graph = std::move(g_);
    return std::move(out_);
  }

 private:
  static const std::map<std::string, std::string>& reductions() {
    static const std::map<std::string, std::string> r{
        {"ReduceSum", "sum"},   {"ReduceMean", "mean"}, {"ReduceMax", "max"},       {"ReduceMin", "min"},
        {"ReduceL1", "l1"},     {"ReduceL2", "l2"},     {"ReduceSumSquare", "sumsq"}, {"ReduceLogSum", "logsum"},
        {"ReduceLogSumExp", "logsumexp"}};
    return r;
  }
  static std::vector<unsigned> ir_shape(const std::vector<unsigned>& s) { return s.empty() ? std::vector<unsigned>{1} : s; }
  std::string fresh(const char* what) { return fmt::format("{}.{}", what, fresh_++); }

  const Value& value(const std::string& name, const std::string& node, const std::string& op) const {
    const auto it = values_.find(name);
    if (it == values_.end()) throw std::invalid_argument(fmt::format("node '{}' ({}): no value '{}'", node, op, name));
    return it->second;
  }

  // A value as a graph tensor: constants become FP32 weights.
  int tensor(const Value& v, const std::string& node, const std::string& op) {
    if (!v.constant()) return v.tensor;
    if (!is_float(v.c.elem_type)) throw Unsupported(node, op, fmt::format("{} data", type_name(v.c.elem_type)));
    if (!v.c.elements()) throw Unsupported(node, op, "an empty tensor");
    return g_.weight(fresh("const"), ir_shape(v.shape), v.c.f);
  }
  int scalar(float x) { return g_.weight(fresh("const"), {1}, {x}); }

  static std::vector<std::uint64_t> strides(const std::vector<unsigned>& s) {
    std::vector<std::uint64_t> st(s.size(), 1);
    for (std::size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
    return st;
  }
  static std::vector<unsigned> unravel(std::uint64_t o, const std::vector<unsigned>& s) {
    std::vector<unsigned> idx(s.size());
    for (std::size_t i = s.size(); i-- > 0;) idx[i] = static_cast<unsigned>(o % s[i]), o /= s[i];
    return idx;
  }

  // A value of `shape` whose element o is element src_of(o).second of input
  // src_of(o).first: computed now where the inputs are known, else a move
  // (its runs coalesced into strided copies).
  using Source = std::pair<unsigned, std::uint64_t>;
  // The move is named `tensor_name` (empty: a fresh name).
  Value remap(const std::vector<const Value*>& ins, std::vector<unsigned> shape,
              const std::function<Source(std::uint64_t)>& src_of, const std::string& node, const std::string& op,
              const std::string& tensor_name = "") {
    Value r;
    r.shape = shape;
    const std::uint64_t n = count(shape);
    if (!n) throw Unsupported(node, op, "an empty tensor");
    if (std::all_of(ins.begin(), ins.end(), [](const Value* v) { return v->constant(); })) {
      r.c.elem_type = ins[0]->c.elem_type, r.c.shape = shape;
      for (const Value* v : ins)
        if (is_int(v->c.elem_type) != is_int(r.c.elem_type)) throw Unsupported(node, op, "inputs of two types");
      for (std::uint64_t o = 0; o < n; ++o) {
        const auto [k, f] = src_of(o);
        if (is_int(r.c.elem_type)) r.c.i.push_back(ins[k]->c.i.at(f));
        else r.c.f.push_back(ins[k]->c.f.at(f));
      }
      return r;
    }
    std::vector<int> tensors;
    for (const Value* v : ins) tensors.push_back(tensor(*v, node, op));
    std::vector<compiler::Move> moves;
    compiler::Move run{~0u, 0, 0, 0, 1, 0, 0};  // the run being grown
    auto close = [&] {
      if (!run.len) return;
      compiler::Move* m = moves.empty() ? nullptr : &moves.back();
      if (m && m->src == run.src && m->len == run.len && run.from > m->from && run.to >= m->to + m->len &&
          (m->count == 1 || (run.from == m->from + m->count * m->from_stride && run.to == m->to + m->count * m->to_stride))) {
        if (m->count == 1) m->from_stride = run.from - m->from, m->to_stride = run.to - m->to;
        ++m->count;
      } else {
        moves.push_back(run);
      }
      if (moves.size() > (1u << 16)) throw Unsupported(node, op, "a data movement of more than 65536 strided copies");
    };
    for (std::uint64_t o = 0; o < n; ++o) {
      const auto [k, f] = src_of(o);
      if (run.len && run.src == k && run.from + run.len == f && run.to + run.len == o) {
        ++run.len;
        continue;
      }
      close();
      run = {k, f, o, 1, 1, 0, 0};
    }
    close();
    r.tensor = g_.move(tensors, ir_shape(shape), moves, tensor_name.empty() ? fresh("move") : tensor_name);
    return r;
  }

  static bool foldable(const std::string& op) {
    static const std::set<std::string> ops{"Not", "And", "Or", "Xor", "Equal", "Less", "Greater", "LessOrEqual",
                                           "GreaterOrEqual", "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Cast", "Max",
                                           "Min", "Range", "Sqrt", "CastLike"};
    return ops.count(op) > 0;
  }
  // An elementwise op (numpy's broadcasting) or Range on values known now,
  // computed on the host in their types.
  Value fold(const std::string& op, const std::vector<const Value*>& ins, std::int64_t cast_to, const std::string& node) {
    for (const Value* v : ins)
      if (v && !is_float(v->c.elem_type) && !is_int(v->c.elem_type)) throw Unsupported(node, op, "a value of another type");
    auto at = [](const Value& v, std::uint64_t i) { return v.c.f.empty() ? static_cast<double>(v.c.i.at(i)) : v.c.f.at(i); };
    Value r;
    if (op == "Range") {
      const double start = at(*ins.at(0), 0), limit = at(*ins.at(1), 0), delta = at(*ins.at(2), 0);
      if (delta == 0) throw std::invalid_argument(fmt::format("node '{}' (Range): a delta of 0", node));
      const auto n = static_cast<std::int64_t>(std::max(0.0, std::ceil((limit - start) / delta)));
      r.c.elem_type = ins[0]->c.elem_type;
      for (std::int64_t k = 0; k < n; ++k) {
        const double v = start + static_cast<double>(k) * delta;
        if (is_int(r.c.elem_type)) r.c.i.push_back(static_cast<std::int64_t>(v));
        else r.c.f.push_back(static_cast<float>(v));
      }
      r.shape = r.c.shape = {static_cast<unsigned>(n)};
      return r;
    }
    const Value& a = *ins.at(0);
    const Value* b = ins.size() > 1 ? ins[1] : nullptr;
    bool ok = true;
    r.shape = b && op != "CastLike" ? broadcast(a.shape, b->shape, &ok) : a.shape;
    if (!ok) throw std::invalid_argument(fmt::format("node '{}' ({}): shapes that do not broadcast", node, op));
    static const std::set<std::string> logic{"Not", "And", "Or", "Xor", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"};
    r.c.elem_type = logic.count(op) ? TP::BOOL : op == "Cast" ? static_cast<int>(cast_to) : op == "CastLike" ? b->c.elem_type : a.c.elem_type;
    if (!is_float(r.c.elem_type) && !is_int(r.c.elem_type)) throw Unsupported(node, op, "a cast to another type");
    auto flat = [&](const std::vector<unsigned>& idx, const std::vector<unsigned>& s) {
      const auto st = strides(s);
      std::uint64_t f = 0;
      for (std::size_t k = 0; k < s.size(); ++k) f += (s[k] == 1 ? 0 : idx[idx.size() - s.size() + k]) * st[k];
      return f;
    };
    const bool ints = is_int(r.c.elem_type) && is_int(a.c.elem_type);
    for (std::uint64_t o = 0; o < count(r.shape); ++o) {
      const auto idx = unravel(o, r.shape);
      const double x = at(a, flat(idx, a.shape)), y = b && op != "CastLike" ? at(*b, flat(idx, b->shape)) : 0;
      double v = 0;
      if (op == "Not") v = x == 0;
      else if (op == "And") v = x != 0 && y != 0;
      else if (op == "Or") v = x != 0 || y != 0;
      else if (op == "Xor") v = (x != 0) != (y != 0);
      else if (op == "Equal") v = x == y;
      else if (op == "Less") v = x < y;
      else if (op == "Greater") v = x > y;
      else if (op == "LessOrEqual") v = x <= y;
      else if (op == "GreaterOrEqual") v = x >= y;
      else if (op == "Add") v = x + y;
      else if (op == "Sub") v = x - y;
      else if (op == "Mul") v = x * y;
      else if (op == "Div") v = ints ? std::trunc(x / y) : x / y;
      else if (op == "Neg") v = -x;
      else if (op == "Abs") v = std::fabs(x);
      else if (op == "Max") v = std::max(x, y);
      else if (op == "Min") v = std::min(x, y);
      else if (op == "Sqrt") v = std::sqrt(x);
      else v = x;  // Cast, CastLike
      if (r.c.elem_type == TP::BOOL) r.c.i.push_back(v != 0);
      else if (is_int(r.c.elem_type)) r.c.i.push_back(static_cast<std::int64_t>(v));
      else r.c.f.push_back(static_cast<float>(num::quantize(r.c.elem_type == TP::FLOAT ? num::Format::FP32 : r.c.elem_type == TP::FLOAT16 ? num::Format::FP16 : num::Format::BF16, v)));
    }
    r.c.shape = r.shape;
    return r;
  }

  // A matmul with batch dimensions on both sides (numpy's broadcasting of
  // them): one batched matmul over the broadcast batches.
  Value batched_matmul(const Value& a, const Value& b, const std::string& node, const std::string& op) {
    if (b.shape.size() < 2 || a.shape[a.shape.size() - 1] != b.shape[b.shape.size() - 2])
      throw std::invalid_argument(fmt::format("node '{}' ({}): {} x {}: K differs", node, op, shape_text(a.shape), shape_text(b.shape)));
    const std::vector<unsigned> ab(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
    bool ok;
    const std::vector<unsigned> batch = broadcast(ab, bb, &ok);
    if (!ok) throw std::invalid_argument(fmt::format("node '{}' ({}): batches {} and {}", node, op, shape_text(ab), shape_text(bb)));
    const unsigned M = a.shape[a.shape.size() - 2], K = a.shape.back(), N = b.shape.back();
    const std::uint64_t batches = count(batch);
    std::vector<unsigned> shape = batch;
    shape.push_back(M), shape.push_back(N);
    if (batches > std::numeric_limits<unsigned>::max())
      throw Unsupported(node, op, fmt::format("{} batches (at most {})", batches, std::numeric_limits<unsigned>::max()));
    // An operand that broadcasts is moved out to every batch (a constant's
    // copies folded here): then one batched matmul, a's rows batch by batch
    // and b as its G x K x N matrices.
    auto expand = [&](const Value& v, const std::vector<unsigned>& s, unsigned rows, unsigned cols) {
      if (s == batch) return v;
      const std::uint64_t size = std::uint64_t{rows} * cols;
      const auto st = strides(s);
      std::vector<unsigned> full = batch;
      full.push_back(rows), full.push_back(cols);
      return remap({&v}, full, [&](std::uint64_t o) {
        const auto idx = unravel(o / size, batch);
        std::uint64_t f = 0;  // batch o / size's matrix in v
        for (std::size_t k = 0; k < s.size(); ++k) f += (s[k] == 1 ? 0 : idx[idx.size() - s.size() + k]) * st[k];
        return Source{0, f * size + o % size};
      }, node, op);
    };
    const Value a_all = expand(a, ab, M, K);
    Value b3 = expand(b, bb, K, N);
    const std::vector<unsigned> s3 = {static_cast<unsigned>(batches), K, N};
    if (b3.constant()) b3.shape = s3, b3.c.shape = s3;
    else if (g_.tensor(b3.tensor).shape != s3) b3.tensor = g_.reshape(b3.tensor, s3, fresh("view")), b3.shape = s3;
    Value y;
    y.shape = shape, y.tensor = matmul(rows_of(a_all, node, op), b3, node, op);
    return y;
  }

  // Softmax over axis a: the last as it is, another brought last and back;
  // `legacy` (before opset 13): over all the axes from a on, as one row.
  Value softmax(const Value& x, std::size_t a, bool legacy, const std::string& node, const std::string& op) {
    Value r;
    r.shape = x.shape;
    if (x.shape.empty() || a + 1 == x.shape.size()) {
      r.tensor = g_.softmax(rows_of(x, node, op));
    } else if (legacy) {
      r.tensor = g_.reshape(g_.softmax(as_2d(x, a, node, op)), ir_shape(x.shape), fresh("view"));
    } else {
      const std::vector<std::size_t> p = to_end(x.shape.size(), {a});
      Value t = permute(x, p, node, op);
      t.tensor = g_.softmax(t.tensor);
      std::vector<std::size_t> back(p.size());
      for (std::size_t i = 0; i < p.size(); ++i) back[p[i]] = i;
      r = permute(t, back, node, op);
    }
    return r;
  }

  // x with its axes in the order `perm` gives (out axis i is x's perm[i]).
  Value permute(const Value& x, const std::vector<std::size_t>& perm, const std::string& node, const std::string& op) {
    std::vector<unsigned> shape;
    for (std::size_t p : perm) shape.push_back(x.shape.at(p));
    const std::vector<std::uint64_t> st = strides(x.shape);
    return remap({&x}, shape, [&](std::uint64_t o) {
      const auto idx = unravel(o, shape);
      std::uint64_t f = 0;
      for (std::size_t i = 0; i < idx.size(); ++i) f += idx[i] * st[perm[i]];
      return Source{0, f};
    }, node, op);
  }
  // The axes of a rank but those in `last`, then those: a permutation that
  // brings `last` to the end, the others in their order.
  static std::vector<std::size_t> to_end(std::size_t rank, const std::set<std::size_t>& last) {
    std::vector<std::size_t> p;
    for (std::size_t i = 0; i < rank; ++i)
      if (!last.count(i)) p.push_back(i);
    p.insert(p.end(), last.begin(), last.end());
    return p;
  }
  // x seen as [product of the axes before `a`, product of the rest].
  int as_2d(const Value& x, std::size_t a, const std::string& node, const std::string& op) {
    const int t = tensor(x, node, op);
    const std::vector<unsigned> s{static_cast<unsigned>(count({x.shape.begin(), x.shape.begin() + static_cast<std::ptrdiff_t>(a)})),
                                  static_cast<unsigned>(count({x.shape.begin() + static_cast<std::ptrdiff_t>(a), x.shape.end()}))};
    return g_.tensor(t).shape == s ? t : g_.reshape(t, s, fresh("view"));
  }

  static std::vector<unsigned> broadcast(const std::vector<unsigned>& a, const std::vector<unsigned>& b, bool* ok) {
    std::vector<unsigned> out(std::max(a.size(), b.size()), 1);
    *ok = true;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const unsigned x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
      const unsigned y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
      if (x != y && x != 1 && y != 1) *ok = false;
      out[i] = std::max(x, y);
    }
    return out;
  }
  // b's values repeat over a (numpy): b's shape, less leading ones, ends a's; or one element.
  static bool repeats_over(const std::vector<unsigned>& b, const std::vector<unsigned>& a) {
    if (count(b) == 1) return true;
    std::size_t lead = 0;
    while (lead < b.size() && b[lead] == 1) ++lead;
    const std::size_t n = b.size() - lead;
    return n <= a.size() && std::equal(b.begin() + static_cast<std::ptrdiff_t>(lead), b.end(), a.end() - static_cast<std::ptrdiff_t>(n));
  }

  // b is a's shape with its last dimension 1 (one value per row of a).
  static bool column_of(const std::vector<unsigned>& b, const std::vector<unsigned>& a) {
    if (a.size() < 2 || b.empty() || b.back() != 1 || a.back() == 1) return false;
    std::vector<unsigned> bs = b, as(a.begin(), a.end() - 1);
    bs.pop_back();
    while (!bs.empty() && bs[0] == 1 && bs.size() > as.size()) bs.erase(bs.begin());
    return bs == as;
  }

  // a (op) b with numpy broadcasting, where one side's values repeat over the other's.
  Value binary(OpKind k, const Value& a, const Value& b, const std::string& node, const std::string& op) {
    bool ok;
    Value r;
    r.shape = broadcast(a.shape, b.shape, &ok);
    if (!ok) throw Unsupported(node, op, fmt::format("shapes {} and {} do not broadcast", shape_text(a.shape), shape_text(b.shape)));
    const std::uint64_t n = count(r.shape);
    int ta = tensor(a, node, op), tb = tensor(b, node, op);
    auto flat = [&](int t, const std::vector<unsigned>& s) {  // the IR's view of s (leading ones dropped where b repeats)
      std::vector<unsigned> v = s;
      while (v.size() > 1 && v[0] == 1) v.erase(v.begin());
      return std::vector<unsigned>(v) == g_.tensor(t).shape || count(v) == 1 ? t : g_.reshape(t, ir_shape(v), fresh("view"));
    };
    if (count(a.shape) == n && (count(b.shape) == n || repeats_over(b.shape, a.shape))) {
      r.tensor = g_.binary(k, ta, count(b.shape) == n ? tb : flat(tb, b.shape));
    } else if (count(b.shape) == n && repeats_over(a.shape, b.shape)) {
      ta = flat(ta, a.shape);
      if (k == OpKind::sub) r.tensor = g_.unary(OpKind::neg, g_.binary(OpKind::sub, tb, ta));  // a - b = -(b - a), exactly
      else if (k == OpKind::swiglu) throw Unsupported(node, op, "the gate broadcasts");
      else r.tensor = g_.binary(k, tb, ta);
    } else if (count(a.shape) == n && column_of(b.shape, a.shape)) {
      // b holds one value per row of a ([.., R, 1] against [.., R, C]):
      // a seen as [C, rows] (a move), b then repeats over its rows, and back.
      const unsigned cols = a.shape.back(), rows = static_cast<unsigned>(n / cols);
      Value at = remap({&a}, {cols, rows}, [&](std::uint64_t o) { return Source{0, (o % rows) * cols + o / rows}; }, node, op);
      Value bt;
      bt.shape = {rows};
      if (b.constant()) bt.c = b.c, bt.c.shape = bt.shape;
      else bt.tensor = g_.tensor(tb).elements() == rows && g_.tensor(tb).shape.size() == 1 ? tb : g_.reshape(tb, {rows}, fresh("view"));
      Value y = binary(k, at, bt, node, op);
      r.tensor = remap({&y}, ir_shape(r.shape), [&](std::uint64_t o) { return Source{0, (o % cols) * rows + o / cols}; }, node, op).tensor;
    } else if (count(b.shape) == n && column_of(a.shape, b.shape) && k != OpKind::swiglu) {
      return k == OpKind::sub ? unary(OpKind::neg, binary(OpKind::sub, b, a, node, op), node, op) : binary(k, b, a, node, op);
    } else {
      throw Unsupported(node, op, fmt::format("broadcasting {} with {} (each repeats along its own axes)",
                                              shape_text(a.shape), shape_text(b.shape)));
    }
    return r;
  }
  Value unary(OpKind k, const Value& x, const std::string& node, const std::string& op) {
    Value r;
    r.shape = x.shape, r.tensor = g_.unary(k, tensor(x, node, op));
    return r;
  }
  Value with_scalar(OpKind k, const Value& x, float s) {
    Value r;
    r.shape = x.shape, r.tensor = g_.binary(k, tensor(x, "(constant)", "scalar"), scalar(s));
    return r;
  }

  std::int64_t axis(std::int64_t a, std::size_t rank, const std::string& node, const std::string& op) const {
    const auto r = static_cast<std::int64_t>(rank);
    if (a < -r || a >= std::max<std::int64_t>(r, 1)) throw std::invalid_argument(fmt::format("node '{}' ({}): axis {} of rank {}", node, op, a, rank));
    return a < 0 ? a + r : a;
  }

  // The graph's tensor for a row op over the last axis of x: its view must
  // keep x's last dimension.
  int rows_of(const Value& x, const std::string& node, const std::string& op) {
    const int t = tensor(x, node, op);
    const unsigned last = x.shape.empty() ? 1 : x.shape.back();
    return g_.tensor(t).cols() == last ? t : g_.reshape(t, ir_shape(x.shape), fresh("view"));
  }

  // An FP32 matmul under the precision asked for.
  int matmul(int a, const Value& b, const std::string& node, const std::string& op) {
    if (precision_ == Precision::bf16) return g_.matmul(a, tensor(b, node, op), DType::bf16, node);
    // Each operand as hi + lo, both BF16: a.b ~ hi.hi + hi.lo + lo.hi.
    int a_hi = g_.cast(a, DType::bf16), a_lo = g_.cast(g_.binary(OpKind::sub, a, a_hi), DType::bf16);
    int b_hi, b_lo;
    if (b.constant()) {
      std::vector<float> hi(b.c.f.size()), lo(b.c.f.size());
      for (std::size_t i = 0; i < hi.size(); ++i) {
        hi[i] = static_cast<float>(num::quantize(num::Format::BF16, b.c.f[i]));
        lo[i] = b.c.f[i] - hi[i];
      }
      b_hi = g_.weight(fresh("b_hi"), ir_shape(b.shape), hi, DType::bf16);
      b_lo = g_.weight(fresh("b_lo"), ir_shape(b.shape), lo, DType::bf16);
    } else {
      b_hi = g_.cast(b.tensor, DType::bf16), b_lo = g_.cast(g_.binary(OpKind::sub, b.tensor, b_hi), DType::bf16);
    }
    const int y = g_.matmul(a_hi, b_hi, DType::bf16);
    return g_.binary(OpKind::add, g_.binary(OpKind::add, y, g_.matmul(a_hi, b_lo, DType::bf16)),
                     g_.matmul(a_lo, b_hi, DType::bf16), node);
  }

  void node(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    const std::string name = n.name().empty() ? (n.output_size() ? n.output(0) : op) : n.name();
    if (!n.domain().empty() && n.domain() != "ai.onnx") throw Unsupported(name, op, fmt::format("domain '{}'", n.domain()));
    std::map<std::string, const onnx::AttributeProto*> attrs;
    for (const auto& a : n.attribute()) attrs[a.name()] = &a;
    std::set<std::string> used;
    auto ai = [&](const char* k, std::int64_t d) {
      used.insert(k);
      return attrs.count(k) ? attrs.at(k)->i() : d;
    };
    auto af = [&](const char* k, float d) {
      used.insert(k);
      return attrs.count(k) ? attrs.at(k)->f() : d;
    };
    auto has_in = [&](int k) { return n.input_size() > k && !n.input(k).empty(); };
    auto in = [&](int k) -> const Value& {
      if (!has_in(k)) throw std::invalid_argument(fmt::format("node '{}' ({}): input {} is missing", name, op, k));
      return value(n.input(k), name, op);
    };
    auto data = [&](int k) -> const Value& {  // an FP32 operand
      const Value& v = in(k);
      const int t = v.constant() ? v.c.elem_type : TP::FLOAT;
      if (t != TP::FLOAT) throw Unsupported(name, op, fmt::format("input '{}' is {}", n.input(k), type_name(t)));
      return v;
    };
    auto ints = [&](const Value& v) {  // a value known now, as integers
      if (!v.constant() || !is_int(v.c.elem_type)) throw Unsupported(name, op, "a shape or axes computed on the chip");
      return v.c.i;
    };
    auto set = [&](Value v, int k = 0) { values_[n.output(k)] = std::move(v); };
    auto only_outputs = [&](int k) {
      for (int j = k; j < n.output_size(); ++j)
        if (!n.output(j).empty()) throw Unsupported(name, op, fmt::format("output {} ('{}')", j, n.output(j)));
    };

    static const std::map<std::string, OpKind> unaries{{"Relu", OpKind::relu}, {"Exp", OpKind::exp},
                                                       {"Log", OpKind::log}, {"Tanh", OpKind::tanh},
                                                       {"Sigmoid", OpKind::sigmoid}, {"Neg", OpKind::neg},
                                                       {"Abs", OpKind::abs}, {"Reciprocal", OpKind::recip}};
    static const std::map<std::string, OpKind> binaries{{"Add", OpKind::add}, {"Sub", OpKind::sub}, {"Mul", OpKind::mul},
                                                        {"Max", OpKind::max}, {"Min", OpKind::min}, {"Sum", OpKind::add},
                                                        {"Mean", OpKind::add}};
    only_outputs(op == "Split" ? n.output_size() : op == "LayerNormalization" ? 3 : op == "SoftmaxCrossEntropyLoss" || op == "TopK" ? 2 : 1);
    if (foldable(op) && n.input_size() > 0 &&
        std::all_of(n.input().begin(), n.input().end(), [&](const std::string& i) { return i.empty() || value(i, name, op).constant(); })) {
      std::vector<const Value*> ins;
      for (const std::string& i : n.input()) ins.push_back(i.empty() ? nullptr : &value(i, name, op));
      std::int64_t to = 0;
      if (op == "Cast") to = ai("to", 0);
      set(fold(op, ins, to, name));
    } else if (unaries.count(op)) {
      set(unary(unaries.at(op), data(0), name, op));
    } else if (op == "Erf") {
      // Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7):
      // erf|x| = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-x^2), t = 1 / (1 + p|x|),
      // with x's sign by x / (|x| + 1e-30) (0 at 0).
      const Value& x = data(0);
      const Value ax = unary(OpKind::abs, x, name, op);
      const Value t = unary(OpKind::recip, with_scalar(OpKind::add, with_scalar(OpKind::mul, ax, 0.3275911f), 1.0f), name, op);
      Value poly = with_scalar(OpKind::mul, t, 1.061405429f);
      for (float c : {-1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f})
        poly = binary(OpKind::mul, with_scalar(OpKind::add, poly, c), t, name, op);
      const Value e = unary(OpKind::exp, unary(OpKind::neg, binary(OpKind::mul, x, x, name, op), name, op), name, op);
      const Value mag = unary(OpKind::neg, with_scalar(OpKind::sub, binary(OpKind::mul, poly, e, name, op), 1.0f), name, op);
      const Value sign = binary(OpKind::mul, x, unary(OpKind::recip, with_scalar(OpKind::add, ax, 1e-30f), name, op), name, op);
      set(binary(OpKind::mul, mag, sign, name, op));
    } else if (op == "Pow") {
      // A known exponent: small integers as products (x^-k as their
      // reciprocal), others as exp(y log x), which is NaN for a negative x
      // as numpy's power is; an exponent computed on the chip is refused.
      const Value& x = data(0);
      const Value& y = in(1);
      if (!y.constant() || count(y.shape) != 1) throw Unsupported(name, op, "an exponent that is not one known value");
      const double p = y.c.f.empty() ? static_cast<double>(y.c.i.at(0)) : y.c.f.at(0);
      if (p == std::floor(p) && std::fabs(p) <= 16) {
        const auto k = static_cast<int>(std::fabs(p));
        Value r;
        if (!k) {
          r = with_scalar(OpKind::add, with_scalar(OpKind::mul, x, 0.0f), 1.0f);
        } else {
          r = x;
          for (int j = 1; j < k; ++j) r = binary(OpKind::mul, r, x, name, op);
        }
        set(p < 0 ? unary(OpKind::recip, r, name, op) : r);
      } else if (p == 0.5) {
        set(unary(OpKind::recip, unary(OpKind::rsqrt, x, name, op), name, op));
      } else {
        set(unary(OpKind::exp, with_scalar(OpKind::mul, unary(OpKind::log, x, name, op), static_cast<float>(p)), name, op));
      }
    } else if (op == "Greater" || op == "Less" || op == "GreaterOrEqual" || op == "LessOrEqual" || op == "Equal") {
      // On the vector unit, exactly, as 1 or 0 (read back as BOOL), NaN
      // unordered: x > y is min(relu(x - y) * 2^127 * 2^127, 1) (x - y is
      // above 0 exactly when x > y: gradual underflow keeps the least
      // difference above 0, relu sends NaN to 0, the two products lift the
      // least one past 1); ordered(x) = relu(clamp(x, -1, 1) * 0 + 1) is 0
      // only for NaN; x >= y = ordered(x) ordered(y) - (y > x), x == y
      // that less (x > y).
      const Value& a = data(0);
      const Value& b = data(1);
      auto greater = [&](const Value& x, const Value& y) {
        const Value d = unary(OpKind::relu, binary(OpKind::sub, x, y, name, op), name, op);
        return with_scalar(OpKind::min, with_scalar(OpKind::mul, with_scalar(OpKind::mul, d, 0x1p127f), 0x1p127f), 1.0f);
      };
      auto ordered = [&](const Value& x) {
        const Value c = with_scalar(OpKind::max, with_scalar(OpKind::min, x, 1.0f), -1.0f);
        return unary(OpKind::relu, with_scalar(OpKind::add, with_scalar(OpKind::mul, c, 0.0f), 1.0f), name, op);
      };
      Value r;
      if (op == "Greater") r = greater(a, b);
      else if (op == "Less") r = greater(b, a);
      else {
        const Value both = binary(OpKind::mul, ordered(a), ordered(b), name, op);
        r = binary(OpKind::sub, both, greater(op == "LessOrEqual" ? a : b, op == "LessOrEqual" ? b : a), name, op);
        if (op == "Equal") r = binary(OpKind::sub, r, greater(a, b), name, op);
      }
      elem_type_[r.tensor] = TP::BOOL;
      set(r);
    } else if (op == "IsNaN" || op == "IsInf" || op == "Sign") {
      // From the same exact pieces as the comparisons: IsNaN is 1 - ordered(x);
      // x is +inf exactly when x > FLT_MAX, -inf when -FLT_MAX > x; Sign is
      // (x > 0) - (0 > x), 0 for zeros (and NaN, which ONNX leaves open).
      const Value& x = data(0);
      const float big = std::numeric_limits<float>::max();
      auto step = [&](const Value& d) {  // 1 where d > 0, else 0 (NaN too)
        return with_scalar(OpKind::min, with_scalar(OpKind::mul, with_scalar(OpKind::mul, unary(OpKind::relu, d, name, op), 0x1p127f), 0x1p127f), 1.0f);
      };
      Value r;
      if (op == "IsNaN") {
        const Value c = with_scalar(OpKind::max, with_scalar(OpKind::min, x, 1.0f), -1.0f);
        const Value ordered = unary(OpKind::relu, with_scalar(OpKind::add, with_scalar(OpKind::mul, c, 0.0f), 1.0f), name, op);
        r = with_scalar(OpKind::add, unary(OpKind::neg, ordered, name, op), 1.0f);
      } else if (op == "IsInf") {
        const bool pos = ai("detect_positive", 1), neg = ai("detect_negative", 1);
        const Value up = step(with_scalar(OpKind::sub, x, big));                            // x - FLT_MAX > 0: +inf
        const Value down = step(unary(OpKind::neg, with_scalar(OpKind::add, x, big), name, op));  // -(x + FLT_MAX) > 0: -inf
        if (pos && neg) r = binary(OpKind::add, up, down, name, op);
        else if (pos) r = up;
        else if (neg) r = down;
        else r = with_scalar(OpKind::mul, up, 0.0f);  // neither: all false
      } else {
        r = binary(OpKind::sub, step(x), step(unary(OpKind::neg, x, name, op)), name, op);
      }
      if (op != "Sign") elem_type_[r.tensor] = TP::BOOL;
      set(r);
    } else if (op == "Not" || op == "And" || op == "Or" || op == "Xor") {
      // On booleans the chip computed (1 or 0): not x = 1 - x, and = x y,
      // or = max(x, y), xor = |x - y|, all exact.
      auto logical = [&](int k) -> Value {
        const Value& v = in(k);
        if (v.constant()) {
          if (v.c.elem_type != TP::BOOL) throw Unsupported(name, op, fmt::format("input '{}' is {}", n.input(k), type_name(v.c.elem_type)));
          Value f = v;
          f.c.elem_type = TP::FLOAT, f.c.f.assign(v.c.i.begin(), v.c.i.end()), f.c.i.clear();
          return f;
        }
        if (!elem_type_.count(v.tensor) || elem_type_.at(v.tensor) != TP::BOOL)
          throw Unsupported(name, op, fmt::format("input '{}' is not BOOL", n.input(k)));
        return v;
      };
      Value r;
      if (op == "Not") r = with_scalar(OpKind::add, unary(OpKind::neg, logical(0), name, op), 1.0f);
      else if (op == "And") r = binary(OpKind::mul, logical(0), logical(1), name, op);
      else if (op == "Or") r = binary(OpKind::max, logical(0), logical(1), name, op);
      else r = unary(OpKind::abs, binary(OpKind::sub, logical(0), logical(1), name, op), name, op);
      elem_type_[r.tensor] = TP::BOOL;
      set(r);
    } else if (op == "Identity") {
      set(in(0));
    } else if (op == "Dropout") {
      ai("seed", 0);
      if (has_in(2) && (!in(2).constant() || in(2).c.i.empty() || in(2).c.i[0]))
        throw Unsupported(name, op, "training mode");
      set(data(0));
    } else if (op == "Sqrt") {  // 1 / rsqrt(x): 0 and infinity stay exact
      set(unary(OpKind::recip, unary(OpKind::rsqrt, data(0), name, op), name, op));
    } else if (op == "Softplus") {
      set(unary(OpKind::log, with_scalar(OpKind::add, unary(OpKind::exp, data(0), name, op), 1.0f), name, op));
    } else if (op == "Softsign") {
      const Value& x = data(0);
      set(binary(OpKind::mul, x, unary(OpKind::recip, with_scalar(OpKind::add, unary(OpKind::abs, x, name, op), 1.0f), name, op), name, op));
    } else if (op == "LeakyRelu" || op == "Elu" || op == "Selu") {
      // relu(x) + alpha * min(f(x), 0), with f(x) = x or exp(x) - 1; Selu scales by gamma.
      const float alpha = af("alpha", op == "LeakyRelu" ? 0.01f : op == "Elu" ? 1.0f : 1.67326319217681884765625f);
      const float gamma = op == "Selu" ? af("gamma", 1.05070102214813232421875f) : 1.0f;
      const Value& x = data(0);
      Value neg = op == "LeakyRelu" ? x : with_scalar(OpKind::sub, unary(OpKind::exp, x, name, op), 1.0f);
      Value r = binary(OpKind::add, unary(OpKind::relu, x, name, op),
                       with_scalar(OpKind::mul, with_scalar(OpKind::min, neg, 0.0f), alpha), name, op);
      set(op == "Selu" ? with_scalar(OpKind::mul, r, gamma) : r);
    } else if (op == "HardSigmoid" || op == "HardSwish") {
      const float alpha = op == "HardSwish" ? 1.0f / 6 : af("alpha", 0.2f), beta = op == "HardSwish" ? 0.5f : af("beta", 0.5f);
      const Value& x = data(0);
      Value h = with_scalar(OpKind::max, with_scalar(OpKind::min, with_scalar(OpKind::add, with_scalar(OpKind::mul, x, alpha), beta), 1.0f), 0.0f);
      set(op == "HardSwish" ? binary(OpKind::mul, x, h, name, op) : h);
    } else if (op == "Clip") {
      Value x = data(0);
      if (has_in(1)) x = binary(OpKind::max, x, data(1), name, op);
      if (has_in(2)) x = binary(OpKind::min, x, data(2), name, op);
      set(x);
    } else if (binaries.count(op) || op == "Div") {
      if (op != "Sum" && op != "Mean" && op != "Max" && op != "Min" && n.input_size() != 2)
        throw std::invalid_argument(fmt::format("node '{}' ({}): {} inputs, not 2", name, op, n.input_size()));
      Value r = data(0);
      for (int k = 1; k < n.input_size(); ++k)
        r = op == "Div" ? binary(OpKind::mul, r, unary(OpKind::recip, data(k), name, op), name, op)
                        : binary(binaries.at(op), r, data(k), name, op);
      if (op == "Mean") r = with_scalar(OpKind::mul, r, 1.0f / static_cast<float>(n.input_size()));
      set(r);
    } else if (op == "Softmax" || op == "LogSoftmax") {
      const Value& x = data(0);
      // From opset 13 over one axis (brought last, and back); before, the
      // default axis is 1 and the input is seen as 2-D around it.
      const auto a = static_cast<std::size_t>(axis(ai("axis", opset_ < 13 ? 1 : -1), x.shape.size(), name, op));
      const Value r = softmax(x, a, opset_ < 13, name, op);
      set(op == "LogSoftmax" ? unary(OpKind::log, r, name, op) : r);
    } else if (op == "NegativeLogLikelihoodLoss" || op == "SoftmaxCrossEntropyLoss") {
      // The targets known now: each position's score (and weight) picked by
      // a move, the ignored ones from a zero; mean divides by the weights' sum.
      const bool sce = op == "SoftmaxCrossEntropyLoss";
      Value x = data(0);
      if (x.shape.size() < 2) throw std::invalid_argument(fmt::format("node '{}' ({}): input of rank {}", name, op, x.shape.size()));
      if (sce) {
        x = unary(OpKind::log, softmax(x, 1, false, name, op), name, op);
        if (n.output_size() > 1 && !n.output(1).empty()) set(x, 1);
      }
      const std::vector<std::int64_t> target = ints(in(1));
      const Value& tv = in(1);
      const unsigned N = x.shape[0], C = x.shape[1];
      const std::uint64_t D = count(x.shape) / (std::uint64_t{N} * C);
      if (count(tv.shape) != std::uint64_t{N} * D) throw std::invalid_argument(fmt::format("node '{}' ({}): targets {} for input {}", name, op, shape_text(tv.shape), shape_text(x.shape)));
      std::string reduction = "mean";
      if (attrs.count("reduction")) used.insert("reduction"), reduction = attrs.at("reduction")->s();
      if (reduction != "mean" && reduction != "sum" && reduction != "none") throw Unsupported(name, op, fmt::format("reduction '{}'", reduction));
      const bool has_ignore = attrs.count("ignore_index");
      const std::int64_t ignore = ai("ignore_index", 0);
      auto ignored = [&](std::uint64_t o) { return has_ignore && target[o] == ignore; };
      for (std::uint64_t o = 0; o < target.size(); ++o)
        if (!ignored(o) && (target[o] < 0 || target[o] >= C)) throw std::invalid_argument(fmt::format("node '{}' ({}): target {} of {} classes", name, op, target[o], C));
      Value zero;
      zero.c.elem_type = TP::FLOAT, zero.c.f = {0.0f}, zero.shape = zero.c.shape = {1};
      const Value picked = remap({&x, &zero}, tv.shape, [&](std::uint64_t o) {
        return ignored(o) ? Source{1, 0} : Source{0, (o / D) * C * D + static_cast<std::uint64_t>(target[o]) * D + o % D};
      }, name, op);
      Value w;
      if (has_in(2)) {
        const Value& wv = data(2);
        w = remap({&wv, &zero}, tv.shape, [&](std::uint64_t o) {
          return ignored(o) ? Source{1, 0} : Source{0, static_cast<std::uint64_t>(target[o])};
        }, name, op);
      } else {
        w.shape = w.c.shape = tv.shape, w.c.elem_type = TP::FLOAT;
        for (std::uint64_t o = 0; o < target.size(); ++o) w.c.f.push_back(ignored(o) ? 0.0f : 1.0f);
      }
      Value loss = unary(OpKind::neg, binary(OpKind::mul, picked, w, name, op), name, op);
      if (reduction != "none") {
        auto total = [&](const Value& v) { return g_.reduce(OpKind::reduce_sum, g_.reshape(tensor(v, name, op), {1, static_cast<unsigned>(count(v.shape))}, fresh("view"))); };
        int t = total(loss);
        if (reduction == "mean") t = g_.binary(OpKind::mul, t, g_.unary(OpKind::recip, total(w)));
        loss = Value{};
        loss.tensor = t;
      }
      set(loss);
    } else if (op == "LayerNormalization") {
      // Over the axes from `axis` on, as one row; Mean and InvStdDev from
      // the row sums of x and x^2.
      const Value& x = data(0);
      const auto a = static_cast<std::size_t>(axis(ai("axis", -1), x.shape.size(), name, op));
      if (ai("stash_type", 1) != 1) throw Unsupported(name, op, "stash_type other than FLOAT");
      const unsigned cols = static_cast<unsigned>(count({x.shape.begin() + static_cast<std::ptrdiff_t>(a), x.shape.end()}));
      const int x2 = as_2d(x, a, name, op);
      auto row = [&](int k, float fill) {
        if (!has_in(k)) return g_.weight(fresh("const"), {cols}, std::vector<float>(cols, fill));
        const Value& v = data(k);
        if (count(v.shape) != cols) throw Unsupported(name, op, fmt::format("input {} of shape {}", k, shape_text(v.shape)));
        return tensor(v, name, op);
      };
      const float eps = af("epsilon", 1e-5f);
      Value r;
      r.shape = x.shape, r.tensor = g_.layernorm(x2, row(1, 1.0f), row(2, 0.0f), eps);
      if (g_.tensor(r.tensor).shape != ir_shape(x.shape)) r.tensor = g_.reshape(r.tensor, ir_shape(x.shape), fresh("view"));
      set(r);
      Value stat;
      stat.shape.assign(x.shape.begin(), x.shape.begin() + static_cast<std::ptrdiff_t>(a));
      stat.shape.insert(stat.shape.end(), x.shape.size() - a, 1u);
      const int inv_n = scalar(1.0f / static_cast<float>(cols));
      const int mean = g_.binary(OpKind::mul, g_.reduce(OpKind::reduce_sum, x2), inv_n);
      if (n.output_size() > 1 && !n.output(1).empty()) stat.tensor = mean, set(stat, 1);
      if (n.output_size() > 2 && !n.output(2).empty()) {
        const int sq = g_.binary(OpKind::mul, g_.reduce(OpKind::reduce_sum, g_.binary(OpKind::mul, x2, x2)), inv_n);
        const int var = g_.binary(OpKind::sub, sq, g_.binary(OpKind::mul, mean, mean));
        stat.tensor = g_.unary(OpKind::rsqrt, g_.binary(OpKind::add, var, scalar(eps)));
        set(stat, 2);
      }
    } else if (op == "MatMul" || op == "Gemm") {
      Value a = data(0), b = data(1);
      bool ta = false, tb = false;
      if (op == "Gemm") ta = ai("transA", 0), tb = ai("transB", 0);
      auto transpose = [&](Value v, const char* which) {
        if (!v.constant() || v.shape.size() != 2) throw Unsupported(name, op, fmt::format("{} of a value computed on the chip", which));
        std::vector<float> t(v.c.f.size());
        const unsigned r = v.shape[0], c = v.shape[1];
        for (unsigned i = 0; i < r; ++i)
          for (unsigned j = 0; j < c; ++j) t[std::size_t{j} * r + i] = v.c.f[std::size_t{i} * c + j];
        v.c.f = t, v.shape = {c, r}, v.c.shape = v.shape;
        return v;
      };
      if (ta) a = transpose(a, "transA");
      if (tb) b = transpose(b, "transB");
      std::vector<unsigned> bs = b.shape;
      while (bs.size() > 2 && bs[0] == 1) bs.erase(bs.begin());
      if (op == "MatMul" && bs.size() > 2 && a.shape.size() >= 2) return set(batched_matmul(a, b, name, op));
      if (bs.size() != 2 || a.shape.empty() || (op == "Gemm" && a.shape.size() != 2))
        throw Unsupported(name, op, fmt::format("{} x {} (A of any rank times a 2-D B is supported)", shape_text(a.shape), shape_text(b.shape)));
      if (a.shape.back() != bs[0])
        throw std::invalid_argument(fmt::format("node '{}' ({}): {} x {}: K differs", name, op, shape_text(a.shape), shape_text(b.shape)));
      if (b.constant()) b.shape = bs, b.c.shape = bs;
      else if (g_.tensor(b.tensor).shape != bs) b.tensor = g_.reshape(b.tensor, bs, fresh("view")), b.shape = bs;
      Value y;
      y.shape = a.shape, y.shape.back() = bs[1];
      if (a.shape.size() == 1) y.shape = {bs[1]};
      y.tensor = matmul(rows_of(a, name, op), b, name, op);
      if (op == "Gemm") {
        const float alpha = af("alpha", 1.0f), beta = af("beta", 1.0f);
        if (alpha != 1.0f) y = with_scalar(OpKind::mul, y, alpha);
        if (has_in(2) && beta != 0.0f) {
          Value c = data(2);
          if (beta != 1.0f) c = c.constant() ? [&] { for (float& v : c.c.f) v *= beta; return c; }() : with_scalar(OpKind::mul, c, beta);
          y = binary(OpKind::add, y, c, name, op);
        }
      }
      set(y);
    } else if (op == "ArgMax" || op == "ArgMin") {
      const Value& x = data(0);
      const std::int64_t a = axis(ai("axis", 0), x.shape.size(), name, op);
      const bool keep = ai("keepdims", 1);
      if (ai("select_last_index", 0)) throw Unsupported(name, op, "select_last_index");
      // The axis brought last (the others in their order): a row each.
      const bool last = x.shape.empty() || a + 1 == static_cast<std::int64_t>(x.shape.size());
      const int t = last ? rows_of(x, name, op) : permute(x, to_end(x.shape.size(), {static_cast<std::size_t>(a)}), name, op).tensor;
      Value r;
      r.shape = x.shape;
      if (!x.shape.empty()) {
        if (keep) r.shape[static_cast<std::size_t>(a)] = 1;
        else r.shape.erase(r.shape.begin() + a);
      }
      r.tensor = g_.argmax(op == "ArgMin" ? g_.unary(OpKind::neg, t) : t, name);
      elem_type_[r.tensor] = TP::INT64;
      set(r);
    } else if (op == "TopK") {
      // The vector unit's top-k (1 to 8, sorted, ties to the lower index,
      // as ONNX's TopK has them) on the axis brought last; the smallest as
      // the largest of the negated values. Values and INT64 indices.
      const Value& x = data(0);
      const std::vector<std::int64_t> kv = ints(in(1));
      const std::int64_t a = axis(ai("axis", -1), x.shape.size(), name, op);
      const bool largest = ai("largest", 1);
      ai("sorted", 1);  // sorted either way
      const unsigned width = x.shape.empty() ? 1 : x.shape[static_cast<std::size_t>(a)];
      if (kv.size() != 1 || kv[0] < 1 || kv[0] > 8 || kv[0] > width)
        throw Unsupported(name, op, fmt::format("k {} of {} (the vector unit's top-k takes 1 to 8)", kv.empty() ? 0 : kv[0], width));
      const unsigned k = static_cast<unsigned>(kv[0]);
      const bool last = x.shape.empty() || a + 1 == static_cast<std::int64_t>(x.shape.size());
      const std::vector<std::size_t> order = to_end(x.shape.size(), {static_cast<std::size_t>(a)});
      const int t = last ? rows_of(x, name, op) : permute(x, order, name, op).tensor;
      const int route = g_.route(largest ? t : g_.unary(OpKind::neg, t), k, false, name + ".top");
      // Back in x's order, with k along the axis.
      std::vector<unsigned> moved;  // the shape with the axis last, k long
      for (std::size_t d : order) moved.push_back(d == static_cast<std::size_t>(a) ? k : x.shape[d]);
      auto place = [&](int plane) {
        Value v;
        v.shape = moved;
        v.tensor = g_.reshape(plane, ir_shape(moved), fresh("topk"));
        if (last) return v;
        std::vector<std::size_t> back(order.size());
        for (std::size_t d = 0; d < order.size(); ++d) back[order[d]] = d;
        return permute(v, back, name, op);
      };
      const int vals = g_.route_values(route);
      Value values = place(largest ? vals : g_.unary(OpKind::neg, vals));
      Value indices = place(g_.route_indices(route));
      elem_type_[indices.tensor] = TP::INT64;
      set(values, 0);
      if (n.output_size() > 1 && !n.output(1).empty()) set(indices, 1);
    } else if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      const Value& x = in(0);
      std::vector<unsigned> s;
      if (op == "Reshape") {
        const std::vector<std::int64_t> want = ints(in(1));
        const bool allowzero = ai("allowzero", 0);
        std::int64_t infer = -1, known = 1;
        for (std::size_t k = 0; k < want.size(); ++k) {
          std::int64_t d = want[k];
          if (d == 0 && !allowzero) {
            if (k >= x.shape.size()) throw std::invalid_argument(fmt::format("node '{}' ({}): dimension {} copies none", name, op, k));
            d = x.shape[k];
          }
          if (d == -1) {
            if (infer >= 0) throw std::invalid_argument(fmt::format("node '{}' ({}): two dimensions of -1", name, op));
            infer = static_cast<std::int64_t>(k), s.push_back(1);
            continue;
          }
          if (d < 0) throw std::invalid_argument(fmt::format("node '{}' ({}): dimension {}", name, op, d));
          s.push_back(static_cast<unsigned>(d)), known *= d;
        }
        if (infer >= 0) s[static_cast<std::size_t>(infer)] = known ? static_cast<unsigned>(count(x.shape) / known) : 0;
      } else if (op == "Flatten") {
        std::int64_t f = ai("axis", 1);
        if (f < 0) f += static_cast<std::int64_t>(x.shape.size());
        if (f < 0 || f > static_cast<std::int64_t>(x.shape.size()))
          throw std::invalid_argument(fmt::format("node '{}' ({}): axis {} of rank {}", name, op, ai("axis", 1), x.shape.size()));
        const auto a = static_cast<std::size_t>(f);
        s = {static_cast<unsigned>(count({x.shape.begin(), x.shape.begin() + static_cast<std::ptrdiff_t>(a)})),
             static_cast<unsigned>(count({x.shape.begin() + static_cast<std::ptrdiff_t>(a), x.shape.end()}))};
      } else {
        std::vector<std::int64_t> axes = has_in(1) ? ints(in(1)) : std::vector<std::int64_t>{};
        const std::size_t rank = op == "Squeeze" ? x.shape.size() : x.shape.size() + axes.size();
        std::set<std::int64_t> at;
        for (std::int64_t a : axes) at.insert(axis(a, rank, name, op));
        if (op == "Squeeze") {
          for (std::size_t k = 0; k < x.shape.size(); ++k)
            if (at.empty() ? x.shape[k] != 1 : !at.count(static_cast<std::int64_t>(k))) s.push_back(x.shape[k]);
            else if (x.shape[k] != 1) throw std::invalid_argument(fmt::format("node '{}' ({}): axis {} is {}, not 1", name, op, k, x.shape[k]));
        } else {
          for (std::size_t k = 0, j = 0; k < rank; ++k) s.push_back(at.count(static_cast<std::int64_t>(k)) ? 1 : x.shape[j++]);
        }
      }
      if (count(s) != count(x.shape))
        throw std::invalid_argument(fmt::format("node '{}' ({}): {} to {}: the element counts differ", name, op, shape_text(x.shape), shape_text(s)));
      Value r;
      r.shape = s;
      if (x.constant()) {
        r.c = x.c, r.c.shape = s;
      } else {
        if (!count(s)) throw Unsupported(name, op, "an empty tensor");
        r.tensor = g_.reshape(x.tensor, ir_shape(s), name);
        if (elem_type_.count(x.tensor)) elem_type_[r.tensor] = elem_type_.at(x.tensor);
      }
      set(r);
    } else if (op.rfind("Reduce", 0) == 0 && reductions().count(op)) {
      // Over trailing axes (the last, the last few, or all): x seen as
      // [leading, reduced], each row reduced on the vector unit.
      const Value& x = data(0);
      std::vector<std::int64_t> axes;
      const bool axes_input = op == "ReduceSum" && opset_ >= 13;
      if (axes_input && has_in(1)) axes = ints(in(1));
      if (!axes_input && attrs.count("axes")) {
        used.insert("axes");
        axes.assign(attrs.at("axes")->ints().begin(), attrs.at("axes")->ints().end());
      }
      const bool keep = ai("keepdims", 1);
      if (axes.empty() && axes_input && ai("noop_with_empty_axes", 0)) throw Unsupported(name, op, "noop_with_empty_axes");
      std::set<std::int64_t> at;
      for (std::int64_t a : axes) at.insert(axis(a, x.shape.size(), name, op));
      if (axes.empty())
        for (std::size_t k = 0; k < x.shape.size(); ++k) at.insert(static_cast<std::int64_t>(k));
      const std::size_t first = x.shape.size() - at.size();
      std::vector<unsigned> lead;
      for (std::size_t k = 0; k < x.shape.size(); ++k)
        if (!at.count(static_cast<std::int64_t>(k))) lead.push_back(x.shape[k]);
      const unsigned n = static_cast<unsigned>(count(x.shape) / std::max<std::uint64_t>(count(lead), 1));
      if (!n || !count(x.shape)) throw Unsupported(name, op, "an empty tensor");
      // The reduced axes brought last, where they are not.
      std::set<std::size_t> red;
      for (std::int64_t k : at) red.insert(static_cast<std::size_t>(k));
      const bool trailing = at.empty() || (*at.begin() == static_cast<std::int64_t>(first) &&
                                           *at.rbegin() == static_cast<std::int64_t>(x.shape.size()) - 1);
      int t = trailing ? tensor(x, name, op) : permute(x, to_end(x.shape.size(), red), name, op).tensor;
      const std::vector<unsigned> view{static_cast<unsigned>(count(lead)), n};
      if (g_.tensor(t).cols() != n) t = g_.reshape(t, view, fresh("view"));
      const std::string& kind = reductions().at(op);
      if (kind == "sumsq" || kind == "l2") t = g_.binary(OpKind::mul, t, t);
      if (kind == "l1") t = g_.unary(OpKind::abs, t);
      if (kind == "min") t = g_.unary(OpKind::neg, t);
      if (kind == "logsumexp") t = g_.unary(OpKind::exp, t);
      t = g_.reduce(kind == "max" || kind == "min" ? OpKind::reduce_max : OpKind::reduce_sum, t, name);
      if (kind == "min") t = g_.unary(OpKind::neg, t);
      if (kind == "mean") t = g_.binary(OpKind::mul, t, scalar(1.0f / static_cast<float>(n)));
      if (kind == "l2") t = g_.unary(OpKind::recip, g_.unary(OpKind::rsqrt, t));
      if (kind == "logsum" || kind == "logsumexp") t = g_.unary(OpKind::log, t);
      Value r;
      r.tensor = t, r.shape = lead;
      if (keep) {
        r.shape = x.shape;
        for (std::int64_t k : at) r.shape[static_cast<std::size_t>(k)] = 1;
      }
      set(r);
    } else if (op == "Transpose" || op == "Concat" || op == "Slice" || op == "Split" || op == "Gather" ||
               op == "Tile" || op == "Expand" || op == "Trilu" || op == "Pad" || op == "DepthToSpace" ||
               op == "SpaceToDepth" || op == "GatherElements" || op == "ScatterElements" || op == "Scatter" ||
               op == "ScatterND" || op == "OneHot" || op == "EyeLike" || op == "Compress" || op == "Where") {
      movement(n, name, op, attrs, used, ai);
      return check_attributes(attrs, used, name, op);
    } else if (op == "Resize") {
      resize(n, name, op, attrs, used, opset_);
    } else if (op == "Conv" || op == "ConvTranspose" || op == "MaxPool" || op == "AveragePool") {
      spatial(n, name, op, attrs, used, ai);
    } else if (op == "Shape" || op == "Size") {
      const Value& x = in(0);
      Value r;
      r.c.elem_type = TP::INT64;
      if (op == "Size") {
        r.c.i = {static_cast<std::int64_t>(count(x.shape))};
      } else {
        const auto rank = static_cast<std::int64_t>(x.shape.size());
        auto clamp = [&](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
        const std::int64_t start = clamp(ai("start", 0)), end = clamp(ai("end", rank));
        for (std::int64_t k = start; k < end; ++k) r.c.i.push_back(x.shape[static_cast<std::size_t>(k)]);
        r.c.shape = {static_cast<unsigned>(r.c.i.size())};
      }
      r.shape = r.c.shape;
      set(r);
    } else if (op == "ConstantOfShape") {
      Value r;
      for (std::int64_t d : ints(in(0))) r.c.shape.push_back(static_cast<unsigned>(d));
      HostTensor v;
      v.elem_type = TP::FLOAT, v.f = {0.0f};
      if (attrs.count("value")) v = read_tensor(attrs.at("value")->t()), used.insert("value");
      r.c.elem_type = v.elem_type;
      if (is_int(v.elem_type)) r.c.i.assign(count(r.c.shape), v.i.at(0));
      else r.c.f.assign(count(r.c.shape), v.f.at(0));
      r.shape = r.c.shape;
      set(r);
    } else if (op == "Constant") {
      Value r;
      if (attrs.count("value")) r.c = read_tensor(attrs.at("value")->t()), used.insert("value");
      else if (attrs.count("value_float")) r.c.elem_type = TP::FLOAT, r.c.f = {af("value_float", 0)};
      else if (attrs.count("value_floats")) r.c.elem_type = TP::FLOAT, r.c.shape = {static_cast<unsigned>(attrs.at("value_floats")->floats_size())}, r.c.f.assign(attrs.at("value_floats")->floats().begin(), attrs.at("value_floats")->floats().end()), used.insert("value_floats");
      else if (attrs.count("value_int")) r.c.elem_type = TP::INT64, r.c.i = {ai("value_int", 0)};
      else if (attrs.count("value_ints")) r.c.elem_type = TP::INT64, r.c.shape = {static_cast<unsigned>(attrs.at("value_ints")->ints_size())}, r.c.i.assign(attrs.at("value_ints")->ints().begin(), attrs.at("value_ints")->ints().end()), used.insert("value_ints");
      else throw Unsupported(name, op, "a value that is not a tensor, float(s) or int(s)");
      r.shape = r.c.shape;
      set(r);
    } else if (op == "Cast") {
      const std::int64_t to = ai("to", 0);
      const Value& x = data(0);
      if (to == TP::FLOAT) {
        set(x);
      } else if (to == TP::FLOAT16 || to == TP::BFLOAT16) {
        Value r;
        r.shape = x.shape, r.tensor = g_.cast(tensor(x, name, op), to == TP::FLOAT16 ? DType::f16 : DType::bf16, name);
        elem_type_[r.tensor] = static_cast<int>(to);
        set(r);
      } else {
        throw Unsupported(name, op, fmt::format("to {}", type_name(static_cast<int>(to))));
      }
    } else {
      throw Unsupported(name, op, "the op is not supported");
    }
    check_attributes(attrs, used, name, op);
  }

  // Conv, ConvTranspose, MaxPool, AveragePool over [N, C, spatial...]: each
  // kernel offset's window gathered by a move (outside the input: the
  // padding's value), then the convolutions as one matmul of the gathered
  // columns (im2col; a transposed convolution gathers, for each output
  // position and offset, the input position that reaches it, if one does)
  // and the pools as max or sum chains over the offsets.
  void spatial(const onnx::NodeProto& n, const std::string& name, const std::string& op,
               const std::map<std::string, const onnx::AttributeProto*>& attrs, std::set<std::string>& used,
               const std::function<std::int64_t(const char*, std::int64_t)>& ai) {
    auto ints_attr = [&](const char* k, std::size_t count, std::int64_t fill) {
      std::vector<std::int64_t> v;
      if (attrs.count(k)) used.insert(k), v.assign(attrs.at(k)->ints().begin(), attrs.at(k)->ints().end());
      if (v.empty()) v.assign(count, fill);
      return v;
    };
    const Value& x = value(n.input(0), name, op);
    if (!x.constant() ? false : !is_float(x.c.elem_type)) throw Unsupported(name, op, "integer data");
    const std::vector<unsigned>& xs = x.shape;
    if (xs.size() < 3) throw std::invalid_argument(fmt::format("node '{}' ({}): input of rank {}", name, op, xs.size()));
    const std::size_t sp = xs.size() - 2;
    const unsigned N = xs[0], C = xs[1];
    const bool conv = op == "Conv" || op == "ConvTranspose", transposed = op == "ConvTranspose";
    const Value* w = conv ? &value(n.input(1), name, op) : nullptr;
    if (w && (w->shape.size() != xs.size() || w->shape[transposed ? 0 : 1] != C))
      throw std::invalid_argument(fmt::format("node '{}' ({}): weights {} for input {}", name, op, shape_text(w->shape), shape_text(xs)));
    if (conv && ai("group", 1) != 1) throw Unsupported(name, op, "group other than 1");
    std::vector<std::int64_t> kernel = ints_attr("kernel_shape", 0, 0);
    if (kernel.empty()) {
      if (!w) throw std::invalid_argument(fmt::format("node '{}' ({}): no kernel_shape", name, op));
      kernel.assign(w->shape.begin() + 2, w->shape.end());
    }
    const std::vector<std::int64_t> strides = ints_attr("strides", sp, 1), dil = ints_attr("dilations", sp, 1);
    std::vector<std::int64_t> pads = ints_attr("pads", 2 * sp, 0);
    std::string auto_pad = "NOTSET";
    if (attrs.count("auto_pad")) used.insert("auto_pad"), auto_pad = attrs.at("auto_pad")->s();
    const bool ceil_mode = op != "Conv" && ai("ceil_mode", 0);
    const bool include_pad = op == "AveragePool" && ai("count_include_pad", 0);
    if (op == "MaxPool" && ai("storage_order", 0)) throw Unsupported(name, op, "storage_order 1");
    if (kernel.size() != sp || strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp)
      throw std::invalid_argument(fmt::format("node '{}' ({}): attributes of another rank than {}", name, op, sp));
    std::vector<unsigned> out;
    const std::vector<std::int64_t> out_pad = transposed ? ints_attr("output_padding", sp, 0) : std::vector<std::int64_t>(sp, 0);
    const std::vector<std::int64_t> out_shape = transposed ? ints_attr("output_shape", 0, 0) : std::vector<std::int64_t>{};
    for (std::size_t i = 0; i < sp; ++i) {
      const std::int64_t S = xs[2 + i], span = (kernel[i] - 1) * dil[i] + 1;
      std::int64_t o;
      if (transposed) {
        // The full output is strides (S - 1) + output_padding + span; the
        // pads (given, or from output_shape or auto_pad) trim it.
        const std::int64_t full = strides[i] * (S - 1) + out_pad[i] + span;
        if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
          const std::int64_t want = !out_shape.empty() ? out_shape.at(out_shape.size() - sp + i) : S * strides[i];
          const std::int64_t total = full - want, half = total >= 0 ? total / 2 : -((1 - total) / 2);  // floor(total / 2)
          pads[i] = auto_pad == "SAME_UPPER" ? half : total - half, pads[i + sp] = total - pads[i];
        } else if (auto_pad != "NOTSET" && auto_pad != "VALID") {
          throw Unsupported(name, op, fmt::format("auto_pad '{}'", auto_pad));
        }
        o = full - pads[i] - pads[i + sp];
      } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        o = (S + strides[i] - 1) / strides[i];
        const std::int64_t total = std::max<std::int64_t>(0, (o - 1) * strides[i] + span - S);
        pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2, pads[i + sp] = total - pads[i];
      } else if (auto_pad == "VALID") {
        pads[i] = pads[i + sp] = 0, o = (S - span) / strides[i] + 1;
      } else if (auto_pad == "NOTSET") {
        const std::int64_t room = S + pads[i] + pads[i + sp] - span;
        o = (ceil_mode ? (room + strides[i] - 1) / strides[i] : room / strides[i]) + 1;
        if (ceil_mode && (o - 1) * strides[i] >= S + pads[i]) --o;  // the last window starts inside
      } else {
        throw Unsupported(name, op, fmt::format("auto_pad '{}'", auto_pad));
      }
      if (o < 1) throw std::invalid_argument(fmt::format("node '{}' ({}): no output along axis {}", name, op, i + 2));
      out.push_back(static_cast<unsigned>(o));
    }
    const std::uint64_t O = count(out), Kt = count(std::vector<unsigned>(kernel.begin(), kernel.end()));
    const auto xst = strides_of(xs);
    // Where kernel offset k of output position o reads (or -1: padding;
    // transposed: the input position p with p strides + k dilation = o + pad).
    auto source = [&](std::uint64_t o, std::uint64_t k) -> std::int64_t {
      std::int64_t f = 0;
      for (std::size_t i = sp; i-- > 0;) {
        const std::int64_t oi = static_cast<std::int64_t>(o % out[i]), ki = static_cast<std::int64_t>(k % kernel[i]);
        o /= out[i], k /= static_cast<std::uint64_t>(kernel[i]);
        std::int64_t p = oi * strides[i] + ki * dil[i] - pads[i];
        if (transposed) {
          const std::int64_t q = oi + pads[i] - ki * dil[i];
          if (q < 0 || q % strides[i]) return -1;
          p = q / strides[i];
        }
        if (p < 0 || p >= xs[2 + i]) return -1;
        f += p * static_cast<std::int64_t>(xst[2 + i]);
      }
      return f;
    };
    Value fill;
    fill.c.elem_type = TP::FLOAT, fill.shape = fill.c.shape = {1};
    fill.c.f = {op == "MaxPool" ? -std::numeric_limits<float>::infinity() : 0.0f};
    std::vector<unsigned> yshape{N, 0};
    yshape.insert(yshape.end(), out.begin(), out.end());
    if (conv) {
      const unsigned M = w->shape[transposed ? 1 : 0];
      const std::uint64_t CK = C * Kt;
      // The columns: row (n, o), column (c, k).
      const Value cols = remap({&x, &fill}, {static_cast<unsigned>(N * O), static_cast<unsigned>(CK)}, [&](std::uint64_t e) {
        const std::uint64_t row = e / CK, col = e % CK, nn = row / O, o = row % O, c = col / Kt, k = col % Kt;
        const std::int64_t f = source(o, k);
        return f < 0 ? Source{1, 0} : Source{0, nn * xst[0] + c * xst[1] + static_cast<std::uint64_t>(f)};
      }, name, op);
      // B[(c, k), m]: W[m, c, k] (Conv), W[c, m, k] (ConvTranspose).
      const Value wt = remap({w}, {static_cast<unsigned>(CK), M}, [&](std::uint64_t e) {
        const std::uint64_t m = e % M, ck = e / M;
        return Source{0, transposed ? (ck / Kt) * M * Kt + m * Kt + ck % Kt : m * CK + ck};
      }, name, op);
      Value y;
      y.shape = {static_cast<unsigned>(N * O), M}, y.tensor = matmul(tensor(cols, name, op), wt, fresh("conv"), op);
      if (n.input_size() > 2 && !n.input(2).empty()) y = binary(OpKind::add, y, value(n.input(2), name, op), name, op);
      yshape[1] = M;
      set_value(n.output(0), remap({&y}, yshape, [&](std::uint64_t e) {
        const std::uint64_t o = e % O, m = (e / O) % M, nn = e / (O * M);
        return Source{0, (nn * O + o) * M + m};
      }, name, op, name));
      return;
    }
    yshape[1] = C;
    Value acc;
    for (std::uint64_t k = 0; k < Kt; ++k) {
      const Value win = remap({&x, &fill}, yshape, [&](std::uint64_t e) {
        const std::uint64_t o = e % O, nc = e / O;
        const std::int64_t f = source(o, k);
        return f < 0 ? Source{1, 0} : Source{0, nc * xst[1] + static_cast<std::uint64_t>(f)};
      }, name, op);
      acc = k ? binary(op == "MaxPool" ? OpKind::max : OpKind::add, acc, win, name, op) : win;
    }
    if (op == "AveragePool") {  // divided by the positions counted: inside the input, or the padded input
      std::vector<float> inv(O);
      for (std::uint64_t o = 0; o < O; ++o) {
        unsigned counted = 0;
        for (std::uint64_t k = 0; k < Kt; ++k) {
          if (!include_pad) {
            counted += source(o, k) >= 0;
            continue;
          }
          bool inside = true;
          std::uint64_t oo = o, kk = k;
          for (std::size_t i = sp; i-- > 0;) {
            const std::int64_t p = static_cast<std::int64_t>(oo % out[i]) * strides[i] + static_cast<std::int64_t>(kk % kernel[i]) * dil[i] - pads[i];
            oo /= out[i], kk /= static_cast<std::uint64_t>(kernel[i]);
            inside &= p >= -pads[i] && p < xs[2 + i] + pads[i + sp];
          }
          counted += inside;
        }
        inv[o] = 1.0f / static_cast<float>(counted);
      }
      Value scale;
      scale.c.elem_type = TP::FLOAT, scale.shape = scale.c.shape = out, scale.c.f = inv;
      acc = binary(OpKind::mul, acc, scale, name, op);
    }
    set_value(n.output(0), acc);
  }
  void set_value(const std::string& name, Value v) { values_[name] = std::move(v); }

  // A parameter's numbers: a constant's, or an FP32 input's as given (the
  // graph is compiled for them: they decide the output's shape).
  std::vector<double> known(const Value& v, const std::string& node, const std::string& op) const {
    const HostTensor* h = v.constant() ? &v.c : given_.count(v.tensor) ? &given_.at(v.tensor) : nullptr;
    if (!h) throw Unsupported(node, op, "a parameter computed on the chip");
    std::vector<double> r;
    for (float f : h->f) r.push_back(f);
    for (std::int64_t i : h->i) r.push_back(static_cast<double>(i));
    return r;
  }

  // Resize (opset 11 on), nearest, linear or cubic: each output coordinate
  // mapped to the input's (the coordinate transformation mode), then per
  // axis 1, 2 or 4 taps (edges repeated, as ONNX's reference pads), and the
  // output the weighted sum of the taps' gathers over the axes (weights
  // made on the host); tf_crop_and_resize is refused.
  void resize(const onnx::NodeProto& n, const std::string& name, const std::string& op,
              const std::map<std::string, const onnx::AttributeProto*>& attrs, std::set<std::string>& used, int opset) {
    auto str = [&](const char* k, const char* d) {
      if (!attrs.count(k)) return std::string(d);
      used.insert(k);
      return attrs.at(k)->s();
    };
    if (opset < 11) throw Unsupported(name, op, "Resize before opset 11");
    const std::string mode = str("mode", "nearest"), ctm = str("coordinate_transformation_mode", "half_pixel");
    const std::string nearest = str("nearest_mode", "round_prefer_floor");
    if (mode != "nearest" && mode != "linear" && mode != "cubic") throw Unsupported(name, op, fmt::format("mode '{}'", mode));
    if (ctm == "tf_crop_and_resize") throw Unsupported(name, op, "coordinate_transformation_mode 'tf_crop_and_resize'");
    const double A = attrs.count("cubic_coeff_a") ? (used.insert("cubic_coeff_a"), attrs.at("cubic_coeff_a")->f()) : -0.75;
    const bool exclude = attrs.count("exclude_outside") && (used.insert("exclude_outside"), attrs.at("exclude_outside")->i());
    if (attrs.count("extrapolation_value")) used.insert("extrapolation_value");  // tf_crop_and_resize's only
    const Value& x = value(n.input(0), name, op);
    const std::vector<unsigned>& xs = x.shape;
    const std::size_t rank = xs.size();
    std::vector<double> scales;
    std::vector<unsigned> out;
    const bool has_sizes = n.input_size() > 3 && !n.input(3).empty();
    if (has_sizes) {
      for (double d : known(value(n.input(3), name, op), name, op)) out.push_back(static_cast<unsigned>(d));
      for (std::size_t i = 0; i < rank && i < out.size(); ++i) scales.push_back(double(out[i]) / xs[i]);
    } else if (n.input_size() > 2 && !n.input(2).empty()) {
      scales = known(value(n.input(2), name, op), name, op);
      for (std::size_t i = 0; i < rank && i < scales.size(); ++i) out.push_back(static_cast<unsigned>(std::floor(xs[i] * scales[i])));
    }
    if (out.size() != rank || scales.size() != rank)
      throw std::invalid_argument(fmt::format("node '{}' ({}): scales or sizes for each of {} axes", name, op, rank));
    // Per axis and output index: the taps (input index, weight).
    using Taps = std::vector<std::pair<unsigned, double>>;
    std::vector<std::vector<Taps>> taps(rank);
    std::vector<unsigned> width(rank, 1);  // taps per output index along the axis
    for (std::size_t a = 0; a < rank; ++a)
      for (unsigned o = 0; o < out[a]; ++o) {
        // The resized length as ONNX's reference takes it: input x scale, not rounded.
        const double s = scales[a], in = xs[a], resized = in * s;
        double c;
        if (ctm == "half_pixel") c = (o + 0.5) / s - 0.5;
        else if (ctm == "pytorch_half_pixel") c = resized > 1 ? (o + 0.5) / s - 0.5 : 0;
        else if (ctm == "align_corners") c = resized == 1 ? 0 : o * (in - 1) / (resized - 1);
        else if (ctm == "asymmetric") c = o / s;
        else if (ctm == "tf_half_pixel_for_nn") c = (o + 0.5) / s;
        else throw Unsupported(name, op, fmt::format("coordinate_transformation_mode '{}'", ctm));
        Taps t;
        auto clamp = [&](double i) { return static_cast<unsigned>(std::clamp(i, 0.0, in - 1)); };
        if (mode == "nearest") {
          double r;
          if (nearest == "round_prefer_floor") r = c == std::floor(c) + 0.5 ? std::floor(c) : std::round(c);
          else if (nearest == "round_prefer_ceil") r = c == std::floor(c) + 0.5 ? std::ceil(c) : std::round(c);
          else if (nearest == "floor") r = std::floor(c);
          else if (nearest == "ceil") r = std::ceil(c);
          else throw Unsupported(name, op, fmt::format("nearest_mode '{}'", nearest));
          t = {{clamp(r), 1.0}};
        } else {
          // The nearest 2 (linear) or 4 (cubic) points, a whole coordinate
          // taking the ratio 1 as the reference does.
          const double f = std::floor(c);
          double r = c - f;
          std::array<double, 4> w{};
          unsigned nw;
          double first;
          if (mode == "linear") {
            if (r == 0) r = 1, first = f - 1;
            else first = f;
            w[0] = 1 - r, w[1] = r, nw = 2;
          } else {
            if (r == 0) r = 1, first = f - 2;
            else first = f - 1;
            auto far = [&](double s) { return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A; };  // 1 < s < 2
            auto near = [&](double s) { return ((A + 2) * s - (A + 3)) * s * s + 1; };      // s <= 1
            w = {far(r + 1), near(r), near(1 - r), far(2 - r)}, nw = 4;
          }
          double sum = 0;
          for (unsigned j = 0; j < nw; ++j) {
            if (exclude && (first + j < 0 || first + j > in - 1)) w[j] = 0;
            sum += w[j];
          }
          for (unsigned j = 0; j < nw; ++j) {  // taps on one index (the edges) merged, those of weight 0 dropped
            const unsigned i = clamp(first + j);
            const double wj = exclude ? w[j] / sum : w[j];
            if (!t.empty() && t.back().first == i) t.back().second += wj;
            else t.push_back({i, wj});
          }
          t.erase(std::remove_if(t.begin(), t.end(), [](const auto& p) { return p.second == 0; }), t.end());
          if (t.empty()) t = {{clamp(f), 0.0}};
        }
        width[a] = std::max<unsigned>(width[a], static_cast<unsigned>(t.size()));
        taps[a].push_back(t);
      }
    for (std::size_t a = 0; a < rank; ++a)  // every output index the axis's number of taps (the extra ones weigh 0)
      for (Taps& t : taps[a]) t.resize(width[a], {t.front().first, 0.0});
    const std::uint64_t total = count(out);
    const auto xst = strides(xs);
    std::uint64_t corners = 1;
    for (unsigned wd : width) corners *= wd;
    if (corners > 256) throw Unsupported(name, op, fmt::format("{} taps per output element", corners));
    Value sum;
    for (std::uint64_t corner = 0; corner < corners; ++corner) {
      std::vector<unsigned> which(rank);  // this corner's tap along each axis
      for (std::size_t a = rank, rest = corner; a-- > 0;) which[a] = static_cast<unsigned>(rest % width[a]), rest /= width[a];
      Value gathered = remap({&x}, out, [&](std::uint64_t o) {
        const auto idx = unravel(o, out);
        std::uint64_t f = 0;
        for (std::size_t a = 0; a < rank; ++a) f += taps[a][idx[a]][which[a]].first * xst[a];
        return Source{0, f};
      }, name, op);
      if (corners > 1) {
        Value w;
        w.c.elem_type = TP::FLOAT, w.shape = w.c.shape = out;
        for (std::uint64_t o = 0; o < total; ++o) {
          const auto idx = unravel(o, out);
          double p = 1;
          for (std::size_t a = 0; a < rank; ++a) p *= taps[a][idx[a]][which[a]].second;
          w.c.f.push_back(static_cast<float>(p));
        }
        gathered = binary(OpKind::mul, gathered, w, name, op);
      }
      sum = corner ? binary(OpKind::add, sum, gathered, name, op) : gathered;
    }
    set_value(n.output(0), sum);
  }
  static std::vector<std::uint64_t> strides_of(const std::vector<unsigned>& s) { return strides(s); }

  static void check_attributes(const std::map<std::string, const onnx::AttributeProto*>& attrs,
                               const std::set<std::string>& used, const std::string& name, const std::string& op) {
    for (const auto& [k, a] : attrs)
      if (!used.count(k)) throw Unsupported(name, op, fmt::format("attribute '{}'", k));
  }

  // The ops that only move data: each a remap of its inputs' elements.
  void movement(const onnx::NodeProto& n, const std::string& name, const std::string& op,
                const std::map<std::string, const onnx::AttributeProto*>& attrs, std::set<std::string>& used,
                const std::function<std::int64_t(const char*, std::int64_t)>& ai) {
    auto has_in = [&](int k) { return n.input_size() > k && !n.input(k).empty(); };
    auto in = [&](int k) -> const Value& {
      if (!has_in(k)) throw std::invalid_argument(fmt::format("node '{}' ({}): input {} is missing", name, op, k));
      return value(n.input(k), name, op);
    };
    auto ints = [&](int k) {
      const Value& v = in(k);
      if (!v.constant() || !is_int(v.c.elem_type)) throw Unsupported(name, op, fmt::format("input {} computed on the chip", k));
      return v.c.i;
    };
    auto attr_ints = [&](const char* k) {
      std::vector<std::int64_t> v;
      if (attrs.count(k)) used.insert(k), v.assign(attrs.at(k)->ints().begin(), attrs.at(k)->ints().end());
      return v;
    };
    auto set = [&](Value v, int k = 0) { values_[n.output(k)] = std::move(v); };
    const Value& x = in(0);
    const std::vector<unsigned>& xs = x.shape;
    const std::vector<std::uint64_t> xst = strides(xs);
    const auto rank = static_cast<std::int64_t>(xs.size());
    auto norm = [&](std::int64_t a, std::int64_t r) { return static_cast<std::size_t>(axis(a, static_cast<std::size_t>(r), name, op)); };
    std::vector<unsigned> shape;
    if (op == "Transpose") {
      std::vector<std::int64_t> perm = attr_ints("perm");
      if (perm.empty())
        for (std::int64_t k = rank; k-- > 0;) perm.push_back(k);
      if (static_cast<std::int64_t>(perm.size()) != rank) throw std::invalid_argument(fmt::format("node '{}' ({}): perm of {} axes for rank {}", name, op, perm.size(), rank));
      std::vector<std::size_t> p;
      for (std::int64_t a : perm) p.push_back(norm(a, rank));
      set(permute(x, p, name, op));
    } else if (op == "Concat") {
      const std::size_t a = norm(ai("axis", 0), rank);
      std::vector<const Value*> ins;
      std::vector<unsigned> starts;
      shape = xs, shape[a] = 0;
      for (int k = 0; k < n.input_size(); ++k) {
        const Value& v = in(k);
        if (v.shape.size() != xs.size()) throw std::invalid_argument(fmt::format("node '{}' ({}): inputs of two ranks", name, op));
        ins.push_back(&v), starts.push_back(shape[a]), shape[a] += v.shape[a];
      }
      set(remap(ins, shape, [&](std::uint64_t o) {
        auto idx = unravel(o, shape);
        unsigned k = static_cast<unsigned>(std::upper_bound(starts.begin(), starts.end(), idx[a]) - starts.begin() - 1);
        idx[a] -= starts[k];
        const auto st = strides(ins[k]->shape);
        std::uint64_t f = 0;
        for (std::size_t i = 0; i < idx.size(); ++i) f += idx[i] * st[i];
        return Source{k, f};
      }, name, op, name));
    } else if (op == "Slice") {
      std::vector<std::int64_t> starts = ints(1), ends = ints(2), axes, steps;
      if (has_in(3)) axes = ints(3);
      if (has_in(4)) steps = ints(4);
      if (axes.empty())
        for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
      if (steps.empty()) steps.assign(starts.size(), 1);
      std::vector<std::int64_t> first(xs.size(), 0), step(xs.size(), 1);
      shape = xs;
      for (std::size_t k = 0; k < axes.size(); ++k) {
        const std::size_t a = norm(axes[k], rank);
        const std::int64_t d = xs[a], s = steps.at(k);
        if (!s) throw std::invalid_argument(fmt::format("node '{}' ({}): a step of 0", name, op));
        std::int64_t b = starts.at(k), e = ends.at(k);
        if (b < 0) b += d;
        if (e < 0) e += d;
        b = s > 0 ? std::clamp<std::int64_t>(b, 0, d) : std::clamp<std::int64_t>(b, 0, d - 1);
        e = s > 0 ? std::clamp<std::int64_t>(e, 0, d) : std::clamp<std::int64_t>(e, -1, d - 1);
        const std::int64_t len = s > 0 ? (e - b + s - 1) / s : (b - e - s - 1) / -s;
        first[a] = b, step[a] = s, shape[a] = static_cast<unsigned>(std::max<std::int64_t>(len, 0));
      }
      set(remap({&x}, shape, [&](std::uint64_t o) {
        const auto idx = unravel(o, shape);
        std::uint64_t f = 0;
        for (std::size_t i = 0; i < idx.size(); ++i) f += static_cast<std::uint64_t>(first[i] + step[i] * idx[i]) * xst[i];
        return Source{0, f};
      }, name, op, name));
    } else if (op == "Split") {
      const std::size_t a = norm(ai("axis", 0), rank);
      std::vector<std::int64_t> split = has_in(1) ? ints(1) : attr_ints("split");
      if (split.empty())
        for (int k = 0; k < n.output_size(); ++k) split.push_back(xs[a] / n.output_size() + (k < static_cast<int>(xs[a] % n.output_size()) ? 1 : 0));
      if (static_cast<int>(split.size()) != n.output_size()) throw std::invalid_argument(fmt::format("node '{}' ({}): {} parts for {} outputs", name, op, split.size(), n.output_size()));
      unsigned at = 0;
      for (int k = 0; k < n.output_size(); ++k) {
        shape = xs, shape[a] = static_cast<unsigned>(split[static_cast<std::size_t>(k)]);
        const unsigned start = at;
        at += shape[a];
        if (n.output(k).empty()) continue;
        set(remap({&x}, shape, [&](std::uint64_t o) {
          auto idx = unravel(o, shape);
          idx[a] += start;
          std::uint64_t f = 0;
          for (std::size_t i = 0; i < idx.size(); ++i) f += idx[i] * xst[i];
          return Source{0, f};
        }, name, op, k ? fmt::format("{}.{}", name, k) : name), k);
      }
      if (at != xs[a]) throw std::invalid_argument(fmt::format("node '{}' ({}): parts of {} for {}", name, op, at, xs[a]));
    } else if (op == "Gather") {
      const std::size_t a = norm(ai("axis", 0), rank);
      const Value& iv = in(1);
      const std::vector<std::int64_t> index = ints(1);
      shape.assign(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(a));
      shape.insert(shape.end(), iv.shape.begin(), iv.shape.end());
      shape.insert(shape.end(), xs.begin() + static_cast<std::ptrdiff_t>(a) + 1, xs.end());
      for (std::int64_t i : index)
        if (i < -static_cast<std::int64_t>(xs[a]) || i >= xs[a]) throw std::invalid_argument(fmt::format("node '{}' ({}): index {} of {}", name, op, i, xs[a]));
      const std::size_t ir = iv.shape.size();
      set(remap({&x}, shape, [&](std::uint64_t o) {
        const auto idx = unravel(o, shape);
        std::uint64_t j = 0;
        for (std::size_t i = 0; i < ir; ++i) j = j * iv.shape[i] + idx[a + i];
        std::int64_t g = index[j];
        if (g < 0) g += xs[a];
        std::uint64_t f = static_cast<std::uint64_t>(g) * xst[a];
        for (std::size_t i = 0; i < a; ++i) f += idx[i] * xst[i];
        for (std::size_t i = a + 1; i < xs.size(); ++i) f += idx[i + ir - 1] * xst[i];
        return Source{0, f};
      }, name, op, name));
    } else if (op == "Tile" || op == "Expand") {
      const std::vector<std::int64_t> v = ints(1);
      if (op == "Tile") {
        if (static_cast<std::int64_t>(v.size()) != rank) throw std::invalid_argument(fmt::format("node '{}' ({}): {} repeats for rank {}", name, op, v.size(), rank));
        for (std::size_t i = 0; i < xs.size(); ++i) shape.push_back(xs[i] * static_cast<unsigned>(v[i]));
      } else {
        std::vector<unsigned> want;
        for (std::int64_t d : v) want.push_back(static_cast<unsigned>(d));
        bool ok;
        shape = broadcast(xs, want, &ok);
        if (!ok) throw std::invalid_argument(fmt::format("node '{}' ({}): {} does not expand to {}", name, op, shape_text(xs), shape_text(want)));
      }
      const std::size_t lead = shape.size() - xs.size();
      set(remap({&x}, shape, [&](std::uint64_t o) {
        const auto idx = unravel(o, shape);
        std::uint64_t f = 0;
        for (std::size_t i = 0; i < xs.size(); ++i) f += (idx[lead + i] % xs[i]) * xst[i];
        return Source{0, f};
      }, name, op, name));
    } else if (op == "Trilu") {
      if (rank < 2) throw std::invalid_argument(fmt::format("node '{}' ({}): rank {}", name, op, rank));
      const std::int64_t k = has_in(1) ? ints(1).at(0) : 0;
      const bool upper = ai("upper", 1);
      Value zeros;
      zeros.shape = xs, zeros.c.elem_type = x.constant() ? x.c.elem_type : TP::FLOAT, zeros.c.shape = xs;
      if (is_int(zeros.c.elem_type)) zeros.c.i.assign(count(xs), 0);
      else zeros.c.f.assign(count(xs), 0.0f);
      const unsigned cols = xs.back(), rows = xs[xs.size() - 2];
      set(remap({&x, &zeros}, xs, [&](std::uint64_t o) {
        const auto i = static_cast<std::int64_t>(o / cols % rows), j = static_cast<std::int64_t>(o % cols);
        return Source{upper ? (j - i >= k ? 0u : 1u) : (j - i <= k ? 0u : 1u), o};
      }, name, op, name));
    } else if (op == "Pad") {
      std::string mode = "constant";
      if (attrs.count("mode")) used.insert("mode"), mode = attrs.at("mode")->s();
      if (mode != "constant" && mode != "reflect" && mode != "edge") throw Unsupported(name, op, fmt::format("mode '{}'", mode));
      const std::vector<std::int64_t> pads = ints(1);
      if (has_in(3)) throw Unsupported(name, op, "axes");
      if (static_cast<std::int64_t>(pads.size()) != 2 * rank) throw std::invalid_argument(fmt::format("node '{}' ({}): {} pads for rank {}", name, op, pads.size(), rank));
      for (std::int64_t i = 0; i < rank; ++i) {
        const std::int64_t d = xs[static_cast<std::size_t>(i)] + pads[static_cast<std::size_t>(i)] + pads[static_cast<std::size_t>(i + rank)];
        if (d < 0) throw std::invalid_argument(fmt::format("node '{}' ({}): pads past the tensor", name, op));
        shape.push_back(static_cast<unsigned>(d));
      }
      Value fill;
      fill.shape = shape, fill.c.shape = shape, fill.c.elem_type = x.constant() ? x.c.elem_type : TP::FLOAT;
      const Value* cv = has_in(2) ? &in(2) : nullptr;
      if (cv && !cv->constant()) throw Unsupported(name, op, "a padding value computed on the chip");
      if (is_int(fill.c.elem_type)) fill.c.i.assign(count(shape), cv ? cv->c.i.at(0) : 0);
      else fill.c.f.assign(count(shape), cv ? cv->c.f.at(0) : 0.0f);
      set(remap({&x, &fill}, shape, [&](std::uint64_t o) {
        const auto idx = unravel(o, shape);
        std::uint64_t f = 0;
        for (std::size_t i = 0; i < idx.size(); ++i) {
          const auto d = static_cast<std::int64_t>(xs[i]);
          std::int64_t p = static_cast<std::int64_t>(idx[i]) - pads[i];
          if (p < 0 || p >= d) {
            if (mode == "constant") return Source{1, o};
            if (mode == "edge") p = std::clamp<std::int64_t>(p, 0, d - 1);
            else while (p < 0 || p >= d) p = p < 0 ? -p : 2 * (d - 1) - p;
          }
          f += static_cast<std::uint64_t>(p) * xst[i];
        }
        return Source{0, f};
      }, name, op, name));
    } else if (op == "GatherElements" || op == "ScatterElements" || op == "Scatter") {
      const std::size_t a = norm(ai("axis", 0), rank);
      const Value& iv = in(1);
      const std::vector<std::int64_t> index = ints(1);
      if (iv.shape.size() != xs.size()) throw std::invalid_argument(fmt::format("node '{}' ({}): indices of rank {}", name, op, iv.shape.size()));
      auto at = [&](std::size_t j) {
        std::int64_t g = index.at(j);
        if (g < -static_cast<std::int64_t>(xs[a]) || g >= xs[a]) throw std::invalid_argument(fmt::format("node '{}' ({}): index {} of {}", name, op, g, xs[a]));
        return static_cast<std::uint64_t>(g < 0 ? g + xs[a] : g);
      };
      if (op == "GatherElements") {
        set(remap({&x}, iv.shape, [&](std::uint64_t o) {
          auto idx = unravel(o, iv.shape);
          std::uint64_t f = 0;
          for (std::size_t i = 0; i < idx.size(); ++i) f += (i == a ? at(o) : idx[i]) * xst[i];
          return Source{0, f};
        }, name, op, name));
      } else {
        if (attrs.count("reduction") && attrs.at("reduction")->s() != "none") throw Unsupported(name, op, "a reduction");
        if (attrs.count("reduction")) used.insert("reduction");
        std::vector<Source> src(count(xs));
        for (std::uint64_t o = 0; o < src.size(); ++o) src[o] = {0, o};
        for (std::uint64_t u = 0; u < count(iv.shape); ++u) {
          auto idx = unravel(u, iv.shape);
          std::uint64_t f = 0;
          for (std::size_t i = 0; i < idx.size(); ++i) f += (i == a ? at(u) : idx[i]) * xst[i];
          src[f] = {1, u};
        }
        set(remap({&x, &in(2)}, xs, [&](std::uint64_t o) { return src[o]; }, name, op, name));
      }
    } else if (op == "ScatterND") {
      if (attrs.count("reduction") && attrs.at("reduction")->s() != "none") throw Unsupported(name, op, "a reduction");
      if (attrs.count("reduction")) used.insert("reduction");
      const Value& iv = in(1);
      const std::vector<std::int64_t> index = ints(1);
      const std::size_t k = iv.shape.empty() ? 0 : iv.shape.back();
      if (!k || k > xs.size()) throw std::invalid_argument(fmt::format("node '{}' ({}): index tuples of {}", name, op, k));
      const std::uint64_t tuples = count(iv.shape) / k, slice = count({xs.begin() + static_cast<std::ptrdiff_t>(k), xs.end()});
      std::vector<Source> src(count(xs));
      for (std::uint64_t o = 0; o < src.size(); ++o) src[o] = {0, o};
      for (std::uint64_t j = 0; j < tuples; ++j) {
        std::uint64_t f = 0;
        for (std::size_t i = 0; i < k; ++i) {
          std::int64_t g = index[j * k + i];
          if (g < 0) g += xs[i];
          if (g < 0 || g >= xs[i]) throw std::invalid_argument(fmt::format("node '{}' ({}): index {} of {}", name, op, index[j * k + i], xs[i]));
          f += static_cast<std::uint64_t>(g) * xst[i];
        }
        for (std::uint64_t e = 0; e < slice; ++e) src[f + e] = {1, j * slice + e};
      }
      set(remap({&x, &in(2)}, xs, [&](std::uint64_t o) { return src[o]; }, name, op, name));
    } else if (op == "OneHot") {
      const std::vector<std::int64_t> index = ints(0);
      const Value& depth_v = in(1);
      const std::int64_t depth = depth_v.constant() && !depth_v.c.i.empty() ? depth_v.c.i[0]
                                 : depth_v.constant() && !depth_v.c.f.empty() ? static_cast<std::int64_t>(depth_v.c.f[0])
                                                                               : -1;
      if (depth < 1) throw Unsupported(name, op, "a depth computed on the chip");
      const Value& values = in(2);
      const std::size_t a = norm(ai("axis", -1), rank + 1);
      shape = xs;
      shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(a), static_cast<unsigned>(depth));
      set(remap({&values}, shape, [&](std::uint64_t o) {
        auto idx = unravel(o, shape);
        const std::int64_t d = idx[a];
        idx.erase(idx.begin() + static_cast<std::ptrdiff_t>(a));
        std::uint64_t j = 0;
        for (std::size_t i = 0; i < idx.size(); ++i) j += idx[i] * xst[i];
        std::int64_t g = index[j];
        if (g < 0) g += depth;
        return Source{0, g == d ? 1u : 0u};
      }, name, op, name));
    } else if (op == "EyeLike") {
      if (rank != 2) throw std::invalid_argument(fmt::format("node '{}' ({}): rank {}", name, op, rank));
      const std::int64_t k = ai("k", 0), dtype = ai("dtype", x.constant() ? x.c.elem_type : TP::FLOAT);
      Value r;
      r.shape = xs, r.c.shape = xs, r.c.elem_type = static_cast<int>(dtype);
      if (!is_float(r.c.elem_type) && !is_int(r.c.elem_type)) throw Unsupported(name, op, fmt::format("dtype {}", type_name(r.c.elem_type)));
      for (std::uint64_t o = 0; o < count(xs); ++o) {
        const bool one = static_cast<std::int64_t>(o % xs[1]) - static_cast<std::int64_t>(o / xs[1]) == k;
        if (is_int(r.c.elem_type)) r.c.i.push_back(one);
        else r.c.f.push_back(one ? 1.0f : 0.0f);
      }
      set(r);
    } else if (op == "Compress") {
      const std::vector<std::int64_t> cond = ints(1);
      std::vector<std::uint64_t> keep;
      if (!attrs.count("axis")) {
        for (std::uint64_t i = 0; i < std::min<std::uint64_t>(cond.size(), count(xs)); ++i)
          if (cond[i]) keep.push_back(i);
        shape = {static_cast<unsigned>(keep.size())};
        set(remap({&x}, shape, [&](std::uint64_t o) { return Source{0, keep[o]}; }, name, op, name));
      } else {
        const std::size_t a = norm(ai("axis", 0), rank);
        for (std::uint64_t i = 0; i < std::min<std::uint64_t>(cond.size(), xs[a]); ++i)
          if (cond[i]) keep.push_back(i);
        shape = xs, shape[a] = static_cast<unsigned>(keep.size());
        set(remap({&x}, shape, [&](std::uint64_t o) {
          auto idx = unravel(o, shape);
          idx[a] = static_cast<unsigned>(keep[idx[a]]);
          std::uint64_t f = 0;
          for (std::size_t i = 0; i < idx.size(); ++i) f += idx[i] * xst[i];
          return Source{0, f};
        }, name, op, name));
      }
    } else if (op == "Where") {  // the condition known now: each element from X or from Y
      const std::vector<std::int64_t> cond = ints(0);
      const Value &a = in(1), &b = in(2);
      bool ok1, ok2;
      shape = broadcast(broadcast(xs, a.shape, &ok1), b.shape, &ok2);
      if (!ok1 || !ok2) throw std::invalid_argument(fmt::format("node '{}' ({}): shapes that do not broadcast", name, op));
      auto flat = [&](const std::vector<unsigned>& idx, const std::vector<unsigned>& s) {  // numpy broadcasting's index
        const auto st = strides(s);
        std::uint64_t f = 0;
        for (std::size_t i = 0; i < s.size(); ++i) f += (s[i] == 1 ? 0 : idx[idx.size() - s.size() + i]) * st[i];
        return f;
      };
      set(remap({&a, &b}, shape, [&](std::uint64_t o) {
        const auto idx = unravel(o, shape);
        return cond[flat(idx, xs)] ? Source{0, flat(idx, a.shape)} : Source{1, flat(idx, b.shape)};
      }, name, op, name));
    } else {  // DepthToSpace, SpaceToDepth: [N, C, H, W]
      if (rank != 4) throw std::invalid_argument(fmt::format("node '{}' ({}): rank {}, not 4", name, op, rank));
      const auto b = static_cast<unsigned>(ai("blocksize", 0));
      std::string mode = "DCR";
      if (attrs.count("mode")) used.insert("mode"), mode = attrs.at("mode")->s();
      const unsigned N = xs[0], C = xs[1], Hh = xs[2], W = xs[3];
      if (!b || (op == "DepthToSpace" ? C % (b * b) : Hh % b + W % b)) throw std::invalid_argument(fmt::format("node '{}' ({}): blocksize {} for {}", name, op, b, shape_text(xs)));
      shape = op == "DepthToSpace" ? std::vector<unsigned>{N, C / (b * b), Hh * b, W * b} : std::vector<unsigned>{N, C * b * b, Hh / b, W / b};
      const bool crd = mode == "CRD";
      if (mode != "DCR" && mode != "CRD") throw Unsupported(name, op, fmt::format("mode '{}'", mode));
      set(remap({&x}, shape, [&](std::uint64_t o) {
        const auto i = unravel(o, shape);
        std::uint64_t c, h, w;
        if (op == "DepthToSpace") {
          const unsigned cc = shape[1], bi = i[2] % b, bj = i[3] % b;
          c = crd ? i[1] * b * b + bi * b + bj : (bi * b + bj) * cc + i[1], h = i[2] / b, w = i[3] / b;
        } else {
          const unsigned blk = i[1] / C, bi = blk / b, bj = blk % b;
          c = i[1] % C, h = i[2] * b + bi, w = i[3] * b + bj;
        }
        return Source{0, i[0] * xst[0] + c * xst[1] + h * xst[2] + w * xst[3]};
      }, name, op, name));
    }
  }

  const onnx::ModelProto& m_;
  Precision precision_;
  int opset_ = 0;
  compiler::Graph g_;
  std::map<std::string, Value> values_;
  std::map<int, int> elem_type_;  // tensors that are not FLOAT in ONNX
  Imported out_;
  unsigned fresh_ = 0;
  std::map<int, HostTensor> given_;  // FP32 inputs' data as given to the import
};

}  // namespace

HostTensor Imported::output(std::size_t k, const std::map<std::string, std::vector<float>>& run) const {
  const Output& o = outputs.at(k);
  if (o.tensor < 0) return o.known;
  const std::vector<float>& values = run.at(o.tensor_name);
  HostTensor h;
  h.name = o.name, h.shape = o.shape, h.elem_type = o.elem_type;
  if (is_int(o.elem_type))
    for (float v : values) h.i.push_back(static_cast<std::int64_t>(v));
  else
    h.f = values;
  return h;
}

Imported import_model(const onnx::ModelProto& m, const std::map<std::string, HostTensor>& inputs, Precision p) {
  return Importer(m, p).run(inputs);
}

}  // namespace tessera::onnx_import
