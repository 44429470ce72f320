#!/usr/bin/env bash
# `tagflow train --dist mpi` under mpirun, end to end (ctest runs each case):
#   same     2 processes train as 1 process with the same global batch; each
#            writes its trace, and `tagflow profile` puts both on one timeline
#   killed   a rank killed mid-training ends the job with an error
#   stopped  a rank that stops answering: the others time out (10 s) and end the job
#   failing  a rank that fails at start-up ends the job at once, saying why
# Usage: dist_train_test.sh CASE TAGFLOW_BINARY
set -euo pipefail

case_name=$1
tagflow=$2
work=$(mktemp -d)
# Whatever happens, no process of a job outlives the test (a stopped one included).
cleanup() {
  for pid in $(cat "$work"/pids 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
  [ -z "${job:-}" ] || kill -9 "$job" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun --oversubscribe)
train=(train --limit 2048 --no-progress --workers 1)

fail() {
  echo "FAIL ($case_name): $*" >&2
  echo "--- output of the job:" >&2
  cat "$work"/out "$work"/err >&2 2>/dev/null || true
  exit 1
}

# The pid of rank $1 of the job $2, from the line each process prints at start.
pid_of_rank() {
  local rank=$1 job=$2
  for _ in $(seq 600); do
    kill -0 "$job" 2>/dev/null || fail "the job ended before rank $rank said its pid"
    local pid
    pid=$(sed -n "s/^train: rank $rank of [0-9]* on .*, pid \([0-9]*\)$/\1/p" "$work"/err | head -n 1)
    if [ -n "$pid" ]; then
      echo "$pid"
      return 0
    fi
    sleep 0.1
  done
  fail "rank $rank never said its pid"
}

# Waits up to $1 seconds for the job in the background ($2) to end; sets
# `status` to its exit status.
wait_for_job() {
  local limit=$1 job=$2
  for _ in $(seq $((limit * 10))); do
    if ! kill -0 "$job" 2>/dev/null; then
      status=0
      wait "$job" || status=$?
      return 0
    fi
    sleep 0.1
  done
  kill -9 "$job" 2>/dev/null || true
  fail "the job did not end within $limit s"
}

# Waits until rank 0 has printed its first epoch: the ranks are training,
# inside collectives, from then on.
wait_for_training() {
  local job=$1
  for _ in $(seq 1200); do
    grep -q '^epoch' "$work"/out 2>/dev/null && return 0
    kill -0 "$job" 2>/dev/null || fail "the job ended before it could be disturbed"
    sleep 0.1
  done
  fail "no epoch ended within 120 s"
}

# Starts 2 ranks training for long, with MPI timeout $1 s, in the background;
# sets `job` and `victim` (rank 1's pid, also in $work/pids) and returns once
# they train.
start_two_ranks() {
  "${mpirun[@]}" -np 2 "$tagflow" "${train[@]}" --epochs 200 --dist mpi --dist-timeout "$1" \
    >"$work"/out 2>"$work"/err &
  job=$!
  victim=$(pid_of_rank 1 "$job") || exit 1
  echo "$victim" >"$work"/pids
  wait_for_training "$job"
}

loss_of() { sed -n 's/^epoch  1\/1: loss \([0-9.]*\),.*/\1/p' "$1"; }

case "$case_name" in
  same)
    "$tagflow" "${train[@]}" --epochs 1 >"$work"/one 2>"$work"/err || fail "one process failed"
    "${mpirun[@]}" -np 2 "$tagflow" "${train[@]}" --epochs 1 --dist mpi --bucket-kb 16 \
      --profile "$work"/trace.json >"$work"/out 2>"$work"/err || fail "two processes failed"
    [ "$(grep -c '^epoch' "$work"/out)" -eq 1 ] || fail "expected one epoch line, from rank 0 only"
    grep -q "in each of 2 processes (mpi)" "$work"/out || fail "the header does not say 2 processes"
    one=$(loss_of "$work"/one)
    two=$(loss_of "$work"/out)
    [ -n "$one" ] && [ -n "$two" ] || fail "no loss printed (one: '$one', two: '$two')"
    awk -v a="$one" -v b="$two" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 2e-3 * a) }' ||
      fail "the loss of 2 processes ($two) is not that of 1 process ($one)"
    echo "same: 1 process loss $one, 2 processes loss $two"
    for rank in 0 1; do
      [ -s "$work/trace.rank$rank.json" ] || fail "rank $rank wrote no trace.rank$rank.json"
    done
    "$tagflow" profile "$work"/trace.json --html "$work"/page.html >"$work"/profile ||
      fail "tagflow profile of the two ranks' traces failed: $(cat "$work"/profile)"
    grep -q "^2 processes on one timeline, aligned on the steady clock of " "$work"/profile ||
      fail "the two traces were not aligned on the host's clock: $(head -3 "$work"/profile)"
    for rank in 0 1; do
      grep -q "^  rank $rank cpu(0) " "$work"/profile || fail "no figures for rank $rank's cpu(0)"
      grep -q "rank $rank cpu(0) worker 0" "$work"/page.html || fail "no row for rank $rank"
    done
    echo "same: both ranks' traces on one page"
    ;;
  killed)
    start_two_ranks 60
    kill -9 "$victim"
    wait_for_job 40 "$job"
    [ "$status" -ne 0 ] || fail "the job ended with status 0"
    grep -q -i "rank 1.*signal 9\|signal 9.*rank 1\|exited on signal 9" "$work"/err ||
      fail "nothing says that rank 1 was killed"
    echo "killed: the job ended with status $status"
    ;;
  stopped)
    start_two_ranks 10
    kill -STOP "$victim"
    wait_for_job 60 "$job"
    [ "$status" -ne 0 ] || fail "the job ended with status 0"
    grep -q "did not complete within 10 s" "$work"/err || fail "rank 0 did not report the timeout"
    grep -q "tagflow: rank 0 of 2:" "$work"/err || fail "rank 0 did not end with its error"
    echo "stopped: rank 0 timed out and the job ended with status $status"
    ;;
  failing)
    start=$SECONDS
    "${mpirun[@]}" -np 1 "$tagflow" "${train[@]}" --epochs 1 --dist mpi : \
      -np 1 "$tagflow" "${train[@]}" --epochs 1 --dist mpi --data "$work/no-such-directory" \
      >"$work"/out 2>"$work"/err &
    job=$!
    wait_for_job 60 "$job"
    [ "$status" -ne 0 ] || fail "the job ended with status 0"
    grep -q "tagflow: rank 1 of 2: .*no-such-directory" "$work"/err ||
      fail "rank 1 did not say what failed"
    [ $((SECONDS - start)) -lt 30 ] || fail "the job took $((SECONDS - start)) s to end"
    echo "failing: the job ended in $((SECONDS - start)) s with status $status"
    ;;
  *)
    echo "unknown case $case_name" >&2
    exit 2
    ;;
esac
