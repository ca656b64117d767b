// cmt-lab-copied-few (lab, GPU): what hot buffers cost a program that copies each buffer only a
// few times (issue 33's default question). Under CMT_REGISTER=hot cmt registers a range at its
// register_after-th copy (2), which costs a cuMemHostRegister (0.5-3 ms, NOTES 59) that only the
// copies after it win back, and unregisters it at the free. For each size and copy count k, a
// fresh malloc'd buffer is written, copied to the GPU k times (cudaMemcpyAsync and a stream
// synchronize, as .to('cuda') does), and freed; the time from the first copy to the free's return
// is the buffer's, median of --reps buffers. The last buffer of each cell is read back from the
// GPU and compared byte for byte. Run it without cmt, under cmt with register off and with
// register hot, processes alternating, and compare the medians.
//
// usage: cmt-lab-copied-few [--reps 9] [--sizes 256K,1M,16M,64M] [--counts 1,2,3,5,10]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/byte_size.h"
#include "cuda_check.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One buffer's life: written, copied `count` times, freed. Returns ms from the first copy to the
// free's return; checks the device's bytes when asked.
double one_buffer(std::size_t bytes, std::size_t count, void* device, cudaStream_t stream,
                  unsigned char seed, bool check, long* wrong) {
  auto* host = static_cast<unsigned char*>(std::malloc(bytes));
  if (!host) {
    std::fprintf(stderr, "cmt-lab-copied-few: malloc(%zu) failed\n", bytes);
    std::exit(1);
  }
  for (std::size_t i = 0; i < bytes; ++i) host[i] = static_cast<unsigned char>(i * 31 + seed);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t c = 0; c < count; ++c) {
    CMT_CHECK_CUDA(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
    CMT_CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  std::free(host);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (check) {
    std::vector<unsigned char> back(bytes);
    CMT_CHECK_CUDA(cudaMemcpy(back.data(), device, bytes, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < bytes; ++i)
      if (back[i] != static_cast<unsigned char>(i * 31 + seed)) ++*wrong;
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 9;
  std::vector<std::string> size_text{"256K", "1M", "16M", "64M"};
  std::vector<std::size_t> counts{1, 2, 3, 5, 10};
  CLI::App app{"cmt-lab-copied-few: fresh buffers copied k times to the GPU, then freed"};
  app.add_option("--reps", reps, "Buffers per cell (their median is reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--sizes", size_text, "Buffer sizes, like 256K,16M")->delimiter(',');
  app.add_option("--counts", counts, "Copies of each buffer")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  std::vector<std::size_t> sizes;
  for (const std::string& t : size_text) {
    std::size_t bytes = 0;
    if (!cmt::parse_byte_size(t, &bytes) || bytes == 0) {
      std::fprintf(stderr, "cmt-lab-copied-few: --sizes: '%s' is not a size (like 256K or 16M)\n",
                   t.c_str());
      return 2;
    }
    sizes.push_back(bytes);
  }
  const std::size_t most = *std::max_element(sizes.begin(), sizes.end());
  void* device = nullptr;
  cudaStream_t stream;
  CMT_CHECK_CUDA(cudaMalloc(&device, most));
  CMT_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  long wrong = 0;
  std::printf("%-8s %6s %12s %10s   (ms from a fresh buffer's first copy to its free, median of %d)\n",
              "size", "copies", "ms/buffer", "GB/s", reps);
  for (const std::size_t bytes : sizes)
    for (const std::size_t count : counts) {
      std::vector<double> ms;
      for (int r = 0; r < reps; ++r)
        ms.push_back(one_buffer(bytes, count, device, stream, static_cast<unsigned char>(r + count),
                                r + 1 == reps, &wrong));
      const double m = median(ms);
      std::printf("%-8zu %6zu %12.3f %10.2f\n", bytes, count, m, bytes * count / (m * 1e6));
    }
  std::printf("wrong bytes %ld\n", wrong);
  CMT_CHECK_CUDA(cudaFree(device));
  return wrong == 0 ? 0 : 1;
}
