#!/usr/bin/env bash
# Checks tagflow on a machine with a GPU in one run of about ten minutes:
# builds what the check needs, then runs each step under its own time limit
# and writes what it finds to one folder.
#   scripts/gpu-check.sh [OUTDIR]    (default: $OUT when set, else gpu-check-results)
#
# Steps, in order (limits in seconds; each is also cut to what is left of
# the whole run's budget, so that a slow build still leaves figures):
#   packages        scripts/setup.sh, only when packages the build needs are missing   60
#   configure       CMake for sm_90: no Python module, README examples or fuzz targets  90
#   build-tagflow   the tagflow binary                                        300
#   info            tagflow --version and tagflow info (into machine.txt)      30
#   selftest        tagflow selftest: every operator on cpu(0) and the GPU     60
#   train-lenet     tagflow train, LeNet on gpu:0, 470 steps                   90
#   train-resnet18  tagflow train --model resnet18 on gpu:0, 200 steps         90
#   nccl            tagflow train --dist nccl with one rank (mpirun -np 1)     60
#   bench-engine    tagflow bench engine                                       60
#   bench-gemm      tagflow bench ops --case gemm,cpu-vs-gpu                   60
#   bench-ops-gpu   tagflow bench ops --case small-add,sync-log --device gpu:0 45
#   build-tests     engine_tests, which holds the tests that need a real GPU  150
#   cuda-tests      engine_tests --gtest_filter='CudaStreamTest.*'            120
# A step that fails does not stop the others; those that need a binary that
# was not built are recorded as "skipped: no build".
#
# OUTDIR gets seven files, whatever the number of steps:
#   machine.txt   date, nvidia-smi, nvcc, cores, memory, kernel, commit, the
#                 compilers, tagflow --version and tagflow info, and
#                 nvidia-smi again at the end
#   summary.txt   one line per step: name, status, seconds, figures
#   build.txt     packages, configure, build-tagflow, build-tests
#   selftest.txt  selftest
#   train.txt     train-lenet, train-resnet18, nccl
#   bench.txt     bench-engine, bench-gemm, bench-ops-gpu
#   tests.txt     cuda-tests
# Each step's output is a section of its file, between "== STEP: ..." lines.
#
# Without a GPU (nvidia-smi -L lists none) it says so and runs the same
# steps on simulated GPUs (TAGFLOW_SIM_GPUS, default 1), training on fewer
# images.
#
# Environment:
#   TAGFLOW_GPU_CHECK_BUILD=DIR     build directory (default: build-gpu)
#   TAGFLOW_GPU_CHECK_PREBUILT=DIR  use the tree already built in DIR; no packages,
#                                   configure or build steps
#   TAGFLOW_GPU_CHECK_ARCH=90       CUDA architectures to build for
#   TAGFLOW_GPU_CHECK_BUDGET=570    seconds for the whole run
#   TAGFLOW_GPU_CHECK_DATA=DIR      the Fashion-MNIST files (default: the
#                                   dataset-fashion-mnist package's)
#   TAGFLOW_GPU_CHECK_SIMULATE=1    simulated GPUs even where there is a GPU
#   TAGFLOW_SIM_GPUS=N              how many simulated GPUs, when simulated
# ccache is used when present (the top CMakeLists.txt finds it), Ninja too.
set -uo pipefail

out=${1:-${OUT:-gpu-check-results}}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)

