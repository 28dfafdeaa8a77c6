"""One real TOA run on the embedded SmolLM2 model for a synthetic lung-cancer case, restricted to its staging visit.

It proves the machinery with a real model (constrained decoding, parallel calls, ref checks, safety net, episodes),
not clinical quality: SmolLM2-135M's content is poor, so only invariants are asserted.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pytest

from graph_fixtures import synth_records, synth_root
from vista.graph import build_graph
from vista.shared.llm import LLMConfig, open_gateway
from vista.toa import ChunkSize, TOAConfig, build_timeline, imaging_candidates, plan

pytestmark = pytest.mark.llm


def staging_visit_case():
    """The first lung case whose record has imaging a few days after the diagnosis date, with that window."""
    records, catalog = synth_records()
    for line in (synth_root() / "ground_truth" / "oncology.jsonl").read_text().splitlines():
        truth = json.loads(line)
        if truth["cancer"] != "lung" or not truth["diagnosis_date"]:
            continue
        graph = build_graph(records[truth["subject_id"]], catalog)
        day = dt.date.fromisoformat(truth["diagnosis_date"])
        imaging = [d for d in imaging_candidates(graph) if day < d <= day + dt.timedelta(days=30)]
        if imaging:
            return graph, imaging[0]
    raise AssertionError("the seeded synthetic cohort has no lung case with staging imaging")


def test_real_model_builds_a_provenance_checked_timeline():
    graph, day = staging_visit_case()
    config = TOAConfig(budget=ChunkSize(limit=1200), start=day, end=day, max_tokens=200, max_events_per_chunk=2,
                       max_judged_pairs=1)
    chunks = plan(graph, config)
    assert 1 <= len(chunks) <= 3

    async def go():
        async with open_gateway(LLMConfig(max_reasks=1, max_retries=0)) as gateway:
            return gateway, await build_timeline(graph, gateway, config)

    gateway, timeline = asyncio.run(go())
    records = gateway.ledger.records
    assert len(records) >= len(chunks) and all(r.prompt_tokens for r in records)
    assert timeline.stats.chunks == len(chunks)
    for event in timeline.events:  # whatever the model said, only graph-backed events survive
        assert event.source_event_refs and all(graph.has_event(r) for r in event.source_event_refs)
        assert event.origin == "extraction" or event.type == "imaging"
    assigned = sorted(i for ep in timeline.episodes for i in ep.event_ids)
    assert assigned == sorted(e.event_id for e in timeline.events)
    imaging_covered = any(e.type == "imaging" and abs(e.date - day) <= dt.timedelta(days=3) for e in timeline.events)
    assert imaging_covered or timeline.stats.safety_net_candidates == 1  # covered, or sent to the verifier
