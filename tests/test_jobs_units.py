"""The jobs' parts without Ray: planning, markers, manifests, rows, usage per task, routing, progress, CLI options."""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vista.shared.runs.errors import JobError, JobSettingsMismatch
from vista.shared.llm.remote import JobGateway, ModelRef, RemoteAnswer, RemoteCall, model_ref, resolve_model
from jobs.manifest import check_manifest
from vista.shared.runs.lock import OutputLock
from vista.shared.runs.progress import ProgressTracker, StatusRow, status_table
from jobs.resources import plan_resources
from vista.shared.runs.summary import RunSummary
from vista.shared.meds.task_key import TaskKey
from vista.shared.runs.plan import plan_tasks
from test_agents_patients import CATALOG, lung_patient
from trajonco.agents.schemas import COMPACT_LIMITS, STANDARD_LIMITS, output_models
from trajonco.pipeline import PipelineConfig, run_patient
from trajonco.prediction_rows import (
    PART_SCHEMA,
    PREDICTION_SCHEMA,
    RUN_DEPENDENT_COLUMNS,
    PredictionRow,
    RowContext,
    part_record,
    row_from_failure,
    row_from_result,
    rows_to_table,
)
from vista.shared.llm import LLMConfig, LLMGateway, open_gateway
from vista.shared.llm.schema import response_schema
from vista.shared.testing.scripted import ScriptedBackend
from vista.shared.testing.synthetic_server import SchemaAnswerer, synthetic_content
from vista.shared.llm.task_usage import TaskUsage, usage_scope
from vista.shared.meds.errors import MedsSubjectNotFoundError
from vista.shared.meds.labels import LabelFileError
from vista.shared.meds.tasks import read_label_tasks, task_keys

T0 = datetime(2020, 1, 1)
PREDICTION = datetime(2019, 1, 1)


# ------------------------------------------------------------------------------------------------ planning
def test_plan_limit_and_sample_are_deterministic_and_skip_done_tasks():
    keys = [TaskKey(s, T0) for s in range(100, 0, -1)]
    limited = plan_tasks(keys, {}, limit=10)
    assert [k.subject_id for k in limited.selected] == list(range(1, 11))
    first = plan_tasks(keys, {}, sample=10, seed=3)
    assert first.selected == plan_tasks(keys, {}, sample=10, seed=3).selected
    assert first.selected != plan_tasks(keys, {}, sample=10, seed=4).selected
    assert first.selected == sorted(first.selected, key=TaskKey.sort_key)
    done = {first.selected[0]: "done", first.selected[1]: "failed", TaskKey(999, T0): "done"}
    resumed = plan_tasks(keys, done, sample=10, seed=3)
    assert resumed.skipped == 2 and len(resumed.todo) == 8 and resumed.outside_selection == 1
    retried = plan_tasks(keys, done, sample=10, seed=3, rerun=lambda state: state == "failed")
    assert retried.skipped == 1 and retried.retried == 1 and first.selected[1] in retried.todo
    with pytest.raises(ValueError, match="either limit or sample"):
        plan_tasks(keys, {}, limit=1, sample=1)
    assert len(plan_tasks(keys, {}, sample=500).selected) == 100


def test_task_names_round_trip_and_sort_whole_records_first():
    keys = [TaskKey(3, datetime(2021, 5, 6, 7, 8, 9, 123)), TaskKey(3), TaskKey(2, T0)]
    assert [TaskKey.from_name(k.name) for k in keys] == keys
    assert sorted(keys, key=TaskKey.sort_key)[:2] == [TaskKey(2, T0), TaskKey(3)]


def _write_labels(path: Path, **columns) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def test_label_file_problems_name_the_file_and_field(tmp_path):
    with pytest.raises(LabelFileError, match="label file not found"):
        read_label_tasks(tmp_path / "nope.parquet")
    no_time = _write_labels(tmp_path / "a.parquet", subject_id=pa.array([1], pa.int64()))
    with pytest.raises(LabelFileError, match="a.parquet: field 'prediction_time': missing"):
        read_label_tasks(no_time)
    twice = _write_labels(tmp_path / "b.parquet", subject_id=[1, 1, 2], prediction_time=[T0, T0, T0],
                          boolean_value=[True, False, True])
    with pytest.raises(LabelFileError, match="b.parquet: subject 1: field 'prediction_time': 1 .* more than once"):
        read_label_tasks(twice)
    nulls = _write_labels(tmp_path / "c.parquet", subject_id=[1, 2], prediction_time=pa.array([T0, None], pa.timestamp("us")))
    with pytest.raises(LabelFileError, match="c.parquet: subject 2: field 'prediction_time': 1 of 2 rows have no prediction time"):
        read_label_tasks(nulls)
    unlabeled = _write_labels(tmp_path / "d.parquet", subject_id=[5, 4], prediction_time=[T0, T0], cancer=["lung", "lung"])
    table = read_label_tasks(unlabeled).table
    assert table.column_names == ["subject_id", "prediction_time", "boolean_value"]
    assert table.column("boolean_value").null_count == 2 and task_keys(table) == [TaskKey(5, T0), TaskKey(4, T0)]


