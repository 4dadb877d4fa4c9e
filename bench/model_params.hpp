// Every model parameter of a bench from the command line or a platform
// file, in the platform file's own names: `--platform FILE [--instance
// NAME]` takes that instance's "params" (files it names are found beside
// the platform file), then each `--set KEY=VALUE` overrides one. The IP's
// Config visits them as it visits an instance's, so an unknown key or a
// bad value stops the bench with the line tessera-vp would print.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "spec.hpp"

namespace tessera::bench {

struct ModelParams {
  std::string where = "(command line)", instance;
  nlohmann::json raw = nlohmann::json::object();
  std::uint64_t size = 0;  // the instance's "size", if the platform file gives one
  std::vector<std::string> search_path;  // the folders of the files it extends

  // Takes --platform, --instance and `set_flag` (--set) out of args (the
  // rest stays). Returns false, having said why, if they are malformed.
  bool parse(std::vector<std::string>& args, const std::string& default_instance, const std::string& set_flag = "--set") {
    instance = default_instance;
    std::string platform;
    std::vector<std::string> sets, rest;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if ((a == "--platform" || a == "--instance" || a == set_flag) && i + 1 >= args.size()) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        return false;
      }
      if (a == "--platform") platform = args[++i];
      else if (a == "--instance") instance = args[++i];
      else if (a == set_flag) sets.push_back(args[++i]);
      else rest.push_back(a);
    }
    args = rest;
    try {
      if (!platform.empty()) {
        const nlohmann::json spec = PlatformSpec::read(platform);
        for (const auto& d : spec.value("search_path", nlohmann::json::array())) search_path.push_back(d.get<std::string>());
        bool found = false;
        for (const auto& i : spec.value("instances", nlohmann::json::array()))
          if (i.is_object() && i.value("name", "") == instance) {
            if (i.contains("params")) raw = i["params"];
            if (i.contains("size")) size = parse_size(i["size"].is_string() ? i["size"].get<std::string>() : i["size"].dump());
            found = true;
          }
        if (!found) throw ConfigError(platform + ": no instance named \"" + instance + "\"");
        where = platform;
      }
      for (const std::string& s : sets) {
        const auto eq = s.find('=');
        if (eq == std::string::npos || eq == 0) throw ConfigError(set_flag + " " + s + ": expected KEY=VALUE");
        nlohmann::json v;
        try {
          v = nlohmann::json::parse(s.substr(eq + 1));
        } catch (const nlohmann::json::exception&) {
          v = s.substr(eq + 1);  // a bare word or a quantity such as 30ns
        }
        raw[s.substr(0, eq)] = v;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return false;
    }
    return true;
  }

  // `base` with these parameters visited, finished and validated; false
  // (having said why) if any is unknown or bad.
  template <class Config>
  bool configure(Config& base) const {
    try {
      Params p(where, instance, raw, size);
      p.set_search_path(search_path);
      base.visit(p);
      p.finish();
      base.validate(p);
      return true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return false;
    }
  }
};

}  // namespace tessera::bench
