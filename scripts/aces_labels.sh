#!/usr/bin/env bash
# MEDS labels from ACES (PyPI es-aces, the MEDS ecosystem's cohort extractor), one label file per split.
# ACES runs in a venv of its own (.venv-aces, created here when missing): es-aces 0.7.3 requires polars<2 and the
# project pins polars 2.x, so the two cannot share .venv. Its output is read by every command that takes --labels
# (vista/shared/meds/labels.py).
#
# Usage: bash scripts/aces_labels.sh DATASET TASK.yaml OUT_DIR [HYDRA_OVERRIDE...]
#   DATASET   a MEDS dataset root (DATASET/data/<split>/<n>.parquet)
#   TASK      an ACES task config: predicates, trigger, windows, with `index_timestamp: end` on the input window
#             (the prediction time) and `label:` on the target window (e.g. tests/data/aces_lung.yaml)
#   OUT_DIR   receives aces-cli's own files, OUT_DIR/shards/<split>/<n>.parquet, and the same rows merged per split,
#             OUT_DIR/<split>.parquet (e.g. OUT_DIR/held_out.parquet), with the same types, less the label columns
#             ACES leaves null in every row (so meds.LabelSchema validates the file as it is)
#   HYDRA_OVERRIDE  passed on to aces-cli, e.g. window_stats_dir=OUT_DIR/stats
# Environment: ACES_VENV (default .venv-aces), PYTHON (default python3.11).
# Then, e.g.: .venv/bin/python -m jobs.predict --labels OUT_DIR/held_out.parquet --dataset DATASET --out out/predict
set -euo pipefail
if [[ $# -lt 3 ]]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
abspath() { python3 -c 'import os, sys; print(os.path.abspath(sys.argv[1]))' "$1"; }
DATASET="$(abspath "$1")"
TASK="$(abspath "$2")"
OUT="$(abspath "$3")"
shift 3
[[ -d "$DATASET/data" ]] || { echo "aces_labels: $DATASET/data: not a MEDS dataset (no data/ folder)" >&2; exit 2; }
[[ -f "$TASK" ]] || { echo "aces_labels: $TASK: task config not found" >&2; exit 2; }
[[ "$TASK" == *.yaml ]] || { echo "aces_labels: $TASK: the task config must end in .yaml" >&2; exit 2; }
[[ -x "$ROOT/.venv/bin/python" ]] || { echo "aces_labels: $ROOT/.venv missing: run make setup first (the project's venv merges and checks the labels)" >&2; exit 2; }

ACES_VERSION=0.7.3
VENV="${ACES_VENV:-$ROOT/.venv-aces}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [[ ! -x "$VENV/bin/aces-cli" || "$(cat "$VENV/.aces-stamp" 2>/dev/null)" != "$ACES_VERSION" ]]; then
  echo "== creating $VENV with es-aces==$ACES_VERSION" >&2
  [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "es-aces==$ACES_VERSION"
  echo "$ACES_VERSION" > "$VENV/.aces-stamp"
fi

SHARDS="$("$VENV/bin/expand_shards" "$DATASET/data")"
[[ -n "$SHARDS" ]] || { echo "aces_labels: no parquet shards under $DATASET/data" >&2; exit 2; }
mkdir -p "$OUT"
rm -rf "$OUT/shards"
echo "== aces-cli on $DATASET ($SHARDS) with $TASK" >&2
# One run per shard (Hydra multirun); ${data._prefix} is /<split>/<n>, interpolated by Hydra, not by the shell.
"$VENV/bin/aces-cli" -m \
  "cohort_dir=$(dirname "$TASK")" "cohort_name=$(basename "$TASK" .yaml)" "config_path=$TASK" \
  data=sharded data.standard=meds "data.root=$DATASET/data" "data.shard=$SHARDS" \
  "output_filepath=$OUT/shards"'${data._prefix}.parquet' "log_dir=$OUT/.logs" "$@" \
  > "$OUT/aces-cli.log" 2>&1 || { tail -20 "$OUT/aces-cli.log" >&2; echo "aces_labels: aces-cli failed; log: $OUT/aces-cli.log" >&2; exit 1; }

# Merge each split's shard files (identical schemas) into OUT/<split>.parquet, leaving out the optional label columns
# ACES writes all null (meds.LabelSchema refuses them: vista.shared.meds.labels.merge_label_files), then read every split
# back with the project's own label reader (what the commands will see) and check it against meds.LabelSchema.
"$ROOT/.venv/bin/python" - "$OUT" <<'PY'
import sys
from pathlib import Path

import meds
import pyarrow.compute as pc

from vista.shared.meds.labels import LabelFileError, merge_label_files, read_label_table

out = Path(sys.argv[1])
for split in sorted(p for p in (out / "shards").iterdir() if p.is_dir()):
    path = out / f"{split.name}.parquet"
    meds.LabelSchema.validate(merge_label_files(sorted(split.rglob("*.parquet")), path))
    try:
        table = read_label_table(path)
    except LabelFileError as exc:
        sys.exit(f"aces_labels: {exc}")
    subjects = len(pc.unique(table.column("subject_id")))
    positives = pc.sum(table.column("boolean_value")).as_py() or 0
    print(f"{path}: {table.num_rows} label rows, {subjects} subjects, {positives} true")
PY
