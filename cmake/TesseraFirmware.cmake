# Building for the chip: control-processor firmware and tile kernels, with
# Debian's riscv64-unknown-elf-gcc and picolibc (riscv-toolchain.cmake sets
# them up, and picolibc's specs, once). The same functions in this tree
# (sw/target) and in an installed SDK (find_package(Tessera) in a project
# configured with -DCMAKE_TOOLCHAIN_FILE=<prefix>/lib/cmake/Tessera/riscv-toolchain.cmake).
#
#   TESSERA_BSP_DIR              the board support package: crt0, trap entry,
#                                drivers, bsp.h and the firmware's link.ld
#   TESSERA_KERNEL_SDK_DIR       the kernel SDK: crt0, link.ld, tessera_kernel.h
#   TESSERA_REGS_DIR             the generated register headers (<block>_regs.h)
#   TESSERA_PLATFORM_HEADERS_DIR <dir>/t1/tessera_platform.{h,ld}: the default
#                                platform's memory map (tessera_platform_headers
#                                makes one for a platform of your own)

# Multilib-matching flags (see TOOLCHAIN.md): the CP is RV64, tile cores RV32.
set(TESSERA_RV64 -march=rv64imac -mabi=lp64 -misa-spec=2.2 -mcmodel=medany)
set(TESSERA_RV32 -march=rv32imac -mabi=ilp32 -misa-spec=2.2)
# With F and D in hardware and the double-float ABI (the CP is RV64GC):
# rv64imafdc/lp64d is the toolchain's default multilib.
set(TESSERA_RV64_FPU -march=rv64imafdc -mabi=lp64d -misa-spec=2.2 -mcmodel=medany)
set(TESSERA_RV32_FPU -march=rv32imafdc -mabi=ilp32d -misa-spec=2.2)

# tessera_bsp(<name> [XLEN 32|64] [FPU] [PLATFORM_DIR dir] [DEPENDS target])
# The BSP built for one platform's memory map (default: t1) and one XLEN
# (default 64; any hart can be made RV32 from the platform file); with FPU,
# for firmware that uses F and D (hard-float ABI: the FPU switched on at
# reset, FP registers saved around trap handlers).
function(tessera_bsp name)
  cmake_parse_arguments(B "FPU" "XLEN;PLATFORM_DIR" "DEPENDS" ${ARGN})
  if(NOT B_XLEN)
    set(B_XLEN 64)
  endif()
  set(flags ${TESSERA_RV${B_XLEN}})
  if(B_FPU)
    set(flags ${TESSERA_RV${B_XLEN}_FPU})
  endif()
  if(NOT B_PLATFORM_DIR)
    set(B_PLATFORM_DIR ${TESSERA_PLATFORM_HEADERS_DIR}/t1)
  endif()
  set(d ${TESSERA_BSP_DIR})
  add_library(${name} STATIC ${d}/crt0.S ${d}/trap.S ${d}/bsp.c ${d}/drivers.c)
  target_compile_options(${name} PUBLIC ${flags} -ffunction-sections -fdata-sections)
  target_include_directories(${name} PUBLIC ${d} ${TESSERA_REGS_DIR} ${B_PLATFORM_DIR})
  target_link_options(${name} PUBLIC ${flags} -nostartfiles -Wl,--gc-sections
                      -L${B_PLATFORM_DIR} -T${d}/link.ld)
  set_target_properties(${name} PROPERTIES INTERFACE_LINK_DEPENDS ${d}/link.ld)
  if(B_DEPENDS)
    add_dependencies(${name} ${B_DEPENDS})
  endif()
endfunction()

# tessera_firmware(<name> [XLEN 32|64] [FPU] [BSP bsp] [DEFINES ...] SOURCES ...): <name>.elf
# Without BSP, the default platform's BSP for the XLEN, with or without
# the FPU (made on first use).
function(tessera_firmware name)
  cmake_parse_arguments(F "FPU" "XLEN;BSP" "SOURCES;DEFINES" ${ARGN})
  if(NOT F_XLEN)
    set(F_XLEN 64)
  endif()
  if(NOT F_BSP)
    if(F_FPU)
      set(F_BSP bsp${F_XLEN}_fpu)
      if(NOT TARGET ${F_BSP})
        tessera_bsp(${F_BSP} XLEN ${F_XLEN} FPU)
      endif()
    else()
      set(F_BSP bsp${F_XLEN})
      if(NOT TARGET ${F_BSP})
        tessera_bsp(${F_BSP} XLEN ${F_XLEN})
      endif()
    endif()
  endif()
  add_executable(${name} ${F_SOURCES})
  target_link_libraries(${name} PRIVATE ${F_BSP})
  target_compile_definitions(${name} PRIVATE ${F_DEFINES})
  set_target_properties(${name} PROPERTIES SUFFIX .elf)
endfunction()

# tessera_kernel_sdk(<name> [PLATFORM_DIR dir] [DEPENDS target])
# The kernel SDK (start-up code and linker script of a tile's core) for one
# platform's memory map (default: t1).
function(tessera_kernel_sdk name)
  cmake_parse_arguments(K "" "PLATFORM_DIR" "DEPENDS" ${ARGN})
  if(NOT K_PLATFORM_DIR)
    set(K_PLATFORM_DIR ${TESSERA_PLATFORM_HEADERS_DIR}/t1)
  endif()
  set(d ${TESSERA_KERNEL_SDK_DIR})
  add_library(${name} STATIC ${d}/crt0.S)
  target_compile_options(${name} PUBLIC ${TESSERA_RV32} -ffunction-sections -fdata-sections)
  target_include_directories(${name} PUBLIC ${d} ${TESSERA_REGS_DIR} ${K_PLATFORM_DIR})
  target_link_options(${name} PUBLIC ${TESSERA_RV32} -nostartfiles -Wl,--gc-sections -Wl,--no-warn-rwx-segments
                      -L${K_PLATFORM_DIR} -T${d}/link.ld)
  set_target_properties(${name} PROPERTIES INTERFACE_LINK_DEPENDS ${d}/link.ld)
  if(K_DEPENDS)
    add_dependencies(${name} ${K_DEPENDS})
  endif()
endfunction()

# tessera_kernel(<name> [SDK sdk] SOURCES ...): <name>.elf, for a tile's RV32 core.
# Without SDK, the default platform's (made on first use).
function(tessera_kernel name)
  cmake_parse_arguments(K "" "SDK" "SOURCES" ${ARGN})
  if(NOT K_SDK)
    set(K_SDK kernel_sdk)
    if(NOT TARGET kernel_sdk)
      tessera_kernel_sdk(kernel_sdk)
    endif()
  endif()
  add_executable(${name} ${K_SOURCES})
  target_link_libraries(${name} PRIVATE ${K_SDK})
  set_target_properties(${name} PROPERTIES SUFFIX .elf)
endfunction()
