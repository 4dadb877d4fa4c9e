#include "common/input.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace tessera {

std::string cut(const std::string& text, std::size_t max) {
  if (text.size() <= max) return text;
  return text.substr(0, max) + fmt::format("... ({} characters)", text.size());
}

std::uint64_t check_input_file(const std::string& file, const std::string& what, std::uint64_t max_bytes) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0)
    throw ConfigError(fmt::format("{}: cannot open {}: {}", cut(file), what, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw ConfigError(fmt::format("{}: {} is a directory, not a file", cut(file), what));
  if (!S_ISREG(st.st_mode))
    throw ConfigError(fmt::format("{}: {} is not a regular file (a device, a pipe or a socket)", cut(file), what));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes)
    throw ConfigError(fmt::format("{}: {} is {} bytes; at most {} are accepted", cut(file), what, size, max_bytes));
  return size;
}

std::vector<std::uint8_t> read_input_file(const std::string& file, const std::string& what, std::uint64_t max_bytes) {
  const std::uint64_t size = check_input_file(file, what, max_bytes);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot open {}", cut(file), what));
  std::vector<std::uint8_t> bytes(size);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (static_cast<std::uint64_t>(in.gcount()) != size)
    throw ConfigError(fmt::format("{}: {} changed while it was read", cut(file), what));
  return bytes;
}

std::string json_error_text(const nlohmann::json::exception& e) {
  const std::string msg = e.what();
  const auto close = msg.find("] ");
  return close == std::string::npos ? msg : msg.substr(close + 2);
}

nlohmann::json read_json_file(const std::string& file, const std::string& what) {
  const std::vector<std::uint8_t> bytes = read_input_file(file, what, kMaxDescriptionBytes);
  try {
    return nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e400
    throw ConfigError(fmt::format("{}: malformed JSON: {}", cut(file), json_error_text(e)));
  }
}

}  // namespace tessera
