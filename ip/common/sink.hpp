// Where a device's character output goes: "stdout", "stderr", "none" or a
// file path. Keeps everything written for tests and statistics; flushes at
// each newline and when destroyed.
#pragma once

#include <cstdio>
#include <string>

#include "common/config.hpp"

namespace tessera {

class CharSink {
 public:
  // Throws ConfigError naming `where` when the file cannot be written. // elaboration-only
  CharSink(const std::string& spec, const std::string& where) {
    if (spec == "stdout") file_ = stdout;
    else if (spec == "stderr") file_ = stderr;
    else if (spec != "none") {
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
    std::fputc(c, file_);
    if (c == '\n') std::fflush(file_);
  }
  void flush() {
    if (file_) std::fflush(file_);
  }
  const std::string& written() const { return log_; }

 private:
  std::FILE* file_ = nullptr;
  bool owned_ = false;
  std::string log_;
};

}  // namespace tessera
