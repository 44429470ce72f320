#!/usr/bin/env bash
# Configures and builds tagflow into a build directory.
#   scripts/build.sh [build-dir] [extra cmake arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="${TAGFLOW_BUILD_TYPE:-Release}" "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
