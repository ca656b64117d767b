#include "config/options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>

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

std::string format_bytes(std::size_t bytes) {
  static const char* const kSuffix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (i < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return std::to_string(bytes) + kSuffix[i];
}

// Row builders: each knob is declared once with its range, and parsing/printing follow from it.
OptionSpec size_option(const char* name, const char* env, const char* def, const char* help,
                       std::size_t Config::*field, std::size_t min, std::size_t max) {
  return {name,
          env,
          def,
          help,
          [field, min, max](Config& c, std::string_view v) -> std::string {
            std::size_t bytes = 0;
            if (!parse_byte_size(v, &bytes) || bytes < min || bytes > max)
              return "a byte size from " + format_bytes(min) + " to " + format_bytes(max) +
                     " such as 4M or 1048576";
            c.*field = bytes;
            return {};
          },
          [field](const Config& c) { return format_bytes(c.*field); }};
}

// A knob with a few named values; `name_of` prints one.
template <typename E>
OptionSpec choice_option(const char* name, const char* env, const char* def, const char* help,
                         E Config::*field, std::vector<E> choices, const char* (*name_of)(E)) {
  return {name,
          env,
          def,
          help,
          [field, choices, name_of](Config& c, std::string_view v) -> std::string {
            const std::string s = lower(v);
            std::string expected = "one of ";
            for (E e : choices) {
              if (s == name_of(e)) {
                c.*field = e;
                return {};
              }
              expected += std::string(e == choices.front() ? "" : ", ") + name_of(e);
            }
            return expected;
          },
          [field, name_of](const Config& c) { return std::string(name_of(c.*field)); }};
}

OptionSpec method_option(const char* name, const char* env, const char* help,
                         CopyMethod Config::*field) {
  return choice_option(name, env, "auto", help, field,
                       {CopyMethod::Auto, CopyMethod::Memcpy, CopyMethod::Streaming},
                       copy_method_name);
}

OptionSpec count_option(const char* name, const char* env, const char* def, const char* help,
                        unsigned Config::*field, unsigned min, unsigned max) {
  return {name,
          env,
          def,
          help,
          [field, min, max](Config& c, std::string_view v) -> std::string {
            unsigned long long n = 0;
            if (!parse_unsigned(v, &n) || n < min || n > max)
              return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
            c.*field = static_cast<unsigned>(n);
            return {};
          },
          [field](const Config& c) { return std::to_string(c.*field); }};
}

OptionSpec bool_option(const char* name, const char* env, const char* def, const char* help,
                       bool Config::*field) {
  return {name,
          env,
          def,
          help,
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

std::vector<OptionSpec> build_table() {
  std::vector<OptionSpec> t;
  t.push_back(bool_option("disable", "CMT_DISABLE", "0",
                          "Forward every copy to CUDA untouched (kill switch).", &Config::disable));
  t.push_back(count_option("threads", "CMT_THREADS", "0",
                           "CPU copy threads per GPU and direction; 0 picks half the GPU's local "
                           "cores, at most 8.",
                           &Config::threads, 0, 256));
  t.push_back(size_option("chunk_bytes", "CMT_CHUNK_BYTES", "2M",
                          "Size of each pinned staging buffer of host-to-device copies, and the "
                          "largest piece of any copy shorter than 64 pieces.",
                          &Config::chunk_bytes, 4096, std::size_t{1} << 30));
  t.push_back(size_option("d2h_chunk_bytes", "CMT_D2H_CHUNK_BYTES", "4M",
                          "Size of each pinned staging buffer of device-to-host copies, and "
                          "their largest piece; copies shorter than 64 such pieces keep pieces "
                          "of at most chunk_bytes.",
                          &Config::d2h_chunk_bytes, 4096, std::size_t{1} << 30));
  t.push_back(count_option("slots", "CMT_SLOTS", "12",
                           "Pinned staging buffers per GPU and direction.", &Config::slots, 2,
                           1024));
  t.push_back(count_option("lanes", "CMT_LANES", "1",
                           "Copy lanes per GPU and direction: copies made at the same time by "
                           "different threads each get a lane (its own threads and staging "
                           "buffers), up to this many; the rest wait for one.",
                           &Config::lanes, 1, 16));
  t.push_back(size_option("threshold", "CMT_THRESHOLD", "2M",
                          "Copies smaller than this are forwarded to CUDA.", &Config::threshold, 0,
                          std::numeric_limits<std::size_t>::max() / 2));
  t.push_back(count_option("spin_us", "CMT_SPIN_US", "1000",
                           "Microseconds an idle copy thread spins before it sleeps: longer "
                           "answers the next copy sooner and costs CPU time.",
                           &Config::spin_us, 0, 1000000));
  t.push_back(bool_option("ramp", "CMT_RAMP", "1",
                          "Start and end each copy with smaller pieces, so the first DMA starts "
                          "and the last one ends sooner; 0 cuts every piece at full size.",
                          &Config::ramp));
  t.push_back(method_option("h2d_method", "CMT_H2D_METHOD",
                            "How host-to-device copies write the pinned staging buffers: auto, "
                            "memcpy, or streaming (non-temporal stores).",
                            &Config::h2d_method));
  t.push_back(method_option("d2h_method", "CMT_D2H_METHOD",
                            "How device-to-host copies write the user's buffer: auto, memcpy, or "
                            "streaming (non-temporal stores).",
                            &Config::d2h_method));
  t.push_back(choice_option(
      "fresh_pages", "CMT_FRESH_PAGES", "huge",
      "Device-to-host copies of 8 MiB or more into memory never written yet (a new tensor's "
      ".cpu()): huge (ask for transparent huge pages there, then fault the pages in on all copy "
      "threads before draining), populate (fault them in, 4 KiB pages), or off (let the drain "
      "fault them one by one).",
      &Config::fresh_pages, {FreshPages::Huge, FreshPages::Populate, FreshPages::Off},
      fresh_pages_name));
  t.push_back(
      {"log", "CMT_LOG", "warn",
       "Log level: off, error, warn, info, debug (traces every copy, and makes host-to-device "
       "copies wait for their DMAs to log when they completed).",
       [](Config& c, std::string_view v) -> std::string {
         std::string s = lower(v);
         if (s != "off" && s != "error" && s != "warn" && s != "info" && s != "debug")
           return "one of off, error, warn, info, debug";
         c.log_level = s;
         return {};
       },
       [](const Config& c) { return c.log_level; }});
  t.push_back({"stats_file", "CMT_STATS", "",
               "Write a JSON summary of taken and forwarded copies to this file at exit.",
               [](Config& c, std::string_view v) -> std::string {
                 c.stats_file = std::string(v);
                 return {};
               },
               [](const Config& c) { return c.stats_file; }});
  return t;
}

}  // namespace

const std::vector<OptionSpec>& option_table() {
  // Never destroyed: the library may first read it from the host's static destructors.
  static const auto* table = new std::vector<OptionSpec>(build_table());
  return *table;
}

bool parse_byte_size(std::string_view text, std::size_t* out) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  unsigned long long value = 0;
  if (!parse_unsigned(text.substr(0, digits), &value)) return false;
  std::string suffix = lower(text.substr(digits));
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'k':
        shift = 10;
        break;
      case 'm':
        shift = 20;
        break;
      case 'g':
        shift = 30;
        break;
      case 't':
        shift = 40;
        break;
      case 'b':
        shift = 0;
        break;
      default:
        return false;
    }
    std::string rest = suffix.substr(1);
    if (suffix[0] == 'b' ? !rest.empty() : !(rest.empty() || rest == "b" || rest == "ib"))
      return false;
  }
  if (shift && value > (std::numeric_limits<std::size_t>::max() >> shift)) return false;
  *out = static_cast<std::size_t>(value) << shift;
  return true;
}

