#!/usr/bin/env bash
# fleetrun on one node: the console layout of seed 002, workerlog.N, the
# environment contract, a failing rank, SIGTERM, --max_restart, ps mode,
# --help and bad flags. Usage: fleetrun_local.sh <fleetrun> <worker>
set -u
FLEETRUN=$1
WORKER=$2
WORK=$(mktemp -d /tmp/fleetrun_local.XXXXXX)
BGPID=
SHMKEY=
cleanup() {
  [ -n "$BGPID" ] && kill -9 "$BGPID" 2>/dev/null
  [ -n "$SHMKEY" ] && rm -f /dev/shm/paddlec-"$SHMKEY"*
  for f in "$WORK"/*/pids/pid.*; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
now_ms() { date +%s%3N; }
# no worker of a finished job may be left: every pid file's process is gone
check_no_leftovers() {
  local dir=$1 what=$2 p
  for f in "$dir"/pid.*; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    if kill -0 "$p" 2>/dev/null; then fail "$what: process $p ($(basename "$f")) still alive"; return; fi
  done
  ok "$what: no leftover processes"
}
newcase() { mkdir -p "$WORK/$1/pids"; cd "$WORK/$1" || exit 1; }
# a process that exists and is not a zombie (orphans wait for a slow reaper)
alive() { [ -r "/proc/$1/stat" ] && ! sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | grep -q '^[ZX]'; }

# ---- 1. two ranks, the seed's console layout (fixed ports so the table is exact)
newcase layout
"$FLEETRUN" --gpus=0,1 --start_port=59664 "$WORKER" >out.txt 2>err.txt
rc=$?
[ $rc -eq 0 ] || fail "layout: exit code $rc"
cat >want_config.txt <<'X'
-----------  Configuration Arguments -----------
devices: None
gpus: 0,1
ips: 127.0.0.1
job_id: default
log_dir: log
master: None
max_restart: 0
nnodes: None
nproc_per_node: None
run_mode: None
server_num: None
servers:
X
echo "training_script: $WORKER" >>want_config.txt
cat >>want_config.txt <<'X'
training_script_args: []
worker_num: None
workers:
------------------------------------------------
X
head -n 18 out.txt | diff want_config.txt - >/dev/null && ok "layout: configuration block" ||
  { fail "layout: configuration block differs"; head -n 18 out.txt | diff want_config.txt -; }
# the seed's table with its second port 48993 -> 59665 (same width)
cat >want_table.txt <<'X'
    +=======================================================================================+
    |                        Distributed Envs                      Value                    |
    +---------------------------------------------------------------------------------------+
    |                 PADDLE_CURRENT_ENDPOINT                 127.0.0.1:59664               |
    |                     PADDLE_TRAINERS_NUM                        2                      |
    |                     FLAGS_selected_gpus                        0                      |
    |                PADDLE_TRAINER_ENDPOINTS         127.0.0.1:59664,127.0.0.1:59665       |
    |                       PADDLE_TRAINER_ID                        0                      |
    +=======================================================================================+
X
grep -A9 -x 'INFO [-0-9]* [0-9:,]* [a-z_]*\.c:[0-9]*\] Local start 2 processes\. First process distributed environment info (Only For Debug):' out.txt |
  tail -n 9 | diff want_table.txt - >/dev/null && ok "layout: env table" ||
  { fail "layout: env table differs"; cat out.txt; }
grep -q "^INFO .*\] Run collective mode. gpu arguments:\['--gpus'\], cpu count:[0-9]*$" out.txt || fail "layout: run mode line"
grep -qF "details abouts PADDLE_TRAINER_ENDPOINTS can be found in log/endpoints.log, and detail running logs maybe found in log/workerlog.0" out.txt ||
  fail "layout: details line"
# rank 0's steps on the console, right after the table, rank 1's not
printf 'step:0\tloss:[1.5]\nstep:1\tloss:[0.75]\nstep:2\tloss:[0.5]\n' >want_steps.txt
grep '^step:' out.txt | diff want_steps.txt - >/dev/null && ok "layout: rank 0's steps streamed" || fail "layout: console steps"
grep -q "^INFO .*\] Local processes completed\.$" out.txt || fail "layout: no 'Local processes completed.'"
printf 'PADDLE_TRAINER_ENDPOINTS: \n127.0.0.1:59664\n127.0.0.1:59665\n' | diff - log/endpoints.log >/dev/null ||
  fail "layout: endpoints.log"
# workerlog.N: each rank's own lines and contract
for r in 0 1; do
  l=log/workerlog.$r
  [ -f $l ] || { fail "layout: no $l"; continue; }
  grep -qx "env PADDLE_TRAINER_ID=$r" $l && grep -qx "env PADDLE_TRAINERS_NUM=2" $l &&
    grep -qx "env PADDLE_TRAINER_ENDPOINTS=127.0.0.1:59664,127.0.0.1:59665" $l &&
    grep -qx "env PADDLE_CURRENT_ENDPOINT=127.0.0.1:5966$((4 + r))" $l &&
    grep -qx "env PADDLE_MASTER=127.0.0.1:59664" $l && grep -qx "env PADDLE_RANK_IN_NODE=$r" $l &&
    grep -qx "env PADDLE_LOCAL_SIZE=2" $l && grep -qx "env PADDLE_NNODES=1" $l &&
    grep -qx "env FLAGS_selected_gpus=$r" $l && grep -qx "env PADDLE_WORLD_DEVICE_IDS=0:1" $l &&
    grep -qx "env PADDLE_JOB_ID=default" $l && grep -qx "step:2	loss:\[$(awk "BEGIN{printf \"%.7g\", 0.5 + $r}")\]" $l &&
    ok "layout: $l" || { fail "layout: $l content"; cat $l; }
done
grep -qx "env OMP_NUM_THREADS=$(($(nproc) / 2 > 0 ? $(nproc) / 2 : 1))" log/workerlog.0 ||
  fail "layout: OMP_NUM_THREADS default"

# ---- 2. free ports, the user's OMP_NUM_THREADS, --nproc_per_node, shm cleanup
newcase freeports
OMP_NUM_THREADS=3 FR_SHM=1 "$FLEETRUN" --nproc_per_node 3 --job_id myjob "$WORKER" >out.txt 2>&1 || fail "freeports: exit code"
eps=$(sed -n 's/^env PADDLE_TRAINER_ENDPOINTS=//p' log/workerlog.2)
[ "$(echo "$eps" | tr ',' '\n' | sort -u | grep -c '^127\.0\.0\.1:[0-9]*$')" = 3 ] && ok "freeports: 3 distinct endpoints" ||
  fail "freeports: endpoints '$eps'"
grep -qx "env OMP_NUM_THREADS=3" log/workerlog.1 || fail "freeports: the user's OMP_NUM_THREADS not kept"
grep -qx "env PADDLE_JOB_ID=myjob" log/workerlog.1 || fail "freeports: PADDLE_JOB_ID"
key=$(sed -n 's/^env PADDLEC_JOB_KEY=//p' log/workerlog.0)
[ -n "$key" ] && [ "$key" = "$(sed -n 's/^env PADDLEC_JOB_KEY=//p' log/workerlog.2)" ] || fail "freeports: job key '$key'"
ls /dev/shm/paddlec-"$key"* >/dev/null 2>&1 && fail "freeports: /dev/shm/paddlec-$key* left behind" ||
  ok "freeports: shm files removed"

# ---- 3. a failing rank stops the job within seconds, naming the rank and its log
newcase failrank
t0=$(now_ms)
FR_PID_DIR=$PWD/pids FR_FAIL_RANK=1 timeout 20 "$FLEETRUN" --nproc_per_node=2 "$WORKER" >out.txt 2>err.txt
rc=$?
dt=$(($(now_ms) - t0))
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "failrank: exit code $rc"
[ $dt -lt 6000 ] && ok "failrank: stopped after ${dt} ms" || fail "failrank: took ${dt} ms"
grep -q "ABORT!!! Out of all 2 trainers, the trainer process with rank=\[1\] was aborted. Please check its log." err.txt ||
  { fail "failrank: no ABORT line"; cat err.txt; }
grep -q "trainer 1 ended with exit code 3; its log: .*/log/workerlog.1" err.txt || fail "failrank: no log path"
grep -q "failing on purpose" log/workerlog.1 || fail "failrank: workerlog.1"
[ -f pids/pid.0 ] || fail "failrank: rank 0 never started"
check_no_leftovers pids failrank

# ---- 3b. kill -9 of one rank while the other sits in a collective (shm):
# the launcher exits non-zero naming it, nothing is left in /dev/shm
newcase kill9
FR_PID_DIR=$PWD/pids FR_ALL_REDUCE=1 FR_KILL_WAIT=1 timeout 30 "$FLEETRUN" --nproc_per_node=3 "$WORKER" >out.txt 2>err.txt &
BGPID=$!
for _ in $(seq 400); do grep -q "waits to be killed" log/workerlog.1 2>/dev/null && break; sleep 0.05; done
sleep 0.3
t0=$(now_ms)
kill -9 "$(cat pids/pid.1)"
wait $BGPID
rc=$?
BGPID=
dt=$(($(now_ms) - t0))
key=$(sed -n 's/^env PADDLEC_JOB_KEY=//p' log/workerlog.0)
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $dt -lt 10000 ] && ok "kill9: fleetrun exited $rc after ${dt} ms" ||
  fail "kill9: exit code $rc after ${dt} ms"
