"""The reference answer of every tumor-board variable, derived from the generator's ground truth (`OncologyRecord`).

Each variable has one rule (`RULES`) turning the truth, as of a date, into an `Expected`: a reference text for the
judge with a rubric hint, plus what a deterministic scorer needs (accepted dates, a set of normalized items). Facts
dated after ``as_of`` are left out, so a display built from a record cut at ``as_of`` is held to what it could see.
A variable the truth cannot settle is returned unscorable with the reason (e.g. code status: the generator writes
no DNR/DNI orders; demographics: the oncology record holds none unless `Demographics` are given; allergies,
comorbidities, medications, height/weight: not in the oncology record — clinician references can score them),
never dropped.

>>> import json
>>> truth = OncologyRecord.model_validate(json.loads(EXAMPLE_TRUTH))
>>> from vista.display import load_variables
>>> expected = expected_values(truth, load_variables())
>>> expected["stage"].reference
'AJCC 8th stage IVA (T2a N2 M1a)'
>>> expected["diagnosis_date"].accepted_dates
(datetime.date(2012, 11, 21), datetime.date(2012, 11, 15))
>>> expected["metastatic_sites"].items
('bone', 'liver')
>>> expected["code_status"].scorable, expected["demographics"].reason
(False, 'the oncology ground truth holds no demographics (pass demographics=)')
>>> expected_values(truth, load_variables(), dt.date(2012, 10, 1))["histology"].reference
'Not documented'
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from vista.display import VariableSpec
from vista.evaluation.answer import Expected
from vista.evaluation.normalize import NOT_DOCUMENTED, normalize_site
from vista.shared.records import Demographics
from vista.shared.synth.ground_truth import OncologyRecord, TreatmentLineTruth


class _DatedFact(Protocol):
    @property
    def date(self) -> dt.date: ...

    @property
    def event_ids(self) -> Sequence[str]: ...


D = TypeVar("D", bound=_DatedFact)


@dataclass(frozen=True, slots=True)
class _Facts:
    """One patient's truth as of a date (the argument of every rule)."""

    truth: OncologyRecord
    as_of: dt.date
    demographics: Demographics | None

    @property
    def diagnosed(self) -> bool:
        return self.truth.clinical_diagnosis_date <= self.as_of

    def lines(self) -> list[TreatmentLineTruth]:
        return [line for line in self.truth.treatment_lines if line.start_date <= self.as_of]


def _day(value: dt.date | None) -> str:
    return value.isoformat() if value else "date unknown"


def _refs(*groups: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ref for group in groups for ref in group))


_Rule = Callable[[_Facts, VariableSpec], Expected]


def _ok(spec: VariableSpec, reference: str, hint: str, refs: Sequence[str] = (), **extra) -> Expected:
    return Expected(key=spec.key, comparison=spec.comparison, scorable=True, reference=reference, rubric_hint=hint,
                    truth_refs=tuple(refs), **extra)


def _silent(spec: VariableSpec, hint: str, **extra) -> Expected:
    return Expected(key=spec.key, comparison=spec.comparison, scorable=True, reference=NOT_DOCUMENTED, rubric_hint=hint,
                    documented=False, **extra)


def _unscorable(spec: VariableSpec, reason: str) -> Expected:
    return Expected(key=spec.key, comparison=spec.comparison, scorable=False, reason=reason)


def _demographics(f: _Facts, spec: VariableSpec) -> Expected:
    demo = f.demographics
    if demo is None:
        return _unscorable(spec, "the oncology ground truth holds no demographics (pass demographics=)")
    age = demo.age_at(f.as_of)
    sex = {"F": "female", "M": "male"}.get(demo.sex or "", demo.sex or "sex not documented")
    parts = [f"{int(age)} years" if age is not None else "age not documented", sex,
             f"race {demo.race}" if demo.race else "race not documented",
             f"ethnicity {demo.ethnicity}" if demo.ethnicity else "ethnicity not documented"]
    return _ok(spec, ", ".join(parts), "Age within one year counts as right; sex, race and ethnicity must match "
               "(wording may differ).")


def _smoking(f: _Facts, spec: VariableSpec) -> Expected:
    smoking = f.truth.smoking
    hint = "The status (never/former/current) must match; pack-years within 10% and the quit year add detail."
    if smoking.status == "not documented":
        return _silent(spec, hint)
    parts = [f"{smoking.status} smoker"]
    if smoking.pack_years is not None and smoking.status != "never":
        parts.append(f"{smoking.pack_years:g} pack-years")
    if smoking.quit_year is not None:
        parts.append(f"quit {smoking.quit_year}")
    return _ok(spec, ", ".join(parts), hint, smoking.event_ids)


