# The SDK: `cmake --install <build> [--prefix P]` puts under the prefix
#   bin/                      tessera-vp, tessera-demo, tessera-onnx, tessera-reggen
#   lib/tessera/              the libraries (static), for host programs
#   include/tessera/          the runtime's headers (tessera/runtime.hpp),
#                             ip/ (an IP's framework and models), platform/
#                             (the session) and regs/ (generated registers)
#   share/tessera/platform/   the platform and system files, HBM timings
#   share/tessera/firmware/   the firmware built here (cmdproc, hello, ...)
#   share/tessera/kernels/    the tile kernels built here
#   share/tessera/bsp/, kernel-sdk/, platform-headers/t1/
#                             the firmware side: sources of the BSP and the
#                             kernel SDK, the default platform's memory map
#   share/tessera/examples/   out-of-tree projects (examples/)
#   lib/cmake/Tessera/        the CMake package (find_package(Tessera)),
#                             riscv-toolchain.cmake for firmware projects
# and `cpack` makes a Debian package of the same (cmake/package.cmake).
include(CMakePackageConfigHelpers)
set(TESSERA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera)
set(TESSERA_SHARE ${CMAKE_INSTALL_DATADIR}/tessera)
set(TESSERA_INCLUDE ${CMAKE_INSTALL_INCLUDEDIR}/tessera)

# Programs and libraries, with their usage requirements (TesseraTargets.cmake).
set_target_properties(tessera_reggen PROPERTIES OUTPUT_NAME tessera-reggen EXPORT_NAME reggen)
foreach(t common plugin_api platform session runtime)
  set_target_properties(tessera_${t} PROPERTIES EXPORT_NAME ${t})
endforeach()
get_property(ip_libs GLOBAL PROPERTY TESSERA_IP_LIBS)
install(TARGETS tessera-vp tessera-demo tessera_reggen EXPORT TesseraTargets)
install(TARGETS tessera-onnx)  # tessera-vp run (an application, not part of the SDK's libraries)
install(TARGETS tessera_common tessera_plugin_api ${ip_libs}
                tessera_num tessera_engine tessera_tensor tessera_vector tessera_dma tessera_riscv tessera_scratchpad tessera_rtl
                tessera_platform tessera_session tessera_runtime
        EXPORT TesseraTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}/tessera)
install(EXPORT TesseraTargets NAMESPACE Tessera:: DESTINATION ${TESSERA_CMAKE_DIR})

# Headers.
install(DIRECTORY ip/ DESTINATION ${TESSERA_INCLUDE}/ip FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h"
        PATTERN tests EXCLUDE PATTERN testing EXCLUDE)
install(DIRECTORY platform/ DESTINATION ${TESSERA_INCLUDE}/platform FILES_MATCHING PATTERN "*.hpp")
install(DIRECTORY ${TESSERA_GENERATED_DIR}/regs/ DESTINATION ${TESSERA_INCLUDE}/regs
        FILES_MATCHING PATTERN "*_regs.hpp" PATTERN "*_regs.h")
install(DIRECTORY sw/runtime/include/tessera DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# Data the programs find (common/paths.hpp).
install(DIRECTORY platform/ DESTINATION ${TESSERA_SHARE}/platform FILES_MATCHING PATTERN "*.json")
install(DIRECTORY ${TESSERA_TARGET_DIR}/firmware/ DESTINATION ${TESSERA_SHARE}/firmware FILES_MATCHING PATTERN "*.elf")
install(DIRECTORY ${TESSERA_TARGET_DIR}/kernels/ DESTINATION ${TESSERA_SHARE}/kernels FILES_MATCHING PATTERN "*.elf")

# The firmware side.
install(DIRECTORY sw/firmware/bsp/ DESTINATION ${TESSERA_SHARE}/bsp)
install(DIRECTORY sw/kernels/sdk/ DESTINATION ${TESSERA_SHARE}/kernel-sdk)
install(DIRECTORY ${TESSERA_GENERATED_DIR}/platform/t1 DESTINATION ${TESSERA_SHARE}/platform-headers)
install(DIRECTORY examples/ DESTINATION ${TESSERA_SHARE}/examples)
install(DIRECTORY ${TESSERA_GENERATED_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/registers)

# The CMake package.
configure_package_config_file(cmake/TesseraConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/TesseraConfig.cmake
  INSTALL_DESTINATION ${TESSERA_CMAKE_DIR}
  PATH_VARS TESSERA_SHARE TESSERA_INCLUDE CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/TesseraConfigVersion.cmake COMPATIBILITY ExactVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/TesseraConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/TesseraConfigVersion.cmake
              cmake/TesseraFunctions.cmake cmake/TesseraFirmware.cmake cmake/riscv-toolchain.cmake
        DESTINATION ${TESSERA_CMAKE_DIR})
include(cmake/package.cmake)
