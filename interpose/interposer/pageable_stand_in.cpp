#include "interposer/pageable_stand_in.h"

#include <unistd.h>

#include <cstddef>

namespace cmt {
namespace {

// As large as the largest page a Linux machine uses (64 KiB on some ARM kernels), so that the
// stand-in keeps any offset within a page. In libcmt's .bss, which no program registers and cmt
// never copies.
constexpr std::size_t kMostPage = 64u << 10;
alignas(4096) unsigned char g_stand_in[kMostPage];

std::uintptr_t page_size() {
  static const auto size = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  return size > 0 && size <= kMostPage ? size : kMostPage;
}

// `value` moved from the stand-in's image of `p`'s page to that page, if it lies in it.
std::uintptr_t moved_back(std::uintptr_t value, std::uintptr_t stand_in, std::uintptr_t p) {
  const std::uintptr_t page = page_size();
  const std::uintptr_t image = stand_in - (p & (page - 1));
  if (value < image || value - image >= page) return value;
  return value - stand_in + p;
}

}  // namespace

std::uintptr_t pageable_stand_in(std::uintptr_t p) {
  return reinterpret_cast<std::uintptr_t>(g_stand_in) + (p & (page_size() - 1));
}

void move_back_answer(CUpointer_attribute attribute, void* value, std::uintptr_t stand_in,
                      std::uintptr_t p) {
  if (!value) return;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: {
      auto* v = static_cast<std::uintptr_t*>(value);
      *v = moved_back(*v, stand_in, p);
      break;
    }
    default:
      break;
  }
}

void move_back_address(CUdeviceptr* value, std::uintptr_t stand_in, std::uintptr_t p) {
  if (value)
    *value = static_cast<CUdeviceptr>(moved_back(static_cast<std::uintptr_t>(*value), stand_in, p));
}

}  // namespace cmt
