// libcmt.so loaded with dlopen rather than preloaded, used, then dlclose'd while its copy threads
// live on (issue 17.3): the library must stay mapped (it is linked -z nodelete), so the program
// goes on and exits normally instead of dying in unmapped code. Needs a GPU for the engine to
// start; exit 77 without one. usage: cmt_dlclose_app LIBCMT
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return 77;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  using Memcpy = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind);
  auto hooked = reinterpret_cast<Memcpy>(dlsym(lib, "cudaMemcpy"));
  if (!hooked) return 1;
  const size_t bytes = 64u << 20;
  std::vector<char> host(bytes), back(bytes);
  for (size_t i = 0; i < bytes; ++i) host[i] = static_cast<char>(i * 7);
  void* dev = nullptr;
  if (cudaMalloc(&dev, bytes) != cudaSuccess) return 1;
  // Through cmt's hook: large enough that its engine and copy threads start.
  if (hooked(dev, host.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      hooked(back.data(), dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
    return 1;
  if (std::memcmp(host.data(), back.data(), bytes) != 0) {
    std::fprintf(stderr, "wrong bytes through cmt\n");
    return 1;
  }
  dlclose(lib);
  // The copy threads spin, then sleep, in libcmt.so's code: it must still be there.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (cudaMemcpy(back.data(), dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
  cudaFree(dev);
  std::printf("ok: libcmt.so dlopen'ed, used and dlclose'd; the program went on\n");
  return 0;
}
