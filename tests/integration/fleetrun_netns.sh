#!/usr/bin/env bash
# fleetrun on two "hosts": two network namespaces joined by a veth pair
# (10.77.0.1 and 10.77.0.2), mpirun reaching the second one through an rsh
# agent that runs the command inside it. Each namespace also gets its own
# mount namespace with its own log directory, as two hosts have their own
# disks. Usage: fleetrun_netns.sh <fleetrun> <worker>; exits 77 (skip) where
# network namespaces cannot be made.
set -u
FLEETRUN=$1
WORKER=$2
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: unshare not installed"; exit 77; }
TAG=fr$$
NS1=${TAG}a
NS2=${TAG}b
WORK=$(mktemp -d /tmp/fleetrun_netns.XXXXXX)
cleanup() {
  [ -n "${NS1:-}" ] && ip netns pids "$NS1" 2>/dev/null | xargs -r kill -9 2>/dev/null
  [ -n "${NS2:-}" ] && ip netns pids "$NS2" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$NS1" 2>/dev/null
  ip netns del "$NS2" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
if ! ip netns add "$NS1" 2>/dev/null; then
  echo "SKIP: 'ip netns add' is not permitted here (needs root / CAP_SYS_ADMIN)"
  NS1= NS2=
  exit 77
fi
ip netns add "$NS2" || exit 1
ip link add ${TAG}v1 type veth peer name ${TAG}v2 || { echo "SKIP: cannot create a veth pair"; exit 77; }
ip link set ${TAG}v1 netns "$NS1" && ip link set ${TAG}v2 netns "$NS2" || exit 1
ip -n "$NS1" addr add 10.77.0.1/24 dev ${TAG}v1 && ip -n "$NS2" addr add 10.77.0.2/24 dev ${TAG}v2 || exit 1
for ns in "$NS1" "$NS2"; do ip -n "$ns" link set lo up; done
ip -n "$NS1" link set ${TAG}v1 up && ip -n "$NS2" link set ${TAG}v2 up || exit 1

# "host" 2's private directory is bind-mounted over the job directory, so
# its log/ is its own
mkdir -p "$WORK/job" "$WORK/host2"
cat >"$WORK/agent.sh" <<X
#!/bin/sh
# plm_rsh_agent: agent <host> <command...>; the host is 10.77.0.2 here
shift
exec ip netns exec $NS2 unshare -m sh -c 'mount --bind $WORK/host2 $WORK/job && exec sh -c "\$0"' "\$*"
X
chmod +x "$WORK/agent.sh"
cd "$WORK/job" || exit 1
MCA="--mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24 --mca btl self,tcp"
MCA="$MCA --mca plm_rsh_no_tree_spawn 1 --mca orte_keep_fqdn_hostnames 1"
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
