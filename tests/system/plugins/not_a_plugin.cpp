// A shared library that is no Tessera plugin (no tessera_plugin_abi).
extern "C" int not_a_plugin() { return 1; }
