"""A hand-made TOA timeline over `toa_fixtures.toa_graph()` (ids t0..t8 and their graph refs known in advance),
and a scripted "model" for the display calls."""

from __future__ import annotations

import datetime as dt
import json

from toa_fixtures import toa_graph
from vista.shared.llm import LLMConfig, LLMGateway, open_gateway
from vista.shared.llm.backend import ChatRequest
from vista.toa import ExtractionStats, PatientTimeline, TimelineEvent, load_profile, synthesize_episodes
from vista.toa.refs import graph_version, ref_fingerprints

EVENTS = [  # (date, type, subtype, description, refs into toa_graph)
    (dt.date(2020, 1, 6), "background", "smoking", "Former smoker", ("e3",)),
    (dt.date(2020, 3, 2), "imaging", "ct", "CT chest: 3.1 cm spiculated right upper lobe mass", ("e6", "e7")),
    (dt.date(2020, 3, 10), "histology", "adenocarcinoma", "Biopsy: adenocarcinoma of the lung", ("e9", "e11")),
    (dt.date(2020, 3, 10), "diagnosis", "initial", "Lung cancer, right upper lobe", ("e10",)),
    (dt.date(2020, 3, 10), "biomarkers", "mutation", "EGFR negative, PD-L1 80%", ("e11",)),
    (dt.date(2020, 4, 1), "systemic_therapy", "immunotherapy", "Pembrolizumab started", ("e13",)),
    (dt.date(2020, 7, 1), "imaging", "ct", "CT chest: mass 4.5 cm, new liver lesions", ("e16", "e17")),
    (dt.date(2020, 7, 1), "progression", "radiographic", "Progression with liver metastases", ("e17",)),
    (dt.date(2020, 9, 1), "hospice", "enrolment", "Enrolled in hospice, ECOG 3", ("e19",)),
]


def toa_timeline(content_hash: str = "toa-hash", events=EVENTS) -> PatientTimeline:
    timeline_events = tuple(
        TimelineEvent(event_id=f"t{k}", date=day, type=kind, subtype=subtype, description=text, source_event_refs=refs)
        for k, (day, kind, subtype, text, refs) in enumerate(events))
    stats = ExtractionStats(chunks=1, failed_chunks=0, proposed_events=len(events), kept_events=len(events),
                            rejected_events=0, dropped_refs=0, merged_groups=0)
    graph = toa_graph()
    return PatientTimeline(subject_id=graph.subject_id, profile="thoracic", content_hash=content_hash,
                           events=timeline_events, episodes=tuple(synthesize_episodes(timeline_events, load_profile())),
                           rejected=(), stats=stats, graph_hash=graph_version(graph),
                           ref_fingerprints=ref_fingerprints(graph, (r for e in timeline_events for r in e.source_event_refs)))


def schema_of(request: ChatRequest) -> tuple[str, dict]:
    spec = request.response_format["json_schema"]
    return spec["name"], spec["schema"]


def fake_display_model(*, refs=("t2", "t99"), summary_refs=("t5", "t42")):
    """Answers every variable with '<key> value' citing ``refs``, and the note citing ``summary_refs``."""

    def answer(request: ChatRequest) -> str:
        name, schema = schema_of(request)
        if name == "SummaryAnswer":
            return json.dumps({"note": "Adenocarcinoma on pembrolizumab, then progression and hospice.",
                               "timeline_refs": list(summary_refs)})
        assert name == "VariablesAnswer", name
        return json.dumps({key: {"value": f"{key} value", "timeline_refs": list(refs)} for key in schema["properties"]})

    return answer


def gateway_for(backend, **overrides) -> LLMGateway:
    return open_gateway(LLMConfig(**({"model": "gpt-4.1-mini", "max_retries": 0} | overrides)), backend=backend)
