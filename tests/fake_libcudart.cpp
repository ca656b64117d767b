// A stand-in CUDA runtime for CI: its cudaMemcpy reaches "the driver" the way the real cudart
// does, by opening libcuda (the fake one named by $CMT_FAKE_LIBCUDA) and asking cuGetProcAddress
// for cuMemcpyHtoD. Under libcmt.so the program's cudaMemcpy is cmt's runtime hook, and the
// driver function this runtime gets is cmt's driver hook: taken_once.sh checks that one copy is
// offered to cmt once, not twice, and that a zero-byte copy still reaches the runtime. Its
// cudaStreamSynchronize reaches the driver's the same way: a recorded trace keeps it once.
#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>

extern "C" {

namespace {
int g_calls = 0;  // how many times the program's cudaMemcpy reached this runtime
}

// For the program to read.
__attribute__((visibility("default"))) int fake_cudart_calls() {
  return g_calls;
}

__attribute__((visibility("default"))) int cudaMemcpy(void* dst, const void* src, size_t n,
                                                      int kind) {
  ++g_calls;
  using HtoD = int (*)(unsigned long long, const void*, size_t);
  using Get = int (*)(const char*, void**, int, unsigned long long, int*);
  static HtoD htod = [] {
    const char* path = std::getenv("CMT_FAKE_LIBCUDA");
    void* lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    auto get = lib ? reinterpret_cast<Get>(dlsym(lib, "cuGetProcAddress_v2")) : nullptr;
    void* fn = nullptr;
    int status = 0;
    if (get) get("cuMemcpyHtoD", &fn, 12000, 0, &status);
    return reinterpret_cast<HtoD>(fn);
  }();
  if (kind != 1 || !htod) return 1;  // cudaErrorInvalidValue: this fake does host-to-device only
  return htod(reinterpret_cast<unsigned long long>(dst), src, n);
}

// As the real runtime's: the driver's cuStreamSynchronize, found by cuGetProcAddress.
__attribute__((visibility("default"))) int cudaStreamSynchronize(void* stream) {
  using Sync = int (*)(void*);
  using Get = int (*)(const char*, void**, int, unsigned long long, int*);
  static Sync sync = [] {
    void* lib = dlopen(std::getenv("CMT_FAKE_LIBCUDA"), RTLD_NOW | RTLD_LOCAL);
    auto get = lib ? reinterpret_cast<Get>(dlsym(lib, "cuGetProcAddress_v2")) : nullptr;
    void* fn = nullptr;
    int status = 0;
    if (get) get("cuStreamSynchronize", &fn, 12000, 0, &status);
    return reinterpret_cast<Sync>(fn);
  }();
  return sync ? sync(stream) : 1;
}

}  // extern "C"
