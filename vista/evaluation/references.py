"""Clinician reference answers as the evaluation's truth, read from a CSV or JSON file.

The generator's records (`vista.evaluation.truth`) are one source of truth; a clinician's chart review is the other
— and the one the paper's accuracy rests on. A reference file holds one answer per (patient, variable):

==============  ========  =======================================================================================
column / key    required  meaning
==============  ========  =======================================================================================
``subject_id``  yes       the patient (an integer, as in the MEDS data and the graph store)
``variable``    yes       a variable key of the display (``histology``, ``stage``, ``allergies``…)
``answer``      yes       the reference answer in words; "Not documented" when the chart is silent. A ``date``
                          variable needs a date (YYYY-MM-DD, or YYYY-MM); several dates = each is accepted. A ``set``
                          variable lists its items separated by commas, or "None".
``as_of``       no        the date the clinician's review stops (YYYY-MM-DD); every row of a patient must agree
``hint``        no        what matters when the judge compares an answer with this one (a default is used)
``reviewer``    no        who wrote it (kept, not used for scoring)
==============  ========  =======================================================================================

CSV: a header row naming the columns (any order; unknown columns are an error). JSON: a list of objects with the
same keys, or ``{"references": [...]}``. Every problem is reported as one `EvaluationError` naming the file, the row
(CSV line or JSON index) and the field. A variable the file does not answer for a patient is unscorable for that
patient ("no clinician reference answer"), never silently scored. See ``docs/clinician_references.md`` and the
example ``tests/data/clinician_references.csv``.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "refs.csv").write_text("subject_id,variable,answer\\n7,histology,Adenocarcinoma\\n7,stage,IIIA\\n")
>>> cases = load_reference_answers(folder / "refs.csv")
>>> sorted(cases[7].answers), cases[7].expected(load_variables())["histology"].reference
(['histology', 'stage'], 'Adenocarcinoma')
>>> cases[7].expected(load_variables())["allergies"].reason
'no clinician reference answer for variable allergies'
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vista.display import Comparison, VariableSpec, load_variables
from vista.evaluation.errors import EvaluationError
from vista.evaluation.answer import Expected
from vista.evaluation.normalize import find_dates, normalize_text, split_sites

UNDOCUMENTED = frozenset({"not documented", "unknown", "not known", "not available", "not recorded", "undocumented"})
"""Answers meaning the chart is silent (a reference of "None"/"No" is an answer: no metastases, no surgery)."""
DEFAULT_HINT = "The reference was written by a clinician reviewing the chart; the facts must agree."


class ReferenceAnswer(BaseModel):
    """One clinician answer: the reference of one variable for one patient."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    subject_id: int
    variable: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    as_of: dt.date | None = None
    hint: str = ""
    reviewer: str = ""


@dataclass(frozen=True)
class ClinicianCase:
    """One patient's clinician references (by variable key) and the date the review stops (None: not given)."""

    subject_id: int
    answers: Mapping[str, ReferenceAnswer] = field(default_factory=dict)
    as_of: dt.date | None = None
    source: str = ""

    def expected(self, specs: Sequence[VariableSpec]) -> dict[str, Expected]:
        """The `Expected` of every variable: the clinician's answer, or unscorable when the file has none."""
        return {spec.key: (_expected(spec, self.answers[spec.key]) if spec.key in self.answers else
                           Expected(key=spec.key, comparison=spec.comparison, scorable=False,
                                    reason=f"no clinician reference answer for variable {spec.key}"))
                for spec in specs}


def _expected(spec: VariableSpec, ref: ReferenceAnswer) -> Expected:
    documented = normalize_text(ref.answer) not in UNDOCUMENTED
    extra: dict[str, object] = {}
    if spec.comparison is Comparison.DATE and documented:
        extra["accepted_dates"] = tuple(dict.fromkeys(day for day, _ in find_dates(ref.answer)))
    if spec.comparison is Comparison.SET:
        extra["items"] = tuple(sorted(set(split_sites(ref.answer)))) if documented else ()
    return Expected(key=spec.key, comparison=spec.comparison, scorable=True, reference=ref.answer,
                    rubric_hint=ref.hint or DEFAULT_HINT, documented=documented, **extra)


