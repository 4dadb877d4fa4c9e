// The ONNX import without a chip: TensorProto files both ways and the
// refusals of bad ones, what folds at import, the refusals of what cannot
// be lowered (naming node, op and attribute), and the FP32 matmul's
// precision through the compiler's reference.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "onnx_import.hpp"
#include "reference.hpp"

using namespace tessera;
using namespace tessera::onnx_import;

namespace {

std::string temp(const std::string& name) { return testing::TempDir() + "onnx_import_test_" + name; }

void add_input(onnx::GraphProto* g, const std::string& name, std::vector<std::int64_t> dims, int type = 1) {
  auto* i = g->add_input();
  i->set_name(name);
  auto* t = i->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  for (std::int64_t d : dims) {
    auto* dim = t->mutable_shape()->add_dim();
    if (d < 0) dim->set_dim_param("batch");
    else dim->set_dim_value(d);
  }
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in, std::string out) {
  auto* n = g->add_node();
  n->set_op_type(op), n->set_name(out + "_node");
  for (const auto& s : in) n->add_input(s);
  n->add_output(out);
  return n;
}

onnx::ModelProto model(int opset = 13) {
  onnx::ModelProto m;
  m.add_opset_import()->set_version(opset);
  return m;
}

HostTensor floats(std::vector<unsigned> shape, std::vector<float> v) {
  HostTensor h;
  h.shape = std::move(shape), h.f = std::move(v);
  return h;
}

std::string refusal(const onnx::ModelProto& m, const std::map<std::string, HostTensor>& in) {
  try {
    import_model(m, in);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(OnnxImport, TensorFilesRoundTripAndBadOnesAreNamed) {
  HostTensor f = floats({2, 3}, {1, -2, 3.5f, 0, 1e-3f, 7});
  f.name = "f";
  write_tensor_file(f, temp("f.pb"));
  EXPECT_EQ(read_tensor_file(temp("f.pb")).f, f.f);
  EXPECT_EQ(read_tensor_file(temp("f.pb")).shape, f.shape);
  HostTensor i;
  i.name = "i", i.elem_type = onnx::TensorProto::INT64, i.shape = {3}, i.i = {-1, 0, 1ll << 40};
  write_tensor_file(i, temp("i.pb"));
  EXPECT_EQ(read_tensor_file(temp("i.pb")).i, i.i);
  HostTensor h = f;
  h.elem_type = onnx::TensorProto::FLOAT16;
  write_tensor_file(h, temp("h.pb"));
  EXPECT_EQ(read_tensor_file(temp("h.pb")).f[1], -2.0f);

  onnx::TensorProto t;  // raw data that does not fill its shape
  t.set_name("short"), t.set_data_type(onnx::TensorProto::FLOAT), t.add_dims(4), t.set_raw_data(std::string(12, '\0'));
  try {
    read_tensor(t);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'short' [4]: 3 FLOAT values for 4 elements"), std::string::npos) << e.what();
  }
  t.set_data_type(onnx::TensorProto::DOUBLE);
  EXPECT_THROW(read_tensor(t), Unsupported);
  std::ofstream(temp("junk.pb")) << "\xff\xff\xff not a protobuf";
  try {
    read_tensor_file(temp("junk.pb"));
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("junk.pb"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_model(temp("missing.onnx")), std::runtime_error);
}

TEST(OnnxImport, WhatCannotBeLoweredIsRefusedByNodeOpAndAttribute) {
  const std::map<std::string, HostTensor> in{{"x", floats({2, 3, 4}, std::vector<float>(24, 1.0f))}};
  onnx::ModelProto m = model();
  add_input(m.mutable_graph(), "x", {2, 3, 4});
  add_node(m.mutable_graph(), "Hardmax", {"x"}, "y");
  m.mutable_graph()->add_output()->set_name("y");
  EXPECT_EQ(refusal(m, in), "node 'y_node' (Hardmax): the op is not supported");

  m.mutable_graph()->mutable_node(0)->set_op_type("Relu");
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("slope"), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(0.5f);
  EXPECT_EQ(refusal(m, in), "node 'y_node' (Relu): attribute 'slope'");

  m.mutable_graph()->mutable_node(0)->set_op_type("ArgMax");
  a->set_name("select_last_index"), a->set_type(onnx::AttributeProto::INT), a->set_i(1);
  EXPECT_EQ(refusal(m, in), "node 'y_node' (ArgMax): select_last_index");
  m.mutable_graph()->mutable_node(0)->set_op_type("Pad");
  a->set_name("mode"), a->set_type(onnx::AttributeProto::STRING), a->set_s("wrap");
  m.mutable_graph()->mutable_node(0)->add_input("pads");
  add_input(m.mutable_graph(), "pads", {6}, onnx::TensorProto::INT64);
  HostTensor pads;
  pads.elem_type = onnx::TensorProto::INT64, pads.shape = {6}, pads.i = {0, 0, 0, 0, 0, 1};
  std::map<std::string, HostTensor> with_pads = in;
  with_pads["pads"] = pads;
  EXPECT_EQ(refusal(m, with_pads), "node 'y_node' (Pad): mode 'wrap'");

  // Inputs: missing, of another type, of another fixed shape.
  EXPECT_NE(refusal(m, {}).find("input 'x' is missing"), std::string::npos);
  EXPECT_NE(refusal(m, {{"x", floats({2, 3, 5}, std::vector<float>(30))}}).find("declares dimension 2 as 4"), std::string::npos);
  onnx::ModelProto old = model(6);
  EXPECT_NE(refusal(old, {}).find("opset 6"), std::string::npos);
}

TEST(OnnxImport, ConstantsFoldAndDynamicAxesAreBoundByTheInputs) {
  onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_input(g, "x", {-1, 4});  // a dynamic batch
  add_input(g, "shape", {2}, onnx::TensorProto::INT64);
  auto* w = g->add_initializer();
  w->set_name("w"), w->set_data_type(onnx::TensorProto::FLOAT), w->add_dims(4), w->add_dims(2);
  for (int k = 0; k < 8; ++k) w->add_float_data(0.25f * static_cast<float>(k));
  add_node(g, "Reshape", {"x", "shape"}, "r");  // the shape folds: an input given now
  auto* gemm = add_node(g, "Gemm", {"r", "w"}, "y");
  auto* alpha = gemm->add_attribute();
  alpha->set_name("alpha"), alpha->set_type(onnx::AttributeProto::FLOAT), alpha->set_f(2.0f);
  g->add_output()->set_name("y");
  HostTensor shape;
  shape.elem_type = onnx::TensorProto::INT64, shape.shape = {2}, shape.i = {-1, 4};
  const std::map<std::string, HostTensor> in{{"x", floats({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})}, {"shape", shape}};
  for (Precision p : {Precision::highest, Precision::bf16}) {
    Imported imp = import_model(m, in, p);
    ASSERT_EQ(imp.inputs, std::vector<std::string>{"x"});
    ASSERT_EQ(imp.outputs.size(), 1u);
    EXPECT_EQ(imp.outputs[0].shape, (std::vector<unsigned>{3, 2}));
    unsigned matmuls = 0;
    for (const auto& op : imp.graph.ops()) matmuls += op.kind == compiler::OpKind::matmul;
    EXPECT_EQ(matmuls, p == Precision::highest ? 3u : 1u);
    // What the chip computes, through the compiler's reference.
    const auto v = compiler::reference(imp.graph, {{"x", in.at("x").f}});
    const std::vector<float>& y = v[static_cast<std::size_t>(imp.outputs[0].tensor)];
    for (unsigned r = 0; r < 3; ++r)
      for (unsigned c = 0; c < 2; ++c) {
        double want = 0;
        for (unsigned k = 0; k < 4; ++k) want += 2.0 * (4 * r + k + 1) * 0.25 * (2 * k + c);
        EXPECT_NEAR(y[r * 2 + c], want, 1e-6 * want) << r << "," << c;
      }
  }
}

TEST(OnnxImport, Fp32MatmulsInThreeBf16PassesKeepFp32Accuracy) {
  onnx::ModelProto m = model();
  add_input(m.mutable_graph(), "a", {8, 64});
  add_input(m.mutable_graph(), "b", {64, 8});
  add_node(m.mutable_graph(), "MatMul", {"a", "b"}, "c");
  m.mutable_graph()->add_output()->set_name("c");
  std::vector<float> a(512), b(512);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * i) * 3, b[i] = std::cos(0.11f * i) / 3;
  const std::map<std::string, HostTensor> in{{"a", floats({8, 64}, a)}, {"b", floats({64, 8}, b)}};
  double worst[2] = {0, 0};
  for (Precision p : {Precision::highest, Precision::bf16}) {
    Imported imp = import_model(m, in, p);
    const auto v = compiler::reference(imp.graph, {{"a", a}, {"b", b}});
    const std::vector<float>& c = v[static_cast<std::size_t>(imp.outputs[0].tensor)];
    for (unsigned i = 0; i < 8; ++i)
      for (unsigned j = 0; j < 8; ++j) {
        double want = 0, scale = 0;
        for (unsigned k = 0; k < 64; ++k) want += double(a[i * 64 + k]) * b[k * 8 + j], scale += std::fabs(double(a[i * 64 + k]) * b[k * 8 + j]);
        worst[p == Precision::bf16] = std::max(worst[p == Precision::bf16], std::fabs(c[i * 8 + j] - want) / scale);
      }
  }
  EXPECT_LT(worst[0], 1e-5);  // near FP32
  EXPECT_GT(worst[1], 1e-4);  // one BF16 pass is not
}

TEST(OnnxImport, ABroadcastingBatchedMatmulIsOneMatmul) {
  // numpy's broadcasting of the batch dimensions: a [2, 1, 3, 4] input
  // times b [3, 4, 5] (each broadcasts over one of the batches [2, 3]), a
  // [2, 4] times a constant [300, 4, 3] (300 batches, past what moving
  // each batch out had taken): one batched matmul each, the products
  // numpy's.
  struct Case {
    std::vector<unsigned> a, b, y;
    bool b_constant;
  };
  for (const Case& c : {Case{{2, 1, 3, 4}, {3, 4, 5}, {2, 3, 3, 5}, false}, Case{{2, 4}, {300, 4, 3}, {300, 2, 3}, true}}) {
    onnx::ModelProto m = model();
    auto* g = m.mutable_graph();
    add_input(g, "a", std::vector<std::int64_t>(c.a.begin(), c.a.end()));
    std::size_t na = 1, nb = 1;
    for (unsigned d : c.a) na *= d;
    for (unsigned d : c.b) nb *= d;
    std::vector<float> a(na), b(nb);
    for (std::size_t i = 0; i < na; ++i) a[i] = std::sin(0.3f * static_cast<float>(i)) * 2;
    for (std::size_t i = 0; i < nb; ++i) b[i] = std::cos(0.7f * static_cast<float>(i)) / 2;
    std::map<std::string, HostTensor> in{{"a", floats(c.a, a)}};
    if (c.b_constant) {
      auto* w = g->add_initializer();
      w->set_name("b"), w->set_data_type(onnx::TensorProto::FLOAT);
      for (unsigned d : c.b) w->add_dims(d);
      for (float v : b) w->add_float_data(v);
    } else {
      add_input(g, "b", std::vector<std::int64_t>(c.b.begin(), c.b.end()));
      in["b"] = floats(c.b, b);
    }
    add_node(g, "MatMul", {"a", "b"}, "y");
    g->add_output()->set_name("y");
    const Imported imp = import_model(m, in, Precision::bf16);
    EXPECT_EQ(imp.outputs[0].shape, c.y);
    unsigned matmuls = 0;
    for (const auto& op : imp.graph.ops()) matmuls += op.kind == compiler::OpKind::matmul;
    EXPECT_EQ(matmuls, 1u);
    std::map<std::string, std::vector<float>> feed{{"a", a}};
    if (!c.b_constant) feed["b"] = b;
    const auto v = compiler::reference(imp.graph, feed);
    const std::vector<float>& y = v[static_cast<std::size_t>(imp.outputs[0].tensor)];
    // numpy: batch index i of y reads a's and b's batch at i, a dimension
    // of 1 at 0 (the shapes aligned at their ends).
    const unsigned M = c.y[c.y.size() - 2], N = c.y.back(), K = c.a.back();
    const std::vector<unsigned> batch(c.y.begin(), c.y.end() - 2);
    std::size_t batches = 1;
    for (unsigned d : batch) batches *= d;
    auto offset = [&](std::size_t i, const std::vector<unsigned>& s, std::size_t matrix) {
      const std::size_t dims = s.size() - 2;
      std::size_t f = 0, rest = i;
      std::vector<std::size_t> idx(batch.size());
      for (std::size_t k = batch.size(); k-- > 0;) idx[k] = rest % batch[k], rest /= batch[k];
      for (std::size_t k = 0; k < dims; ++k) f = f * s[k] + (s[k] == 1 ? 0 : idx[batch.size() - dims + k]);
      return f * matrix;
    };
    ASSERT_EQ(y.size(), batches * M * N);
    for (std::size_t i = 0; i < batches; ++i)
      for (unsigned r = 0; r < M; ++r)
        for (unsigned col = 0; col < N; ++col) {
          double want = 0, scale = 0;
          for (unsigned k = 0; k < K; ++k) {
            const double p = double(a[offset(i, c.a, M * K) + r * K + k]) * b[offset(i, c.b, K * N) + k * N + col];
            want += p, scale += std::fabs(p);
          }
          EXPECT_NEAR(y[(i * M + r) * N + col], want, 1e-2 * scale) << i << "," << r << "," << col;
        }
  }
}

TEST(OnnxImport, ComparisonsOnTheChipAreExactForInfinitiesNansAndTheLeastDifferences) {
  // Greater, Less, GreaterOrEqual, LessOrEqual and Equal, then Or, And, Xor
  // and Not of their results, on pairs where a composition could slip:
  // infinities (equal ones compare equal), NaN (unordered), a difference of
  // the least subnormal, signed zeros, large values.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min(), big = std::numeric_limits<float>::max();
  const std::vector<float> a{1, 2, inf, inf, -inf, nan, 1, tiny, 0.0f, -0.0f, big, -big, 1e-30f, 3};
  const std::vector<float> b{2, 1, inf, -inf, -inf, 1, nan, 0, -0.0f, 0.0f, -big, big, 1e-30f, 3 + 2.4e-7f};
  const std::vector<std::string> ops{"Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal"};
  onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  const auto n = static_cast<std::int64_t>(a.size());
  add_input(g, "a", {n});
  add_input(g, "b", {n});
  for (const std::string& op : ops) {
    add_node(g, op, {"a", "b"}, op);
    g->add_output()->set_name(op);
  }
  add_node(g, "Or", {"Greater", "Equal"}, "or");
  add_node(g, "And", {"GreaterOrEqual", "LessOrEqual"}, "and");
  add_node(g, "Xor", {"Greater", "Less"}, "xor");
  add_node(g, "Not", {"Equal"}, "not");
  for (const char* o : {"or", "and", "xor", "not"}) g->add_output()->set_name(o);
  const std::map<std::string, HostTensor> in{{"a", floats({static_cast<unsigned>(n)}, a)}, {"b", floats({static_cast<unsigned>(n)}, b)}};
  const Imported imp = import_model(m, in);
  const auto v = compiler::reference(imp.graph, {{"a", a}, {"b", b}});
  std::map<std::string, std::vector<float>> run;
  for (const auto& o : imp.outputs) run[o.tensor_name] = v[static_cast<std::size_t>(o.tensor)];
  for (std::size_t k = 0; k < imp.outputs.size(); ++k) {
    const HostTensor h = imp.output(k, run);
    EXPECT_EQ(h.elem_type, onnx::TensorProto::BOOL) << h.name;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const float x = a[i], y = b[i];
      bool want = false;
      if (h.name == "Greater") want = x > y;
      if (h.name == "Less") want = x < y;
      if (h.name == "GreaterOrEqual") want = x >= y;
      if (h.name == "LessOrEqual") want = x <= y;
      if (h.name == "Equal") want = x == y;
      if (h.name == "or") want = x > y || x == y;
      if (h.name == "and") want = x >= y && x <= y;
      if (h.name == "xor") want = (x > y) != (x < y);
      if (h.name == "not") want = !(x == y);
      EXPECT_EQ(h.i.at(i), want ? 1 : 0) << h.name << "(" << x << ", " << y << ")";
    }
  }
}

TEST(OnnxImport, IsNanIsInfAndSignOnTheChipAreExact) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min(), big = std::numeric_limits<float>::max();
  const std::vector<float> x{1, -2, 0.0f, -0.0f, inf, -inf, nan, tiny, -tiny, big, -big};
  onnx::ModelProto m = model();
  auto* g = m.mutable_graph();
  add_input(g, "x", {static_cast<std::int64_t>(x.size())});
  add_node(g, "IsNaN", {"x"}, "isnan");
  add_node(g, "IsInf", {"x"}, "isinf");
  auto* pos = add_node(g, "IsInf", {"x"}, "isposinf");
  auto* a = pos->add_attribute();
  a->set_name("detect_negative"), a->set_type(onnx::AttributeProto::INT), a->set_i(0);
  add_node(g, "Sign", {"x"}, "sign");
  for (const char* o : {"isnan", "isinf", "isposinf", "sign"}) g->add_output()->set_name(o);
  const Imported imp = import_model(m, {{"x", floats({static_cast<unsigned>(x.size())}, x)}});
  const auto v = compiler::reference(imp.graph, {{"x", x}});
  std::map<std::string, std::vector<float>> run;
  for (const auto& o : imp.outputs) run[o.tensor_name] = v[static_cast<std::size_t>(o.tensor)];
  for (std::size_t k = 0; k < imp.outputs.size(); ++k) {
    const HostTensor h = imp.output(k, run);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float e = x[i];
      if (h.name == "isnan") {
        EXPECT_EQ(h.i.at(i), std::isnan(e) ? 1 : 0) << e;
      } else if (h.name == "isinf") {
        EXPECT_EQ(h.i.at(i), std::isinf(e) ? 1 : 0) << e;
      } else if (h.name == "isposinf") {
        EXPECT_EQ(h.i.at(i), e == inf ? 1 : 0) << e;
      } else if (!std::isnan(e)) {
        EXPECT_EQ(h.f.at(i), e > 0 ? 1.0f : e < 0 ? -1.0f : 0.0f) << e;
      }
    }
  }
}
