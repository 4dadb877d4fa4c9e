// ONNX's own backend node tests on the virtual T1: every test under the
// data folder (Debian's libonnx-testdata) imported (onnx_import.hpp),
// compiled (sw/compiler) and run on one chip, each data set's outputs
// compared with ONNX's expected ones at ONNX's tolerances (rtol 1e-3,
// atol 1e-7). Prints passed / failed / unsupported per op, and why each
// failed or was refused with -v.
//
//   tessera-onnx-conformance [--data DIR] [--filter TEXT]... [--precision highest|bf16]
//                            [--expect-passed N] [--matrix FILE.md] [-v]
//
// Exit status: 1 when a test failed or fewer than N passed, 2 on a bad
// command line, 0 otherwise.
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "common/paths.hpp"
#include "executable.hpp"
#include "onnx_import.hpp"

namespace fs = std::filesystem;
using namespace tessera;
using namespace tessera::onnx_import;

namespace {

struct Tally {
  unsigned passed = 0, failed = 0, unsupported = 0;
  std::set<std::string> why;  // the refusals' reasons, for the matrix
};

}  // namespace

int main(int argc, char** argv) {
  std::string data = "/usr/share/libonnx-testdata/data/node", matrix;
  std::vector<std::string> filters;
  Precision precision = Precision::highest;
  unsigned expect = 0;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--data" && more) data = argv[++i];
    else if (a == "--filter" && more) filters.push_back(argv[++i]);
    else if (a == "--expect-passed" && more) expect = static_cast<unsigned>(std::stoul(argv[++i]));
    else if (a == "--matrix" && more) matrix = argv[++i];
    else if (a == "--precision" && more && (std::string(argv[i + 1]) == "highest" || std::string(argv[i + 1]) == "bf16"))
      precision = std::string(argv[++i]) == "bf16" ? Precision::bf16 : Precision::highest;
    else if (a == "-v") verbose = true;
    else {
      std::cerr << "usage: tessera-onnx-conformance [--data DIR] [--filter TEXT]... [--precision highest|bf16] "
                   "[--expect-passed N] [--matrix FILE.md] [-v]\n";
      return 2;
    }
  }
  std::vector<fs::path> tests;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(data, ec)) {
    const std::string name = e.path().filename().string();
    if (!fs::exists(e.path() / "model.onnx")) continue;
    if (!filters.empty() && std::none_of(filters.begin(), filters.end(), [&](const std::string& f) { return name.find(f) != std::string::npos; }))
      continue;
    tests.push_back(e.path());
  }
  if (ec || tests.empty()) {
    std::cerr << "tessera-onnx-conformance: no node tests under " << data << (ec ? ": " + ec.message() : "") << "\n";
    return 2;
  }
  std::sort(tests.begin(), tests.end());

  rt::Device dev;
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  std::map<std::string, Tally> by_op;
  Tally all;
  for (const fs::path& dir : tests) {
    const std::string test = dir.filename().string();
    std::string op = "?", verdict, detail;
    try {
      const onnx::ModelProto m = read_model((dir / "model.onnx").string());
      op.clear();
      for (const auto& n : m.graph().node()) op += (op.empty() ? "" : "+") + n.op_type();
      if (m.graph().node_size() > 3) op = m.graph().node(0).op_type() + "+...";
      std::set<std::string> inits;
      for (const auto& t : m.graph().initializer()) inits.insert(t.name());
      std::vector<std::string> in_names;
      for (const auto& i : m.graph().input()) {
        if (!i.type().has_tensor_type()) throw Unsupported(i.name(), "input", "a sequence, map or optional value");
        if (!inits.count(i.name())) in_names.push_back(i.name());
      }
      std::vector<fs::path> sets;
      for (const auto& e : fs::directory_iterator(dir))
        if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
      std::sort(sets.begin(), sets.end());
      if (sets.empty()) throw std::runtime_error("no test_data_set_*");
      auto inputs_of = [&](const fs::path& set) {
        std::map<std::string, HostTensor> in;
        for (std::size_t k = 0; k < in_names.size(); ++k) {
          const fs::path f = set / fmt::format("input_{}.pb", k);
          if (!fs::exists(f)) throw std::runtime_error(fmt::format("{} is missing", f.string()));
          in[in_names[k]] = read_tensor_file(f.string());
        }
        return in;
      };
      for (const fs::path& set : sets) {
        const std::map<std::string, HostTensor> in = inputs_of(set);
        Imported imp = import_model(m, in, precision);
        std::map<std::string, std::vector<float>> values, out;
        for (const std::string& name : imp.inputs) values[name] = in.at(name).f;
        if (imp.runs()) out = compiler::Executable(dev, program, std::move(imp.graph)).run(values);
        for (std::size_t k = 0; k < imp.outputs.size() && detail.empty(); ++k) {
          const HostTensor want = read_tensor_file((set / fmt::format("output_{}.pb", k)).string());
          const auto& o = imp.outputs[k];
          detail = compare(want, imp.output(k, out));
          if (!detail.empty()) detail = fmt::format("{}, output '{}': {}", set.filename().string(), o.name, detail);
        }
      }
      verdict = detail.empty() ? "passed" : "failed";
    } catch (const Unsupported& e) {
      verdict = "unsupported", detail = e.what();
      by_op[op].why.insert(e.why);
    } catch (const std::exception& e) {
      verdict = "failed", detail = e.what();
    }
    Tally& t = by_op[op];
    unsigned Tally::*field = verdict == "passed" ? &Tally::passed : verdict == "failed" ? &Tally::failed : &Tally::unsupported;
    ++(t.*field), ++(all.*field);
    if (verbose || verdict == "failed") std::cout << verdict << " " << test << (detail.empty() ? "" : ": " + detail) << "\n";
  }
  std::cout << fmt::format("\n{:<40} {:>7} {:>7} {:>12}\n", "op", "passed", "failed", "unsupported");
  for (const auto& [op, t] : by_op)
    if (t.passed || t.failed || verbose) std::cout << fmt::format("{:<40} {:>7} {:>7} {:>12}\n", op, t.passed, t.failed, t.unsupported);
  std::cout << fmt::format("\nnode tests: {} passed, {} failed, {} unsupported (of {}; precision {})\n", all.passed,
                           all.failed, all.unsupported, tests.size(), precision == Precision::highest ? "highest" : "bf16");
  if (!matrix.empty()) {
    std::ofstream md(matrix);
    md << "# ONNX node tests on the T1\n\nGenerated by `tessera-onnx-conformance --matrix` from Debian's libonnx-testdata"
          " (ONNX 1.12); FP32, matmuls in three BF16 passes (`--precision highest`), ONNX's tolerances.\n\n"
          "| op | passed | failed | unsupported | why refused |\n|---|---|---|---|---|\n";
    for (const auto& [op, t] : by_op) {
      std::string why;
      for (const std::string& w : t.why) why += (why.empty() ? "" : "; ") + w;
      if (why.size() > 200) why = why.substr(0, 200) + "...";
      md << fmt::format("| {} | {} | {} | {} | {} |\n", op, t.passed, t.failed, t.unsupported, why);
    }
    md << fmt::format("\n{} passed, {} failed, {} unsupported of {} node tests.\n", all.passed, all.failed, all.unsupported, tests.size());
  }
  if (all.failed) return 1;
  if (all.passed < expect) {
    std::cerr << "tessera-onnx-conformance: " << all.passed << " passed, fewer than the " << expect << " expected\n";
    return 1;
  }
  return 0;
}
