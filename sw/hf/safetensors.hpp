// Safetensors, the Hugging Face weight format, read as it is written: an
// 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and [begin, end) byte range in the data that follows, and
// the data. A model split in shards is read through its
// model.safetensors.index.json ("weight_map": tensor -> shard file).
//
// Every check names the file and the tensor: a file shorter than its
// header says, a header that is not JSON or lies (a range that does not
// hold the shape's bytes, that runs past the data, or that overlaps
// another), a dtype other than BF16, F16, F32 and F8_E4M3. Tensors are
// read lazily, one at a time, as FP32 values (exactly: every one of those
// formats fits FP32).
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::hf {

struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TensorInfo {
  std::string name, dtype, file;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;  // absolute offsets in `file`
  std::uint64_t elements() const;
};

class SafeTensors {
 public:
  // A .safetensors file, a model.safetensors.index.json, or a folder that
  // holds one of those.
  static SafeTensors open(const std::string& path);
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }
  const TensorInfo& info(const std::string& name) const;  // throws FormatError naming a missing tensor
  std::vector<float> read(const std::string& name) const;

 private:
  void add_file(const std::string& file);
  std::map<std::string, TensorInfo> tensors_;
};

// Writes one file (the tests' files, seeded weights to keep): tensors as
// FP32 values stored in `dtype` (rounded to nearest even).
struct NamedTensor {
  std::string name, dtype = "F32";
  std::vector<std::uint64_t> shape;
  std::vector<float> values;
};
void write_safetensors(const std::string& file, const std::vector<NamedTensor>& tensors);

}  // namespace tessera::hf
