// tessera-vp demo --hf-config: a Hugging Face Llama-family model's prefill
// on the chip (llama.hpp).
#pragma once

namespace tessera::hf {
int demo_main(int argc, char** argv);
}
