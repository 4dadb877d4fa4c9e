// gdb-multiarch in batch mode against tessera-vp --gdb: break at main,
// step, read a variable and a register, set a watchpoint, continue to the
// end of the program.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "elf_builder.hpp"

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

// gdb-multiarch in batch mode, bounded in time: the ELF's symbols (none for
// an empty elf), connected to 127.0.0.1:port (not localhost: a machine
// without /etc/hosts cannot resolve the name), then `commands` in order.
std::string gdb_batch(const std::string& elf, const std::string& port, const std::vector<std::string>& commands) {
  std::string c = "timeout -k 5 60 gdb-multiarch -batch -nx -ex 'set confirm off' -ex 'set remotetimeout 30'";
  if (!elf.empty()) c += " -ex 'file " + elf + "'";
  c += " -ex 'target remote 127.0.0.1:" + port + "'";
  for (const std::string& cmd : commands) c += " -ex '" + cmd + "'";
  return c;
}

// A TCP port of localhost that no one listens on now (the kernel's
// choice): tests running at the same time do not collide.
unsigned free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  unsigned port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// Starts tessera-vp with `args`, its output in `<stem>.vp.out` and
// `<stem>.vp.err`; returns once stderr shows `ready` (or after 5 s). 0 if it
// could not be started.
pid_t spawn_vp_args(const std::vector<std::string>& args, const std::string& stem, const std::string& ready) {
  const std::string out = stem + ".vp.out", err = stem + ".vp.err";
  std::ofstream(err).close();
  pid_t vp = 0;
  posix_spawn_file_actions_t io;
  posix_spawn_file_actions_init(&io);
  posix_spawn_file_actions_addopen(&io, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&io, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<const char*> argv = {TESSERA_VP};
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  const int rc = posix_spawn(&vp, TESSERA_VP, &io, nullptr, const_cast<char**>(argv.data()), environ);
  posix_spawn_file_actions_destroy(&io);
  if (rc != 0) return 0;
  for (int i = 0; i < 200 && slurp(err).find(ready) == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  return vp;
}

// tessera-vp running `elf`, waiting for a debugger on `port`.
pid_t spawn_vp(const std::string& elf, const std::string& port, const std::string& stem) {
  return spawn_vp_args({"-q", "--firmware", elf, "--gdb", port, "--gdb-wait"}, stem, "GDB server on");
}

// The spawned tessera-vp: waited for with a deadline, and killed if it
// outlives it or the test ends early (an ASSERT), so no test hangs on it.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // The exit status, or -1 after killing it at the deadline.
  int wait(int seconds) {
    if (pid_ <= 0) return -1;  // never started
    for (int i = 0; i < seconds * 20; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;  // the destructor kills it
  }

 private:
  pid_t pid_;
};

}  // namespace

TEST(Gdb, BreakStepPrintWatchContinue) {
  const std::string elf = std::string(TESSERA_FIRMWARE_DIR) + "/gdb_demo.elf";
  const unsigned port = free_port();
  const std::string port_s = std::to_string(port);
  // tessera-vp waits for the debugger at reset.
  Child vp(spawn_vp(elf, port_s, "gdb_test"));

  const std::string gdb = run_capture(gdb_batch(elf, port_s, {"break main", "continue", "next", "next", "print counter",
                                                              "print $pc", "step", "watch counter", "continue", "delete",
                                                              "continue"}) +
                                       " 2>&1");
  EXPECT_EQ(vp.wait(30), 0) << slurp("gdb_test.vp.err");
  EXPECT_NE(gdb.find("Breakpoint 1, main ()"), std::string::npos) << gdb;
  EXPECT_NE(gdb.find("16\t    counter = total;"), std::string::npos) << "next, next: " << gdb;
  EXPECT_NE(gdb.find("$1 = 0"), std::string::npos) << gdb;
  EXPECT_NE(gdb.find("<main+"), std::string::npos) << "pc in main: " << gdb;
  EXPECT_NE(gdb.find("Hardware watchpoint 2: counter"), std::string::npos) << gdb;
  EXPECT_NE(gdb.find("Old value = 0\nNew value = 1"), std::string::npos) << gdb;
  EXPECT_NE(gdb.find("exited normally"), std::string::npos) << gdb;
  EXPECT_EQ(slurp("gdb_test.vp.out"), "gdb demo: total 30\n");
}

// The FP registers through GDB: the target description's fpu feature, a
// double returned in fa0, fcsr, and a register written by the debugger.
TEST(Gdb, FloatingPointRegisters) {
  const std::string elf = std::string(TESSERA_FIRMWARE_DIR) + "/fp_demo.elf";
  const std::string port_s = std::to_string(free_port());
  Child vp(spawn_vp(elf, port_s, "gdb_fp_test"));
  const std::string gdb = run_capture(gdb_batch(elf, port_s, {"break harmonic", "continue", "finish", "print $fcsr",
                                                              "set $fa1 = 2.5", "print $fa1", "info registers frm",
                                                              "delete", "continue"}) +
                                       " 2>&1");
  EXPECT_EQ(vp.wait(30), 0) << slurp("gdb_fp_test.vp.err");
  EXPECT_NE(gdb.find("Value returned is $1 = 10.48072821722932"), std::string::npos) << gdb;
  EXPECT_NE(gdb.find("$2 = 1"), std::string::npos) << "fcsr: inexact " << gdb;
  EXPECT_NE(gdb.find("$3 = {float = 0, double = 2.5}"), std::string::npos) << "fa1, as a union: " << gdb;
  EXPECT_NE(gdb.find("frm "), std::string::npos) << gdb;
  EXPECT_NE(gdb.find("exited normally"), std::string::npos) << gdb;
}

// A tile kernel and the CP in one run, each through its own server: GDB
// breaks in the kernel (on tile0's RV32 core, a hardware breakpoint on one
// of its triggers), steps, finishes a function,
// reads the core's registers and the scratchpad, writes a variable there;
// the CP's session meanwhile reads its registers. The whole simulation
// stands still while either holds a core.
TEST(Gdb, TileKernelAndTheCpInOneRun) {
  const std::string kernel = std::string(TESSERA_TARGET_DIR) + "/kernels/debug_demo.elf";
  const unsigned a = free_port();
  unsigned b = free_port();
  while (b == a) b = free_port();
  const std::string cp_port = std::to_string(a), tile_port = std::to_string(b);
  Child vp(spawn_vp_args({"-q", "--kernel", "tile0=" + kernel, "--gdb", cp_port, "--gdb-tiles", tile_port, "--gdb-wait"},
                         "gdb_tile_test", "GDB server for the tile cores"));
  // The tile session, in the background: it is served once the CP's session lets the simulation go.
  const std::string tile_out = "gdb_tile_test.tile.out";
  std::ofstream(tile_out).close();
  const std::string tile_cmd =
      gdb_batch(kernel, tile_port, {"info threads", "hbreak square", "continue", "print i", "finish", "next",
                                    "print table[0]", "print/x $pc", "info registers sp", "x/2wx &table", "delete",
                                    "set var table[0] = 5", "continue"}) +
      " >" + tile_out + " 2>&1 &";
  ASSERT_EQ(std::system(tile_cmd.c_str()), 0);
  const std::string cp = run_capture(gdb_batch("", cp_port, {"print/x $pc", "info registers mstatus", "continue"}) + " 2>&1");
  const int code = vp.wait(60);
  std::string tile;
  for (int i = 0; i < 200 && (tile = slurp(tile_out)).find("exited") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // table[0] = 5 instead of 1: the kernel's sum is wrong, so it exits 1.
  EXPECT_EQ(code, 1) << slurp("gdb_tile_test.vp.err") << cp << tile;
  EXPECT_NE(cp.find("$1 = 0x1000"), std::string::npos) << "the CP at its reset PC: " << cp;
  EXPECT_NE(cp.find("exited with code 01"), std::string::npos) << cp;
  EXPECT_NE(tile.find("Thread 8 (t1.tile7.core)"), std::string::npos) << "every tile core is a thread: " << tile;
  EXPECT_NE(tile.find("Hardware assisted breakpoint 1 at 0x"), std::string::npos) << "hbreak, on a trigger: " << tile;
  EXPECT_NE(tile.find("Thread 1 hit Breakpoint 1, square (i=i@entry=1)"), std::string::npos) << tile;
  EXPECT_NE(tile.find("Value returned is $2 = 1"), std::string::npos) << tile;
  EXPECT_NE(tile.find("$3 = 1"), std::string::npos) << "table[0] in the scratchpad: " << tile;
  EXPECT_NE(tile.find("sp             0x8"), std::string::npos) << "the stack in the tile's local scratchpad: " << tile;
  EXPECT_NE(tile.find("Thread 1 hit Breakpoint 1, square (i=i@entry=2)"), std::string::npos) << "next: " << tile;
  EXPECT_NE(tile.find("<table>:\t0x00000001\t0x00000000"), std::string::npos) << tile;
  EXPECT_NE(tile.find("exited with code 01"), std::string::npos) << tile;
}

// With paging on, GDB's memory is the hart's virtual memory: in S mode,
// 0x40000000 and its alias 0x40001000 read the frame they map. And the
// CSRs are GDB registers (satp read, mscratch written).
TEST(Gdb, MemoryThroughThePageTables) {
  const std::string elf = std::string(TESSERA_TARGET_DIR) + "/isa-tests/rv64-sv39.elf";
  const std::string port_s = std::to_string(free_port());
  Child vp(spawn_vp(elf, port_s, "gdb_sv39_test"));
  const std::string gdb = run_capture(gdb_batch(elf, port_s, {"break s_mode_stored", "continue", "x/gx 0x40000000",
                                                              "x/gx 0x40001000", "x/gx 0x40006000", "print/x $satp",
                                                              "set $mscratch = 0x55", "print/x $mscratch", "delete",
                                                              "continue"}) +
                                       " 2>&1");
  EXPECT_EQ(vp.wait(30), 0) << slurp("gdb_sv39_test.vp.err");
  EXPECT_NE(gdb.find("0x40000000:\t0x0000000000001234"), std::string::npos) << gdb;
  EXPECT_NE(gdb.find("0x40001000:\t0x0000000000001234"), std::string::npos) << gdb;
  EXPECT_NE(gdb.find("Cannot access memory at address 0x40006000"), std::string::npos) << "an invalid PTE: " << gdb;
  EXPECT_NE(gdb.find("= 0x800000000008"), std::string::npos) << "satp (Sv39, the root's PPN), from the csr feature: " << gdb;
  EXPECT_NE(gdb.find("= 0x55"), std::string::npos) << "mscratch written by GDB: " << gdb;
  EXPECT_NE(gdb.find("exited normally"), std::string::npos) << gdb;
}


namespace {

// A minimal remote-protocol client, to check the packets one by one.
class Rsp {
 public:
  explicit Rsp(unsigned port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    timeval limit{10, 0};  // a server that stops answering fails the test instead of hanging it
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  }
  ~Rsp() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::string& payload) {
    unsigned sum = 0;
    for (unsigned char c : payload) sum += c;
    char tail[4];
    std::snprintf(tail, sizeof tail, "#%02x", sum & 0xff);
    const std::string frame = "$" + payload + tail;
    ::send(fd_, frame.data(), frame.size(), 0);
  }
  void interrupt() { ::send(fd_, "\x03", 1, 0); }
  std::string receive() {  // the next packet's payload, acknowledging it
    char c;
    std::string p;
    while (::recv(fd_, &c, 1, 0) == 1 && c != '$') {
    }
    while (::recv(fd_, &c, 1, 0) == 1 && c != '#') p += c;
    char sum[2];
    ::recv(fd_, sum, 2, MSG_WAITALL);
    ::send(fd_, "+", 1, 0);
    return p;
  }
  std::string ask(const std::string& payload) {
    send(payload);
    return receive();
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace

TEST(Gdb, RemoteProtocolPacketsAndCtrlC) {
  tessera::testing::ElfSpec spin;  // j . for ever
  spin.segments.push_back({0x80000000, {0x6f, 0, 0, 0}, 4});
  const std::string elf = tessera::testing::write_elf("gdb_rsp.spin.elf", tessera::testing::build_elf(spin));
  const unsigned port = free_port();
  const std::string port_s = std::to_string(port);
  Child vp(spawn_vp(elf, port_s, "gdb_rsp"));
  {
    Rsp g(port);
    ASSERT_TRUE(g.connected());
    EXPECT_NE(g.ask("qSupported:multiprocess+;swbreak+").find("qXfer:features:read+"), std::string::npos);
    EXPECT_EQ(g.ask("?"), "T05thread:1;");
    EXPECT_NE(g.ask("qXfer:features:read:target.xml:0,fff").find("<architecture>riscv:rv64</architecture>"),
              std::string::npos);
    EXPECT_EQ(g.ask("p20"), "0000008000000000") << "pc at the entry, little-endian";
    EXPECT_EQ(g.ask("g").size(), 33u * 16) << "x0..x31 and pc";
    EXPECT_EQ(g.ask("P5=efbeadde00000000"), "OK");
    EXPECT_EQ(g.ask("p5"), "efbeadde00000000");
    EXPECT_EQ(g.ask("M80f00000,4:01020304"), "OK");
    EXPECT_EQ(g.ask("m80f00000,4"), "01020304");
    EXPECT_EQ(g.ask("X80f00004,2:\x7d\x03\x7d\x5d"), "OK") << "escaped binary";
    EXPECT_EQ(g.ask("m80f00004,2"), "237d");
    EXPECT_EQ(g.ask("m40000000,4"), "E14") << "nothing there";
    EXPECT_EQ(g.ask("qfThreadInfo"), "m1");
    EXPECT_EQ(g.ask("Z2,80f00000,4"), "OK");
    EXPECT_EQ(g.ask("z2,80f00000,4"), "OK");
    g.send("c");  // spins: interrupt it
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    g.interrupt();
    EXPECT_EQ(g.receive(), "T02thread:1;");
    g.send("k");
  }
  EXPECT_EQ(vp.wait(30), 0) << slurp("gdb_rsp.vp.err");
}
