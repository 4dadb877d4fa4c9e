// tessera-demo: the main job on its own (tessera-vp runs the same).
#include "demo.hpp"

int main(int argc, char** argv) { return tessera::model::demo_main(argc, argv); }
