#!/usr/bin/env bash
# fleetrun on two "hosts" (netns_hosts.sh: two network namespaces joined by
# a veth pair, each with its own log directory), 2 ranks on each. Usage: fleetrun_netns.sh <fleetrun> <worker>; exits 77 (skip) where
# network namespaces cannot be made.
set -u
FLEETRUN=$1
WORKER=$2
. "$(dirname "$0")/netns_hosts.sh"
t0=$(date +%s)
FR_ALL_REDUCE=1 PADDLEC_RSH_AGENT=$WORK/agent.sh PADDLEC_MPIRUN_ARGS="$MCA -x FR_ALL_REDUCE" timeout 60 \
  ip netns exec "$NS1" \
  "$FLEETRUN" --ips=10.77.0.1,10.77.0.2 --nproc_per_node=2 "$WORKER" >out.txt 2>err.txt
rc=$?
echo "fleetrun exited with $rc after $(($(date +%s) - t0)) s"
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
[ $rc -eq 0 ] || { fail "exit code $rc"; cat out.txt err.txt; }
EPS=10.77.0.1:6070,10.77.0.1:6071,10.77.0.2:6070,10.77.0.2:6071
# host 1: ranks 0, 1; host 2: ranks 2, 3, each in its workerlog.<local rank>
for r in 0 1 2 3; do
  l=$r dir=$WORK/job/log ip=10.77.0.1
  [ $r -ge 2 ] && l=$((r - 2)) dir=$WORK/host2/log ip=10.77.0.2
  f=$dir/workerlog.$l
  if [ -f "$f" ] && grep -qx "env PADDLE_TRAINER_ID=$r" "$f" && grep -qx "env OMPI_COMM_WORLD_RANK=$r" "$f" &&
    grep -qx "env PADDLE_TRAINERS_NUM=4" "$f" && grep -qx "env PADDLE_TRAINER_ENDPOINTS=$EPS" "$f" &&
    grep -qx "env PADDLE_CURRENT_ENDPOINT=$ip:$((6070 + l))" "$f" && grep -qx "env PADDLE_MASTER=10.77.0.1:6070" "$f" &&
    grep -qx "env PADDLE_RANK_IN_NODE=$l" "$f" && grep -qx "env PADDLE_NNODES=2" "$f" &&
    grep -qx "env PADDLE_LOCAL_SIZE=2" "$f" && grep -q "^step:2	loss:" "$f" &&
    grep -qx "all_reduce sum=10 expected=10 backend=mpi" "$f"; then
    echo "ok: rank $r in $f"
  else
    fail "rank $r: $f"
    cat "$f" 2>/dev/null
  fi
done
# the console: the table of rank 0 and its steps
grep -qxF "    |                PADDLE_TRAINER_ENDPOINTS  ... 77.0.1:6071,10.77.0.2:6070,10.77.0.2:6071|" out.txt ||
  fail "no table on the console"
grep -q "^step:0	loss:" out.txt || fail "rank 0's steps not on the console"
grep -q "All 4 processes on 2 nodes completed." out.txt || fail "no completion line"

# rank 3 (on host 2) fails: mpirun stops the job, fleetrun exits non-zero
rm -rf log "$WORK/host2/log"
t0=$(date +%s%3N)
FR_FAIL_RANK=3 PADDLEC_RSH_AGENT=$WORK/agent.sh PADDLEC_MPIRUN_ARGS="$MCA -x FR_FAIL_RANK" timeout 60 \
  ip netns exec "$NS1" "$FLEETRUN" --ips=10.77.0.1,10.77.0.2 --nproc_per_node=2 "$WORKER" >out2.txt 2>err2.txt
rc=$?
dt=$(($(date +%s%3N) - t0))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $dt -lt 10000 ] && grep -q "ABORT!!! mpirun ended with" err2.txt &&
  grep -q "failing on purpose" "$WORK/host2/log/workerlog.1"; then
  echo "ok: a failing rank on host 2 stopped the job after $dt ms (exit code $rc)"
else
  fail "failing rank: exit code $rc after $dt ms"
  cat out2.txt err2.txt
fi
[ -z "$(ip netns pids "$NS1")$(ip netns pids "$NS2")" ] || fail "processes left in the namespaces"

[ $FAILS -eq 0 ] && echo "fleetrun_netns: all checks passed" && exit 0
cat out.txt err.txt
exit 1
