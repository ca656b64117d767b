// A scratch file in the page cache, for the lab programs that map or read one (register_stream_lab,
// fault_cost_probe): written with a pattern (so a wrong byte shows), unlinked at once, so it goes
// when its descriptor closes.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace cmt::bench {

// A file of `bytes` under `dir`, in the page cache; its descriptor, or -1 (errno says why).
inline int page_cache_file(const std::string& dir, std::size_t bytes) {
  std::string path = dir + "/cmt-lab-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) return -1;
  unlink(path.c_str());
  std::vector<char> block(1 << 20);
  for (std::size_t done = 0; done < bytes; done += block.size()) {
    for (std::size_t k = 0; k < block.size(); k += 8) {
      const std::uint64_t v = (done + k) * 0x9E3779B97F4A7C15ull;
      std::memcpy(block.data() + k, &v, 8);
    }
    if (write(fd, block.data(), std::min(block.size(), bytes - done)) < 0) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

}  // namespace cmt::bench
