// sc_main of every GoogleTest binary: each test runs in its own process
// under CTest, so it may elaborate a platform of its own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <systemc>

#include "common/log.hpp"

namespace {
const bool kNoBanner = ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0) == 0;
}

int sc_main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  tessera::log::install_handler();
  return RUN_ALL_TESTS();
}
