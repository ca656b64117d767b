// What CUDA 12.8's cuMemcpyBatchAsync writes to failIdx, on success and on failure, one case per
// process (CUDA may crash on a bad one), printed as a line, so that failidx.sh can compare a run
// under cmt with one without (issue 31, finding 9). The form with failIdx is reached as old
// programs reach it: cuGetProcAddress at version 12080. Cases (every copy host to device,
// pageable sources; "large" is 8 MiB, which cmt takes; "small" 4 KiB, which it leaves to CUDA):
//   all-large     three large copies, all fine
//   mixed         small, large, small, large, all fine
//   freed         large, large, a copy into a freed device allocation, large
//   zero-size     large, a copy of 0 bytes, large
//   bad-address   a copy to device address 0x10, then two large
//   no-copies     count 0 (the whole batch refused)
// Each starts with failIdx set to 777. Exit 77 without a GPU or without the 12.8 form.
//
// usage: failidx_app CASE
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using BatchV1 = CUresult (*)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*,
                             size_t*, size_t, size_t*, CUstream);

constexpr size_t kLarge = 8u << 20, kSmall = 4096;
constexpr size_t kBad = SIZE_MAX;  // in a case's sizes: the bad copy

struct Case {
  const char* name;
  std::vector<size_t> sizes;
  CUdeviceptr bad_dst;  // where the bad copy goes
  size_t bad_size;
};

void run(BatchV1 batch, CUstream stream, CUdeviceptr dev, const Case& c) {
  const size_t count = c.sizes.size();
  std::vector<std::vector<char>> host(count);
  std::vector<CUdeviceptr> dsts(count), srcs(count);
  std::vector<size_t> sizes(count);
  size_t offset = 0;
  for (size_t i = 0; i < count; ++i) {
    const bool bad = c.sizes[i] == kBad;
    sizes[i] = bad ? c.bad_size : c.sizes[i];
    host[i].assign(sizes[i] + 1, static_cast<char>(i + 1));
    srcs[i] = reinterpret_cast<CUdeviceptr>(host[i].data());
    dsts[i] = bad ? c.bad_dst : dev + offset;
    offset += sizes[i];
  }
  CUmemcpyAttributes attr{};
  attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  attr.srcLocHint.type = CU_MEM_LOCATION_TYPE_HOST;
  attr.dstLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
  size_t attr_idx = 0;
  size_t fail = 777;
  const CUresult r = batch(count ? dsts.data() : nullptr, count ? srcs.data() : nullptr,
                           count ? sizes.data() : nullptr, count, &attr, &attr_idx, 1, &fail,
                           stream);
  const CUresult s = cuStreamSynchronize(stream);
  std::printf("%s: result %d, failIdx %s%zu, synchronize %d\n", c.name, static_cast<int>(r),
              fail == SIZE_MAX ? "SIZE_MAX " : "", fail == SIZE_MAX ? size_t{0} : fail,
              static_cast<int>(s));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CASE\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, nullptr, _IONBF, 0);
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  int count = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    std::printf("no GPU\n");
    return 77;
  }
  cuDeviceGet(&dev, 0);
  cuDevicePrimaryCtxRetain(&ctx, dev);
  cuCtxSetCurrent(ctx);
  void* fn = nullptr;
  CUdriverProcAddressQueryResult found{};
  if (cuGetProcAddress("cuMemcpyBatchAsync", &fn, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &found) !=
          CUDA_SUCCESS ||
      !fn) {
    std::printf("no cuMemcpyBatchAsync at 12.8\n");
    return 77;
  }
  CUstream stream = nullptr;
  CUdeviceptr buf = 0;
  if (cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
      cuMemAlloc(&buf, 64u << 20) != CUDA_SUCCESS)
    return 1;
  CUdeviceptr freed = 0;
  if (cuMemAlloc(&freed, kLarge) != CUDA_SUCCESS || cuMemFree(freed) != CUDA_SUCCESS) return 1;
  const Case cases[] = {{"all-large", {kLarge, kLarge, kLarge}, 0, 0},
                        {"mixed", {kSmall, kLarge, kSmall, kLarge}, 0, 0},
                        {"freed", {kLarge, kLarge, kBad, kLarge}, freed, kLarge},
                        {"zero-size", {kLarge, kBad, kLarge}, buf + (40u << 20), 0},
                        {"bad-address", {kBad, kLarge, kLarge}, 0x10, kLarge},
                        {"no-copies", {}, 0, 0}};
  for (const Case& c : cases)
    if (std::strcmp(c.name, argv[1]) == 0) {
      run(reinterpret_cast<BatchV1>(fn), stream, buf, c);
      return 0;
    }
  std::fprintf(stderr, "unknown case %s\n", argv[1]);
  return 2;
}
