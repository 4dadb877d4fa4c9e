// Reading the user's input files (platform and system files, HBM timing
// files, ELF programs, memory images, UART input). Whatever the path names,
// the answer is the file's bytes or a ConfigError "file: why": a missing
// file, a directory, a device or a pipe where a file belongs, or a file
// larger than anything it could fill, is refused before it is read.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/config.hpp"

namespace tessera {

// The most a description (platform, system or timing file) may hold.
inline constexpr std::uint64_t kMaxDescriptionBytes = 64ull << 20;

// Checks that `file` is a readable regular file of at most `max_bytes`;
// returns its size. `what` names it in the message ("the platform file").
std::uint64_t check_input_file(const std::string& file, const std::string& what, std::uint64_t max_bytes);
// Reads it whole, after the same checks.
std::vector<std::uint8_t> read_input_file(const std::string& file, const std::string& what, std::uint64_t max_bytes);
// Reads and parses a JSON description; malformed JSON and numbers out of
// range (1e400) are ConfigErrors naming the file, the line and the column.
nlohmann::json read_json_file(const std::string& file, const std::string& what);
// The message of a JSON parser error without nlohmann's prefix.
std::string json_error_text(const nlohmann::json::exception& e);

// A value as a message may quote it: at most `max` characters, cut with "...".
std::string cut(const std::string& text, std::size_t max = 80);

}  // namespace tessera
