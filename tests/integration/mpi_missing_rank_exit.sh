#!/usr/bin/env bash
# A rank that never joins a collective under mpirun: the waiting rank warns
# every PADDLEC_COMM_WARN_INTERVAL seconds naming it, reports it at the
# timeout, and the job ends within seconds (MPI_Abort at exit instead of a
# hang in MPI_Finalize), leaving no rank and no Open MPI file in /dev/shm.
# Usage: mpi_missing_rank_exit.sh <program> <mpirun> [mpirun flags...]
set -u
PROG=$1
shift
WORK=$(mktemp -d /tmp/mpi_missing_rank.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
now_ms() { date +%s%3N; }
# a process that exists and is not a zombie (the orphans' reaper may be slow)
alive() { [ -r "/proc/$1/stat" ] && ! sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | grep -q '^[ZX]'; }

t0=$(now_ms)
PADDLEC_COMM_TIMEOUT=5 PADDLEC_COMM_WARN_INTERVAL=2 timeout -k 5 90 "$@" -np 2 "$PROG" >"$WORK/out.txt" 2>"$WORK/err.txt"
rc=$?
dt=$(($(now_ms) - t0))
cat "$WORK/out.txt" "$WORK/err.txt"
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] && ok "the job failed (exit $rc)" || fail "exit status $rc"
# 5 s timeout + at most 5 s waiting at the exit + start-up; rank 1 sleeps 300 s
[ $dt -lt 30000 ] && ok "the job ended after $dt ms" || fail "the job took $dt ms"
grep -q "timed out after 5 s waiting for every rank to call it.*missing (never arrived): rank 1" "$WORK/err.txt" &&
  ok "the error names the missing rank" || fail "no error naming rank 1"
# the watchdog: while waiting, a warning every 2 s names the missing rank
nwarn=$(grep -c "^paddle.c warning: rank 0 (pid [0-9]*) has waited [0-9]* s in mpi all_reduce(float32, 4 elements, SUM) #2 on group 0 for rank 1; it gives up after 5 s" "$WORK/err.txt")
[ "$nwarn" = 2 ] && ok "two warnings named rank 1 while waiting" || fail "$nwarn warnings naming rank 1 (expected 2, at 2 and 4 s)"
grep -q "rank 0 exits after a failed collective .* aborting the job (MPI_Abort)" "$WORK/err.txt" &&
  ok "rank 0 says why it aborts" || fail "no abort message"
sleep 1
for pid in $(sed -n 's/^rank [01] pid \([0-9]*\)$/\1/p' "$WORK/out.txt"); do
  alive "$pid" && { fail "rank process $pid is still alive"; kill -9 "$pid"; }
done
[ "$(grep -c '^rank [01] pid ' "$WORK/out.txt")" = 2 ] || fail "both ranks should print their pid"
left=0
for f in $(sed -n 's/^rank [01] maps \(\/dev\/shm\/[^ ]*\).*$/\1/p' "$WORK/out.txt" | sort -u); do
  [ -e "$f" ] && { fail "$f is left behind"; left=1; }
done
[ $left -eq 0 ] && ok "no /dev/shm file of the job is left ($(grep -c ' maps /dev/shm/' "$WORK/out.txt") mappings seen)"

[ $FAILS -eq 0 ] && echo "mpi_missing_rank_exit: PASS" && exit 0
echo "mpi_missing_rank_exit: $FAILS check(s) failed"
exit 1
