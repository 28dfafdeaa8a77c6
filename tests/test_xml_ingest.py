"""Nothing lost on the way in from XML: entities decoded (never resolved), one patient per file, one discovery rule
for ``vista graph`` and ``vista build``, bounded reading (issue 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.cli import vista_main
from vista.graph import GraphInputError, GraphStore, read_patient_xml
from vista.shared.timeline import parse_timeline

_NOTE = "Patient&nbsp;was seen &amp; examined; r&eacute;sum&eacute; A & B &unknownthing; end of note."
_KEPT = "Patient\u00a0was seen & examined; résumé A & B &unknownthing; end of note."


def _eventstream(person: int, note: str = _NOTE, *, prolog: str = "") -> str:
    return (f'{prolog}<eventstream person_id="{person}"><encounter><events>'
            '<entry timestamp="2020-01-01 09:00"><event type="visit" code="Visit/OP" name="Out&nbsp;patient" visit_id="1"/>'
            f'<event type="note" code="Note/11506-3" name="Progress note" visit_id="1">{note}</event></entry>'
            '</events></encounter></eventstream>')


def _note_text(path: Path) -> str:
    graph = read_patient_xml(path)
    (text,) = [graph.event(i).text for i in graph.node_ids() if graph.has_event(i) and graph.event(i).text]
    return text


@pytest.mark.parametrize("prolog", ["", '<!DOCTYPE eventstream SYSTEM "meds2text.dtd">\n',
                                    '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
                                    '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n'])
def test_a_note_holding_nbsp_keeps_every_word_after_it(tmp_path, prolog):
    path = tmp_path / "p.xml"
    path.write_text(_eventstream(5, prolog=prolog))
    assert _note_text(path) == _KEPT


def test_a_note_is_not_cut_at_an_entity_the_dtd_it_names_would_define(tmp_path):
    """The defect as found: with a DOCTYPE, the parser kept ``&nbsp;`` as an entity node and the note read 'Patient'."""
    path = tmp_path / "p.xml"
    path.write_text(_eventstream(5, note="Patient&nbsp;was seen by the thoracic team.",
                                 prolog='<!DOCTYPE eventstream SYSTEM "meds2text.dtd">\n').replace("Out&nbsp;", "Out "))
    assert _note_text(path) == "Patient\u00a0was seen by the thoracic team."


def test_vista_graph_keeps_the_whole_note_and_html_entities_in_attributes(tmp_path, capsys):
    folder = tmp_path / "xml"
    folder.mkdir()
    (folder / "p.xml").write_text(_eventstream(5, prolog='<!DOCTYPE eventstream SYSTEM "x.dtd">'))
    assert vista_main(["graph", "--xml-dir", str(folder), "--store", str(tmp_path / "store")]) == 0
    graph = GraphStore(tmp_path / "store").load(5)
    texts = [graph.event(i).text for i in graph.node_ids() if graph.has_event(i) and graph.event(i).text]
    assert texts == [_KEPT]
    assert "Out\u00a0patient" in {graph.code(graph.event(i).code).description for i in graph.node_ids() if graph.has_event(i)}


def test_the_project_patient_documents_and_timelines_decode_entities_too(tmp_path):
    path = tmp_path / "7.xml"
    path.write_text('<patient id="7"><event id="e0" code="NOTE//PROGRESS" time="2020-01-05T10:00:00">'
                    f"{_NOTE}</event></patient>")
    assert _note_text(path) == _KEPT
    timeline = parse_timeline('<patient id="7"><events time="2020-01-05"><notes>'
                              f'<note id="e3" code="NOTE//PROGRESS">{_NOTE}</note></notes></events></patient>')
    assert timeline.blocks[0].elements[0].content == _KEPT


def test_an_external_entity_is_never_read_and_is_one_error_naming_file_and_line(tmp_path, capsys):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    folder = tmp_path / "xml"
    folder.mkdir()
    path = folder / "p.xml"
    prolog = f'<!DOCTYPE eventstream [<!ENTITY ext SYSTEM "file://{secret}">]>\n'
    path.write_text(_eventstream(5, note="Patient&ext;was seen", prolog=prolog))
    with pytest.raises(GraphInputError) as caught:
        read_patient_xml(path)
    assert caught.value.source == str(path) and caught.value.element == "line 2" and "&ext;" in caught.value.problem
    assert vista_main(["graph", "--xml-dir", str(folder), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: line 2: entity &ext;" in err and "SECRET" not in err


# ------------------------------------------------------------------------------------------------ one patient, one file
def _two_files_of_one_patient(folder: Path) -> tuple[Path, Path]:
    (folder / "a").mkdir(parents=True)
    first, second = folder / "a" / "p.xml", folder / "b.xml"
    first.write_text(_eventstream(5, note="first"))
    second.write_text(_eventstream(5, note="second"))
    return first, second


def test_two_files_with_one_person_id_exit_2_naming_both_files_in_vista_graph(tmp_path, capsys):
    first, second = _two_files_of_one_patient(tmp_path / "xml")
    assert vista_main(["graph", "--xml-dir", str(tmp_path / "xml"), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(first) in err and str(second) in err and "patient 5" in err
    assert not (tmp_path / "store").exists() or len(GraphStore(tmp_path / "store")) == 0


def test_on_duplicate_first_keeps_the_first_file_in_path_order_and_says_so(tmp_path, capsys):
    first, second = _two_files_of_one_patient(tmp_path / "xml")
    argv = ["graph", "--xml-dir", str(tmp_path / "xml"), "--store", str(tmp_path / "store"), "--on-duplicate", "first"]
    assert vista_main(argv) == 0
    captured = capsys.readouterr()
    assert "built 1 graph(s)" in captured.out and f"{second}: skipped, patient 5 is already read from {first}" in captured.err
    graph = GraphStore(tmp_path / "store").load(5)
    assert [graph.event(i).text for i in graph.node_ids() if graph.has_event(i) and graph.event(i).text] == ["first"]


def test_two_files_with_one_person_id_exit_2_naming_both_files_in_vista_build(tmp_path, capsys):
    first, second = _two_files_of_one_patient(tmp_path / "xml")
    assert vista_main(["build", "--xml-dir", str(tmp_path / "xml"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert str(first) in err and str(second) in err and "patient 5" in err
    assert not (tmp_path / "out" / "patients.parquet").exists()


# ------------------------------------------------------------------------------------------------ one discovery rule
def test_vista_graph_and_vista_build_find_the_same_files_in_subfolders(tmp_path, capsys):
    from vista.graph.xml_files import find_xml_files, list_xml_patients

    folder = tmp_path / "xml"
    (folder / "site-b" / "2024").mkdir(parents=True)
    (folder / "site-a").mkdir()
    (folder / "site-b" / "2024" / "3.xml").write_text(_eventstream(3, note="three"))
    (folder / "site-a" / "1.xml").write_text(_eventstream(1, note="one"))
    (folder / "2.xml").write_text(_eventstream(2, note="two"))
    (folder / "notes.txt").write_text("not a patient")
    (folder / "loop").symlink_to(folder, target_is_directory=True)  # a folder link is not followed: no loop
    expected = ["2.xml", "site-a/1.xml", "site-b/2024/3.xml"]
    assert [relative for _, relative in find_xml_files(folder)] == expected
    assert [task.relative for task in list_xml_patients(folder)[0]] == expected
    assert vista_main(["graph", "--xml-dir", str(folder), "--store", str(tmp_path / "store")]) == 0
    assert GraphStore(tmp_path / "store").subject_ids() == [1, 2, 3]


# ------------------------------------------------------------------------------------------------ bounded reading
def test_limits_fail_in_one_line_naming_the_file(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "xml"
    folder.mkdir()
    path = folder / "p.xml"
    path.write_text(_eventstream(5))
    store = str(tmp_path / "store")
    monkeypatch.setenv("VISTA_XML_MAX_ELEMENTS", "4")
    assert vista_main(["graph", "--xml-dir", str(folder), "--store", store]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "more than 4 elements" in err and "VISTA_XML_MAX_ELEMENTS" in err
    monkeypatch.setenv("VISTA_XML_MAX_ELEMENTS", "1000")
    monkeypatch.setenv("VISTA_XML_MAX_BYTES", "100")
    assert vista_main(["graph", "--xml-dir", str(folder), "--store", store]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "more than the limit of 100" in err


def test_a_large_file_shows_progress_on_stderr(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "xml"
    folder.mkdir()
    (folder / "p.xml").write_text(_eventstream(5))
    monkeypatch.setenv("VISTA_XML_PROGRESS_BYTES", "10")
    assert vista_main(["graph", "--xml-dir", str(folder), "--store", str(tmp_path / "store")]) == 0
    err = capsys.readouterr().err
    assert "reading p.xml" in err and "p.xml: 2 events read; building the graph" in err


# ------------------------------------------------------------------------------------------------ symbolic link loops
@pytest.mark.parametrize("tool, argv", [
    ("trajonco", ["validate", "{loop}"]),
    ("trajonco", ["timeline", "--dataset", "{loop}", "--subject", "1", "--prediction-time", "2020-01-01"]),
    ("trajonco", ["cohort", "lung", "--dataset", "{loop}", "--out", "{tmp}/cohort"]),
    ("vista", ["graph", "--dataset", "{loop}", "--store", "{tmp}/store"]),
    ("vista", ["graph", "--xml-dir", "{loop}", "--store", "{tmp}/store"]),
    ("vista", ["build", "--dataset", "{loop}", "--out", "{tmp}/out"]),
])
def test_a_dataset_path_that_is_a_symlink_loop_is_one_line_and_exit_2(tmp_path, capsys, tool, argv):
    from jobs.cli import trajonco_main

    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    main = trajonco_main if tool == "trajonco" else vista_main
    try:
        status = main([a.format(loop=loop, tmp=tmp_path) for a in argv])
    except SystemExit as exc:  # an option's type check: argparse exits
        status = exc.code
    assert status == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{loop}: cannot be opened: a symbolic link loop" in err and "Traceback" not in err


def test_a_store_build_refuses_two_files_of_one_patient_whatever_lists_them(tmp_path):
    first, second = _two_files_of_one_patient(tmp_path / "xml")
    store = GraphStore(tmp_path / "store")
    with pytest.raises(GraphInputError, match=rf"{second}: patient 5: is also in {first} \(one file or shard per patient\)"):
        store.build_xml([first, second])


def test_the_build_job_lists_one_task_per_patient_with_on_duplicate_first(tmp_path, caplog):
    from jobs.build_graphs import GraphsJob, build_parser
    from vista.shared.runs.errors import JobInputError

    first, second = _two_files_of_one_patient(tmp_path / "xml")
    job = GraphsJob(build_parser().parse_args(["--xml-dir", str(tmp_path / "xml"), "--out", str(tmp_path / "o")]), "r")
    with pytest.raises(JobInputError, match="--xml-dir .*both hold patient 5"):
        job.check()
    job.args.on_duplicate = "first"
    with caplog.at_level("WARNING", logger="jobs.build_graphs"):
        job.check()
    assert [t.relative for t in job.xml_tasks] == ["a/p.xml"]
    assert f"{second}: skipped, patient 5 is already read from {first}" in caplog.text
    args = build_parser().parse_args(["--xml-dir", str(tmp_path / "xml"), "--out", str(tmp_path / "o"),
                                      "--on-duplicate", "first"])
    assert args.on_duplicate == "first"


def test_the_entity_pre_pass_gives_the_same_bytes_whatever_the_chunks_and_leaves_cdata_alone():
    from vista.shared.xml_reading import EntityDecoder, parse_xml

    document = (b'<?xml version="1.0"?>\n<!DOCTYPE a [<!ENTITY own "x">]>\n<a t="x&nbsp;y&amp;z">A&nbsp;B & C '
                b'<![CDATA[keep &nbsp; & as is]]><!-- a & b --> &eacute;&#233;&#xE9; &notanentity; end</a>')
    whole = EntityDecoder().feed(document, final=True)
    for size in range(1, 12):
        decoder = EntityDecoder()
        pieces = b"".join(decoder.feed(document[i:i + size]) for i in range(0, len(document), size)) + decoder.close()
        assert pieces == whole, size
        assert decoder.declared == {"own"}
    root = parse_xml(document)
    assert root.get("t") == "x\u00a0y&z"
    assert root.text == "A\u00a0B & C keep &nbsp; & as is ééé &notanentity; end"