grep -q "all_reduce sum=6 expected=6 backend=shm" log/workerlog.0 || fail "kill9: the first all_reduce"
# rank 1 first; on a loaded machine the ranks that lost their peer may be reaped in the same poll
grep -q "rank=\[1[],]" err.txt || { fail "kill9: rank 1 not named"; cat err.txt; }
grep -q "trainer 1 .*signal.*log/workerlog.1\|trainer 1 .*SIGKILL.*workerlog.1\|workerlog.1" err.txt || fail "kill9: no log path"
[ -n "$key" ] && ! ls /dev/shm/paddlec-"$key"* >/dev/null 2>&1 && ok "kill9: nothing left in /dev/shm" ||
  fail "kill9: /dev/shm/paddlec-$key* left behind"
check_no_leftovers pids kill9

# ---- 4. SIGTERM to fleetrun stops the children
newcase sigterm
FR_PID_DIR=$PWD/pids FR_SLEEP=1 "$FLEETRUN" --nproc_per_node=2 "$WORKER" >out.txt 2>err.txt &
BGPID=$!
for _ in $(seq 100); do [ -f pids/pid.0 ] && [ -f pids/pid.1 ] && break; sleep 0.05; done
t0=$(now_ms)
kill -TERM $BGPID
wait $BGPID
rc=$?
BGPID=
dt=$(($(now_ms) - t0))
[ $rc -eq 143 ] && ok "sigterm: fleetrun ended by SIGTERM (status $rc) after ${dt} ms" || fail "sigterm: status $rc"
check_no_leftovers pids sigterm

