#include "safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engines/num/formats.hpp"

namespace tessera::hf {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kMaxHeader = 100u << 20;  // the format's own limit (100 MB)

unsigned dtype_bytes(const std::string& d) {
  if (d == "F32") return 4;
  if (d == "BF16" || d == "F16") return 2;
  if (d == "F8_E4M3") return 1;
  return 0;
}

}  // namespace

std::uint64_t TensorInfo::elements() const {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

SafeTensors SafeTensors::open(const std::string& path) {
  SafeTensors s;
  fs::path p = path;
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "model.safetensors.index.json")) p /= "model.safetensors.index.json";
    else if (fs::exists(p / "model.safetensors")) p /= "model.safetensors";
    else throw FormatError(fmt::format("{}: neither model.safetensors nor model.safetensors.index.json is there", path));
  }
  if (p.string().size() >= 5 && p.extension() == ".json") {
    std::ifstream f(p);
    if (!f) throw FormatError(fmt::format("{}: cannot be read", p.string()));
    nlohmann::json index;
    try {
      f >> index;
    } catch (const std::exception& e) {
      throw FormatError(fmt::format("{}: not JSON ({})", p.string(), e.what()));
    }
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      throw FormatError(fmt::format("{}: no \"weight_map\" object", p.string()));
    std::map<std::string, std::vector<std::string>> files;  // shard -> the tensors the index puts there
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string()) throw FormatError(fmt::format("{}: tensor '{}': its shard is not a file name", p.string(), name));
      const std::string shard = file.get<std::string>();
      if (shard.find('/') != std::string::npos || shard == "..")
        throw FormatError(fmt::format("{}: tensor '{}': shard '{}' is not a file beside the index", p.string(), name, shard));
      files[(p.parent_path() / shard).string()].push_back(name);
    }
    for (const auto& [file, names] : files) {
      s.add_file(file);
      for (const std::string& n : names)
        if (!s.tensors_.count(n) || s.tensors_.at(n).file != file)
          throw FormatError(fmt::format("{}: tensor '{}' is not in {}, where the index puts it", p.string(), n, file));
    }
    return s;
  }
  s.add_file(p.string());
  return s;
}

void SafeTensors::add_file(const std::string& file) {
  std::ifstream f(file, std::ios::binary);
  std::error_code ec;
  if (!f || fs::is_directory(file, ec)) throw FormatError(fmt::format("{}: cannot be read", file));
  const std::uint64_t size = fs::file_size(file, ec);
  if (ec || size < 8) throw FormatError(fmt::format("{}: shorter than the 8-byte header length", file));
  unsigned char len_bytes[8];
  f.read(reinterpret_cast<char*>(len_bytes), 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len_bytes[i];
  if (n > kMaxHeader || n > size - 8)
    throw FormatError(fmt::format("{}: a header of {} bytes in a file of {}", file, n, size));
  std::string text(n, '\0');
  f.read(text.data(), static_cast<std::streamsize>(n));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw FormatError(fmt::format("{}: the header is not JSON ({})", file, e.what()));
  }
  if (!header.is_object()) throw FormatError(fmt::format("{}: the header is not a JSON object", file));
  const std::uint64_t data = 8 + n, data_size = size - data;
  std::vector<std::pair<std::uint64_t, std::string>> ranges;
  for (const auto& [name, t] : header.items()) {
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& why) { return FormatError(fmt::format("{}: tensor '{}': {}", file, name, why)); };
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets"))
      throw bad("dtype, shape or data_offsets missing");
    TensorInfo info;
    info.name = name, info.file = file;
    if (!t["dtype"].is_string()) throw bad("dtype is not a string");
    info.dtype = t["dtype"].get<std::string>();
    const unsigned eb = dtype_bytes(info.dtype);
    if (!eb) throw bad(fmt::format("dtype {} (BF16, F16, F32 and F8_E4M3 are read)", info.dtype));
    if (!t["shape"].is_array()) throw bad("shape is not an array");
    std::uint64_t elements = 1;
    for (const auto& d : t["shape"]) {
      if (!d.is_number_unsigned() || d.get<std::uint64_t>() > (1ull << 40)) throw bad("a dimension that is no count");
      info.shape.push_back(d.get<std::uint64_t>());
      elements *= info.shape.back();
      if (elements > (1ull << 40)) throw bad("more than 2^40 elements");
    }
    const auto& o = t["data_offsets"];
    if (!o.is_array() || o.size() != 2 || !o[0].is_number_unsigned() || !o[1].is_number_unsigned())
      throw bad("data_offsets is not two offsets");
    const std::uint64_t b = o[0].get<std::uint64_t>(), e = o[1].get<std::uint64_t>();
    if (b > e || e > data_size) throw bad(fmt::format("bytes [{}, {}) of a data section of {}", b, e, data_size));
    if (e - b != elements * eb)
      throw bad(fmt::format("{} bytes for {} {} elements ({} bytes)", e - b, elements, info.dtype, elements * eb));
    info.begin = data + b, info.end = data + e;
    ranges.emplace_back(b, name);
    if (tensors_.count(name)) throw bad("named twice");
    tensors_[name] = info;
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    const TensorInfo& prev = tensors_.at(ranges[i - 1].second);
    if (tensors_.at(ranges[i].second).begin < prev.end)
      throw FormatError(fmt::format("{}: tensor '{}': its bytes overlap tensor '{}'", file, ranges[i].second, prev.name));
  }
}

const TensorInfo& SafeTensors::info(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw FormatError(fmt::format("safetensors: no tensor '{}'", name));
  return it->second;
}

std::vector<float> SafeTensors::read(const std::string& name) const {
  const TensorInfo& t = info(name);
  std::ifstream f(t.file, std::ios::binary);
  std::string raw(t.end - t.begin, '\0');
  f.seekg(static_cast<std::streamoff>(t.begin));
  if (!f.read(raw.data(), static_cast<std::streamsize>(raw.size())))
    throw FormatError(fmt::format("{}: tensor '{}': the file ends inside it", t.file, name));
  std::vector<float> v(t.elements());
  const unsigned eb = dtype_bytes(t.dtype);
  const num::Format fmt = t.dtype == "BF16" ? num::Format::BF16 : t.dtype == "F16" ? num::Format::FP16 : num::Format::E4M3;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint32_t code = 0;
    std::memcpy(&code, raw.data() + i * eb, eb);
    if (t.dtype == "F32") std::memcpy(&v[i], &code, 4);
    else v[i] = static_cast<float>(num::decode(fmt, code));
  }
  return v;
}

void write_safetensors(const std::string& file, const std::vector<NamedTensor>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::string data;
  for (const NamedTensor& t : tensors) {
    const unsigned eb = dtype_bytes(t.dtype);
    if (!eb) throw FormatError(fmt::format("{}: tensor '{}': dtype {}", file, t.name, t.dtype));
    const num::Format fmt = t.dtype == "BF16" ? num::Format::BF16 : t.dtype == "F16" ? num::Format::FP16 : num::Format::E4M3;
    const std::uint64_t begin = data.size();
    for (float v : t.values) {
      std::uint32_t code;
      if (t.dtype == "F32") std::memcpy(&code, &v, 4);
      else code = num::encode(fmt, v);
      data.append(reinterpret_cast<const char*>(&code), eb);
    }
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data 8-byte aligned, as the writers do
  std::ofstream f(file, std::ios::binary);
  std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i) & 0xff));
  f << text << data;
  if (!f) throw FormatError(fmt::format("{}: cannot be written", file));
}

}  // namespace tessera::hf
