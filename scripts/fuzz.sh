#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer into build-fuzz, then runs each for SECONDS
# (default 60) on a copy of its seed corpus fuzz/corpus/<name>/.
#   scripts/fuzz.sh [SECONDS]
# Exits non-zero on any finding (a crash, a sanitizer report, a leak, an
# input running longer than 10 seconds or using more than 2 GB, an exception
# of the wrong type, results that disagree) and prints the saved input's
# path and the command that reproduces it. Environment: TAGFLOW_FUZZ_CXX
# (the clang++ to use), TAGFLOW_FUZZ_BUILD_DIR (default build-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS]   (seconds per target, default 60; got '$seconds')" >&2
  exit 2
fi
dir=${TAGFLOW_FUZZ_BUILD_DIR:-build-fuzz}
cxx=${TAGFLOW_FUZZ_CXX:-$(command -v clang++-14 || command -v clang++ || true)}
if [ -z "$cxx" ]; then
  echo "scripts/fuzz.sh: expected clang++ (libFuzzer), found none: run scripts/setup.sh" >&2
  exit 1
fi

# A compiler change makes CMake drop the cache and, with it, the options
# given below: configure such a directory anew instead.
if [ -f "$dir/CMakeCache.txt" ] &&
  [ "$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt")" != "$cxx" ]; then
  echo "fuzz build: $dir was configured with another compiler; configuring it for $cxx"
  rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
fi
build_start=$SECONDS
TAGFLOW_BUILD_TYPE=RelWithDebInfo bash scripts/build.sh "$dir" -DCMAKE_CXX_COMPILER="$cxx" \
  -DTAGFLOW_FUZZ=ON -DTAGFLOW_CUDA=OFF -DTAGFLOW_BUILD_TOOLS=ON -DTAGFLOW_BUILD_TESTS=OFF
echo "fuzz build: $((SECONDS - build_start))s"

# Corpus copies, findings and logs go under one scratch directory, made
# anew each time. The targets write every input to a file (and save some):
# on tmpfs that costs no flush to disk, ten times the inputs per second.
run_dir=$dir/fuzz-run
rm -rf "$run_dir"
mkdir -p "$run_dir"
if [ -d /dev/shm ] && [ -w /dev/shm ]; then tmp_root=/dev/shm; else tmp_root=$run_dir; fi
input_dir=$(mktemp -d "$tmp_root/tagflow-fuzz.XXXXXX")
trap 'rm -rf "$input_dir"' EXIT
findings=0
while read -r target; do
  name=${target%_fuzz}
  work=$run_dir/$name
  mkdir -p "$work/corpus" "$work/findings" "$input_dir/$name"
  if [ -d "fuzz/corpus/$name" ]; then cp -R "fuzz/corpus/$name/." "$work/corpus/"; fi
  args=(-max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048
        -artifact_prefix="$work/findings/" -print_final_stats=1)
  if [ -f "fuzz/$name.dict" ]; then args+=(-dict="fuzz/$name.dict"); fi
  start=$SECONDS
  status=0
  # libFuzzer's -timeout covers one input; `timeout` also catches a target
  # that hangs before or after them (status 124).
  TMPDIR=$input_dir/$name UBSAN_OPTIONS=print_stacktrace=1 \
    timeout --kill-after=10 $((seconds + 120)) \
    "$dir/fuzz/$target" "${args[@]}" "$work/corpus" </dev/null >"$work/log" 2>&1 || status=$?
  # Slow inputs are noted by libFuzzer but are not findings; the timeout is.
  saved=$(find "$work/findings" -type f ! -name 'slow-unit-*' | sort)
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$work/log" | tail -n 1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units:[[:space:]]*//p' "$work/log")
  per_second=$(sed -n 's/^stat::average_exec_per_sec:[[:space:]]*//p' "$work/log")
  echo "$target: $((SECONDS - start))s, ${execs:-?} inputs, ${per_second:-?}/s," \
    "$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]+' <<<"$done_line" ||
       echo "no final statistics")"
  if [ "$status" -ne 0 ] || [ -n "$saved" ]; then
    findings=$((findings + 1))
    echo "FINDING in $target (exit status $status); the end of its log ($work/log):"
    grep -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|RELOAD)' "$work/log" | tail -n 60
    for input in $saved; do
      echo "  input: $input"
      echo "  reproduce: $dir/fuzz/$target $input"
    done
  fi
done <"$dir/fuzz/targets.txt"

if [ "$findings" -ne 0 ]; then
  echo "scripts/fuzz.sh: $findings target(s) with findings" >&2
  exit 1
fi