void apply_environment(Config& config, std::vector<std::string>& errors,
                       const std::function<const char*(const char*)>& getenv_fn) {
  for (const OptionSpec& row : option_table()) {
    const char* value = getenv_fn ? getenv_fn(row.env) : std::getenv(row.env);
    if (!value) continue;
    std::string expected = row.apply(config, value);
    if (expected.empty())
      config.origin[row.name] = std::string("env ") + row.env;
    else
      errors.push_back(std::string(row.env) + "='" + value + "' is not valid: expected " +
                       expected + "; using the default " + row.default_text);
  }
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

const std::vector<std::string>& per_gpu_knobs() {
  static const auto* names =
      new std::vector<std::string>{"threads", "chunk_bytes", "d2h_chunk_bytes", "slots",
                                   "spin_us", "ramp",        "h2d_method",      "d2h_method"};
  return *names;
}

bool is_per_gpu_knob(const std::string& name) {
  const auto& names = per_gpu_knobs();
  return std::find(names.begin(), names.end(), name) != names.end();
}

Config config_for_gpu(const Config& config, const std::string& pci_bus_id) {
  std::string bus = pci_bus_id;
  for (char& c : bus) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto it = config.per_gpu.find(bus);
  if (it == config.per_gpu.end()) return config;
  Config out = config;
  for (const auto& [name, value] : it->second) {
    auto from = config.origin.find(name);
    if (from != config.origin.end() && from->second.rfind("env", 0) == 0) continue;  // CMT_* wins
    for (const OptionSpec& row : option_table())
      if (name == row.name) (void)row.apply(out, value);  // checked when the profile was read
  }
  return out;
}

}  // namespace cmt
