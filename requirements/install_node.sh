#!/usr/bin/env bash
# Install the project on a Ray cluster node (cluster.yaml's setup_commands run this on the head and on every worker):
# CPython 3.11, exactly the packages pinned in requirements/cluster.lock (`uv pip sync`: no resolution, nothing
# else), then the project itself from this synced working copy (editable, --no-deps: its dependencies are the lock).
# Idempotent: a node whose venv was built from the same lock, pyproject.toml and script returns at once (so a node
# started from an image baked after a first setup costs nothing here).
#
# Why uv: it downloads and unpacks the lock's 104 wheels (~450 MB) in parallel; the unpack-and-link step takes ~3 s
# (measured on a 2-core machine next to a package mirror), so a node's setup is bound by its download bandwidth.
# It also provides CPython 3.11 where the image has none (Ubuntu 24.04 ships 3.12): a system python3.11 is used
# when present, else uv fetches its standalone build.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.8
UV_HOME="${UV_HOME:-$HOME/.cache/trajonco-uv-$UV_VERSION}"
UV="${UV:-$UV_HOME/bin/uv}"
STAMP=.venv/.cluster-lock-stamp
WANT="$(cat requirements/cluster.lock pyproject.toml requirements/install_node.sh | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  echo "install_node: .venv already matches requirements/cluster.lock"
  exit 0
fi
if [[ ! -x "$UV" ]]; then  # uv itself from PyPI, pinned, in a venv of its own
  python3 -m venv "$UV_HOME"
  "$UV_HOME/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
fi
if ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
  "$UV" venv --quiet --clear --python 3.11 .venv
fi
"$UV" pip sync --quiet --python .venv/bin/python requirements/cluster.lock
"$UV" pip install --quiet --python .venv/bin/python --no-deps --editable .
.venv/bin/python -c 'import ray, trajonco, vista, jobs' # the node can run the jobs
echo "$WANT" > "$STAMP"
echo "install_node: .venv installed from requirements/cluster.lock ($(grep -c '==' requirements/cluster.lock) packages)"
