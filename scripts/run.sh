#!/usr/bin/env bash
# Builds paddle.c and runs the main job: the linear-regression example,
# trained in one process (distributed training of the seed examples takes
# its place when the collective backend lands).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs" --target linear_regression
./build/examples/linear_regression
