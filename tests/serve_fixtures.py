"""A small store for the `vista serve` tests, built with the real code paths and a scripted model:

- subject 21: the TOA fixture patient (`toa_fixtures.ROWS`) plus hemoglobin and weight series, its stored timeline
  (`display_fixtures.EVENTS`) and a display built by `DisplayStore.build` through a scripted model;
- subject 22: read from a patient XML whose note holds ``<script>`` and ``<img onerror>``, with a display whose
  summary note (model output) holds a script tag too;
- subject 23: graph only (no timeline, no display);
- subject 24: a failed build (a job row, no graph), as `vista build` leaves one.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from display_fixtures import EVENTS, gateway_for, schema_of
from toa_fixtures import CATALOG, ROWS
from vista.display import DisplayStore, TumorBoardDisplay, VariableValue
from vista.display.store import stamped
from vista.graph import GraphStore
from vista.pipeline.rows import VISTA_SCHEMA, VistaRow
from vista.shared.llm.backend import ChatRequest
from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord
from vista.shared.testing.scripted import ScriptedBackend
from vista.toa import ExtractionStats, PatientTimeline, TimelineEvent, TimelineStore, load_profile, synthesize_episodes
from vista.toa.refs import graph_version, ref_fingerprints

XSS_NOTE = "Assessment: <script>alert(1)</script> stable.\nPlan: <img src=x onerror=alert(2)> review in 3 months."
XSS_SUMMARY = "Summary <script>alert('model')</script> written by the model."
VALUES = {  # variable -> (value, timeline refs)
    "primary_site": ("Right upper lobe, lung", ("t3",)), "diagnosis_date": ("2020-03-10", ("t3",)),
    "histology": ("Adenocarcinoma", ("t2",)), "stage": ("Stage IVB (cT2a N2 M1c)", ("t7",)),
    "biomarkers": ("EGFR negative; PD-L1 80%; ALK negative; ROS1 negative; KRAS G12C", ("t4",)),
    "metastatic_sites": ("Liver", ("t7",)), "treatment_history": ("Line 1: pembrolizumab from 2020-04-01", ("t5",)),
    "current_therapy": ("None (hospice)", ("t8",)), "smoking_history": ("Former smoker", ("t0",)),
    "performance_status": ("ECOG 3", ("t8",)), "latest_imaging": ("CT 2020-07-01: progression", ("t6",)),
    "progression": ("Radiographic progression 2020-07-01", ("t7",)),
}


def _rows_21() -> list[Event]:
    events = [Event(f"e{k}", *row) for k, row in enumerate(ROWS)]
    start = datetime(2020, 1, 20, 8)
    for j in range(12):  # e20..: monthly hemoglobin and weight
        day = start + timedelta(days=21 * j)
        events.append(Event(f"e{len(events)}", day, "LOINC//718-7", round(13.4 - 0.25 * j + (j % 3) * 0.2, 1), None))
        events.append(Event(f"e{len(events)}", day, "LOINC//29463-7", round(82 - 0.8 * j, 1), None))
    return events


def catalog() -> CodeCatalog:
    infos = [CATALOG.describe(code) for code in {row[1] for row in ROWS}]
    return CodeCatalog([*infos, CodeInfo("LOINC//29463-7", "Body weight", unit="kg")])


def xss_xml(path: Path) -> Path:
    """A patient XML (encounter variant) whose progress note holds a script tag and an image with onerror."""
    from xml.sax.saxutils import escape

    path.write_text(
        '<patient id="22" sex="F" birth_date="1961-05-02">\n'
        '<event id="e0" code="GENDER//F"/>\n'
        '<encounter id="e1" type="AMB" start="2021-02-01T09:00:00" end="2021-02-01T10:00:00">\n'
        '<event id="e2" code="LOINC//718-7" time="2021-02-01T09:10:00" value="12.1" unit="g/dL" description="Hemoglobin"/>\n'
        f'<event id="e3" code="NOTE//PROGRESS" time="2021-02-01T09:30:00">{escape(XSS_NOTE)}</event>\n'
        '</encounter>\n'
        '<encounter id="e4" type="AMB" start="2021-05-01T09:00:00" end="2021-05-01T10:00:00">\n'
        '<event id="e5" code="LOINC//718-7" time="2021-05-01T09:10:00" value="11.8" unit="g/dL" description="Hemoglobin"/>\n'
        '</encounter>\n</patient>\n', encoding="utf-8")
    return path


def timeline_for(graph) -> PatientTimeline:
    events = tuple(TimelineEvent(event_id=f"t{k}", date=day, type=kind, subtype=sub, description=text,
                                 source_event_refs=refs) for k, (day, kind, sub, text, refs) in enumerate(EVENTS))
    stats = ExtractionStats(chunks=1, failed_chunks=0, proposed_events=len(events), kept_events=len(events),
                            rejected_events=0, dropped_refs=0, merged_groups=0)
    return PatientTimeline(subject_id=graph.subject_id, profile="thoracic", content_hash="serve-test", events=events,
                           episodes=tuple(synthesize_episodes(events, load_profile())), rejected=(), stats=stats,
                           graph_hash=graph_version(graph),
                           ref_fingerprints=ref_fingerprints(graph, (r for e in events for r in e.source_event_refs)))


def scripted_model(request: ChatRequest) -> str:
    """Display variables from `VALUES` (others: Not documented), the summary note, the query bridge's plans and
    `vista ask` answers."""
    name, schema = schema_of(request)
    if name == "SummaryAnswer":
        return json.dumps({"note": "Stage IV lung adenocarcinoma (PD-L1 80%) treated with first-line pembrolizumab; "
                           "progression with liver metastases in July 2020, now in hospice care.",
                           "timeline_refs": ["t2", "t5", "t7", "t8"]})
    if name == "VariablesAnswer":
        return json.dumps({key: {"value": VALUES.get(key, ("Not documented", ()))[0],
                                 "timeline_refs": list(VALUES.get(key, ("", ()))[1])} for key in schema["properties"]})
    if name == "PlanDraft":  # the query bridge's plan: a lab minimum is a plan; anything else goes to `vista ask`
        question = request.messages[-1].content.rpartition("Question: ")[2].lower()
        plan = {"expressible": "hemoglobin" in question, "target": "measure", "name": "hemoglobin",
                "aggregate": "min", "start": None, "end": None, "line": None, "during": None}
        return json.dumps(plan)
    if name == "AnswerDraft":
        return json.dumps({"in_timeline": True, "answer": "First-line pembrolizumab started on 2020-04-01.",
                           "cited_event_ids": ["t5"], "confidence": "high"})
    raise AssertionError(f"unexpected request {name}")


def scripted_gateway():
    return gateway_for(ScriptedBackend(scripted_model))


def build_serve_store(root: Path) -> Path:
    """The store described in the module docstring, under ``root/store``."""
    store_root = root / "store"
    store = GraphStore(store_root)
    store.build_records([PatientRecord(21, "data/train/0.parquet", 500, _rows_21()),
                         PatientRecord(23, "data/train/0.parquet", 900, [
                             Event("e0", datetime(2019, 5, 1, 8), "ENCOUNTER//AMB", None, None),
                             Event("e1", datetime(2019, 5, 1, 9), "LOINC//718-7", 14.0, None),
                             Event("e2", datetime(2019, 8, 1, 9), "LOINC//718-7", 13.5, None)])], catalog())
    store.build_xml([xss_xml(root / "patient22.xml")])
    graph = store.load(21)
    timeline = timeline_for(graph)
    TimelineStore(store_root).save(timeline)

    async def display():
        async with scripted_gateway() as gateway:
            await DisplayStore(store_root).build(graph, timeline, gateway)

    asyncio.run(display())
    g22 = store.load(22)
    DisplayStore(store_root).save(stamped(TumorBoardDisplay(
        subject_id=22, method="vista", model="scripted", content_hash="x", summary_note=XSS_SUMMARY,
        values=(VariableValue(key="histology", value="<img src=x onerror=alert(3)>", source_refs=("e3",),
                              origin="llm"),
                VariableValue(key="stage", value="Stage II", origin="uncited", uncited_answer="Stage II"))), g22))
    row = VistaRow(task="24", subject_id=24, status="error", error_stage="graph", error_kind="input",
                   error="GraphInputError: data/train/0.parquet: patient 24: field time: null", stages="",
                   run_id="r1", finished_at=datetime(2024, 1, 1))
    pq.write_table(pa.Table.from_pylist([row.model_dump()], schema=VISTA_SCHEMA), store_root / "patients.parquet")
    return store_root


@contextmanager
def running_server(root: Path, token: str, *, questions: bool = True) -> Iterator[str]:
    """`vista serve`'s app on a free 127.0.0.1 port in a thread (uvicorn, as the command runs it); its base URL."""
    import uvicorn

    from conftest import free_port
    from vista.serve.app import create_app

    port = free_port()
    app = create_app(root, token, gateway_factory=scripted_gateway if questions else None)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def http(url: str, *, data: bytes | None = None, cookie: str | None = None) -> tuple[int, str]:
    """(status, body) of a GET (or a POST of ``data``), errors included."""
    request = urllib.request.Request(url, data=data, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8")
