// Tile kernels on the default platform: a kernel ELF loaded into tile 0's
// scratchpad runs on the tile's RV32 core, moves its operands from HBM
// over the NoC with the DMA, computes on the engines in the order the
// hardware semaphores give, writes its results back to HBM, and they agree
// with a host reference within the bound of their format.
#include <gtest/gtest.h>

#include "common/testing/random.hpp"

#include <cmath>
#include <random>

#include "common/payload.hpp"
#include "common/sim.hpp"
#include "engines/num/block_scale.hpp"
#include "platform.hpp"
#include "tessera_platform.h"
#include "tile/tile.hpp"
#include "tile_regs.hpp"

using namespace tessera;
using tessera::testing::random_floats;
namespace R = tessera::regs::tile;

namespace {

const std::string kT1 = std::string(TESSERA_SOURCE_DIR) + "/platform/t1.json";
constexpr std::uint64_t kHbm = 0x10'0000'0000;

struct T1 {
  PlatformSpec spec;
  std::unique_ptr<Platform> p;
  tile::Tile* tile = nullptr;
  // The CP sleeps in a wfi loop: the test launches the kernel itself, as
  // the host runtime will.
  // `start`: complete elaboration now (debug accesses through the bus need
  // it); tests that only check refusals leave the simulation unstarted.
  explicit T1(bool start = true) {
    nlohmann::json raw = PlatformSpec::read(kT1);
    for (const char* s : {"uart0.tx=none", "cp.reset_pc=0x8000_0000"}) PlatformSpec::apply_set(raw, kT1, s);
    spec = PlatformSpec::parse(kT1, raw);
    p = std::make_unique<Platform>("t1", spec, true);
    const std::uint32_t idle[] = {0x10500073, 0xffdff06f};  // wfi; j -4
    tlm::tlm_generic_payload t;
    set_access(t, tlm::TLM_WRITE_COMMAND, 0, const_cast<std::uint32_t*>(idle), sizeof idle);
    p->target("cpram", "mem_target").transport_dbg(t);
    if (start) sc_core::sc_start(sc_core::SC_ZERO_TIME);  // complete elaboration
    tile = p->get<tile::Tile>("tile0");
  }
  std::uint32_t reg(unsigned r) { return reg(0, r); }
  std::uint32_t reg(unsigned tile, unsigned r) {
    std::uint32_t v = 0;
    p->debug_read(TESSERA_TILE0_CSR_BASE + 0x1000 * tile + R::kBlock.regs[r].offset, &v, 4);
    return v;
  }
  // Writes each tile's arguments and starts its core (through the bus and
  // the NoC, from a thread of its own), then runs until every kernel has
  // stopped. Returns the time from the first start to the last stop.
  sc_core::sc_time launch_on(const std::vector<std::vector<std::uint32_t>>& args, sc_core::sc_time limit) {
    sc_core::sc_time started;
    bool all_started = false;
    sc_core::sc_spawn([&] {
      sc_core::sc_time d;
      for (std::size_t tile = 0; tile < args.size(); ++tile) {
        const std::uint64_t regs = TESSERA_TILE0_CSR_BASE + 0x1000 * tile;
        for (std::size_t i = 0; i < args[tile].size(); ++i) {
          std::uint32_t v = args[tile][i];
          p->transport(tlm::TLM_WRITE_COMMAND, regs + R::kBlock.regs[R::CORE_ARG].offset + 4 * i, &v, 4, d);
        }
      }
      for (std::size_t tile = 0; tile < args.size(); ++tile) {
        std::uint32_t start = R::CORE_CTRL_f::START_MASK;
        p->transport(tlm::TLM_WRITE_COMMAND, TESSERA_TILE0_CSR_BASE + 0x1000 * tile + R::kBlock.regs[R::CORE_CTRL].offset,
                     &start, 4, d);
        sc_core::wait(d);
        d = sc_core::SC_ZERO_TIME;
        if (tile == 0) started = sc_core::sc_time_stamp();
      }
      all_started = true;
    });
    auto running = [&] {
      for (std::size_t tile = 0; tile < args.size(); ++tile)
        if (reg(static_cast<unsigned>(tile), R::CORE_STATUS) == 1) return true;
      return false;
    };
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
    while (sc_core::sc_time_stamp() < limit && (!all_started || running()))
      sc_core::sc_start(sc_core::sc_time(100, sc_core::SC_NS));
    const sc_core::sc_time took = sc_core::sc_time_stamp() - started;
    // Work a kernel left queued (after an error, say) runs to its end, so
    // no engine is caught in the middle of a transfer when the test ends.
    auto engines_busy = [&] {
      for (std::size_t tile = 0; tile < args.size(); ++tile) {
        tile::Tile* t = p->get<tile::Tile>("tile" + std::to_string(tile));
        if (t->dma().busy() || t->tensor_core().busy() || t->vector_unit().busy()) return true;
      }
      return false;
    };
    while (sc_core::sc_time_stamp() < limit && engines_busy()) sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_US));
    return took;
  }
  sc_core::sc_time launch(const std::vector<std::uint32_t>& args, sc_core::sc_time limit) {
    return launch_on({args}, limit);
  }
  nlohmann::ordered_json stats(unsigned index = 0) {
    nlohmann::ordered_json s;
    p->get<tile::Tile>("tile" + std::to_string(index))->report_stats(s);
    return s;
  }
};


