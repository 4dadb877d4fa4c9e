#include "llama.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include "engines/num/formats.hpp"
#include "executable.hpp"

namespace tessera::hf {

using compiler::DType;
using compiler::Graph;
using compiler::Move;
using compiler::OpKind;

LlamaConfig LlamaConfig::parse(const nlohmann::json& j, const std::string& file) {
  auto bad = [&](const std::string& key, const std::string& why) { return FormatError(fmt::format("{}: {}: {}", file, key, why)); };
  if (!j.is_object()) throw FormatError(fmt::format("{}: not a JSON object", file));
  LlamaConfig c;
  c.model_type = j.value("model_type", std::string("llama"));
  const bool qwen = c.model_type == "qwen2" || c.model_type == "qwen2_moe", deepseek = c.model_type == "deepseek_v3";
  if (c.model_type != "llama" && c.model_type != "mistral" && c.model_type != "mixtral" && !qwen && !deepseek)
    throw bad("model_type",
              fmt::format("'{}' is not built (llama, mistral, mixtral, qwen2, qwen2_moe and deepseek_v3 are)", c.model_type));
  auto count = [&](const char* key, bool required, unsigned fallback) -> unsigned {
    if (!j.contains(key) || j[key].is_null()) {
      if (required) throw bad(key, "missing");
      return fallback;
    }
    if (!j[key].is_number_unsigned() || j[key].get<std::uint64_t>() == 0 || j[key].get<std::uint64_t>() > (1u << 24))
      throw bad(key, fmt::format("{} is not a count above zero", j[key].dump()));
    return j[key].get<unsigned>();
  };
  c.hidden = count("hidden_size", true, 0), c.layers = count("num_hidden_layers", true, 0);
  c.heads = count("num_attention_heads", true, 0), c.kv_heads = count("num_key_value_heads", false, c.heads);
  c.intermediate = count("intermediate_size", true, 0), c.vocab = count("vocab_size", true, 0);
  c.head_dim = count("head_dim", false, c.hidden / c.heads);
  if (c.heads % c.kv_heads) throw bad("num_key_value_heads", fmt::format("{} does not divide {} heads", c.kv_heads, c.heads));
  if (c.head_dim % 2) throw bad("head_dim", fmt::format("{} is odd (rotary pairs)", c.head_dim));
  auto number = [&](const char* key, double fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_number() || j[key].get<double>() <= 0) throw bad(key, fmt::format("{} is not a number above zero", j[key].dump()));
    return j[key].get<double>();
  };
  c.rope_theta = number("rope_theta", 10000), c.rms_eps = number("rms_norm_eps", 1e-6);
  if (c.model_type == "mixtral") {
    c.experts = count("num_local_experts", true, 0), c.experts_per_token = count("num_experts_per_tok", true, 0);
    c.expert_intermediate = c.intermediate;
  } else if (c.model_type == "qwen2_moe") {
    c.experts = count("num_experts", true, 0), c.experts_per_token = count("num_experts_per_tok", true, 0);
    c.expert_intermediate = count("moe_intermediate_size", true, 0);
    if (j.contains("shared_expert_intermediate_size") && j["shared_expert_intermediate_size"] != 0)
      c.shared_intermediate = count("shared_expert_intermediate_size", false, 0);
    c.norm_topk_prob = j.value("norm_topk_prob", false);
    c.decoder_sparse_step = count("decoder_sparse_step", false, 1);
    if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
      if (!j["mlp_only_layers"].is_array()) throw bad("mlp_only_layers", "not a list of layer numbers");
      for (const auto& v : j["mlp_only_layers"]) {
        if (!v.is_number_unsigned()) throw bad("mlp_only_layers", fmt::format("{} is not a layer number", v.dump()));
        c.mlp_only_layers.push_back(v.get<unsigned>());
      }
    }
  } else if (deepseek) {
    // transformers' DeepseekV3Config defaults where a key is absent.
    c.experts = count("n_routed_experts", false, 256), c.experts_per_token = count("num_experts_per_tok", false, 8);
    c.expert_intermediate = count("moe_intermediate_size", true, 0);
    c.shared_intermediate = c.expert_intermediate * count("n_shared_experts", false, 1);
    c.groups = count("n_group", false, 8), c.topk_group = count("topk_group", false, 4);
    c.routed_scale = j.contains("routed_scaling_factor") ? j["routed_scaling_factor"].get<double>() : 2.5;
    c.norm_topk_prob = j.value("norm_topk_prob", true);
    c.first_dense = j.contains("first_k_dense_replace") ? j["first_k_dense_replace"].get<unsigned>() : 3;
    c.moe_layer_freq = count("moe_layer_freq", false, 1);
    if (j.value("scoring_func", std::string("sigmoid")) != "sigmoid")
      throw bad("scoring_func", fmt::format("'{}' (DeepSeek-V3's sigmoid is built)", j["scoring_func"].get<std::string>()));
    if (j.value("topk_method", std::string("noaux_tc")) != "noaux_tc")
      throw bad("topk_method", fmt::format("'{}' (DeepSeek-V3's noaux_tc is built)", j["topk_method"].get<std::string>()));
    if (!j.value("rope_interleave", true)) throw bad("rope_interleave", "false (interleaved pairs are built)");
    if (j.value("attention_bias", false)) throw bad("attention_bias", "true (not built)");
    if (c.experts % c.groups || c.topk_group > c.groups || c.groups > 64)
      throw bad("n_group", fmt::format("{} groups of {} experts, {} kept: not a routing the tile cores take", c.groups, c.experts,
                                       c.topk_group));
    c.mla = true;
    c.q_lora = j.contains("q_lora_rank") && !j["q_lora_rank"].is_null() ? count("q_lora_rank", false, 0) : 0;
    c.kv_lora = count("kv_lora_rank", true, 0), c.qk_nope = count("qk_nope_head_dim", true, 0);
    c.qk_rope = count("qk_rope_head_dim", true, 0), c.v_head = count("v_head_dim", true, 0);
    if (c.qk_rope % 2) throw bad("qk_rope_head_dim", fmt::format("{} is odd (rotary pairs)", c.qk_rope));
    c.head_dim = c.qk_nope + c.qk_rope;
  } else if (j.contains("num_local_experts") || j.contains("num_experts")) {
    throw bad(j.contains("num_local_experts") ? "num_local_experts" : "num_experts",
              fmt::format("experts in a '{}' model (mixtral and qwen2_moe have them)", c.model_type));
  }
  if (c.experts && (c.experts_per_token > c.experts || c.experts_per_token > 8))
    throw bad("num_experts_per_tok", fmt::format("{} of {} experts (the chip's top-k takes 1 to 8)", c.experts_per_token, c.experts));
  c.qkv_bias = qwen;
  // Qwen2's window applies only where use_sliding_window says so.
  if (!qwen || j.value("use_sliding_window", false)) c.sliding_window = count("sliding_window", false, 0);
  const std::string act = j.value("hidden_act", std::string("silu"));
  if (act != "silu") throw bad("hidden_act", fmt::format("'{}' (the MLPs are built with silu)", act));
  c.tie_embeddings = j.value("tie_word_embeddings", false);
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const auto& s = j["rope_scaling"];
    const std::string type = s.value("rope_type", s.value("type", std::string()));
    if (type != "llama3" && type != "yarn") throw bad("rope_scaling", fmt::format("type '{}' (llama3 and yarn are supported)", type));
    c.rope_factor = s.value("factor", 1.0), c.low_freq_factor = s.value("low_freq_factor", 1.0);
    c.high_freq_factor = s.value("high_freq_factor", 4.0);
    c.original_context = s.value("original_max_position_embeddings", type == "yarn" ? 4096u : 8192u);
    if (type == "yarn") {
      c.yarn = true;
      c.beta_fast = s.value("beta_fast", 32.0), c.beta_slow = s.value("beta_slow", 1.0);
      c.mscale = s.value("mscale", 1.0), c.mscale_all_dim = s.value("mscale_all_dim", 0.0);
      if (c.rope_factor <= 0 || c.beta_fast <= c.beta_slow) throw bad("rope_scaling", "yarn's factor or betas out of order");
    } else if (c.rope_factor <= 0 || c.high_freq_factor <= c.low_freq_factor) {
      throw bad("rope_scaling", "factors out of order");
    }
  }
  return c;
}

bool LlamaConfig::sparse(unsigned l) const {
  if (!experts) return false;
  if (groups) return l >= first_dense && l % moe_layer_freq == 0;  // DeepSeek-V3
  return (l + 1) % decoder_sparse_step == 0 && std::find(mlp_only_layers.begin(), mlp_only_layers.end(), l) == mlp_only_layers.end();
}

