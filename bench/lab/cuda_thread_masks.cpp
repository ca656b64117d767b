// Which signals CUDA's own threads block: after cuInit, a context, an allocation and a copy,
// prints every thread of the process with its name and blocked-signal mask (/proc). The host leg
// holds asynchronous signals back on a caller while its threads copy; a process-directed signal
// then goes to another thread that takes it, and this shows whether CUDA's threads are such
// threads (lab/NOTES.md 42).
// build: g++ -O2 cuda_thread_masks.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64/stubs -lcuda
#include <cuda.h>
#include <dirent.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

int main() {
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr d;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS) return 77;
  cuDevicePrimaryCtxRetain(&ctx, dev);
  cuCtxSetCurrent(ctx);
  std::vector<char> host(64u << 20, 1);
  cuMemAlloc(&d, host.size());
  cuMemcpyHtoD(d, host.data(), host.size());
  cuCtxSynchronize();
  DIR* tasks = opendir("/proc/self/task");
  while (dirent* e = readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    const std::string dir = std::string("/proc/self/task/") + e->d_name;
    std::ifstream status(dir + "/status");
    std::string line, name, blocked;
    while (std::getline(status, line)) {
      if (line.rfind("Name:", 0) == 0) name = line.substr(6);
      if (line.rfind("SigBlk:", 0) == 0) blocked = line.substr(8);
    }
    std::printf("thread %s %-16s blocked %s\n", e->d_name, name.c_str(), blocked.c_str());
  }
  closedir(tasks);
  return 0;
}