std::vector<std::uint32_t> gemm_args(std::uint64_t a, std::uint64_t b, std::uint64_t c, unsigned m, unsigned n,
                                     unsigned k, unsigned mode, std::uint64_t bs) {
  auto lo = [](std::uint64_t v) { return static_cast<std::uint32_t>(v); };
  auto hi = [](std::uint64_t v) { return static_cast<std::uint32_t>(v >> 32); };
  return {lo(a), hi(a), lo(b), hi(b), lo(c), hi(c), m, n, k, mode, lo(bs), hi(bs)};
}

// Checks C against the float64 product of what the chip multiplies (qa,
// qb: the values after rounding to the input format), with FP32
// accumulation's bound: |c - ref| <= 2 K u sum|qa||qb|, u = 2^-24.
void expect_within_fp32_bound(const std::vector<float>& c, const std::vector<double>& qa,
                              const std::vector<double>& qb, unsigned m, unsigned n, unsigned k, double* max_rel) {
  double worst = 0, scale = 0;
  for (unsigned i = 0; i < m; ++i)
    for (unsigned j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (unsigned p = 0; p < k; ++p) {
        ref += qa[i * k + p] * qb[p * n + j];
        mag += std::fabs(qa[i * k + p] * qb[p * n + j]);
      }
      const double err = std::fabs(c[i * n + j] - ref);
      ASSERT_LE(err, 2.0 * k * std::ldexp(1.0, -24) * mag) << "C[" << i << "][" << j << "] = " << c[i * n + j]
                                                            << ", reference " << ref;
      worst = std::max(worst, err);
      scale = std::max(scale, std::fabs(ref));
    }
  *max_rel = worst / scale;
}

}  // namespace