# ------------------------------------------------------------------------------------------------ output lock
def test_output_directory_lock_is_exclusive(tmp_path):
    with OutputLock(tmp_path):
        with pytest.raises(JobError, match="another run is writing"):
            with OutputLock(tmp_path):
                pass
    with OutputLock(tmp_path):  # released on exit
        pass


def test_manifest_refuses_to_mix_settings_or_jobs(tmp_path):
    check_manifest(tmp_path, "predict", {"model": "m", "pipeline": {"chunk_tokens": 1500}})
    check_manifest(tmp_path, "predict", {"model": "m", "pipeline": {"chunk_tokens": 1500}})
    with pytest.raises(JobSettingsMismatch, match=r"\(pipeline.chunk_tokens: 1500 -> 4000\);"):
        check_manifest(tmp_path, "predict", {"model": "m", "pipeline": {"chunk_tokens": 4000}})
    with pytest.raises(JobSettingsMismatch, match="outputs of the 'predict' job"):
        check_manifest(tmp_path, "build-graphs", {})


# ------------------------------------------------------------------------------------------------ gateway + rows
def synthetic_backend() -> ScriptedBackend:
    """Schema-valid, prompt-dependent answers (the synthetic endpoint's, without HTTP)."""
    return ScriptedBackend(lambda request: synthetic_content(request.payload()), context_window=8192)


def gateway(backend: ScriptedBackend | None = None, **config) -> LLMGateway:
    return open_gateway(LLMConfig(backend="openai", base_url="http://unused", model="synthetic", **config),
                        backend=backend or synthetic_backend())


def test_synthetic_answers_validate_against_every_agent_model():
    prompt = '<events time="2020-01-05 09:00"><lab id="e3" code="LOINC//718-7">Hb</lab><visit id="e7">x</visit></events>'
    for limits in (STANDARD_LIMITS, COMPACT_LIMITS):
        models = output_models(limits)
        for model in (models.worker, models.manager, models.preprocessor):
            value = SchemaAnswerer().answer(response_schema(model), prompt)
            parsed = model.model_validate(value)
            assert parsed == model.model_validate(SchemaAnswerer().answer(response_schema(model), prompt))
    ids = output_models(STANDARD_LIMITS).preprocessor.model_validate(
        SchemaAnswerer().answer(response_schema(output_models(STANDARD_LIMITS).preprocessor), prompt)).relevant_event_ids
    assert ids and set(ids) <= {"e3", "e7"}


def test_usage_is_attributed_to_the_task_that_made_each_call():
    backend = synthetic_backend()

    async def main():
        gw = JobGateway(gateway(backend))
        model = output_models(COMPACT_LIMITS).preprocessor

        async def task(n: int) -> TaskUsage:
            with usage_scope() as usage:
                await asyncio.gather(*(gw.complete([{"role": "user", "content": f'task {n} call {i} id="e{i}"'}], model,
                                                   agent="preprocessor", patient_id=n) for i in range(n)))
                return usage

        return await asyncio.gather(task(1), task(3), task(5))

    usages = asyncio.run(main())
    assert [u.calls for u in usages] == [1, 3, 5]
    assert [u.prompt_tokens for u in usages] == [10, 30, 50]  # the scripted backend reports 10 prompt tokens a call
    assert len(backend.requests) == 9


class InProcessRemote:
    """Stands in for the preprocessor actor pool: runs calls on another gateway, through the same shipping types."""

    agent = "preprocessor"

    def __init__(self, gw: LLMGateway):
        self.gateway = gw
        self.calls: list[RemoteCall] = []

    async def complete(self, call: RemoteCall) -> RemoteAnswer:
        call = pickle.loads(pickle.dumps(call))  # what crossing a process boundary does to it
        self.calls.append(call)
        result = await self.gateway.complete(call.messages, resolve_model(call.model), agent=call.agent,
                                             patient_id=call.patient_id)
        return pickle.loads(pickle.dumps(RemoteAnswer.from_result(result)))


