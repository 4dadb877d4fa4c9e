// The main job as a function: tessera-vp with no arguments runs it, and so
// do `tessera-vp demo [options]` and tessera-demo. Options:
//   --tiny  --prompt N  --decode N  --seed S  --set inst.key=value
// Returns the process exit code (0 ok, 1 a failed check or device error,
// 2 bad options).
#pragma once

namespace tessera::model {

int demo_main(int argc, char** argv);

}  // namespace tessera::model