TEST(Kernels, DoubleBufferedBf16GemmOnTheTileCore) {
  sim::reset();
  // Read before the simulation starts (ASan cannot follow SystemC's thread stacks).
  const ElfImage elf_gemm = ElfImage::read(std::string(TESSERA_KERNEL_DIR) + "/gemm.elf");
  T1 t;
  const unsigned m = 128, n = 256, k = 512;
  const auto af = random_floats(m * k, 1, -1, 1), bf = random_floats(k * n, 2, -1, 1);
  std::vector<std::uint16_t> a(m * k), b(k * n);
  std::vector<double> qa(m * k), qb(k * n);
  for (unsigned i = 0; i < m * k; ++i) {
    a[i] = static_cast<std::uint16_t>(num::encode(num::Format::BF16, af[i]));
    qa[i] = num::decode(num::Format::BF16, a[i]);
  }
  for (unsigned i = 0; i < k * n; ++i) {
    b[i] = static_cast<std::uint16_t>(num::encode(num::Format::BF16, bf[i]));
    qb[i] = num::decode(num::Format::BF16, b[i]);
  }
  const std::uint64_t pa = kHbm, pb = kHbm + 0x100000, pc = kHbm + 0x200000;
  t.p->debug_write(pa, a.data(), a.size() * 2);
  t.p->debug_write(pb, b.data(), b.size() * 2);
  t.p->load_kernel("tile0", elf_gemm);
  const sc_core::sc_time took = t.launch(gemm_args(pa, pb, pc, m, n, k, 0, 0), sc_core::sc_time(10, sc_core::SC_MS));
  ASSERT_EQ(t.reg(R::CORE_STATUS), 2u) << "the kernel ran to its end (fault cause " << t.reg(R::CORE_FAULT_CAUSE)
                                       << " at " << std::hex << t.reg(R::CORE_FAULT_PC) << ")";
  EXPECT_EQ(t.reg(R::CORE_EXIT), 0u);
  std::vector<float> c(m * n);
  t.p->debug_read(pc, c.data(), c.size() * 4);
  double rel = 0;
  expect_within_fp32_bound(c, qa, qb, m, n, k, &rel);
  const auto s = t.stats();
  EXPECT_EQ(s["tensor_macs_bf16"], std::uint64_t{m} * n * k);
  EXPECT_EQ(s["dma_global_bytes"], 2ull * (m * k * (n / 128) + k * n * (m / 64)) + 4ull * m * n);
  // Double buffering: the DMA and the tensor core overlap, so most of the
  // tensor core's time hides under the DMA's (at this tile size the kernel
  // is bound by the tile's NoC port).
  const double dma = s["dma_busy_cycles"].get<double>(), tensor = s["tensor_busy_cycles"].get<double>();
  const double cycles = took.to_seconds() * 1.5e9;
  std::printf("bf16 gemm %ux%ux%u: %.1f us, max relative error %.3g, tensor busy %.0f%%, dma busy %.0f%%\n", m, n,
              k, took.to_seconds() * 1e6, rel, 100 * tensor / cycles, 100 * dma / cycles);
  EXPECT_GT(dma + tensor - cycles, 0.5 * tensor) << "hidden tensor time";
  EXPECT_GT(s["tensor_semaphore_wait_cycles"].get<std::uint64_t>(), 0u);
  EXPECT_GT(s["core_wfi_sleeps"].get<std::uint64_t>(), 0u) << "the core slept while the engines worked";
  EXPECT_LT(s["core_instructions"].get<std::uint64_t>(), 20000u) << "and did not spin";
  EXPECT_EQ(t.p->protocol_violations(), 0u);
}

TEST(Kernels, Fp8GemmCastsActivationsOnTheFlyWithBlockScales) {
  sim::reset();
  // Read before the simulation starts (ASan cannot follow SystemC's thread stacks).
  const ElfImage elf_gemm = ElfImage::read(std::string(TESSERA_KERNEL_DIR) + "/gemm.elf");
  T1 t;
  const unsigned m = 64, n = 256, k = 512, g = 128;
  const auto af = random_floats(m * k, 3, -4, 4), bf = random_floats(k * n, 4, -0.5f, 0.5f);
  // Weights quantized offline: E4M3 with a scale per 128 x 128 block.
  num::Convert sat;
  sat.saturate = true;
  const num::BlockQuantized qbq = num::block_quantize(bf.data(), k, n, num::Format::E4M3, num::ScaleFormat::FP32, g, g, sat);
  // What the DMA will make of the activations: E4M3 with a scale per 1 x 128.
  const num::BlockQuantized qaq = num::block_quantize(af.data(), m, k, num::Format::E4M3, num::ScaleFormat::FP32, 1, g, sat);
  std::vector<double> qa(m * k), qb(k * n);
  for (unsigned i = 0; i < m; ++i)
    for (unsigned p = 0; p < k; ++p) qa[i * k + p] = qaq.value(i, p);
  for (unsigned p = 0; p < k; ++p)
    for (unsigned j = 0; j < n; ++j) qb[p * n + j] = qbq.value(p, j);
  const std::uint64_t pa = kHbm, pb = kHbm + 0x100000, pbs = kHbm + 0x180000, pc = kHbm + 0x200000;
  t.p->debug_write(pa, af.data(), af.size() * 4);
  t.p->debug_write(pb, qbq.codes.data(), qbq.codes.size());
  t.p->debug_write(pbs, qbq.scales.data(), qbq.scales.size() * 4);
  t.p->load_kernel("tile0", elf_gemm);
  const sc_core::sc_time took = t.launch(gemm_args(pa, pb, pc, m, n, k, 1, pbs), sc_core::sc_time(10, sc_core::SC_MS));
  ASSERT_EQ(t.reg(R::CORE_STATUS), 2u);
  EXPECT_EQ(t.reg(R::CORE_EXIT), 0u);
  std::vector<float> c(m * n);
  t.p->debug_read(pc, c.data(), c.size() * 4);
  double rel = 0;
  expect_within_fp32_bound(c, qa, qb, m, n, k, &rel);
  // Against the unquantized product the error is FP8's, well above FP32's.
  double worst = 0, scale = 0;
  for (unsigned i = 0; i < m; ++i)
    for (unsigned j = 0; j < n; ++j) {
      double ref = 0;
      for (unsigned p = 0; p < k; ++p) ref += double(af[i * k + p]) * bf[p * n + j];
      worst = std::max(worst, std::fabs(c[i * n + j] - ref));
      scale = std::max(scale, std::fabs(ref));
    }
  std::printf("fp8 gemm %ux%ux%u: %.1f us, error against the FP8 operands %.3g, against FP32 operands %.3g\n", m, n,
              k, took.to_seconds() * 1e6, rel, worst / scale);
  EXPECT_LT(worst / scale, 0.1);
  EXPECT_GT(worst / scale, 1e-4);
  const auto s = t.stats();
  EXPECT_EQ(s["tensor_macs_fp8"], std::uint64_t{m} * n * k);
  EXPECT_EQ(s["dma_cast_elements"], std::uint64_t{m} * k * (n / 128));
}

