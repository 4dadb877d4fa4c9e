// A Llama-family config (GQA, llama3 rope_scaling) on two layers: the
// compiled prefill on the chip against the FP32 host reference, with seeded
// weights and with the same weights from a safetensors file; tied
// embeddings; Mixtral's sparse MoE layers; configs refused by key.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <fstream>

#include "common/paths.hpp"
#include "engines/num/block_scale.hpp"
#include "executable.hpp"
#include "reference.hpp"
#include "llama.hpp"

using namespace tessera;
using namespace tessera::hf;

namespace {

nlohmann::json tiny(bool tied = false) {
  return nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 96,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": )" + std::string(tied ? "true" : "false") + R"(,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 64}})");
}

// The worst difference against the largest reference logit.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i])), scale = std::max(scale, std::fabs(double(want[i])));
  return worst / scale;
}

// A shipped config's prefill on the chip: its logits and the chip's
// routes, and the FP32 reference's error on those routes (and how many of
// the reference's own token-layer routes differ from them).
struct OnChip {
  std::map<std::string, std::vector<float>> out;
  std::vector<std::vector<std::uint32_t>> routes;
  double err = 0;
  unsigned differ = 0;
};
OnChip on_chip(rt::Device& dev, const rt::Kernel& program, const LlamaConfig& c, const WeightSource& w,
               const std::vector<std::uint32_t>& prompt, unsigned layers) {
  OnChip r;
  compiler::Executable ex(dev, program, llama_prefill(c, w, prompt, layers));
  r.out = ex.run(llama_inputs(prompt));
  r.routes = chip_routes(c, r.out, layers);
  r.err = relative_error(r.out.at("logits"), llama_reference(c, w, prompt, layers, &r.routes, &r.differ));
  return r;
}
// Within the main job's bound on the chip's routes (and not equal: BF16
// against FP32), no more of them tipped than `most`; printed.
void expect_agrees(const OnChip& r, const std::string& what, unsigned routes, unsigned most) {
  std::cout << what << ": logits' relative error " << r.err << " on the chip's routes, " << r.differ << " of " << routes
            << " token-layer routes differ from the FP32 reference's own\n";
  EXPECT_LT(r.err, 5e-2) << what;
  EXPECT_GT(r.err, 0.0) << what;
  EXPECT_LE(r.differ, most) << what;
}
// A Linear [out, in] as DeepSeek-V3's checkpoints store it: E4M3 codes
// (their values) and a factor per 128 x 128 block (<name>_scale_inv).
void push_fp8(std::vector<NamedTensor>& ts, const std::string& name, const std::vector<float>& v, unsigned out, unsigned in) {
  num::Convert sat;
  sat.saturate = true;
  const num::BlockQuantized q = num::block_quantize(v.data(), out, in, num::Format::E4M3, num::ScaleFormat::FP32, 128, 128, sat);
  std::vector<float> codes(q.codes.size());
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<float>(num::decode(num::Format::E4M3, q.codes[i]));
  ts.push_back({name, "F8_E4M3", {out, in}, codes});
  ts.push_back({name + "_scale_inv", "F32", {(out + 127) / 128, (in + 127) / 128}, q.scales});
}
// A seeded checkpoint of every tensor the first `layers` layers of `c`
// read, written to TempDir()/`dir`: the 2-D ones `fp8` picks as E4M3
// blocks (push_fp8), the rest FP32.
std::string seeded_checkpoint(const LlamaConfig& c, std::uint32_t seed, unsigned layers, const std::string& dir,
                              const std::function<bool(const std::string&)>& fp8) {
  const WeightSource seeded = seeded_weights(seed);
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> read;
  llama_prefill(c, [&](const std::string& name, const std::vector<std::uint64_t>& shape) {
    read.emplace_back(name, shape);
    return seeded(name, shape);
  }, {0}, layers);
  std::vector<NamedTensor> ts;
  std::set<std::string> done;
  for (const auto& [name, shape] : read) {
    if (!done.insert(name).second) continue;
    const std::vector<float> v = seeded(name, shape);
    if (shape.size() == 2 && fp8(name)) push_fp8(ts, name, v, static_cast<unsigned>(shape[0]), static_cast<unsigned>(shape[1]));
    else ts.push_back({name, "F32", shape, v});
  }
  const std::string d = testing::TempDir() + dir;
  std::filesystem::create_directories(d);
  write_safetensors(d + "/model.safetensors", ts);
  return d;
}
// An FP8 checkpoint's graph `g` on the chip: equal to the compiler's
// reference of that graph bit for bit; its logits' error against the FP32
// reference on the chip's routes (and how many of them tip), and the error
// of the same weights (codes times scales) in BF16.
struct Fp8OnChip {
  double err = 0, bf16_err = 0;
  unsigned differ = 0;
};
Fp8OnChip fp8_on_chip(rt::Device& dev, const rt::Kernel& program, const LlamaConfig& c, const SafeTensors& st,
                      const compiler::Graph& g, const std::vector<std::uint32_t>& prompt, unsigned layers) {
  compiler::Executable ex(dev, program, g);
  const std::map<std::string, std::vector<float>> out = ex.run(llama_inputs(prompt));
  const std::vector<std::vector<float>> ref = compiler::reference(g, llama_inputs(prompt));
  for (int t : g.outputs())
    if (g.tensor(t).name == "logits") {
      EXPECT_EQ(out.at("logits"), ref[static_cast<std::size_t>(t)]);
    }
  Fp8OnChip r;
  const std::vector<std::vector<std::uint32_t>> routes = chip_routes(c, out, layers);
  r.err = relative_error(out.at("logits"), llama_reference(c, weights_from(st), prompt, layers, &routes, &r.differ));
  r.bf16_err = on_chip(dev, program, c, weights_from(st), prompt, layers).err;
  return r;
}
unsigned moe_ops(const compiler::Graph& g) {
  unsigned n = 0;
  for (const compiler::Op& op : g.ops()) n += op.kind == compiler::OpKind::moe;
  return n;
}

// The ring of four on the fast models, the program kernel on every chip.
struct Ring {
  static rt::Device::Options options() {
    rt::Device::Options o;
    o.platform = rt::Device::system_platform(4);
    o.sets = {"noc.model=packet", "hbm0.mode=fast", "hbm1.mode=fast", "hbm2.mode=fast", "hbm3.mode=fast"};
    return o;
  }
  rt::Cluster cluster{options()};
  std::vector<rt::Device*> chips;
  std::vector<rt::Kernel> programs;
  Ring() {
    for (unsigned k = 0; k < 4; ++k) {
      chips.push_back(&cluster.chip(k));
      programs.push_back(cluster.chip(k).load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << cluster.chip(k).tiles()) - 1));
    }
  }
};

