// Running the real tessera-vp from a test: each test's files carry its
// name, output and exit code come back.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace tessera::testing {

// "<test name>.<file>" in the working directory.
inline std::string local(const std::string& file) {
  return std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "." + file;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Outcome {
  int code;
  std::string out, err;
};

// Every process a test starts ends within this, or is killed (exit code 124 or 137).
inline constexpr int kProcessTimeoutS = 300;

// tessera-vp [-q] ARGS, stdin empty; its output in local("out") and local("err").
inline Outcome run_vp(const std::string& args, bool quiet) {
  const std::string cmd = "timeout -k 5 " + std::to_string(kProcessTimeoutS) + " " + std::string(TESSERA_VP) +
                          (quiet ? " -q " : " ") + args + " >" + local("out") + " 2>" + local("err") + " </dev/null";
  const int status = std::system(cmd.c_str());
  return Outcome{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(local("out")), slurp(local("err"))};
}

// tessera-vp -q ARGS.
inline Outcome run(const std::string& args) { return run_vp(args, true); }

}  // namespace tessera::testing
