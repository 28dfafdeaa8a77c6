"""Patient data at rest is private: every writer of outputs, graph stores, caches, rows, locks, manifests and reports
gives files 0600 and folders 0700 whatever the umask; ``VISTA_DATA_MODE=group`` relaxes it to 0640/0750.

The defect: graphs with full note text, predictions, row part files and the LLM cache were written 0644 in 0755
folders (`vista.shared.atomic` applied the umask on purpose), so every local user could read them. Each test here runs
with the most permissive umask (0), where an ordinary writer makes 0666 files, and asks ``find`` what it asks of a
real output folder: ``find OUT -perm /o=r`` and ``-perm /g=r`` must find nothing.
"""

from __future__ import annotations

import os
import stat
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from vista.shared.atomic import DATA_MODE_ENV, DataModeError, atomic_path, atomic_write_text, data_mode, make_dirs, open_private

T0 = datetime(2020, 1, 1)


@pytest.fixture(autouse=True)
def open_umask(monkeypatch):
    """The most permissive umask (and no data-mode setting) for the test; both restored after."""
    monkeypatch.delenv(DATA_MODE_ENV, raising=False)
    old = os.umask(0)
    yield
    os.umask(old)


def readable_by_others(root: Path, who: str = "o") -> list[str]:
    """What ``find ROOT -perm /o=r`` (or ``/g=r``) lists: files and folders others (the group) can read."""
    done = subprocess.run(["find", str(root), "-perm", f"/{who}=r"], capture_output=True, text=True, check=True)
    return done.stdout.split()


def assert_private(root: Path) -> None:
    assert root.exists()
    assert readable_by_others(root, "o") == [] and readable_by_others(root, "g") == []
    assert not [p for p in [root, *root.rglob("*")] if stat.S_IMODE(p.stat().st_mode) & 0o077]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ------------------------------------------------------------------------------------------- the one helper
def test_atomic_writes_and_the_folders_they_make_are_private_whatever_the_umask(tmp_path):
    target = tmp_path / "out" / "deep" / "x.json"
    atomic_write_text(target, "{}")
    assert mode(target) == 0o600 and mode(target.parent) == 0o700 and mode(tmp_path / "out") == 0o700
    assert_private(tmp_path / "out")


def test_group_mode_lets_the_group_read_and_nobody_else(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_MODE_ENV, "group")
    target = atomic_write_text(tmp_path / "shared" / "x.json", "{}")
    assert mode(target) == 0o640 and mode(target.parent) == 0o750
    assert readable_by_others(tmp_path / "shared", "o") == []
    monkeypatch.setenv(DATA_MODE_ENV, "world")
    with pytest.raises(DataModeError, match="VISTA_DATA_MODE=world: expected private"):
        data_mode()


def test_an_existing_folder_keeps_its_mode(tmp_path):
    existing = tmp_path / "mine"
    existing.mkdir(mode=0o755)
    os.chmod(existing, 0o755)
    make_dirs(existing / "a" / "b")
    assert mode(existing) == 0o755 and mode(existing / "a") == mode(existing / "a" / "b") == 0o700


def test_a_file_kept_open_is_created_private(tmp_path):
    with open_private(tmp_path / "o" / ".lock") as handle:
        handle.write("1\n")
    assert mode(tmp_path / "o" / ".lock") == 0o600 and mode(tmp_path / "o") == 0o700


def test_third_party_writers_inside_atomic_path_end_private(tmp_path):
    """pyarrow and polars open the temporary file themselves; the rename gives the final file the data mode."""
    import pyarrow.parquet as pq

    with atomic_path(tmp_path / "p" / "a.parquet") as tmp:
        pq.write_table(pa.table({"x": [1]}), tmp)
    with atomic_path(tmp_path / "p" / "b.parquet") as tmp:
        pl.DataFrame({"x": [1]}).write_parquet(tmp)
    assert_private(tmp_path / "p")


