"""The project on data written in other projects' spellings: OMOP (meds_etl), Synthea-derived and MIMIC-IV MEDS.

For each fixture of `tests/spellings.py`: the right coding profile is detected and places every category; timelines
have the right modalities and units and no ``<other>``; graphs have real encounters (from visit rows and visit ids)
and the notes; displays find the sex; the predict-one leak check sees the cancer codes in the dataset's own spelling.
(Cohorts on these fixtures: tests/test_spelling_fixtures.py and tests/test_cohort_vocabularies.py.)
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from spellings import EXPECTED, WRITERS
from trajonco.outcome_guard import prior_target_codes
from trajonco.prediction_files import read_predictions
from vista.shared.coding import profile_report
from vista.display.structured import demographics_value
from vista.graph import build_graph
from vista.shared.meds.reader import MedsDataset
from vista.shared.timeline import render_timeline
from vista.shared.timeline.modality import Modality

NAMES = sorted(WRITERS)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    return {name: WRITERS[name](root / name) for name in NAMES}


@pytest.fixture(scope="module")
def records(datasets):
    return {name: MedsDataset(root).load_patients(EXPECTED[name].subjects) for name, root in datasets.items()}


@pytest.mark.parametrize("name", NAMES)
def test_profile_is_detected_and_places_every_category(datasets, name):
    facts = EXPECTED[name]
    report = profile_report(datasets[name])
    assert report.profile == facts.profile and report.chosen_by == "detected"
    assert report.recognised_share == 1.0, report.unplaced
    rows = {share.category: share.rows for share in report.categories}
    for category, expected in facts.rows_by_category.items():
        assert rows[category] == expected, (category, rows)
    assert report.subjects_with_sex == 1.0 and report.subjects_with_birth == 1.0
    assert not [w for w in report.warnings if "notes" not in w]  # Synthea writes no notes: that one warning is right


@pytest.mark.parametrize("name", NAMES)
def test_timelines_have_modalities_units_and_no_other(datasets, records, name):
    facts = EXPECTED[name]
    catalog = MedsDataset(datasets[name]).code_catalog()
    units_seen: dict[str, str] = {}
    modalities: Counter[Modality] = Counter()
    for subject, record in records[name].items():
        timeline = render_timeline(record, catalog)
        xml = timeline.to_xml()
        assert "<other" not in xml, (subject, [line for line in xml.splitlines() if "<other" in line][:3])
        assert f'sex="{facts.sex[subject]}"' in xml
        for block in timeline.blocks:
            for element in block.elements:
                modalities[element.modality] += 1
                attrs = dict(element.attributes)
                if "unit" in attrs:
                    units_seen[attrs["code"]] = attrs["unit"]
    for source_code, unit in facts.lab_units.items():
        canonical = MedsDataset(datasets[name]).profile.canonical(source_code).code
        assert units_seen.get(canonical) == unit, (source_code, canonical, units_seen.get(canonical))
    for modality in (Modality.VISIT, Modality.CONDITION, Modality.LAB, Modality.MEDICATION, Modality.PROCEDURE):
        assert modalities[modality] > 0, modality
    assert (modalities[Modality.NOTE] > 0) == bool(facts.notes_by_kind)


@pytest.mark.parametrize("name", NAMES)
def test_graphs_have_real_encounters_notes_and_sex(datasets, records, name):
    facts = EXPECTED[name]
    catalog = MedsDataset(datasets[name]).code_catalog()
    notes: Counter[str] = Counter()
    for subject, record in records[name].items():
        graph = build_graph(record, catalog)
        encounters = graph.encounters()
        real = [e for e in encounters if e.encounter_type != "DAY"]
        assert real, subject
        for encounter in encounters:
            events = graph.events_of(encounter)
            if encounter.encounter_type == "DAY":  # per-day stand-ins only for rows outside any visit (OMR, death)
                assert all(e.visit_id is None for e in events), (subject, encounter.node_id)
            else:
                assert encounter.event_id is not None or encounter.visit_id is not None
        with_visit = [e for e in record.events if e.visit_id is not None and e.time is not None]
        day_ids = {e.event_id for enc in encounters if enc.encounter_type == "DAY" for e in graph.events_of(enc)}
        assert not day_ids & {e.event_id for e in with_visit}
        notes.update(n.code.removeprefix("NOTE//") for n in graph.notes())
        assert graph.info.demographics.sex == facts.sex[subject]
        display = demographics_value(graph).value
        assert "sex not documented" not in display and ("female" if facts.sex[subject] == "F" else "male") in display
    assert dict(notes) == dict(facts.notes_by_kind)


@pytest.mark.parametrize("name", NAMES)
def test_leak_check_sees_cancer_codes_in_the_datasets_own_spelling(datasets, records, name):
    facts = EXPECTED[name]
    catalog = MedsDataset(datasets[name]).code_catalog()  # SNOMED parents: descendants count
    for cancer, cases in facts.cases.items():
        for subject in cases:
            index = facts.index_dates[subject]
            record = records[name][subject]
            after = prior_target_codes(record, cancer, None, catalog)
            assert after, (name, cancer, subject)
            from datetime import datetime
            before_index = datetime.combine(index, datetime.min.time())
            assert prior_target_codes(record, cancer, before_index - timedelta(days=1), catalog) == []


def test_safety_net_sees_imaging_stated_by_the_source_table(tmp_path):
    """Synthea-style rows: a SNOMED imaging study from the imaging_studies table, and a CT by its SNOMED concept."""
    from datetime import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    from vista.toa import imaging_candidates

    (tmp_path / "data").mkdir()
    rows = [(None, "Gender/F", "patients"), (datetime(2020, 1, 1, 9), "ENCOUNTER/ambulatory", "encounters"),
            (datetime(2020, 1, 1, 10), "SNOMED/12345678", "imaging_studies"),
            (datetime(2020, 2, 1, 10), "SNOMED/418891003", "procedures"),
            (datetime(2020, 3, 1, 10), "SNOMED/73761001", "procedures")]
    n = len(rows)
    pq.write_table(pa.table({"subject_id": pa.array([1] * n, pa.int64()),
                             "time": pa.array([r[0] for r in rows], pa.timestamp("us")), "code": [r[1] for r in rows],
                             "numeric_value": pa.array([None] * n, pa.float32()), "table": [r[2] for r in rows],
                             "visit_id": pa.array([None, 5, 5, None, None], pa.int64())}),
                   tmp_path / "data" / "0.parquet")
    dataset = MedsDataset(tmp_path, profile="synthea")
    graph = build_graph(dataset.load_patients([1])[1], dataset.code_catalog())
    found = imaging_candidates(graph)
    assert [d.isoformat() for d in found] == ["2020-01-01", "2020-02-01"]  # the colonoscopy (73761001) is not imaging


@pytest.mark.ray
@pytest.mark.parametrize("name", ["omop", "mimic"])
def test_cohort_and_ray_predict_job_on_another_spelling(datasets, ray_session, tmp_path, name):
    """The whole TrajOnco path on a dataset we did not write: cohort → jobs.predict on Ray → one ok row per patient,
    the profile detected once on the driver and recorded in the manifest."""
    import json

    import polars as pl

    from jobs import predict
    from vista.shared.testing.synthetic_server import SyntheticLLMServer
    from trajonco.cohorts import build_cohort, load_definition

    lung = load_definition("lung").with_overrides(test_splits=("train", "tuning", "held_out"), train_splits=())
    result = build_cohort(datasets[name], lung, tmp_path / "lung")
    labels = tmp_path / "lung" / "labels" / "test.parquet"
    cases = set(pl.read_parquet(labels).filter(pl.col("boolean_value"))["subject_id"].to_list())
    assert cases == set(EXPECTED[name].cases["lung"]), result
    out = tmp_path / "predict"
    with SyntheticLLMServer() as server:
        argv = ["--labels", str(labels), "--dataset", str(datasets[name]), "--out", str(out), "--backend", "openai",
                "--base-url", server.base_url, "--model", "synthetic", "--context-tokens", "32768", "--actors", "1",
                "--chunk-tokens", "1200"]
        summary = predict.run(predict.build_parser().parse_args(argv))
    budget = summary.llm_budget  # the job-wide budget's figures reach the summary
    assert budget is not None and budget.requests == server.stats.requests and 1 <= budget.in_flight_peak <= 16
    rows = pl.from_arrow(read_predictions(out))
    assert rows.height == pl.read_parquet(labels).height
    assert rows["status"].to_list() == ["ok"] * rows.height, rows.select("subject_id", "status", "error").rows()
    manifest = json.loads((out / "job.json").read_text())
    assert EXPECTED[name].profile in json.dumps(manifest)
