// Safetensors files the test writes: every dtype both ways, shards through
// an index, and each kind of bad file refused with the file and the tensor.
#include "safetensors.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engines/num/formats.hpp"

using namespace tessera;
using namespace tessera::hf;
namespace fs = std::filesystem;

namespace {

std::string dir() {
  const std::string d = testing::TempDir() + "safetensors_test";
  fs::create_directories(d);
  return d;
}

// A file with this header text and `data` bytes after it.
std::string raw_file(const std::string& name, const std::string& header, std::size_t data, std::uint64_t claimed = 0) {
  const std::string path = dir() + "/" + name;
  std::ofstream f(path, std::ios::binary);
  const std::uint64_t n = claimed ? claimed : header.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i) & 0xff));
  f << header << std::string(data, '\0');
  return path;
}

std::string refusal(const std::string& path) {
  try {
    SafeTensors::open(path);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Safetensors, EveryDtypeRoundTrips) {
  std::vector<float> v{0.0f, 1.0f, -2.5f, 0.1f, 300.0f, -1e-3f};
  std::vector<NamedTensor> ts;
  for (const char* d : {"F32", "BF16", "F16", "F8_E4M3"}) ts.push_back({std::string("t_") + d, d, {2, 3}, v});
  write_safetensors(dir() + "/all.safetensors", ts);
  const SafeTensors s = SafeTensors::open(dir() + "/all.safetensors");
  ASSERT_EQ(s.tensors().size(), 4u);
  EXPECT_EQ(s.read("t_F32"), v);
  const std::map<std::string, num::Format> f{{"BF16", num::Format::BF16}, {"F16", num::Format::FP16}, {"F8_E4M3", num::Format::E4M3}};
  for (const auto& [d, fmt] : f) {
    const std::vector<float> got = s.read("t_" + d);
    EXPECT_EQ(s.info("t_" + d).shape, (std::vector<std::uint64_t>{2, 3}));
    for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(num::quantize(fmt, v[i]))) << d << " " << i;
  }
  EXPECT_THROW(s.read("missing"), FormatError);
}

TEST(Safetensors, ShardsAreReadThroughTheirIndex) {
  const std::string d = dir() + "/sharded";
  fs::create_directories(d);
  write_safetensors(d + "/a.safetensors", {{"x", "BF16", {4}, {1, 2, 3, 4}}});
  write_safetensors(d + "/b.safetensors", {{"y", "F32", {2}, {5, 6}}, {"z", "F16", {1}, {7}}});
  std::ofstream(d + "/model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"x": "a.safetensors", "y": "b.safetensors", "z": "b.safetensors"}})";
  const SafeTensors s = SafeTensors::open(d);  // the folder: its index
  EXPECT_EQ(s.read("x"), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(s.read("z"), (std::vector<float>{7}));
  std::ofstream(d + "/model.safetensors.index.json") << R"({"weight_map": {"x": "b.safetensors"}})";
  EXPECT_NE(refusal(d).find("tensor 'x' is not in"), std::string::npos) << refusal(d);
  std::ofstream(d + "/model.safetensors.index.json") << R"({"weight_map": {"x": "../a.safetensors"}})";
  EXPECT_NE(refusal(d).find("not a file beside the index"), std::string::npos) << refusal(d);
}

TEST(Safetensors, BadFilesAreRefusedNamingTheTensor) {
  // Truncated: the header length says more than the file holds.
  EXPECT_NE(refusal(raw_file("short.safetensors", "{}", 0, 1000)).find("a header of 1000 bytes in a file of 10"), std::string::npos);
  std::ofstream(dir() + "/tiny.safetensors") << "abc";
  EXPECT_NE(refusal(dir() + "/tiny.safetensors").find("shorter than the 8-byte header length"), std::string::npos);
  EXPECT_NE(refusal(raw_file("notjson.safetensors", "{oops", 0)).find("the header is not JSON"), std::string::npos);
  // A header that lies: 2 x 3 F32 needs 24 bytes, not 20.
  std::string r = refusal(raw_file("lies.safetensors", R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24));
  EXPECT_NE(r.find("tensor 'w': 20 bytes for 6 F32 elements (24 bytes)"), std::string::npos) << r;
  // Past the end of the data.
  r = refusal(raw_file("past.safetensors", R"({"w": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]}})", 16));
  EXPECT_NE(r.find("tensor 'w': bytes [0, 24) of a data section of 16"), std::string::npos) << r;
  // An unknown dtype.
  r = refusal(raw_file("dtype.safetensors", R"({"ids": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})", 16));
  EXPECT_NE(r.find("tensor 'ids': dtype I64"), std::string::npos) << r;
  // Overlapping offsets.
  r = refusal(raw_file("overlap.safetensors",
                       R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
                       R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                       16));
  EXPECT_NE(r.find("tensor 'b': its bytes overlap tensor 'a'"), std::string::npos) << r;
  EXPECT_NE(refusal(dir() + "/nothing-here").find("cannot be read"), std::string::npos);
}