def _primary_site(f: _Facts, spec: VariableSpec) -> Expected:
    hint = "Organ and lobe or subsite must match; laterality must match when the reference gives one."
    if not f.diagnosed:
        return _silent(spec, hint)
    side = f" ({f.truth.laterality})" if f.truth.laterality else ""
    return _ok(spec, f"{f.truth.cancer_name}: {f.truth.site}{side}", hint, f.truth.diagnosis_event_ids)


def _diagnosis_date(f: _Facts, spec: VariableSpec) -> Expected:
    truth = f.truth
    dates = [truth.clinical_diagnosis_date, truth.diagnosis_date] + [p.date for p in truth.pathology[:1]]
    accepted = tuple(dict.fromkeys(d for d in dates if d is not None and d <= f.as_of))
    hint = "Right when the date is the clinical diagnosis, the first diagnosis code of the qualifying pair or the " \
           "first pathological confirmation (same day, or same month when only a month is given)."
    if not f.diagnosed or not accepted:
        return _silent(spec, hint)
    words = f"{accepted[0].isoformat()}" + (f" (also accepted: {', '.join(d.isoformat() for d in accepted[1:])})"
                                            if len(accepted) > 1 else "")
    return _ok(spec, words, hint, _refs(truth.diagnosis_event_ids, *(p.event_ids for p in truth.pathology[:1])),
               accepted_dates=accepted)


def _histology(f: _Facts, spec: VariableSpec) -> Expected:
    hint = "The histological type must match (e.g. adenocarcinoma vs squamous cell); the ICD-O-3 code is optional."
    if not f.diagnosed:
        return _silent(spec, hint)
    return _ok(spec, f"{f.truth.histology} (ICD-O-3 {f.truth.icdo3_morphology})", hint,
               _refs(*(p.event_ids for p in f.truth.pathology[:1])))


def _stage(f: _Facts, spec: VariableSpec) -> Expected:
    stage = f.truth.stage
    when = stage.date or f.truth.clinical_diagnosis_date
    hint = "The stage group must match including its letter (IIIA is not IIIB); T, N and M categories add detail " \
           "and a wrong category is an error."
    if when > f.as_of:
        return _silent(spec, hint)
    tnm = " ".join(x for x in (stage.t, stage.n, stage.m) if x)
    return _ok(spec, f"{stage.system} stage {stage.group}" + (f" ({tnm})" if tnm else ""), hint, stage.event_ids)


def _biomarkers(f: _Facts, spec: VariableSpec) -> Expected:
    markers = [b for b in f.truth.biomarkers if b.date is None or b.date <= f.as_of]
    hint = "Every marker's result must match (positive/negative, mutation, PD-L1 percentage); a missing or wrong " \
           "marker lowers the score in proportion."
    if not markers:
        return _silent(spec, hint)
    return _ok(spec, "; ".join(f"{b.name}: {b.result}" for b in markers), hint, _refs(*(b.event_ids for b in markers)))


def _metastatic_sites(f: _Facts, spec: VariableSpec) -> Expected:
    sites = tuple(sorted({normalize_site(s) for s in f.truth.metastatic_sites}))
    hint = "Same set of organs with distant metastases; 'None' when there are none."
    if not sites:
        return _ok(spec, "None", hint, items=())
    if f.as_of < f.truth.record_end_date:
        return _unscorable(spec, "the ground truth does not date the metastatic sites, so they cannot be cut at as_of")
    return _ok(spec, ", ".join(f.truth.metastatic_sites), hint, items=sites)


def _line_text(line: TreatmentLineTruth, as_of: dt.date) -> str:
    if line.end_date is None or line.end_date > as_of:
        span, ended = f"{_day(line.start_date)} to ongoing", "ongoing"
    else:
        span, ended = f"{_day(line.start_date)} to {_day(line.end_date)}", line.end_reason
    return f"Line {line.line}: {line.regimen} ({line.intent}), {span}, ended: {ended}"


def _treatment_history(f: _Facts, spec: VariableSpec) -> Expected:
    lines = f.lines()
    hint = "Each line's regimen and their order must match; dates within a month and the reason a line ended add " \
           "detail; generic vs brand names and 'maintenance' wording are equivalent."
    if not lines:
        return _ok(spec, "None", hint)
    return _ok(spec, "; ".join(_line_text(line, f.as_of) for line in lines), hint,
               _refs(*(line.event_ids for line in lines)))


