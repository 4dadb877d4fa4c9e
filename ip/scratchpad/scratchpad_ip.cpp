// The scratchpad as a platform type. Apart from scratchpad.cpp so the tile
// can use the model without linking this registration twice.
#include "common/registry.hpp"
#include "scratchpad/scratchpad.hpp"

namespace tessera::scratchpad {

TESSERA_REGISTER_IP("scratchpad", Scratchpad, "tile scratchpad: banked SRAM with bank-conflict timing");

}  // namespace tessera::scratchpad
