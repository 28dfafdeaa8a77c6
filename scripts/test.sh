#!/usr/bin/env bash
# Run the whole test suite (unit, slow, real-model and Ray tests, and every docstring example in the packages: see
# pyproject's [tool.pytest]) and list its 25 slowest tests. pytest's exit 5 (no tests) is a failure.
#
# One pytest run on three pytest-xdist workers: one runs the `ray` tests serially (one Ray cluster at a time, on one
# session head; over tests/test_jobs_ray.py they used ~1.2 of 2 cores), while the other two take every other file whole (a
# module's fixtures are built once) at niceness 19, below Ray's workers (15); see tests/conftest.py. TEST_WORKERS (default 2) is the number of the latter.
# Arguments (e.g. one test file) run a single serial pytest with them instead.
set -uo pipefail
cd "$(dirname "$0")/.."
export RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled RAY_DATA_DISABLE_PROGRESS_BARS=1
bash scripts/ensure_chromium.sh || exit 1

run() {  # one pytest run; exit 5 (it collected no test) counts as a failure
  .venv/bin/python -m pytest "$@"
  local rc=$?
  if [[ $rc -eq 5 ]]; then echo "pytest collected no tests: failing" >&2; return 1; fi
  return $rc
}

if [[ $# -gt 0 ]]; then
  run --durations=25 "$@"
  exit $?
fi
timings=$(mktemp -d)
trap 'rm -rf "$timings"' EXIT
run -n "$(( ${TEST_WORKERS:-2} + 1 ))" --dist loadgroup --no-loadscope-reorder --durations=25 \
  --junitxml="$timings/all.xml"
status=$?
echo "===== slowest 25 tests (setup + call + teardown) ====="
.venv/bin/python scripts/slowest_tests.py --top 25 "$timings/all.xml"
exit $status
