// The decoder on its own: base encodings, compressed expansions per XLEN,
// and the encodings that must be illegal.
#include <gtest/gtest.h>

#include <cstring>

#include "riscv/decode.hpp"

using namespace tessera::riscv;

TEST(Decode, BaseInstructions) {
  Decoded d = decode(0x00100313, 64);  // addi t1, zero, 1
  EXPECT_EQ(d.op, Op::ADDI);
  EXPECT_EQ(d.rd, 6);
  EXPECT_EQ(d.rs1, 0);
  EXPECT_EQ(d.imm, 1);
  EXPECT_EQ(d.len, 4);
  d = decode(0x0062b023, 64);  // sd t1, 0(t0)
  EXPECT_EQ(d.op, Op::SD);
  EXPECT_EQ(d.rs1, 5);
  EXPECT_EQ(d.rs2, 6);
  d = decode(0xfe000ee3, 32);  // beq zero, zero, -4
  EXPECT_EQ(d.op, Op::BEQ);
  EXPECT_EQ(d.imm, -4);
  d = decode(0x800002b7, 64);  // lui t0, 0x80000: sign-extended
  EXPECT_EQ(d.op, Op::LUI);
  EXPECT_EQ(d.imm, -2147483648LL);
  EXPECT_EQ(decode(0x30200073, 32).op, Op::MRET);
  EXPECT_EQ(decode(0x10500073, 64).op, Op::WFI);
  EXPECT_EQ(decode(0x0000100f, 64).op, Op::FENCE_I);
  EXPECT_EQ(decode(0x02b50533, 64).op, Op::MUL);
  EXPECT_EQ(decode(0x1005252f, 64).op, Op::LR_W);
}

TEST(Decode, Rv64OnlyEncodingsAreIllegalOnRv32) {
  EXPECT_EQ(decode(0x0062b023, 32).op, Op::ILLEGAL);  // sd
  EXPECT_EQ(decode(0x0015051b, 32).op, Op::ILLEGAL);  // addiw a0, a0, 1
  EXPECT_EQ(decode(0x03f51513, 32).op, Op::ILLEGAL);  // slli a0, a0, 63
  EXPECT_EQ(decode(0x03f51513, 64).op, Op::SLLI);
  EXPECT_EQ(decode(0x1005352f, 32).op, Op::ILLEGAL);  // lr.d
}

TEST(Decode, CompressedExpansions) {
  Decoded d = decode(0x4509, 64);  // c.li a0, 2
  EXPECT_EQ(d.op, Op::ADDI);
  EXPECT_EQ(d.rd, 10);
  EXPECT_EQ(d.rs1, 0);
  EXPECT_EQ(d.imm, 2);
  EXPECT_EQ(d.len, 2);
  EXPECT_EQ(decode(0x8082, 64).op, Op::JALR);  // c.jr ra (ret)
  EXPECT_EQ(decode(0x9002, 64).op, Op::EBREAK);
  d = decode(0x2505, 32);  // c.jal on RV32
  EXPECT_EQ(d.op, Op::JAL);
  EXPECT_EQ(d.rd, 1);
  d = decode(0x2505, 64);  // the same bits are c.addiw a0, 1 on RV64
  EXPECT_EQ(d.op, Op::ADDIW);
  EXPECT_EQ(d.rd, 10);
  EXPECT_EQ(decode(0x2005, 64).op, Op::ILLEGAL);  // c.addiw with rd = 0 is reserved
  EXPECT_EQ(decode(0x6108, 64).op, Op::LD);  // c.ld a0, 0(a0)
  EXPECT_EQ(decode(0x6108, 32).op, Op::FLW);  // c.flw (illegal at execution on a hart without F)
  EXPECT_EQ(decode(0x0000, 64).op, Op::ILLEGAL);  // the all-zero halfword
  d = decode(0x1141, 64);  // c.addi sp, -16
  EXPECT_EQ(d.op, Op::ADDI);
  EXPECT_EQ(d.imm, -16);
  d = decode(0x7139, 64);  // c.addi16sp sp, -64
  EXPECT_EQ(d.op, Op::ADDI);
  EXPECT_EQ(d.rd, 2);
  EXPECT_EQ(d.imm, -64);
}

