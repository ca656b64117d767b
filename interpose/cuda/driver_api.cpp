#include "cuda/driver_api.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "common/log.h"
#include "cuda/real_dl.h"

namespace cmt {
namespace {

// Entry points are requested as of this CUDA version, so their ABI stays fixed whatever driver
// runs underneath; legacy-stream variants, since cmt always passes explicit stream handles.
constexpr int kAbiVersion = 12000;

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

// `name` as of kAbiVersion into `*out`; false (and `*out` left null) if the driver lacks it.
template <typename Fn>
bool found(GetProcAddress get, const char* name, Fn* out) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (get(name, &fn, kAbiVersion, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS ||
      status != CU_GET_PROC_ADDRESS_SUCCESS || !fn)
    return false;
  *out = reinterpret_cast<Fn>(fn);
  return true;
}

template <typename Fn>
bool fetch(GetProcAddress get, const char* name, Fn* out) {
  if (found(get, name, out)) return true;
  CMT_WARN_ONCE("the CUDA driver lacks {}; cmt forwards every copy", name);
  return false;
}

const DriverApi* load() {
  // RTLD_NOLOAD first: a process that never loaded the driver is not made to load it here.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  // The real one: libcmt.so's dlsym and cuGetProcAddress hooks would hand back its own hooks,
  // and the engine would call itself.
  auto get = reinterpret_cast<GetProcAddress>(real_dlsym(lib, "cuGetProcAddress_v2"));
  if (!get) return nullptr;
  static DriverApi api{};
  bool ok = true;
#define CMT_FETCH(name, member, ...) ok = ok && fetch(get, #name, &api.member);
  CMT_DRIVER_FUNCTIONS(CMT_FETCH)
#undef CMT_FETCH
#define CMT_FETCH_OPTIONAL(name, member, ...) (void)found(get, #name, &api.member);
  CMT_DRIVER_OPTIONAL_FUNCTIONS(CMT_FETCH_OPTIONAL)
#undef CMT_FETCH_OPTIONAL
  return ok ? &api : nullptr;
}

}  // namespace

const DriverApi* real_driver() {
  static std::once_flag once;
  static const DriverApi* api = nullptr;
  std::call_once(once, [] { api = load(); });
  return api;
}

std::string cuda_error_text(const DriverApi& driver, CUresult r) {
  const char* name = nullptr;
  if (driver.error_name && driver.error_name(r, &name) == CUDA_SUCCESS && name)
    return std::string(name) + " (" + std::to_string(static_cast<int>(r)) + ")";
  return "CUDA error " + std::to_string(static_cast<int>(r));
}

bool cuda_call_failed(const DriverApi& driver, CUresult r, const char* call, const char* file,
                      int line, CUresult* status) {
  if (r == CUDA_SUCCESS) return false;
  *status = r;
  if (log_enabled(LogLevel::debug)) {
    const char* base = std::strrchr(file, '/');
    CMT_LOG(debug, "{}:{}: {} failed: {}", base ? base + 1 : file, line, call,
            cuda_error_text(driver, r));
  }
  return true;
}

}  // namespace cmt
