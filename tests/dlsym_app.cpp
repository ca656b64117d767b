// Prints what dlsym answers for a set of lookups. dlsym_hook.sh runs it with and without
// libcmt.so preloaded: every line must be the same, except the "hooked:" lines, where cmt must
// answer the driver copy entry points it hooks with its own functions. Argument: libcuda's stub
// (any libcuda.so works; the stub needs no GPU), or nothing.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

extern "C" const char* probe_name();
extern "C" void* probe_next();
extern "C" int probe_b_loaded();

namespace {

const char* name_of(void* fn) {
  return fn ? reinterpret_cast<const char* (*)()>(fn)() : "null";
}

const char* owner(void* fn) {
  Dl_info info{};
  if (!fn || !dladdr(fn, &info) || !info.dli_fname) return "none";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

}  // namespace

int main(int argc, char** argv) {
  if (!probe_b_loaded()) return 1;
  std::printf("RTLD_NEXT from libcmt_probe_a: %s\n", name_of(probe_next()));
  std::printf("RTLD_NEXT from the program: %s\n", name_of(dlsym(RTLD_NEXT, "probe_name")));
  std::printf("RTLD_DEFAULT: %s\n", name_of(dlsym(RTLD_DEFAULT, "probe_name")));
  void* b = dlopen("libcmt_probe_b.so", RTLD_LAZY | RTLD_NOLOAD);
  std::printf("handle of libcmt_probe_b: %s\n", name_of(b ? dlsym(b, "probe_name") : nullptr));
  dlerror();
  void* missing = dlsym(RTLD_DEFAULT, "cmt_no_such_symbol");
  const char* error = dlerror();
  std::printf("missing symbol: %s, dlerror %s\n", missing ? "found" : "null",
              error ? "set" : "unset");
  missing = dlsym(RTLD_NEXT, "cuMemcpyHtoD_v2_no_such_variant");
  std::printf("missing driver-like symbol: %s\n", missing ? "found" : "null");
  // A program probing for CUDA before any CUDA library is loaded: cmt's own exports of these
  // names must not make it look present.
  for (const char* probe : {"cuMemcpyHtoD_v2", "cuGetProcAddress", "cudaMemcpy"}) {
    dlerror();
    void* found = dlsym(RTLD_DEFAULT, probe);
    const char* err = dlerror();
    std::printf("probe %s before loading CUDA: %s, dlerror %s\n", probe, found ? "found" : "null",
                err ? "set" : "unset");
  }
  std::printf("getpid: %s\n", dlsym(RTLD_DEFAULT, "getpid") == reinterpret_cast<void*>(&getpid)
                                  ? "libc's"
                                  : "other");

  if (argc < 2) return 0;
  void* cuda = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!cuda) {
    std::printf("no libcuda at %s\n", argv[1]);
    return 0;
  }
  // Entry points cmt does not hook, the legacy 32-bit cuMemcpyHtoD and copies that never touch
  // host memory among them: libcuda's own.
  for (const char* name : {"cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyHtoDAsync", "cuMemAlloc_v2",
                           "cuMemcpyAtoA_v2", "cuMemcpyDtoA_v2", "cuMemsetD8_v2", "cuInit"})
    std::printf("%s: %s\n", name, owner(dlsym(cuda, name)));
  // Entry points cmt hooks.
  for (const char* name : {"cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2_ptds", "cuMemcpyHtoDAsync_v2_ptsz",
                           "cuMemcpyDtoHAsync_v2", "cuMemcpy", "cuMemcpyAsync_ptsz",
                           "cuMemcpyDtoD_v2", "cuMemcpyPeerAsync", "cuGetProcAddress",
                           "cuGetProcAddress_v2", "cuMemcpy2D_v2", "cuMemcpy3DPeer",
                           "cuMemcpyAtoHAsync_v2_ptsz", "cuMemcpy3DBatchAsync_v2"})
    std::printf("hooked: %s: %s\n", name, owner(dlsym(cuda, name)));
  // Calls through what dlsym returned give libcuda's own result (the stub's error).
  std::vector<char> host(8 << 20, 1);
  auto htod = reinterpret_cast<CUresult (*)(CUdeviceptr, const void*, size_t)>(
      dlsym(cuda, "cuMemcpyHtoD_v2"));
  std::printf("cuMemcpyHtoD_v2 of 8 MiB: %d\n",
              htod ? static_cast<int>(htod(4096, host.data(), host.size())) : -1);
  auto get = reinterpret_cast<CUresult (*)(const char*, void**, int, cuuint64_t,
                                           CUdriverProcAddressQueryResult*)>(
      dlsym(cuda, "cuGetProcAddress_v2"));
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  std::printf("cuGetProcAddress_v2: %d, %s\n",
              get ? static_cast<int>(get("cuMemcpyHtoD", &fn, 12000, 0, &status)) : -1,
              fn ? "a function" : "no function");
  return 0;
}
