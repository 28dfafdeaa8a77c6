"""The query bridge: plans over a stored patient equal the MEDS rows (polars on the parquet, not the graph), names and
episodes resolve or fail in one line, the model's plan is re-asked once for an unknown name, an LLM sentence is kept
only when its numbers and dates are the result's, and `vista query` answers and refuses as documented."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import polars as pl
import pytest

from graph_fixtures import synth_root
from vista.graph import GraphStore
from vista.query.bridge import BridgeConfig, PlanDraft, answer_plan, answer_question
from vista.query.entry import PatientEntry, open_entry
from vista.query.errors import PlanError, UnknownNameError
from vista.query.execute import run_plan
from vista.query.plan import Plan, parse_plan
from vista.shared.llm import LLMConfig, LLMGateway, open_gateway
from vista.shared.meds.reader import MedsDataset
from vista.shared.testing.scripted import ScriptedBackend
from vista.toa import ExtractionStats, PatientTimeline, TimelineEvent, load_profile, synthesize_episodes
from vista.toa.refs import graph_version, ref_fingerprints

HGB = "LOINC//718-7"


@cache
def store_root() -> Path:
    """A graph store of the 40-subject synthetic dataset (built once per process, beside the dataset)."""
    root = synth_root().parent / "bridge-store"
    if not root.exists():
        GraphStore(root).build_dataset(MedsDataset(synth_root()))
    return root


@cache
def meds_rows() -> pl.DataFrame:
    """Every MEDS row, numbered within its subject as the graph numbers source events (``e<k>``)."""
    files = sorted((synth_root() / "data").rglob("*.parquet"))
    return pl.concat([pl.read_parquet(f) for f in files]).with_columns(
        pl.int_range(pl.len()).over("subject_id").alias("k"))


def patient_with_most(code: str) -> int:
    rows = meds_rows().filter(pl.col("code") == code)
    return rows.group_by("subject_id").len().sort(["len", "subject_id"], descending=[True, False])["subject_id"][0]


def test_min_hemoglobin_equals_the_meds_rows_by_code_and_by_name():
    sid = patient_with_most(HGB)
    rows = meds_rows().filter((pl.col("subject_id") == sid) & (pl.col("code") == HGB)).sort(["numeric_value", "k"])
    truth = rows.row(0, named=True)
    entry = open_entry(store_root(), sid)
    for name in (HGB, "hemoglobin", "Hgb"):
        result = run_plan(entry, Plan(measure=name, aggregate="min"))
        assert result.value == pytest.approx(float(truth["numeric_value"]), abs=1e-4)
        assert result.date == truth["time"].date() and result.cited == (f"e{truth['k']}",) and result.unit == "g/dL"
        assert result.n == rows.height
    assert entry.graph.event(result.cited[0]).provenance.row is not None


def test_window_count_first_and_where_equal_the_meds_rows():
    sid = patient_with_most(HGB)
    patient = meds_rows().filter(pl.col("subject_id") == sid)
    hgb = patient.filter(pl.col("code") == HGB).sort("k")
    start, end = hgb["time"][2].date(), hgb["time"][-3].date()
    inside = hgb.filter((pl.col("time").dt.date() >= start) & (pl.col("time").dt.date() <= end))
    entry = open_entry(store_root(), sid)
    window = {"start": start, "end": end}
    counted = run_plan(entry, Plan(measure=HGB, window=window, aggregate="count"))
    assert counted.value == inside.height and counted.cited == tuple(f"e{k}" for k in inside["k"])
    threshold = float(inside["numeric_value"].median())
    below = inside.filter(pl.col("numeric_value") < threshold)
    assert run_plan(entry, Plan(measure=HGB, window=window, where={"op": "<", "value": threshold},
                                aggregate="count")).value == below.height
    last = run_plan(entry, Plan(measure=HGB, window=window, aggregate="last"))
    assert last.cited == (f"e{inside['k'][-1]}",)
    change = run_plan(entry, Plan(measure=HGB, window=window, aggregate="change"))
    assert change.value == pytest.approx(float(inside["numeric_value"][-1]) - float(inside["numeric_value"][0]), abs=1e-4)
    in_g_per_l = run_plan(entry, Plan(measure=HGB, window=window, aggregate="max", unit="g/L"))
    assert in_g_per_l.value == pytest.approx(10 * float(inside["numeric_value"].max()), abs=1e-3) and in_g_per_l.unit == "g/L"
    with pytest.raises(PlanError, match="no known conversion"):
        run_plan(entry, Plan(measure=HGB, unit="mmol/L"))


def test_events_first_date_of_a_code_set_and_notes_pattern():
    rows = meds_rows().filter(pl.col("code").str.starts_with("RXNORM//"))
    sid = rows["subject_id"][0]
    code = rows["code"][0]
    patient = meds_rows().filter(pl.col("subject_id") == sid)
    entry = open_entry(store_root(), sid)
    first = run_plan(entry, Plan(events=[code], aggregate="first"))
    truth = patient.filter(pl.col("code") == code).sort("time", maintain_order=True).row(0, named=True)
    assert first.date == truth["time"].date() and first.cited == (f"e{truth['k']}",)
    notes = patient.filter(pl.col("code").str.starts_with("NOTE//") & pl.col("text_value").str.contains("(?i)impression"))
    found = run_plan(entry, Plan(notes="impression", aggregate="count"))
    assert found.value == notes.height and set(found.cited) == {f"e{k}" for k in notes["k"]}


def test_unknown_names_episodes_and_malformed_plans_are_one_line_errors():
    entry = open_entry(store_root(), patient_with_most(HGB))
    with pytest.raises(UnknownNameError, match="nearest: hemoglobin"):
        run_plan(entry, Plan(measure="hemoglobn"))
    with pytest.raises(PlanError, match="no timeline is stored"):
        run_plan(entry, Plan(measure="hgb", episode={"kind": "treatment_line", "line": 1}))
    for text, field in (('{"measure": "hgb", "aggregate": "avg"}', "aggregate"), ('{"measure": 5}', "measure"),
                        ('{"aggregate": "min"}', "exactly one target"), ("[1]", "JSON object"), ("{", "not valid JSON")):
        with pytest.raises(PlanError, match=field):
            parse_plan(text)


def _timeline_for(entry: PatientEntry) -> PatientTimeline:
    """A timeline of two treatment lines over the patient's first and last hemoglobin rows."""
    hgb = entry.rows_of(HGB)
    first, last = hgb.ids[0], hgb.ids[-1]
    d0, d1 = hgb.times[0].astype("datetime64[D]").item(), hgb.times[-1].astype("datetime64[D]").item()
    events = (TimelineEvent(event_id="t0", date=d0 - dt.timedelta(days=20), type="diagnosis", subtype="initial",
                            description="Lung cancer", source_event_refs=(first,)),
              TimelineEvent(event_id="t1", date=d0, type="systemic_therapy", subtype="chemotherapy",
                            description="Carboplatin C1", source_event_refs=(first,)),
              TimelineEvent(event_id="t2", date=d1, type="systemic_therapy", subtype="chemotherapy",
                            description="Docetaxel", source_event_refs=(last,)))
    stats = ExtractionStats(chunks=1, failed_chunks=0, proposed_events=3, kept_events=3, rejected_events=0,
                            dropped_refs=0, merged_groups=0)
    return PatientTimeline(subject_id=entry.subject_id, profile="thoracic", content_hash="h" * 64, events=events,
                           episodes=tuple(synthesize_episodes(events, load_profile())), rejected=(), stats=stats,
                           graph_hash=graph_version(entry.graph), ref_fingerprints=ref_fingerprints(entry.graph, (first, last)))