def test_model_refs_find_the_agents_runtime_models_again():
    for limits in (STANDARD_LIMITS, COMPACT_LIMITS):
        models = output_models(limits)
        for model in (models.worker, models.manager, models.preprocessor, models.any_manager):
            ref = pickle.loads(pickle.dumps(model_ref(model)))
            assert resolve_model(ref) is model
    assert model_ref(PipelineConfig) == ModelRef("trajonco.pipeline_config", "PipelineConfig")


def test_two_stage_with_remote_preprocessors_gives_the_in_process_result():
    record = lung_patient(n_visits=12)
    config = PipelineConfig(variant="two_stage", chunk_tokens=400, context_tokens=8192)
    local = asyncio.run(run_patient(record, CATALOG, gateway(), config, prediction_time=T0))
    remote = InProcessRemote(gateway())

    async def routed():
        with usage_scope() as usage:
            result = await run_patient(record, CATALOG, JobGateway(gateway(), remote=remote), config, prediction_time=T0)
            return result, usage

    result, usage = asyncio.run(routed())
    assert local.chunks.n_chunks > 1 and len(remote.calls) == local.chunks.n_chunks
    assert {c.agent for c in remote.calls} == {"preprocessor"}
    assert _timeless(result) == _timeless(local)
    assert usage.calls == sum(u.calls for u in local.usage.values())


def test_a_preprocessor_call_lost_on_the_hop_is_a_recorded_error_answer(monkeypatch):
    """The pool's handles stand in for actors that never answer: the call times out, is cancelled and comes back as
    an error answer (the chunk is then kept whole), and the pool says whose calls it serves (the two-stage
    preprocessor). (`ray.cancel` itself is not called here: on a stand-in ref it would start a local Ray.)"""
    import concurrent.futures

    from jobs import preprocess_pool
    from jobs.preprocess_pool import PreprocessorPool
    from vista.shared.llm import ErrorKind

    cancelled = []
    monkeypatch.setattr(preprocess_pool, "_cancel", cancelled.append)

    class Silent:
        class complete:
            @staticmethod
            def remote(call):
                future = concurrent.futures.Future()  # never set
                return type("Ref", (), {"future": lambda _: future})()

    pool = PreprocessorPool([Silent()], model="m", timeout_s=0.05)
    call = RemoteCall((), ModelRef("trajonco.pipeline_config", "PipelineConfig"), "preprocessor", "7")
    result = asyncio.run(pool.complete(call)).to_result(PipelineConfig)
    assert pool.agent == "preprocessor" and result.error.kind is ErrorKind.TIMEOUT and len(cancelled) == 1
    assert (result.usage.agent, result.usage.patient_id, result.usage.backend, result.usage.ok) == (
        "preprocessor", "7", "ray-actor", False)


def _timeless(result) -> dict:
    """A result without its timings (wall-clock latencies and seconds spent waiting on the model)."""
    data = result.model_dump(exclude={"latency"})
    for usage in data["usage"].values():
        usage.pop("model_seconds")
    return data


def _result_row(tmp_path_threshold: float = 0.5):
    record = lung_patient(n_visits=6)
    context = RowContext(cancer="lung", variant="one_stage", model="synthetic", threshold=tmp_path_threshold, run_id="r1")

    async def main():
        with usage_scope() as usage:
            result = await run_patient(record, CATALOG, JobGateway(gateway()), PipelineConfig(context_tokens=8192),
                                       prediction_time=T0)
            return result, usage

    result, usage = asyncio.run(main())
    return record, result, row_from_result(TaskKey(record.subject_id, T0), True, result, usage, context, wall_s=1.5)


