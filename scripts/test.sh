#!/usr/bin/env bash
# Run the whole test suite (unit, slow, real-model and Ray tests, and every docstring example in the packages: see
# pyproject's [tool.pytest]) and list its 25 slowest tests. pytest's exit 5 (no tests) is a failure.
#
# Two passes: the tests that start no Ray run on two pytest-xdist workers (whole files per worker, so a module's
# fixtures are built once), then the `ray` tests run serially (one Ray cluster at a time, on one session head).
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
run -m "not ray" -n "${TEST_WORKERS:-2}" --dist loadfile --durations=25 --junitxml="$timings/no_ray.xml"
first=$?
run -m ray --durations=25 --junitxml="$timings/ray.xml"
second=$?
echo "===== slowest 25 tests of both passes (setup + call + teardown) ====="
.venv/bin/python scripts/slowest_tests.py --top 25 "$timings/no_ray.xml" "$timings/ray.xml"
if [[ $first -ne 0 ]]; then exit $first; fi
exit $second
