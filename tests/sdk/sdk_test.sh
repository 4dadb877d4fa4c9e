#!/usr/bin/env bash
# The SDK as a user gets it (tests/sdk/CMakeLists.txt runs this):
#   sdk_test.sh install BUILD PREFIX    cmake --install BUILD into a fresh PREFIX
#   sdk_test.sh example NAME PREFIX WORK builds examples/NAME of the installed
#                                       tree in WORK against PREFIX and runs its tests
#   sdk_test.sh tutorial DOC PREFIX WORK runs every ```sh block of DOC, in order, in
#                                       a fresh WORK, with TESSERA_PREFIX=PREFIX
#   sdk_test.sh package BUILD WORK      cpack's Debian package: its dependencies, its
#                                       files unpacked in WORK, tessera-vp from there
#                                       and the firmware example built against it
set -euo pipefail
mode=$1
case $mode in
  install)
    rm -rf "$3"
    cmake --install "$2" --prefix "$3" >/dev/null
    echo "installed into $3: $(find "$3" -type f | wc -l) files"
    ;;
  example)
    name=$2 prefix=$3 work=$4/$2
    rm -rf "$work"
    args=(-G Ninja -DCMAKE_PREFIX_PATH="$prefix")
    # A firmware project is configured for the chip with the SDK's toolchain file.
    [ "$name" = firmware ] && args+=(-DCMAKE_TOOLCHAIN_FILE="$prefix/lib/cmake/Tessera/riscv-toolchain.cmake")
    cmake -S "$prefix/share/tessera/examples/$name" -B "$work" "${args[@]}"
    cmake --build "$work"
    ctest --test-dir "$work" --output-on-failure -V
    ;;
  tutorial)
    doc=$2 work=$4
    rm -rf "$work" && mkdir -p "$work" && cd "$work"
    script=$work/tutorial.sh
    { echo "set -euxo pipefail"; awk '/^```sh$/ {on = 1; next} /^```/ {on = 0} on' "$doc"; } >"$script"
    blocks=$(grep -c '^```sh$' "$doc")
    [ "$blocks" -gt 0 ] || { echo "no \`\`\`sh blocks in $doc"; exit 1; }
    echo "following $blocks command blocks of $doc"
    TESSERA_PREFIX=$3 PATH=$3/bin:$PATH bash "$script"
    ;;
  package)
    build=$2 work=$3
    rm -rf "$work" && mkdir -p "$work"
    (cd "$build" && cpack -B "$work" >"$work/cpack.log") || { cat "$work/cpack.log"; exit 1; }
    deb=$(ls "$work"/tessera_*.deb)
    echo "$deb: $(du -h "$deb" | cut -f1)"
    dpkg-deb -f "$deb" Package Version Depends
    for dep in libsystemc-dev gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf; do
      dpkg-deb -f "$deb" Depends | grep -q "$dep" || { echo "the package does not depend on $dep"; exit 1; }
    done
    dpkg-deb -x "$deb" "$work/root"
    for f in usr/bin/tessera-vp usr/bin/tessera-reggen usr/lib/cmake/Tessera/TesseraConfig.cmake \
             usr/share/tessera/platform/t1.json usr/share/tessera/firmware/cmdproc.elf usr/include/tessera/runtime.hpp; do
      [ -e "$work/root/$f" ] || { echo "the package lacks /$f"; exit 1; }
    done
    "$work/root/usr/bin/tessera-vp" -q | grep "Hello from the Tessera T1"
    "$0" example firmware "$work/root/usr" "$work/examples"
    ;;
  *) echo "sdk_test.sh: unknown mode $mode" >&2; exit 2 ;;
esac
