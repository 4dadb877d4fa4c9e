# Debian's bare-metal RISC-V toolchain with picolibc, for firmware, kernels
# and ISA tests (built as a separate CMake project, see sw/CMakeLists.txt;
# installed as lib/cmake/Tessera/riscv-toolchain.cmake for projects of your
# own). picolibc's specs go into the flags CMake uses for compiling and
# linking alike, once (TOOLCHAIN.md).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR riscv)
set(CMAKE_C_COMPILER riscv64-unknown-elf-gcc)
set(CMAKE_ASM_COMPILER riscv64-unknown-elf-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(CMAKE_C_FLAGS_INIT "--specs=picolibc.specs")
set(CMAKE_ASM_FLAGS_INIT "--specs=picolibc.specs")