std::string refusal(const std::string& text) {
  try {
    LlamaConfig::parse(nlohmann::json::parse(text), "config.json");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(HfLlama, ConfigsAreReadOrRefusedByKey) {
  const LlamaConfig c = LlamaConfig::parse(tiny(), "config.json");
  EXPECT_EQ(c.head_dim, 16u);
  EXPECT_EQ(c.kv_heads, 2u);
  // llama3 scaling: the highest frequency kept, the lowest divided by the factor.
  const std::vector<double> f = c.inv_freq();
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_NEAR(f.back(), std::pow(500000.0, -14.0 / 16) / 8, 1e-15);
  EXPECT_EQ(refusal(R"({"num_hidden_layers": 2})"), "config.json: hidden_size: missing");
  EXPECT_EQ(refusal(R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3,
                        "intermediate_size": 8, "vocab_size": 8})"),
            "config.json: num_key_value_heads: 3 does not divide 4 heads");
  const std::string ds = R"({"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                              "intermediate_size": 8, "vocab_size": 8, "moe_intermediate_size": 8, "kv_lora_rank": 16,
                              "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8)";
  EXPECT_EQ(refusal(ds + R"(, "scoring_func": "softmax"})"), "config.json: scoring_func: 'softmax' (DeepSeek-V3's sigmoid is built)");
  EXPECT_EQ(refusal(ds + R"(, "n_group": 3})"), "config.json: n_group: 3 groups of 256 experts, 4 kept: not a routing the tile cores take");
  EXPECT_EQ(refusal(ds + R"(, "qk_rope_head_dim": 5})"), "config.json: qk_rope_head_dim: 5 is odd (rotary pairs)");  // the last of a key counts
  EXPECT_EQ(refusal(ds + "}"), "");
  EXPECT_EQ(refusal(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                        "intermediate_size": 8, "vocab_size": 8, "num_experts": 4})"),
            "config.json: num_experts: experts in a 'llama' model (mixtral and qwen2_moe have them)");
  EXPECT_EQ(refusal(R"({"model_type": "qwen2_moe", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                        "intermediate_size": 8, "vocab_size": 8, "num_experts": 4, "num_experts_per_tok": 2})"),
            "config.json: moe_intermediate_size: missing");
  EXPECT_NE(refusal(R"({"model_type": "gpt2"})").find("model_type: 'gpt2' is not built"), std::string::npos);
  const std::string mixtral = R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                                  "intermediate_size": 8, "vocab_size": 8, "num_local_experts": 4)";
  EXPECT_EQ(refusal(mixtral + "}"), "config.json: num_experts_per_tok: missing");
  EXPECT_EQ(refusal(mixtral + R"(, "num_experts_per_tok": 5})"),
            "config.json: num_experts_per_tok: 5 of 4 experts (the chip's top-k takes 1 to 8)");
  EXPECT_EQ(refusal(mixtral + R"(, "num_experts_per_tok": 2, "hidden_act": "gelu"})"),
            "config.json: hidden_act: 'gelu' (the MLPs are built with silu)");
  EXPECT_NE(refusal(R"({"hidden_size": -1})").find("hidden_size: -1 is not a count"), std::string::npos);
}

TEST(HfLlama, TheShippedConfigsAreReadOrRefusedByName) {
  const std::string dir = TESSERA_HF_CONFIGS;
  const LlamaConfig l8 = LlamaConfig::load(dir + "/llama-3-8b.json"), l70 = LlamaConfig::load(dir + "/llama-3-70b.json");
  EXPECT_EQ(l8.hidden, 4096u);
  EXPECT_EQ(l8.kv_heads, 8u);
  EXPECT_EQ(l8.head_dim, 128u);
  EXPECT_EQ(l8.vocab, 128256u);
  EXPECT_EQ(l70.layers, 80u);
  EXPECT_EQ(l70.heads, 64u);
  EXPECT_EQ(l70.intermediate, 28672u);
  const LlamaConfig mx = LlamaConfig::load(dir + "/mixtral-8x7b.json");
  EXPECT_EQ(mx.experts, 8u);
  EXPECT_EQ(mx.experts_per_token, 2u);
  EXPECT_EQ(mx.intermediate, 14336u);
  const LlamaConfig qw = LlamaConfig::load(dir + "/qwen1.5-moe-a2.7b.json");
  EXPECT_EQ(qw.experts, 60u);
  EXPECT_EQ(qw.experts_per_token, 4u);
  EXPECT_EQ(qw.expert_intermediate, 1408u);
  EXPECT_EQ(qw.shared_intermediate, 5632u);
  EXPECT_FALSE(qw.norm_topk_prob);
  EXPECT_TRUE(qw.qkv_bias);
  EXPECT_EQ(qw.sliding_window, 0u);  // use_sliding_window false
  EXPECT_TRUE(qw.sparse(0) && qw.sparse(23));
  EXPECT_EQ(qw.router(3), "model.layers.3.mlp.gate.weight");
  EXPECT_EQ(qw.expert(3, 59, "down"), "model.layers.3.mlp.experts.59.down_proj.weight");
  EXPECT_EQ(mx.expert(0, 7, "up"), "model.layers.0.block_sparse_moe.experts.7.w3.weight");
  // Each model's size as its makers publish it (in billions of weights;
  // DeepSeek-V3's 671 leaves its multi-token-prediction layer out).
  const std::pair<const char*, double> sizes[] = {{"llama-3-8b.json", 8.03}, {"llama-3-70b.json", 70.55},
                                                  {"mixtral-8x7b.json", 46.70}, {"qwen1.5-moe-a2.7b.json", 14.32},
                                                  {"deepseek-v3.json", 671.0}};
  for (const auto& [file, billions] : sizes)
    EXPECT_NEAR(LlamaConfig::load(dir + "/" + file).parameters() / 1e9, billions, billions * 5e-3) << file;
  // The routed experts' share (what expert parallelism spreads): Mixtral's
  // 32 layers of 8 experts of 3 x 4096 x 14336, DeepSeek-V3's 58 sparse
  // layers of 256 of 3 x 7168 x 2048 (its first three dense).
  EXPECT_EQ(LlamaConfig::load(dir + "/mixtral-8x7b.json").routed_parameters(), 32ull * 8 * 3 * 4096 * 14336);
  EXPECT_EQ(LlamaConfig::load(dir + "/deepseek-v3.json").routed_parameters(), 58ull * 256 * 3 * 7168 * 2048);
  EXPECT_EQ(LlamaConfig::load(dir + "/deepseek-v3.json").routed_parameters(3), 0u);
  EXPECT_EQ(LlamaConfig::load(dir + "/llama-3-8b.json").routed_parameters(), 0u);
  const LlamaConfig ds = LlamaConfig::load(dir + "/deepseek-v3.json");
  EXPECT_TRUE(ds.mla);
  EXPECT_EQ(ds.q_lora, 1536u);
  EXPECT_EQ(ds.kv_lora, 512u);
  EXPECT_EQ(ds.rope_dim(), 64u);
  EXPECT_EQ(ds.experts, 256u);
  EXPECT_EQ(ds.groups, 8u);
  EXPECT_EQ(ds.shared_intermediate, 2048u);
  EXPECT_TRUE(!ds.sparse(2) && ds.sparse(3) && ds.sparse(60));
  // yarn: softmax scale 1/sqrt(192) x mscale^2, mscale = 0.1 ln 40 + 1.
  EXPECT_NEAR(ds.attention_scale(), std::pow(0.1 * std::log(40.0) + 1, 2) / std::sqrt(192.0), 1e-12);
  const std::vector<double> yf = ds.inv_freq();
  ASSERT_EQ(yf.size(), 32u);
  EXPECT_DOUBLE_EQ(yf[0], 1.0);                                       // extrapolated: kept
  EXPECT_NEAR(yf[31], std::pow(10000.0, -62.0 / 64) / 40, 1e-18);     // interpolated: divided by the factor
}