budget=${TAGFLOW_GPU_CHECK_BUDGET:-570}
arch=${TAGFLOW_GPU_CHECK_ARCH:-90}
prebuilt=${TAGFLOW_GPU_CHECK_PREBUILT:-}
build=${prebuilt:-${TAGFLOW_GPU_CHECK_BUILD:-build-gpu}}
case $build in /*) ;; *) build=$root/$build ;; esac
data=${TAGFLOW_GPU_CHECK_DATA:-/usr/share/datasets/fashion-mnist}
tagflow=$build/tools/tagflow
engine_tests=$build/tests/engine/engine_tests
jobs=$(nproc 2>/dev/null || echo 2)
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=$PATH:/usr/local/cuda/bin
fi
start=$EPOCHREALTIME
reserve=0

for f in machine summary build selftest train bench tests; do rm -f "$out/$f.txt"; done
summary=$out/summary.txt
machine=$out/machine.txt

# GPU or simulated GPUs --------------------------------------------------------
gpu_list=$(nvidia-smi -L 2>/dev/null)
if [ "${TAGFLOW_GPU_CHECK_SIMULATE:-0}" != 1 ] && grep -q '^GPU [0-9]' <<<"$gpu_list"; then
  mode=gpu
  export TAGFLOW_SIM_GPUS=0
  echo "gpu-check: $(grep -c '^GPU [0-9]' <<<"$gpu_list") GPU(s): $(grep '^GPU [0-9]' <<<"$gpu_list" | head -n 1)"
else
  mode=simulated
  case ${TAGFLOW_SIM_GPUS:-0} in 0 | "") export TAGFLOW_SIM_GPUS=1 ;; esac
  echo "gpu-check: no GPU found: running the same steps on simulated GPUs (TAGFLOW_SIM_GPUS=$TAGFLOW_SIM_GPUS)"
fi
echo "gpu-check: results in $out"

# Helpers --------------------------------------------------------------------------
elapsed() { awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", b - a }'; }

# summarize NAME STATUS SECONDS [FIGURES]: one line of summary.txt.
summarize() {
  local line
  line=$(printf '%-15s %-36s %7s s  %s' "$1" "$2" "$3" "${4:-}" | sed 's/ *$//')
  echo "$line" >>"$summary"
  echo "gpu-check: $line"
}

# run_step NAME FILE LIMIT COMMAND...: runs COMMAND under `timeout`, its
# output appended to OUTDIR/FILE; LIMIT is cut to what is left of the
# budget, less `reserve` seconds. Sets step_rc, step_secs, step_status and
# step_text (the output).
run_step() {
  local name=$1 file=$out/$2 limit=$3
  shift 3
  local left=$((budget - reserve - $(elapsed)))
  [ "$left" -lt "$limit" ] && limit=$left
  step_text=""
  step_secs=0
  if [ "$limit" -lt 5 ]; then
    step_rc=125
    step_status="skipped: out of time (budget $budget s)"
    echo "== $name: $step_status" >>"$file"
    return
  fi
  echo "== $name: $* (limit $limit s)" >>"$file"
  local offset t0
  offset=$(stat -c %s "$file")
  t0=$EPOCHREALTIME
  timeout --kill-after=10 "$limit" "$@" >>"$file" 2>&1 </dev/null
  step_rc=$?
  step_secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  step_text=$(tail -c +$((offset + 1)) "$file")
  case $step_rc in
    0) step_status=ok ;;
    124 | 137) step_status="timed out (limit $limit s)" ;;
    *) step_status="failed (exit $step_rc)" ;;
  esac
  echo "== $name: $step_status, $step_secs s" >>"$file"
}

# skip_step NAME FILE REASON
skip_step() {
  echo "== $1: skipped: $3" >>"$out/$2"
  summarize "$1" "skipped: $3" 0
}

# The last epoch's images/s and peak memory, and the peak RSS from time -v.
train_figures() {
  local epoch rss
  epoch=$(sed -n 's/^epoch .* \([0-9][0-9]*\) images\/s, peak \([0-9.]*\) MB.*/\1 images\/s, peak \2 MB/p' <<<"$step_text" | tail -n 1)
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' <<<"$step_text" | tail -n 1)
  [ -n "$rss" ] && epoch="${epoch:+$epoch, }max RSS $((rss / 1024)) MiB"
  echo "$epoch"
}

# `/usr/bin/time -v` around a command when it exists, for the peak RSS.
timed=()
[ -x /usr/bin/time ] && /usr/bin/time -v true >/dev/null 2>&1 && timed=(/usr/bin/time -v)

