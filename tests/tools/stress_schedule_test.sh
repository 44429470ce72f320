#!/usr/bin/env bash
# `tagflow stress --schedule`: the same seed takes the same order (the
# recorded schedules are the same file), a replay of the record takes it
# again, and several clients are refused. Ten rounds of 4000 steps: a
# round ends waiting for its deletions, which under a schedule run only at
# a wait (the second round once hung there). Usage: stress_schedule_test.sh TAGFLOW
set -euo pipefail
tagflow=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export TAGFLOW_SIM_GPUS=2
run() { "$tagflow" stress --steps 40000 --faults --seed 9 "$@" > "$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }; }
run --schedule pct --record "$dir/a"
grep -q " in 10 rounds" "$dir/out" || { echo "expected 10 rounds:"; cat "$dir/out"; exit 1; }
run --schedule pct --record "$dir/b"
cmp "$dir/a" "$dir/b" || { echo "the same seed took two orders"; exit 1; }
run --replay "$dir/a" --record "$dir/c"
cmp <(tail -n +2 "$dir/a") <(tail -n +2 "$dir/c") || { echo "the replay took another order"; exit 1; }
run --schedule random --record "$dir/d"
if cmp -s <(tail -n +2 "$dir/a") <(tail -n +2 "$dir/d"); then
  echo "pct and random took the same order"; exit 1
fi
[ "$(wc -l < "$dir/a")" -gt 1000 ] || { echo "the record is short: $(wc -l < "$dir/a") lines"; exit 1; }
if "$tagflow" stress --steps 100 --schedule pct --clients 2 > "$dir/out" 2>&1; then
  echo "two clients were accepted under a controlled schedule"; exit 1
fi
grep -q "expected --clients 1" "$dir/out" || { cat "$dir/out"; exit 1; }
echo "stress schedules: same seed, same order; replay exact; ten rounds; two clients refused"
