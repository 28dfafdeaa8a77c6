"""Prediction evidence that does not rest on the record — no source, or dated outside the patient's record — is kept
but flagged in the result and the row, counted, shown as flagged (never as a fact) and summed in the report."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import re
from datetime import datetime

import polars as pl
from rich.console import Console

from test_agents_chain import Script, worker_answer
from test_agents_patients import CATALOG, lung_patient
from benchmarks.report import evidence as report_evidence
from benchmarks.report.predictions import LoadedPredictions
from trajonco.agents.display import print_result
from trajonco.judge.prompts import candidate_text
from trajonco.judge.runs import Candidate
from trajonco.pipeline import PipelineConfig, run_patient
from trajonco.prediction_rows import RowContext, row_from_result, rows_to_table
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.testing.scripted import ScriptedBackend
from vista.shared.llm.task_usage import TaskUsage
from vista.shared.meds.task_key import TaskKey

PREDICTION = datetime(2092, 1, 1)


def born_2065_patient():
    """Visits from 2090 on, born 2065 (a generated patient far in the future, as synthetic data may be)."""
    record = lung_patient(n_visits=6, start=datetime(2090, 3, 1))
    events = [dataclasses.replace(e, time=datetime(2065, 5, 17)) if e.code == "MEDS_BIRTH" else e
              for e in record.events]
    return dataclasses.replace(record, events=events)


def manager(request, n):
    memory = request.messages[1].content
    ids = re.findall(r"\[(e\d+)", memory) or re.findall(r'id="(e\d+)"', memory)
    return {"risk_evolution_summary": "rose", "risk_reasoning": "findings", "risk_score": 7, "final_events": [
        {"timestamp": "2090-05-01", "description": "Hemoglobin falling", "event_ids": ids[:1]},
        {"timestamp": "2020-01-01", "description": "Smoker since youth", "event_ids": ids[:1]},  # before birth
        {"timestamp": "2091-06-01", "description": "Weight loss", "event_ids": []},  # no source, after the record
    ]}


def assess(prediction_time: datetime):
    async def go():
        backend = ScriptedBackend(Script(worker=worker_answer, manager=manager), context_window=128_000)
        async with open_gateway(LLMConfig(max_reasks=0, max_retries=0), backend=backend) as gateway:
            return await run_patient(born_2065_patient(), CATALOG, gateway, PipelineConfig(chunk_tokens=4000),
                                     prediction_time=prediction_time)
    return asyncio.run(go())


def test_evidence_without_sources_or_outside_the_record_is_flagged_and_counted():
    """The defect: kept with ``sources: []`` and dated 2020-01-01 for a patient born in 2065, unmarked."""
    result = assess(PREDICTION)
    by_text = {e.description: e for e in result.events}
    assert by_text["Hemoglobin falling"].flags == () and by_text["Hemoglobin falling"].sources
    assert by_text["Smoker since youth"].flags == ("before_record",)
    weight = by_text["Weight loss"]
    assert weight.sources == () and weight.flags == ("unsourced", "after_record")  # shown, flagged, not dropped
    assert (result.evidence_unsourced, result.evidence_out_of_record) == (1, 2)

    row = row_from_result(TaskKey(result.subject_id, PREDICTION), True, result, TaskUsage(),
                          RowContext(cancer="lung", variant="one_stage", model="m", run_id="r"), wall_s=1.0)
    assert (row.evidence_unsourced, row.evidence_out_of_record) == (1, 2)
    assert [e["flags"] for e in json.loads(row.events)] == [["before_record"], [], ["unsourced", "after_record"]]
    table = rows_to_table([row])
    assert table.column("evidence_unsourced").to_pylist() == [1]
    assert table.column("evidence_out_of_record").to_pylist() == [2]

    console = Console(file=io.StringIO(), width=200)
    print_result(result, console=console)
    text = console.file.getvalue()
    assert "Weight loss [FLAGGED: cites no record element; dated after the record ends]" in text
    assert "flagged: 1 unsourced, 2 dated outside the record" in text

    candidate = Candidate(subject_id=1, prediction_time=PREDICTION, cancer="lung", label=True, status="ok",
                          risk_score=7, summary="s", reasoning="r", events=json.loads(row.events), trajectory=[])
    assert "- 2020-01-01: Smoker since youth [FLAGGED: dated before the record starts]" in candidate_text(candidate)

    frame = pl.from_arrow(table)
    loaded = LoadedPredictions(source=None, name="one_stage · m", llm_model="m", variant="one_stage", frame=frame)
    flagged = report_evidence.evidence_table([loaded])
    assert flagged.rows == [["one_stage · m", "1", "3", "1", "2"]]


def test_a_file_without_the_counts_says_so_in_the_report():
    old = pl.DataFrame({"events": ["[]"], "subject_id": [1]})
    loaded = LoadedPredictions(source=None, name="old run", llm_model=None, variant=None, frame=old)
    assert report_evidence.evidence_row(loaded) == ["old run", "1", "0", "not recorded", "not recorded"]
    baseline = LoadedPredictions(source=None, name="knn", llm_model=None, variant=None,
                                 frame=pl.DataFrame({"subject_id": [1]}))
    assert report_evidence.evidence_table([baseline]) is None
