// Model-level waveforms as FST (`--waves FILE.fst`), through the FST writer
// Verilator ships (the one the RTL blocks' own traces use).
#pragma once

namespace tessera::rtl {

// Lets waves::open take FILE.fst; call it before opening waves.
void install_waves_fst();

}  // namespace tessera::rtl