def test_a_result_row_carries_the_meds_dev_columns_evidence_and_usage():
    record, result, row = _result_row(0.5)
    assert row.status == "ok" and row.risk_score == result.risk_score
    assert row.predicted_boolean_probability == pytest.approx(result.risk_score / 10)
    assert row.predicted_boolean_value == (result.risk_score >= 5)
    events = json.loads(row.events)
    assert events and all(e["sources"] for e in events)
    for event in events:
        for source in event["sources"]:
            assert (source["shard"], source["row"]) == (record.shard, record.provenance(source["event_id"]).row)
    assert len(json.loads(row.risk_trajectory)) == result.chunks.n_chunks
    assert row.llm_calls == sum(u.calls for u in result.usage.values()) and row.prompt_tokens > 0
    assert (row.retry_class, row.call_error_kinds) == (None, None)
    table = rows_to_table([row])
    assert table.schema == PREDICTION_SCHEMA and table.column_names[:5] == [
        "subject_id", "prediction_time", "boolean_value", "predicted_boolean_value", "predicted_boolean_probability"]
    part = pa.Table.from_pylist([part_record(row, result, TaskUsage(calls=3))], schema=PART_SCHEMA)
    again = PredictionRow.model_validate(part.select(PREDICTION_SCHEMA.names).to_pylist()[0])
    assert again == row and set(RUN_DEPENDENT_COLUMNS) <= set(PREDICTION_SCHEMA.names)
    assert json.loads(part.column("result_json")[0].as_py())["risk_score"] == row.risk_score
    assert json.loads(part.column("usage_json")[0].as_py())["calls"] == 3


def test_an_exception_becomes_an_error_row_with_its_reason():
    context = RowContext(cancer="lung", variant="one_stage", model="m", run_id="r1")
    missing = MedsSubjectNotFoundError("/data", "1 requested subject is not in the dataset: 9", field="subject_id")
    row = row_from_failure(TaskKey(9, T0), False, missing, TaskUsage(), context, wall_s=0.1)
    assert (row.status, row.error_kind, row.risk_score, row.scored) == ("error", "data", None, False)
    assert "not in the dataset: 9" in row.error and row.retry_class == "permanent"
    timeout = row_from_failure(TaskKey(9, T0), None, TimeoutError("subject 9: not finished"), TaskUsage(), context, wall_s=1)
    assert (timeout.error_kind, timeout.retry_class) == ("timeout", "transient")
    bug = row_from_failure(TaskKey(9, T0), None, KeyError("x"), TaskUsage(), context, wall_s=1)
    assert (bug.error_kind, bug.retry_class) == ("internal", "permanent")


# ------------------------------------------------------------------------------------------------ progress, summary
def test_progress_and_summary_count_statuses_reasons_tokens_and_skips(tmp_path):
    clock = iter([0.0, 30.0, 30.0, 30.0, 30.0]).__next__
    tracker = ProgressTracker("predict", to_run=4, skipped_before=5, clock=clock)
    tracker.update(status_table([
        StatusRow(1, T0, "ok", None, 4, 1, 1000, 100, 0.5, 0, 2.0),
        StatusRow(2, T0, "failed", "llm_call_failed", 3, 0, 0, 0, 0.0, 3, 1.0),
        StatusRow(3, T0, "error", "data", 0, 0, 0, 0, 0.0, 0, 0.1),
        StatusRow(4, T0, "skipped", None, 0, 0, 0, 0, 0.0, 0, 0.0),
    ]))
    line = tracker.line()
    assert line.startswith("[predict] 4/4 (ok 1, failed 1, error 1) · skipped 6 · 1,100 tokens · $0.5000 (+3 unpriced")
    summary = RunSummary.from_tracker(tracker, run_id="r", started_at=datetime.now(timezone.utc), selected=9, skipped=5,
                                      retried=0, complete=True, outputs={}, totals={"ok": 6})
    assert summary.by_status == {"ok": 1, "failed": 1, "error": 1}
    assert summary.failed_by_reason == {"data": 1, "llm_call_failed": 1} and summary.skipped_in_run == 1
    assert summary.patients_per_minute == pytest.approx(6.0)
    summary.write(tmp_path)
    assert json.loads((tmp_path / "summary.json").read_text())["cache_hits"] == 1
    assert (tmp_path / "runs" / "r.json").is_file()


def test_resource_defaults_and_overrides():
    embedded = plan_resources(cluster_cpus=16, backend="embedded", two_stage=True, in_flight=32)
    assert (embedded.actors_min, embedded.actors_max, embedded.actor_cpus, embedded.model_threads) == (15, 32, 1.0, 1)
    assert embedded.preprocess_actors == 15 and embedded.actor_memory > 0
    custom = plan_resources(cluster_cpus=2, backend="openai", two_stage=False, llm_concurrency=4, actors=1,
                            actor_cpus=0.5, patients_per_actor=3, batch_size=6)
    assert (custom.actors, custom.actor_cpus, custom.patients_per_actor, custom.batch_size, custom.cpus_needed) == (1, 0.5, 3, 6, 0.5)
    with pytest.raises(ValueError, match="actors must be at least 1"):
        plan_resources(cluster_cpus=2, backend="openai", two_stage=False, llm_concurrency=4, actors=0)


