#!/usr/bin/env bash
# Builds and runs the programs of tests/consumer against an installed tagflow,
# the ways an embedding project would:
#   1. CPU only: CMake told it has neither CUDA nor MPI, the shared library
#   2. the same with the static library
#   3. globals: arrays and a LeNet in global variables, AddressSanitizer,
#      on cpu(0) and a simulated GPU, 20 runs each
#   4. pkg-config: c++ $(pkg-config --cflags --libs tagflow)
#   5. relocated: the installed tree moved elsewhere after install
#   and the dist component (MPI) when the build has it.
#   scripts/check-consumers.sh [build-dir] [work-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
work=${2:-$build/consumers}
src=$PWD/tests/consumer
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
step() { echo "--- consumer: $*"; }

step "install"
cmake --install "$build" --prefix "$work/installed" >/dev/null
if grep -rqF "$PWD" "$work/installed/lib/cmake" "$work/installed/lib/pkgconfig"; then
  echo "the installed package names the build tree $PWD:" >&2
  grep -rlF "$PWD" "$work/installed/lib/cmake" "$work/installed/lib/pkgconfig" >&2
  exit 1
fi
soname=$(objdump -p "$work"/installed/lib*/libtagflow.so | awk '/SONAME/ {print $2}')
test "$soname" = "libtagflow.so.$(sed -n 's/^#define TAGFLOW_VERSION_MAJOR //p' tagflow/version.h)"

configure() {  # configure <dir> <prefix> [cmake arguments...]
  local dir=$1 prefix=$2
  shift 2
  cmake -S "$src" -B "$work/$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" "$@" \
    >"$work/$dir.log" 2>&1 || { cat "$work/$dir.log"; exit 1; }
  cmake --build "$work/$dir" -j "$(nproc)" >>"$work/$dir.log" 2>&1 || { cat "$work/$dir.log"; exit 1; }
}
cpu_only=(-DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON)

step "1. CPU only, shared library"
configure shared "$work/installed" "${cpu_only[@]}"
ldd "$work/shared/arrays" | grep -q "$work/installed/.*libtagflow.so"
"$work/shared/arrays"
TAGFLOW_SIM_GPUS=2 "$work/shared/arrays"

step "2. CPU only, static library"
configure static "$work/installed" "${cpu_only[@]}" -Dtagflow_USE_STATIC_LIBS=ON
if ldd "$work/static/arrays" | grep -q libtagflow; then
  echo "the static consumer loads libtagflow.so" >&2
  exit 1
fi
"$work/static/arrays"

step "3. globals under AddressSanitizer, 20 runs on cpu(0) and 20 on a simulated GPU"
configure globals "$work/installed" "${cpu_only[@]}" \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer"
for i in $(seq 20); do
  ASAN_OPTIONS=detect_leaks=1 "$work/globals/globals" >/dev/null
  ASAN_OPTIONS=detect_leaks=1 TAGFLOW_SIM_GPUS=1 "$work/globals/globals" >/dev/null
done

step "4. pkg-config"
export PKG_CONFIG_PATH="$(dirname "$(find "$work/installed" -name tagflow.pc)")"
# shellcheck disable=SC2046  # the flags are words
c++ -o "$work/pkgconfig-arrays" "$src/arrays.cc" $(pkg-config --cflags --libs tagflow)
# Libs carries an rpath to the library's directory: it runs as built.
env -u LD_LIBRARY_PATH "$work/pkgconfig-arrays"

step "5. relocated: the installed tree moved after install"
mv "$work/installed" "$work/moved"
configure relocated "$work/moved" "${cpu_only[@]}"
"$work/relocated/arrays"
configure relocated-static "$work/moved" -Dtagflow_USE_STATIC_LIBS=ON
"$work/relocated-static/arrays"

step "dist component"
configure dist "$work/moved" -DCONSUMER_DIST=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
"$work/dist/dist"
configure dist-static "$work/moved" -DCONSUMER_DIST=ON -Dtagflow_USE_STATIC_LIBS=ON
"$work/dist-static/dist"
echo "--- consumer: all passed"
