#!/usr/bin/env bash
# Seed 001 (paddle.DataParallel) over the two communication backends: the
# same two ranks under fleetrun (shm) and under mpirun with the mpi backend
# print the same losses, bit for bit (a sum of two values and a division
# by 2 do not depend on the order the backend reduces in), and both end
# with identical parameters on every rank.
# Usage: data_parallel_backends.sh <fleetrun> <data_parallel> <mpirun...>
set -u
FLEETRUN=$1
PROG=$2
shift 2
MPIRUN=("$@")
WORK=$(mktemp -d /tmp/dp_backends.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }

timeout 60 "$FLEETRUN" --nproc_per_node=2 --job_id "dpb$$" --log_dir "$WORK/log" "$PROG" >"$WORK/shm.txt" 2>&1 ||
  fail "fleetrun (shm): $(tail -3 "$WORK/shm.txt")"
OMPI_MCA_btl_vader_single_copy_mechanism=none PADDLEC_COMM_BACKEND=mpi \
  timeout 60 "${MPIRUN[@]}" -np 2 "$PROG" >"$WORK/mpi.txt" 2>&1 || fail "mpirun (mpi): $(tail -3 "$WORK/mpi.txt")"
for r in 0 1; do
  # fleetrun keeps each rank's output in its workerlog; mpirun interleaves them
  grep -a "^\[rank $r\].*loss:" "$WORK/log/workerlog.$r" >"$WORK/shm.$r" 2>/dev/null
  grep -a "^\[rank $r\].*loss:" "$WORK/mpi.txt" >"$WORK/mpi.$r"
  n=$(wc -l <"$WORK/shm.$r")
  [ "$n" -gt 0 ] || fail "rank $r: no loss lines from the shm run"
  if cmp -s "$WORK/shm.$r" "$WORK/mpi.$r"; then
    ok "rank $r: $n loss lines identical over shm and mpi"
  else
    fail "rank $r: losses differ between shm and mpi: $(diff "$WORK/shm.$r" "$WORK/mpi.$r" | head -3 | tr '\n' ' ')"
  fi
  grep -q "^\[rank $r\] parameters identical on all 2 ranks" "$WORK/mpi.txt" && ok "rank $r (mpi): parameters identical" ||
    fail "rank $r (mpi): no 'parameters identical' line"
done
[ $FAILS -eq 0 ] && echo PASS || echo "$FAILS failure(s)"
exit $((FAILS > 0))
