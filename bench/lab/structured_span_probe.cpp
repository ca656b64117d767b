// cmt-lab-structured-span (lab, GPU): which host bytes CUDA looks at in a 2D or 3D copy of
// pageable rows, found by registering one page at a time around the rows and seeing whether the
// copy still succeeds. cmt leaves these copies to CUDA and first drops its own registrations on
// their host span (structured_copy.h); a registered page that CUDA looks at but cmt's span does
// not cover would make CUDA meet memory partly registered (session 28: the GPU safety suite's
// seed 6, a cuMemcpy3DAsync returning CUDA_ERROR_INVALID_VALUE under cmt).
//
// Rows of kWidth bytes kPitch apart, kHeight of them, from a buffer of pageable pages; for each
// place of one registered page (none; on the first row; between two rows; in the last row's
// padding, that is after its last byte but before kHeight * kPitch; across the box's end; after
// it; and, for 3D, inside the slice's extra rows when srcHeight > Height), prints the result of
// cuMemcpy2DAsync and cuMemcpy3DAsync both ways and whether the bytes arrived.
//
// usage: cmt-lab-structured-span   (not under cmt run: it registers pages itself)
#include <cuda.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda_check.h"

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kPitch = 4 * kPage;
constexpr std::size_t kWidth = kPage + 100;
constexpr std::size_t kHeight = 4;
constexpr std::size_t kExtraRows = 2;  // srcHeight - Height for the taller-slice 3D copy
constexpr std::size_t kLead = 64;      // the rows' start past a page boundary
constexpr std::size_t kBufferPages = 32;

struct Place {
  const char* name;
  long page;  // the registered page's index from the buffer's start; -1: none
};

struct Copy {
  const char* name;
  bool three_d;
  bool up;  // host to device
  std::size_t slice_rows;
};

CUresult run_copy(const Copy& c, unsigned char* rows, CUdeviceptr dev, CUstream s) {
  if (!c.three_d) {
    CUDA_MEMCPY2D m{};
    m.WidthInBytes = kWidth;
    m.Height = kHeight;
    if (c.up) {
      m.srcMemoryType = CU_MEMORYTYPE_HOST, m.srcHost = rows, m.srcPitch = kPitch;
      m.dstMemoryType = CU_MEMORYTYPE_DEVICE, m.dstDevice = dev, m.dstPitch = kWidth;
    } else {
      m.srcMemoryType = CU_MEMORYTYPE_DEVICE, m.srcDevice = dev, m.srcPitch = kWidth;
      m.dstMemoryType = CU_MEMORYTYPE_HOST, m.dstHost = rows, m.dstPitch = kPitch;
    }
    return cuMemcpy2DAsync(&m, s);
  }
  CUDA_MEMCPY3D m{};
  m.WidthInBytes = kWidth;
  m.Height = kHeight;
  m.Depth = 1;
  if (c.up) {
    m.srcMemoryType = CU_MEMORYTYPE_HOST, m.srcHost = rows, m.srcPitch = kPitch;
    m.srcHeight = c.slice_rows;
    m.dstMemoryType = CU_MEMORYTYPE_DEVICE, m.dstDevice = dev, m.dstPitch = kWidth;
    m.dstHeight = kHeight;
  } else {
    m.srcMemoryType = CU_MEMORYTYPE_DEVICE, m.srcDevice = dev, m.srcPitch = kWidth;
    m.srcHeight = kHeight;
    m.dstMemoryType = CU_MEMORYTYPE_HOST, m.dstHost = rows, m.dstPitch = kPitch;
    m.dstHeight = c.slice_rows;
  }
  return cuMemcpy3DAsync(&m, s);
}

