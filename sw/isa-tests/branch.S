/* Control transfer: branches taken and not taken, jal/jalr link values,
 * jalr clearing bit 0. */
#include "test.h"
#define TEST_BR(n, op, a, b, taken)      \
  CHECK(n); li t1, a; li t2, b; li t0, 0; \
  op t1, t2, 1f; li t0, 1; 1:             \
  EXPECT(t0, 1 - taken)
TEST_BEGIN
  TEST_BR(1, beq, 5, 5, 1)
  TEST_BR(2, beq, 5, 6, 0)
  TEST_BR(3, bne, 5, 6, 1)
  TEST_BR(4, bne, 5, 5, 0)
  TEST_BR(5, blt, -1, 0, 1)
  TEST_BR(6, blt, 0, -1, 0)
  TEST_BR(7, bge, 0, -1, 1)
  TEST_BR(8, bge, 3, 3, 1)
  TEST_BR(9, bge, -2, -1, 0)
  TEST_BR(10, bltu, 0, -1, 1)
  TEST_BR(11, bltu, -1, 0, 0)
  TEST_BR(12, bgeu, -1, 0, 1)
  TEST_BR(13, bgeu, 0, 1, 0)
  CHECK(14); jal t0, 2f; 1: j test_fail; 2: la t1, 1b; EXPECT_REG(t0, t1)
  CHECK(15); la t1, 3f; jalr t0, 0(t1); 2: j test_fail; 3: la t1, 2b; EXPECT_REG(t0, t1)
  CHECK(16); la t1, 4f; addi t1, t1, 1; jalr x0, 0(t1); j test_fail; 4:  /* bit 0 cleared */
  CHECK(17); la t1, 5f; addi t1, t1, -4; jalr t0, 4(t1); j test_fail; 5:  /* offset added */
  CHECK(18); li t0, 0; jal x0, 6f; li t0, 1; 6: EXPECT(t0, 0)
  /* A backward branch loop. */
  CHECK(19); li t0, 0; li t1, 10; 7: addi t0, t0, 1; blt t0, t1, 7b; EXPECT(t0, 10)
TEST_END
