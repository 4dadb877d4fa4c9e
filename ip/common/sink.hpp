// Where a device's character output goes: "stdout", "stderr", "none" or a
// file path. Keeps everything written for tests and statistics; flushes at
// each newline and when destroyed. In a system of chips (a device path
// "chipN...."), output to the shared stdout or stderr goes out a line at a
// time behind "[chipN] ", so the chips' lines do not interleave.
#pragma once

#include <cstdio>
#include <string>

#include "common/config.hpp"

namespace tessera {

class CharSink {
 public:
  // Throws ConfigError naming `where` when the file cannot be written. // elaboration-only
  CharSink(const std::string& spec, const std::string& where) {
    if (spec == "stdout" || spec == "stderr") {
      file_ = spec == "stdout" ? stdout : stderr;
      const auto dot = where.find('.');
      if (where.rfind("chip", 0) == 0 && dot != std::string::npos && dot > 4 &&
          where.find_first_not_of("0123456789", 4) == dot)
        prefix_ = "[" + where.substr(0, dot) + "] ";
    } else if (spec != "none") {
      file_ = std::fopen(spec.c_str(), "wb");
      if (!file_) throw ConfigError(where + ": cannot write \"" + spec + "\"");  // elaboration-only
      owned_ = true;
    }
  }
  CharSink(const CharSink&) = delete;
  CharSink& operator=(const CharSink&) = delete;
  ~CharSink() {
    flush();
    if (owned_) std::fclose(file_);
  }

  void put(char c) {
    log_.push_back(c);
    if (!file_) return;
    if (!prefix_.empty()) {
      line_.push_back(c);
      if (c == '\n') flush();
      return;
    }
    std::fputc(c, file_);
    if (c == '\n') std::fflush(file_);
  }
  void flush() {
    if (!file_) return;
    if (!line_.empty()) {
      std::fputs((prefix_ + line_).c_str(), file_);
      line_.clear();
    }
    std::fflush(file_);
  }
  const std::string& written() const { return log_; }

 private:
  std::FILE* file_ = nullptr;
  bool owned_ = false;
  std::string log_, prefix_, line_;
};

}  // namespace tessera