def test_episodes_by_line_and_drug_from_the_stored_timeline(tmp_path):
    base = open_entry(store_root(), patient_with_most(HGB))
    entry = PatientEntry(base.graph, _timeline_for(base))
    line1 = next(e for e in entry.timeline.episodes if e.line == 1)
    start = run_plan(entry, Plan(episodes={"kind": "treatment_line", "line": 2}, aggregate="first"))
    assert start.date == entry.timeline.episodes[-1].start and start.cited[0] == "t2"
    by_drug = run_plan(entry, Plan(measure="hgb", episode={"drug": "carboplatin"}, aggregate="first"))
    assert by_drug.window_start == line1.start and by_drug.window_end == line1.end and by_drug.cited == (base.rows_of(HGB).ids[0],)
    with pytest.raises(PlanError, match="no episode matches"):
        run_plan(entry, Plan(measure="hgb", episode={"kind": "treatment_line", "line": 7}))


def _gateway(replies: list[object]) -> LLMGateway:
    return open_gateway(LLMConfig(model="gpt-4.1-mini", max_retries=0, max_reasks=0), backend=ScriptedBackend(replies))


def _draft(**fields) -> str:
    base = {"expressible": True, "target": "measure", "name": "hemoglobin", "aggregate": "min", "start": None,
            "end": None, "line": None, "during": None}
    return PlanDraft.model_validate(base | fields).model_dump_json()