# ---- 4b. SIGKILL to fleetrun (it can clean up nothing): its ranks, their
# children and a rank that ignores SIGTERM die within seconds, and the job's
# /dev/shm names are removed
newcase sigkill
FR_PID_DIR=$PWD/pids FR_ALL_REDUCE=1 FR_LOOP=1 FR_SHM=1 FR_GRANDCHILD=1 FR_IGNORE_TERM=1 \
  "$FLEETRUN" --nproc_per_node=2 "$WORKER" >out.txt 2>err.txt &
BGPID=$!
for _ in $(seq 400); do
  grep -q "looping" log/workerlog.0 2>/dev/null && grep -q "looping" log/workerlog.1 2>/dev/null && break
  sleep 0.05
done
key=$(sed -n 's/^env PADDLEC_JOB_KEY=//p' log/workerlog.0)
SHMKEY=$key
ls /dev/shm/paddlec-"$key"-test* >/dev/null 2>&1 || fail "sigkill: the job's /dev/shm files never appeared"
[ "$(ls pids | wc -l)" = 4 ] || fail "sigkill: expected 2 ranks and 2 children, got pid files: $(ls pids)"
t0=$(now_ms)
kill -9 $BGPID
wait $BGPID 2>/dev/null
BGPID=
left=x
for _ in $(seq 200); do
  left=
  for f in pids/pid.*; do alive "$(cat "$f")" && left="$left $(basename "$f")"; done
  ls /dev/shm/paddlec-"$key"* >/dev/null 2>&1 && left="$left shm"
  [ -z "$left" ] && break
  sleep 0.05
done
dt=$(($(now_ms) - t0))
[ -z "$left" ] && [ $dt -lt 10000 ] && ok "sigkill: ranks, children and /dev/shm names gone ${dt} ms after the launcher" ||
  fail "sigkill: after ${dt} ms still there:$left"
grep -q "fleetrun: the launcher (pid [0-9]*) is gone; stopping its 2 process group(s)" err.txt ||
  { fail "sigkill: no message from the guard"; cat err.txt; }

