// Asks a libcuda (argument: its path; getproc_hook.sh passes the fake one) for copy functions
// through cuGetProcAddress_v2, as cudart and XLA do, prints where each answer lives, then calls
// them and prints what the library counted. Under libcmt.so the exact 64-bit variants must come
// back as cmt's hooks (and each call reach the library once); everything else must be as without.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <vector>

#undef cuGetProcAddress

namespace {

const char* owner(void* fn) {
  Dl_info info{};
  if (!fn || !dladdr(fn, &info) || !info.dli_fname) return "none";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::printf("cannot open %s\n", argv[1]);
    return 1;
  }
  using Get = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get = reinterpret_cast<Get>(dlsym(lib, "cuGetProcAddress_v2"));
  std::printf("hooked: cuGetProcAddress_v2 from dlsym: %s\n", owner(reinterpret_cast<void*>(get)));
  struct Query {
    const char* label;
    const char* symbol;
    int version;
    cuuint64_t flags;
    bool hooked;  // cmt has a hook of exactly the variant the library returns
  };
  const Query queries[] = {
      {"cuMemcpyHtoD, CUDA 12", "cuMemcpyHtoD", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, true},
      {"cuMemcpyHtoD, per-thread", "cuMemcpyHtoD", 12000,
       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, true},
      {"cuMemcpyHtoD, CUDA 3.0 (32-bit)", "cuMemcpyHtoD", 3000, 0, false},
      {"cuMemAlloc", "cuMemAlloc", 12000, 0, false},
      {"cuGetProcAddress", "cuGetProcAddress", 12000, 0, true},
      {"cuNoSuchFunction", "cuNoSuchFunction", 12000, 0, false},
      {"cuDevicePrimaryCtxReset, CUDA 10", "cuDevicePrimaryCtxReset", 10000, 0, true},
      {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset", 12000, 0, true},
      {"cuGreenCtxDestroy", "cuGreenCtxDestroy", 12040, 0, true},
  };
  constexpr int kQueries = sizeof(queries) / sizeof(queries[0]);
  void* fns[kQueries] = {};
  for (int i = 0; i < kQueries; ++i) {
    CUdriverProcAddressQueryResult status{};
    CUresult r = get(queries[i].symbol, &fns[i], queries[i].version, queries[i].flags, &status);
    std::printf("%s%s: rc %d, status %d, from %s\n", queries[i].hooked ? "hooked: " : "",
                queries[i].label, static_cast<int>(r), static_cast<int>(status), owner(fns[i]));
  }
  // Each copy function once, with a size cmt would take if it could.
  std::vector<char> host(8 << 20, 1);
  using HtoD = CUresult (*)(CUdeviceptr, const void*, size_t);
  using HtoD32 = CUresult (*)(unsigned int, const void*, size_t);
  std::printf("call v2: rc %d\n",
              static_cast<int>(reinterpret_cast<HtoD>(fns[0])(4096, host.data(), host.size())));
  std::printf("call v2_ptds: rc %d\n",
              static_cast<int>(reinterpret_cast<HtoD>(fns[1])(4096, host.data(), host.size())));
  std::printf("call legacy: rc %d\n",
              static_cast<int>(reinterpret_cast<HtoD32>(fns[2])(4096, host.data(), 1000)));
  int v2 = 0, ptds = 0, legacy = 0;
  size_t last = 0;
  reinterpret_cast<void (*)(int*, int*, int*, size_t*)>(dlsym(lib, "fake_cuda_calls"))(
      &v2, &ptds, &legacy, &last);
  std::printf("the library saw: v2 %d, v2_ptds %d, legacy %d, last %zu bytes\n", v2, ptds, legacy,
              last);
  // cudaDeviceReset's driver call through the swapped pointer: it reaches the library once.
  std::printf("call reset: rc %d\n",
              static_cast<int>(reinterpret_cast<CUresult (*)(CUdevice)>(fns[kQueries - 2])(0)));
  std::printf("the library saw: resets %d\n",
              reinterpret_cast<int (*)()>(dlsym(lib, "fake_cuda_resets"))());
  // Its first variant, as CUDA 13's cudart is answered (lab/NOTES.md 103).
  std::printf("call first reset: rc %d\n",
              static_cast<int>(reinterpret_cast<CUresult (*)(CUdevice)>(fns[kQueries - 3])(0)));
  std::printf("the library saw: first resets %d\n",
              reinterpret_cast<int (*)()>(dlsym(lib, "fake_cuda_resets_v1"))());
  // A green context's end the same way (this library cannot say which CUcontext it stands for,
  // so cmt only forwards it).
  std::printf(
      "call green destroy: rc %d\n",
      static_cast<int>(reinterpret_cast<CUresult (*)(CUgreenCtx)>(fns[kQueries - 1])(nullptr)));
  std::printf("the library saw: green destroys %d\n",
              reinterpret_cast<int (*)()>(dlsym(lib, "fake_cuda_green_destroys"))());
  return 0;
}