TEST(Kernels, ABadShapeEndsTheKernelWithItsCodeAndAFaultIsReported) {
  sim::reset();
  // Read before the simulation starts (ASan cannot follow SystemC's thread stacks).
  const ElfImage elf_gemm = ElfImage::read(std::string(TESSERA_KERNEL_DIR) + "/gemm.elf");
  T1 t;
  t.p->load_kernel("tile0", elf_gemm);
  t.launch(gemm_args(kHbm, kHbm, kHbm, 100, 128, 256, 0, 0), sc_core::sc_time(1, sc_core::SC_MS));
  EXPECT_EQ(t.reg(R::CORE_STATUS), 2u);
  EXPECT_EQ(t.reg(R::CORE_EXIT), 2u) << "M = 100 is not whole 64-row tiles";
  // A's address in a hole: the DMA's read fails at the far end, the kernel
  // sees the engine error and ends with code 3.
  t.tile->set_core_pc(tile::Tile::kLocalSpm);
  t.launch(gemm_args(0x4000'0000, kHbm, kHbm, 64, 128, 256, 0, 0), sc_core::sc_time(2, sc_core::SC_MS));
  EXPECT_EQ(t.reg(R::CORE_STATUS), 2u);
  EXPECT_EQ(t.reg(R::CORE_EXIT), 3u);
  EXPECT_EQ(t.reg(R::DMA_ERROR_CODE), 4u) << "a bus error";
}

TEST(Kernels, LoadingRefusesWhatCannotRun) {
  sim::reset();
  // Nothing runs here: the simulation is never started.
  // Read before the simulation starts (ASan cannot follow SystemC's thread stacks).
  const ElfImage elf_hello = ElfImage::read(std::string(TESSERA_FIRMWARE_DIR) + "/hello.elf");
  const ElfImage elf_gemm = ElfImage::read(std::string(TESSERA_KERNEL_DIR) + "/gemm.elf");
  T1 t(false);
  try {
    t.p->load_kernel("tile0", elf_hello);
    FAIL() << "an RV64 program was loaded onto the RV32 tile core";
  } catch (const ElfError& e) {
    EXPECT_NE(std::string(e.what()).find("RV32"), std::string::npos) << e.what();
  }
  try {
    t.p->load_kernel("cpram", elf_gemm);
    FAIL() << "a kernel was loaded onto something that is no tile";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no tile instance named \"cpram\""), std::string::npos) << e.what();
  }
}

