#!/usr/bin/env bash
# scripts/check-layers.sh passes on this tree and fails on copies of it with
# a planted violation, naming the offending line.
#   tests/layering_test.sh <case>   case: tree | upward | public-internal | umbrella
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=$root/scripts/check-layers.sh
if [ "$1" = tree ]; then
  exec bash "$check" "$root"
fi
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
for d in engine storage ops nn tagflow tools tests fuzz; do cp -r "$root/$d" "$copy/$d"; done
bash "$check" "$copy" >/dev/null  # the copy itself is clean
case "$1" in
  upward)  # ops reaching up into nn
    file=ops/ndarray.cc
    sed -i '0,/^#include "/s//#include "nn\/block.h"\n#include "/' "$copy/$file"
    expect="$file:.*ops includes \"nn/block.h\" of nn"
    ;;
  public-internal)  # a public header that would not compile once installed
    file=ops/ndarray.h
    sed -i '0,/^#include "/s//#include "ops\/kernels\/launch.h"\n#include "/' "$copy/$file"
    expect="$file:.*public header includes \"ops/kernels/launch.h\", an internal header"
    ;;
  umbrella)  # a new public header left out of tagflow/tagflow.h
    printf '#pragma once\n' > "$copy/nn/io/new_format.h"
    expect='tagflow/tagflow.h: misses the public header "nn/io/new_format.h"'
    ;;
  *) echo "unknown case $1" >&2; exit 2 ;;
esac
status=0
output=$(bash "$check" "$copy" 2>&1) || status=$?
echo "$output"
if [ "$status" -ne 1 ] || ! grep -q "$expect" <<<"$output"; then
  echo "expected exit status 1 and a line matching: $expect (got status $status)" >&2
  exit 1
fi