COLUMNS = tuple(ReferenceAnswer.model_fields)


def _rows(path: Path) -> Iterable[tuple[str, dict[str, object]]]:
    """(where, raw row) for each row of a CSV or JSON reference file."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvaluationError(f"{path}: cannot read the clinician reference answers ({exc})") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvaluationError(f"{path}: not JSON ({exc})") from None
        items = data.get("references") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise EvaluationError(f"{path}: expected a list of reference objects or {{\"references\": [...]}}")
        for k, item in enumerate(items):
            if not isinstance(item, dict):
                raise EvaluationError(f"{path}: item {k}: expected an object with keys {', '.join(COLUMNS)}")
            yield f"{path}: item {k}", item
        return
    if path.suffix.lower() not in (".csv", ".tsv"):
        raise EvaluationError(f"{path}: clinician reference answers must be a .csv, .tsv or .json file")
    reader = csv.DictReader(text.splitlines(), delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
    header = reader.fieldnames or []
    unknown = [c for c in header if c not in COLUMNS]
    missing = [c for c in ("subject_id", "variable", "answer") if c not in header]
    if unknown or missing:
        raise EvaluationError(f"{path}: line 1: header " + "; ".join(
            part for part in (f"unknown column(s) {unknown}" if unknown else "",
                              f"missing column(s) {missing}" if missing else "") if part)
            + f" (columns: {', '.join(COLUMNS)})")
    for row in reader:
        if None in row:
            raise EvaluationError(f"{path}: line {reader.line_num}: more values than header columns")
        yield f"{path}: line {reader.line_num}", {k: v for k, v in row.items() if v not in (None, "")}


def load_reference_answers(path: str | Path, variables: Sequence[VariableSpec] | None = None,
                           subject_ids: Iterable[int] | None = None) -> dict[int, ClinicianCase]:
    """The clinician reference answers of ``path`` (CSV or JSON, see the module docstring) per patient.

    Checks every row (types, a known variable key, one answer per patient and variable, one ``as_of`` per patient,
    a date in every documented ``date`` answer); ``subject_ids`` keeps those patients and requires each to have
    at least one answer."""
    path = Path(path)
    specs = {s.key: s for s in (variables if variables is not None else load_variables())}
    found: dict[int, dict[str, ReferenceAnswer]] = {}
    as_of: dict[int, tuple[dt.date | None, str]] = {}
    for where, raw in _rows(path):
        try:
            ref = ReferenceAnswer.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors(include_input=False)[0]
            name = ".".join(str(p) for p in first["loc"]) or "<row>"
            raise EvaluationError(f"{where}: field {name!r}: {first['msg']}") from None
        spec = specs.get(ref.variable)
        if spec is None:
            raise EvaluationError(f"{where}: field 'variable': unknown variable {ref.variable!r} "
                                  f"(known: {', '.join(specs)})")
        if ref.variable in found.setdefault(ref.subject_id, {}):
            raise EvaluationError(f"{where}: subject {ref.subject_id} variable {ref.variable!r} is answered twice")
        if spec.comparison is Comparison.DATE and normalize_text(ref.answer) not in UNDOCUMENTED \
                and not find_dates(ref.answer):
            raise EvaluationError(f"{where}: field 'answer': variable {ref.variable!r} is compared by date, but "
                                  f"{ref.answer!r} holds no date (write YYYY-MM-DD, or 'Not documented')")
        previous = as_of.setdefault(ref.subject_id, (ref.as_of, where))
        if previous[0] != ref.as_of:
            raise EvaluationError(f"{where}: field 'as_of': subject {ref.subject_id} has as_of {ref.as_of} here but "
                                  f"{previous[0]} at {previous[1].rsplit(': ', 1)[-1]}")
        found[ref.subject_id][ref.variable] = ref
    if not found:
        raise EvaluationError(f"{path}: no clinician reference answers")
    if subject_ids is not None:
        wanted = set(subject_ids)
        if missing := sorted(wanted - set(found)):
            raise EvaluationError(f"{path}: no clinician reference answer for subject(s) {missing}")
        found = {sid: answers for sid, answers in found.items() if sid in wanted}
    return {sid: ClinicianCase(sid, answers, as_of[sid][0], str(path)) for sid, answers in sorted(found.items())}
