#include "profile_writer.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "config/profile.h"

#include "config/tomlpp.h"

namespace cmt {

std::string profile_toml(const MachineFingerprint& machine, const Config& tuned,
                         const TuneRecord& record, const std::string& gpu_bus_id,
                         const std::string& existing) {
  toml::table root;
  if (!gpu_bus_id.empty() && !existing.empty() && profile_text_error(existing, "").empty()) {
    toml::parse_result old = toml::parse(existing);
    if (old) root = std::move(old).table();
  }
  root.insert_or_assign("schema", kProfileSchema);
  root.insert_or_assign("cmt_version", CMT_VERSION);

  toml::array gpus;
  for (const std::string& g : machine.gpus) gpus.push_back(g);
  toml::table m;
  m.insert("cpu", machine.cpu_model);
  m.insert("cpus", machine.cpus);
  m.insert("gpus", gpus);
  if (!machine.pcie.empty()) m.insert("pcie", machine.pcie);
  if (!machine.driver.empty()) m.insert("driver", machine.driver);
  root.insert_or_assign("machine", m);

  // The chosen knobs, written as the option table prints them, so the loader reads them back
  // through the same parsers as CMT_* variables.
  toml::table knobs, lane_knobs;
  if (const toml::table* old = root["cmt"].as_table()) knobs = *old;
  for (const OptionSpec& row : option_table()) {
    if (!row.tuned) continue;
    const std::string value = row.show(tuned);
    toml::table& into = !gpu_bus_id.empty() && row.scope == Scope::PerGpu ? lane_knobs : knobs;
    // Counts as TOML integers, flags as booleans; sizes ("2M") and choices as strings.
    if (row.kind == ValueKind::Count)
      into.insert_or_assign(row.name, static_cast<int64_t>(std::stoll(value)));
    else if (row.kind == ValueKind::Flag)
      into.insert_or_assign(row.name, value == "1");
    else
      into.insert_or_assign(row.name, value);
  }
  root.insert_or_assign("cmt", knobs);
  if (!gpu_bus_id.empty()) {
    std::string bus = gpu_bus_id;
    for (char& c : bus) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    toml::table gpus;
    if (const toml::table* old = root["gpu"].as_table()) gpus = *old;
    gpus.insert_or_assign(bus, lane_knobs);
    root.insert_or_assign("gpu", gpus);
  }

  toml::table measured;
  measured.insert("search", record.search);
  measured.insert("date", record.date);
  measured.insert("seconds", record.seconds);
  measured.insert("gpu", record.gpu);
  measured.insert("mix", record.mix);
  measured.insert("mix_gbps", record.mix_gbps);
  if (record.interrupted) measured.insert("interrupted", true);
  toml::array notes;
  for (const std::string& n : record.notes) notes.push_back(n);
  measured.insert("notes", notes);
  toml::array rows;
  for (const MeasuredRow& r : record.rows) {
    auto round1 = [](double x) {
      return static_cast<double>(static_cast<long long>(x * 10 + 0.5)) / 10;
    };
    rows.push_back(toml::table{
        {"bytes", format_byte_size(r.bytes)},
        {"direction", r.direction == Direction::HostToDevice ? "h2d" : "d2h"},
        {"cuda_gbps", round1(r.cuda_gbps)},
        {"builtin_gbps", round1(r.builtin_gbps)},
        {"tuned_gbps", round1(r.tuned_gbps)},
        {"pinned_gbps", round1(r.pinned_gbps)},
    });
  }
  measured.insert("copies", rows);
  root.insert_or_assign("measured", measured);

  std::ostringstream out;
  out << "# cmt profile, written by `cmt tune --search " << record.search
      << "`. Knobs under [cmt]\n"
      << "# are the option table's (see `cmt profile show`); CMT_* variables override them.\n"
      << toml::toml_formatter(root, toml::toml_formatter::default_flags |
                                        toml::format_flags::relaxed_float_precision)
      << "\n";
  return out.str();
}

}  // namespace cmt
