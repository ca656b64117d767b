// Half of dlsym_hook's RTLD_NEXT probe: linked before libcmt_probe_b, both define probe_name.
#include <dlfcn.h>

extern "C" const char* probe_name() {
  return "a";
}

// From here, RTLD_NEXT must find libcmt_probe_b's probe_name: the lookup is relative to this
// library, even when libcmt.so's dlsym stands in between.
// (Not a tail call: glibc finds "the caller" from the return address, which a jump would make
// the program's.)
extern "C" void* probe_next() {
  void* next = dlsym(RTLD_NEXT, "probe_name");
  asm volatile("" ::: "memory");
  return next;
}
