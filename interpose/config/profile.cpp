#include "config/profile.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <sstream>
#include <utility>

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/host_files.h"
#include "config/tomlpp.h"

namespace cmt {
namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string where(const std::string& name, const toml::source_region& src) {
  std::ostringstream out;
  out << name;
  if (src.begin.line) out << ":" << src.begin.line << ":" << src.begin.column;
  return out.str();
}

// A TOML value as the text the option table parses: integers and booleans spelled out, strings
// as they are. Returns false for tables, arrays, floats and dates.
bool as_option_text(const toml::node& node, std::string* text) {
  if (auto s = node.value<std::string>(); s && node.is_string()) {
    *text = *s;
  } else if (node.is_integer()) {
    *text = std::to_string(node.as_integer()->get());
  } else if (node.is_boolean()) {
    *text = node.as_boolean()->get() ? "1" : "0";
  } else {
    return false;
  }
  return true;
}

// Applies one knob's TOML value through the option table's parser; false, with an error naming
// the file, line, column and key and what was expected, if the value is not valid.
bool apply_knob(const OptionSpec& row, const toml::node& node, const std::string& key,
                const std::string& name, Config& config, ProfileReport& report) {
  std::string value;
  if (!as_option_text(node, &value)) {
    report.errors.push_back(where(name, node.source()) + ": key '" + key +
                            "' must be a string, integer or boolean");
    return false;
  }
  std::string expected = row.apply(config, value);
  if (!expected.empty()) {
    report.errors.push_back(where(name, node.source()) + ": key '" + key + "' = '" +
                            quoted_value(value) + "' is not valid: expected " + expected);
    return false;
  }
  return true;
}

const char* const kTopLevel[] = {"schema", "cmt_version", "machine", "cmt", "gpu", "measured"};

// "0000:1b:00.0": domain, bus, device, function, in hex, as CUDA and sysfs write them.
bool is_pci_bus_id(const std::string& s) {
  auto hex = [&](std::size_t from, std::size_t n) {
    for (std::size_t i = from; i < from + n; ++i)
      if (i >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
    return true;
  };
  return s.size() == 12 && hex(0, 4) && s[4] == ':' && hex(5, 2) && s[7] == ':' && hex(8, 2) &&
         s[10] == '.' && s[11] >= '0' && s[11] <= '7';
}

// Compares a profile's [machine] with this machine: another CPU or GPU model is an error (its
// knobs were tuned for different hardware), another driver or link a warning.
void check_machine(const toml::table& m, const MachineFingerprint& here, const std::string& name,
                   ProfileReport& report) {
  std::vector<std::string> differ;
  auto text = [&](const char* key) { return m[key].value<std::string>(); };
  if (auto cpu = text("cpu"); cpu && *cpu != here.cpu_model)
    differ.push_back("CPU '" + *cpu + "' (here '" + here.cpu_model + "')");
  if (auto cpus = m["cpus"].value<int64_t>(); cpus && *cpus != here.cpus)
    differ.push_back(std::to_string(*cpus) + " CPUs (here " + std::to_string(here.cpus) + ")");
  if (const toml::array* gpus = m["gpus"].as_array()) {
    std::vector<std::string> theirs;
    for (auto&& g : *gpus)
      if (auto v = g.value<std::string>()) theirs.push_back(*v);
    if (theirs != here.gpus) {
      auto join = [](const std::vector<std::string>& v) {
        std::string out;
        for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
        return "[" + out + "]";
      };
      differ.push_back("GPUs " + join(theirs) + " (here " + join(here.gpus) + ")");
    }
  }
  if (!differ.empty()) {
    std::string msg = name + ": tuned on another machine:";
    for (const auto& d : differ) msg += " " + d + ";";
    msg.back() = ';';
    report.errors.push_back(msg + " re-tune here, or remove [machine] to use it anyway");
  }
  if (auto driver = text("driver"); driver && !here.driver.empty() && *driver != here.driver)
    report.warnings.push_back(name + ": tuned with driver " + *driver + ", this machine has " +
                              here.driver);
  if (auto pcie = text("pcie"); pcie && !here.pcie.empty() && *pcie != here.pcie)
    report.warnings.push_back(name + ": tuned on a " + *pcie + " link, this GPU has " + here.pcie);
}

// "threads, chunk_bytes, ... and d2h_method": the knobs a [gpu."BUS"] table may set.
std::string per_gpu_list() {
  const auto& names = per_gpu_knobs();
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

}  // namespace

std::string profile_text_error(std::string_view text, const std::string& name) {
  std::size_t line = 1, column = 1;
  int depth = 0;
  char quote = 0;  // inside a string opened by this quote
  bool comment = false, escaped = false;
  auto at = [&] { return name + ":" + std::to_string(line) + ":" + std::to_string(column); };
  for (unsigned char c : text) {
    if (c >= 0x80) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", c);
      return at() + ": byte " + hex + " is not ASCII; profiles are ASCII";
    }
    if (c == '\n') {
      ++line;
      column = 1;
      comment = false;
      escaped = false;
      continue;
    }
    if (comment) {
      ++column;
      continue;
    }
    if (quote) {
      if (escaped)
        escaped = false;
      else if (c == '\\' && quote == '"')
        escaped = true;
      else if (c == static_cast<unsigned char>(quote))
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = static_cast<char>(c);
    } else if (c == '#') {
      comment = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxProfileNesting)
        return at() + ": nested more than " + std::to_string(kMaxProfileNesting) +
               " deep (arrays and tables); a profile needs 2";
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    ++column;
  }
  return {};
}

std::string nearest_option(const std::string& key) {
  std::string best;
  std::size_t best_distance = 3;  // further than this is no suggestion
  for (const OptionSpec& row : option_table()) {
    if (!row.profile_may_set()) continue;
    std::size_t d = edit_distance(key, row.name);
    if (d < best_distance) {
      best_distance = d;
      best = row.name;
    }
  }
  return best;
}

namespace {

// The top level: unknown keys warned about, the schema required and checked, and the machine
// compared with this one. False (an error in `report`) if the profile must not be applied.
bool check_header(const toml::table& root, const std::string& name, const MachineFingerprint* here,
                  ProfileReport& report) {
  for (auto&& [key, node] : root) {
    std::string k(key.str());
    if (std::find(std::begin(kTopLevel), std::end(kTopLevel), k) == std::end(kTopLevel))
      report.warnings.push_back(where(name, node.source()) + ": unknown top-level key '" + k +
                                "' is ignored");
  }
  const toml::node* schema = root.get("schema");
  if (!schema) {
    report.errors.push_back(
        name + ": no 'schema' key; expected schema = " + std::to_string(kProfileSchema));
    return false;
  }
  if (schema->is_string()) {
    report.errors.push_back(where(name, schema->source()) +
                            ": schema must be an integer: write schema = " +
                            std::to_string(kProfileSchema) + ", without quotes");
    return false;
  }
  if (!schema->is_integer() || schema->as_integer()->get() != kProfileSchema) {
    std::string got;
    as_option_text(*schema, &got);
    report.errors.push_back(where(name, schema->source()) + ": schema " +
                            (got.empty() ? std::string("of the wrong type") : "'" + got + "'") +
                            " is not supported; this cmt reads schema " +
                            std::to_string(kProfileSchema));
    return false;
  }
  if (const toml::node* machine = root.get("machine"); machine && here) {
    if (const toml::table* m = machine->as_table())
      check_machine(*m, *here, name, report);
    else
      report.errors.push_back(where(name, machine->source()) + ": 'machine' must be a table");
  }
  return report.errors.empty();
}

// [cmt]: the process's knobs, each through its row's parser.
bool apply_cmt_table(const toml::node& section, const std::string& name, Config& updated,
                     ProfileReport& report) {
  const toml::table* knobs = section.as_table();
  if (!knobs) {
    report.errors.push_back(where(name, section.source()) + ": 'cmt' must be a table");
    return false;
  }
  for (auto&& [key, node] : *knobs) {
    std::string k(key.str());
    const OptionSpec* row = find_option(k);
    if (row && !row->profile_may_set()) {
      report.warnings.push_back(where(name, node.source()) + ": 'cmt." + k +
                                "' is ignored: only the environment sets it (" + row->env +
                                "); a profile never says which files are read or written");
      continue;
    }
    if (!row) {
      std::string hint = nearest_option(k);
      report.warnings.push_back(where(name, node.source()) + ": unknown key 'cmt." + k +
                                "' is ignored" +
                                (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
      continue;
    }
    if (apply_knob(*row, node, "cmt." + k, name, updated, report))
      updated.origin[row->name] = "profile " + name;
  }
  return true;
}

// [gpu."BUS"]: per-GPU knobs, checked now and applied to that GPU's lanes when they are built.
bool apply_gpu_tables(const toml::node& section, const std::string& name, Config& updated,
                      ProfileReport& report) {
  const toml::table* gpus = section.as_table();
  if (!gpus) {
    report.errors.push_back(where(name, section.source()) +
                            ": 'gpu' must be a table of tables, e.g. [gpu.\"0000:1b:00.0\"]");
    return false;
  }
  for (auto&& [bus_key, gpu_node] : *gpus) {
    std::string bus(bus_key.str());
    const toml::table* knobs = gpu_node.as_table();
    if (!is_pci_bus_id(bus) || !knobs) {
      report.errors.push_back(where(name, gpu_node.source()) + ": 'gpu." + bus +
                              "' must be a table named by a PCI bus id such as "
                              "\"0000:1b:00.0\" (nvidia-smi, cmt topo)");
      continue;
    }
    for (char& c : bus) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (auto&& [key, node] : *knobs) {
      std::string k(key.str());
      const std::string full = "gpu." + bus + "." + k;
      if (!is_per_gpu_knob(k)) {
        std::string hint = nearest_option(k);
        report.warnings.push_back(where(name, node.source()) + ": '" + full +
                                  "' is ignored: per GPU, only " + per_gpu_list() + " can be set" +
                                  (hint.empty() || !is_per_gpu_knob(hint)
                                       ? std::string()
                                       : " (did you mean '" + hint + "'?)"));
        continue;
      }
      Config scratch;
      if (apply_knob(*find_option(k), node, full, name, scratch, report)) {
        as_option_text(node, &updated.per_gpu[bus][k]);
        updated.origin["gpu " + bus] = "profile " + name;
      }
    }
  }
  return true;
}

}  // namespace

ProfileReport load_profile_text(std::string_view text, const std::string& name, Config& config,
                                const MachineFingerprint* here) {
  ProfileReport report;
  try {
    if (std::string e = profile_text_error(text, name); !e.empty()) {
      report.errors.push_back(e);
      return report;
    }
    toml::parse_result parsed = toml::parse(text, name);
    if (!parsed) {
      const toml::parse_error& e = parsed.error();
      report.errors.push_back(where(name, e.source()) +
                              ": not valid TOML: " + std::string(e.description()));
      return report;
    }
    const toml::table& root = parsed.table();
    if (!check_header(root, name, here, report)) return report;
    Config updated = config;
    if (const toml::node* section = root.get("cmt"))
      if (!apply_cmt_table(*section, name, updated, report)) return report;
    if (const toml::node* section = root.get("gpu"))
      if (!apply_gpu_tables(*section, name, updated, report)) return report;
    if (report.errors.empty()) config = updated;
  } catch (const std::exception& e) {
    report.errors.push_back(name + ": " + e.what());
  } catch (...) {
    report.errors.push_back(name + ": could not be read");
  }
  return report;
}

LoadedConfiguration load_configuration(const std::string& profile_path,
                                       const MachineFingerprint& here,
                                       const std::function<const char*(const char*)>& getenv_fn) {
  LoadedConfiguration out;
  auto absorb = [&out](const ProfileReport& r) {
    out.profile.errors.insert(out.profile.errors.end(), r.errors.begin(), r.errors.end());
    out.profile.warnings.insert(out.profile.warnings.end(), r.warnings.begin(), r.warnings.end());
  };
  // The environment-only options say which profiles to read; no profile can change them.
  apply_environment(out.config, out.env_errors, getenv_fn, EnvRows::EnvOnly);
  std::string mine = user_profile_path(here);
  if (!mine.empty() && access(mine.c_str(), R_OK) == 0) {
    out.machine_profile = mine;
    absorb(load_profile_file(mine, out.config, &here));
  } else if (SharedProfile shared =
                 find_shared_profile(shared_profiles_dir(out.config.configs_dir), here);
             !shared.path.empty()) {
    // Matched on models: the CPU count may differ, and another driver or link is expected of a
    // profile from someone else's machine, so only errors count.
    MachineFingerprint models = here;
    Config config = out.config;
    std::string text, unused;
    if (shared.match != "exact machine" && read_profile_file(shared.path, &text, &unused) &&
        profile_text_error(text, shared.path).empty()) {
      toml::parse_result parsed = toml::parse(text, shared.path);
      if (parsed)
        if (auto cpus = parsed.table()["machine"]["cpus"].value<int64_t>())
          models.cpus = static_cast<int>(*cpus);
    }
    ProfileReport r = load_profile_file(shared.path, config, &models);
    if (r.ok()) {
      out.config = config;
      out.shared_profile = shared.path;
      out.shared_match = shared.match;
    } else {
      out.profile.warnings.push_back("shared profile " + shared.path +
                                     " not used: " + r.errors.front());
    }
  }
  const std::string& explicit_profile = !profile_path.empty() ? profile_path : out.config.profile;
  if (!explicit_profile.empty()) absorb(load_profile_file(explicit_profile, out.config, &here));
  apply_environment(out.config, out.env_errors, getenv_fn, EnvRows::Knobs);
  return out;
}

void cap_threads(Config& config, std::size_t cores, std::vector<std::string>* warnings,
                 const std::optional<CpuQuota>& quota) {
  cores = std::max<std::size_t>(cores, 1);
  const std::size_t usable = cpus_within(cores, quota);
  auto cap = [&](unsigned threads, const std::string& what, bool from_env) {
    if (threads > cores) {
      warnings->push_back(what + " = " + std::to_string(threads) + " is more than the " +
                          std::to_string(cores) + " cores this process may run on; using " +
                          std::to_string(cores));
      threads = static_cast<unsigned>(cores);
    }
    if (threads <= usable) return threads;
    const std::string past = what + " = " + std::to_string(threads) +
                             " is more than this process's CPU quota keeps busy, " +
                             describe(*quota) + "; ";
    warnings->push_back(
        past + (from_env ? "kept, as set in the environment" : "using " + std::to_string(usable)));
    return from_env ? threads : static_cast<unsigned>(usable);
  };
  const auto from = config.origin.find("threads");
  const bool env = from != config.origin.end() && from->second.rfind("env ", 0) == 0;
  config.threads =
      cap(config.threads,
          from == config.origin.end() ? "threads" : "threads (" + from->second + ")", env);
  for (auto& [bus, knobs] : config.per_gpu) {
    auto it = knobs.find("threads");
    unsigned long long n = 0;
    if (it != knobs.end() && std::sscanf(it->second.c_str(), "%llu", &n) == 1 && n > usable)
      it->second =
          std::to_string(cap(static_cast<unsigned>(std::min<unsigned long long>(n, 1u << 20)),
                             "gpu." + bus + ".threads", false));
  }
}

std::string shared_profiles_dir(const std::optional<std::string>& configured) {
  if (configured) return *configured;  // set but empty: no shared profiles
  Dl_info self{};
  if (!dladdr(reinterpret_cast<void*>(&shared_profiles_dir), &self) || !self.dli_fname) return {};
  std::string binary = self.dli_fname;
  if (binary.find('/') == std::string::npos) {
    // The main program (cmt run from PATH): dladdr names it as it was invoked, not where it is.
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) return {};
    binary.assign(exe, static_cast<std::size_t>(n));
  }
  const std::string dir = binary.substr(0, binary.rfind('/'));
  // In a build tree, the source's configs/; installed, the package's (from cmt in bin/, or from
  // libcmt.so in its library directory).
  for (const char* rel : {"/../configs", "/../share/cmt/configs", "/" CMT_PKGLIB_TO_CONFIGS}) {
    std::string candidate = dir + rel;
    if (access((candidate + "/README.md").c_str(), R_OK) != 0) continue;
    char resolved[PATH_MAX];
    return realpath(candidate.c_str(), resolved) ? std::string(resolved) : candidate;
  }
  return {};
}

SharedProfile find_shared_profile(const std::string& dir, const MachineFingerprint& here) {
  if (dir.empty()) return {};
  const std::string exact = dir + "/" + here.key() + ".toml";
  if (access(exact.c_str(), R_OK) == 0) return {exact, "exact machine"};
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".toml") == 0) names.push_back(n);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    const std::string path = dir + "/" + n;
    std::string text, unused;
    if (!read_profile_file(path, &text, &unused) || !profile_text_error(text, path).empty())
      continue;
    toml::parse_result parsed = toml::parse(text, path);
    if (!parsed) continue;
    const toml::node_view<const toml::node> m = std::as_const(parsed.table())["machine"];
    auto cpu = m["cpu"].value<std::string>();
    std::vector<std::string> gpus;
    if (const toml::array* a = m["gpus"].as_array())
      for (auto&& g : *a)
        if (auto v = g.value<std::string>()) gpus.push_back(*v);
    if (cpu && *cpu == here.cpu_model && gpus == here.gpus && !gpus.empty())
      return {path, "same CPU and GPU models"};
  }
  return {};
}