# The machine ------------------------------------------------------------------------
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "mode: $mode (TAGFLOW_SIM_GPUS=$TAGFLOW_SIM_GPUS)"
  echo "build: $build${prebuilt:+ (prebuilt)}"
  for cmd in "nvidia-smi" \
             "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv" \
             "nvcc --version" "nproc" "free -g" "uname -a" \
             "git rev-parse HEAD" "git status --short" \
             "cmake --version" "c++ --version" "ninja --version" "ccache --version" \
             "mpirun --version"; do
    echo
    echo "\$ $cmd"
    if ! command -v "${cmd%% *}" >/dev/null 2>&1; then
      echo "(${cmd%% *} not found)"
      continue
    fi
    # shellcheck disable=SC2086  # the command and its arguments
    timeout 30 $cmd 2>&1 | head -n 60
  done
} >>"$machine"
echo "== mode: $mode, budget $budget s, $(date -u '+%Y-%m-%d %H:%M:%S UTC')" >>"$summary"

# Packages, configure, build ------------------------------------------------------
configured=no
if [ -n "$prebuilt" ]; then
  for s in packages configure build-tagflow; do skip_step "$s" build.txt "prebuilt $prebuilt"; done
  [ -f "$build/CMakeCache.txt" ] && configured=yes
else
  # What the check's build needs, of scripts/setup.sh's list.
  needed=(libtbb-dev libspdlog-dev libfmt-dev libgtest-dev libcli11-dev libopenblas-dev
          libdnnl-dev zlib1g-dev nlohmann-json3-dev dataset-fashion-mnist libopenmpi-dev)
  missing=()
  for tool in cmake c++ pkg-config; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  if command -v dpkg-query >/dev/null; then
    for p in "${needed[@]}"; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
  fi
  if [ ${#missing[@]} -eq 0 ]; then
    skip_step packages build.txt "none missing"
  else
    echo "== packages: missing ${missing[*]}" >>"$out/build.txt"
    run_step packages build.txt 60 bash scripts/setup.sh
    summarize packages "$step_status" "$step_secs" "missing: ${missing[*]}"
  fi

  mkdir -p "$build"
  cmake_args=(-S . -B "$build" -DCMAKE_BUILD_TYPE=Release
              -DTAGFLOW_PYTHON=OFF -DTAGFLOW_README_EXAMPLES=OFF -DTAGFLOW_FUZZ=OFF
              -DTAGFLOW_SANITIZE= -DTAGFLOW_WERROR=OFF -DTAGFLOW_BUILD_TOOLS=ON
              "-DCMAKE_CUDA_ARCHITECTURES=$arch")
  [ "$mode" = gpu ] && cmake_args+=(-DTAGFLOW_CUDA=ON)
  if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then
    cmake_args+=(-G Ninja)
  fi
  run_step configure build.txt 90 cmake "${cmake_args[@]}" -DTAGFLOW_BUILD_TESTS=ON
  if [ "$step_rc" -ne 0 ] && [ "$step_rc" -ne 124 ] && [ "$step_rc" -ne 125 ]; then
    # GoogleTest missing, say: the tagflow binary alone still builds.
    summarize configure "$step_status" "$step_secs" "with the tests"
    run_step configure build.txt 90 cmake "${cmake_args[@]}" -DTAGFLOW_BUILD_TESTS=OFF
    summarize configure "$step_status" "$step_secs" "without the tests"
  else
    archs=$(grep -rhoE 'arch=compute_[0-9]+' "$build/build.ninja" "$build"/ops/CMakeFiles/*/flags.make \
              2>/dev/null | sed 's/arch=compute_//' | sort -u | tr '\n' ' ')
    summarize configure "$step_status" "$step_secs" "${archs:+CUDA architectures: $archs}"
  fi
  [ "$step_rc" -eq 0 ] && configured=yes

  if [ $configured = yes ]; then
    # The last 150 s of the budget are kept for the steps after it.
    reserve=150
    run_step build-tagflow build.txt 300 cmake --build "$build" --target tagflow_cli -j "$jobs"
    reserve=0
    summarize build-tagflow "$step_status" "$step_secs"
  else
    skip_step build-tagflow build.txt "not configured"
  fi
fi
have_tagflow=no
[ -x "$tagflow" ] && have_tagflow=yes

# tagflow --version and info ---------------------------------------------------------
info_text=""
if [ $have_tagflow = yes ]; then
  echo >>"$machine"
  run_step info machine.txt 30 "$tagflow" --version
  version=$(head -n 1 <<<"$step_text")
  run_step info machine.txt 30 "$tagflow" info
  info_text=$step_text
  summarize info "$step_status" "$step_secs" "$version; $(grep -E '^ +GPUs ' <<<"$info_text" |
    sed 's/^ *GPUs *//'); CUDA $(grep -E '^ +CUDA  ' <<<"$info_text" | sed 's/^ *CUDA *//')"
else
  skip_step info machine.txt "no build"
fi

# Selftest ---------------------------------------------------------------------------
if [ $have_tagflow = yes ]; then
  run_step selftest selftest.txt 60 "$tagflow" selftest
  summarize selftest "$step_status" "$step_secs" "$(grep -E '^[0-9]+ checks:' <<<"$step_text" | tail -n 1)"
else
  skip_step selftest selftest.txt "no build"
fi

# Training -------------------------------------------------------------------------------
# A few hundred steps on a GPU: LeNet 2 epochs of 60,000 images in batches of
# 256 (470 steps), ResNet-18 2 epochs of 12,800 in batches of 128 (200).
# Simulated GPUs run the CPU kernels: fewer images.
if [ "$mode" = gpu ]; then
  lenet=(--epochs 2)
  resnet=(--epochs 2 --limit 12800 --batch-size 128 --test-limit 2000)
  nccl=(--epochs 1 --limit 5120 --test-limit 1000)
else
  lenet=(--epochs 2 --limit 12800 --test-limit 2000)
  resnet=(--epochs 1 --limit 512 --batch-size 64 --test-limit 128)
  nccl=(--epochs 1 --limit 1024 --test-limit 256)
fi
train=("$tagflow" train --devices gpu:0 --no-progress --data "$data")
have_data=no
compgen -G "$data/train-images-idx3-ubyte*" >/dev/null && have_data=yes
for model in lenet resnet18; do
  if [ $have_tagflow = no ]; then
    skip_step "train-$model" train.txt "no build"
  elif [ $have_data = no ]; then
    skip_step "train-$model" train.txt "no Fashion-MNIST in $data (TAGFLOW_GPU_CHECK_DATA)"
  else
    if [ $model = lenet ]; then args=("${lenet[@]}"); else args=("${resnet[@]}"); fi
    run_step "train-$model" train.txt 90 "${timed[@]}" "${train[@]}" --model $model "${args[@]}"
    summarize "train-$model" "$step_status" "$step_secs" "$(train_figures)"
  fi
done

# NCCL with one rank. Within one process NCCL sums gradients only when there
# are two GPUs or more, so with one GPU it runs only across processes:
# --dist nccl, set up over MPI, here with one. NCCL refuses simulated GPUs.
if [ $have_tagflow = no ]; then
  skip_step nccl train.txt "no build"
elif [ $have_data = no ]; then
  skip_step nccl train.txt "no Fashion-MNIST in $data (TAGFLOW_GPU_CHECK_DATA)"
elif grep -qE '^ +NCCL +no' <<<"$info_text"; then
  skip_step nccl train.txt "the build has no NCCL"
elif grep -qE '^ +MPI +none' <<<"$info_text"; then
  skip_step nccl train.txt "the build has no MPI, which --dist nccl needs (libopenmpi-dev)"
else
  launcher=()
  if command -v mpirun >/dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    launcher=(mpirun --oversubscribe -np 1)
  fi
  run_step nccl train.txt 60 "${launcher[@]}" "${train[@]}" --dist nccl --dist-timeout 30 "${nccl[@]}"
  figures=$(train_figures)
  if [ "$mode" = simulated ] && [ "$step_rc" -ne 0 ] && grep -q 'NCCL needs real GPUs' <<<"$step_text"; then
    step_status="refused, as expected"
    figures="NCCL needs real GPUs, got simulated ones"
  fi
  summarize nccl "$step_status" "$step_secs" "$figures"
fi

# Benchmarks -----------------------------------------------------------------------
if [ $have_tagflow = yes ]; then
  run_step bench-engine bench.txt 60 "$tagflow" bench engine
  summarize bench-engine "$step_status" "$step_secs" "$(sed -n \
    's/.*"workload":"\([a-z]*\)".*"ops_per_s":\([0-9]*\),.*/\1 \2/p' <<<"$step_text" |
    awk '{ printf "%s%s %.2f", (NR > 1 ? ", " : ""), $1, $2 / 1e6 } END { if (NR) print " Mops/s" }')"

  if [ "$mode" = gpu ]; then size=4096; else size=1024; fi
  run_step bench-gemm bench.txt 60 "$tagflow" bench ops --case gemm,cpu-vs-gpu --size $size
  summarize bench-gemm "$step_status" "$step_secs" "$(sed -n \
    -e 's/.*"case":"gemm".*"gflops":\([0-9.]*\),"blas_gflops":\([0-9.]*\),.*/cpu(0) \1 GFLOP\/s (OpenBLAS \2)/p' \
    -e 's/.*"case":"cpu-vs-gpu","device":"\(gpu([0-9]*)\)","simulated":false.*"gflops":\([0-9.]*\),.*/\1 \2 GFLOP\/s/p' \
    -e 's/.*"case":"cpu-vs-gpu","device":"\(gpu([0-9]*)\)","simulated":true.*"gflops":\([0-9.]*\),.*/\1 (simulated) \2 GFLOP\/s/p' \
    <<<"$step_text" | paste -sd ';' | sed 's/;/; /g'), ${size}x${size} float32"

  run_step bench-ops-gpu bench.txt 45 "$tagflow" bench ops --case small-add,sync-log --device gpu:0 \
    --ops 200000 --runs 3
  summarize bench-ops-gpu "$step_status" "$step_secs" "$(sed -n \
    -e 's/.*"case":"small-add".*"us_per_op":\([0-9.]*\),.*/small-add \1 us\/op/p' \
    -e 's/.*"case":"sync-log".*"ratio":\([0-9.]*\),.*/sync-log \1x/p' \
    <<<"$step_text" | paste -sd ';' | sed 's/;/; /g')"
else
  for s in bench-engine bench-gemm bench-ops-gpu; do skip_step $s bench.txt "no build"; done
fi

# The tests that need a real GPU ---------------------------------------------------------
# There is no CUDA label in ctest: the tests that run on a real GPU are
# CudaStreamTest.* in engine_tests (tests/engine/cuda_stream_test.cu),
# skipped, with the reason, without one. The CUDA function of ops_tests'
# custom operator needs two GPUs (tests/ops/custom_op_test.cc), so it is not
# run here; every other test runs on simulated GPUs wherever it runs.
if [ -n "$prebuilt" ]; then
  skip_step build-tests build.txt "prebuilt $prebuilt"
elif [ $configured = yes ] && grep -q '^TAGFLOW_BUILD_TESTS:BOOL=ON' "$build/CMakeCache.txt"; then
  run_step build-tests build.txt 150 cmake --build "$build" --target engine_tests -j "$jobs"
  summarize build-tests "$step_status" "$step_secs"
else
  skip_step build-tests build.txt "not configured with the tests"
fi
if [ -n "$(command -v ccache)" ] && [ -z "$prebuilt" ]; then
  { echo "== ccache"; ccache --show-stats 2>&1; } >>"$out/build.txt"
fi

if [ -x "$engine_tests" ]; then
  run_step cuda-tests tests.txt 120 "$engine_tests" --gtest_filter='CudaStreamTest.*'
  count() { grep -cE "^\[ *$1 *\] .* \([0-9]+ ms\)\$" <<<"$step_text"; }
  passed=$(count OK)
  failed=$(count FAILED)
  skipped=$(count SKIPPED)
  figures="$passed passed, $failed failed, $skipped skipped"
  if [ "$step_rc" -eq 0 ] && [ "$skipped" -gt 0 ]; then
    if [ "$mode" = gpu ]; then
      step_status="failed (skipped on a GPU)"
    else
      figures="$figures: no GPU, as expected"
    fi
  fi
  summarize cuda-tests "$step_status" "$step_secs" "$figures"
else
  skip_step cuda-tests tests.txt "no build of engine_tests"
fi

# The GPU after the run ----------------------------------------------------------------
if [ "$mode" = gpu ]; then
  {
    echo
    echo "\$ nvidia-smi (after the check)"
    timeout 30 nvidia-smi 2>&1
  } >>"$machine"
fi
echo "== total $(elapsed) s" >>"$summary"
echo "gpu-check: done in $(elapsed) s; summary in $summary"
