#!/usr/bin/env bash
# `tagflow train --checkpoint` stopped by a real signal, then `--resume`d,
# ends as the run never stopped (the same epoch lines but for the timings,
# the same parameter file byte for byte):
#   term   SIGTERM during training: a checkpoint at the next batch, status 143
#   kill   SIGKILL during training: resumed from the last whole checkpoint
# Usage: resume_test.sh CASE TAGFLOW_BINARY
set -euo pipefail

case_name=$1
tagflow=$2
work=$(mktemp -d)
trap 'kill -9 "${job:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
if ! ls /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte* >/dev/null 2>&1; then
  echo "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)" >&2
  exit 77
fi
train=(train --epochs 4 --limit 8192 --batch-size 64 --no-progress --momentum 0.9
       --lr-schedule cosine --warmup-epochs 1)

fail() {
  echo "FAIL ($case_name): $*" >&2
  for f in "$work"/*.out "$work"/*.err; do echo "--- $f" >&2; cat "$f" >&2; done
  exit 1
}

# The epoch lines without their timings.
figures() { sed -n 's/^\(epoch .*test acc [0-9.]*\),.*/\1/p' "$1"; }

"$tagflow" "${train[@]}" --save "$work/whole.safetensors" >"$work/whole.out" 2>"$work/whole.err" ||
  fail "the uninterrupted run failed"

# Starts the run in the background and waits until its first epoch ended
# (its line comes after its checkpoint), so that the signal lands in
# training (epoch 2 or later).
"$tagflow" "${train[@]}" --checkpoint "$work/ck" --save "$work/resumed.safetensors" \
  >"$work/first.out" 2>"$work/first.err" &
job=$!
for _ in $(seq 600); do
  grep -q '^epoch  1/4' "$work/first.out" && break
  kill -0 "$job" 2>/dev/null || fail "the run ended before it could be stopped"
  sleep 0.05
done
case "$case_name" in
  term) kill -TERM "$job" ;;
  kill) kill -KILL "$job" ;;
  *) echo "unknown case $case_name" >&2; exit 2 ;;
esac
status=0
wait "$job" || status=$?
job=
if [ "$case_name" = term ]; then
  if [ "$status" -eq 0 ]; then
    echo "the run ended before the signal: nothing to resume, nothing tested" >&2
    exit 77
  fi
  [ "$status" -eq 143 ] || fail "expected status 143 after SIGTERM, got $status"
  grep -q "^train: stopped in epoch [2-4], before batch [0-9]* of 128; checkpoint $work/ck/" \
    "$work/first.err" || fail "no checkpoint said at the stop"
else
  [ "$status" -eq 137 ] || fail "expected status 137 after SIGKILL, got $status"
fi
ls -d "$work"/ck/epoch-* >/dev/null 2>&1 || fail "no checkpoint was written"

"$tagflow" "${train[@]}" --checkpoint "$work/ck" --resume "$work/ck" \
  --save "$work/resumed.safetensors" >"$work/second.out" 2>"$work/second.err" ||
  fail "the resumed run failed"
cat "$work/first.out" "$work/second.out" | grep '^epoch' | sort -u -k2,2 > "$work/both.out"
diff <(figures "$work/whole.out") <(figures "$work/both.out") >&2 ||
  fail "the epochs of the stopped and resumed run differ from the uninterrupted run's"
cmp "$work/whole.safetensors" "$work/resumed.safetensors" ||
  fail "the parameters differ from the uninterrupted run's"
echo "$case_name: stopped with status $status, resumed, the same 4 epochs and parameters"
