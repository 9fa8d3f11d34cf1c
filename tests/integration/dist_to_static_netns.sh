#!/usr/bin/env bash
# Seed 000 through dist.to_static on two "hosts" (netns_hosts.sh: two network
# namespaces joined by a veth pair, each with its own log directory), one
# rank on each, launched by fleetrun through mpirun: the backend chosen
# automatically is mpi, and on both hosts the example's own check passes (its
# 8 train and eval losses equal the one-process run to 1e-6).
# Usage: dist_to_static_netns.sh <fleetrun> <dist_to_static>; exits 77
# (skip) where network namespaces cannot be made.
set -u
FLEETRUN=$1
EXAMPLE=$2
. "$(dirname "$0")/netns_hosts.sh"
t0=$(date +%s)
PADDLEC_RSH_AGENT=$WORK/agent.sh PADDLEC_MPIRUN_ARGS="$MCA" timeout 100 \
  ip netns exec "$NS1" "$FLEETRUN" --ips=10.77.0.1,10.77.0.2 --nproc_per_node=1 "$EXAMPLE" >out.txt 2>err.txt
rc=$?
echo "fleetrun exited with $rc after $(($(date +%s) - t0)) s"
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
[ $rc -eq 0 ] || fail "exit code $rc"
# rank 0 on host 1, rank 1 on host 2, each in its own workerlog.0
for r in 0 1; do
  f=$WORK/job/log/workerlog.0
  [ $r -eq 1 ] && f=$WORK/host2/log/workerlog.0
  if [ -f "$f" ] && grep -q "^rank $r: train batch 0 loss 0.7323918$" "$f" &&
    grep -q "^rank $r: predict batch 3 out0 shape \[4, 8\]$" "$f" &&
    grep -qx "rank $r: 8 train and eval losses equal the one-process run to 1e-6 (mesh of 2 processes, mpi backend)" "$f"; then
    echo "ok: rank $r in $f: $(grep "equal the one-process run" "$f")"
  else
    fail "rank $r: $f"
    cat "$f" 2>/dev/null
  fi
done
grep -q "All 2 processes on 2 nodes completed." out.txt || fail "no completion line"
[ -z "$(ip netns pids "$NS1")$(ip netns pids "$NS2")" ] || fail "processes left in the namespaces"

[ $FAILS -eq 0 ] && echo "dist_to_static_netns: all checks passed" && exit 0
cat out.txt err.txt
exit 1
