"""The incident-cancer phenotype: edge cases of the pair/washout rules, code matching, and a brute-force oracle."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import polars as pl
from hypothesis import event, given, settings
from hypothesis import strategies as st

from trajonco.cohorts import CancerCodes, CohortDefinition, load_definition
from trajonco.cohorts.phenotype import classify_subjects, target_code_rows

DAY0 = date(2010, 1, 1)
LUNG = load_definition("lung")
TWO = CohortDefinition(
    name="two",
    cancers=(
        CancerCodes(name="lung", icd10cm_prefixes=("C34",), icd9cm_prefixes=("162.3",)),
        CancerCodes(name="breast", icd10cm_prefixes=("C50",), icd9cm_prefixes=("174",)),
    ),
)
CODE_OF = {"lung": "ICD10CM//C34.90", "breast": "ICD10CM//C50.911"}


def t(offset: int, hour: int = 9) -> datetime:
    return datetime.combine(DAY0 + timedelta(days=offset), datetime.min.time()).replace(hour=hour)


def classify(codes: dict[int, list[tuple[int, str]]], first_visit: dict[int, int | None], definition=LUNG) -> dict:
    """codes: subject → [(day, code)]; first_visit: subject → day. Returns subject → (status, cancer, index day)."""
    rows = [(s, t(d), c) for s, items in codes.items() for d, c in items]
    events = pl.LazyFrame(
        rows, schema={"subject_id": pl.Int64, "time": pl.Datetime("us"), "code": pl.String}, orient="row"
    )
    code_rows = target_code_rows(events, definition).collect()
    visits = pl.DataFrame(
        {
            "subject_id": list(first_visit),
            "first_visit_time": [None if d is None else t(d, 8) for d in first_visit.values()],
        },
        schema={"subject_id": pl.Int64, "first_visit_time": pl.Datetime("us")},
    )
    out = classify_subjects(code_rows, visits, definition)
    return {
        r["subject_id"]: (
            r["status"],
            r["cancer"],
            None if r["index_time"] is None else (r["index_time"].date() - DAY0).days,
        )
        for r in out.iter_rows(named=True)
    }


def one(codes: list[tuple[int, str]], first_visit: int | None = 0, definition=LUNG):
    return classify({1: codes}, {1: first_visit}, definition).get(1)


L = "ICD10CM//C34.11"


def test_pair_at_exactly_60_days_is_a_case_61_is_not():
    assert one([(400, L), (460, L)]) == ("case", "lung", 400)
    assert one([(400, L), (461, L)]) == ("no_qualifying_pair", None, None)


def test_washout_179_days_is_prevalent_180_is_a_case():
    assert one([(179, L), (200, L)]) == ("prevalent", None, None)
    assert one([(180, L), (200, L)]) == ("case", "lung", 180)


def test_washout_counts_from_the_first_visit_and_codes_before_it_are_prevalent():
    assert one([(400, L), (410, L)], first_visit=221) == ("prevalent", None, None)
    assert one([(400, L), (410, L)], first_visit=220) == ("case", "lung", 400)
    assert one([(10, L), (20, L)], first_visit=300) == ("prevalent", None, None)
    assert one([(400, L), (410, L)], first_visit=None) == ("prevalent", None, None)


def test_a_prevalent_subject_stays_excluded_even_with_a_later_pair():
    assert one([(50, L), (900, L), (910, L)]) == ("prevalent", None, None)


def test_single_rule_out_code_and_same_day_duplicates_are_not_cases():
    assert one([(400, L)]) == ("no_qualifying_pair", None, None)
    assert one([(400, L), (400, "ICD10CM//C34.90")]) == ("no_qualifying_pair", None, None)


def test_only_the_first_pair_counts_and_it_needs_a_clean_washout():
    # rule-out at 300, first pair at 400/410: only 100 cancer-free days before it → prevalent
    assert one([(300, L), (400, L), (410, L)]) == ("prevalent", None, None)
    # rule-out at 300, first pair at 480/490: 180 free days → index at the first code of that pair
    assert one([(300, L), (480, L), (490, L)]) == ("case", "lung", 480)
    # three codes in a row: the first pair is the first two
    assert one([(400, L), (430, L), (470, L)]) == ("case", "lung", 400)
    # codes 100 days apart, then a pair too close to the previous code
    assert one([(400, L), (500, L), (520, L)]) == ("prevalent", None, None)
    # a failed first pair is not retried later: follow-up codes after a long gap are not a new cancer
    assert one([(300, L), (400, L), (430, L), (900, L), (910, L)]) == ("prevalent", None, None)
    # an early single code with no pair at all is just a code without a pair
    assert one([(50, L)]) == ("no_qualifying_pair", None, None)


def test_icd9_codes_mixed_vocabularies_and_undotted_codes():
    assert one([(400, "ICD9CM//162.3"), (420, "ICD9CM//162.9")]) == ("case", "lung", 400)
    assert one([(400, "ICD9CM//162.3"), (420, "ICD10CM//C34.2")]) == ("case", "lung", 400)
    assert one([(400, "ICD10CM//C3411"), (420, "ICD9CM//1623")]) == ("case", "lung", 400)
    # 162.0 is the trachea, C44 skin, Z85.118 a history code, LOINC a lab: none is lung cancer
    for other in ("ICD9CM//162.0", "ICD10CM//C44.9", "ICD10CM//Z85.118", "LOINC//C34"):
        assert one([(400, other), (420, other)]) is None


def test_index_time_is_the_time_of_the_first_code():
    rows = [(1, t(400, 14), L), (1, t(400, 9), L), (1, t(430, 10), L)]
    events = pl.LazyFrame(
        rows, schema={"subject_id": pl.Int64, "time": pl.Datetime("us"), "code": pl.String}, orient="row"
    )
    visits = pl.DataFrame({"subject_id": [1], "first_visit_time": [t(0)]})
    out = classify_subjects(target_code_rows(events, LUNG).collect(), visits, LUNG)
    assert out["index_time"].to_list() == [t(400, 9)]


def test_any_cancer_takes_the_first_pair_and_records_the_cancer():
    b, lung = CODE_OF["breast"], CODE_OF["lung"]
    assert one([(300, b), (320, b), (600, lung), (610, lung)], definition=TWO) == ("case", "breast", 300)
    assert one([(700, b), (720, b), (300, lung), (310, lung)], definition=TWO) == ("case", "lung", 300)
    # two codes of different cancers are not a pair
    assert one([(300, b), (320, lung)], definition=TWO) == ("no_qualifying_pair", None, None)
    # the washout must be free of every target cancer: a breast code 100 days before the lung pair blocks it
    assert one([(300, b), (400, lung), (410, lung)], definition=TWO) == ("prevalent", None, None)
    # the earliest first pair of any cancer decides; a prevalent breast cancer is not followed by an incident lung one
    assert one([(300, b), (310, b), (400, b), (900, lung), (910, lung)], definition=TWO) == ("case", "breast", 300)
    assert one([(300, b), (380, b), (390, b), (900, lung), (910, lung)], definition=TWO) == ("prevalent", None, None)
    # and the prevalence rule looks at the earliest code of any target cancer
    assert one([(30, b), (400, lung), (410, lung)], definition=TWO) == ("prevalent", None, None)
    # same-day pairs of two cancers: the one listed first in the definition wins
    assert one([(300, b), (320, b), (300, lung), (320, lung)], definition=TWO) == ("case", "lung", 300)


def test_built_in_any_cancer_recognises_every_cancer():
    anyc = load_definition("any_cancer")
    for cancer in anyc.cancers:
        code = (
            f"ICD10CM//{cancer.icd10cm_prefixes[0]}.9"
            if "." not in cancer.icd10cm_prefixes[0]
            else f"ICD10CM//{cancer.icd10cm_prefixes[0]}0"
        )
        assert one([(400, code), (420, code)], definition=anyc) == ("case", cancer.name, 400), code


def oracle(codes: list[tuple[int, str]], first_visit: int | None, d: CohortDefinition):
    """The phenotype written as plain loops over one patient, straight from the rules."""
    if not codes:
        return None
    any_days = sorted({day for day, _ in codes})
    first_pair = None  # (day, rank, cancer)
    for rank, cancer in enumerate(c.name for c in d.cancers):
        days = sorted({day for day, c in codes if c == cancer})
        for i, first in enumerate(days):
            if i + d.min_codes - 1 < len(days) and days[i + d.min_codes - 1] - first <= d.max_days_between_codes:
                if first_pair is None or (first, rank) < first_pair[:2]:
                    first_pair = (first, rank, cancer)
                break
    if first_pair is None:
        return ("no_qualifying_pair", None, None)
    first = first_pair[0]
    earlier = [x for x in any_days if x < first]
    clean = (
        first_visit is not None
        and any_days[0] - first_visit >= d.washout_days
        and first - first_visit >= d.washout_days
        and (not earlier or first - earlier[-1] >= d.washout_days)
    )
    return ("case", first_pair[2], first) if clean else ("prevalent", None, None)


# a code history: a first code, then gaps chosen around the rule boundaries, so that pairs, near misses and
# washout clashes are all common
GAPS = [0, 1, 30, 59, 60, 61, 100, 179, 180, 181, 250, 400]


@st.composite
def history(draw) -> list[tuple[int, str]]:
    day = draw(st.integers(100, 900))
    codes = [(day, draw(st.sampled_from(["lung", "breast"])))]
    for gap in draw(st.lists(st.sampled_from(GAPS), max_size=6)):
        day += gap
        codes.append((day, draw(st.sampled_from(["lung", "lung", "breast"]))))
    return codes


patients = st.dictionaries(
    st.integers(1, 40),
    st.tuples(history(), st.integers(-1, 200).map(lambda d: None if d < 0 else d)),
    min_size=1,
    max_size=20,
)


@settings(max_examples=120, deadline=None)
@given(
    patients, st.sampled_from([1, 2, 2, 3]), st.sampled_from([0, 30, 60, 90]), st.sampled_from([0, 100, 180, 250])
)  # min_codes, max days, washout
def test_phenotype_matches_a_brute_force_oracle(population, min_codes, max_days, washout):
    d = TWO.with_overrides(min_codes=min_codes, max_days_between_codes=max_days, washout_days=washout)
    codes = {s: [(day, CODE_OF[c]) for day, c in items] for s, (items, _) in population.items()}
    got = classify(codes, {s: fv for s, (_, fv) in population.items()}, d)
    expected = {s: oracle(items, fv, d) for s, (items, fv) in population.items()}
    for status in ("case", "prevalent", "no_qualifying_pair"):
        event(f"has {status}: {any(v[0] == status for v in expected.values())}")
    assert got == expected
