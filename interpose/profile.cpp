#include "profile.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

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

const char* const kTopLevel[] = {"schema", "cmt_version", "machine", "cmt", "measured"};

}  // namespace

std::string nearest_option(const std::string& key) {
  std::string best;
  std::size_t best_distance = 3;  // further than this is no suggestion
  for (const OptionSpec& row : option_table()) {
    std::size_t d = edit_distance(key, row.name);
    if (d < best_distance) {
      best_distance = d;
      best = row.name;
    }
  }
  return best;
}

ProfileReport load_profile_text(std::string_view text, const std::string& name, Config& config) {
  ProfileReport report;
  try {
    toml::parse_result parsed = toml::parse(text, name);
    if (!parsed) {
      const toml::parse_error& e = parsed.error();
      report.errors.push_back(where(name, e.source()) +
                              ": not valid TOML: " + std::string(e.description()));
      return report;
    }
    const toml::table& root = parsed.table();
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
      return report;
    }
    if (!schema->is_integer() || schema->as_integer()->get() != kProfileSchema) {
      std::string got;
      as_option_text(*schema, &got);
      report.errors.push_back(where(name, schema->source()) + ": schema " +
                              (got.empty() ? std::string("of the wrong type") : "'" + got + "'") +
                              " is not supported; this cmt reads schema " +
                              std::to_string(kProfileSchema));
      return report;
    }
    Config updated = config;
    if (const toml::node* section = root.get("cmt")) {
      const toml::table* knobs = section->as_table();
      if (!knobs) {
        report.errors.push_back(where(name, section->source()) + ": 'cmt' must be a table");
        return report;
      }
      for (auto&& [key, node] : *knobs) {
        std::string k(key.str());
        auto row = std::find_if(option_table().begin(), option_table().end(),
                                [&](const OptionSpec& r) { return k == r.name; });
        if (row == option_table().end()) {
          std::string hint = nearest_option(k);
          report.warnings.push_back(where(name, node.source()) + ": unknown key 'cmt." + k +
                                    "' is ignored" +
                                    (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
          continue;
        }
        std::string value;
        if (!as_option_text(node, &value)) {
          report.errors.push_back(where(name, node.source()) + ": key 'cmt." + k +
                                  "' must be a string, integer or boolean");
          continue;
        }
        std::string expected = row->apply(updated, value);
        if (!expected.empty()) {
          report.errors.push_back(where(name, node.source()) + ": key 'cmt." + k + "' = '" + value +
                                  "' is not valid: expected " + expected);
          continue;
        }
        updated.origin[row->name] = "profile " + name;
      }
    }
    if (report.errors.empty()) config = updated;
  } catch (const std::exception& e) {
    report.errors.push_back(name + ": " + e.what());
  } catch (...) {
    report.errors.push_back(name + ": could not be read");
  }
  return report;
}

LoadedConfiguration load_configuration(const std::string& profile_path,
                                       const std::function<const char*(const char*)>& getenv_fn) {
  LoadedConfiguration out;
  if (!profile_path.empty()) out.profile = load_profile_file(profile_path, out.config);
  apply_environment(out.config, out.env_errors, getenv_fn);
  return out;
}

ProfileReport load_profile_file(const std::string& path, Config& config) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ProfileReport report;
    report.errors.push_back(path + ": cannot open the profile");
    return report;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return load_profile_text(text.str(), path, config);
}

}  // namespace cmt