def test_bridge_reasks_an_unknown_name_once_offering_the_nearest():
    entry = open_entry(store_root(), patient_with_most(HGB))
    truth = run_plan(entry, Plan(measure=HGB, aggregate="min"))

    async def go():
        async with _gateway([_draft(name="hemoglobn"), _draft(name="hemoglobin")]) as gateway:
            answer = await answer_question(entry, entry.subject_id, "Lowest haemoglobin?", gateway)
            return answer, gateway.backend.requests  # type: ignore[attr-defined]

    answer, requests = asyncio.run(go())
    assert answer.route == "plan" and answer.reasked and answer.value == truth.value and answer.cited == truth.cited
    assert "nearest names it has are: hemoglobin" in requests[1].messages[-1].content
    assert answer.usage.calls == 2


def test_llm_sentence_kept_only_when_its_numbers_are_the_results():
    entry = open_entry(store_root(), patient_with_most(HGB))
    truth = run_plan(entry, Plan(measure=HGB, aggregate="min"))
    good = json.dumps({"sentence": f"Her lowest hemoglobin was {truth.value:g} g/dL on {truth.date}."})
    bad = json.dumps({"sentence": f"Her lowest hemoglobin was {truth.value + 1:g} g/dL on {truth.date}."})
    for sentence, kept in ((good, "llm"), (bad, "template")):
        async def go():
            async with _gateway([_draft(), sentence]) as gateway:
                return await answer_question(entry, entry.subject_id, "Lowest hemoglobin?", gateway,
                                             BridgeConfig(sentence="llm"))
        answer = asyncio.run(go())
        assert answer.sentence_by == kept and answer.value == truth.value


def test_inexpressible_question_without_timeline_is_a_failed_timeline_route():
    entry = open_entry(store_root(), patient_with_most(HGB))

    async def go():
        async with _gateway([_draft(expressible=False)]) as gateway:
            return await answer_question(entry, entry.subject_id, "Is she a good candidate for surgery?", gateway)

    answer = asyncio.run(go())
    assert answer.route == "timeline" and answer.status == "failed" and "no timeline is stored" in answer.error


def _vista(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vista.cli", *args], capture_output=True, text=True, timeout=120)


def test_cli_plan_json_and_bad_input_exit_2():
    sid = patient_with_most(HGB)
    store = str(store_root())
    done = _vista("query", "--store", store, "--subject", str(sid), "--plan", json.dumps({"measure": HGB, "aggregate": "min"}), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) >= {"question", "plan", "route", "value", "unit", "date", "answer", "cited"} and data["route"] == "plan"
    truth = answer_plan(open_entry(store, sid), Plan(measure="hemoglobin", aggregate="min"))
    assert data["value"] == truth.value and data["cited"] == list(truth.cited) and data["date"] == str(truth.date)
    shown = _vista("source", "--store", store, "--subject", str(sid), *data["cited"])
    assert shown.returncode == 0 and HGB in shown.stdout
    bad = [("--plan", '{"measure": "hemoglobn", "aggregate": "min"}'), ("--plan", "{oops"),
           ("--plan", '{"measure": "hgb", "episode": {"line": 1}}'), ("x" * 100_000,)]
    for args in bad:
        done = _vista("query", "--store", store, "--subject", str(sid), *args)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, (args[:1], done.stderr[-300:])
    done = _vista("query", "--store", store, "--subject", "987654", "--plan", '{"measure": "hgb"}')
    assert done.returncode == 2 and "no graph for subject 987654" in done.stderr
    schema = json.loads(_vista("query", "--plan-schema").stdout)
    assert "measure" in schema["properties"] and schema["additionalProperties"] is False


@pytest.mark.llm
@pytest.mark.slow
def test_the_embedded_model_fills_the_plan_schema_under_its_grammar():
    """The bounded PlanDraft decodes under SmolLM2's grammar: the bridge gets a plan (or a judged fallback), never
    an unreadable answer."""
    entry = open_entry(store_root(), patient_with_most(HGB))

    async def go():
        async with open_gateway(LLMConfig()) as gateway:
            return await answer_question(entry, entry.subject_id, "What was the lowest hemoglobin?", gateway)

    answer = asyncio.run(go())
    assert answer.usage.calls >= 1 and "could not be read" not in (answer.error or "")
    if answer.route == "plan":
        assert all(entry.graph.has_event(i) for i in answer.cited)
