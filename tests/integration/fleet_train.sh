#!/usr/bin/env bash
# Seed 002 on two ranks: `fleetrun --nproc_per_node=2 train_fleet` prints the
# distributed-environment table, and workerlog.0 / workerlog.1 each hold 20
# "step:i<TAB>loss:[x]" lines with finite losses; rank 0 and rank 1 start
# from the same parameters (step 0 of rank 0 equals a one-process run, which
# seeds the same way) and no worker or shared-memory file is left behind.
# Usage: fleet_train.sh <fleetrun> <train_fleet>
set -u
FLEETRUN=$1
TRAIN=$2
WORK=$(mktemp -d /tmp/fleet_train.XXXXXX)
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
# a job id of our own: the job's shared segments are /dev/shm/paddlec-<job id>.*
# (other tests running at the same time have their own)
JOB=fleettrain$$

cd "$WORK" || exit 1
timeout 60 "$FLEETRUN" --nproc_per_node=2 --job_id "$JOB" --log_dir "$WORK/log" "$TRAIN" >console.txt 2>&1
rc=$?
[ $rc -eq 0 ] && ok "fleetrun exit 0" || fail "fleetrun exit $rc: $(tail -5 console.txt)"
grep -q "Distributed Envs" console.txt && grep -q "PADDLE_TRAINERS_NUM *2" console.txt &&
  ok "environment table" || fail "no environment table in the console output"
for r in 0 1; do
  log="$WORK/log/workerlog.$r"
  if [ ! -f "$log" ]; then fail "no $log"; continue; fi
  n=$(grep -cP '^step:\d+\tloss:\[[0-9][0-9.e+-]*\]$' "$log")
  [ "$n" -eq 20 ] && ok "workerlog.$r: 20 finite step lines" || fail "workerlog.$r: $n finite step lines of 20"
  for i in $(seq 0 19); do
    grep -qP "^step:$i\t" "$log" || fail "workerlog.$r: no step $i"
  done
  grep -qiE "nan|inf|error" "$log" && fail "workerlog.$r: $(grep -iE 'nan|inf|error' "$log" | head -1)"
done
single=$(timeout 30 "$TRAIN" | head -1)
first=$(head -1 "$WORK/log/workerlog.0" 2>/dev/null)
[ -n "$single" ] && [ "$single" = "$first" ] && ok "rank 0 step 0 = one process ($first)" ||
  fail "rank 0 step 0 '$first' vs one process '$single'"
# the ranks average their gradients: their step-1 losses differ (own data),
# but both trained, i.e. step lines exist past 0 -- checked above.
left=$(ls /dev/shm | grep "^paddlec-$JOB\\." || true)
[ -z "$left" ] && ok "no /dev/shm leftovers" || fail "new /dev/shm files: $(echo $left)"
pgrep -f "^$TRAIN\$" >/dev/null && fail "train_fleet still running" || ok "no leftover processes"
[ $FAILS -eq 0 ] && echo PASS || echo "FAILED: $FAILS"
exit $((FAILS > 0))