def _current_therapy(f: _Facts, spec: VariableSpec) -> Expected:
    active = [line for line in f.lines() if line.end_date is None or line.end_date >= f.as_of]
    hint = "The regimen on at the last record must match; 'None' is right when no line is active."
    if not active:
        return _ok(spec, "None", hint)
    line = active[-1]
    if line.end_reason == "death" and line.end_date == f.as_of:
        return _ok(spec, f"{line.regimen} (until death on {_day(line.end_date)})",
                   hint + " The patient died on this line, so naming it or 'None' because of death are both right.",
                   line.event_ids)
    return _ok(spec, f"{line.regimen} (line {line.line}, since {_day(line.start_date)})", hint, line.event_ids)


def _components(f: _Facts, modalities: set[str]) -> list[tuple[TreatmentLineTruth, str, dt.date, dt.date]]:
    return [(line, c.label, c.start_date, c.end_date) for line in f.lines() for c in line.components
            if c.modality in modalities and c.start_date <= f.as_of]


def _surgery(f: _Facts, spec: VariableSpec) -> Expected:
    found = _components(f, {"surgery"})
    hint = "The procedure and its date (within a week) must match; 'No' when none was done."
    if not found:
        return _ok(spec, "No", hint)
    return _ok(spec, "; ".join(f"{label} on {_day(start)}" for _, label, start, _ in found), hint,
               _refs(*(line.event_ids for line, *_ in found)))


def _radiation(f: _Facts, spec: VariableSpec) -> Expected:
    found = _components(f, {"radiation", "chemoradiation"})
    hint = "Whether radiation was given and when (within a month) must match; the reference has no site or dose, " \
           "so their presence or absence is not an error."
    if not found:
        return _ok(spec, "No", hint)
    return _ok(spec, "; ".join(f"{label}, {_day(start)} to {_day(min(end, f.as_of))}" for _, label, start, end in found),
               hint, _refs(*(line.event_ids for line, *_ in found)))


def _performance_status(f: _Facts, spec: VariableSpec) -> Expected:
    return _latest(f, spec, f.truth.performance_status, lambda p: f"ECOG {p.ecog} ({p.date.isoformat()})",
                   "The ECOG score must match exactly; its date within a week.")


def _latest_imaging(f: _Facts, spec: VariableSpec) -> Expected:
    return _latest(f, spec, f.truth.imaging, lambda i: f"{i.date.isoformat()} {i.modality}: {i.impression}",
                   "Date (within 3 days) and modality must match; the impression's meaning (e.g. progression, stable, "
                   "suspicious mass) must agree. The reference is the latest cancer-related study.")


def _latest(f: _Facts, spec: VariableSpec, facts: Sequence[D], text: Callable[[D], str], hint: str) -> Expected:
    """The last of the dated ``facts`` (in date order) known at ``f.as_of`` as the reference; silent when none is."""
    seen = [fact for fact in facts if fact.date <= f.as_of]
    if not seen:
        return _silent(spec, hint)
    return _ok(spec, text(seen[-1]), hint, seen[-1].event_ids)


def _progression(f: _Facts, spec: VariableSpec) -> Expected:
    seen = [p for p in f.truth.progressions if p.date <= f.as_of]
    hint = "Whether the disease progressed or recurred must match, with dates within a month; sites add detail."
    if not seen:
        return _ok(spec, "No", hint)
    events = ", ".join(f"{p.date.isoformat()} (on line {p.line})" for p in seen)
    return _ok(spec, f"Yes: progression or recurrence on {events}", hint, _refs(*(p.event_ids for p in seen)))


def _code_status(f: _Facts, spec: VariableSpec) -> Expected:
    truth = f.truth
    if truth.hospice_date is not None and truth.hospice_date <= f.as_of:
        return _ok(spec, f"Hospice enrolment on {truth.hospice_date.isoformat()}", "Hospice enrolment and its date "
                   "(within a week) must match; DNR/DNI is not recorded by the generator, so its mention is not judged.",
                   truth.hospice_event_ids)
    return _unscorable(spec, "the generator writes no DNR/DNI orders, and without hospice enrolment the truth "
                       "cannot settle the code status")


def _not_in_generator(what: str) -> _Rule:
    def rule(f: _Facts, spec: VariableSpec) -> Expected:
        return _unscorable(spec, f"the generator's oncology record holds no {what}; score this variable with "
                           "clinician reference answers (vista.evaluation.references)")
    return rule


