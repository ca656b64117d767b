#include "config/options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>

#include "common/engine_rules.h"

namespace cmt {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool parse_unsigned(std::string_view text, unsigned long long* out) {
  if (text.empty() || text.size() > 20) return false;
  unsigned long long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    unsigned digit = static_cast<unsigned>(c - '0');
    if (value > (std::numeric_limits<unsigned long long>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

// Row builders: each option is declared once with its range, and parsing and printing follow.
OptionSpec size_option(const char* name, const char* env, Scope scope, bool tuned, std::string help,
                       std::size_t Config::*field, std::size_t min, std::size_t max) {
  return {name,
          env,
          scope,
          tuned,
          ValueKind::Size,
          std::move(help),
          [field, min, max](Config& c, std::string_view v) -> std::string {
            std::size_t bytes = 0;
            if (!parse_byte_size(v, &bytes) || bytes < min || bytes > max)
              return "a byte size from " + format_byte_size(min) + " to " + format_byte_size(max) +
                     " such as 4M or 1048576";
            c.*field = bytes;
            return {};
          },
          [field](const Config& c) { return format_byte_size(c.*field); }};
}

OptionSpec count_option(const char* name, const char* env, Scope scope, bool tuned,
                        std::string help, unsigned Config::*field, unsigned min, unsigned max) {
  return {name,
          env,
          scope,
          tuned,
          ValueKind::Count,
          std::move(help),
          [field, min, max](Config& c, std::string_view v) -> std::string {
            unsigned long long n = 0;
            if (!parse_unsigned(v, &n) || n < min || n > max)
              return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
            c.*field = static_cast<unsigned>(n);
            return {};
          },
          [field](const Config& c) { return std::to_string(c.*field); }};
}

OptionSpec flag_option(const char* name, const char* env, Scope scope, std::string help,
                       bool Config::*field) {
  return {name,
          env,
          scope,
          false,
          ValueKind::Flag,
          std::move(help),
          [field](Config& c, std::string_view v) -> std::string {
            std::string s = lower(v);
            if (s == "1" || s == "true" || s == "yes" || s == "on") {
              c.*field = true;
            } else if (s == "0" || s == "false" || s == "no" || s == "off" || s.empty()) {
              c.*field = false;
            } else {
              return "1/0, true/false, yes/no or on/off";
            }
            return {};
          },
          [field](const Config& c) { return std::string(c.*field ? "1" : "0"); }};
}

// "a, b or c": a knob's choices as its messages and help list them.
template <typename E>
std::string choice_list(const char* between = ", ", const char* last = " or ") {
  std::string out;
  const auto& table = Choices<E>::table;
  const std::size_t n = sizeof(table) / sizeof(table[0]);
  for (std::size_t i = 0; i < n; ++i)
    out += std::string(i == 0 ? "" : i + 1 == n ? last : between) + table[i].name;
  return out;
}

// A knob with a few named values, from its enum's table (common/copy_types.h).
template <typename E>
OptionSpec choice_option(const char* name, const char* env, Scope scope, bool tuned,
                         std::string help, E Config::*field) {
  return {name,
          env,
          scope,
          tuned,
          ValueKind::Choice,
          std::move(help),
          [field](Config& c, std::string_view v) -> std::string {
            const std::string s = lower(v);
            for (const Choice<E>& choice : Choices<E>::table)
              if (s == choice.name) {
                c.*field = choice.value;
                return {};
              }
            return "one of " + choice_list<E>(", ", ", ");
          },
          [field](const Config& c) { return std::string(choice_name(c.*field)); }};
}

OptionSpec method_option(const char* name, const char* env, std::string help,
                         CopyMethod Config::*field) {
  return choice_option(name, env, Scope::PerGpu, true, std::move(help), field);
}

// Free text, taken as it is.
OptionSpec text_option(const char* name, const char* env, Scope scope, const char* help,
                       std::string Config::*field) {
  return {name,
          env,
          scope,
          false,
          ValueKind::Text,
          std::move(help),
          [field](Config& c, std::string_view v) -> std::string {
            c.*field = std::string(v);
            return {};
          },
          [field](const Config& c) { return c.*field; }};
}

const char* log_level_name(int i) {
  static const char* const kLevels[] = {"off", "error", "warn", "info", "debug"};
  return kLevels[i];
}

// Help text quoting the engine's rules (common/engine_rules.h) and the defaults is made from them.
// 256 << 20 -> "256 MiB": a size as the help's prose writes it.
std::string mib(std::size_t bytes) {
  for (const char* unit : {"GiB", "MiB", "KiB"}) {
    const unsigned shift = unit[0] == 'G' ? 30 : unit[0] == 'M' ? 20 : 10;
    if (bytes >= (std::size_t{1} << shift) && bytes % (std::size_t{1} << shift) == 0)
      return std::to_string(bytes >> shift) + " " + unit;
  }
  return std::to_string(bytes) + " bytes";
}

// 1.2 -> "20%".
std::string percent_over(double factor) {
  return std::to_string(static_cast<int>((factor - 1) * 100 + 0.5)) + "%";
}

std::vector<OptionSpec> build_table() {
  using namespace rules;
  const Config d;  // the defaults the help quotes
  std::vector<OptionSpec> t;
  t.push_back(flag_option("disable", "CMT_DISABLE", Scope::Process,
                          "Forward every copy to CUDA untouched (the kill switch).",
                          &Config::disable));
  t.push_back(count_option(
      "threads", "CMT_THREADS", Scope::PerGpu, true,
      "CPU copy threads one copy uses; 0 picks half the GPU's local cores, at most " +
          std::to_string(kAutoThreadsMost) +
          " (under a cgroup CPU quota, such as docker --cpus or a Kubernetes CPU limit, half the "
          "CPUs it keeps busy; a profile's value is capped at them, CMT_THREADS is kept). A GPU's "
          "pool has room for two copies at once (at most its local cores less " +
          std::to_string(kPoolSpareCores) + ", which its issuing threads keep).",
      &Config::threads, 0, 256));
  t.back().search = "2,4,6,8,10,12,14,16,24,32";
  t.push_back(size_option("chunk_bytes", "CMT_CHUNK_BYTES", Scope::PerGpu, true,
                          "The largest piece (one DMA) of a copy shorter than " +
                              std::to_string(kPiecesPerLongCopy) +
                              " pieces, either way; host-to-device staging buffers are this size.",
                          &Config::chunk_bytes, 4096, std::size_t{1} << 30));
  t.back().search = "1M,2M,4M,8M";
  t.push_back(size_option(
      "d2h_chunk_bytes", "CMT_D2H_CHUNK_BYTES", Scope::PerGpu, true,
      "The size of each device-to-host staging buffer, and the largest piece of a device-to-host "
      "copy of " +
          std::to_string(kPiecesPerLongCopy) + " pieces or more (" +
          mib(kPiecesPerLongCopy * d.d2h_chunk_bytes) + " at " +
          format_byte_size(d.d2h_chunk_bytes) + "): fewer, larger DMAs for long copies.",
      &Config::d2h_chunk_bytes, 4096, std::size_t{1} << 30));
  t.back().search = "2M,4M,8M";
  t.push_back(count_option(
      "slots", "CMT_SLOTS", Scope::PerGpu, true,
      "Pinned staging buffers per GPU, direction and lane, allocated at a direction's first copy "
      "(by default " +
          mib(d.slots * d.chunk_bytes) + " for host-to-device copies and " +
          mib(d.slots * d.d2h_chunk_bytes) +
          " for device-to-host ones); all of cmt's pinned staging together stays under " +
          kPinnedShareText + " of the machine's memory, and a lane past that forwards.",
      &Config::slots, 2, 1024));
  t.back().search = "8,16,32";
  t.push_back(count_option(
      "lanes", "CMT_LANES", Scope::Process, true,
      "Copy lanes per GPU and direction: copies made at the same time by different threads each "
      "get one (its own staging buffers; all lanes of a GPU share its copy threads), up to this "
      "many (0: " +
          std::to_string(kAutoLanes) + ", or " + std::to_string(kAutoLanesLegacy) +
          " for copies on the legacy default stream, where CUDA runs them one after another); "
          "the rest wait for one, asleep and served in the order they asked, up to " +
          std::to_string(kLaneWait.count()) + " ms, then go to CUDA.",
      &Config::lanes, 0, 16));
  t.push_back(size_option(
      "lane_split_from", "CMT_LANE_SPLIT_FROM", Scope::Process, false,
      "Copies smaller than this take turns on one lane per GPU and direction (the first), "
      "however many threads make them; from this size on a copy may open another lane, up to "
      "`lanes`. The link is the limit either way: medium copies that run side by side each "
      "start their own pipeline and split the copy threads, and one after another they ran as "
      "fast or faster on the H200, with less CPU and one pinned ring; 0 lets every copy open a "
      "lane.",
      &Config::lane_split_from, 0, std::size_t{1} << 40));
  t.push_back(choice_option(
      "gpu_cores", "CMT_GPU_CORES", Scope::Process, true,
      "Where several GPUs hang off the same cores (one NUMA node): all lets each GPU's copy "
      "threads run on all of them; split gives each GPU a contiguous share of whole cores of its "
      "own (the GPUs in PCI order, this process's or not, so one process per GPU splits too), "
      "unless a share would have fewer than " +
          std::to_string(kMinCoreShare) +
          ". `cmt tune --search full` measures both with all such GPUs copying at once.",
      &Config::gpu_cores));
  t.push_back(size_option("threshold", "CMT_THRESHOLD", Scope::Process, true,
                          "Host-to-device copies smaller than this are forwarded to CUDA.",
                          &Config::threshold, 0, std::size_t{1} << 40));
  t.push_back(size_option("d2h_threshold", "CMT_D2H_THRESHOLD", Scope::Process, true,
                          "Device-to-host copies smaller than this are forwarded to CUDA. CUDA "
                          "copies small pageable buffers to the host far slower than to the GPU, "
                          "so cmt wins from smaller sizes this way.",
                          &Config::d2h_threshold, 0, std::size_t{1} << 40));
  t.push_back(size_option("warm_threshold", "CMT_WARM_THRESHOLD", Scope::Process, true,
                          "Host-to-device copies from this size up to `threshold` are taken "
                          "while cmt's copy threads are awake (a copy within the last spin_us, "
                          "or a run of such copies), and forwarded otherwise: waking a sleeping "
                          "thread costs more than a small copy gains. At or above `threshold`: "
                          "off.",
                          &Config::warm_threshold, 0, std::size_t{1} << 40));
  t.push_back(size_option("d2h_warm_threshold", "CMT_D2H_WARM_THRESHOLD", Scope::Process, true,
                          "The same for device-to-host copies, up to `d2h_threshold`.",
                          &Config::d2h_warm_threshold, 0, std::size_t{1} << 40));
  t.push_back(count_option("spin_us", "CMT_SPIN_US", Scope::PerGpu, false,
                           "Microseconds an idle copy thread spins before it sleeps: longer "
                           "answers the next copy sooner and costs CPU time; at most " +
                               std::to_string(kMaxSpinUs / 1000) +
                               " ms, past which spinning threads take the cores the program "
                               "needs between its copies (see wake_ahead); 0: they never spin. "
                               "Whatever the value, an idle thread sleeps instead of spinning "
                               "while the machine has more runnable threads than CPUs "
                               "(`/proc/loadavg`: several processes under cmt, or a busy "
                               "program, would lose cores to the spin).",
                           &Config::spin_us, 0, kMaxSpinUs));
  t.push_back(flag_option("wake_ahead", "CMT_WAKE_AHEAD", Scope::PerGpu,
                          "Where the gaps between copies outlast spin_us, idle copy threads "
                          "sleep as soon as a copy ends and a timer wakes them shortly before the "
                          "next is due; 0: they spin spin_us after every copy and then sleep "
                          "until a copy wakes them (how benchmarks measure them cold).",
                          &Config::wake_ahead));
  t.push_back(flag_option("ramp", "CMT_RAMP", Scope::PerGpu,
                          "Start and end each copy with smaller pieces (doubling up to the piece "
                          "size, then halving), so the first DMA starts and the last one ends "
                          "sooner; 0 cuts every piece at full size.",
                          &Config::ramp));
  t.push_back(method_option("h2d_method", "CMT_H2D_METHOD",
                            "How host-to-device copies write the pinned staging buffers: memcpy, "
                            "streaming (non-temporal stores), or auto (streaming below " +
                                mib(kStreamingStageBelow) + ").",
                            &Config::h2d_method));
  t.back().search = choice_list<CopyMethod>(",", ",");
  t.push_back(method_option(
      "d2h_method", "CMT_D2H_METHOD",
      "How device-to-host copies write the user's buffer: memcpy, streaming (non-temporal "
      "stores), or auto (memcpy below " +
          mib(kStreamingDrainFrom) + ", streaming from there).",
      &Config::d2h_method));
  t.back().search = choice_list<CopyMethod>(",", ",");
  t.push_back(choice_option(
      "fresh_pages", "CMT_FRESH_PAGES", Scope::Process, false,
      "Device-to-host copies of " + mib(kFreshPagesFrom) +
          " or more into memory never written yet (no sampled page resident, as a new tensor's "
          ".cpu()): huge asks for transparent huge pages over the destination's whole " +
          mib(kFreshBlock) +
          " blocks and faults them in on all copy threads before draining (before Linux 5.14 "
          "such destinations are left alone); populate faults them in as 4 KiB pages; off lets "
          "the drain fault them one by one.",
      &Config::fresh_pages));
  t.push_back(choice_option(
      "host_copy", "CMT_HOST_COPY", Scope::Process, false,
      "Which large memcpy and memmove calls run on cmt's copy threads: pinned, those into or out "
      "of CUDA host memory (cudaHostAlloc, cudaHostRegister and the driver's forms: a library "
      "filling its own pinned staging buffer); all, every one, from the program's first CUDA "
      "call on; off, none, and cmt run then leaves libcmt-host.so (the memcpy hooks) out, and "
      "takes no file reads either (host_reads).",
      &Config::host_copy));
  t.push_back(choice_option(
      "host_reads", "CMT_HOST_READS", Scope::Process, false,
      "Which reads of a regular file (read, pread, readv, preadv, fread) of 512 KiB or more run "
      "on cmt's copy threads, in parallel stretches, with the call's own result, offset and "
      "errors: pinned, those into CUDA host memory (a loader's pinned staging buffer); all, "
      "those into any memory too (a checkpoint reader's new buffers, as torch.load's) where the "
      "file's first byte asked is in the page cache (a file still on a disk is read by libc, "
      "sequentially), from the program's first CUDA call on; off, none. host_copy = all reads "
      "into any memory too; host_copy = off, none.",
      &Config::host_reads));
  t.push_back(size_option("host_copy_threshold", "CMT_HOST_COPY_THRESHOLD", Scope::Process, true,
                          "memcpy and memmove calls smaller than this go straight to libc, "
                          "except those from " +
                              format_byte_size(rules::kUnmappedCopyFrom) +
                              " up that fill CUDA host memory from pages not mapped in yet (a "
                              "loader copying a tensor from a fresh file mapping into its pinned "
                              "buffer: the page faults are shared by the threads); cmt tune sets "
                              "it where the copy threads beat one thread by " +
                              percent_over(kHostLegWin) + ".",
                          &Config::host_copy_threshold, 64u << 10, std::size_t{1} << 40));
  t.push_back(choice_option(
      "host_fill", "CMT_HOST_FILL", Scope::Process, false,
      "Which large memset calls run on cmt's copy threads: fresh, those into memory never written "
      "yet (a new buffer's zero-fill: huge pages asked for and faulted in on every thread, as "
      "for fresh device-to-host destinations); all, every one; off, none. From the program's "
      "first CUDA call on; with host_copy also off, cmt run leaves libcmt-host.so out.",
      &Config::host_fill));
  t.push_back(size_option("host_fill_threshold", "CMT_HOST_FILL_THRESHOLD", Scope::Process, true,
                          "memset calls smaller than this go straight to libc; cmt tune sets it "
                          "where the copy threads fill new memory " +
                              percent_over(kHostLegWin) + " faster than one thread.",
                          &Config::host_fill_threshold, 1u << 20, std::size_t{1} << 40));
  t.push_back(choice_option(
      "register", "CMT_REGISTER", Scope::Process, false,
      "Hot buffers: off, every pageable copy is staged; hot, a pageable range copied "
      "register_after times, with its mapping unchanged in between, is registered with CUDA once "
      "and copied straight by the DMA engine from then on, at pinned speed (each such copy still "
      "returns only once its bytes have moved, as a pageable copy does). Only memory whose every "
      "release cmt sees is registered (glibc's heap and its mmap'd chunks), and a registration is "
      "dropped before its pages can change (free, realloc, munmap, mremap, madvise, mmap over it, "
      "brk, sbrk, shmdt, and these through syscall()): cmt run then preloads "
      "libcmt-release.so, which hooks them. "
      "CUDA's pointer queries answer for cmt's registrations as for pageable memory. auto, as "
      "hot, but a range is registered only once the time its copies lost against copies from a "
      "registration (as cmt measures both in the process) reaches what registering it is "
      "expected to cost: a buffer copied a few times then stays staged, one copied again and "
      "again is registered after a few copies (experimental; a copy is weighed by what copies "
      "of its size took on their streams, some timed with CUDA events, since a "
      "cudaMemcpyAsync returns before its DMA ends). Opt-in (the README says why neither is "
      "the default yet).",
      &Config::register_mode));
  t.push_back(count_option("register_after", "CMT_REGISTER_AFTER", Scope::Process, false,
                           "With register = hot, the copy of a range that registers it: 2 "
                           "registers at the second copy, so the third and later run at pinned "
                           "speed; with register = auto, the earliest.",
                           &Config::register_after, 1, 1000));
  t.push_back(size_option(
      "register_from", "CMT_REGISTER_FROM", Scope::Process, false,
      "With hot buffers (register = hot or auto), copies smaller than this never register their "
      "range (CUDA's own staging is as fast below it).",
      &Config::register_from, 4u << 10, std::size_t{1} << 40));
  t.push_back(size_option(
      "register_max", "CMT_REGISTER_MAX", Scope::Process, false,
      "With hot buffers (register = hot or auto), the most bytes registered at once; to make room "
      "the least recently copied range is unregistered (on cmt's release "
      "thread), but only one not copied since the newcomer's previous copy, "
      "so a set of buffers larger than the bound keeps what it registered and "
      "stages the rest. 0: a quarter of the machine's memory.",
      &Config::register_max, 0, std::size_t{1} << 50));
  t.push_back(flag_option(
      "register_free_later", "CMT_REGISTER_FREE_LATER", Scope::Process,
      "With hot buffers (register = hot or auto), 1: a free() of a chunk holding registrations "
      "returns at once, and a thread of cmt's unregisters them and then "
      "frees the chunk (cuMemHostUnregister waits for every kernel queued on "
      "the GPU, and the driver holds the process's other CUDA calls meanwhile: "
      "the wait moves to the program's next CUDA call unless that comes later); "
      "a realloc() of such a chunk moves it (malloc, copy, that free); 0: both wait for it.",
      &Config::register_free_later));
  t.push_back(flag_option("peer", "CMT_PEER", Scope::Process,
                          "Copies between two GPUs that have no peer access (none possible, or "
                          "none enabled) go through a pinned ring in the host, the source GPU's "
                          "device-to-host DMA of one piece overlapping the destination's "
                          "host-to-device DMA of the one before; 0 leaves them to CUDA. Where peer "
                          "access is enabled they are always CUDA's.",
                          &Config::peer));
  t.push_back(size_option("peer_threshold", "CMT_PEER_THRESHOLD", Scope::Process, false,
                          "GPU-to-GPU copies smaller than this are forwarded to CUDA.",
                          &Config::peer_threshold, 0, std::size_t{1} << 40));
  t.push_back({"log", "CMT_LOG", Scope::Process, false, ValueKind::Choice,
               "Log level, to stderr with the prefix [cmt]: off, error, warn, info, or debug "
               "(traces every copy, and makes host-to-device copies wait for their DMAs to log "
               "when they completed, so it slows copies down).",
               [](Config& c, std::string_view v) -> std::string {
                 const std::string s = lower(v);
                 for (int i = 0; i < 5; ++i)
                   if (s == log_level_name(i)) {
                     c.log_level = s;
                     return {};
                   }
                 return "one of off, error, warn, info, debug";
               },
               [](const Config& c) { return c.log_level; }});
  t.push_back(text_option("stats_file", "CMT_STATS", Scope::EnvOnly,
                          "Write a JSON summary (copies taken, bytes, GB/s, copies into fresh "
                          "memory, host copies, forwards by reason, the CPU time cmt's copy "
                          "threads used) to this file at exit; each %p in it becomes the "
                          "process's pid, one file per process of a tree.",
                          &Config::stats_file));
  t.push_back(
      text_option("record_file", "CMT_RECORD", Scope::EnvOnly,
                  "Record every CUDA copy and taken host copy the process makes (start, "
                  "end, size, direction, entry point, stream, host memory kind and address, "
                  "taken or why not, and each CUDA copy's time on its stream and the stream's "
                  "work since the copy before) and write the trace to this file at exit, for cmt "
                  "trace show and cmt bench replay; "
                  "each %p becomes the pid (cmt run --record sets it).",
                  &Config::record_file));
  t.push_back(text_option("profile", "CMT_PROFILE", Scope::EnvOnly,
                          "A profile to apply over this machine's (cmt run --profile sets it).",
                          &Config::profile));
  t.push_back({"configs_dir", "CMT_CONFIGS_DIR", Scope::EnvOnly, false, ValueKind::Text,
               "Where the shared profiles are (unset: configs/ or share/cmt/configs beside the "
               "library); empty: use none.",
               [](Config& c, std::string_view v) -> std::string {
                 c.configs_dir = std::string(v);
                 return {};
               },
               [](const Config& c) { return c.configs_dir.value_or(""); }});
  t.push_back(text_option("library", "CMT_LIBRARY", Scope::EnvOnly,
                          "The libcmt.so that cmt run and cmt tune preload (unset: the one "
                          "installed with cmt).",
                          &Config::library));
  return t;
}

}  // namespace

const std::vector<OptionSpec>& option_table() {
  // Never destroyed: the library may first read it from the host's static destructors.
  static const auto* table = new std::vector<OptionSpec>(build_table());
  return *table;
}

const OptionSpec* find_option(std::string_view name) {
  for (const OptionSpec& row : option_table())
    if (name == row.name) return &row;
  return nullptr;
}

const std::vector<std::string>& per_gpu_knobs() {
  static const auto* names = [] {
    auto* out = new std::vector<std::string>();
    for (const OptionSpec& row : option_table())
      if (row.scope == Scope::PerGpu) out->push_back(row.name);
    return out;
  }();
  return *names;
}

bool is_per_gpu_knob(const std::string& name) {
  const auto& names = per_gpu_knobs();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<std::string> tuned_knobs() {
  std::vector<std::string> out;
  for (const OptionSpec& row : option_table())
    if (row.tuned) out.push_back(row.name);
  return out;
}

std::string tuned_knobs_text(const Config& config, bool lane_only) {
  std::string out;
  for (const OptionSpec& row : option_table())
    if (row.tuned && (!lane_only || row.scope == Scope::PerGpu))
      out += (out.empty() ? "" : ", ") + std::string(row.name) + " " + row.show(config);
  return out;
}

bool same_lane_knobs(const Config& a, const Config& b) {
  for (const OptionSpec& row : option_table())
    if (row.scope == Scope::PerGpu && row.show(a) != row.show(b)) return false;
  return true;
}

void copy_lane_knobs(Config& to, const Config& from) {
  for (const OptionSpec& row : option_table())
    if (row.scope == Scope::PerGpu) (void)row.apply(to, row.show(from));
}

void apply_environment(Config& config, std::vector<std::string>& errors,
                       const std::function<const char*(const char*)>& getenv_fn, EnvRows rows) {
  for (const OptionSpec& row : option_table()) {
    const bool env_only = row.scope == Scope::EnvOnly;
    if ((rows == EnvRows::EnvOnly && !env_only) || (rows == EnvRows::Knobs && env_only)) continue;
    // secure_getenv: in a setuid or otherwise secure-execution process, nothing (as if unset).
    const char* value = getenv_fn ? getenv_fn(row.env) : secure_getenv(row.env);
    if (!value) continue;
    std::string expected = row.apply(config, value);
    if (expected.empty())
      config.origin[row.name] = std::string("env ") + row.env;
    else
      errors.push_back(std::string(row.env) + "='" + quoted_value(value) +
                       "' is not valid: expected " + expected + "; using the default " +
                       row.default_text());
  }
}

std::string quoted_value(std::string_view text) {
  constexpr std::size_t kShown = 64;
  std::string out;
  for (unsigned char c : text.substr(0, kShown)) {
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789ABCDEF";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (text.size() > kShown) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string describe(const Config& config) {
  std::string out;
  for (const OptionSpec& row : option_table()) {
    auto from = config.origin.find(row.name);
    out += std::string(row.env) + "=" + row.show(config) + "  (" +
           (from == config.origin.end() ? std::string("default") : from->second) + ")\n";
  }
  for (const auto& [gpu, knobs] : config.per_gpu) {
    out += "GPU " + gpu + ":";
    for (const auto& [name, value] : knobs) out += " " + name + "=" + value;
    auto from = config.origin.find("gpu " + gpu);
    out += "  (" + (from == config.origin.end() ? std::string("?") : from->second) + ")\n";
  }
  return out;
}

std::string scope_text(const OptionSpec& row) {
  const char* where = row.scope == Scope::PerGpu    ? "per GPU"
                      : row.scope == Scope::EnvOnly ? "environment only"
                                                    : "process";
  return std::string(where) + (row.tuned ? ", tuned" : "");
}

Config config_for_gpu(const Config& config, const std::string& pci_bus_id) {
  std::string bus = lower(pci_bus_id);
  auto it = config.per_gpu.find(bus);
  if (it == config.per_gpu.end()) return config;
  Config out = config;
  for (const auto& [name, value] : it->second) {
    auto from = config.origin.find(name);
    if (from != config.origin.end() && from->second.rfind("env", 0) == 0) continue;  // CMT_* wins
    if (const OptionSpec* row = find_option(name))
      (void)row->apply(out, value);  // checked when the profile was read
  }
  return out;
}

}  // namespace cmt
