"""The TOA pipeline through the gateway with a scripted "model": refs checked, chunks in parallel, unify, safety net,
episodes, persistence."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re

import pytest

from toa_fixtures import toa_graph
from vista.shared.llm import ErrorKind, LLMConfig, LLMGateway, open_gateway
from vista.shared.llm.errors import BackendError
from vista.shared.testing.scripted import Delayed, ScriptedBackend
from vista.shared.llm.backend import ChatRequest
from vista.toa import ChunkSize, TimelineFileError, TimelineStore, TOAConfig, build_timeline, plan
from vista.toa.model import EpisodeKind

RULES = [  # (pattern in a line, type, subtype, description) the fake extractor applies line by line
    (r"CPT//71260", "imaging", "ct", "CT chest"),
    (r"Final diagnosis: adenocarcinoma", "histology", "adenocarcinoma", "Adenocarcinoma on biopsy"),
    (r"EGFR negative", "biomarkers", "mutation", "EGFR negative, PD-L1 80%"),
    (r"ICD10CM//C34.11", "diagnosis", "initial", "Lung cancer, right upper lobe"),
    (r"RXNORM//1736854", "systemic_therapy", "immunotherapy", "Pembrolizumab started"),
    (r"progression of disease", "progression", "radiographic", "Progression on CT"),
    (r"hospice", "hospice", "enrolment", "Enrolled in hospice"),
    (r"Ex-smoker", "background", "smoking", "Former smoker"),
]


def fake_extractor(*, skip_imaging_on: set[str] = frozenset(), bogus: bool = True):
    """A script that reads the chunk like a (perfect) model would, and adds hallucinated refs when ``bogus``."""

    def answer(request: ChatRequest) -> str:
        name = request.response_format["json_schema"]["name"]
        text = request.messages[-1].content
        if name == "ImagingVerdict":
            day = re.search(r"dated (\d{4}-\d{2}-\d{2})", text).group(1)
            ids = re.findall(r"^\[(e\d+)\] \S+ CPT//71260", text, re.M)
            return json.dumps({"imaging_performed": bool(ids), "subtype": "ct", "description": f"CT chest on {day}",
                               "source_event_refs": ids + ["e4242"]})
        events = []
        for line in text.splitlines():
            m = re.match(r"^\[(e\d+)\] (\d{4}-\d{2}-\d{2})?", line)
            if not m:
                continue
            for pattern, kind, subtype, description in RULES:
                if re.search(pattern, line) and not (kind == "imaging" and m.group(2) in skip_imaging_on):
                    day = m.group(2) or next(d for d in re.findall(r"\d{4}-\d{2}-\d{2}", text))
                    refs = [m.group(1)] + (["e999"] if bogus and kind == "diagnosis" else [])
                    events.append({"date": day, "type": kind, "subtype": subtype, "description": description,
                                   "source_event_refs": refs})
        if bogus:  # an event with only invented refs must be rejected, never kept
            events.append({"date": "2020-01-01", "type": "staging", "subtype": "clinical", "description": "Stage IV",
                           "source_event_refs": ["e12345"]})
        return json.dumps({"events": events})

    return answer


def gateway_for(backend, **overrides) -> LLMGateway:
    return open_gateway(LLMConfig(**({"model": "gpt-4.1-mini", "max_retries": 0} | overrides)), backend=backend)


def build(config: TOAConfig, backend, **overrides):
    async def go():
        gateway = gateway_for(backend, **overrides)
        return await build_timeline(toa_graph(), gateway, config)
    return asyncio.run(go())


SMALL = TOAConfig(budget=ChunkSize(limit=400))


def test_every_timeline_event_has_valid_refs_and_bogus_ones_are_rejected():
    graph = toa_graph()
    answer = fake_extractor()
    backend = ScriptedBackend(lambda request: Delayed(0.05, answer(request)))
    timeline = build(SMALL, backend)
    chunks = plan(graph, SMALL)
    assert len(chunks) > 2 and timeline.stats.chunks == len(chunks)
    extraction_calls = [r for r in backend.requests if r.response_format["json_schema"]["name"] == "ExtractionAnswer"]
    # every chunk's invented-ref event is sent back once (a follow-up turn naming it), then dropped
    assert len(extraction_calls) == 2 * len(chunks) and timeline.stats.reasked_events == len(chunks)
    follow_ups = [r.messages[-1].content for r in extraction_calls if len(r.messages) == 4]
    assert len(follow_ups) == len(chunks) and all("none of its source_event_refs" in f for f in follow_ups)
    assert backend.max_in_flight > 1  # the chunk sub-agents ran concurrently
    assert timeline.events
    for event in timeline.events:
        assert event.source_event_refs and all(graph.has_event(r) for r in event.source_event_refs)
    all_refs = {r for e in timeline.events for r in e.source_event_refs}
    assert not all_refs & {"e999", "e12345", "e4242"}
    assert timeline.stats.rejected_events == len(chunks)  # one invented-ref event per chunk
    assert timeline.stats.dropped_refs == len(chunks) + 2  # + e999 on each of the two diagnosis events
    assert all(r.reason != "unknown refs dropped" or r.dropped_refs == ("e999",) for r in timeline.rejected)
    assert sum(r.reasked and r.problem == "unknown_refs" for r in timeline.rejected) == len(chunks)
    assert not any(e.type == "staging" for e in timeline.events)


def test_one_event_per_fact_and_types_stay_apart():
    timeline = build(SMALL, ScriptedBackend(fake_extractor(bogus=False)))
    kinds = sorted(e.type for e in timeline.events)
    # two diagnosis codes (distinct rows), two CTs, one each of the rest
    assert kinds == sorted(["background", "imaging", "imaging", "diagnosis", "diagnosis", "histology", "biomarkers",
                            "systemic_therapy", "progression", "hospice"])
    assert [e.event_id for e in timeline.events] == [f"t{k}" for k in range(len(timeline.events))]
    assert timeline.stats.safety_net_candidates == 0 and timeline.stats.safety_net_added == 0


def test_a_note_split_across_chunks_yields_one_merged_event():
    config = TOAConfig(budget=ChunkSize(limit=120), safety_net=False)
    chunks = plan(toa_graph(), config)
    holding = [c.index for c in chunks if "e11" in c.event_ids]
    assert len(holding) >= 2  # the pathology note does not fit one chunk

    def script(request):  # every chunk showing a line of the note reports the histology, citing the note
        refs = sorted(set(re.findall(r"^\[(e11)\]", request.messages[-1].content, re.M)))
        events = [{"date": "2020-03-10", "type": "histology", "subtype": "adenocarcinoma",
                   "description": f"Adenocarcinoma ({len(request.messages[-1].content)} chars seen)", "source_event_refs": refs}]
        return json.dumps({"events": events if refs else []})

    timeline = build(config, ScriptedBackend(script))
    assert len(timeline.events) == 1 and timeline.stats.kept_events == len(holding)
    assert timeline.events[0].chunks == tuple(holding) and timeline.stats.merged_groups == 1


def test_biomarkers_and_histology_from_one_note_line_pair_are_kept_separately():
    timeline = build(SMALL, ScriptedBackend(fake_extractor(bogus=False)))
    by_type = {e.type: e for e in timeline.events}
    assert by_type["histology"].source_event_refs == ("e11",) == by_type["biomarkers"].source_event_refs


def test_safety_net_adds_a_planted_missing_imaging_date():
    backend = ScriptedBackend(fake_extractor(skip_imaging_on={"2020-07-01"}, bogus=False))
    timeline = build(SMALL, backend)
    verifier_calls = [r for r in backend.requests if r.response_format["json_schema"]["name"] == "ImagingVerdict"]
    assert len(verifier_calls) == 1 and "dated 2020-07-01" in verifier_calls[0].messages[-1].content
    added = [e for e in timeline.events if e.origin == "safety_net"]
    assert len(added) == 1 and added[0].date == dt.date(2020, 7, 1) and added[0].type == "imaging"
    assert added[0].source_event_refs == ("e16",)  # the invented e4242 was dropped
    assert timeline.stats.safety_net_candidates == 1 and timeline.stats.safety_net_added == 1


def test_safety_net_adds_nothing_when_the_verifier_says_no():
    def script(request):
        if request.response_format["json_schema"]["name"] == "ImagingVerdict":
            return '{"imaging_performed": false, "subtype": "other", "description": "", "source_event_refs": []}'
        return '{"events": []}'
    timeline = build(SMALL, ScriptedBackend(script))
    assert timeline.events == () and timeline.episodes == ()
    assert timeline.stats.safety_net_candidates == 2 and timeline.stats.safety_net_added == 0


def test_safety_net_falls_back_to_candidate_rows_when_the_verifier_cites_none():
    def script(request):
        if request.response_format["json_schema"]["name"] == "ImagingVerdict":
            return '{"imaging_performed": true, "subtype": "pet", "description": "CT", "source_event_refs": ["e1"]}'
        return '{"events": []}'
    timeline = build(SMALL, ScriptedBackend(script))
    assert [(e.date, e.source_event_refs, e.subtype) for e in timeline.events] == [
        (dt.date(2020, 3, 2), ("e6", "e7"), "other"), (dt.date(2020, 7, 1), ("e16", "e17"), "other")]


def test_episodes_of_the_built_timeline():
    timeline = build(SMALL, ScriptedBackend(fake_extractor(bogus=False)))
    episodes = timeline.episodes
    assert [e.kind for e in episodes] == [EpisodeKind.BASELINE, EpisodeKind.DIAGNOSIS, EpisodeKind.TREATMENT_LINE,
                                          EpisodeKind.POST_ONCOLOGICAL]
    by_id = {e.event_id: e for e in timeline.events}
    line = episodes[2]
    assert line.start == dt.date(2020, 4, 1) and "progression" in {by_id[i].type for i in line.event_ids}
    assert sorted(i for ep in episodes for i in ep.event_ids) == sorted(by_id)


def test_a_failed_chunk_is_counted_and_contributes_nothing():
    inner = fake_extractor(bogus=False)
    calls = []

    def script(request):
        calls.append(request)
        if len(calls) == 1:
            return BackendError(ErrorKind.SERVER_ERROR, "boom", status=500)
        return inner(request)
    timeline = build(TOAConfig(budget=ChunkSize(limit=400), safety_net=False), ScriptedBackend(script))
    assert timeline.stats.failed_chunks == 1 and timeline.stats.chunks > 1


def test_store_skips_an_unchanged_patient_and_rebuilds_when_config_changes(tmp_path):
    store = TimelineStore(tmp_path)
    backend = ScriptedBackend(fake_extractor())

    async def go(config):
        return await store.build(toa_graph(), gateway_for(backend), config)

    first, built = asyncio.run(go(SMALL))
    assert built and store.path_of(21) == tmp_path / "toa" / "21.json"
    n_calls = len(backend.requests)
    again, built = asyncio.run(go(SMALL))
    assert not built and again == first and len(backend.requests) == n_calls  # no call for an unchanged patient
    _, built = asyncio.run(go(TOAConfig(budget=ChunkSize(limit=500))))
    assert built and len(backend.requests) > n_calls


def test_store_reports_a_damaged_file(tmp_path):
    store = TimelineStore(tmp_path)
    store.directory.mkdir()
    store.path_of(21).write_text('{"subject_id": 21}')
    with pytest.raises(TimelineFileError, match=r"21\.json: subject 21: field"):
        store.load(21)
    with pytest.raises(TimelineFileError, match="cannot read"):
        store.load(22)


@pytest.mark.slow
def test_safety_net_recovers_every_ground_truth_imaging_study_of_synthetic_lung_cases():
    """Extraction finds nothing; the verifier (scripted: "yes" when an imaging line is shown) must restore every
    imaging study the generator's ground truth lists, with refs that are the truth's rows."""
    from graph_fixtures import synth_records, synth_root
    from vista.graph import build_graph
    from vista.toa.safety_net import is_imaging_code

    def script(request):
        if request.response_format["json_schema"]["name"] == "ImagingVerdict":
            shown = re.findall(r"^\[(e\d+)\] \S+ (\S+)", request.messages[-1].content, re.M)
            ids = [i for i, code in shown if is_imaging_code(code)]
            return json.dumps({"imaging_performed": bool(ids), "subtype": "ct", "description": "Imaging study",
                               "source_event_refs": ids[:12]})
        return '{"events": []}'

    records, catalog = synth_records()
    truths = [json.loads(line) for line in (synth_root() / "ground_truth" / "oncology.jsonl").read_text().splitlines()]
    lung = [t for t in truths if t["cancer"] == "lung" and t["imaging"]]
    assert lung
    for truth in lung:
        graph = build_graph(records[truth["subject_id"]], catalog)
        timeline = asyncio.run(build_timeline(graph, gateway_for(ScriptedBackend(script)), TOAConfig(window_days=0)))
        added = {e.date: set(e.source_event_refs) for e in timeline.events if e.origin == "safety_net"}
        for study in truth["imaging"]:
            day = dt.date.fromisoformat(study["date"])
            assert day in added, (truth["subject_id"], study)
            assert set(study["event_ids"]) & added[day]


def _two_ct_reports_script(judge_says: bool | None):
    """Extraction: each CT visit's radiology note is reported as imaging on the same date (2020-03-02) with
    different refs — an ambiguous pair; the judge answers ``judge_says`` (None: the call fails)."""
    def script(request):
        name = request.response_format["json_schema"]["name"]
        if name == "SameEventVerdict":
            if judge_says is None:
                return BackendError(ErrorKind.SERVER_ERROR, "down", status=500)
            return json.dumps({"same_event": judge_says, "reason": "same scan" if judge_says else "different scans"})
        text = request.messages[-1].content
        events = [{"date": "2020-03-02", "type": "imaging", "subtype": "ct", "description": f"CT chest ({ref})",
                   "source_event_refs": [ref]} for ref in ("e7", "e17") if f"[{ref}]" in text]
        return json.dumps({"events": events})
    return script


@pytest.mark.parametrize("judge_says", [True, False, None])
def test_ambiguous_residue_goes_to_the_judge(judge_says):
    backend = ScriptedBackend(_two_ct_reports_script(judge_says))
    timeline = build(TOAConfig(budget=ChunkSize(limit=400), safety_net=False), backend)
    judged = [r for r in backend.requests if r.response_format["json_schema"]["name"] == "SameEventVerdict"]
    assert len(judged) == 1 and "[e7]" in judged[0].messages[-1].content and "[e17]" in judged[0].messages[-1].content
    if judge_says:
        assert len(timeline.events) == 1 and timeline.events[0].source_event_refs == ("e7", "e17")
        assert timeline.stats.judged_merges == 1 and timeline.ambiguous_pairs == ()
    else:
        assert len(timeline.events) == 2 and timeline.stats.judged_merges == 0
        assert timeline.ambiguous_pairs == (() if judge_says is False else (("t0", "t1"),))


def test_judge_can_be_switched_off_and_capped():
    backend = ScriptedBackend(_two_ct_reports_script(True))
    timeline = build(TOAConfig(budget=ChunkSize(limit=400), safety_net=False, resolve_ambiguous=False), backend)
    assert len(timeline.events) == 2 and timeline.ambiguous_pairs == (("t0", "t1"),)
    timeline = build(TOAConfig(budget=ChunkSize(limit=400), safety_net=False, max_judged_pairs=0), backend)
    assert len(timeline.events) == 2 and timeline.ambiguous_pairs == (("t0", "t1"),)
    assert not any(r.response_format["json_schema"]["name"] == "SameEventVerdict" for r in backend.requests)


def test_default_budget_fits_the_model_context():
    from vista.toa import ChunkingError, fitted_chunk_size

    gateway = gateway_for(ScriptedBackend([], context_window=3000))
    config = TOAConfig(max_tokens=300)
    chunks = plan(toa_graph(), config, gateway)
    budget = fitted_chunk_size(config, gateway.context_tokens, 300)
    assert budget == ChunkSize(limit=1500, unit="tokens") and all(budget.size(c.text) <= 1500 for c in chunks)
    with pytest.raises(ChunkingError, match="no room"):
        fitted_chunk_size(TOAConfig(), 2000, 1024)
    explicit = TOAConfig(budget=ChunkSize(limit=400))
    assert fitted_chunk_size(explicit, 3000, 300) == ChunkSize(limit=400)


def test_a_failed_verifier_call_is_counted_apart_and_adds_nothing():
    def script(request):
        if request.response_format["json_schema"]["name"] == "ImagingVerdict":
            return BackendError(ErrorKind.SERVER_ERROR, "down", status=500)
        return '{"events": []}'
    timeline = build(SMALL, ScriptedBackend(script))
    assert timeline.events == () and timeline.stats.safety_net_failed == 2 and timeline.stats.rejected_events == 0
    assert all("imaging verifier failed" in r.reason for r in timeline.rejected)