std::uint64_t LlamaConfig::parameters(unsigned n) const {
  const std::uint64_t D = hidden, H = heads, KV = kv_heads, hd = head_dim;
  const unsigned L = n ? std::min(n, layers) : layers;
  std::uint64_t p = std::uint64_t{vocab} * D * (tie_embeddings ? 1 : 2) + D;  // embedding, LM head, final norm
  for (unsigned l = 0; l < L; ++l) {
    p += 2 * D;  // the layer's norms
    if (mla) {
      const std::uint64_t qd = qk_nope + qk_rope;
      p += (q_lora ? D * q_lora + q_lora + q_lora * H * qd : D * H * qd) + D * (kv_lora + qk_rope) + kv_lora +
           std::uint64_t{kv_lora} * H * (qk_nope + v_head) + H * v_head * D;
    } else {
      p += D * H * hd + 2 * D * KV * hd + H * hd * D + (qkv_bias ? H * hd + 2 * KV * hd : 0);
    }
    if (sparse(l))
      p += D * experts + 3 * D * expert_intermediate * experts + 3 * D * shared_intermediate + (groups ? experts : 0) +
           (shared_intermediate && !groups ? D : 0);
    else
      p += 3 * D * intermediate;
  }
  return p;
}

std::uint64_t LlamaConfig::routed_parameters(unsigned n) const {
  std::uint64_t p = 0;
  for (unsigned l = 0; l < (n ? std::min(n, layers) : layers); ++l)
    if (sparse(l)) p += 3 * std::uint64_t{hidden} * expert_intermediate * experts;
  return p;
}

namespace {
double yarn_get_mscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }
}  // namespace

double LlamaConfig::attention_scale() const {
  double s = 1.0 / std::sqrt(double(mla ? qk_nope + qk_rope : head_dim));
  if (yarn && mscale_all_dim > 0) s *= yarn_get_mscale(rope_factor, mscale_all_dim) * yarn_get_mscale(rope_factor, mscale_all_dim);
  return s;
}

double LlamaConfig::rope_mscale() const {
  return yarn ? yarn_get_mscale(rope_factor, mscale) / yarn_get_mscale(rope_factor, mscale_all_dim) : 1.0;
}

std::string LlamaConfig::router(unsigned l) const {
  return fmt::format("model.layers.{}.{}.gate.weight", l, model_type == "mixtral" ? "block_sparse_moe" : "mlp");
}

std::string LlamaConfig::expert(unsigned l, unsigned e, const char* which) const {
  const std::string w = which;
  if (model_type == "mixtral")
    return fmt::format("model.layers.{}.block_sparse_moe.experts.{}.{}.weight", l, e, w == "gate" ? "w1" : w == "up" ? "w3" : "w2");
  return fmt::format("model.layers.{}.mlp.experts.{}.{}_proj.weight", l, e, w);
}

LlamaConfig LlamaConfig::load(const std::string& file) {
  std::ifstream f(file);
  if (!f) throw FormatError(fmt::format("{}: cannot be read", file));
  nlohmann::json j;
  try {
    f >> j;
  } catch (const std::exception& e) {
    throw FormatError(fmt::format("{}: not JSON ({})", file, e.what()));
  }
  return parse(j, file);
}

std::vector<double> LlamaConfig::inv_freq() const {
  std::vector<double> f;
  const unsigned dim = rope_dim();
  if (yarn) {  // DeepseekV3YarnRotaryEmbedding: extrapolated and interpolated frequencies blended over a ramp
    const double pi = std::acos(-1.0);
    auto correction = [&](double rotations) {
      return dim * std::log(original_context / (rotations * 2 * pi)) / (2 * std::log(rope_theta));
    };
    const double low = std::max(std::floor(correction(beta_fast)), 0.0);
    double high = std::min(std::ceil(correction(beta_slow)), double(dim - 1));
    if (high == low) high += 0.001;
    for (unsigned i = 0; i < dim / 2; ++i) {
      const double extra = 1.0 / std::pow(rope_theta, 2.0 * i / dim), inter = extra / rope_factor;
      const double mask = 1.0 - std::clamp((i - low) / (high - low), 0.0, 1.0);
      f.push_back(inter * (1 - mask) + extra * mask);
    }
    return f;
  }
  for (unsigned i = 0; i < dim / 2; ++i) {
    double v = 1.0 / std::pow(rope_theta, 2.0 * i / dim);
    if (rope_factor != 1) {  // llama3: long wavelengths slowed by the factor, short ones kept, a blend between
      const double pi = std::acos(-1.0), wavelen = 2 * pi / v;
      const double low = original_context / low_freq_factor, high = original_context / high_freq_factor;
      if (wavelen > low) {
        v /= rope_factor;
      } else if (wavelen >= high) {
        const double smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
        v = (1 - smooth) * v / rope_factor + smooth * v;
      }
    }
    f.push_back(v);
  }
  return f;
}

std::vector<float> block_scales(const SafeTensors& st, const TensorInfo& t) {
  const TensorInfo& s = st.info(t.name + "_scale_inv");
  const std::uint64_t rows = t.shape.empty() ? 1 : t.shape[0], cols = rows ? t.elements() / rows : 0;
  const std::vector<std::uint64_t> blocks = {(rows + 127) / 128, (cols + 127) / 128};
  if (t.shape.size() != 2 || s.shape != blocks)
    throw FormatError(fmt::format("{}: tensor '{}' [{}]: the weight [{}] needs a scale per 128 x 128 block, [{}]", s.file, s.name,
                                  fmt::join(s.shape, ", "), fmt::join(t.shape, ", "), fmt::join(blocks, ", ")));
  return st.read(s.name);
}

void scale_fp8(const SafeTensors& st, const TensorInfo& t, std::vector<float>& v) {
  // DeepSeek-V3's checkpoints: <name>_scale_inv holds a factor per 128 x
  // 128 block of the [out, in] weight (the name is DeepSeek's: it is what
  // the codes are multiplied by). Others (compressed-tensors' FP8): a
  // <name>_scale of one factor, or of one per output row. Products in FP32,
  // as DeepSeek's weight_dequant computes them.
  const std::uint64_t rows = t.shape.empty() ? 1 : t.shape[0], cols = rows ? t.elements() / rows : 0;
  if (st.has(t.name + "_scale_inv")) {
    const std::vector<float> f = block_scales(st, t);
    const std::uint64_t bcols = (cols + 127) / 128;
    for (std::uint64_t r = 0; r < rows; ++r)
      for (std::uint64_t c = 0; c < cols; ++c) v[r * cols + c] *= f[(r / 128) * bcols + c / 128];
  } else if (st.has(t.name + "_scale")) {
    const TensorInfo& s = st.info(t.name + "_scale");
    const std::vector<float> f = st.read(s.name);
    if (f.size() != 1 && f.size() != rows)
      throw FormatError(fmt::format("{}: tensor '{}' [{}]: the weight [{}] needs one scale or one per row ({})", s.file, s.name,
                                    fmt::join(s.shape, ", "), fmt::join(t.shape, ", "), rows));
    for (std::uint64_t i = 0; i < v.size(); ++i) v[i] *= f[f.size() == 1 ? 0 : i / cols];
  }
}

namespace {

const TensorInfo& shaped(const SafeTensors& st, const std::string& name, const std::vector<std::uint64_t>& shape) {
  const TensorInfo& t = st.info(name);
  if (t.shape != shape)
    throw FormatError(fmt::format("{}: tensor '{}' is [{}], the config needs [{}]", t.file, name, fmt::join(t.shape, ", "),
                                  fmt::join(shape, ", ")));
  return t;
}

}  // namespace

WeightSource weights_from(const SafeTensors& st) {
  return [&st](const std::string& name, const std::vector<std::uint64_t>& shape) {
    const TensorInfo& t = shaped(st, name, shape);
    std::vector<float> v = st.read(name);
    if (t.dtype == "F8_E4M3") scale_fp8(st, t, v);
    return v;
  };
}

Fp8Source fp8_blocks_from(const SafeTensors& st) {
  return [&st](const std::string& name, const std::vector<std::uint64_t>& shape, std::vector<float>& codes,
               std::vector<float>& scales) {
    if (!st.has(name) || !st.has(name + "_scale_inv") || st.info(name).dtype != "F8_E4M3") return false;
    const TensorInfo& t = shaped(st, name, shape);
    codes = st.read(name);
    scales = block_scales(st, t);
    return true;
  };
}

WeightSource shape_only() {
  return [](const std::string&, const std::vector<std::uint64_t>&) { return std::vector<float>{}; };
}

WeightSource seeded_weights(std::uint32_t seed) {
  return [seed](const std::string& name, const std::vector<std::uint64_t>& shape) {
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    std::uint32_t h = seed;
    for (char ch : name) h = h * 31 + static_cast<unsigned char>(ch);
    const bool norm = name.find("norm") != std::string::npos;
    const bool embed = name.find("embed_tokens") != std::string::npos;
    const float scale = norm ? 0.4f : embed ? 2.0f : std::sqrt(12.0f / static_cast<float>(shape.back()));
    std::vector<float> v = compiler::seeded_values(n, h, scale);
    if (norm)
      for (float& x : v) x += 1.0f;
    return v;
  };
}

