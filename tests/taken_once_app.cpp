// One 8 MiB host-to-device cudaMemcpy through the fake runtime (fake_libcudart.cpp), then what
// the fake driver counted; then a zero-byte one, which must reach the runtime; then a
// cudaStreamSynchronize, which must reach the driver once. See taken_once.sh.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" int cudaMemcpy(void* dst, const void* src, size_t n, int kind);
extern "C" int fake_cudart_calls();
extern "C" int cudaStreamSynchronize(void* stream);

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
  if (rc != 0 || v2 != 1 || last != host.size()) return 1;
  // A zero-byte copy is CUDA's to answer (it synchronizes, and returns a pending error), so it
  // must reach the runtime, cmt or not.
  const int before = fake_cudart_calls();
  rc = cudaMemcpy(reinterpret_cast<void*>(4096), host.data(), 0, 1);
  std::printf("zero-byte cudaMemcpy: rc %d; the runtime saw %d call(s)\n", rc,
              fake_cudart_calls() - before);
  if (rc != 0 || fake_cudart_calls() != before + 1) return 1;
  // A wait, through the runtime to the driver: reaches the driver once.
  rc = cudaStreamSynchronize(nullptr);
  auto syncs = lib ? reinterpret_cast<int (*)()>(dlsym(lib, "fake_cuda_syncs")) : nullptr;
  const int seen = syncs ? syncs() : -1;
  std::printf("cudaStreamSynchronize: rc %d; the driver saw %d\n", rc, seen);
  return rc == 0 && seen == 1 ? 0 : 1;
}
