"""`vista serve` without a browser: the cohort rows (status, search, pages), the patient page's data (citations,
graph-only and stale stores), the HTTP rules (token, 404, POST) and the command line's refusals."""

from __future__ import annotations

import logging
import secrets

import pytest

from serve_fixtures import _rows_21, build_serve_store, catalog, http, running_server
from vista.graph import GraphStore
from vista.serve.cohort import Cohort
from vista.serve.patient import patient_page, source_panel
from vista.shared.records import Event, PatientRecord
from vista.toa.errors import StaleProvenanceError


@pytest.fixture(scope="module")
def store_root(tmp_path_factory):
    return build_serve_store(tmp_path_factory.mktemp("serve"))


def test_cohort_lists_every_patient_with_status_and_headline_variables(store_root):
    cohort = Cohort(store_root)
    page = cohort.page()
    assert [(r.subject_id, r.status) for r in page.rows] == [(21, "display"), (22, "display"), (23, "graph only"),
                                                             (24, "failed")]
    first = page.rows[0]
    assert (first.diagnosis, first.histology, first.stage, first.current_line) == (
        "Right upper lobe, lung (2020-03-10)", "Adenocarcinoma", "Stage IVB (cT2a N2 M1c)", "None (hospice)")
    assert page.rows[3].detail.startswith("stopped in graph: GraphInputError") and page.rows[3].nodes is None
    assert page.rows[1].stage == "Not found"  # an uncited model answer is never shown as a fact


def test_cohort_filters_searches_and_pages(store_root):
    cohort = Cohort(store_root)
    assert [r.subject_id for r in cohort.page(status="failed").rows] == [24]
    assert [r.subject_id for r in cohort.page(status="graph only").rows] == [23]
    assert [r.subject_id for r in cohort.page(query="2").rows] == [21, 22, 23, 24]
    assert [r.subject_id for r in cohort.page(query="23").rows] == [23]
    assert [r.subject_id for r in cohort.page(query="adenocarcinoma").rows] == [21]
    first, second = cohort.page(size=3), cohort.page(size=3, page=2)
    assert (first.pages, [r.subject_id for r in second.rows]) == (2, [24])
    hit = cohort.page(query="n", size=1)  # a text search pages by cursor
    assert [r.subject_id for r in hit.rows] == [21] and hit.next_after == 21
    assert [r.subject_id for r in cohort.page(query="n", size=1, after=hit.next_after).rows] == [22]


def test_patient_page_cites_every_answered_value_and_marks_the_span(store_root):
    page = patient_page(store_root, GraphStore(store_root).load(21))
    rows = {r.key: r for r in [*page.tumor_board, *page.patient_info]}
    assert rows["histology"].cite is not None and rows["code_status"].cite is None
    panel = next(p for p in page.panels if p.cite_id == rows["histology"].cite)
    assert [s.event.event_id for s in panel.sources] == ["e9", "e11"]
    note = panel.sources[1]
    assert [part.text for part in note.parts if part.marked] == ["Final diagnosis: adenocarcinoma of the lung.\n"]
    assert rows["biomarkers"].items == ("EGFR negative", "PD-L1 80%", "ALK negative", "ROS1 negative", "KRAS G12C")
    assert page.timeline is not None and len(page.timeline.markers) == 9
    assert [t.code for t in page.trends] == ["LOINC//718-7", "LOINC//29463-7"] and page.trends[0].count == 13
    assert page.missing == [] and page.notices == []


def test_graph_only_patient_says_what_is_not_built(store_root):
    page = patient_page(store_root, GraphStore(store_root).load(23))
    assert [m.split(":")[0] for m in page.missing] == ["No timeline built yet", "No display built yet"]
    assert page.timeline is None and page.tumor_board == [] and len(page.trends) == 1 and page.total_events == 3


def test_a_store_whose_data_changed_flags_the_stale_timeline_and_refuses_old_refs(tmp_path):
    root = build_serve_store(tmp_path)
    store = GraphStore(root)
    old = patient_page(root, store.load(21)).version
    rows = _rows_21()
    rows[4] = Event("e4", rows[4].time, rows[4].code, 9.9, None)  # the hemoglobin value changed in the data
    store.build_records([PatientRecord(21, "data/train/0.parquet", 500, rows)], catalog())
    page = patient_page(root, GraphStore(root).load(21))
    assert page.version != old
    assert [n.split(":")[0] for n in page.notices] == ["Stale timeline, not shown", "Stale display, not shown"]
    assert all("subject 21" in n for n in page.notices)
    assert page.timeline is None and page.tumor_board == [] and page.panels == []
    with pytest.raises(StaleProvenanceError, match="subject 21"):
        source_panel(GraphStore(root).load(21), "x", "", ["e4"], pinned=old)
    cohort = Cohort(root)
    assert cohort.page().rows[0].status == "stale"


