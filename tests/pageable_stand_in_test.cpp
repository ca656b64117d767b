// The stand-in for pointer queries about pages cmt registered (interposer/pageable_stand_in.h):
// same offset in its page, and addresses in CUDA's answer moved back to the program's page.
#include "interposer/pageable_stand_in.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>

namespace cmt {
namespace {

const std::uintptr_t kPage = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));

TEST(PageableStandIn, KeepsTheOffsetInThePage) {
  const std::uintptr_t p = 0x7f0000000000 + 5 * kPage + 123;
  const std::uintptr_t s = pageable_stand_in(p);
  EXPECT_EQ(s & (kPage - 1), std::uintptr_t{123});
  EXPECT_NE(s / kPage, p / kPage);
  EXPECT_EQ(pageable_stand_in(p + kPage), s);  // one stand-in page for every page
}

TEST(PageableStandIn, AddressesInTheAnswerMoveBackToTheProgramsPage) {
  const std::uintptr_t p = 0x7f0000000000 + 7 * kPage + 16;
  const std::uintptr_t s = pageable_stand_in(p);
  std::uintptr_t host = s;  // pageable memory: the host pointer is the address asked about
  move_back_answer(CU_POINTER_ATTRIBUTE_HOST_POINTER, &host, s, p);
  EXPECT_EQ(host, p);
  std::uintptr_t start = s - 16;  // an address elsewhere in the stand-in's page
  move_back_answer(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, &start, s, p);
  EXPECT_EQ(start, p - 16);
  CUdeviceptr device = s + 8;
  move_back_address(&device, s, p);
  EXPECT_EQ(device, p + 8);
}

TEST(PageableStandIn, OtherValuesAndAttributesAreLeftAlone) {
  const std::uintptr_t p = 0x7f0000000000 + 3 * kPage;
  const std::uintptr_t s = pageable_stand_in(p);
  std::uintptr_t zero = 0, far = s + 2 * kPage;
  move_back_answer(CU_POINTER_ATTRIBUTE_HOST_POINTER, &zero, s, p);
  move_back_answer(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, &far, s, p);
  EXPECT_EQ(zero, 0u);
  EXPECT_EQ(far, s + 2 * kPage);
  unsigned type = 0;  // a 4-byte value: never read as an address
  move_back_answer(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, &type, s, p);
  EXPECT_EQ(type, 0u);
  std::uintptr_t same = s;  // an attribute that holds no address keeps its value
  move_back_answer(CU_POINTER_ATTRIBUTE_BUFFER_ID, &same, s, p);
  EXPECT_EQ(same, s);
  move_back_answer(CU_POINTER_ATTRIBUTE_HOST_POINTER, nullptr, s, p);  // no data: nothing
}

}  // namespace
}  // namespace cmt
