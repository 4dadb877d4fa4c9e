# Helpers shared by every IP: one call adds an IP with its register
# description, its library, its tests and its factory registration.

set(TESSERA_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)
file(MAKE_DIRECTORY ${TESSERA_GENERATED_DIR}/regs ${TESSERA_GENERATED_DIR}/docs)
# What cmake/TesseraFunctions.cmake builds with here (an installed SDK sets
# the same names to its own programs and targets).
set(TESSERA_REGGEN tessera_reggen)
set(TESSERA_VP tessera-vp)
set(TESSERA_PLUGIN_API tessera_plugin_api)
set(TESSERA_VERSION ${PROJECT_VERSION})
include(${CMAKE_CURRENT_LIST_DIR}/TesseraFunctions.cmake)
# The IPs' headers, here and installed (include/tessera/ip).
set(TESSERA_IP_INCLUDES $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/ip> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/tessera/ip>)

function(tessera_warnings target)
  if(TESSERA_WARNINGS)
    target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wno-unused-parameter)
  endif()
endfunction()

# tessera_add_ip(<name> SOURCES ... [REGS file.regs.json ...] [TESTS ...] [DEPS ...])
# Library tessera_ip_<name>; its TESTS become test_<name> under CTest (label unit).
# Every IP library is linked whole into tessera_ips, so the factory
# registration in the IP's source is all it takes to make the type known.
function(tessera_add_ip name)
  cmake_parse_arguments(IP "" "" "SOURCES;REGS;TESTS;DEPS" ${ARGN})
  set(lib tessera_ip_${name})
  add_library(${lib} STATIC ${IP_SOURCES})
  target_include_directories(${lib} PUBLIC ${TESSERA_IP_INCLUDES})
  target_link_libraries(${lib} PUBLIC tessera_common ${IP_DEPS})
  tessera_warnings(${lib})
  foreach(r ${IP_REGS})
    tessera_regs(${lib} ${r})
  endforeach()
  set_property(GLOBAL APPEND PROPERTY TESSERA_IP_LIBS ${lib})
  if(IP_TESTS)
    tessera_add_test(test_${name} LABELS unit SOURCES ${IP_TESTS} LIBS ${lib})
  endif()
endfunction()

# tessera_add_test(<name> SOURCES ... LIBS ... [LABELS ...])
# A GoogleTest binary whose sc_main runs the tests; CTest runs each test in
# its own process so each may elaborate its own small platform.
function(tessera_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  if(TESSERA_FUZZ)  # the fuzz preset builds no tests (the target exists for the calls that follow)
    add_executable(${name} EXCLUDE_FROM_ALL ${T_SOURCES})
    return()
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} tessera_test_main)
  tessera_warnings(${name})
  gtest_discover_tests(${name} PROPERTIES LABELS "${T_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()