RULES: Mapping[str, _Rule] = {
    "demographics": _demographics, "smoking_history": _smoking, "primary_site": _primary_site,
    "diagnosis_date": _diagnosis_date, "histology": _histology, "stage": _stage, "biomarkers": _biomarkers,
    "metastatic_sites": _metastatic_sites, "treatment_history": _treatment_history,
    "current_therapy": _current_therapy, "surgery": _surgery, "radiation": _radiation,
    "performance_status": _performance_status, "latest_imaging": _latest_imaging, "progression": _progression,
    "code_status": _code_status, "height_weight": _not_in_generator("height or weight"),
    "allergies": _not_in_generator("allergies"), "prior_conditions": _not_in_generator("comorbidities"),
    "medications": _not_in_generator("medication list"),
}
"""The rule per variable key; a key without a rule is reported unscorable."""


def expected_values(truth: OncologyRecord, variables: Sequence[VariableSpec], as_of: dt.date | None = None, *,
                    demographics: Demographics | None = None) -> dict[str, Expected]:
    """The `Expected` answer of every variable for ``truth`` as of ``as_of`` (default: the record's last day).

    ``demographics`` (the patient's sex, race, ethnicity and birth date, e.g. from the MEDS static rows the generator
    wrote) settles the demographics variable; without it that variable is unscorable.
    """
    facts = _Facts(truth, as_of or truth.record_end_date, demographics)
    out: dict[str, Expected] = {}
    for spec in variables:
        rule = RULES.get(spec.key)
        out[spec.key] = rule(facts, spec) if rule else _unscorable(spec, f"no ground-truth rule for variable {spec.key!r}")
    return out


EXAMPLE_TRUTH = """{"subject_id":2,"data_file":"data/train/0.parquet","cancer":"lung","cancer_name":"Lung cancer",
"icd_code":"ICD9CM//162.3","diagnosis_date":"2012-11-21","diagnosis_time":"2012-11-21T10:02:00",
"diagnosis_event_ids":["e117","e143"],"clinical_diagnosis_date":"2012-11-21","is_incident_case":true,
"exclusion_reason":null,"trap":null,"workup_path":"symptomatic","site":"right upper lobe","laterality":"right",
"histology":"non-small cell carcinoma, NOS","icdo3_morphology":"8046/3","stage":{"system":"AJCC 8th","group":"IVA",
"t":"T2a","n":"N2","m":"M1a","date":"2012-12-15","event_ids":["e163"]},"biomarkers":[{"name":"EGFR",
"result":"no mutation detected","date":"2012-11-30","event_ids":["e144"]},{"name":"PD-L1 (22C3) tumor proportion score",
"result":"60%","date":"2012-11-30","event_ids":["e144"]}],"treatment_lines":[{"line":1,"regimen":"Carboplatin/paclitaxel",
"intent":"palliative","start_date":"2012-12-23","end_date":"2013-03-22","end_reason":"progression","components":[
{"modality":"infusion","label":"carboplatin/paclitaxel","drugs":["carboplatin","paclitaxel"],"procedure_code":null,
"start_date":"2012-12-23","end_date":"2013-03-22"}],"event_ids":["e203"]},{"line":2,"regimen":"Docetaxel",
"intent":"palliative","start_date":"2013-04-25","end_date":"2013-06-08","end_reason":"death","components":[
{"modality":"infusion","label":"docetaxel","drugs":["docetaxel"],"procedure_code":null,"start_date":"2013-04-25",
"end_date":"2013-06-08"}],"event_ids":["e349"]}],"progressions":[{"date":"2013-04-01","line":1,"event_ids":["e310"]}],
"imaging":[{"date":"2013-04-01","modality":"CT chest with contrast","code":"CPT//71260","purpose":"response assessment",
"impression":"Progressive disease.","event_ids":["e310"]}],"pathology":[{"date":"2012-11-15",
"procedure":"EBUS-guided nodal sampling","code":"CPT//31652","diagnosis":"Non-small cell carcinoma, NOS.",
"event_ids":["e90"]}],"performance_status":[{"date":"2013-04-08","ecog":2,"event_ids":["e314"]}],
"smoking":{"status":"current","pack_years":49.2,"quit_year":null,"event_ids":["e114"]},
"metastatic_sites":["bone metastases","liver metastases"],"hospice_date":null,"hospice_event_ids":[],
"death_date":"2013-06-08","death_event_ids":["e422"],"record_start_date":"2008-01-01","record_end_date":"2013-06-08"}"""
"""A small lung-cancer truth (shortened from a generated one) for the doctests and tests."""
