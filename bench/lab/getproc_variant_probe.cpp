// Which function cuGetProcAddress hands back for the entry points that end a context (cudart asks
// for them by their base names, as for every driver call), against the addresses of libcuda's
// exported variants: dladdr names the export the pointer is (or the nearest one before it).
// Build: g++ -O1 -I/usr/local/cuda/include getproc_variant_probe.cpp -o probe -ldl; run: ./probe
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <initializer_list>

int main() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) return 2;
  using GetProc =
      CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(lib, "cuInit"));
  if (!get || !init || init(0) != CUDA_SUCCESS) return 3;
  const char* names[] = {"cuDevicePrimaryCtxReset",
                         "cuDevicePrimaryCtxRelease",
                         "cuCtxDestroy",
                         "cuGreenCtxDestroy",
                         "cuMemcpyHtoD",
                         "cuCtxCreate"};
  for (const char* name : names)
    for (int version : {12000, 13000})
      for (cuuint64_t flags :
           {cuuint64_t{0}, cuuint64_t{CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}}) {
        void* fn = nullptr;
        CUdriverProcAddressQueryResult status{};
        const CUresult r = get(name, &fn, version, flags, &status);
        Dl_info info{};
        const bool named = fn && dladdr(fn, &info) && info.dli_sname;
        std::printf(
            "%s v%d flags %llu: rc %d %p = %s%+ld\n", name, version,
            static_cast<unsigned long long>(flags), static_cast<int>(r), fn,
            named ? info.dli_sname : "?",
            named ? static_cast<long>(static_cast<char*>(fn) - static_cast<char*>(info.dli_saddr))
                  : 0L);
      }
  for (const char* sym :
       {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", "cuDevicePrimaryCtxRelease",
        "cuDevicePrimaryCtxRelease_v2", "cuCtxDestroy", "cuCtxDestroy_v2", "cuGreenCtxDestroy"})
    std::printf("export %s at %p\n", sym, dlsym(lib, sym));
  return 0;
}
