"""Builders and hypothesis strategies of patient records for the timeline and chunking tests (no tests here)."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import strategies as st

from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord

HOSTILE_PIECES = [
    "<",
    ">",
    "&",
    "&amp;",
    "]]>",
    "<![CDATA[",
    '"',
    "'",
    "\x00",
    "\x1b",
    "\x0b",
    "\r",
    "\r\n",
    "\t",
    "\ud800",  # lone surrogate
    "\ufffe",
    "😀",
    "🧬🩺",
    "<|endoftext|>",
    "</note>",
    "<patient id='9'>",
    "  ",
    "\n\n",
    "é",
    "中文",
]

hostile_text = st.lists(st.one_of(st.sampled_from(HOSTILE_PIECES), st.text(max_size=12)), max_size=12).map("".join)

BASE = datetime(2015, 3, 1)
CODES = [
    "ENCOUNTER//AMB",
    "ENCOUNTER//ED",
    "ICD10CM//C34.11",
    "ICD10CM//R05.9",
    "ICD9CM//162.3",
    "SNOMED//77176002",
    "SNOMED//38341003",
    "LOINC//718-7",
    "LOINC//8867-4",
    "RXNORM//197361",
    "CPT//71250",
    "HCPCS//G0297",
    "NOTE//PROGRESS",
    "NOTE//RADIOLOGY",
    "MEDS_DEATH",
    "ZZZ//unknown",
]
STATIC_CODES = [
    "GENDER//F",
    "GENDER//M",
    "RACE//White",
    "RACE//Black or African American",
    "ETHNICITY//Hispanic or Latino",
    "INSURANCE//medicare",  # a static row that is not a demographic: an element at the top of the root
]


def times(days: int = 40):
    return st.builds(lambda d, h: BASE + timedelta(days=d, hours=h), st.integers(0, days), st.sampled_from([0, 0, 9, 14]))


@st.composite
def timed_rows(draw, days: int = 40, max_note: int = 400):
    code = draw(st.sampled_from(CODES))
    value = draw(st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False, width=32))) if code.startswith("LOINC") else None
    if code.startswith("NOTE"):
        words = st.lists(st.sampled_from(["lung", "nodule", "12 mm", "&", "<", "smoker", "\n", "😀"]), max_size=max_note // 4).map(" ".join)
        text = draw(st.one_of(hostile_text, st.text(max_size=max_note), words))
    else:
        text = draw(st.one_of(st.none(), hostile_text)) if code.startswith("SNOMED") else None
    return draw(times(days)), code, value, text


@st.composite
def records(draw, max_events: int = 30, days: int = 40, max_note: int = 400, min_events: int = 0) -> PatientRecord:
    """A random record in MEDS order: static rows first, then timed rows sorted by time; ids e0, e1, …

    Fewer ``days`` give more events per timestamp; ``max_note`` bounds note length in characters.
    """
    static = [(None, c, None, None) for c in draw(st.lists(st.sampled_from(STATIC_CODES), max_size=4, unique=True))]
    timed = draw(st.lists(timed_rows(days, max_note), min_size=min_events, max_size=max_events))
    if draw(st.booleans()):
        timed.append((datetime(1950, 6, 1), "MEDS_BIRTH", None, None))
    timed.sort(key=lambda row: row[0])
    rows = static + timed
    events = [Event(f"e{k}", t, code, value, text) for k, (t, code, value, text) in enumerate(rows)]
    subject_id, first_row = draw(st.integers(1, 10**9)), draw(st.integers(0, 1000))
    return PatientRecord(subject_id=subject_id, shard="data/train/3.parquet", first_row=first_row, events=events)


@st.composite
def catalogs(draw) -> CodeCatalog:
    """Descriptions (some hostile, some missing) and units for a random subset of the codes."""
    infos = []
    for code in CODES + STATIC_CODES:
        if draw(st.booleans()):
            description = draw(st.one_of(st.none(), hostile_text, st.sampled_from(["Hemoglobin", "Cough", "Progress note"])))
            unit = draw(st.one_of(st.none(), st.sampled_from(["g/dL", "mg/dL", "<µmol/L>", "%"])))
            infos.append(CodeInfo(code, description, unit=unit))
    return CodeCatalog(infos)


prediction_times = st.one_of(st.none(), times())


def simple_record(n_days: int = 5, labs_per_day: int = 2, note: str | None = None) -> PatientRecord:
    """A small deterministic record: one visit a day with labs, optionally a note on the last day."""
    rows: list[tuple[datetime | None, str, float | None, str | None]] = [
        (None, "GENDER//F", None, None),
        (datetime(1950, 3, 1), "MEDS_BIRTH", None, None),
    ]
    for d in range(n_days):
        when = BASE + timedelta(days=d)
        rows.append((when, "ENCOUNTER//AMB", None, None))
        rows += [(when, "LOINC//718-7", 11.0 + i, None) for i in range(labs_per_day)]
    if note is not None:
        rows.append((BASE + timedelta(days=n_days - 1), "NOTE//PROGRESS", None, note))
    events = [Event(f"e{k}", t, c, v, x) for k, (t, c, v, x) in enumerate(rows)]
    return PatientRecord(subject_id=42, shard="data/train/0.parquet", first_row=0, events=events)


SIMPLE_CATALOG = CodeCatalog(
    [
        CodeInfo("LOINC//718-7", "Hemoglobin", unit="g/dL"),
        CodeInfo("ENCOUNTER//AMB", "Outpatient visit"),
        CodeInfo("NOTE//PROGRESS", "Progress note"),
    ]
)