TEST(Kernels, FusedSwigluFfnOnTheTileCore) {
  sim::reset();
  // Read before the simulation starts (ASan cannot follow SystemC's thread stacks).
  const ElfImage elf_swiglu_ffn = ElfImage::read(std::string(TESSERA_KERNEL_DIR) + "/swiglu_ffn.elf");
  T1 t;
  const unsigned T = 64, d = 256, f = 512;
  auto bf16 = [](const std::vector<float>& v, std::vector<std::uint16_t>& codes, std::vector<double>& q) {
    codes.resize(v.size());
    q.resize(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      codes[i] = static_cast<std::uint16_t>(num::encode(num::Format::BF16, v[i]));
      q[i] = num::decode(num::Format::BF16, codes[i]);
    }
  };
  std::vector<std::uint16_t> x, w1, w3, w2;
  std::vector<double> qx, q1, q3, q2;
  bf16(random_floats(T * d, 5, -1, 1), x, qx);
  bf16(random_floats(d * f, 6, -0.1f, 0.1f), w1, q1);
  bf16(random_floats(d * f, 7, -0.1f, 0.1f), w3, q3);
  bf16(random_floats(f * d, 8, -0.1f, 0.1f), w2, q2);
  const std::uint64_t px = kHbm, p1 = kHbm + 0x100000, p3 = kHbm + 0x200000, p2 = kHbm + 0x300000,
                      py = kHbm + 0x400000;
  t.p->debug_write(px, x.data(), x.size() * 2);
  t.p->debug_write(p1, w1.data(), w1.size() * 2);
  t.p->debug_write(p3, w3.data(), w3.size() * 2);
  t.p->debug_write(p2, w2.data(), w2.size() * 2);
  t.p->load_kernel("tile0", elf_swiglu_ffn);
  auto lo = [](std::uint64_t v) { return static_cast<std::uint32_t>(v); };
  auto hi = [](std::uint64_t v) { return static_cast<std::uint32_t>(v >> 32); };
  const sc_core::sc_time took = t.launch({lo(px), hi(px), lo(p1), hi(p1), lo(p3), hi(p3), lo(p2), hi(p2), lo(py),
                                          hi(py), T, d, f},
                                         sc_core::sc_time(10, sc_core::SC_MS));
  ASSERT_EQ(t.reg(R::CORE_STATUS), 2u);
  ASSERT_EQ(t.reg(R::CORE_EXIT), 0u);
  std::vector<float> y(T * d);
  t.p->debug_read(py, y.data(), y.size() * 4);
  // Host reference in float64; g rounded to BF16 as the chip does. The
  // chip's g may differ from it by one BF16 step (its FP32 GEMMs and silu
  // round differently before that), hence 2^-7 of sum|g w2|, plus FP32
  // accumulation's 2 f u.
  double worst = 0, scale = 0;
  for (unsigned i = 0; i < T; ++i) {
    std::vector<double> g(f);
    for (unsigned j = 0; j < f; ++j) {
      double h1 = 0, h3 = 0;
      for (unsigned p = 0; p < d; ++p) h1 += qx[i * d + p] * q1[p * f + j], h3 += qx[i * d + p] * q3[p * f + j];
      g[j] = num::decode(num::Format::BF16, num::encode(num::Format::BF16, h1 / (1 + std::exp(-h1)) * h3));
    }
    for (unsigned k = 0; k < d; ++k) {
      double ref = 0, mag = 0;
      for (unsigned j = 0; j < f; ++j) ref += g[j] * q2[j * d + k], mag += std::fabs(g[j] * q2[j * d + k]);
      const double err = std::fabs(y[i * d + k] - ref);
      ASSERT_LE(err, (std::ldexp(1.0, -7) + 2.0 * f * std::ldexp(1.0, -24)) * mag + 1e-30)
          << "y[" << i << "][" << k << "] = " << y[i * d + k] << ", reference " << ref;
      worst = std::max(worst, err);
      scale = std::max(scale, std::fabs(ref));
    }
  }
  const auto s = t.stats();
  std::printf("swiglu ffn T=%u d=%u f=%u: %.1f us, max relative error %.3g, special-function ops %llu\n", T, d, f,
              took.to_seconds() * 1e6, worst / scale,
              static_cast<unsigned long long>(s["vector_special_function_ops"].get<std::uint64_t>()));
  EXPECT_EQ(s["tensor_macs_bf16"], 3ull * T * d * f);
  EXPECT_EQ(s["vector_commands"], 2u);
  EXPECT_GT(s["vector_semaphore_wait_cycles"].get<std::uint64_t>(), 0u) << "the vector unit waited for the GEMMs";
}