# ------------------------------------------------------------------------------------------- each writer
def test_llm_cache_entries_are_private(tmp_path):
    from vista.shared.llm.cache import CachedAnswer, ResponseCache

    cache = ResponseCache(tmp_path / "llm_cache")
    cache.put("ab" + "0" * 62, CachedAnswer("{}", "m", "s", 1, 1))
    cache.put("cd" + "0" * 62, CachedAnswer("{}", "m", "s", 1, 1), patient="p-1")  # appended to the patient's file
    assert len(cache) == 2 and list((tmp_path / "llm_cache" / "buckets").glob("*.jsonl"))
    assert_private(tmp_path / "llm_cache")


def test_a_graph_store_with_note_text_is_private(tmp_path):
    from tests.graph_fixtures import synth_dataset
    from vista.graph.store import GraphStore

    store = tmp_path / "store"
    report = GraphStore(store).build_dataset(synth_dataset())
    assert report.built > 0
    assert_private(store)


def test_job_rows_consolidation_lock_manifest_and_summary_are_private(tmp_path):
    from jobs.manifest import check_manifest
    from vista.shared.runs.lock import OutputLock
    from vista.shared.runs.progress import ProgressTracker
    from vista.shared.runs.parts import PartWriter, consolidate_parts
    from vista.shared.runs.summary import RunSummary
    from vista.shared.meds.task_key import TaskKey
    from jobs.predict import prediction_outputs
    from trajonco.prediction_rows import PART_SCHEMA, RowContext, part_record, row_from_failure
    from vista.shared.llm.task_usage import TaskUsage

    out = tmp_path / "out"
    with OutputLock(out):
        check_manifest(out, "predict", {"cancer": "lung"})
        writer = PartWriter(out, run_id="r1", schema=PART_SCHEMA)
        row = row_from_failure(TaskKey(1, T0), None, TimeoutError("x"), TaskUsage(),
                               RowContext(cancer="lung", variant="one_stage", model="m", run_id="r1"), wall_s=0.0)
        writer.add(part_record(row, None, TaskUsage()))
        writer.flush()
        consolidate_parts(out, prediction_outputs(out, labelled=True), [TaskKey(1, T0)])
        RunSummary.from_tracker(ProgressTracker("predict", to_run=1), run_id="r1", started_at=datetime.now(timezone.utc),
                                selected=1, skipped=0, retried=0, complete=True, outputs={}, totals={}).write(out)
    names = {p.name for p in out.rglob("*")}
    assert {".lock", "job.json", "predictions.parquet", "prediction_details.parquet", "summary.json", "r1.json"} <= names
    assert_private(out)


def test_cohort_labels_manifest_and_reports_are_private(tmp_path):
    from trajonco.cohorts.builder import write_labels
    from vista.shared.llm.usage import CallRecord, UsageLedger
    from vista.shared.meds.reports import QuarantineReport

    labels = pl.DataFrame({"subject_id": [1], "prediction_time": [T0], "boolean_value": [True], "index_time": [T0],
                           "cancer": ["lung"], "role": ["case"], "matched_to": [2], "age_at_index": [60.0],
                           "sex": ["F"], "split": ["held_out"]})
    write_labels(labels, tmp_path / "cohort" / "labels" / "test.parquet")
    QuarantineReport().write(tmp_path / "cohort" / "quarantine.json")
    QuarantineReport().write(tmp_path / "cohort" / "quarantine.parquet")
    ledger = UsageLedger([CallRecord(call_id="c", agent="worker", model="m", patient_id="1")])
    ledger.to_parquet(tmp_path / "cohort" / "usage.parquet")
    ledger.to_json(tmp_path / "cohort" / "usage.json")
    assert len(list((tmp_path / "cohort").rglob("*.*"))) == 6  # labels/test.parquet + label_details/test.parquet
    assert_private(tmp_path / "cohort")


