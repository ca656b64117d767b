// The other half of dlsym_hook's RTLD_NEXT probe.
extern "C" const char* probe_name() {
  return "b";
}

// Referenced by the program, so the linker keeps this library as a dependency.
extern "C" int probe_b_loaded() {
  return 1;
}