namespace {

std::string layer(unsigned l, const char* what) { return fmt::format("model.layers.{}.{}", l, what); }

// A Linear's weight [out, in] as the matmul's B [in, out], rounded to BF16
// (none: shape_only()'s).
std::vector<float> transposed(const std::vector<float>& w, unsigned out, unsigned in) {
  std::vector<float> t(w.size());
  if (w.empty()) return t;
  for (unsigned o = 0; o < out; ++o)
    for (unsigned i = 0; i < in; ++i) t[std::size_t{i} * out + o] = w[std::size_t{o} * in + i];
  return t;
}

float bf16(float x) { return static_cast<float>(num::quantize(num::Format::BF16, x)); }

}  // namespace

Graph llama_prefill(const LlamaConfig& c, const WeightSource& w, const std::vector<std::uint32_t>& tokens, unsigned layers,
                    const Fp8Source& fp8) {
  const unsigned T = static_cast<unsigned>(tokens.size());
  if (!T) throw std::invalid_argument("llama: an empty prompt");
  for (std::uint32_t t : tokens)
    if (t >= c.vocab) throw std::invalid_argument(fmt::format("llama: token {} of a vocabulary of {}", t, c.vocab));
  return llama_step(c, w, T, T, layers, fp8);
}

std::string shard_refusal(const LlamaConfig& c, unsigned chips, unsigned layers) {
  const unsigned N = chips, L = layers ? std::min(layers, c.layers) : c.layers;
  if (N <= 1) return "";
  if (c.heads % N) return fmt::format("{} heads do not divide over the chips", c.heads);
  if (c.kv_heads % N && N % c.kv_heads)
    return fmt::format("{} KV heads neither divide over the chips nor the chips over them", c.kv_heads);
  for (unsigned l = 0; l < L; ++l) {
    const unsigned F = !c.sparse(l) ? c.intermediate : c.expert_intermediate;
    if (F % N) return fmt::format("layer {}: an {}intermediate size of {} does not divide over the chips", l, c.sparse(l) ? "expert's " : "", F);
    if (c.sparse(l) && c.shared_intermediate % N)
      return fmt::format("layer {}: a shared expert's intermediate size of {} does not divide over the chips", l, c.shared_intermediate);
  }
  if (c.vocab % N) return fmt::format("a vocabulary of {} does not divide over the chips", c.vocab);
  return "";
}

std::string expert_refusal(const LlamaConfig& c, unsigned chips, unsigned layers) {
  const unsigned L = layers ? std::min(layers, c.layers) : c.layers;
  bool sparse = false;
  for (unsigned l = 0; l < L; ++l) sparse |= c.sparse(l);
  if (!sparse) return "no MoE layer among the layers run";
  if (chips < 2) return "a system of at least two chips";
  if (c.experts % chips) return fmt::format("{} experts do not divide over the chips", c.experts);
  return "";
}

bool expert_head_by_vocab(const LlamaConfig& c, unsigned chips) { return c.vocab % chips == 0; }

