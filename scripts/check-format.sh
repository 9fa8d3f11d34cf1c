#!/usr/bin/env bash
# Fails when a tracked C file differs from .clang-format's style.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.c' '*.h')
if clang-format --dry-run --Werror $files; then
  echo "format: $(echo "$files" | wc -l) files clean"
else
  echo "format: run 'clang-format -i' on the files above"
  exit 1
fi
