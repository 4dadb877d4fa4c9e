// tessera-onnx (`tessera-vp run`): an ONNX model on the virtual T1. Reads
// the model and its inputs (TensorProto files), imports and compiles it for
// the inputs' shapes, runs it with one launch, writes each output as
// DIR/<name>.pb and prints the launch's simulated time against the chip's
// roofline. With --check SET, compares the outputs with SET/output_K.pb at
// ONNX's tolerances (ONNX's test data sets have that layout).
//
// Exit codes: 0 done (and, with --check, every output agreeing), 1 an output
// disagreeing, 2 a bad command line, file or model (one line naming it), 3
// a device error.
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "common/paths.hpp"
#include "executable.hpp"
#include "onnx_import.hpp"

namespace fs = std::filesystem;
using namespace tessera;
using namespace tessera::onnx_import;

namespace {

const char* const kUsage =
    "usage: tessera-vp run MODEL.onnx [--input NAME=FILE.pb]... [--output DIR] [--check SET_DIR]\n"
    "                      [--precision highest|bf16] [--rtol R] [--atol A] [--set inst.key=value]...\n";

int fail(const std::string& what) {
  std::cerr << "tessera-vp run: " << what << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, out_dir, check;
  std::map<std::string, std::string> input_files;
  Precision precision = Precision::highest;
  double rtol = 1e-3, atol = 1e-7;  // ONNX's backend tests'
  rt::Device::Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--input" && more) {
      const std::string v = argv[++i];
      const auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0) return fail(fmt::format("--input '{}': NAME=FILE.pb expected", v));
      input_files[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (a == "--output" && more) {
      out_dir = argv[++i];
    } else if (a == "--check" && more) {
      check = argv[++i];
    } else if ((a == "--rtol" || a == "--atol") && more) {
      try {
        (a == "--rtol" ? rtol : atol) = std::stod(argv[++i]);
      } catch (const std::exception&) {
        return fail(fmt::format("{} '{}': a number expected", a, argv[i]));
      }
    } else if (a == "--set" && more) {
      options.sets.push_back(argv[++i]);
    } else if (a == "--precision" && more) {
      const std::string p = argv[++i];
      if (p != "highest" && p != "bf16") return fail(fmt::format("--precision '{}': highest or bf16", p));
      precision = p == "bf16" ? Precision::bf16 : Precision::highest;
    } else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (a.rfind("-", 0) != 0 && model_path.empty()) {
      model_path = a;
    } else {
      std::cerr << kUsage;
      return fail(fmt::format("unexpected '{}'", a));
    }
  }
  if (model_path.empty()) {
    std::cerr << kUsage;
    return fail("no model given");
  }
  onnx::ModelProto m;
  std::map<std::string, HostTensor> inputs;
  Imported imp;
  try {
    m = read_model(model_path);
    std::set<std::string> inits;
    for (const auto& t : m.graph().initializer()) inits.insert(t.name());
    unsigned k = 0;
    for (const auto& in : m.graph().input()) {
      if (inits.count(in.name())) continue;
      auto it = input_files.find(in.name());
      // Without --input, a --check set's input_K.pb.
      const std::string file = it != input_files.end() ? it->second
                               : check.empty()       ? ""
                                                     : (fs::path(check) / fmt::format("input_{}.pb", k)).string();
      ++k;
      if (file.empty()) return fail(fmt::format("input '{}' is not given (--input {}=FILE.pb)", in.name(), in.name()));
      inputs[in.name()] = read_tensor_file(file);
      input_files.erase(in.name());
    }
    if (!input_files.empty()) return fail(fmt::format("the model has no input '{}'", input_files.begin()->first));
    imp = import_model(m, inputs, precision);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  try {
    rt::Device dev(options);
    const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
    std::map<std::string, std::vector<float>> values, out;
    for (const std::string& name : imp.inputs) values[name] = inputs.at(name).f;
    std::unique_ptr<compiler::Executable> ex;
    if (imp.runs()) {
      ex = std::make_unique<compiler::Executable>(dev, program, std::move(imp.graph));
      out = ex->run(values);
    }
    int status = 0;
    if (!out_dir.empty()) fs::create_directories(out_dir);
    for (std::size_t k = 0; k < imp.outputs.size(); ++k) {
      const HostTensor h = imp.output(k, out);
      if (!out_dir.empty()) {
        const fs::path file = fs::path(out_dir) / (h.name + ".pb");
        write_tensor_file(h, file.string());
        std::cout << "wrote " << file.string() << "\n";
      }
      if (!check.empty()) {
        const std::string diff =
            compare(read_tensor_file((fs::path(check) / fmt::format("output_{}.pb", k)).string()), h, rtol, atol);
        std::cout << "output '" << h.name << "': " << (diff.empty() ? "agrees with the expected one" : diff) << "\n";
        if (!diff.empty()) status = 1;
      }
    }
    if (!ex) {
      std::cout << "every output was known at import: nothing ran on the chip\n";
      return status;
    }
    const roofline::Report& r = ex->last_bound();
    std::cout << fmt::format("{} nodes on {} tiles: {:.2f} us simulated, bound {:.2f} us ({}, {}): {:.1f}% of it\n",
                             ex->groups().size(), dev.tiles(), ex->last_seconds() * 1e6, r.seconds() * 1e6,
                             r.binding().resource, r.binding().where, 100 * r.seconds() / ex->last_seconds());
    return status;
  } catch (const rt::DeviceError& e) {
    std::cerr << "tessera-vp run: device error: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
