"""The generator's ground truth as the evaluation's truth (the other source: clinician answers, `references`).

Any truth the evaluation accepts has a ``subject_id`` and an ``expected(specs)`` giving each variable's `Expected`
answer (`vista.evaluation.answer.TruthSource`); this module adapts the synthetic generator's records to it, so nothing else in
`vista.evaluation.evaluate` depends on `vista.shared.synth`.

`TruthCase` bundles the generator's `OncologyRecord` with what it lacks (the patient's demographics) and the date
the display's record was cut at. `load_oncology_truths` reads ``<dataset>/ground_truth/oncology.jsonl``, naming
the file, line and field of anything malformed.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from vista.display import VariableSpec
from vista.evaluation.errors import EvaluationError
from vista.evaluation.answer import Expected
from vista.evaluation.expected import expected_values
from vista.shared.records import Demographics
from vista.shared.synth.ground_truth import OncologyRecord

ONCOLOGY_FILE = Path("ground_truth") / "oncology.jsonl"


@dataclass(frozen=True, slots=True)
class TruthCase:
    """One patient's truth: the oncology record, the demographics (None: that variable is unscorable) and the date
    the display's record ends (None: the truth's own last day)."""

    record: OncologyRecord
    demographics: Demographics | None = None
    as_of: dt.date | None = None

    @property
    def subject_id(self) -> int:
        return self.record.subject_id

    def expected(self, specs: Sequence[VariableSpec]) -> dict[str, Expected]:
        """The reference answer of every variable (`expected_values` as of ``as_of``)."""
        return expected_values(self.record, specs, self.as_of, demographics=self.demographics)


def load_oncology_truths(dataset_root: str | Path, subject_ids: Iterable[int] | None = None) -> dict[int, OncologyRecord]:
    """The `OncologyRecord` of every cancer patient (or of ``subject_ids`` only) in a synthetic dataset."""
    path = Path(dataset_root) / ONCOLOGY_FILE
    wanted = set(subject_ids) if subject_ids is not None else None
    out: dict[int, OncologyRecord] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise EvaluationError(f"{path}: cannot read the oncology ground truth: {exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = OncologyRecord.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise EvaluationError(f"{path}:{number}: not JSON: {exc}") from None
        except ValidationError as exc:
            first = exc.errors(include_input=False)[0]
            field = ".".join(str(x) for x in first["loc"])
            raise EvaluationError(f"{path}:{number}: field {field!r}: {first['msg']}") from None
        if wanted is None or record.subject_id in wanted:
            if record.subject_id in out:
                raise EvaluationError(f"{path}:{number}: subject {record.subject_id} appears twice")
            out[record.subject_id] = record
    if wanted is not None and (missing := wanted - set(out)):
        raise EvaluationError(f"{path}: no oncology record for subject(s) {sorted(missing)}")
    return out