TEST(HfLlama, AShapeOnlyGraphIsTheSeededGraphWithoutAnyValue) {
  // The graph a timing-only device runs: every weight of the seeded graph,
  // shape and format, and no values (nor rotary tables); the reference
  // refuses it by name. At full size (Llama-3-70B, 80 layers) it holds
  // no weight on the host.
  const std::string dir = TESSERA_HF_CONFIGS;
  for (const char* file : {"tiny-llama.json", "tiny-mixtral.json", "tiny-deepseek-v3.json"}) {
    const LlamaConfig c = LlamaConfig::load(dir + "/" + file);
    const compiler::Graph seeded = llama_step(c, seeded_weights(3), 4, 16, 2), bare = llama_step(c, shape_only(), 4, 16, 2);
    ASSERT_EQ(seeded.tensors().size(), bare.tensors().size()) << file;
    ASSERT_EQ(seeded.ops().size(), bare.ops().size()) << file;
    unsigned weights = 0;
    for (std::size_t i = 0; i < bare.tensors().size(); ++i) {
      const compiler::Tensor &a = seeded.tensors()[i], &b = bare.tensors()[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.shape, b.shape) << a.name;
      EXPECT_EQ(a.dtype, b.dtype) << a.name;
      EXPECT_EQ(b.shape_only(), a.role == compiler::Role::weight) << a.name;
      weights += b.shape_only();
      EXPECT_TRUE(b.values.empty()) << a.name;
    }
    EXPECT_GT(weights, 10u) << file;
    try {
      compiler::reference(bare, llama_inputs({1, 2, 3, 4}, 0));
      ADD_FAILURE() << file << ": the reference ran a graph without values";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("has a shape but no values"), std::string::npos) << e.what();
    }
  }
  const LlamaConfig l70 = LlamaConfig::load(dir + "/llama-3-70b.json");
  const compiler::Graph g = llama_step(l70, shape_only(), 1, 1024);
  std::uint64_t elements = 0;
  for (const compiler::Tensor& t : g.tensors())
    if (t.shape_only()) elements += t.elements();
  EXPECT_NEAR(elements / 1e9, 70.55, 0.5) << "every weight, and the rotary tables once";
}

TEST(HfLlama, AShapeOnlyGraphIsRefusedOnADeviceWithData) {
  rt::Device dev;
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  const LlamaConfig c = LlamaConfig::load(std::string(TESSERA_HF_CONFIGS) + "/tiny-llama.json");
  ASSERT_FALSE(dev.timing_only());
  try {
    compiler::Executable ex(dev, program, llama_step(c, shape_only(), 4, 16, 1));
    ADD_FAILURE() << "a device with data took a graph without weights' values";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("weight 'model.embed_tokens.weight' has a shape but no values: only a timing-only device"),
              std::string::npos) << e.what();
  }
}

TEST(HfLlama, TwoLayersOnTheChipAgreeWithTheReferenceWithSeededOrStoredWeights) {
  rt::Device dev;
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  const LlamaConfig c = LlamaConfig::parse(tiny(), "config.json");
  const std::vector<std::uint32_t> prompt{3, 17, 42, 5, 95, 60};
  const WeightSource seeded = seeded_weights(7);
  compiler::Executable ex(dev, program, llama_prefill(c, seeded, prompt, 2));
  const std::vector<float> logits = ex.run(llama_inputs(prompt)).at("logits");
  ASSERT_EQ(logits.size(), prompt.size() * c.vocab);
  const double err = relative_error(logits, llama_reference(c, seeded, prompt, 2));
  std::cout << "two layers, 6 tokens: logits' relative error " << err << ", " << dev.simulated_seconds() * 1e6
            << " us simulated so far\n";
  EXPECT_LT(err, 5e-2);  // BF16 GEMM inputs, as the main job's bound
  EXPECT_GT(err, 0.0);

  // The compiled graph serves another prompt of this length: the tokens are its input.
  const std::vector<std::uint32_t> other{90, 1, 1, 64, 2, 33};
  EXPECT_LT(relative_error(ex.run(llama_inputs(other)).at("logits"), llama_reference(c, seeded, other, 2)), 5e-2);
  EXPECT_THROW(ex.run(llama_inputs({3, 17, 42, 5, 95, 96})), rt::DeviceError);  // a token past the vocabulary: the lookup fails on the chip
  EXPECT_EQ(ex.run(llama_inputs(prompt)).at("logits"), logits);  // and it serves on
  // The same weights written as a model's safetensors (two shards and an index), read back.
  const std::string d = testing::TempDir() + "llama_test_weights";
  std::filesystem::create_directories(d);
  std::vector<NamedTensor> a, b;
  auto add = [&](std::vector<NamedTensor>& shard, const std::string& name, std::vector<std::uint64_t> shape) {
    shard.push_back({name, "F32", shape, seeded(name, shape)});
  };
  add(a, "model.embed_tokens.weight", {c.vocab, c.hidden});
  for (unsigned l = 0; l < 2; ++l) {
    auto& s = l ? b : a;
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(s, p + "input_layernorm.weight", {c.hidden});
    add(s, p + "post_attention_layernorm.weight", {c.hidden});
    add(s, p + "self_attn.q_proj.weight", {c.heads * c.head_dim, c.hidden});
    add(s, p + "self_attn.k_proj.weight", {c.kv_heads * c.head_dim, c.hidden});
    add(s, p + "self_attn.v_proj.weight", {c.kv_heads * c.head_dim, c.hidden});
    add(s, p + "self_attn.o_proj.weight", {c.hidden, c.heads * c.head_dim});
    add(s, p + "mlp.gate_proj.weight", {c.intermediate, c.hidden});
    add(s, p + "mlp.up_proj.weight", {c.intermediate, c.hidden});
    add(s, p + "mlp.down_proj.weight", {c.hidden, c.intermediate});
  }
  add(b, "model.norm.weight", {c.hidden});
  add(b, "lm_head.weight", {c.vocab, c.hidden});
  write_safetensors(d + "/model-00001-of-00002.safetensors", a);
  write_safetensors(d + "/model-00002-of-00002.safetensors", b);
  nlohmann::json index;
  for (const auto& t : a) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const auto& t : b) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  std::ofstream(d + "/model.safetensors.index.json") << index.dump();
  const SafeTensors st = SafeTensors::open(d);
  compiler::Executable stored(dev, program, llama_prefill(c, weights_from(st), prompt, 2));
  EXPECT_EQ(stored.run(llama_inputs(prompt)).at("logits"), logits);  // bit for bit
  // A layer the file lacks is refused by name.
  try {
    llama_prefill(c, weights_from(st), prompt, 3);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor 'model.layers.2.input_layernorm.weight'"), std::string::npos) << e.what();
  }

  // Tied embeddings: the LM head is the embedding table.
  const LlamaConfig tied = LlamaConfig::parse(tiny(true), "config.json");
  compiler::Executable t(dev, program, llama_prefill(tied, seeded, {1, 2, 3}, 1));
  EXPECT_LT(relative_error(t.run(llama_inputs({1, 2, 3})).at("logits"), llama_reference(tied, seeded, {1, 2, 3}, 1)), 5e-2);
}

