#!/usr/bin/env bash
# Side virtualenvs for MEDS ecosystem tools whose pins clash with the project's .venv (idempotent, offline but PyPI).
#
#   bash scripts/side_venvs.sh NAME...      creates (or refreshes) .side-venvs/NAME for each NAME, prints its path
#
# NAME         installs                         why a venv of its own
#   meds-dev   meds-dev==0.0.14                 pins meds==0.3.3, meds-evaluation==0.0.3 and es-aces==0.6.1 (polars<2);
#              (meds-dev-evaluation, -pack-result, -validate-result; meds-evaluation-cli 0.0.3; aces-cli 0.6.1)
#                                               the project pins meds 0.4.1, meds-evaluation 0.0.6 and polars 2.x
#   meds-tab   meds-tab==0.2.0                  MEDS-Tab pins meds 0.3.3 and polars 1.x
# A venv is rebuilt only when its pins or this script changed (stamp: .side-venvs/NAME/.side-venv-stamp), so a second
# call returns at once; concurrent calls (two pytest workers) wait for one another (flock on .side-venvs/.NAME.lock).
# Environment: SIDE_VENVS (default <repo>/.side-venvs), PYTHON (default python3.11).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BASE="${SIDE_VENVS:-$ROOT/.side-venvs}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [[ $# -eq 0 ]]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi

pins() {
  case "$1" in
    meds-dev) echo "meds-dev==0.0.14" ;;
    meds-tab) echo "meds-tab==0.2.0" ;;
    *) echo "side_venvs: unknown venv '$1' (known: meds-dev, meds-tab)" >&2; return 2 ;;
  esac
}

for name in "$@"; do
  want_pins="$(pins "$name")" || exit 2
  venv="$BASE/$name"
  stamp="$venv/.side-venv-stamp"
  mkdir -p "$BASE"
  exec 9>"$BASE/.$name.lock"
  flock 9
  want="$( (echo "$want_pins"; cat "$0") | sha256sum | cut -d' ' -f1)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$venv/bin/python" ]]; then
    exec 9>&-
    echo "$venv"
    continue
  fi
  echo "== side_venvs: creating $venv with $want_pins" >&2
  started=$SECONDS
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  # shellcheck disable=SC2086  # the pins are words
  "$venv/bin/python" -m pip install -q --disable-pip-version-check $want_pins >&2
  echo "$want" > "$stamp"
  exec 9>&-
  echo "== side_venvs: $venv ready in $((SECONDS - started)) s" >&2
  echo "$venv"
done