TEST(Decode, ReservedSystemEncodingsAreIllegal) {
  EXPECT_EQ(decode(0x10200073, 64).op, Op::SRET);  // (illegal at execution without S mode)
  EXPECT_EQ(decode(0x12000073, 64).op, Op::SFENCE_VMA);
  EXPECT_EQ(decode(0x12000173, 64).op, Op::ILLEGAL);  // sfence.vma with rd != 0
  EXPECT_EQ(decode(0x00004073, 64).op, Op::ILLEGAL);  // funct3 4 of SYSTEM
  EXPECT_EQ(decode(0xffffffff, 64).op, Op::ILLEGAL);
}

#include <tlm_utils/simple_target_socket.h>

#include "riscv/hart.hpp"
#include "riscv/riscv_cpu.hpp"

namespace {

// Memory that can swap its backing store and invalidates DMI when it does.
struct SwitchableRam : sc_core::sc_module {
  tlm_utils::simple_target_socket<SwitchableRam> socket{"socket"};
  std::vector<std::uint8_t> a = std::vector<std::uint8_t>(0x2000), b = std::vector<std::uint8_t>(0x2000);
  std::vector<std::uint8_t>* now = &a;
  explicit SwitchableRam(const sc_core::sc_module_name& n) : sc_core::sc_module(n) {
    socket.register_b_transport(this, &SwitchableRam::b_transport);
    socket.register_get_direct_mem_ptr(this, &SwitchableRam::dmi);
    socket.register_transport_dbg(this, &SwitchableRam::dbg);
    SC_HAS_PROCESS(SwitchableRam);
    SC_THREAD(swap);
  }
  void b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time&) {
    unsigned char* p = now->data() + t.get_address();
    if (t.is_read()) std::memcpy(t.get_data_ptr(), p, t.get_data_length());
    else std::memcpy(p, t.get_data_ptr(), t.get_data_length());
    t.set_response_status(tlm::TLM_OK_RESPONSE);
  }
  unsigned dbg(tlm::tlm_generic_payload& t) {
    sc_core::sc_time d;
    b_transport(t, d);
    return t.get_data_length();
  }
  bool dmi(tlm::tlm_generic_payload&, tlm::tlm_dmi& d) {
    d.set_dmi_ptr(now->data());
    d.set_start_address(0);
    d.set_end_address(now->size() - 1);
    d.allow_read_write();
    return true;
  }
  void swap() {
    wait(5, sc_core::SC_US);
    now = &b;
    socket->invalidate_direct_mem_ptr(0, ~0ull);
  }
};

}  // namespace

TEST(RiscvCpu, HonoursDmiInvalidation) {
  // lui t0, 1; lw t1, 0(t0); beqz t1, -4; wfi
  const std::uint32_t code[] = {0x000012b7, 0x0002a303, 0xfe030ee3, 0x10500073};
  SwitchableRam ram("ram");
  for (auto* m : {&ram.a, &ram.b}) std::memcpy(m->data(), code, sizeof code);
  ram.b[0x1000] = 0x55;  // only the new store has the flag
  tessera::riscv::RiscvCpu::Config c;
  c.reset_pc = 0;
  c.mtime_address = 0;
  tessera::riscv::RiscvCpu cpu("cpu", c);
  cpu.bus_initiator.bind(ram.socket);
  sc_core::sc_start(sc_core::sc_time(20, sc_core::SC_US));
  EXPECT_EQ(cpu.hart().reg(6), 0x55u) << "the load saw the new memory after the invalidation";
  EXPECT_TRUE(cpu.hart().sleeping());
  EXPECT_GT(cpu.hart().instret(), 100u) << "it polled through DMI until then";
}