Graph llama_step(const LlamaConfig& c, const WeightSource& w, unsigned rows, unsigned context, unsigned layers,
                 const Fp8Source& fp8, unsigned sequences, bool seeded_routes, const Shard& shard) {
  const unsigned T = rows, D = c.hidden, hd = c.head_dim, H = c.heads, KV = c.kv_heads;
  const unsigned L = layers ? std::min(layers, c.layers) : c.layers;
  if (!T) throw std::invalid_argument("llama: a step of no tokens");
  // Megatron's tensor parallel shard: this chip's query heads [h0, h0 +
  // Hs), its KV heads [k0, k0 + KVs), its intermediate columns and its
  // vocabulary columns.
  if (!shard.chips || shard.chip >= shard.chips)
    throw std::invalid_argument(fmt::format("llama: shard {} of {} chips", shard.chip, shard.chips));
  // Expert parallel (shard.experts): the whole model but the experts on
  // this chip's rows, no tensor-parallel shard.
  const unsigned N = shard.experts ? 1 : shard.chips, me = shard.experts ? 0 : shard.chip;
  const unsigned EP = shard.experts ? shard.chips : 1;
  auto refuse = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("llama: tensor parallel over {} chips with all-reduce: {}", N, why));
  };
  if (const std::string why = shard_refusal(c, N, layers); !why.empty()) refuse(why);
  if (shard.experts)
    if (const std::string why = expert_refusal(c, EP, layers); !why.empty())
      throw std::invalid_argument(fmt::format("llama: expert parallel over {} chips: {}", EP, why));
  const unsigned Hs = H / N, h0 = me * Hs, KVs = KV >= N ? KV / N : 1, k0 = KV >= N ? me * KVs : me / (N / KV);
  if (T > context && sequences <= 1)
    throw std::invalid_argument(fmt::format("llama: a step of {} tokens in a context of {}", T, context));
  if (!sequences || sequences > 256) throw std::invalid_argument(fmt::format("llama: {} sequences (1 to 256)", sequences));
  Graph g;
  // An FP8 Linear [out, in] as the matmul's B = W^T: its codes transposed,
  // and its blocks' scales with them ([in / 128, ceil(out / 128)]).
  auto fp8_b = [&](const std::string& name, unsigned out, unsigned in, std::vector<float>& b, std::vector<float>& bs) {
    std::vector<float> codes, scales;
    if (!fp8 || in % compiler::kScaleBlock || !fp8(name, {out, in}, codes, scales)) return false;
    const unsigned ob = (out + compiler::kScaleBlock - 1) / compiler::kScaleBlock, ib = in / compiler::kScaleBlock;
    bs.assign(scales.size(), 0.0f);
    for (unsigned o = 0; o < ob; ++o)
      for (unsigned i = 0; i < ib; ++i) bs[std::size_t{i} * ob + o] = scales[std::size_t{o} * ib + i];
    b = transposed(codes, out, in);
    return true;
  };
  auto linear = [&](int x, const std::string& name, unsigned out, unsigned in) {
    std::vector<float> b, bs;
    if (fp8_b(name, out, in, b, bs)) {
      const unsigned ib = in / compiler::kScaleBlock, ob = static_cast<unsigned>(bs.size()) / ib;
      const int bw = g.weight(name, {in, out}, std::move(b), DType::e4m3);
      return g.matmul_scaled(x, bw, g.weight(name + "_scale_inv", {ib, ob}, std::move(bs)));
    }
    return g.matmul(x, g.weight(name, {in, out}, transposed(w(name, {out, in}), out, in), DType::bf16), DType::bf16);
  };
  // A shard's part of a BF16 Linear [out, in]: its output rows [r0, r1)
  // (the matmul's columns), or its input columns [c0, c1) (the matmul's
  // rows, a partial sum over them).
  // (A matrix [out, in]'s rows [r0, r1), or its columns [c0, c1); none
  // of shape_only()'s.)
  auto row_range = [](const std::vector<float>& full, unsigned in, unsigned r0, unsigned r1) {
    if (full.empty()) return std::vector<float>{};
    return std::vector<float>(full.begin() + std::ptrdiff_t(std::size_t{r0} * in), full.begin() + std::ptrdiff_t(std::size_t{r1} * in));
  };
  auto col_range = [](const std::vector<float>& full, unsigned out, unsigned in, unsigned c0, unsigned c1) {
    std::vector<float> part;
    if (!full.empty())
      for (unsigned o = 0; o < out; ++o)
        part.insert(part.end(), full.begin() + std::ptrdiff_t(std::size_t{o} * in + c0), full.begin() + std::ptrdiff_t(std::size_t{o} * in + c1));
    return part;
  };
  // A shard's Linears are BF16: one a checkpoint stores in FP8 blocks is refused.
  auto bf16_only = [&](const std::string& name, unsigned out, unsigned in) {
    std::vector<float> codes, scales;
    if (N > 1 && fp8 && fp8(name, {out, in}, codes, scales))
      refuse(fmt::format("{} is stored in FP8 blocks (a shard takes BF16 Linears)", name));
  };
  auto linear_rows = [&](int x, const std::string& name, unsigned out, unsigned in, unsigned r0, unsigned r1) {
    if (N == 1) return linear(x, name, out, in);
    bf16_only(name, out, in);
    return g.matmul(x, g.weight(name, {in, r1 - r0}, transposed(row_range(w(name, {out, in}), in, r0, r1), r1 - r0, in), DType::bf16), DType::bf16);
  };
  auto linear_cols = [&](int x, const std::string& name, unsigned out, unsigned in, unsigned c0, unsigned c1) {
    if (N == 1) return linear(x, name, out, in);
    bf16_only(name, out, in);
    return g.matmul(x, g.weight(name, {c1 - c0, out}, transposed(col_range(w(name, {out, in}), out, in, c0, c1), out, c1 - c0), DType::bf16),
                    DType::bf16);
  };
  // The chips' partial sums added on every chip (the engines' ring).
  auto summed = [&](int partial, const std::string& name) { return N == 1 ? partial : g.all_reduce(partial, N, false, false, name); };
  auto norm = [&](const std::string& name) { return g.weight(name, {D}, w(name, {D})); };
  // The embedding: the prompt's tokens are the graph's input "tokens"
  // (llama_inputs), their rows gathered out of the table on the chip, so
  // the compiled graph serves any prompt of this length.
  const std::vector<float> table = w("model.embed_tokens.weight", {c.vocab, D});
  const bool timing = table.empty();  // shape_only()'s weights: no tables to compute either
  const int embed = g.weight("model.embed_tokens.weight", {c.vocab, D}, table);
  int h = g.gather_rows(embed, g.input("tokens", {T}), "embed");
  // The step's positions (llama_inputs): the rotary tables' rows, and where
  // the attention appends to its KV caches.
  const int positions = g.input("positions", {T});
  // Several sequences (a batch), or a context past a page: each row's
  // sequence, and each sequence's pages of the caches (kv_pages:
  // llama_batch_inputs).
  compiler::Paging paging;
  const KvPages kp = kv_pages(context);
  if (kp.paged(sequences)) {
    paging.sequences = g.input("sequences", {T});
    paging.table = g.input("pages", {sequences, kp.pages});
    paging.page = kp.page;
  }
  const unsigned capacity = kp.page * kp.pages * sequences;
  // Rotary tables of the context's positions, the step's rows gathered on
  // the chip: x.cos + rotate_half(x).sin, rotate_half's sign folded into
  // the sin table; n heads of `width` columns, columns [offset, offset +
  // rd) of each rotated (the others kept: cos 1, sin 0); yarn's mscale on
  // both tables.
  // The tables, and the step's rows of them, are the same in every layer:
  // one pair of each per shape of rotation.
  const std::vector<double> f = c.inv_freq();
  const double ms = c.rope_mscale();
  std::map<std::array<unsigned, 4>, std::pair<int, int>> rows_of;  // (n, width, offset, rd): the step's cos and sin rows
  auto rope = [&](int x, unsigned n, const std::string& name, unsigned width, unsigned offset, unsigned rd) {
    const std::uint64_t W = std::uint64_t{n} * width;
    auto [tables, fresh] = rows_of.try_emplace({n, width, offset, rd});
    if (fresh) {
      std::vector<float> cs, sn;
      if (!timing) {
        cs.assign(context * W, 1.0f), sn.assign(cs.size(), 0.0f);
        for (unsigned t = 0; t < context; ++t)
          for (unsigned hh = 0; hh < n; ++hh)
            for (unsigned j = 0; j < rd; ++j) {
              const double a = t * f[j % (rd / 2)];
              const std::size_t k = t * W + std::size_t{hh} * width + offset + j;
              cs[k] = static_cast<float>(std::cos(a) * ms);
              sn[k] = static_cast<float>((j < rd / 2 ? -std::sin(a) : std::sin(a)) * ms);
            }
      }
      const std::string table = fmt::format("rope.{}x{}", n, width) + (offset || rd != width ? fmt::format(".{}+{}", offset, rd) : "");
      tables->second.first = g.gather_rows(g.weight(table + ".cos", {context, static_cast<unsigned>(W)}, std::move(cs)), positions,
                                           table + ".cos_rows");
      tables->second.second = g.gather_rows(g.weight(table + ".sin", {context, static_cast<unsigned>(W)}, std::move(sn)), positions,
                                            table + ".sin_rows");
    }
    std::vector<Move> swap;
    for (unsigned hh = 0; hh < n; ++hh) {
      const std::uint64_t base = std::uint64_t{hh} * width + offset;
      if (offset) swap.push_back({0, base - offset, base - offset, offset, T, W, W});
      swap.push_back({0, base + rd / 2, base, rd / 2, T, W, W});
      swap.push_back({0, base, base + rd / 2, rd / 2, T, W, W});
      if (offset + rd < width) swap.push_back({0, base + rd, base + rd, width - offset - rd, T, W, W});
    }
    const int half = g.move({x}, {T, static_cast<unsigned>(W)}, swap, name + ".rotate_half");
    return g.binary(OpKind::add, g.binary(OpKind::mul, x, tables->second.first), g.binary(OpKind::mul, half, tables->second.second), name);
  };
  if (c.sliding_window && context > c.sliding_window)
    throw std::invalid_argument(fmt::format("llama: a context of {} tokens is longer than the sliding window of {} (not built)",
                                            context, c.sliding_window));
  // Causal attention of H heads over the layer's KV caches (KVh heads of
  // qd keys and vd values; the step's rows appended at their positions).
  auto attention = [&](unsigned l, int q, int k, int v, unsigned KVh, unsigned qd, unsigned vd, unsigned heads) {
    const int kc = g.kv_cache(fmt::format("layer{}.k_cache", l), KVh, capacity, qd);
    const int vc = g.kv_cache(fmt::format("layer{}.v_cache", l), KVh, capacity, vd);
    return g.attention(q, k, v, kc, vc, positions, heads, static_cast<float>(c.attention_scale()), fmt::format("layer{}.attention", l), false,
                       paging);
  };
  for (unsigned l = 0; l < L; ++l) {
    const int x = g.rmsnorm(h, norm(layer(l, "input_layernorm.weight")), static_cast<float>(c.rms_eps));
    if (c.mla) {  // DeepSeek-V3's multi-head latent attention
      const unsigned nope = c.qk_nope, rd = c.qk_rope, qd = nope + rd, vd = c.v_head, r = c.kv_lora;
      // x times a Linear whose rotary rows come in interleaved pairs: those
      // rows de-interleaved (evens, then odds), so rotate_half pairs what
      // the model pairs (and every dot product of Q and K is unchanged).
      // Stored in FP8 blocks (and `in` whole 128s), it runs block-scaled
      // where every row moved stays in its 128-row block (DeepSeek-V3's:
      // the rotary rows of each head lie inside one block), else in BF16.
      // A shard's: its heads' rows [r0, r1) (BF16).
      auto deinterleaved = [&](int xin, const std::string& name, unsigned out, unsigned in, unsigned width, unsigned offset,
                               unsigned r0 = 0, unsigned r1 = 0) {
        if (!r1) r1 = out;
        const bool whole = r0 == 0 && r1 == out;
        auto order = [&](std::vector<float>& wt, unsigned cols) {
          if (wt.empty()) return;  // shape only
          const std::vector<float> orig = wt;
          for (unsigned o0 = 0; o0 < out; o0 += width)
            for (unsigned j = 0; j < rd; ++j) {
              const unsigned from = o0 + offset + (j < rd / 2 ? 2 * j : 2 * (j - rd / 2) + 1);
              std::copy_n(orig.begin() + std::size_t{from} * cols, cols, wt.begin() + std::size_t{o0 + offset + j} * cols);
            }
        };
        bool in_blocks = true;
        for (unsigned o0 = 0; o0 < out && in_blocks; o0 += width)
          in_blocks = (o0 + offset) / compiler::kScaleBlock == (o0 + offset + rd - 1) / compiler::kScaleBlock;
        std::vector<float> codes, scales;
        if (fp8 && whole && in_blocks && in % compiler::kScaleBlock == 0 && fp8(name, {out, in}, codes, scales)) {
          order(codes, in);  // the blocks' scales stay where they are
          const unsigned ob = (out + compiler::kScaleBlock - 1) / compiler::kScaleBlock, ib = in / compiler::kScaleBlock;
          std::vector<float> bs(scales.size());
          for (unsigned o = 0; o < ob; ++o)
            for (unsigned i = 0; i < ib; ++i) bs[std::size_t{i} * ob + o] = scales[std::size_t{o} * ib + i];
          const int b = g.weight(name, {in, out}, transposed(codes, out, in), DType::e4m3);
          return g.matmul_scaled(xin, b, g.weight(name + "_scale_inv", {ib, ob}, std::move(bs)));
        }
        if (!whole) bf16_only(name, out, in);
        std::vector<float> wt = w(name, {out, in});
        order(wt, in);
        if (r0 || r1 != out) wt = row_range(wt, in, r0, r1);
        return g.matmul(xin, g.weight(name, {in, r1 - r0}, transposed(wt, r1 - r0, in), DType::bf16), DType::bf16);
      };
      int qin = x;
      unsigned qk = D;
      std::string qname = layer(l, "self_attn.q_proj.weight");
      if (c.q_lora) {
        qin = g.rmsnorm(linear(x, layer(l, "self_attn.q_a_proj.weight"), c.q_lora, D),
                        g.weight(layer(l, "self_attn.q_a_layernorm.weight"), {c.q_lora}, w(layer(l, "self_attn.q_a_layernorm.weight"), {c.q_lora})),
                        static_cast<float>(c.rms_eps));
        qk = c.q_lora, qname = layer(l, "self_attn.q_b_proj.weight");
      }
      // A shard's query heads [h0, h0 + Hs), absorbing their rows of
      // kv_b_proj over the latent (computed and cached on every chip), its
      // columns of o_proj a partial sum.
      const int q = rope(deinterleaved(qin, qname, H * qd, qk, qd, nope, h0 * qd, (h0 + Hs) * qd), Hs, fmt::format("layer{}.q", l), qd,
                         nope, rd);
      const int kva = deinterleaved(x, layer(l, "self_attn.kv_a_proj_with_mqa.weight"), r + rd, D, r + rd, r);
      const int ckv = g.move({kva}, {T, r}, {{0, 0, 0, r, T, r + rd, r}}, fmt::format("layer{}.latent", l));
      const int kpe = rope(g.move({kva}, {T, rd}, {{0, r, 0, rd, T, r + rd, rd}}), 1, fmt::format("layer{}.k_pe", l), rd, 0, rd);
      const std::string kvn = layer(l, "self_attn.kv_a_layernorm.weight");
      const int latent = g.rmsnorm(ckv, g.weight(kvn, {r}, w(kvn, {r})), static_cast<float>(c.rms_eps));
      const std::string kvb = layer(l, "self_attn.kv_b_proj.weight");
      const unsigned kvb_out = H * (nope + vd);
      // Absorbed, as DeepSeek-V3 decodes: kv_b_proj's key rows folded into
      // the queries and its value rows applied after the attention, so
      // every head attends to one shared KV head whose cache holds each
      // position's normed latent and rotary key ([latent ; k_pe], r + rd
      // values) and the latent again as its value (r): the low-rank
      // compressed cache, 2 r + rd values a position for all the heads,
      // where keys and values decompressed took H (qd + vd). Head h's
      // rows of kv_b_proj [H (nope + vd), r]: W_UK its first nope
      // (q_nope . k_nope = (q_nope W_UK) . latent), W_UV the next vd (its
      // output (softmax . latent) W_UV^T).
      const unsigned aw = r + rd, B = compiler::kScaleBlock;
      std::vector<float> kvb_w, kvb_codes, kvb_scales;
      const bool kvb_fp8 = fp8 && r % B == 0 && nope % B == 0 && vd % B == 0 && fp8(kvb, {kvb_out, r}, kvb_codes, kvb_scales);
      if (!kvb_fp8) bf16_only(kvb, kvb_out, r), kvb_w = w(kvb, {kvb_out, r});
      // xin (the shard's heads' rows one head after another, [Hs, T,
      // n] or [Hs, T, r]) through each head's rows [r0, r0 + n) of
      // kv_b_proj (r0 = hg (nope + vd) + `first`) as B [n, r] (`keys`) or
      // its transpose [r, n]: one batched matmul, a matrix a head,
      // block-scaled where the checkpoint stores FP8 blocks (a head's
      // rows lie in whole blocks), else BF16.
      auto kvb_heads = [&](int xin, unsigned first, unsigned n, bool keys, const std::string& name) {
        const std::vector<unsigned> shape = keys ? std::vector<unsigned>{Hs, n, r} : std::vector<unsigned>{Hs, r, n};
        auto stacked = [&](const std::vector<float>& full, unsigned cols, unsigned unit, bool transpose) {
          std::vector<float> all;  // empty where the weight is shape only
          if (full.empty()) return all;
          for (unsigned hh = 0; hh < Hs; ++hh) {
            const unsigned r0 = ((h0 + hh) * (nope + vd) + first) / unit, rn = n / unit;
            std::vector<float> part = row_range(full, cols, r0, r0 + rn);
            if (transpose) part = transposed(part, rn, cols);
            all.insert(all.end(), part.begin(), part.end());
          }
          return all;
        };
        if (kvb_fp8) {
          const unsigned ib = r / B, nb = n / B;
          const int b = g.weight(name, shape, stacked(kvb_codes, r, 1, !keys), DType::e4m3);
          return g.matmul_scaled(xin, b, g.weight(name + "_scale_inv", keys ? std::vector<unsigned>{Hs, nb, ib} : std::vector<unsigned>{Hs, ib, nb},
                                                  stacked(kvb_scales, ib, B, !keys)));
        }
        return g.matmul(xin, g.weight(name, shape, stacked(kvb_w, r, 1, !keys), DType::bf16), DType::bf16);
      };
      const std::uint64_t qw = std::uint64_t{Hs} * qd, TT = T;
      // The queries' nope columns a head after another, through W_UK; the
      // absorbed queries [q W_UK ; q_pe] a head.
      std::vector<Move> qn, qm, ou, om;
      for (unsigned hh = 0; hh < Hs; ++hh) {
        qn.push_back({0, std::uint64_t{hh} * qd, hh * TT * nope, nope, T, qw, nope});
        qm.push_back({1, hh * TT * r, std::uint64_t{hh} * aw, r, T, r, std::uint64_t{Hs} * aw});
        qm.push_back({0, std::uint64_t{hh} * qd + nope, std::uint64_t{hh} * aw + r, rd, T, qw, std::uint64_t{Hs} * aw});
        ou.push_back({0, std::uint64_t{hh} * r, hh * TT * r, r, T, std::uint64_t{Hs} * r, r});
        om.push_back({0, hh * TT * vd, std::uint64_t{hh} * vd, vd, T, vd, std::uint64_t{Hs} * vd});
      }
      const std::string heads = fmt::format("{}-{}", h0, h0 + Hs - 1);
      const int q_nope = g.move({q}, {Hs, T, nope}, qn, fmt::format("layer{}.q_nope", l));
      const int q_lat = kvb_heads(q_nope, 0, nope, true, fmt::format("{}.w_uk{}", kvb, heads));
      const int qa = g.move({q, q_lat}, {T, Hs * aw}, qm, fmt::format("layer{}.q_absorbed", l));
      const int keys = g.move({latent, kpe}, {T, aw}, {{0, 0, 0, r, T, r, aw}, {1, 0, r, rd, T, rd, aw}}, fmt::format("layer{}.keys", l));
      const int ol = attention(l, qa, keys, latent, 1, aw, r, Hs);
      const int o_lat = g.move({ol}, {Hs, T, r}, ou, fmt::format("layer{}.o_latent", l));
      const int oh = kvb_heads(o_lat, nope, vd, false, fmt::format("{}.w_uv{}", kvb, heads));
      const int o = g.move({oh}, {T, Hs * vd}, om, fmt::format("layer{}.heads", l));
      const int wo = linear_cols(o, layer(l, "self_attn.o_proj.weight"), D, H * vd, h0 * vd, (h0 + Hs) * vd);
      h = g.binary(OpKind::add, summed(wo, fmt::format("layer{}.attention_sum", l)), h);
    } else {
      // (A shard's heads: output rows [first hd, (first + n) hd).)
      auto projection = [&](const char* name, unsigned out, unsigned first, unsigned n) {  // with Qwen2's bias
        const int y = linear_rows(x, layer(l, fmt::format("self_attn.{}.weight", name).c_str()), out, D, first * hd, (first + n) * hd);
        if (!c.qkv_bias) return y;
        const std::string bias = layer(l, fmt::format("self_attn.{}.bias", name).c_str());
        std::vector<float> b = w(bias, {out});
        if (!b.empty()) b = std::vector<float>(b.begin() + std::ptrdiff_t{first} * hd, b.begin() + std::ptrdiff_t{first + n} * hd);
        return g.binary(OpKind::add, y, g.weight(bias, {n * hd}, std::move(b)));
      };
      const int q = rope(projection("q_proj", H * hd, h0, Hs), Hs, fmt::format("layer{}.q", l), hd, 0, hd);
      const int k = rope(projection("k_proj", KV * hd, k0, KVs), KVs, fmt::format("layer{}.k", l), hd, 0, hd);
      const int v = projection("v_proj", KV * hd, k0, KVs);
      const int o = attention(l, q, k, v, KVs, hd, hd, Hs);
      const int wo = linear_cols(o, layer(l, "self_attn.o_proj.weight"), D, H * hd, h0 * hd, (h0 + Hs) * hd);
      h = g.binary(OpKind::add, summed(wo, fmt::format("layer{}.attention_sum", l)), h);
    }
    const int x2 = g.rmsnorm(h, norm(layer(l, "post_attention_layernorm.weight")), static_cast<float>(c.rms_eps));
    // A SwiGLU MLP; a shard's: its F / N intermediate columns, a partial sum.
    auto mlp = [&](const std::string& prefix, unsigned F) {
      const unsigned f0 = me * (F / N), f1 = f0 + F / N;
      const int a = g.binary(OpKind::swiglu, linear_rows(x2, prefix + "gate_proj.weight", F, D, f0, f1),
                             linear_rows(x2, prefix + "up_proj.weight", F, D, f0, f1));
      return linear_cols(a, prefix + "down_proj.weight", D, F, f0, f1);
    };
    const std::string mlp_sum = fmt::format("layer{}.mlp_sum", l);
    if (c.sparse(l)) {  // Mixtral's or Qwen2-MoE's sparse MoE block
      const unsigned E = c.experts, F = c.expert_intermediate, K = c.experts_per_token;
      int logits = linear(x2, c.router(l), E, D);
      if (seeded_routes) {  // the router's logits times 0 (finite either way) plus the step's seeded scores
        const std::string z = fmt::format("layer{}.route_seed_zero", l);
        logits = g.binary(OpKind::add, g.binary(OpKind::mul, logits, g.weight(z, {E}, std::vector<float>(E, 0.0f))),
                          g.input(fmt::format("layer{}.route_seed", l), {T, E}));
      }
      // Mixtral's softmax, top k and renormalising is the softmax of the k
      // logits; Qwen2-MoE's top k of the softmax, unnormalised, is that softmax's k values.
      const std::string rn = fmt::format("layer{}.route", l);
      int route;
      if (c.groups) {  // DeepSeek-V3's noaux_tc: sigmoid scores, chosen with the correction bias, group-limited, on the cores
        const int scores = g.unary(OpKind::sigmoid, logits);
        const std::string bias = layer(l, "mlp.gate.e_score_correction_bias");
        // Seeded routes choose by the scores alone: the bias is a weight (none in the timing-only mode).
        const int choice = seeded_routes ? scores : g.binary(OpKind::add, scores, g.weight(bias, {E}, w(bias, {E})));
        route = g.route_grouped(choice, scores, K, c.groups, c.topk_group, static_cast<float>(c.routed_scale), c.norm_topk_prob, rn);
      } else {
        route = c.norm_topk_prob ? g.route(logits, K, true, rn) : g.route(g.softmax(logits), K, false, rn);
      }
      g.output(route);
      const std::string p = fmt::format("layer{}.experts", l);
      const int xb = g.cast(x2, DType::bf16, p + ".x");
      // FP8 experts (every one's three Linears E4M3 with their blocks, D
      // and F in 128s): block-scaled on the chip, as stored; else BF16.
      // Expert parallel: this chip's experts only (e mod EP its number),
      // over the rows every chip sends it (Graph::dispatch).
      std::vector<float> f8[3], s8[3];  // w1, w3, w2 codes and scales, expert after expert
      bool scaled = fp8 && D % compiler::kScaleBlock == 0 && F % compiler::kScaleBlock == 0;
      const unsigned e0 = shard.experts ? shard.chip : 0, El = E / EP;  // the experts e0, e0 + EP, ...
      auto experts = [&](std::array<int, 3> ws, std::vector<int> scales) {
        if (shard.experts) return g.moe_dispatched(xb, route, ws, std::move(scales), EP, shard.chip, shard.capacity, p);
        return scales.empty() ? g.moe(xb, route, ws[0], ws[1], ws[2], p) : g.moe_scaled(xb, route, ws[0], scales[0], ws[1], scales[1], ws[2], scales[2], p);
      };
      for (unsigned e = e0; e < E && scaled; e += EP) {
        const std::pair<const char*, bool> parts[3] = {{"gate", false}, {"up", false}, {"down", true}};
        for (int k = 0; k < 3 && scaled; ++k) {
          std::vector<float> b, bs;
          const bool down = parts[k].second;
          scaled = fp8_b(c.expert(l, e, parts[k].first), down ? D : F, down ? F : D, b, bs);
          f8[k].insert(f8[k].end(), b.begin(), b.end()), s8[k].insert(s8[k].end(), bs.begin(), bs.end());
        }
      }
      int y;
      if (scaled) {
        constexpr unsigned B = compiler::kScaleBlock;
        const int w1 = g.weight(p + ".w1", {El, D, F}, std::move(f8[0]), DType::e4m3), s1 = g.weight(p + ".w1_scale_inv", {El, D / B, F / B}, std::move(s8[0]));
        const int w3 = g.weight(p + ".w3", {El, D, F}, std::move(f8[1]), DType::e4m3), s3 = g.weight(p + ".w3_scale_inv", {El, D / B, F / B}, std::move(s8[1]));
        const int w2 = g.weight(p + ".w2", {El, F, D}, std::move(f8[2]), DType::e4m3), s2 = g.weight(p + ".w2_scale_inv", {El, F / B, D / B}, std::move(s8[2]));
        y = experts({w1, w3, w2}, {s1, s3, s2});
      } else {
        // [E, D, Fs], [E, D, Fs], [E, Fs, D]: a shard's every expert's
        // intermediate columns [f0, f0 + Fs) (F / N of them), the routes
        // computed on every chip alike from the all-reduced rows.
        const unsigned Fs = F / N, f0 = me * Fs;
        std::vector<float> w1, w3, w2;
        for (unsigned e = e0; e < E; e += EP) {
          bf16_only(c.expert(l, e, "gate"), F, D), bf16_only(c.expert(l, e, "up"), F, D), bf16_only(c.expert(l, e, "down"), D, F);
          const std::vector<float> a = transposed(row_range(w(c.expert(l, e, "gate"), {F, D}), D, f0, f0 + Fs), Fs, D);
          const std::vector<float> b = transposed(row_range(w(c.expert(l, e, "up"), {F, D}), D, f0, f0 + Fs), Fs, D);
          const std::vector<float> d = transposed(col_range(w(c.expert(l, e, "down"), {D, F}), D, F, f0, f0 + Fs), D, Fs);
          w1.insert(w1.end(), a.begin(), a.end()), w3.insert(w3.end(), b.begin(), b.end()), w2.insert(w2.end(), d.begin(), d.end());
        }
        y = experts({g.weight(p + ".w1", {El, D, Fs}, std::move(w1), DType::bf16), g.weight(p + ".w3", {El, D, Fs}, std::move(w3), DType::bf16),
                     g.weight(p + ".w2", {El, Fs, D}, std::move(w2), DType::bf16)},
                    {});
      }
      if (c.shared_intermediate && c.groups) {  // DeepSeek-V3's shared experts, as one MLP
        y = g.binary(OpKind::add, y, mlp(layer(l, "mlp.shared_experts."), c.shared_intermediate));
      } else if (c.shared_intermediate) {  // Qwen2-MoE's shared expert, times sigmoid(x.w) per row
        const int gate = g.unary(OpKind::sigmoid, linear(x2, layer(l, "mlp.shared_expert_gate.weight"), 1, D));
        y = g.binary(OpKind::add, y, g.binary(OpKind::mul, mlp(layer(l, "mlp.shared_expert."), c.shared_intermediate), gate));
      }
      h = g.binary(OpKind::add, summed(y, mlp_sum), h);
      continue;
    }
    h = g.binary(OpKind::add, summed(mlp(layer(l, "mlp."), c.intermediate), mlp_sum), h);
  }
  h = g.rmsnorm(h, norm("model.norm.weight"), static_cast<float>(c.rms_eps));
  const std::string head = c.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  const std::vector<float> lm = c.tie_embeddings ? table : w(head, {c.vocab, D});
  // Expert parallel: the LM head by vocabulary too where the chips divide
  // it, each chip's columns over every chip's rows (gathered), as its rows'
  // whole head streamed the whole table on every chip (DeepSeek-V3's 1.85
  // GB: 8.45 of a 31.4 ms step on sixteen chips at batch 16).
  const bool by_vocab = EP > 1 && expert_head_by_vocab(c, EP);
  if (N == 1 && !by_vocab) {
    g.output(g.matmul(h, g.weight("lm_head", {D, c.vocab}, transposed(lm, c.vocab, D), DType::bf16), DType::bf16, "logits"));
    return g;
  }
  const unsigned parts = by_vocab ? EP : N, part_of = by_vocab ? shard.chip : me, Vp = c.vocab / parts;
  if (by_vocab) h = g.all_gather(h, EP, false, "lm_head.rows");
  // The shard's vocabulary columns, left on its chip (Megatron's
  // vocabulary-parallel output): the host reads every chip's part at once
  // (shard_logits). Gathered on the chips and put side by side, Llama-3-70B's
  // 64 rows of logits took 595 and 681 us of a 6224 us decode step on
  // eight chips, the host then reading all 33 MB from one chip.
  std::vector<float> part;
  if (!lm.empty())
    part.assign(lm.begin() + std::ptrdiff_t(std::size_t{part_of} * Vp * D), lm.begin() + std::ptrdiff_t(std::size_t{part_of + 1} * Vp * D));
  g.output(g.matmul(h, g.weight("lm_head", {D, Vp}, transposed(part, Vp, D), DType::bf16), DType::bf16, "logits.part"));
  return g;
}

