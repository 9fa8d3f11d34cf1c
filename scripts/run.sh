#!/usr/bin/env bash
# Builds paddle.c and runs the main job: seed 002's LinearNet trained with
# paddle.distributed.fleet on two processes started by fleetrun. The
# launcher prints its configuration and the environment table; each rank's
# output is in build/log/workerlog.N (rank 0's is also echoed here).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs" --target fleetrun train_fleet
./build/bin/fleetrun --nproc_per_node=2 --log_dir build/log ./build/examples/train_fleet
