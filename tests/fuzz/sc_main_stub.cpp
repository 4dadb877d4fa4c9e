// libsystemc.so refers to sc_main; a fuzz target's main is libFuzzer's (or
// replay_main's), which never calls it.
extern "C" int sc_main(int, char**) { return 0; }
