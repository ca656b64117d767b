// Times pageable cudaMemcpy host -> device and device -> host, with every byte checked, and
// prints the times as one JSON line. Built several ways (dynamic or static cudart, legacy or
// per-thread default stream), so bench/entry_paths.py can compare each way of reaching CUDA with
// and without cmt: the program itself knows nothing of cmt.
//
// usage: cmt-entry-bench-<variant> [MiB (default 256)] [repetitions (default 7)]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const size_t bytes = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256) << 20;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "no CUDA GPU\n");
    return 77;
  }
  std::vector<unsigned char> src(bytes), back(bytes);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
  void* dev = nullptr;
  if (cudaMalloc(&dev, bytes) != cudaSuccess) return 1;
  std::string h2d, d2h;
  for (int i = 0; i <= reps; ++i) {  // round 0 is the warm-up
    auto t0 = std::chrono::steady_clock::now();
    if (cudaMemcpy(dev, src.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess) return 1;
    auto t1 = std::chrono::steady_clock::now();
    std::memset(back.data(), 0, 4096);
    if (cudaMemcpy(back.data(), dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
    auto t2 = std::chrono::steady_clock::now();
    if (std::memcmp(src.data(), back.data(), bytes) != 0) {
      std::fprintf(stderr, "wrong bytes\n");
      return 1;
    }
    if (i == 0) continue;
    auto seconds = [](auto a, auto b) {
      return std::to_string(std::chrono::duration<double>(b - a).count());
    };
    h2d += (h2d.empty() ? "" : ", ") + seconds(t0, t1);
    d2h += (d2h.empty() ? "" : ", ") + seconds(t1, t2);
  }
  std::printf("{\"bytes\": %zu, \"h2d_s\": [%s], \"d2h_s\": [%s]}\n", bytes, h2d.c_str(),
              d2h.c_str());
  return 0;
}
