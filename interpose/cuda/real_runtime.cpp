#include "cuda/real_runtime.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <string>

#include "cuda/real_dl.h"

namespace cmt {
namespace {

int find_cudart(struct dl_phdr_info* info, size_t, void* out) {
  const char* name = info->dlpi_name;
  if (name && std::strstr(name, "libcudart.so")) {
    *static_cast<std::string*>(out) = name;
    return 1;
  }
  return 0;
}

}  // namespace

void* real_runtime_symbol(const char* name) {
  if (void* fn = next_symbol(name)) return fn;
  std::string path;
  dl_iterate_phdr(find_cudart, &path);
  if (path.empty()) return nullptr;
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) return nullptr;
  void* fn = real_dlsym(handle, name);
  dlclose(handle);  // drops the reference RTLD_NOLOAD added; the library stays loaded
  return fn;
}

}  // namespace cmt
