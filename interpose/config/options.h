// The one table of cmt's knobs: name, environment variable, default, help and parser per row.
// It backs the CMT_* environment variables (and later profile keys and --help). Parsing never
// throws: a bad value yields an error message naming the variable, the value and what was expected.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/copy_types.h"

namespace cmt {

struct Config {
  bool disable = false;                // forward every call untouched
  unsigned threads = 0;                // CPU copy workers per lane; 0 = pick from the GPU's cores
  std::size_t chunk_bytes = 2u << 20;  // H2D buffers; largest piece of a medium copy (plan_copy)
  std::size_t d2h_chunk_bytes = 4u << 20;  // D2H buffers; largest piece of a long D2H copy
  unsigned slots = 12;                     // pinned staging buffers per lane
  unsigned lanes = 1;                      // lanes per GPU and direction: concurrent copies
  std::size_t threshold = 2u << 20;        // smaller copies are forwarded
  unsigned spin_us = 1000;                 // how long idle copy threads spin before sleeping
  bool ramp = true;                        // small pieces at both ends of a copy (copy_engine.h)
  CopyMethod h2d_method =
      CopyMethod::Auto;  // how workers write the staging buffers (auto: by size)
  CopyMethod d2h_method =
      CopyMethod::Auto;  // how workers write the user's buffer (auto: streaming)
  FreshPages fresh_pages = FreshPages::Huge;  // how D2H prepares never-touched destinations
  std::string log_level = "warn";
  std::string stats_file;  // JSON summary written when the process ends ("": none)
  // Where each knob that is not at its default came from: "env CMT_X" or "profile FILE".
  std::map<std::string, std::string> origin;
  // Per-GPU knobs from a profile's [gpu."0000:1b:00.0"] tables: PCI bus id (lower case) -> knob
  // name -> value text, already checked. They override the knobs above for that GPU's lanes.
  std::map<std::string, std::map<std::string, std::string>> per_gpu;
};

// The knobs a profile may set per GPU: those of a GPU's copy lanes.
const std::vector<std::string>& per_gpu_knobs();
bool is_per_gpu_knob(const std::string& name);

// `config` as one GPU's lanes see it: its per-GPU knobs applied (bus id in any case).
Config config_for_gpu(const Config& config, const std::string& pci_bus_id);

struct OptionSpec {
  const char* name;  // key, e.g. "chunk_bytes"
  const char* env;   // environment variable, e.g. "CMT_CHUNK_BYTES"
  const char* default_text;
  const char* help;
  // Applies `value` to `config`; returns an empty string on success, else what was expected.
  std::function<std::string(Config& config, std::string_view value)> apply;
  std::function<std::string(const Config& config)> show;  // the effective value as text
};

const std::vector<OptionSpec>& option_table();

// Parses "4096", "64K", "2M", "1G", "2MiB", "1GB": an integer with an optional binary suffix
// (K, M, G, T; optional "iB" or "B"). Returns false on anything else or on overflow.
bool parse_byte_size(std::string_view text, std::size_t* out);

// Reads every CMT_* variable into `config`. Each bad value keeps the default and appends a
// message (naming the variable, the value and what was expected) to `errors`.
void apply_environment(Config& config, std::vector<std::string>& errors,
                       const std::function<const char*(const char*)>& getenv_fn = nullptr);

// One line per option with its effective value, for logs and `cmt run -v`.
std::string describe(const Config& config);


}  // namespace cmt
