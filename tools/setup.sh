# Sourced by tools/demo and tools/test: makes sure the Debian packages the
# build needs are installed, then configures and builds one preset.
#   tessera_setup <preset> [targets...]
set -euo pipefail

TESSERA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TESSERA_PACKAGES=(
  g++ make cmake ninja-build pkg-config ccache
  libsystemc-dev libboost-program-options-dev libboost-filesystem-dev nlohmann-json3-dev libfmt-dev libgtest-dev
  verilator gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf gdb-multiarch qemu-user
  opensbi u-boot-qemu device-tree-compiler
  clang-14 libclang-rt-14-dev libfuzzer-14-dev
  libonnx-dev libprotobuf-dev libonnx-testdata python3-torch python3-onnx python3-numpy
  libopenmpi-dev openmpi-bin
)

tessera_install_packages() {
  local missing=()
  for p in "${TESSERA_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "tessera: missing Debian packages: ${missing[*]}" >&2
    echo "tessera: install them as root with:" >&2
    echo "  $cmd" >&2
    exit 1
  fi
  echo "tessera: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

tessera_build() {
  local preset=$1
  shift
  tessera_install_packages
  export CCACHE_BASEDIR="$TESSERA_ROOT"
  export CCACHE_NOHASHDIR=1
  cd "$TESSERA_ROOT"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" "$@"
}