std::vector<float> shard_logits(const std::vector<std::map<std::string, std::vector<float>>>& outputs, unsigned vocab) {
  return compiler::side_by_side(outputs, "logits.part", vocab);
}

std::vector<std::vector<float>> expert_logits(const std::vector<std::map<std::string, std::vector<float>>>& outputs, unsigned vocab) {
  const std::vector<float> all = shard_logits(outputs, vocab);
  const std::size_t each = all.size() / outputs.size();
  if (each % vocab) throw std::invalid_argument(fmt::format("expert_logits: {} logits over {} chips of {} columns", all.size(), outputs.size(), vocab));
  std::vector<std::vector<float>> by_chip;
  for (std::size_t k = 0; k < outputs.size(); ++k)
    by_chip.emplace_back(all.begin() + std::ptrdiff_t(k * each), all.begin() + std::ptrdiff_t((k + 1) * each));
  return by_chip;
}

std::map<std::string, std::vector<float>> llama_inputs(const std::vector<std::uint32_t>& tokens, unsigned position) {
  std::vector<float> pos(tokens.size());
  for (std::size_t t = 0; t < pos.size(); ++t) pos[t] = static_cast<float>(position + t);
  return {{"tokens", std::vector<float>(tokens.begin(), tokens.end())}, {"positions", pos}};
}

