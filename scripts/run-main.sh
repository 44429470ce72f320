#!/usr/bin/env bash
# Quick start 1: set up, build, and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh build
build/tools/tagflow train "$@"