def test_http_rules_and_no_patient_text_logged_at_info(store_root, caplog):
    token = secrets.token_urlsafe(16)
    caplog.set_level(logging.INFO)
    with running_server(store_root, token) as base:
        status, body = http(f"{base}/?token={token}")
        assert status == 200 and "Adenocarcinoma" in body and "/patient/21" in body
        assert http(f"{base}/")[0] == 401 and http(f"{base}/?token=x")[0] == 403
        status, body = http(f"{base}/patient/21/source?ids=e11&v=ffffffffffff&token={token}")
        assert status == 409 and "refused" in body  # pinned to another graph version
        status, body = http(f"{base}/patient/21/source?ids=e11&token={token}")
        assert status == 200 and "adenocarcinoma of the lung" in body
        assert http(f"{base}/patient/21/source?ids=e999&token={token}")[0] == 404
        status, body = http(f"{base}/patient/21/ask", data=f"token={token}&question=Histology%3F".encode(),
                            cookie=f"vista_serve_token={token}")
        assert status == 200 and "pembrolizumab" in body and "vista ask" in body  # no plan: the timeline route, said
        status, body = http(f"{base}/patient/22/ask", data=f"token={token}&question=Lowest+hemoglobin%3F".encode(),
                            cookie=f"vista_serve_token={token}")
        assert status == 200 and "Value: 11.8 g/dL on 2021-05-01" in body  # the query bridge's plan, from the graph
        assert "LOINC//718-7" in body and "vista ask" not in body  # its cited row opened in the panel
        status, body = http(f"{base}/patient/21/similar?token={token}")
        assert status == 200 and "/patient/22" in body
    logged = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    assert "adenocarcinoma" not in logged.lower() and "Histology?" not in logged and token not in logged


@pytest.mark.parametrize("argv, message", [
    (["--host", "0.0.0.0"], "is not a loopback address: pass --allow-remote"),
    (["--export", "OUT"], "--export needs --subjects"),
    (["--export", "OUT", "--subjects", "999"], "has no graph for subject(s) 999"),
])
def test_command_line_refusals_are_one_line(store_root, tmp_path, capsys, argv, message):
    from vista.cli import main

    argv = [str(tmp_path / a) if a == "OUT" else a for a in argv]
    assert main(["serve", "--store", str(store_root), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_missing_store_is_one_line(tmp_path, capsys):
    from vista.cli import main

    assert main(["serve", "--store", str(tmp_path / "none")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_export_is_reproducible_and_inlines_its_script(store_root, tmp_path):
    """Exporting twice writes the same bytes (no clock or random token in a packet)."""
    from vista.serve.export import export_packet

    first = [p.read_bytes() for p in export_packet(store_root, tmp_path / "a", [21])]
    second = [p.read_bytes() for p in export_packet(store_root, tmp_path / "b", [21])]
    assert first == second and b"<script src=" not in first[1] and b"sha256-" in first[1]


def test_demo_store_is_graph_only_and_listed(tmp_path):
    """`make demo`'s last step: a dozen lung patients' graphs, which the cohort page lists as graph only."""
    from graph_fixtures import synth_root
    from jobs.demo import demo_store

    subjects, _ = demo_store(synth_root(), tmp_path / "vista")
    assert subjects and len(subjects) <= 12
    rows = Cohort(tmp_path / "vista").page().rows
    assert [r.subject_id for r in rows] == subjects and {r.status for r in rows} == {"graph only"}
    assert all("C34" in (r.diagnosis or "") or "lung" in (r.diagnosis or "").lower() for r in rows), rows
    page = patient_page(tmp_path / "vista", GraphStore(tmp_path / "vista").load(subjects[0]))
    assert page.trends and page.events and len(page.missing) == 2


def test_similar_patients_name_the_command_above_the_servers_cap(store_root, monkeypatch):
    import vista.serve.app as app

    monkeypatch.setattr(app, "SIMILAR_MAX_PATIENTS", 2)
    token = secrets.token_urlsafe(16)
    with running_server(store_root, token, questions=False) as base:
        status, body = http(f"{base}/patient/21/similar?token={token}")
    assert status == 200 and "vista similar --store" in body and "/patient/22" not in body