TEST(HfLlama, Fp8WeightsAreMultipliedByTheirScales) {
  // DeepSeek-V3's FP8 checkpoints keep each weight's E4M3 codes with a
  // factor per 128 x 128 block in <name>_scale_inv; compressed-tensors'
  // keep one factor (or one per row) in <name>_scale. Read as their values.
  const std::string d = testing::TempDir() + "llama_test_fp8";
  std::filesystem::create_directories(d);
  const std::vector<float> a = compiler::seeded_values(200 * 300, 1, 8.0f), inv = {0.5f, 2.0f, 0.25f, 3.0f, 1.5f, 0.125f};
  write_safetensors(d + "/model.safetensors",
                    {{"a.weight", "F8_E4M3", {200, 300}, a},
                     {"a.weight_scale_inv", "F32", {2, 3}, inv},
                     {"b.weight", "F8_E4M3", {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}},
                     {"b.weight_scale", "F32", {4, 1}, {1, 10, 100, 1000}},
                     {"c.weight", "F8_E4M3", {2, 2}, {1, 2, 3, 4}},
                     {"c.weight_scale", "F32", {}, {0.5f}},
                     {"raw.weight", "F8_E4M3", {2}, {1.0f, 0.3f}},
                     {"e.weight", "F8_E4M3", {200, 2}, std::vector<float>(400, 1.0f)},
                     {"e.weight_scale_inv", "F32", {1, 1}, {1.0f}}});
  const SafeTensors st = SafeTensors::open(d);
  const WeightSource w = weights_from(st);
  const std::vector<float> got = w("a.weight", {200, 300});
  for (unsigned r = 0; r < 200; r += 7)
    for (unsigned c = 0; c < 300; c += 11)
      EXPECT_EQ(got[r * 300 + c], static_cast<float>(num::quantize(num::Format::E4M3, a[r * 300 + c])) * inv[(r / 128) * 3 + c / 128])
          << r << " " << c;
  EXPECT_EQ(w("b.weight", {4, 2}), (std::vector<float>{1, 2, 30, 40, 500, 600, 7000, 8000}));
  EXPECT_EQ(w("c.weight", {2, 2}), (std::vector<float>{0.5f, 1, 1.5f, 2}));
  EXPECT_EQ(w("raw.weight", {2}), (std::vector<float>{1.0f, static_cast<float>(num::quantize(num::Format::E4M3, 0.3f))}));
  try {
    w("e.weight", {200, 2});
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'e.weight_scale_inv' [1, 1]: the weight [200, 2] needs a scale per 128 x 128 block, [2, 1]"),
              std::string::npos) << e.what();
  }
}

TEST(HfLlama, AnFp8CheckpointsLinearsRunBlockScaledOnTheChip) {
  // A Llama whose Linears are stored as DeepSeek-V3 stores its own: E4M3
  // codes with a factor per 128 x 128 block. They run as such on the
  // tensor core (activations cast in 1 x 128 groups), close to the FP32
  // reference of the same weights; the embedding and the LM head are FP32.
  rt::Device dev;
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  const LlamaConfig c = LlamaConfig::parse(nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 256,
    "vocab_size": 96, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false})"), "config.json");
  // Every Linear of the layers FP8 (the embedding and the LM head FP32).
  const std::string d = seeded_checkpoint(c, 3, 2, "llama_test_fp8_model", [](const std::string& name) {
    return name.find("_proj.weight") != std::string::npos;
  });
  const SafeTensors st = SafeTensors::open(d);
  const std::vector<std::uint32_t> prompt{3, 17, 42, 5, 95, 60, 7, 8};
  const compiler::Graph g = llama_prefill(c, weights_from(st), prompt, 2, fp8_blocks_from(st));
  unsigned scaled = 0;
  for (const compiler::Op& op : g.ops()) scaled += compiler::block_scaled(op);
  EXPECT_EQ(scaled, 2u * 7);  // every Linear of both layers
  compiler::Executable fp8_ex(dev, program, g);
  const std::vector<float> want = llama_reference(c, weights_from(st), prompt, 2);
  const std::vector<float> got = fp8_ex.run(llama_inputs(prompt)).at("logits");
  // What the chip computes is the compiler's reference of the FP8 graph, bit for bit.
  const std::vector<std::vector<float>> ref = compiler::reference(g, llama_inputs(prompt));
  for (int t : g.outputs())
    if (g.tensor(t).name == "logits") {
      EXPECT_EQ(got, ref[static_cast<std::size_t>(t)]);
    }
  const double err = relative_error(got, want);
  compiler::Executable bf16_ex(dev, program, llama_prefill(c, weights_from(st), prompt, 2));
  const double bf16_err = relative_error(bf16_ex.run(llama_inputs(prompt)).at("logits"), want);
  std::cout << "FP8 checkpoint, two layers: logits' relative error " << err << " block-scaled, " << bf16_err
            << " with the weights in BF16\n";
  // E4M3 keeps 3 mantissa bits (a half-step of 6.25%) in every Linear's
  // operands, BF16 8: the FP8 path's error is an order of magnitude more.
  EXPECT_LT(err, 0.1);
  EXPECT_GT(err, 3 * bf16_err) << "the activations' E4M3 groups cost precision the BF16 path keeps";
  // A block-scaled weight of another shape than the config's is refused by name.
  std::vector<float> codes, scales;
  EXPECT_THROW(fp8_blocks_from(st)("model.layers.0.mlp.up_proj.weight", {128, 256}, codes, scales), FormatError);
}

TEST(HfLlama, AnFp8MixtralsExpertsRunBlockScaledOnTheChip) {
  // The tiny Mixtral with its attention's Linears and every expert stored
  // as E4M3 codes and a factor per 128 x 128 block: the experts run as a
  // block-scaled moe op (the experts' kernel in FP8), the chip equals the
  // compiler's reference of that graph bit for bit, and the logits stay
  // within the FP8 bound of the FP32 reference on the chip's routes.
  rt::Device dev;
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  const LlamaConfig c = LlamaConfig::load(std::string(TESSERA_HF_CONFIGS) + "/tiny-mixtral.json");
  const std::string d = seeded_checkpoint(c, 11, 2, "mixtral_test_fp8_model", [](const std::string& name) {
    return name.find("_proj.weight") != std::string::npos || name.find(".experts.") != std::string::npos;
  });
  const SafeTensors st = SafeTensors::open(d);
  const std::vector<std::uint32_t> prompt{3, 17, 42, 5, 95, 60, 7, 300};
  const compiler::Graph g = llama_prefill(c, weights_from(st), prompt, 2, fp8_blocks_from(st));
  unsigned scaled_experts = 0;
  for (const compiler::Op& op : g.ops()) scaled_experts += op.kind == compiler::OpKind::moe && compiler::block_scaled(op);
  EXPECT_EQ(scaled_experts, 2u) << "both layers' experts in FP8";
  const Fp8OnChip r = fp8_on_chip(dev, program, c, st, g, prompt, 2);
  std::cout << "Mixtral FP8 checkpoint, two layers: logits' relative error " << r.err << " on the chip's routes, " << r.differ
            << " of 16 token-layer routes differ from the FP32 reference's own; " << r.bf16_err << " with the weights in BF16\n";
  EXPECT_LT(r.err, 0.15);
  EXPECT_GT(r.err, 3 * r.bf16_err) << "E4M3 groups round the experts' and projections' inputs";
  // Megatron's shards split BF16 Linears only: the checkpoint's FP8 ones are refused by name.
  try {
    llama_step(c, weights_from(st), 8, 8, 2, fp8_blocks_from(st), 1, false, Shard{1, 4});
    ADD_FAILURE() << "an FP8 Linear sharded";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.self_attn.q_proj.weight is stored in FP8 blocks (a shard takes BF16 Linears)"),
              std::string::npos) << e.what();
  }
}

