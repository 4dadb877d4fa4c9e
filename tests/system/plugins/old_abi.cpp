// A plugin built for another Tessera.
extern "C" const char* tessera_plugin_abi() { return "tessera-0.0.0"; }
