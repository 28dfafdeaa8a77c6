#!/usr/bin/env bash
# Run the whole test suite (unit, slow, real-model and Ray tests, and every docstring example in the packages: see
# pyproject's [tool.pytest]) and list its 25 slowest tests. pytest's exit 5 (no tests) is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
export RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled RAY_DATA_DISABLE_PROGRESS_BARS=1
bash scripts/ensure_chromium.sh || exit 1
.venv/bin/python -m pytest --durations=25 "$@"
rc=$?
if [[ $rc -eq 5 ]]; then echo "pytest collected no tests: failing" >&2; exit 1; fi
exit $rc
