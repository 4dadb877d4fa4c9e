# The ISA test programs, read by the RISC-V build (to build them) and by the
# host build (to run them). Each is built for RV32 and RV64.
set(TESSERA_ISA_TESTS alu branch mem muldiv atomic compressed csr priv fencei misaligned smp fpu smode pmp sv39 trigger harness_selftest)