TEST(Decode, FloatingPoint) {
  Decoded d = decode(0x002091d3, 64);  // fadd.s ft3, ft1, ft2, rtz
  EXPECT_EQ(d.op, Op::FADD_S);
  EXPECT_EQ(d.rd, 3);
  EXPECT_EQ(d.rs1, 1);
  EXPECT_EQ(d.rs2, 2);
  EXPECT_EQ(d.rm, 1);
  d = decode(0x6ac5b543, 32);  // fmadd.d fa0, fa1, fa2, fa3, rup
  EXPECT_EQ(d.op, Op::FMADD_D);
  EXPECT_EQ(d.rs3, 13);
  EXPECT_EQ(d.rm, 3);
  EXPECT_TRUE(is_double(d.op));
  d = decode(0xfe512e27, 64);  // fsw ft5, -4(sp)
  EXPECT_EQ(d.op, Op::FSW);
  EXPECT_EQ(d.imm, -4);
  EXPECT_EQ(d.rs2, 5);
  EXPECT_EQ(decode(0xc0200553, 64).op, Op::FCVT_L_S);
  EXPECT_EQ(decode(0xc0200553, 32).op, Op::ILLEGAL);  // no fcvt.l.s on RV32
  EXPECT_EQ(decode(0xe20785d3, 64).op, Op::FMV_X_D);
  EXPECT_EQ(decode(0xe20785d3, 32).op, Op::ILLEGAL);  // nor fmv.x.d
  EXPECT_EQ(decode(0x42008053, 64).op, Op::FCVT_D_S);
  EXPECT_EQ(decode(0x6ac5b543 ^ (3u << 25), 64).op, Op::ILLEGAL);  // fmt 2 (H) and 3 (Q): not here
  EXPECT_EQ(decode(0x5800f0d3 | (1u << 20), 64).op, Op::ILLEGAL);  // fsqrt.s with rs2 != 0
  // Compressed: c.fld, c.fsdsp on both; c.flw/c.fsw only on RV32 (RV64's c.ld/c.sd).
  d = decode(0x2900, 64);  // c.fld fs0, 16(a0)
  EXPECT_EQ(d.op, Op::FLD);
  EXPECT_EQ(d.rd, 8);
  EXPECT_EQ(d.imm, 16);
  d = decode(0xac22, 32);  // c.fsdsp fs0, 24(sp)
  EXPECT_EQ(d.op, Op::FSD);
  EXPECT_EQ(d.imm, 24);
  EXPECT_EQ(decode(0x6118, 64).op, Op::LD);   // c.ld a4, 0(a0)
  EXPECT_EQ(decode(0x6118, 32).op, Op::FLW);  // c.flw fa4, 0(a0)
  // Which operands are f registers.
  EXPECT_TRUE(fp_rd(Op::FCVT_S_W));
  EXPECT_FALSE(fp_rs1(Op::FCVT_S_W));
  EXPECT_FALSE(fp_rd(Op::FEQ_D));
  EXPECT_TRUE(fp_rs1(Op::FEQ_D));
  EXPECT_EQ(op_class(Op::FDIV_D), OpClass::fdiv);
  EXPECT_EQ(op_class(Op::FLD), OpClass::load);
}

#include "riscv/mmu.hpp"

