// One 8 MiB host-to-device cudaMemcpy through the fake runtime (fake_libcudart.cpp), then what
// the fake driver counted. See taken_once.sh.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" int cudaMemcpy(void* dst, const void* src, size_t n, int kind);

int main() {
  std::vector<char> host(8 << 20, 1);
  int rc = cudaMemcpy(reinterpret_cast<void*>(4096), host.data(), host.size(), 1);
  void* lib = dlopen(std::getenv("CMT_FAKE_LIBCUDA"), RTLD_NOW | RTLD_NOLOAD);
  auto calls =
      lib ? reinterpret_cast<void (*)(int*, int*, int*, size_t*)>(dlsym(lib, "fake_cuda_calls"))
          : nullptr;
  int v2 = 0, ptds = 0, legacy = 0;
  size_t last = 0;
  if (calls) calls(&v2, &ptds, &legacy, &last);
  std::printf("cudaMemcpy: rc %d; the driver saw %d call(s) of %zu bytes\n", rc, v2, last);
  return rc == 0 && v2 == 1 && last == host.size() ? 0 : 1;
}
