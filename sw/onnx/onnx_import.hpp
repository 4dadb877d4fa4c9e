// ONNX models into the compiler's IR (sw/compiler): a ModelProto (opsets
// 13 to 17, read with Debian's libonnx) becomes an ir::Graph for the
// shapes of the inputs given (dynamic axes are bound by them), which the
// compiler tiles, fuses and runs on the chip.
//
// Values known when the model is imported fold away: initializers,
// Constant nodes, and the integer inputs given (a Reshape's shape, a
// Squeeze's axes). FP32 tensors become the graph's inputs and weights.
// An op, attribute or data type the import cannot lower exactly is
// refused with an Unsupported naming the node, the op and what it is;
// nothing is approximated silently. A matmul's precision follows the
// Precision asked for (see there).
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir.hpp"

namespace onnx {
class ModelProto;
class TensorProto;
}  // namespace onnx

namespace tessera::onnx_import {

// A tensor on the host: FP32 values, or integers (INT64, INT32, BOOL).
struct HostTensor {
  std::string name;
  std::vector<unsigned> shape;  // empty: a scalar
  int elem_type = 1;            // onnx::TensorProto::DataType
  std::vector<float> f;         // FLOAT, FLOAT16, BFLOAT16 (as values)
  std::vector<std::int64_t> i;  // INT64, INT32, BOOL
  std::uint64_t elements() const;
};

// Reads a TensorProto (raw_data or the typed fields). Throws
// std::runtime_error naming the file or the tensor: unreadable, a data type
// it does not take, or data that does not fill the shape.
HostTensor read_tensor(const onnx::TensorProto& t);
HostTensor read_tensor_file(const std::string& path);
// Writes one (FLOAT, FLOAT16, BFLOAT16 or INT64 as its elem_type says).
void write_tensor_file(const HostTensor& t, const std::string& path);
// ONNX's backend comparison of a result with its expected tensor:
// |got - want| <= atol + rtol |want| element by element, NaN where NaN,
// the same type and shape. Empty when they agree, else what differs first.
std::string compare(const HostTensor& want, const HostTensor& got, double rtol = 1e-3, double atol = 1e-7);

// Reads a model; throws std::runtime_error naming the file.
onnx::ModelProto read_model(const std::string& path);

// An op the import cannot lower (names the node, the op and why), or a
// tensor or input of a kind it does not take (op "tensor" or "input").
struct Unsupported : std::runtime_error {
  Unsupported(const std::string& node, const std::string& op, const std::string& why);
  std::string op, why;
};

// FP32 matmuls on a tensor core that takes BF16:
//   highest  three BF16 passes (a_hi.b_hi + a_hi.b_lo + a_lo.b_hi, each
//            operand split into its BF16 value and the BF16 of the rest),
//            as TPUs' and cuBLAS's FP32 emulation do: about FP32's accuracy;
//   bf16     one pass in BF16 (relative error near 2^-8).
enum class Precision { highest, bf16 };

struct Imported {
  compiler::Graph graph;
  // The model's outputs in order: the graph's tensor, the shape and the
  // ONNX type to write it back as.
  struct Output {
    std::string name;
    int tensor = -1;          // the graph's (-1: known at import)
    std::string tensor_name;  // its name in the graph, as Executable::run() returns it
    std::vector<unsigned> shape;
    int elem_type = 1;
    HostTensor known;         // the value, where known at import (a Shape's)
  };
  std::vector<Output> outputs;
  std::vector<std::string> inputs;  // the graph's (FP32) inputs, by ONNX name
  // Output k as ONNX has it, from a run's outputs (Executable::run()).
  HostTensor output(std::size_t k, const std::map<std::string, std::vector<float>>& run) const;
  // Whether anything runs on the chip (no output may need it).
  bool runs() const { return !graph.outputs().empty(); }
};

// `inputs`: every graph input not an initializer, by name, with its data
// (the FP32 ones give their shapes, the integer ones their values).
Imported import_model(const onnx::ModelProto& m, const std::map<std::string, HostTensor>& inputs,
                      Precision p = Precision::highest);

}  // namespace tessera::onnx_import
