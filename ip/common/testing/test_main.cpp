// sc_main of every GoogleTest binary: each test runs in its own process
// under CTest, so it may elaborate a platform of its own.
#include <gtest/gtest.h>

#include <systemc>

#include "common/log.hpp"

int sc_main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  tessera::log::install_handler();
  return RUN_ALL_TESTS();
}