TEST(HfLlama, MixtralsExpertLayersOnTheChipAgreeWithTheReference) {
  rt::Device dev;
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  const LlamaConfig c = LlamaConfig::load(std::string(TESSERA_HF_CONFIGS) + "/tiny-mixtral.json");
  ASSERT_EQ(c.experts, 8u);
  const std::vector<std::uint32_t> prompt{3, 17, 42, 5, 95, 60, 7, 300};
  const WeightSource seeded = seeded_weights(11);
  EXPECT_EQ(moe_ops(llama_prefill(c, seeded, prompt, 2)), 2u);
  const OnChip r = on_chip(dev, program, c, seeded, prompt, 2);
  const auto& out = r.out;
  const auto& routes = r.routes;
  ASSERT_EQ(routes.size(), 2u);
  ASSERT_EQ(routes[0].size(), prompt.size() * 2);
  // On the chip's routes the reference agrees; these weights have near ties
  // (layer 0's first token: its second and third logits 0.0037 apart), so
  // some of its own choices differ, and then so do the logits.
  expect_agrees(r, "Mixtral, two layers, 8 tokens", 16, 4);
  EXPECT_GE(r.differ, 1u);
  EXPECT_GT(relative_error(out.at("logits"), llama_reference(c, seeded, prompt, 2)), 5e-2);
  // Top-1 and top-8 leave no near tie to tip here: the FP32 reference's own routes agree.
  for (unsigned k : {1u, 8u}) {
    LlamaConfig ck = c;
    ck.experts_per_token = k;
    const OnChip o = on_chip(dev, program, ck, seeded, prompt, 1);
    EXPECT_LT(o.err, 5e-2) << "top-" << k;
    EXPECT_EQ(o.differ, 0u) << "top-" << k;
  }
}

TEST(HfLlama, Qwen2MoeSharedAndRoutedExpertsOnTheChipAgreeWithTheReference) {
  // Q/K/V biases, 16 experts top 4 without renormalising, a gated shared
  // expert, and layer 1 dense (mlp_only_layers).
  rt::Device dev;
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  const LlamaConfig c = LlamaConfig::load(std::string(TESSERA_HF_CONFIGS) + "/tiny-qwen2-moe.json");
  ASSERT_TRUE(c.sparse(0) && !c.sparse(1) && c.sparse(2));
  const std::vector<std::uint32_t> prompt{3, 17, 42, 5, 95, 60};
  const WeightSource seeded = seeded_weights(5);
  EXPECT_EQ(moe_ops(llama_prefill(c, seeded, prompt, 3)), 2u);
  const OnChip r = on_chip(dev, program, c, seeded, prompt, 3);
  ASSERT_EQ(r.routes.size(), 3u);
  EXPECT_TRUE(r.routes[1].empty());
  expect_agrees(r, "Qwen2-MoE, three layers, 6 tokens", 12, 3);
  // Without the shared expert or its gate the logits are far off: both are in.
  LlamaConfig plain = c;
  plain.shared_intermediate = 0;
  EXPECT_GT(relative_error(r.out.at("logits"), llama_reference(plain, seeded, prompt, 3, &r.routes)), 5e-2);
}

TEST(HfLlama, DeepSeekV3LatentAttentionAndGroupRoutedExpertsOnTheChipAgreeWithTheReference) {
  // MLA (a Q bottleneck, a KV latent, a shared rotary key in interleaved
  // pairs, yarn), layer 0 dense, layer 1 sparse: 32 experts in 4 groups,
  // 2 kept, top 4, the gates normalised and scaled, one shared expert.
  rt::Device dev;
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  const LlamaConfig c = LlamaConfig::load(std::string(TESSERA_HF_CONFIGS) + "/tiny-deepseek-v3.json");
  ASSERT_TRUE(c.mla && !c.sparse(0) && c.sparse(1));
  const std::vector<std::uint32_t> prompt{3, 17, 42, 5, 95, 60, 7};
  const WeightSource seeded = seeded_weights(3);
  const OnChip r = on_chip(dev, program, c, seeded, prompt, 2);
  const auto& routes = r.routes;
  ASSERT_EQ(routes.size(), 2u);
  ASSERT_EQ(routes[1].size(), prompt.size() * 4);
  for (std::size_t i = 0; i < routes[1].size(); i += 4) {  // each token's experts from at most 2 of the 4 groups
    std::set<unsigned> groups;
    for (unsigned j = 0; j < 4; ++j) groups.insert(routes[1][i + j] / 8);
    EXPECT_LE(groups.size(), 2u);
  }
  expect_agrees(r, "DeepSeek-V3, two layers, 7 tokens", 7, 2);
  // The rotary part matters: without yarn's frequencies the reference is off.
  LlamaConfig plain = c;
  plain.yarn = false;
  EXPECT_GT(relative_error(r.out.at("logits"), llama_reference(plain, seeded, prompt, 2, &routes)), 5e-3);
}

TEST(HfLlama, AnFp8DeepSeekV3sLatentAttentionRunsBlockScaledOnTheChip) {
  // DeepSeek-V3 as its checkpoint stores it: the attention's Linears in
  // E4M3 with a factor per 128 x 128 block. Those with inputs in whole
  // 128s run block-scaled, the rotary ones (q_b_proj, kv_a_proj_with_mqa,
  // whose interleaved rotary rows are reordered inside their blocks)
  // included; the chip equals the compiler's reference bit for bit and
  // stays within the FP8 bound of the FP32 reference.
  rt::Device dev;
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  // With a latent, key and value heads of 128 (whole blocks), kv_b_proj's
  // heads run block-scaled too: its heads' key rows (W_UK) and value rows
  // (W_UV, transposed) each a batched matmul, a matrix a head, with their
  // blocks' scales.
  for (const bool wide : {false, true}) {
    SCOPED_TRACE(wide ? "kv_b_proj in whole blocks" : "kv_b_proj in BF16");
    nlohmann::json j = nlohmann::json::parse(std::ifstream(std::string(TESSERA_HF_CONFIGS) + "/tiny-deepseek-v3.json"));
    j["q_lora_rank"] = 128u;  // q_b_proj's input in whole blocks
    if (wide) j["kv_lora_rank"] = j["qk_nope_head_dim"] = j["v_head_dim"] = 128u;
    const LlamaConfig c = LlamaConfig::parse(j, "tiny-deepseek-v3.json");
    const std::vector<std::uint32_t> prompt{3, 17, 42, 5, 95, 60, 7};
    const std::string d = seeded_checkpoint(c, 3, 2, wide ? "deepseek_test_fp8_wide" : "deepseek_test_fp8_model", [](const std::string& name) {
      return name.find("self_attn.") != std::string::npos && name.find("_proj") != std::string::npos;  // kv_a_proj_with_mqa too
    });
    const SafeTensors st = SafeTensors::open(d);
    const compiler::Graph g = llama_prefill(c, weights_from(st), prompt, 2, fp8_blocks_from(st));
    std::set<std::string> scaled;
    for (const compiler::Op& op : g.ops())
      if (op.kind == compiler::OpKind::matmul && compiler::block_scaled(op)) scaled.insert(g.tensor(op.in[1]).name);
    // q_a, q_b and kv_a in each layer (kv_b's input is the 32-wide latent, o_proj's 64 wide: BF16); wide: o_proj (4 heads of 128)
    // and kv_b's 4 heads' W_UK and W_UV too.
    EXPECT_EQ(scaled.size(), wide ? 12u : 6u);
    EXPECT_EQ(scaled.count("model.layers.1.self_attn.q_b_proj.weight"), 1u);
    EXPECT_EQ(scaled.count("model.layers.1.self_attn.kv_a_proj_with_mqa.weight"), 1u);
    EXPECT_EQ(scaled.count("model.layers.1.self_attn.kv_b_proj.weight.w_uv0-3"), wide ? 1u : 0u);
    const Fp8OnChip r = fp8_on_chip(dev, program, c, st, g, prompt, 2);
    std::cout << "DeepSeek-V3 FP8 checkpoint" << (wide ? " (kv_b_proj in whole blocks)" : "") << ", two layers: logits' relative error "
              << r.err << " on the chip's routes (" << r.differ << " of 7 routes differ from the reference's own); " << r.bf16_err
              << " with the weights in BF16\n";
    EXPECT_LT(r.err, 0.1);
    EXPECT_GT(r.err, 3 * r.bf16_err) << "the attention's inputs in E4M3 groups";
  }
}