void route_seeds(const LlamaConfig& c, unsigned layers, unsigned rows, std::uint64_t seed,
                 std::map<std::string, std::vector<float>>& inputs) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const unsigned L = layers ? std::min(layers, c.layers) : c.layers;
  for (unsigned l = 0; l < L; ++l) {
    if (!c.sparse(l)) continue;
    std::vector<float>& v = inputs[fmt::format("layer{}.route_seed", l)];
    v.resize(std::size_t{rows} * c.experts);
    for (float& x : v) x = u(rng);
  }
}

KvPages kv_pages(unsigned context) {
  if (context <= 65535) return {context, 1};
  constexpr unsigned kMost = 65280;  // 255 x 256
  const unsigned pages = (context + kMost - 1) / kMost, each = (context + pages - 1) / pages;
  return {(each + 255) / 256 * 256, pages};
}

unsigned llama_step_rows(const LlamaConfig& c, unsigned context, unsigned sequences) {
  const KvPages kp = kv_pages(context);
  // The caches' widths: MLA's compressed cache (the latent and its rotary
  // keys, the latent the values), else a KV head's.
  const unsigned dh = c.mla ? c.kv_lora + c.qk_rope : c.head_dim, dv = c.mla ? c.kv_lora : c.head_dim;
  return compiler::attention_rows(kp.page * kp.pages, dh, dv, kp.paged(sequences) ? std::uint64_t{sequences} * kp.pages : 1);
}