# ---- 5. --max_restart 1: the job fails once, is restarted, completes
newcase restart
FR_FAIL_ONCE=$PWD/marker "$FLEETRUN" --nproc_per_node=2 --max_restart 1 "$WORKER" >out.txt 2>err.txt
rc=$?
[ $rc -eq 0 ] || fail "restart: exit code $rc"
grep -q "Restarting the local job: restart 1 of 1" out.txt && ok "restart: restarted once" || fail "restart: no restart line"
[ "$(grep -c '^env PADDLE_TRAINER_ID=1$' log/workerlog.1)" = 2 ] || fail "restart: workerlog.1 should hold two runs"
grep -q "Local processes completed." out.txt || fail "restart: not completed"
rm -f marker
FR_FAIL_ONCE=$PWD/marker "$FLEETRUN" --nproc_per_node=2 "$WORKER" >out0.txt 2>err0.txt && fail "restart: no --max_restart must fail"
grep -q "rank=\[1\]" err0.txt || fail "restart: failure without --max_restart"

# ---- 6. ps mode: a server and two trainers; the server is stopped when the trainers end
newcase ps
t0=$(now_ms)
FR_PID_DIR=$PWD/pids timeout 20 "$FLEETRUN" --server_num=1 --worker_num=2 "$WORKER" >out.txt 2>err.txt
rc=$?
dt=$(($(now_ms) - t0))
[ $rc -eq 0 ] && [ $dt -lt 6000 ] && ok "ps: completed in ${dt} ms" || { fail "ps: exit code $rc after ${dt} ms"; cat out.txt err.txt; }
grep -qx "env TRAINING_ROLE=PSERVER" log/serverlog.0 && grep -qx "env TRAINING_ROLE=TRAINER" log/workerlog.1 &&
  grep -qx "env PADDLE_TRAINER_ID=1" log/workerlog.1 && grep -qx "env PADDLE_TRAINERS_NUM=2" log/serverlog.0 &&
  ok "ps: role environment" || fail "ps: role environment"
sp=$(sed -n 's/^env PADDLE_PSERVERS_IP_PORT_LIST=//p' log/workerlog.0)
[ "127.0.0.1:$(sed -n 's/^env PADDLE_PORT=//p' log/serverlog.0)" = "$sp" ] || fail "ps: server endpoint '$sp'"
grep -q "all workers exit, going to finish parameter server" out.txt || fail "ps: servers not finished"
check_no_leftovers pids ps

# ---- 7. --help and bad flags
newcase flags
"$FLEETRUN" --help >help.txt 2>&1 && grep -q "^usage: fleetrun" help.txt && grep -q -- "--nproc_per_node" help.txt &&
  ok "flags: --help" || fail "flags: --help"
expect_error() { # expected message, then the arguments
  local want=$1
  shift
  "$FLEETRUN" "$@" >o.txt 2>e.txt
  local rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$want" e.txt && [ ! -d log ]; then ok "flags: $* -> $want"; else
    fail "flags: '$*' gave $rc: $(cat e.txt)"; fi
}
expect_error "unknown flag '--bogus'" --bogus=1 "$WORKER"
expect_error "--nproc_per_node must be an integer in [1, 4096], got '0'" --nproc_per_node=0 "$WORKER"
expect_error "--nproc_per_node must be an integer in [1, 4096], got 'two'" --nproc_per_node two "$WORKER"
expect_error "--max_restart must be an integer in [0, 1000], got '-1'" --max_restart=-1 "$WORKER"
expect_error "no training program given" --nproc_per_node=2
expect_error "flag '--log_dir' needs a value" --log_dir
expect_error "3 devices (0,1,2) cannot be split evenly over --nproc_per_node=2" --devices=0,1,2 --nproc_per_node=2 "$WORKER"
expect_error "--nnodes=2 but --ips names 1 node(s)" --nnodes=2 "$WORKER"
expect_error "--run_mode must be collective or ps, got 'x'" --run_mode=x "$WORKER"
expect_error "--master must be ip:port with a port in [1, 65535], got '127.0.0.1:99999'" --master=127.0.0.1:99999 "$WORKER"
expect_error "--master must be ip:port with a port in [1, 65535], got '127.0.0.1:0'" --master 127.0.0.1:0 "$WORKER"
# a program that cannot be started is a failed rank, not a hang
"$FLEETRUN" ./no-such-program >o.txt 2>e.txt && fail "flags: a missing program must fail"
grep -q "cannot run './no-such-program'" log/workerlog.0 || fail "flags: missing program not reported in workerlog.0"

[ $FAILS -eq 0 ] && echo "fleetrun_local: all checks passed" && exit 0
echo "fleetrun_local: $FAILS check(s) failed"
exit 1