TEST(Kernels, EightTilesShareAGemmOverTheNocAndHbm) {
  sim::reset();
  // Read before the simulation starts (ASan cannot follow SystemC's thread stacks).
  const ElfImage elf_gemm = ElfImage::read(std::string(TESSERA_KERNEL_DIR) + "/gemm.elf");
  T1 t;
  const unsigned tiles = 8, rows = 64, m = tiles * rows, n = 128, k = 512;
  const auto af = random_floats(m * k, 9, -1, 1), bf = random_floats(k * n, 10, -1, 1);
  std::vector<std::uint16_t> a(m * k), b(k * n);
  std::vector<double> qa(m * k), qb(k * n);
  for (unsigned i = 0; i < m * k; ++i)
    a[i] = static_cast<std::uint16_t>(num::encode(num::Format::BF16, af[i])), qa[i] = num::decode(num::Format::BF16, a[i]);
  for (unsigned i = 0; i < k * n; ++i)
    b[i] = static_cast<std::uint16_t>(num::encode(num::Format::BF16, bf[i])), qb[i] = num::decode(num::Format::BF16, b[i]);
  const std::uint64_t pa = kHbm, pb = kHbm + 0x100000, pc = kHbm + 0x200000;
  t.p->debug_write(pa, a.data(), a.size() * 2);
  t.p->debug_write(pb, b.data(), b.size() * 2);
  const ElfImage& gemm = elf_gemm;
  std::vector<std::vector<std::uint32_t>> args;
  for (unsigned i = 0; i < tiles; ++i) {
    t.p->load_kernel("tile" + std::to_string(i), gemm);
    // Tile i computes rows [64 i, 64 i + 64) of C.
    args.push_back(gemm_args(pa + 2ull * i * rows * k, pb, pc + 4ull * i * rows * n, rows, n, k, 0, 0));
  }
  const sc_core::sc_time took = t.launch_on(args, sc_core::sc_time(10, sc_core::SC_MS));
  double dma_total = 0;
  for (unsigned i = 0; i < tiles; ++i) {
    ASSERT_EQ(t.reg(i, R::CORE_STATUS), 2u) << "tile " << i;
    EXPECT_EQ(t.reg(i, R::CORE_EXIT), 0u) << "tile " << i;
    const auto s = t.stats(i);
    EXPECT_EQ(s["tensor_macs_bf16"], std::uint64_t{rows} * n * k) << "tile " << i;
    dma_total += s["dma_busy_cycles"].get<double>() / 1.5e9;
  }
  std::vector<float> c(m * n);
  t.p->debug_read(pc, c.data(), c.size() * 4);
  double rel = 0;
  expect_within_fp32_bound(c, qa, qb, m, n, k, &rel);
  std::printf("8-tile gemm %ux%ux%u: %.1f us (%.1f GFLOP/s), the tiles' DMA busy time adds up to %.1f us\n", m, n, k,
              took.to_seconds() * 1e6, 2.0 * m * n * k / took.to_seconds() * 1e-9, dma_total * 1e6);
  // The tiles work at once: the run is far shorter than their DMA time one after the other.
  EXPECT_LT(took.to_seconds(), 0.5 * dma_total);
  EXPECT_EQ(t.p->protocol_violations(), 0u);
}

TEST(Kernels, EightTilesMeetAtABarrierOverTheNoc) {
  sim::reset();
  // Read before the simulation starts (ASan cannot follow SystemC's thread stacks).
  const ElfImage elf_barrier = ElfImage::read(std::string(TESSERA_KERNEL_DIR) + "/barrier.elf");
  T1 t;
  const unsigned tiles = 8;
  const std::uint64_t table = kHbm + 0x10000;
  const std::vector<std::uint32_t> zeros(2 * tiles, 0);
  t.p->debug_write(table, zeros.data(), zeros.size() * 4);
  const ElfImage& barrier = elf_barrier;
  std::vector<std::vector<std::uint32_t>> args;
  for (unsigned i = 0; i < tiles; ++i) {
    t.p->load_kernel("tile" + std::to_string(i), barrier);
    // Tile i works i x 2000 loop iterations first: without the barrier the
    // early tiles would read the table long before the late ones wrote it.
    args.push_back({i, tiles, static_cast<std::uint32_t>(table), static_cast<std::uint32_t>(table >> 32),
                    TESSERA_TILE0_CSR_BASE, TESSERA_TILE1_CSR_BASE - TESSERA_TILE0_CSR_BASE, 2000});
  }
  t.launch_on(args, sc_core::sc_time(10, sc_core::SC_MS));
  std::vector<std::uint32_t> got(2 * tiles);
  t.p->debug_read(table, got.data(), got.size() * 4);
  for (unsigned i = 0; i < tiles; ++i) {
    ASSERT_EQ(t.reg(i, R::CORE_STATUS), 2u) << "tile " << i;
    EXPECT_EQ(t.reg(i, R::CORE_EXIT), 0u) << "tile " << i;
    EXPECT_EQ(got[i], i + 1);
    EXPECT_EQ(got[tiles + i], tiles * (tiles + 1) / 2) << "tile " << i << " passed the barrier early";
    EXPECT_EQ(t.stats(i)["semaphore_signals"], tiles - 1) << "tile " << i;
  }
}