std::map<std::string, std::vector<float>> llama_batch_inputs(const std::vector<std::uint32_t>& tokens, const std::vector<unsigned>& positions,
                                                             const std::vector<unsigned>& of, unsigned sequences, unsigned context) {
  if (positions.size() != tokens.size() || of.size() != tokens.size())
    throw std::invalid_argument(fmt::format("llama: {} tokens with {} positions and {} sequences", tokens.size(), positions.size(), of.size()));
  std::map<std::string, std::vector<float>> in = {{"tokens", std::vector<float>(tokens.begin(), tokens.end())},
                                                  {"positions", std::vector<float>(positions.begin(), positions.end())},
                                                  {"sequences", std::vector<float>(of.begin(), of.end())},
                                                  {"pages", {}}};
  const unsigned pages = kv_pages(context).pages;
  for (unsigned p = 0; p < sequences * pages; ++p) in["pages"].push_back(static_cast<float>(p));  // sequence p / pages's page p % pages
  return in;
}

std::vector<std::vector<std::uint32_t>> chip_routes(const LlamaConfig& c, const std::map<std::string, std::vector<float>>& outputs,
                                                    unsigned layers) {
  std::vector<std::vector<std::uint32_t>> r;
  const unsigned L = layers ? std::min(layers, c.layers) : c.layers;
  for (unsigned l = 0; l < L && c.experts; ++l) {
    if (!c.sparse(l)) {
      r.emplace_back();
      continue;
    }
    const auto it = outputs.find(fmt::format("layer{}.route", l));
    if (it == outputs.end()) throw std::invalid_argument(fmt::format("llama: no output 'layer{}.route'", l));
    const std::vector<float>& v = it->second;
    r.emplace_back(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2));
  }
  return r;
}