@pytest.mark.parametrize("budget", [1, 16, 64, 256, 1000])
@pytest.mark.parametrize("two_stage", [False, True])
def test_the_budget_sets_actors_and_concurrency_and_every_actor_fits_two_cpus(budget, two_stage):
    plan = plan_resources(cluster_cpus=2, backend="openai", two_stage=two_stage, in_flight=budget)
    chain_calls = plan.actors_max * plan.calls_per_actor
    pool_calls = plan.preprocess_actors * plan.preprocess_calls
    assert budget <= chain_calls + pool_calls < budget + plan.actors_max + plan.preprocess_actors  # the budget, no more
    assert plan.patients_per_actor > plan.calls_per_actor  # queued patients keep the gateway busy
    assert plan.cpus_needed <= 2 and plan.actors_min == plan.actors_max  # the whole budget starts on 2 CPUs
    assert plan.tasks_per_actor * plan.block_rows >= plan.patients_per_actor + plan.block_rows
    big = plan_resources(cluster_cpus=0, backend="openai", two_stage=two_stage, in_flight=budget)
    assert big.actors_min == 1 and big.actors_max == plan.actors_max  # a CPU-less head: autoscale from one actor
    shared = plan_resources(cluster_cpus=2, backend="openai", two_stage=two_stage, in_flight=budget, shared_budget=True)
    assert shared.actors_max * shared.calls_per_actor >= budget and (shared.cpus_needed <= 2 or budget > 256)
    if two_stage:  # a job-wide limiter holds the sum: the pool may use the whole budget too
        assert shared.preprocess_actors * shared.preprocess_calls >= budget


# ------------------------------------------------------------------------------------------------ command lines
def test_help_documents_every_option(capsys):
    from jobs import build_graphs, predict

    for module in (predict, build_graphs):
        parser = module.build_parser()
        with pytest.raises(SystemExit):
            parser.parse_args(["--help"])
        text = capsys.readouterr().out
        for action in parser._actions:
            if action.option_strings and action.dest != "help" and action.help != argparse.SUPPRESS:
                assert action.help, f"{module.__name__}: {action.option_strings} has no help"
                assert action.option_strings[-1] in text  # (hidden: only deprecated spellings kept for a release)


def test_llm_settings_precedence(tmp_path):
    from jobs.llm_options import llm_config
    from jobs.predict import build_parser

    base = ["--labels", "l.parquet", "--dataset", "d", "--out", str(tmp_path / "out")]
    args = build_parser().parse_args(base)
    default = llm_config(args, env={})
    assert default.backend == "embedded" and default.cache_dir == (tmp_path / "out" / "llm_cache").resolve()
    cluster = llm_config(args, env={"TRAJONCO_LLM_BASE_URL": "http://h:8000/v1", "TRAJONCO_LLM_MODEL": "m1"})
    assert (cluster.backend, cluster.base_url, cluster.model) == ("openai", "http://h:8000/v1", "m1")
    explicit = build_parser().parse_args(base + ["--model", "m2", "--no-cache", "--llm", "qps=3"])
    chosen = llm_config(explicit, env={"TRAJONCO_LLM_MODEL": "m1", "VISTA_LLM_MAX_TOKENS": "300"})
    assert (chosen.model, chosen.cache_dir, chosen.qps, chosen.max_tokens) == ("m2", None, 3.0, 300)


