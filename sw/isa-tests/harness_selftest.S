/* Proves that the harness can fail: check 3 is wrong on purpose, and the
 * run must end with "FAIL: test 3" (CTest expects exactly that). */
#include "test.h"
TEST_BEGIN
  TEST_RR(1, add, 3, 1, 2)
  TEST_RR(2, sub, 1, 3, 2)
  TEST_RR(3, add, 5, 2, 2)
  TEST_RR(4, add, 4, 2, 2)
TEST_END