std::vector<float> llama_reference(const LlamaConfig& c, const WeightSource& w, const std::vector<std::uint32_t>& tokens,
                                   unsigned layers, const std::vector<std::vector<std::uint32_t>>* routes,
                                   unsigned* disagreements) {
  if (disagreements) *disagreements = 0;
  const unsigned T = static_cast<unsigned>(tokens.size()), D = c.hidden, hd = c.head_dim, H = c.heads, KV = c.kv_heads;
  const unsigned L = layers ? std::min(layers, c.layers) : c.layers;
  auto linear = [&](const std::vector<float>& x, const std::string& name, unsigned out, unsigned in) {
    const std::vector<float> wt = w(name, {out, in});
    std::vector<float> y(std::size_t{T} * out);
    for (unsigned t = 0; t < T; ++t)
      for (unsigned o = 0; o < out; ++o) {
        double s = 0;
        for (unsigned i = 0; i < in; ++i) s += double(x[std::size_t{t} * in + i]) * bf16(wt[std::size_t{o} * in + i]);
        y[std::size_t{t} * out + o] = static_cast<float>(s);
      }
    return y;
  };
  auto rmsnorm = [&](const std::vector<float>& x, const std::string& name, unsigned n = 0) {  // rows of n (D) columns
    if (!n) n = D;
    const std::vector<float> wt = w(name, {n});
    std::vector<float> y(x.size());
    for (unsigned t = 0; t < T; ++t) {
      double ss = 0;
      for (unsigned i = 0; i < n; ++i) ss += double(x[std::size_t{t} * n + i]) * x[std::size_t{t} * n + i];
      const double r = 1.0 / std::sqrt(ss / n + c.rms_eps);
      for (unsigned i = 0; i < n; ++i) y[std::size_t{t} * n + i] = static_cast<float>(x[std::size_t{t} * n + i] * r * wt[i]);
    }
    return y;
  };
  const std::vector<double> f = c.inv_freq();
  auto rope = [&](std::vector<float>& x, unsigned n) {  // rotate_half
    for (unsigned t = 0; t < T; ++t)
      for (unsigned hh = 0; hh < n; ++hh)
        for (unsigned i = 0; i < hd / 2; ++i) {
          float* p = &x[std::size_t{t} * n * hd + std::size_t{hh} * hd];
          const double a = t * f[i], x1 = p[i], x2 = p[i + hd / 2];
          p[i] = static_cast<float>(x1 * std::cos(a) - x2 * std::sin(a));
          p[i + hd / 2] = static_cast<float>(x2 * std::cos(a) + x1 * std::sin(a));
        }
  };
  const std::vector<float> table = w("model.embed_tokens.weight", {c.vocab, D});
  std::vector<float> h;
  for (std::uint32_t tok : tokens) h.insert(h.end(), table.begin() + std::size_t{tok} * D, table.begin() + std::size_t{tok + 1} * D);
  for (unsigned l = 0; l < L; ++l) {
    const std::vector<float> x = rmsnorm(h, layer(l, "input_layernorm.weight"));
    auto projection = [&](const char* name, unsigned out) {
      std::vector<float> y = linear(x, layer(l, fmt::format("self_attn.{}.weight", name).c_str()), out, D);
      if (c.qkv_bias) {
        const std::vector<float> bias = w(layer(l, fmt::format("self_attn.{}.bias", name).c_str()), {out});
        for (std::size_t i = 0; i < y.size(); ++i) y[i] += bias[i % out];
      }
      return y;
    };
    // Per head: q and k [T, H, qd], v [T, H, vd] (K and V heads repeated for their query heads).
    unsigned qd = hd, vd = hd;
    std::vector<float> q, k, v;
    if (c.mla) {  // multi-head latent attention, its rotary part in interleaved pairs
      const unsigned nope = c.qk_nope, rd = c.qk_rope, r = c.kv_lora;
      qd = nope + rd, vd = c.v_head;
      q = c.q_lora ? linear(rmsnorm(linear(x, layer(l, "self_attn.q_a_proj.weight"), c.q_lora, D), layer(l, "self_attn.q_a_layernorm.weight"),
                                    c.q_lora),
                            layer(l, "self_attn.q_b_proj.weight"), H * qd, c.q_lora)
                   : linear(x, layer(l, "self_attn.q_proj.weight"), H * qd, D);
      const std::vector<float> kva = linear(x, layer(l, "self_attn.kv_a_proj_with_mqa.weight"), r + rd, D);
      std::vector<float> ckv(std::size_t{T} * r), kpe(std::size_t{T} * rd);
      for (unsigned t = 0; t < T; ++t) {
        std::copy_n(kva.begin() + std::size_t{t} * (r + rd), r, ckv.begin() + std::size_t{t} * r);
        std::copy_n(kva.begin() + std::size_t{t} * (r + rd) + r, rd, kpe.begin() + std::size_t{t} * rd);
      }
      const std::vector<float> kv =
          linear(rmsnorm(ckv, layer(l, "self_attn.kv_a_layernorm.weight"), r), layer(l, "self_attn.kv_b_proj.weight"), H * (nope + vd), r);
      const double ms = c.rope_mscale();
      auto rotate = [&](float* p, unsigned t) {  // pairs (2i, 2i + 1)
        for (unsigned i = 0; i < rd / 2; ++i) {
          const double a = t * f[i], x1 = p[2 * i], x2 = p[2 * i + 1];
          p[2 * i] = static_cast<float>((x1 * std::cos(a) - x2 * std::sin(a)) * ms);
          p[2 * i + 1] = static_cast<float>((x2 * std::cos(a) + x1 * std::sin(a)) * ms);
        }
      };
      for (unsigned t = 0; t < T; ++t) {
        rotate(&kpe[std::size_t{t} * rd], t);
        for (unsigned hh = 0; hh < H; ++hh) rotate(&q[(std::size_t{t} * H + hh) * qd + nope], t);
      }
      k.resize(std::size_t{T} * H * qd), v.resize(std::size_t{T} * H * vd);
      for (unsigned t = 0; t < T; ++t)
        for (unsigned hh = 0; hh < H; ++hh) {
          const float* row = &kv[(std::size_t{t} * H + hh) * (nope + vd)];
          std::copy_n(row, nope, &k[(std::size_t{t} * H + hh) * qd]);
          std::copy_n(&kpe[std::size_t{t} * rd], rd, &k[(std::size_t{t} * H + hh) * qd + nope]);
          std::copy_n(row + nope, vd, &v[(std::size_t{t} * H + hh) * vd]);
        }
    } else {
      q = projection("q_proj", H * hd);
      std::vector<float> kk = projection("k_proj", KV * hd);
      const std::vector<float> vv = projection("v_proj", KV * hd);
      rope(q, H), rope(kk, KV);
      k.resize(std::size_t{T} * H * hd), v.resize(k.size());
      for (unsigned t = 0; t < T; ++t)
        for (unsigned hh = 0; hh < H; ++hh) {
          const unsigned kvh = hh / (H / KV);
          std::copy_n(&kk[(std::size_t{t} * KV + kvh) * hd], hd, &k[(std::size_t{t} * H + hh) * hd]);
          std::copy_n(&vv[(std::size_t{t} * KV + kvh) * hd], hd, &v[(std::size_t{t} * H + hh) * hd]);
        }
    }
    const double scale = c.attention_scale();
    std::vector<float> o(std::size_t{T} * H * vd);
    for (unsigned hh = 0; hh < H; ++hh) {
      for (unsigned i = 0; i < T; ++i) {
        std::vector<double> p(i + 1);
        double m = -1e300, sum = 0;
        for (unsigned j = 0; j <= i; ++j) {
          double s = 0;
          for (unsigned d = 0; d < qd; ++d) s += double(q[(std::size_t{i} * H + hh) * qd + d]) * k[(std::size_t{j} * H + hh) * qd + d];
          p[j] = s * scale, m = std::max(m, p[j]);
        }
        for (double& e : p) e = std::exp(e - m), sum += e;
        for (unsigned d = 0; d < vd; ++d) {
          double acc = 0;
          for (unsigned j = 0; j <= i; ++j) acc += p[j] / sum * v[(std::size_t{j} * H + hh) * vd + d];
          o[(std::size_t{i} * H + hh) * vd + d] = static_cast<float>(acc);
        }
      }
    }
    const std::vector<float> ao = linear(o, layer(l, "self_attn.o_proj.weight"), D, H * vd);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] += ao[i];
    const std::vector<float> x2 = rmsnorm(h, layer(l, "post_attention_layernorm.weight"));
    auto mlp = [&](const std::string& prefix, unsigned F) {  // a SwiGLU MLP on every row
      const std::vector<float> gt = linear(x2, prefix + "gate_proj.weight", F, D);
      std::vector<float> a = linear(x2, prefix + "up_proj.weight", F, D);
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(a[i] * (gt[i] / (1 + std::exp(-double(gt[i])))));
      return linear(a, prefix + "down_proj.weight", D, F);
    };
    if (c.sparse(l)) {  // the router's top k, each chosen expert's SwiGLU FFN times its gate
      const unsigned E = c.experts, K = c.experts_per_token, F = c.expert_intermediate;
      const std::vector<float> logits = linear(x2, c.router(l), E, D);
      const std::vector<float> bias = c.groups ? w(layer(l, "mlp.gate.e_score_correction_bias"), {E}) : std::vector<float>();
      for (unsigned t = 0; t < T; ++t) {
        const float* lg = &logits[std::size_t{t} * E];
        // The reference's own choice: the top k of the logits (of the softmax
        // over all, the same), or noaux_tc's: sigmoid scores plus the bias,
        // the best groups by their two largest, the top k of those (others 0).
        std::vector<double> score(E), rank(E);
        for (unsigned e = 0; e < E; ++e) {
          score[e] = c.groups ? 1 / (1 + std::exp(-double(lg[e]))) : lg[e];
          rank[e] = c.groups ? score[e] + bias[e] : score[e];
        }
        if (c.groups) {
          const unsigned per = E / c.groups;
          std::vector<double> group(c.groups);
          for (unsigned gi = 0; gi < c.groups; ++gi) {
            std::vector<double> v(rank.begin() + gi * per, rank.begin() + (gi + 1) * per);
            std::sort(v.rbegin(), v.rend());
            group[gi] = per > 1 ? v[0] + v[1] : v[0];
          }
          std::vector<unsigned> gorder(c.groups);
          for (unsigned gi = 0; gi < c.groups; ++gi) gorder[gi] = gi;
          std::stable_sort(gorder.begin(), gorder.end(), [&](unsigned a, unsigned b) { return group[a] > group[b]; });
          std::vector<double> masked(E, 0.0);
          for (unsigned n = 0; n < c.topk_group; ++n)
            for (unsigned e = gorder[n] * per; e < (gorder[n] + 1) * per; ++e) masked[e] = rank[e];
          rank = masked;
        }
        std::vector<unsigned> order(E);
        for (unsigned e = 0; e < E; ++e) order[e] = e;
        std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) { return rank[a] > rank[b]; });
        order.resize(K);
        if (routes) {  // the chip's choices
          if (l >= routes->size() || (*routes)[l].size() != std::size_t{T} * K)
            throw std::invalid_argument(fmt::format("llama: the routes lack layer {}'s {} x {} choices", l, T, K));
          std::vector<unsigned> chip((*routes)[l].begin() + std::size_t{t} * K, (*routes)[l].begin() + std::size_t{t + 1} * K);
          for (unsigned e : chip)
            if (e >= E) throw std::invalid_argument(fmt::format("llama: layer {} routes to expert {} of {}", l, e, E));
          std::vector<unsigned> a = chip, b = order;
          std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
          if (disagreements && a != b) ++*disagreements;
          order = chip;
        }
        // Gates: noaux_tc's scores of the chosen (normalised) times the
        // scale; else the softmax over all, of the chosen only where renormalised.
        std::vector<double> gate(K);
        if (c.groups) {
          double total = 0;
          for (unsigned j = 0; j < K; ++j) total += score[order[j]];
          for (unsigned j = 0; j < K; ++j)
            gate[j] = (c.norm_topk_prob ? score[order[j]] / (total + 1e-20) : score[order[j]]) * c.routed_scale;
        } else {
          double top = lg[0], all = 0, chosen = 0;
          for (unsigned e = 0; e < E; ++e) top = std::max(top, double(lg[e]));
          for (unsigned e = 0; e < E; ++e) all += std::exp(double(lg[e]) - top);
          for (unsigned j = 0; j < K; ++j) chosen += std::exp(double(lg[order[j]]) - top);
          for (unsigned j = 0; j < K; ++j) gate[j] = std::exp(double(lg[order[j]]) - top) / (c.norm_topk_prob ? chosen : all);
        }
        for (unsigned j = 0; j < K; ++j) {
          const unsigned e = order[j];
          const std::vector<float> w1 = w(c.expert(l, e, "gate"), {F, D}), w3 = w(c.expert(l, e, "up"), {F, D});
          const std::vector<float> w2 = w(c.expert(l, e, "down"), {D, F});
          const float* xr = &x2[std::size_t{t} * D];
          std::vector<double> a(F);
          for (unsigned f = 0; f < F; ++f) {
            double g1 = 0, g3 = 0;
            for (unsigned i = 0; i < D; ++i)
              g1 += double(xr[i]) * bf16(w1[std::size_t{f} * D + i]), g3 += double(xr[i]) * bf16(w3[std::size_t{f} * D + i]);
            a[f] = g1 / (1 + std::exp(-g1)) * g3;
          }
          for (unsigned o = 0; o < D; ++o) {
            double y = 0;
            for (unsigned f = 0; f < F; ++f) y += a[f] * bf16(w2[std::size_t{o} * F + f]);
            h[std::size_t{t} * D + o] += static_cast<float>(gate[j] * y);
          }
        }
      }
      if (c.shared_intermediate && c.groups) {  // DeepSeek-V3's shared experts, ungated
        const std::vector<float> sh = mlp(layer(l, "mlp.shared_experts."), c.shared_intermediate);
        for (std::size_t i = 0; i < h.size(); ++i) h[i] += sh[i];
      } else if (c.shared_intermediate) {  // the shared expert, times sigmoid(x.w) per row
        const std::vector<float> sh = mlp(layer(l, "mlp.shared_expert."), c.shared_intermediate);
        const std::vector<float> sg = linear(x2, layer(l, "mlp.shared_expert_gate.weight"), 1, D);
        for (std::size_t i = 0; i < h.size(); ++i) h[i] += static_cast<float>(sh[i] / (1 + std::exp(-double(sg[i / D]))));
      }
      continue;
    }
    const std::vector<float> dn = mlp(layer(l, "mlp."), c.intermediate);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] += dn[i];
  }
  h = rmsnorm(h, "model.norm.weight");
  if (c.tie_embeddings)
    return linear(h, "model.embed_tokens.weight", c.vocab, D);
  return linear(h, "lm_head.weight", c.vocab, D);
}

}  // namespace tessera::hf