TEST(HfLlama, DeepSeekV3sFullSizeLatentCacheIsCompressedInEveryLayout) {
  // DeepSeek-V3's first four layers at full size (shapes only; the fourth
  // a MoE layer, which expert parallelism needs), on one chip, in
  // Megatron's shards over 4 and 16 chips and under expert parallelism
  // (every chip all 128 heads): a graph's heads (128, 32, 8, 128) attend
  // absorbed to one KV head of [latent ; k_pe] (512 + 64) with the latent
  // as its value, 1088 cached values a position for all its heads (their
  // keys and values decompressed would take 320 a head), its heads' W_UK
  // and W_UV of kv_b_proj a batched matmul each, a matrix a head. 128
  // heads' absorbed queries are rows of 73728 values, past the kernel's
  // 16-bit strides: packed, the kernel takes them whole.
  const LlamaConfig c = LlamaConfig::load(std::string(TESSERA_HF_CONFIGS) + "/deepseek-v3.json");
  for (const Shard& shard : {Shard{}, Shard{0, 4}, Shard{3, 16}, Shard{1, 16, true}}) {
    SCOPED_TRACE(fmt::format("chip {} of {}{}", shard.chip, shard.chips, shard.experts ? ", expert parallel" : ""));
    const unsigned H = shard.experts ? 128 : 128 / shard.chips;
    const compiler::Graph g = llama_step(c, shape_only(), 1, 16, 4, {}, 1, false, shard);
    unsigned heads = 0, absorbing = 0;
    for (const compiler::Op& op : g.ops()) {
      if (op.kind == compiler::OpKind::attention) {
        heads += op.heads;
        EXPECT_EQ(g.tensor(op.in[0]).cols(), H * 576u) << "the absorbed queries";
      }
      if (op.kind != compiler::OpKind::matmul || g.tensor(op.in[1]).name.find("kv_b_proj.weight.w_u") == std::string::npos) continue;
      ++absorbing;
      EXPECT_EQ(compiler::matmul_dims(g, op).batches, H) << op.name << ": a matrix a head";
    }
    EXPECT_EQ(heads, 4 * H);
    EXPECT_EQ(absorbing, 8u);
    std::map<std::string, std::vector<unsigned>> caches, want;
    for (const compiler::Tensor& t : g.tensors())
      if (t.role == compiler::Role::state) caches[t.name] = t.shape;
    for (unsigned l = 0; l < 4; ++l)
      want[fmt::format("layer{}.k_cache", l)] = {1, 16, 576}, want[fmt::format("layer{}.v_cache", l)] = {1, 16, 512};
    EXPECT_EQ(caches, want);
  }
}

