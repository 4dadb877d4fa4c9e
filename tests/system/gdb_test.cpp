// gdb-multiarch in batch mode against tessera-vp --gdb: break at main,
// step, read a variable and a register, set a watchpoint, continue to the
// end of the program.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

}  // namespace

TEST(Gdb, BreakStepPrintWatchContinue) {
  const std::string elf = std::string(TESSERA_FIRMWARE_DIR) + "/gdb_demo.elf";
  const unsigned port = 20000 + static_cast<unsigned>(::getpid() % 20000);
  const std::string port_s = std::to_string(port);
  // tessera-vp waits for the debugger at reset.
  std::ofstream("gdb_test.vp.err").close();
  pid_t vp = 0;
  posix_spawn_file_actions_t io;
  posix_spawn_file_actions_init(&io);
  posix_spawn_file_actions_addopen(&io, 1, "gdb_test.vp.out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&io, 2, "gdb_test.vp.err", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const char* argv[] = {TESSERA_VP, "-q", "--firmware", elf.c_str(), "--gdb", port_s.c_str(), "--gdb-wait", nullptr};
  ASSERT_EQ(posix_spawn(&vp, TESSERA_VP, &io, nullptr, const_cast<char**>(argv), environ), 0);
  for (int i = 0; i < 200 && slurp("gdb_test.vp.err").find("GDB server on") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));

  const std::string gdb = run_capture(
      "timeout 60 gdb-multiarch -batch -nx -ex 'set confirm off' -ex 'file " + elf + "' -ex 'target remote :" + port_s +
      "' -ex 'break main' -ex 'continue' -ex 'next' -ex 'next' -ex 'print counter' -ex 'print $pc'"
      " -ex 'step' -ex 'watch counter' -ex 'continue' -ex 'delete' -ex 'continue' 2>&1");
  int status = 0;
  ::waitpid(vp, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp("gdb_test.vp.err");
  EXPECT_NE(gdb.find("Breakpoint 1, main ()"), std::string::npos) << gdb;
  EXPECT_NE(gdb.find("16\t    counter = total;"), std::string::npos) << "next, next: " << gdb;
  EXPECT_NE(gdb.find("$1 = 0"), std::string::npos) << gdb;
  EXPECT_NE(gdb.find("<main+"), std::string::npos) << "pc in main: " << gdb;
  EXPECT_NE(gdb.find("Hardware watchpoint 2: counter"), std::string::npos) << gdb;
  EXPECT_NE(gdb.find("Old value = 0\nNew value = 1"), std::string::npos) << gdb;
  EXPECT_NE(gdb.find("exited normally"), std::string::npos) << gdb;
  EXPECT_EQ(slurp("gdb_test.vp.out"), "gdb demo: total 30\n");
}