def test_a_cli_command_writes_privately_whatever_the_umask(tmp_path):
    """`vista graph` (the command a user runs): its graph store is private, as is anything a library writes in the
    process (the command sets the process umask from the data mode)."""
    from tests.graph_fixtures import synth_root
    from vista.cli import main

    store = tmp_path / "graphs"
    assert main(["graph", "--dataset", str(synth_root()), "--store", str(store)]) == 0
    assert_private(store)
    plain = tmp_path / "plain.txt"  # a plain open() in the same process now follows the private umask too
    plain.write_text("x")
    assert mode(plain) == 0o600


def test_a_bad_data_mode_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from tests.graph_fixtures import synth_root
    from vista.cli import main

    monkeypatch.setenv(DATA_MODE_ENV, "everyone")
    assert main(["graph", "--dataset", str(synth_root()), "--store", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: VISTA_DATA_MODE=everyone: expected private (files 0600, folders 0700) or group (0640/0750)"]
    assert not (tmp_path / "g").exists()


def test_a_build_graphs_actor_writes_a_private_store_and_sets_its_workers_umask(tmp_path):
    """The VISTA job's actor, driven as Ray Data drives it (tests/test_jobs_vista.py): its graph store, rows and LLM
    cache are private, and the worker's umask now keeps whatever else it writes private too."""
    from tests.graph_fixtures import synth_records, synth_root
    from tests.test_jobs_vista import run_actor
    from vista.shared.meds.task_key import TaskKey
    from jobs.vista_actor import VistaSettings
    from vista.shared.llm import LLMConfig
    from vista.pipeline import STAGES, PipelineConfig
    from vista.shared.testing.synthetic_server import SyntheticLLMServer
    from vista.shared.meds.tasks import keys_table

    records, _ = synth_records()
    out = tmp_path / "out"
    with SyntheticLLMServer() as server:
        llm = LLMConfig(backend="openai", base_url=server.base_url, model="synthetic", cache_dir=out / "llm_cache")
        settings = VistaSettings(out=out, dataset=synth_root(), pipeline=PipelineConfig(stages=STAGES), llm=llm,
                                 patients_per_actor=2, run_id="test")
        statuses = run_actor(settings, keys_table([TaskKey(s) for s in sorted(records)[:2]]))
    assert [s["status"] for s in statuses] == ["ok", "ok"] and server.stats.requests > 0
    assert list((out / "llm_cache").glob("buckets/*.jsonl")) and list((out / "rows").rglob("*.parquet"))
    assert_private(out)
    assert os.umask(0) == 0o077  # (the fixture restores the test's own)


def test_the_driver_hands_a_relaxed_mode_to_every_worker(monkeypatch):
    from jobs.ray_runtime import _data_mode_env

    assert _data_mode_env() is None  # private: the default on every node, nothing to send
    monkeypatch.setenv(DATA_MODE_ENV, "group")
    assert _data_mode_env() == {"env_vars": {"VISTA_DATA_MODE": "group"}}


def test_a_deduplicated_dataset_copy_is_private_though_copy2_keeps_modes(tmp_path):
    from test_validation_gaps import SHARD, with_duplicates
    from vista.shared.meds.duplicates import write_deduplicated

    source = with_duplicates(tmp_path / "in", splits={1: "train", 2: "train"}, dataset_json={"dataset_name": "d"})
    for path in [source, *source.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)  # a dataset others may read: its copy is still private
    write_deduplicated(source, [SHARD], tmp_path / "fixed")
    assert (tmp_path / "fixed" / SHARD).is_file() and (tmp_path / "fixed" / "metadata").is_dir()
    assert_private(tmp_path / "fixed")


def test_review_packets_and_their_key_are_private(tmp_path):
    from test_human_eval import _runs
    from trajonco.human_eval import export_packets

    one, two = _runs(tmp_path)
    export_packets([one, two], tmp_path / "packets", tmp_path / "secret" / "key.json", n=2, seed=0)
    assert_private(tmp_path / "packets")
    assert_private(tmp_path / "secret")