TEST(HfLlama, DecodingOverTheKvCacheGivesTheLongerPrefillsLogitsBitForBit) {
  // A prompt of 5, then 3 tokens decoded one compiled step at a time over
  // the caches the prefill filled, against one prefill of all 8: each
  // row's logits (and a MoE model's routes) are the same bits, and within
  // the bound of the FP32 reference. Llama (GQA), Mixtral (top 2 of 8) and
  // DeepSeek-V3 (latent attention absorbed, over its compressed cache).
  rt::Device dev;
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  const std::vector<std::uint32_t> all{3, 17, 42, 5, 60, 9, 33, 71};
  const unsigned P = 5, N = static_cast<unsigned>(all.size());
  for (const char* file : {"", "tiny-mixtral.json", "tiny-deepseek-v3.json"}) {
    const LlamaConfig c = *file ? LlamaConfig::load(std::string(TESSERA_HF_CONFIGS) + "/" + file) : LlamaConfig::parse(tiny(), "tiny");
    const WeightSource w = seeded_weights(7);
    compiler::Executable whole(dev, program, llama_step(c, w, N, N, 2));
    const auto want = whole.run(llama_inputs(all));
    compiler::Executable prefill(dev, program, llama_step(c, w, P, N, 2));
    compiler::Options shared;
    shared.state = prefill.state();
    compiler::Executable step(dev, program, llama_step(c, w, 1, N, 2), shared);
    EXPECT_EQ(step.state().size(), 4u) << file;  // K and V of two layers
    if (c.mla) {  // the compressed cache: one KV head of [latent ; k_pe], the latent its value (not H heads' keys and values)
      std::map<std::string, std::vector<unsigned>> caches;
      for (const compiler::Tensor& t : step.graph().tensors())
        if (t.role == compiler::Role::state) caches[t.name] = t.shape;
      EXPECT_EQ(caches.at("layer0.k_cache"), (std::vector<unsigned>{1, N, c.kv_lora + c.qk_rope})) << file;
      EXPECT_EQ(caches.at("layer1.v_cache"), (std::vector<unsigned>{1, N, c.kv_lora})) << file;
    }
    auto got = prefill.run(llama_inputs(std::vector<std::uint32_t>(all.begin(), all.begin() + P)));
    for (unsigned t = P; t < N; ++t) {
      const auto o = step.run(llama_inputs({all[t]}, t));
      for (const auto& [name, v] : o) {
        if (name.rfind(".route") == std::string::npos) {
          got[name].insert(got[name].end(), v.begin(), v.end());
          continue;
        }
        // A route is the experts, then the gates: each half grows by the step's.
        std::vector<float>& r = got[name];
        const std::size_t half = r.size() / 2;
        std::vector<float> merged(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(half));
        merged.insert(merged.end(), v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2));
        merged.insert(merged.end(), r.begin() + static_cast<std::ptrdiff_t>(half), r.end());
        merged.insert(merged.end(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
        r = std::move(merged);
      }
    }
    for (const auto& [name, v] : want) {
      ASSERT_EQ(got.at(name).size(), v.size()) << file << " " << name;
      EXPECT_EQ(std::memcmp(got.at(name).data(), v.data(), v.size() * 4), 0) << file << " " << name << " differs";
    }
    const std::vector<std::vector<std::uint32_t>> routes = chip_routes(c, want, 2);
    unsigned differ = 0;
    const double err = relative_error(want.at("logits"), llama_reference(c, w, all, 2, c.experts ? &routes : nullptr, &differ));
    EXPECT_LT(err, 5e-2) << file;
    std::cout << (*file ? file : "tiny llama") << ": 5 + 3 decoded = 8 prefilled bit for bit; logits' error " << err << "\n";
  }
}

TEST(HfLlama, AContextPastAPageIsPagedAndGivesTheShortContextsLogitsBitForBit) {
  // A context past the attention's word for a page (65535 positions)
  // lies in pages of whole 256s (kv_pages), one sequence's in order
  // through its page table (llama_batch_inputs): a prompt of 4 and a
  // decoded token over caches of 70000 positions give the logits of the
  // same steps over caches of 8, bit for bit (the same keys in the same
  // order); the caches' capacity is the pages'.
  EXPECT_EQ(kv_pages(65535).page, 65535u);
  EXPECT_EQ(kv_pages(65535).pages, 1u);
  EXPECT_EQ(kv_pages(65536).page, 32768u);
  EXPECT_EQ(kv_pages(70000).page, 35072u);
  EXPECT_EQ(kv_pages(70000).pages, 2u);
  EXPECT_EQ(kv_pages(1048576).page, 61696u);
  EXPECT_EQ(kv_pages(1048576).pages, 17u);
  rt::Device dev;
  const rt::Kernel program = dev.load_kernel(data_file(DataKind::kernels, "program.elf"), (1u << dev.tiles()) - 1);
  const LlamaConfig c = LlamaConfig::parse(tiny(), "tiny");
  const WeightSource w = seeded_weights(11);
  const std::vector<std::uint32_t> prompt{3, 17, 42, 5};
  std::vector<std::vector<float>> logits;
  for (const unsigned context : {8u, 70000u}) {
    const bool paged = kv_pages(context).paged(1);
    auto in = [&](const std::vector<std::uint32_t>& t, unsigned at) {
      if (!paged) return llama_inputs(t, at);
      std::vector<unsigned> pos;
      for (unsigned i = 0; i < t.size(); ++i) pos.push_back(at + i);
      return llama_batch_inputs(t, pos, std::vector<unsigned>(t.size(), 0), 1, context);
    };
    compiler::Executable prefill(dev, program, llama_step(c, w, 4, context, 1));
    compiler::Options shared;
    shared.state = prefill.state();
    compiler::Executable step(dev, program, llama_step(c, w, 1, context, 1), shared);
    for (const compiler::Tensor& t : step.graph().tensors()) {
      if (t.name == "layer0.k_cache") {
        EXPECT_EQ(t.shape[1], paged ? 2u * 35072 : context);
      }
    }
    if (paged) {
      EXPECT_EQ(in(prompt, 0).at("pages"), (std::vector<float>{0, 1}));
    }
    std::vector<float> l = prefill.run(in(prompt, 0)).at("logits");
    const std::vector<float> next = step.run(in({60}, 4)).at("logits");
    l.insert(l.end(), next.begin(), next.end());
    logits.push_back(std::move(l));
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  EXPECT_EQ(std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * 4), 0) << "a context of 70000 changed the logits";
}

TEST(HfLlama, ShardsOnTheRingOfFourAllReduceToTheReferencesLogits) {
  // Megatron's tensor parallel layout (Shard): each chip of the ring of
  // four runs its shard of two layers, the partial sums all-reduced by
  // the chips' communication engines, each chip computing its vocabulary
  // columns of the logits. With 2 KV heads (each read by two chips, which
  // both compute it) and with 4 (one a chip): every chip's columns equal
  // reference_spmd's bit for bit, the logits put together within the BF16
  // bound of the FP32 reference, a prefill and then decode steps over each
  // chip's own caches. Models the layout
  // does not cover are refused by name.
  Ring ring;
  const std::vector<std::uint32_t> all{3, 17, 42, 5, 60, 9, 33, 71};
  const unsigned P = 5, Tn = static_cast<unsigned>(all.size());
  for (unsigned kv : {2u, 4u}) {
    SCOPED_TRACE(testing::Message() << kv << " KV heads");
    nlohmann::json j = tiny();
    j["num_key_value_heads"] = kv;
    const LlamaConfig c = LlamaConfig::parse(j, "tiny");
    const WeightSource w = seeded_weights(7);
    compiler::Options sym;
    sym.symmetric = std::make_shared<compiler::SymmetricStore>(ring.chips);
    std::vector<compiler::Graph> graphs;
    std::vector<std::unique_ptr<compiler::Executable>> prefill, step;
    std::vector<compiler::Executable*> pre, dec;
    for (unsigned k = 0; k < 4; ++k) graphs.push_back(llama_step(c, w, P, Tn, 2, {}, 1, false, Shard{k, 4}));
    for (unsigned k = 0; k < 4; ++k) {
      prefill.push_back(std::make_unique<compiler::Executable>(ring.cluster.chip(k), ring.programs[k], graphs[k], sym));
      compiler::Options shared = sym;
      shared.state = prefill.back()->state(), shared.weights = prefill.back()->weights();
      step.push_back(std::make_unique<compiler::Executable>(ring.cluster.chip(k), ring.programs[k], llama_step(c, w, 1, Tn, 2, {}, 1, false, Shard{k, 4}), shared));
      pre.push_back(prefill.back().get()), dec.push_back(step.back().get());
    }
    const auto in = llama_inputs(std::vector<std::uint32_t>(all.begin(), all.begin() + P));
    const std::vector<std::map<std::string, std::vector<float>>> ins(4, in);
    const auto out = compiler::run_together(pre, ins);
    std::vector<const compiler::Graph*> gs;
    for (const compiler::Graph& g : graphs) gs.push_back(&g);
    const auto ref = compiler::reference_spmd(gs, ins);
    const std::size_t lo = static_cast<std::size_t>(graphs[0].outputs().back());
    for (unsigned k = 0; k < 4; ++k) {
      ASSERT_EQ(out[k].at("logits.part").size(), std::size_t{P} * c.vocab / 4);
      EXPECT_EQ(std::memcmp(out[k].at("logits.part").data(), ref[k][lo].data(), ref[k][lo].size() * 4), 0)
          << "chip " << k << " against reference_spmd";
    }
    // Every chip's sums the same: the whole model's last norm, times each chip's columns.
    std::vector<float> logits = shard_logits(out, c.vocab);
    for (unsigned t = P; t < Tn; ++t) {
      const auto o2 = compiler::run_together(dec, std::vector<std::map<std::string, std::vector<float>>>(4, llama_inputs({all[t]}, t)));
      const std::vector<float> row = shard_logits(o2, c.vocab);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    const double err = relative_error(logits, llama_reference(c, w, all, 2));
    std::cout << kv << " KV heads over four chips, 5 prefilled + 3 decoded: logits' error " << err << "\n";
    EXPECT_LT(err, 5e-2);
    EXPECT_GT(err, 0.0);
  }
  auto refused = [](const std::function<void()>& f, const std::string& words) {
    try {
      f();
      ADD_FAILURE() << "accepted: " << words;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  const LlamaConfig c = LlamaConfig::parse(tiny(), "tiny");
  refused([&] { llama_step(c, seeded_weights(7), 1, 8, 2, {}, 1, false, Shard{0, 8}); }, "8 chips with all-reduce: 4 heads do not divide");
  nlohmann::json odd = nlohmann::json::parse(std::ifstream(std::string(TESSERA_HF_CONFIGS) + "/tiny-mixtral.json"));
  odd["intermediate_size"] = 250u;
  refused([&] { llama_step(LlamaConfig::parse(odd, "odd"), seeded_weights(7), 1, 8, 2, {}, 1, false, Shard{1, 4}); },
          "layer 0: an expert's intermediate size of 250 does not divide over the chips");
  refused([&] { llama_step(c, seeded_weights(7), 1, 8, 2, {}, 1, false, Shard{4, 4}); }, "shard 4 of 4 chips");
}

TEST(HfLlama, ExpertsDispatchOverTheRingOfFourInBf16AndFp8Blocks) {
  // DeepSeek's layout (Shard::experts) on the ring of four: every chip its
  // own prompt through the whole model but the experts, of which it holds
  // experts e mod 4 = its number, the rows dispatched to the experts'
  // chips and back by all-to-alls. Mixtral in BF16 and from a checkpoint
  // whose experts are E4M3 blocks (moe_local_scaled), DeepSeek-V3 (32
  // experts, group-limited, a shared expert beside them): every chip's
  // logits reference_spmd's bit for bit; the FP8 experts run block-scaled.
  // The LM head by vocabulary: each chip's columns of every chip's rows,
  // put together chip k's prompt's logits, within the BF16 bound of the
  // FP32 reference on the chip's routes (BF16 weights). A dense model, and
  // experts the chips do not divide, are refused.
  Ring ring;
  const LlamaConfig mixtral = LlamaConfig::load(std::string(TESSERA_HF_CONFIGS) + "/tiny-mixtral.json");
  const std::string d = seeded_checkpoint(mixtral, 11, 2, "mixtral_test_fp8_experts", [](const std::string& name) {
    return name.find(".experts.") != std::string::npos;
  });
  const SafeTensors st = SafeTensors::open(d);
  struct Case {
    const char* name;
    LlamaConfig c;
    WeightSource w;
    Fp8Source fp8;
  };
  const std::vector<Case> cases = {{"Mixtral, BF16", mixtral, seeded_weights(7), {}},
                                   {"Mixtral, FP8 experts", mixtral, weights_from(st), fp8_blocks_from(st)},
                                   {"DeepSeek-V3", LlamaConfig::load(std::string(TESSERA_HF_CONFIGS) + "/tiny-deepseek-v3.json"), seeded_weights(7), {}}};
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.name);
    compiler::Options sym;
    sym.symmetric = std::make_shared<compiler::SymmetricStore>(ring.chips);
    std::vector<std::unique_ptr<compiler::Executable>> ex;
    std::vector<compiler::Executable*> xs;
    std::vector<const compiler::Graph*> gs;
    std::vector<std::map<std::string, std::vector<float>>> ins;
    unsigned scaled = 0;
    for (unsigned k = 0; k < 4; ++k) {
      ex.push_back(std::make_unique<compiler::Executable>(ring.cluster.chip(k), ring.programs[k],
                                                          llama_step(cs.c, cs.w, 8, 8, 2, cs.fp8, 1, false, Shard{k, 4, true, 0}), sym));
      xs.push_back(ex.back().get()), gs.push_back(&ex.back()->graph());
      ins.push_back(llama_inputs({3 + k, 17, 42 + 5 * k, 5, 60, 9 + k, 33, 71}));
      for (const compiler::Op& op : ex.back()->graph().ops()) scaled += op.kind == compiler::OpKind::moe && op.ep_chips == 4 && compiler::block_scaled(op);
    }
    EXPECT_EQ(scaled, cs.fp8 ? 8u : 0u) << "two layers' experts on each chip, block-scaled from the FP8 checkpoint";
    const auto out = compiler::run_together(xs, ins);
    const auto ref = compiler::reference_spmd(gs, ins);
    for (unsigned k = 0; k < 4; ++k) {
      const std::size_t lo = static_cast<std::size_t>(gs[k]->outputs().back());
      ASSERT_EQ(out[k].at("logits.part").size(), std::size_t{4} * 8 * cs.c.vocab / 4) << "every chip's rows, its columns";
      EXPECT_EQ(std::memcmp(out[k].at("logits.part").data(), ref[k][lo].data(), ref[k][lo].size() * 4), 0) << "chip " << k;
    }
    const std::vector<std::vector<float>> logits = expert_logits(out, cs.c.vocab);
    for (unsigned k = 0; k < 4 && !cs.fp8; ++k) {
      std::map<std::string, std::vector<float>> mine = out[k];
      mine["logits"] = logits[k];
      const std::vector<std::vector<std::uint32_t>> routes = chip_routes(cs.c, mine, 2);
      const std::vector<std::uint32_t> tokens{3 + k, 17, 42 + 5 * k, 5, 60, 9 + k, 33, 71};
      const double err = relative_error(logits[k], llama_reference(cs.c, cs.w, tokens, 2, &routes));
      EXPECT_LT(err, 5e-2) << "chip " << k << "'s prompt";
      EXPECT_GT(err, 0.0);
    }
  }
  const LlamaConfig dense = LlamaConfig::load(std::string(TESSERA_HF_CONFIGS) + "/tiny-llama.json");
  EXPECT_EQ(expert_refusal(dense, 4), "no MoE layer among the layers run");
  EXPECT_EQ(expert_refusal(mixtral, 16), "8 experts do not divide over the chips");
  EXPECT_EQ(expert_refusal(mixtral, 4), "");
  EXPECT_TRUE(expert_head_by_vocab(mixtral, 4));
  EXPECT_FALSE(expert_head_by_vocab(mixtral, 3)) << "512 columns over three chips: the head whole on each chip's rows";
}

TEST(HfLlama, ShardsMoeAndLatentAttentionLayersOverTheRingOfFour) {
  // A MoE layer in Megatron's layout: every chip of the ring of four
  // routes all the rows alike (the router's input all-reduced, the same
  // bits on every chip) and runs every chosen expert over its quarter of
  // the expert's intermediate columns (and of the shared expert's), the
  // partial sums all-reduced. Mixtral (top 2 of 8), Qwen2-MoE (top 4 of
  // 16, a gated shared expert, a dense layer) and DeepSeek-V3 (a dense
  // layer, then 32 experts top 4 group-limited beside a shared expert,
  // its latent attention a head a chip, the latent computed on every
  // chip): every chip's routes are
  // chip 0's, its logits columns reference_spmd's bit for bit, the logits
  // within the BF16 bound of the FP32 reference on the chip's routes.
  Ring ring;
  const std::vector<std::uint32_t> all{3, 17, 42, 5, 60, 9, 33, 71};
  for (const char* file : {"tiny-mixtral.json", "tiny-qwen2-moe.json", "tiny-deepseek-v3.json"}) {
    SCOPED_TRACE(file);
    const LlamaConfig c = LlamaConfig::load(std::string(TESSERA_HF_CONFIGS) + "/" + file);
    const WeightSource w = seeded_weights(7);
    compiler::Options sym;
    sym.symmetric = std::make_shared<compiler::SymmetricStore>(ring.chips);
    std::vector<compiler::Graph> graphs;
    std::vector<std::unique_ptr<compiler::Executable>> ex;
    std::vector<compiler::Executable*> xs;
    std::vector<const compiler::Graph*> gs;
    for (unsigned k = 0; k < 4; ++k) graphs.push_back(llama_step(c, w, 8, 8, 2, {}, 1, false, Shard{k, 4}));
    for (unsigned k = 0; k < 4; ++k) {
      ex.push_back(std::make_unique<compiler::Executable>(ring.cluster.chip(k), ring.programs[k], graphs[k], sym));
      xs.push_back(ex.back().get()), gs.push_back(&graphs[k]);
    }
    const std::vector<std::map<std::string, std::vector<float>>> ins(4, llama_inputs(all));
    const auto out = compiler::run_together(xs, ins);
    const auto ref = compiler::reference_spmd(gs, ins);
    const std::size_t lo = static_cast<std::size_t>(graphs[0].outputs().back());
    unsigned routes_seen = 0;
    for (unsigned k = 0; k < 4; ++k) {
      EXPECT_EQ(std::memcmp(out[k].at("logits.part").data(), ref[k][lo].data(), ref[k][lo].size() * 4), 0) << "chip " << k;
      for (const auto& [name, v] : out[0])
        if (name.find(".route") != std::string::npos) {
          EXPECT_EQ(out[k].at(name), v) << "chip " << k << "'s " << name;
          routes_seen += k == 0;
        }
    }
    EXPECT_EQ(routes_seen, unsigned{c.sparse(0)} + c.sparse(1));
    std::map<std::string, std::vector<float>> whole = out[0];
    whole["logits"] = shard_logits(out, c.vocab);
    const std::vector<std::vector<std::uint32_t>> routes = chip_routes(c, whole, 2);
    unsigned differ = 0;
    const double err = relative_error(whole.at("logits"), llama_reference(c, w, all, 2, &routes, &differ));
    std::cout << file << " over four chips, 8 prefilled: logits' error " << err << " on the chip's routes (" << differ
              << " token-layer routes differ from the reference's own)\n";
    EXPECT_LT(err, 5e-2);
    EXPECT_GT(err, 0.0);
  }
}