// One copy with one page registered: its result and whether its bytes arrived.
void probe(const Copy& c, const Place& at, unsigned char* buffer, CUdeviceptr dev,
           unsigned char* pinned, CUstream s) {
  unsigned char* rows = buffer + kLead;
  unsigned char* page = at.page >= 0 ? buffer + at.page * kPage : nullptr;
  CUresult reg = CUDA_SUCCESS;
  if (page) reg = cuMemHostRegister(page, kPage, 0);
  std::vector<unsigned char> want(kHeight * kWidth);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = static_cast<unsigned char>(i * 7 + 3);
  if (c.up) {
    for (std::size_t r = 0; r < kHeight; ++r)
      std::memcpy(rows + r * kPitch, want.data() + r * kWidth, kWidth);
  } else {
    std::memcpy(pinned, want.data(), want.size());
    CMT_CHECK_CU(cuMemcpyHtoD(dev, pinned, want.size()));
    for (std::size_t r = 0; r < kHeight; ++r) std::memset(rows + r * kPitch, 0, kWidth);
  }
  const CUresult result = run_copy(c, rows, dev, s);
  CMT_CHECK_CU(cuStreamSynchronize(s));
  bool arrived = false;
  if (result == CUDA_SUCCESS) {
    arrived = true;
    if (c.up) {
      CMT_CHECK_CU(cuMemcpyDtoH(pinned, dev, want.size()));
      arrived = std::memcmp(pinned, want.data(), want.size()) == 0;
    } else {
      for (std::size_t r = 0; r < kHeight; ++r)
        arrived &= std::memcmp(rows + r * kPitch, want.data() + r * kWidth, kWidth) == 0;
    }
  }
  std::printf("%-24s %-40s register %d  copy %d  bytes %s\n", c.name, at.name, int(reg),
              int(result), result == CUDA_SUCCESS ? (arrived ? "right" : "WRONG") : "-");
  if (page && reg == CUDA_SUCCESS) CMT_CHECK_CU(cuMemHostUnregister(page));
  CMT_CHECK_CU(cuMemsetD8(dev, 0, want.size()));
}

}  // namespace

int main() {
  CMT_CHECK_CU(cuInit(0));
  CUdevice device;
  CMT_CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext ctx;
  CMT_CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, device));
  CMT_CHECK_CU(cuCtxSetCurrent(ctx));
  CUstream s;
  CMT_CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr dev;
  CMT_CHECK_CU(cuMemAlloc(&dev, kHeight * kPitch));
  void* pinned = nullptr;
  CMT_CHECK_CU(cuMemAllocHost(&pinned, kHeight * kPitch));
  void* map = mmap(nullptr, kBufferPages * kPage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return 1;
  auto* buffer = static_cast<unsigned char*>(map);
  std::memset(buffer, 1, kBufferPages * kPage);

  // Page indices from the buffer's start; the rows start kLead bytes into page 0.
  const std::size_t last_row_end = kLead + (kHeight - 1) * kPitch + kWidth;  // cmt's span's end
  const std::size_t box_end = kLead + kHeight * kPitch;                      // pitch x height
  const std::size_t tall_end = kLead + (kHeight + kExtraRows) * kPitch;
  const long padding_page = static_cast<long>((last_row_end + kPage - 1) / kPage);
  const long across_page = static_cast<long>(box_end / kPage);  // holds the box's last byte
  std::printf("rows: %zu of %zu bytes, pitch %zu, from byte %zu; last row ends at byte %zu, "
              "pitch x height at %zu; pages of %zu bytes\n",
              kHeight, kWidth, kPitch, kLead, last_row_end, box_end, kPage);
  const Place places[] = {
      {"none", -1},
      {"first row (page 0)", 0},
      {"between rows 0 and 1 (page 2)", 2},
      {"last row's padding", padding_page},
      {"across the box's end", across_page},
      {"after the box", across_page + 1},
      {"in the taller slice's extra rows", static_cast<long>((box_end + kPage) / kPage + 1)},
      {"after the taller slice", static_cast<long>(tall_end / kPage + 1)},
  };
  const Copy copies[] = {
      {"2D up", false, true, kHeight},       {"2D down", false, false, kHeight},
      {"3D up", true, true, kHeight},        {"3D down", true, false, kHeight},
      {"3D up, taller slice", true, true, kHeight + kExtraRows},
      {"3D down, taller slice", true, false, kHeight + kExtraRows},
  };
  for (const Copy& c : copies)
    for (const Place& at : places) probe(c, at, buffer, dev, static_cast<unsigned char*>(pinned), s);
  return 0;
}
