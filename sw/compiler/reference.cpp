#include "reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engines/num/accumulate.hpp"
#include "engines/num/vector_ops.hpp"

namespace tessera::compiler {

void check_inputs(const Graph& g, const std::map<std::string, std::vector<float>>& inputs) {
  for (const auto& [name, v] : inputs) {
    bool known = false;
    for (const Tensor& t : g.tensors()) known |= t.role == Role::input && t.name == name;
    if (!known) throw std::invalid_argument(fmt::format("run: the graph has no input '{}'", name));
  }
  for (const Tensor& t : g.tensors()) {
    if (t.role != Role::input) continue;
    const auto it = inputs.find(t.name);
    if (it == inputs.end()) throw std::invalid_argument(fmt::format("run: input '{}' is missing", t.name));
    if (it->second.size() != t.elements())
      throw std::invalid_argument(
          fmt::format("run: input '{}' needs {} values, not {}", t.name, t.elements(), it->second.size()));
  }
}

std::vector<std::vector<float>> reference(const Graph& g, const std::map<std::string, std::vector<float>>& inputs) {
  check_inputs(g, inputs);
  std::vector<std::vector<float>> v(g.tensors().size());
  for (std::size_t i = 0; i < g.tensors().size(); ++i) {
    const Tensor& t = g.tensors()[i];
    if (t.role == Role::input) v[i] = inputs.at(t.name);
    if (t.role == Role::weight) v[i] = t.values;
  }
  namespace vec = num::vec;
  for (const Op& op : g.ops()) {
    const Tensor& out = g.tensor(op.out);
    const std::vector<float>& x = v[static_cast<std::size_t>(op.in[0])];
    const std::size_t cols = g.tensor(op.in[0]).cols(), rows = g.tensor(op.in[0]).rows();
    std::vector<float> y(out.elements());
    switch (op.kind) {
      case OpKind::matmul: {
        const Tensor& B = g.tensor(op.in[1]);
        const unsigned K = B.shape[0], N = B.shape[1];
        num::Convert conv;
        conv.saturate = true;
        auto q = [&](const std::vector<float>& s) {
          std::vector<double> d(s.size());
          for (std::size_t i = 0; i < s.size(); ++i) d[i] = num::quantize(format(op.format), s[i], conv);
          return d;
        };
        std::vector<double> c;
        num::gemm(q(x), q(v[static_cast<std::size_t>(op.in[1])]), c, static_cast<unsigned>(rows), N, K, num::Accumulation{});
        for (std::size_t i = 0; i < c.size(); ++i) y[i] = static_cast<float>(c[i]);
        break;
      }
      case OpKind::rmsnorm: case OpKind::layernorm: case OpKind::softmax: case OpKind::rope:
        y = x;
        for (std::size_t r = 0; r < rows; ++r) {
          float* row = y.data() + r * cols;
          if (op.kind == OpKind::rmsnorm)
            vec::rmsnorm(row, v[static_cast<std::size_t>(op.in[1])].data(), static_cast<unsigned>(cols), op.eps);
          else if (op.kind == OpKind::layernorm)
            vec::layernorm(row, v[static_cast<std::size_t>(op.in[1])].data(), v[static_cast<std::size_t>(op.in[2])].data(),
                           static_cast<unsigned>(cols), op.eps);
          else if (op.kind == OpKind::softmax)
            vec::softmax(row, static_cast<unsigned>(cols));
          else
            for (std::size_t h = 0; h < cols; h += op.head_dim)
              vec::rope(row + h, op.head_dim, op.position + static_cast<unsigned>(r / op.rows_per_position));
        }
        break;
      case OpKind::cast: {
        num::Convert conv;
        conv.saturate = true;
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(num::quantize(format(op.format), x[i], conv));
        break;
      }
      case OpKind::reshape: y = x; break;
      case OpKind::move:
        for (const Move& m : op.moves)
          for (std::uint64_t i = 0; i < m.count; ++i)
            std::copy_n(v[static_cast<std::size_t>(op.in[m.src])].begin() + static_cast<std::ptrdiff_t>(m.from + i * m.from_stride),
                        m.len, y.begin() + static_cast<std::ptrdiff_t>(m.to + i * m.to_stride));
        break;
      case OpKind::reduce_sum:
        for (std::size_t r = 0; r < rows; ++r) y[r] = vec::sum(x.data() + r * cols, static_cast<unsigned>(cols));
        break;
      case OpKind::reduce_max:
        for (std::size_t r = 0; r < rows; ++r) y[r] = *std::max_element(x.data() + r * cols, x.data() + (r + 1) * cols);
        break;
      case OpKind::argmax:
        for (std::size_t r = 0; r < rows; ++r) y[r] = static_cast<float>(vec::argmax(x.data() + r * cols, static_cast<unsigned>(cols)));
        break;
      default:
        if (is_binary(op.kind)) {
          const std::vector<float>& b = v[static_cast<std::size_t>(op.in[1])];
          for (std::size_t i = 0; i < y.size(); ++i) {
            const float p = x[i], s = b[i % b.size()];
            switch (op.kind) {
              case OpKind::add: y[i] = p + s; break;
              case OpKind::sub: y[i] = p - s; break;
              case OpKind::mul: y[i] = p * s; break;
              case OpKind::max: y[i] = std::max(p, s); break;
              case OpKind::min: y[i] = std::min(p, s); break;
              default: y[i] = vec::swiglu(p, s); break;
            }
          }
        } else {
          for (std::size_t i = 0; i < y.size(); ++i) {
            const float p = x[i];
            switch (op.kind) {
              case OpKind::relu: y[i] = vec::relu(p); break;
              case OpKind::relu2: y[i] = vec::relu2(p); break;
              case OpKind::exp: y[i] = vec::exp(p); break;
              case OpKind::log: y[i] = vec::log(p); break;
              case OpKind::tanh: y[i] = vec::tanh(p); break;
              case OpKind::sigmoid: y[i] = vec::sigmoid(p); break;
              case OpKind::silu: y[i] = vec::silu(p); break;
              case OpKind::gelu: y[i] = vec::gelu(p); break;
              case OpKind::neg: y[i] = -p; break;
              case OpKind::abs: y[i] = std::fabs(p); break;
              case OpKind::rsqrt: y[i] = vec::rsqrt(p); break;
              default: y[i] = vec::recip(p); break;
            }
          }
        }
    }
    v[static_cast<std::size_t>(op.out)] = std::move(y);
  }
  return v;
}

}  // namespace tessera::compiler
