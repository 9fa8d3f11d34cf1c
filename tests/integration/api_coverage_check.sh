#!/usr/bin/env bash
# Fails when docs/api-coverage.tsv is stale: a header gained or lost a
# symbol, a test started covering one, or the API list or its overrides
# changed without regenerating the table (python3 scripts/api_coverage.py).
# Usage: api_coverage_check.sh [source-dir]  (default: this checkout)
set -euo pipefail
src=${1:-"$(dirname "$0")/../.."}
cd "$src"
exec python3 scripts/api_coverage.py --check
