"""The display's timeline view on long timelines: fitted to the model's context window, tumor-board facts always
kept; and the patient-information fields (structured height/weight and medications, model-read allergies and prior
conditions)."""

from __future__ import annotations

import asyncio
import datetime as dt

from display_fixtures import fake_display_model, gateway_for, toa_timeline
from toa_fixtures import CLINICAL_IDS, toa_graph
from vista.display import DisplayConfig, generate_display, height_weight_value, load_variables, medications_value
from vista.shared.testing.scripted import ScriptedBackend
from vista.toa import ExtractionStats, PatientTimeline, TimelineEvent, load_profile, synthesize_episodes
from vista.toa.timeline_view import timeline_view
from vista.shared.tokens import count_tokens

FACTS = [  # the tumor board's first facts, all in the first weeks of a long record
    (dt.date(2012, 1, 5), "background", "allergy", "Penicillin allergy (rash)"),
    (dt.date(2012, 1, 5), "background", "comorbidity", "COPD GOLD 2, type 2 diabetes"),
    (dt.date(2012, 2, 1), "diagnosis", "initial", "Lung cancer, right upper lobe"),
    (dt.date(2012, 2, 1), "histology", "adenocarcinoma", "Biopsy: invasive adenocarcinoma, acinar predominant"),
    (dt.date(2012, 2, 10), "staging", "clinical", "cT2a N2 M0, stage IIIA"),
    (dt.date(2012, 2, 12), "biomarkers", "mutation", "EGFR exon 19 deletion detected; ALK negative; PD-L1 5%"),
]


def long_timeline(n_follow_up: int = 400) -> PatientTimeline:
    """Six key facts in 2012, then ``n_follow_up`` dated therapy and imaging events over eight years."""
    rows = list(FACTS)
    for k in range(n_follow_up):
        day = dt.date(2012, 3, 1) + dt.timedelta(days=7 * k)
        if k % 3:
            rows.append((day, "systemic_therapy", "targeted", f"Osimertinib 80 mg daily continued, visit {k}; "
                         "tolerating well, no rash, no diarrhoea, labs within normal limits"))
        else:
            rows.append((day, "imaging", "ct", f"CT chest/abdomen {k}: stable right upper lobe mass, no new lesions"))
    events = tuple(TimelineEvent(event_id=f"t{k}", date=day, type=kind, subtype=sub, description=text,
                                 source_event_refs=(CLINICAL_IDS[k % len(CLINICAL_IDS)],))
                   for k, (day, kind, sub, text) in enumerate(rows))
    stats = ExtractionStats(chunks=1, failed_chunks=0, proposed_events=len(events), kept_events=len(events),
                            rejected_events=0, dropped_refs=0, merged_groups=0)
    return PatientTimeline(subject_id=toa_graph().subject_id, profile="thoracic", content_hash="long",
                           events=events, episodes=tuple(synthesize_episodes(events, load_profile())), rejected=(),
                           stats=stats)


KEY_IDS = {"t2", "t3", "t4", "t5"}  # diagnosis, histology, staging, biomarkers


def build(timeline, **gateway_settings):
    backend = ScriptedBackend(fake_display_model(refs=("t3",), summary_refs=("t3",)))

    async def go():
        gateway = gateway_for(backend, **gateway_settings)
        return await generate_display(toa_graph(), timeline, gateway, DisplayConfig()), gateway

    (built, gateway) = asyncio.run(go())
    return built, backend, gateway


def test_the_old_12k_character_cut_no_longer_drops_histology_stage_and_biomarkers():
    """The defect: anchors + newest events within 12k characters left out histology, staging and biomarkers."""
    view = timeline_view(long_timeline(), max_events=120, max_chars=12_000)
    assert view.omitted > 250
    assert KEY_IDS <= view.shown_ids
    assert "Biopsy: invasive adenocarcinoma" in view.text and "stage IIIA" in view.text and "EGFR exon 19" in view.text
    assert {"t0", "t1"} <= view.shown_ids  # background facts (allergies, comorbidities) come next
    newest = f"t{len(long_timeline().events) - 1}"
    assert newest in view.shown_ids  # the latest events still fill the rest


def test_an_8k_model_sees_a_view_fitted_to_its_window_with_the_key_facts():
    built, backend, gateway = build(long_timeline(), context_tokens=8192, max_tokens=1024)
    prompts = list(backend.requests)
    assert len(prompts) == built.stats.groups + 1
    for request in prompts:
        text = "\n".join(m.content for m in request.messages)
        assert count_tokens(text) + 1024 <= 8192  # prompt + answer room fit the window
        assert "[t3] 2012-02-01 histology/adenocarcinoma" in text and "stage IIIA" in text and "EGFR exon 19" in text
    first = backend.requests[0].messages[-1].content
    assert "events are not shown" in first
    assert built.display.value_of("histology").timeline_refs == ("t3",)  # a shown key fact can be cited


def test_a_larger_window_shows_more_and_a_very_large_one_the_whole_timeline():
    def shown(**settings) -> int:
        _, backend, _ = build(long_timeline(), **settings)
        return backend.requests[0].messages[-1].content.count("\n[t")

    small, medium, whole = shown(context_tokens=8192), shown(context_tokens=16384), shown(context_tokens=200_000)
    assert small < medium < whole == len(long_timeline().events)


def test_patient_information_fields_are_displayed():
    built, backend, _ = build(toa_timeline())
    display = built.display
    keys = [v.key for v in display.values]
    assert {"height_weight", "allergies", "prior_conditions", "medications"} <= set(keys)
    meds = display.value_of("medications")
    assert meds.origin == "structured" and meds.value == "pembrolizumab (last recorded 2020-04-01)"
    assert meds.source_refs == ("e13",)
    size = display.value_of("height_weight")
    assert size.origin == "structured" and size.value == "Not documented" and size.source_refs == ()
    for key in ("allergies", "prior_conditions"):
        assert display.value_of(key).origin == "llm"  # read from the timeline's background events by the model
    sections = {s.key: s.section for s in load_variables()}
    assert sections["allergies"] == sections["demographics"] == "patient" and sections["histology"] == "tumor_board"


def test_height_and_weight_come_from_the_latest_measurements():
    from datetime import datetime

    from vista.graph import build_graph
    from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord

    rec = PatientRecord(3, "data/train/0.parquet", 0, [
        Event("e0", datetime(2019, 1, 1, 9), "LOINC//8302-2", 170.0, None),
        Event("e1", datetime(2019, 1, 1, 9), "LOINC//29463-7", 80.0, None),
        Event("e2", datetime(2020, 6, 1, 9), "LOINC//29463-7", 72.5, None),
        Event("e3", datetime(2020, 6, 1, 9), "RXNORM//1", None, None),
        Event("e4", datetime(2018, 1, 1, 9), "RXNORM//2", None, None)])
    graph = build_graph(rec, CodeCatalog([CodeInfo("RXNORM//1", "osimertinib"), CodeInfo("RXNORM//2", "metformin")]))
    value = height_weight_value(graph)
    assert value.value == "height 170 cm (2019-01-01); weight 72.5 kg (2020-06-01)" and value.source_refs == ("e0", "e2")
    meds = medications_value(graph)
    assert meds.value == "osimertinib (last recorded 2020-06-01)"  # metformin: over a year before the last record
