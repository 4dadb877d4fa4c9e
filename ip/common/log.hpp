// Logging for every model: SC_REPORT_* with a closed set of message types,
// the instance path in every message, and per-instance verbosity
// (--log t1.uart0=debug; a prefix covers the instances below it).
//
//   guest error    firmware did something wrong; the model answers and goes on.
//                  Reported once per place, counted every time; --strict turns
//                  any of them into a failing exit code.
//   unimplemented  a feature the model leaves out was used; once per place.
//   config         a bad platform description; elaboration stops.
//   internal       a model bug; the run stops with a report and exit code 3.
//   trace          debug and trace chatter, filtered by verbosity.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace tessera::log {

inline constexpr const char* kGuestError = "tessera/guest-error";
inline constexpr const char* kUnimplemented = "tessera/unimplemented";
inline constexpr const char* kConfig = "tessera/config";
inline constexpr const char* kInternal = "tessera/internal";
inline constexpr const char* kTrace = "tessera/trace";

enum class Level : int { quiet = 0, error, warning, info, debug, trace };

// Parses "error|warning|info|debug|trace|quiet"; throws std::invalid_argument.
Level parse_level(const std::string& name);
// Sets the verbosity of an instance and everything below it ("" = default).
void set_level(const std::string& path, Level level);
// After elaboration: "" when every path given to set_level is an instance
// or a prefix of instances, else a message naming the ones that are not.
std::string unknown_paths();
Level level_of(const std::string& path);
inline bool enabled(const std::string& path, Level l) { return static_cast<int>(l) <= static_cast<int>(level_of(path)); }

void set_strict(bool strict);
bool strict();
// How many guest errors happened (all of them, not only the ones printed).
std::uint64_t guest_error_count();
// Resets counters, once-per-place memory and levels (for tests).
void reset();

// Installs the report handler that prints "[time] severity type: path: msg".
void install_handler();

void emit_guest_error(const std::string& path, const char* place, const std::string& msg);
void emit_unimplemented(const std::string& path, const char* place, const std::string& msg);
void emit(const std::string& path, Level level, const std::string& msg);
[[noreturn]] void emit_internal(const std::string& path, const std::string& msg);

// `place` is a short stable tag (a string literal) that identifies where in
// the model the error happens; the message is printed once per (path, place).
template <class... A>
void guest_error(const std::string& path, const char* place, fmt::format_string<A...> f, A&&... a) {
  emit_guest_error(path, place, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void unimplemented(const std::string& path, const char* place, fmt::format_string<A...> f, A&&... a) {
  emit_unimplemented(path, place, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void info(const std::string& path, fmt::format_string<A...> f, A&&... a) {
  if (enabled(path, Level::info)) emit(path, Level::info, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void debug(const std::string& path, fmt::format_string<A...> f, A&&... a) {
  if (enabled(path, Level::debug)) emit(path, Level::debug, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void trace(const std::string& path, fmt::format_string<A...> f, A&&... a) {
  if (enabled(path, Level::trace)) emit(path, Level::trace, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
[[noreturn]] void internal(const std::string& path, fmt::format_string<A...> f, A&&... a) {
  emit_internal(path, fmt::format(f, std::forward<A>(a)...));
}

}  // namespace tessera::log
