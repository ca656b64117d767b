// The one table of cmt's options. Each row is one option: its profile key and CMT_* variable,
// where it applies (the whole process, each GPU's copy lanes, the environment only), whether
// `cmt tune` searches it, the kind of value, the help, and its parser and printer. The defaults
// are the Config initializers below, written once; the table prints them. Everything that lists
// options (CMT_* variables, profile keys, the per-GPU and tuned knobs, `cmt profile options`, the
// README's table) comes from here. Parsing never throws: a bad value yields what was expected.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/byte_size.h"
#include "common/copy_types.h"

namespace cmt {

struct Config {
  bool disable = false;                // forward every call untouched
  unsigned threads = 0;                // CPU copy workers per lane; 0 = pick from the GPU's cores
  std::size_t chunk_bytes = 2u << 20;  // largest piece of a medium copy; H2D slot size
  std::size_t d2h_chunk_bytes = 4u << 20;     // D2H slot size: largest piece of a long D2H copy
  unsigned slots = 12;                        // pinned staging buffers per lane
  unsigned lanes = 0;                         // lanes per GPU and direction (0: 2): concurrent copies
  std::size_t lane_split_from = 64u << 20;    // smaller copies share one lane, one after another
  GpuCores gpu_cores = GpuCores::All;         // several GPUs on the same cores: share or split them
  std::size_t threshold = 1u << 20;           // smaller H2D copies are forwarded
  std::size_t d2h_threshold = 1u << 20;       // smaller D2H copies are forwarded
  // Copies from these sizes up to the thresholds are taken only while the copy threads are awake
  // (interposer/warm_gate.h); at or above a threshold, they are not used.
  std::size_t warm_threshold = 256u << 10;
  std::size_t d2h_warm_threshold = 256u << 10;
  unsigned spin_us = 1000;                    // how long idle copy threads spin before sleeping
  bool wake_ahead = true;                     // they nap through long gaps, woken before the next copy
  bool ramp = true;                           // small pieces at both ends of a copy (engine/device/copy_plan.h)
  CopyMethod h2d_method = CopyMethod::Auto;   // how workers write the staging buffers
  CopyMethod d2h_method = CopyMethod::Auto;   // how workers write the user's buffer
  FreshPages fresh_pages = FreshPages::Huge;  // how D2H prepares never-touched destinations
  HostCopy host_copy = HostCopy::Pinned;      // which memcpy/memmove calls cmt's threads run
  std::size_t host_copy_threshold = 4u << 20;  // smaller memcpy/memmove calls go to libc
  HostReads host_reads = HostReads::All;       // which large file reads cmt's threads run
  HostFill host_fill = HostFill::Fresh;        // which memset calls cmt's threads run
  std::size_t host_fill_threshold = 8u << 20;  // smaller memset calls go to libc
  Register register_mode = Register::Off;      // hot buffers registered with CUDA once
  unsigned register_after = 2;                 // the copy of a range that registers it
  std::size_t register_from = 64u << 10;       // smaller copies never register their range
  std::size_t register_max = 0;                // registered bytes at most; 0: a quarter of RAM
  bool register_free_later = true;             // frees of registered chunks finished by a thread
  bool peer = true;                            // GPU-to-GPU copies without peer access via the host
  std::size_t peer_threshold = 256u << 10;     // smaller GPU-to-GPU copies are forwarded
  std::string log_level = "warn";
  // Environment only: where output goes and which files are read never come from a profile.
  std::string stats_file;                  // JSON summary written when the process ends
  std::string record_file;                 // the trace of every copy, written at exit
  std::string profile;                     // a profile to apply over the machine's
  std::optional<std::string> configs_dir;  // shared profiles; unset: beside the binary
  std::string library;                     // the libcmt.so that `cmt run` preloads
  // Where each option that is not at its default came from: "env CMT_X" or "profile FILE".
  std::map<std::string, std::string> origin;
  // Per-GPU knobs from a profile's [gpu."0000:1b:00.0"] tables: PCI bus id (lower case) -> knob
  // name -> value text, already checked. They override the knobs above for that GPU's lanes.
  std::map<std::string, std::map<std::string, std::string>> per_gpu;
};

// Where an option applies.
enum class Scope {
  Process,  // the whole process: CMT_* or a profile's [cmt]
  PerGpu,   // a knob of a GPU's copy lanes: also per GPU, in a profile's [gpu."BUS"]
  EnvOnly,  // the environment alone; a profile may not set it
};

// What kind of value an option takes, for its documentation and how a profile writes it.
enum class ValueKind { Flag, Count, Size, Choice, Text };

struct OptionSpec {
  const char* name;  // profile key, e.g. "chunk_bytes"
  const char* env;   // environment variable, e.g. "CMT_CHUNK_BYTES"
  Scope scope;
  bool tuned;  // `cmt tune` searches it and writes it to the profile
  ValueKind kind;
  std::string help;
  // Applies `value` to `config`; returns an empty string on success, else what was expected.
  std::function<std::string(Config& config, std::string_view value)> apply;
  std::function<std::string(const Config& config)> show;  // the effective value as text
  // The values `cmt tune --search full` tries for a tuned knob, comma-separated, as text the row
  // parses; empty where the knob is tuned otherwise (by measurement of its own) or not at all.
  std::string search = {};

  std::string default_text() const { return show(Config{}); }
  bool profile_may_set() const { return scope != Scope::EnvOnly; }
};

const std::vector<OptionSpec>& option_table();
// The row named `name` (a profile key), or nullptr.
const OptionSpec* find_option(std::string_view name);

// Profile keys of the knobs a profile may set per GPU (Scope::PerGpu), and of those `cmt tune`
// searches, in the table's order.
const std::vector<std::string>& per_gpu_knobs();
bool is_per_gpu_knob(const std::string& name);
std::vector<std::string> tuned_knobs();
// "threads 8, chunk_bytes 2M, ...": the tuned knobs' values in `config`, in the table's order;
// with `lane_only`, only those that shape a copy lane (per GPU).
std::string tuned_knobs_text(const Config& config, bool lane_only = false);

// The per-GPU knobs are what shapes a copy lane: two configurations with the same ones build the
// same lanes, and `copy_lane_knobs` gives `to` those of `from`.
bool same_lane_knobs(const Config& a, const Config& b);
void copy_lane_knobs(Config& to, const Config& from);

// `config` as one GPU's lanes see it: its per-GPU knobs applied (bus id in any case).
Config config_for_gpu(const Config& config, const std::string& pci_bus_id);

// Which rows apply_environment reads.
enum class EnvRows { All, EnvOnly, Knobs };

// Reads the CMT_* variables of `rows` into `config`. Each bad value keeps the default and appends
// a message (naming the variable, the value and what was expected) to `errors`. Without
// `getenv_fn`, from the environment, except in a secure-execution (setuid) process, where the
// person who starts it may not choose what it reads or writes: there no variable is read.
void apply_environment(Config& config, std::vector<std::string>& errors,
                       const std::function<const char*(const char*)>& getenv_fn = nullptr,
                       EnvRows rows = EnvRows::All);

// `text` as a message quotes it: control and non-ASCII bytes as \xNN, so that a value cannot move
// the cursor, change colours or pass for more than it is; and past 64 characters cut, with its
// length said, so that a 120 KB variable is not echoed whole.
std::string quoted_value(std::string_view text);

// One line per option with its effective value, for logs and `cmt run -v`.
std::string describe(const Config& config);

// "per GPU, tuned": where the option applies, as `cmt profile options` and the README say it.
std::string scope_text(const OptionSpec& row);

}  // namespace cmt