bool read_profile_file(const std::string& path, std::string* text, std::string* error) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below like any
  // other file that is not regular.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    *error = std::strerror(errno);
    return false;
  }
  std::string why;
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    why = std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    why = "is a directory, not a profile";
  } else if (!S_ISREG(st.st_mode)) {
    why = std::string("is ") +
          (S_ISFIFO(st.st_mode)   ? "a FIFO"
           : S_ISSOCK(st.st_mode) ? "a socket"
                                  : "a device") +
          ", not a regular file; profiles are read only from regular files";
  } else if (static_cast<std::size_t>(st.st_size) > kMaxProfileBytes) {
    why = "is " + std::to_string(st.st_size) + " bytes; a profile is at most " +
          std::to_string(kMaxProfileBytes >> 20) + " MiB";
  } else {
    // Read to the limit and one byte past it, in case the file grew since fstat.
    std::string data(kMaxProfileBytes + 1, '\0');
    std::size_t got = 0;
    for (;;) {
      const ssize_t n = read(fd, &data[got], data.size() - got);
      if (n > 0 && (got += static_cast<std::size_t>(n)) < data.size()) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) why = std::strerror(errno);
      break;
    }
    if (why.empty() && got > kMaxProfileBytes)
      why = "grew past " + std::to_string(kMaxProfileBytes >> 20) + " MiB while being read";
    if (why.empty()) {
      data.resize(got);
      *text = std::move(data);
    }
  }
  close(fd);
  if (!why.empty()) *error = why;
  return why.empty();
}

ProfileReport load_profile_file(const std::string& path, Config& config,
                                const MachineFingerprint* here) {
  std::string text, why;
  if (!read_profile_file(path, &text, &why)) {
    ProfileReport report;
    report.errors.push_back(path + ": cannot read the profile: " + why);
    return report;
  }
  return load_profile_text(text, path, config, here);
}

}  // namespace cmt