def test_bad_inputs_exit_with_one_clear_line(tmp_path, capsys):
    from jobs.predict import main

    code = main(["--labels", str(tmp_path / "none.parquet"), "--dataset", str(tmp_path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_any_cancer_row_keeps_the_strongest_cancer_and_every_score():
    from trajonco.cancers import applicable_cancers
    from trajonco.any_cancer import run_any_cancer

    record = lung_patient(n_visits=4)
    context = RowContext(cancer="any", variant="one_stage", model="synthetic", run_id="r1")

    async def main():
        with usage_scope() as usage:
            result = await run_any_cancer(record, CATALOG, JobGateway(gateway()),
                                          PipelineConfig(context_tokens=8192, any_cancer_mode="max"),
                                          prediction_time=T0)
            return result, usage

    result, usage = asyncio.run(main())
    row = row_from_result(TaskKey(record.subject_id, T0), None, result, usage, context, wall_s=1.0)
    scores = json.loads(row.cancer_scores)
    assert len(scores) == len(applicable_cancers("M")) and row.cancer == "any"
    assert row.risk_score == max(s["risk_score"] for s in scores)
    assert next(s for s in scores if s["cancer"] == row.strongest_cancer)["risk_score"] == row.risk_score
    assert row.llm_calls == sum(u.calls for r in result.results for u in r.usage.values())


def test_llm_settings_that_cannot_work_fail_on_the_driver(tmp_path, monkeypatch):
    from vista.shared.llm.endpoint_check import check_llm
    from vista.shared.llm.errors import LLMConfigError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMConfigError, match="needs an API key"):
        check_llm(LLMConfig(backend="openai", model="gpt-4.1-mini"))
    with pytest.raises(LLMConfigError, match="does not exist"):
        check_llm(LLMConfig(model_path=tmp_path / "missing.gguf"))
    check_llm(LLMConfig(backend="openai", base_url="http://127.0.0.1:9/v1", model="m"))
    check_llm(LLMConfig())


def test_the_horizon_follows_the_cohort_the_labels_come_from(tmp_path, caplog):
    from trajonco.cohorts.manifest import label_horizon

    cohort = tmp_path / "cohort"
    (cohort / "labels").mkdir(parents=True)
    (cohort / "manifest.json").write_text(json.dumps({"definition": {"gap_days": 730}}))
    labels = str(cohort / "labels" / "test.parquet")

    assert label_horizon(labels, None) == 730  # the cohort's gap, not a fixed 365
    assert label_horizon(labels, 730) == 730 and not caplog.records
    assert label_horizon(labels, 365) == 365  # explicit wins, but is said
    assert "differs from the gap of the cohort" in caplog.text
    assert label_horizon(str(tmp_path / "aces.parquet"), None) is None  # the pipeline's default (365)


def test_a_bad_assessment_option_is_one_line(tmp_path):
    """On main ``jobs.predict --chunk-tokens 100`` (below the pipeline's 256) ended in a pydantic traceback."""
    from jobs.predict import build_settings
    from jobs.predict_options import build_parser
    from vista.shared.errors import CommandLineError

    args = build_parser().parse_args(["--labels", str(tmp_path / "l.parquet"), "--dataset", str(tmp_path), "--out",
                                      str(tmp_path / "o"), "--chunk-tokens", "100"])
    with pytest.raises(CommandLineError, match="^--chunk-tokens: Input should be greater than or equal to 256$"):
        build_settings(args, "r1")


def test_limit_and_sample_keep_case_control_pairs_whole(tmp_path):
    """On main `--limit N` took the first N label rows in key order: a case without its matched control (or the
    reverse) whenever the pair's subject ids are not adjacent (the issue: --limit 20 gave 12 cases, 8 controls)."""
    import polars as pl

    from spellings import write_mimic_style
    from trajonco.cohorts import build_cohort, load_definition

    root = write_mimic_style(tmp_path / "mimic")
    built = build_cohort(root, load_definition("any_cancer"), tmp_path / "cohort")
    path = built.label_paths["train"]
    from vista.shared.meds.labels import read_label_table

    labels = pl.from_arrow(read_label_table(path))  # the label file and its label_details sidecar
    tasks = read_label_tasks(path)
    keys = task_keys(tasks.table)
    case_of = {int(s): int(m) for s, m in zip(labels["subject_id"], labels["matched_to"]) if m is not None}

    def broken(selected):
        ids = {k.subject_id for k in selected}
        return [s for s, case in case_of.items() if (s in ids) != (case in ids)]

    assert any(broken(plan_tasks(keys, {}, limit=n).selected) for n in range(2, len(keys), 2))  # main's selection
    groups = tasks.groups
    assert groups is not None
    for n in range(2, len(keys), 2):
        for options in ({"limit": n}, {"sample": n, "seed": 4}):
            plan = plan_tasks(keys, {}, groups=groups, **options)
            assert broken(plan.selected) == [] and len(plan.selected) <= n, (options, plan.selected)
            chosen = labels.filter(pl.col("subject_id").is_in([k.subject_id for k in plan.selected]))
            cases = int(chosen["boolean_value"].sum())
            assert groups.describe(plan.selected).endswith(f"{cases} cases, {chosen.height - cases} controls")
    plain = tmp_path / "plain.parquet"  # any MEDS tool's label file: no matching, --limit takes the first N rows
    pl.DataFrame({"subject_id": [1, 2], "prediction_time": [datetime(2020, 1, 1)] * 2,
                  "boolean_value": [True, False]}).write_parquet(plain)
    assert read_label_tasks(plain).groups is None