TEST(Pmp, RegionsLocksAndMatching) {
  Pmp p(16, 64);
  EXPECT_TRUE(p.allows(0x1000, 4, kRead, true));    // nothing set: M may
  EXPECT_FALSE(p.allows(0x1000, 4, kRead, false));  // S/U may not
  // Entry 0 NAPOT 64 KiB at 0x80000000 RW; entry 1 TOR [0x80000000, 0x80010000) X (shadowed by 0).
  p.write_addr(0, (0x80000000ull >> 2) | ((0x10000 / 8) - 1));
  p.write_addr(1, 0x80010000ull >> 2);
  p.write_cfg(0, 0x18 | 3 | ((0x08 | 4) << 8));
  EXPECT_TRUE(p.allows(0x8000fff8, 8, kWrite, false));
  EXPECT_FALSE(p.allows(0x80000000, 4, kExec, false));  // the lowest matching entry decides
  EXPECT_FALSE(p.allows(0x8000fffc, 8, kRead, false));  // partly inside: fails, also for M
  EXPECT_FALSE(p.allows(0x8000fffc, 8, kRead, true));
  EXPECT_FALSE(p.allows(0x90000000, 4, kRead, false));  // no match
  // Locking entry 1 (TOR) locks pmpaddr0 too, and binds M.
  std::uint64_t cfg;
  p.write_cfg(0, 0x18 | 3 | ((0x80 | 0x08 | 4) << 8));
  p.write_addr(0, 0);
  EXPECT_EQ(p.read_addr(0), (0x80000000ull >> 2) | ((0x10000 / 8) - 1));
  p.write_cfg(0, 0);
  ASSERT_TRUE(p.read_cfg(0, cfg));
  EXPECT_EQ(cfg, (0x80u | 0x08u | 4u) << 8);  // entry 0 cleared, entry 1 kept
  EXPECT_TRUE(p.active(true));
  // Entry 1 is TOR from pmpaddr0's raw value (0x80007ffc) to 0x80010000, X only, locked: M may not read.
  EXPECT_FALSE(p.allows(0x8000fff0, 4, kRead, true));
  EXPECT_TRUE(p.allows(0x8000fff0, 4, kExec, true));
  EXPECT_TRUE(p.allows(0x80000000, 4, kRead, true));  // below it: no match
  EXPECT_FALSE(p.read_cfg(1, cfg));  // odd pmpcfg on RV64
  // NA4 and the NAPOT of every address.
  Pmp q(16, 32);
  q.write_addr(0, 0x1000 >> 2);
  q.write_cfg(0, 0x10 | 1);
  EXPECT_TRUE(q.allows(0x1000, 4, kRead, false));
  EXPECT_FALSE(q.allows(0x1004, 4, kRead, false));
  q.write_addr(1, 0xffffffffu);
  q.write_cfg(0, (0x10 | 1) | ((0x18 | 7) << 8));
  EXPECT_TRUE(q.allows(0xfffffffcull, 4, kWrite, false));
}

TEST(Sv39, WalkThroughAGigapageAndFourLevels) {
  // Tables in a map standing for memory: root at 0x1000.
  std::uint64_t mem[4][512] = {};
  auto read = [&](std::uint64_t pa, std::uint64_t& v) {
    if (pa < 0x1000 || pa >= 0x5000) return false;
    v = mem[(pa - 0x1000) / 4096][(pa % 4096) / 8];
    return true;
  };
  const std::uint64_t satp = (8ull << 60) | 1;
  mem[0][2] = ((0x80000000ull >> 12) << 10) | 0xcf;  // 1 GiB RWX A D
  mem[0][1] = ((0x2000ull >> 12) << 10) | 1;          // -> l1 at 0x2000
  mem[1][0] = ((0x3000ull >> 12) << 10) | 1;          // -> l0 at 0x3000
  mem[2][5] = ((0x12345000ull >> 12) << 10) | 0x43;   // R A
  Walk w = sv39_walk(satp, 0x80001234, kExec, false, false, false, read);
  EXPECT_EQ(w.result, Walk::ok);
  EXPECT_EQ(w.pa, 0x80001234u);
  EXPECT_EQ(w.level, 2u);
  w = sv39_walk(satp, 0x40005678, kRead, false, false, false, read);
  EXPECT_EQ(w.result, Walk::ok);
  EXPECT_EQ(w.pa, 0x12345678u);
  EXPECT_EQ(sv39_walk(satp, 0x40005678, kWrite, false, false, false, read).result, Walk::page_fault);
  EXPECT_EQ(sv39_walk(satp, 0x40005678, kRead, true, false, false, read).result, Walk::page_fault);  // not U
  EXPECT_EQ(sv39_walk(satp, 0x40006000, kRead, false, false, false, read).result, Walk::page_fault);  // invalid
  EXPECT_EQ(sv39_walk(satp, 0x4000000000ull, kRead, false, false, false, read).result, Walk::page_fault);
  mem[0][3] = ((0x9000ull >> 12) << 10) | 1;  // a table the bus refuses
  EXPECT_EQ(sv39_walk(satp, 0xc0000000ull, kRead, false, false, false, read).result, Walk::access_fault);
}
