"""build-graphs: the VISTA cohort job — per patient, the MEDS Graph, its TOA timeline and its tumor-board display, on Ray.

    python -m jobs.build_graphs --dataset MEDS --out out/vista [--labels LABELS.parquet] [--limit N | --sample N]
    python -m jobs.build_graphs --xml-dir PATIENT_XML_DIR --out out/vista
    python -m jobs.build_graphs --dataset MEDS --out out/vista --stages graph,toa,display \\
        --backend openai --base-url http://HOST:8000/v1 --model NAME

Inputs. A MEDS dataset (one task per subject, the whole record; with ``--labels`` one per label row, only events
strictly before its prediction time), or ``--xml-dir``: every ``*.xml`` patient file under it, in any XML shape
`vista.graph` reads — the project's ``<patient>`` documents or the VISTA team's ``<eventstream>`` files (one task per
file). MEDS subjects are listed by Ray Data tasks reading only the ``subject_id`` column of each shard; patients'
rows are read inside the actors by the targeted MEDS reader (no shuffle, nothing collected on the driver).

Stages (``--stages``, in order). ``graph``: the MEDS Graph, persisted as GraphML plus a node index per task.
``toa``: the Timeline Object Architecture (`vista.toa`: encounter chunks, extraction sub-agents, unifier, radiology
safety net, episodes). ``display``: the tumor-board variables and summary note (`vista.display`). The default,
``auto``, is ``graph,toa,display`` when a model is chosen (``--backend``/``--base-url``/``--model``, the
``VISTA_LLM_BACKEND``/``_BASE_URL``/``_MODEL`` variables or the ``TRAJONCO_LLM_*`` ones cluster.yaml sets) and
``graph`` alone otherwise: the embedded SmolLM2 default runs at ≈50 tokens/s on two cores, so a whole record's TOA
costs it minutes per patient — ask for it explicitly (``--stages graph,toa,display``) for a handful of patients.
The LLM options are those of ``jobs.predict`` (same flags, same environment, cache under ``OUT/llm_cache``, usage
recorded per task and stage).

Outputs: ``--out`` is a graph store (`vista.graph.GraphStore`), so ``vista ask/source/display/evaluate --store OUT``
open it: per task ``graphs/<bucket>/<task>.graphml`` and its columnar copy (``.nodes.arrow``/``.edges.arrow``),
``toa/<subject>.json`` and ``display/<subject>.json`` (a label task's under ``tasks/<bucket>/<task>/``); one node-index
part per actor batch under ``index/``; per task its row (status, error with the stage, file, patient and field;
counts of nodes, events, timeline events; calls, tokens and seconds per stage), written last as
``patients/<bucket>/<task>.json`` (or ``.failed.json``) — the done marker; at the end ``patients.parquet`` (one row per
selected task), the store's manifest (one part appended with the graphs this run changed) and ``summary.json``.

Resume. Rerunning the same command skips tasks that have a row and runs the rest; inside a task the graph is
rewritten only when its content hash changed and the TOA/display stores make no call for an unchanged patient, so a
task cut short by a kill costs nothing twice. ``--retry-failed`` reruns tasks whose row is an error or failure.
The stages, their settings and the model's answer-determining settings are recorded in ``OUT/job.json``; a rerun
with others stops with the list of differences (choose another ``--out``; graphs rebuild in milliseconds).
Bad input — a malformed XML file, a patient without events, an event dated 2300, a subject whose rows are corrupt —
becomes that task's error row (naming the file, patient, field and row) and the job goes on; a MEDS shard whose
subjects cannot be listed (truncated, not parquet, a column missing) stops a whole-dataset run before it starts,
naming the file (with ``--labels`` its subjects' rows say why instead). The summary counts failures by reason; the
exit status is 3 when any selected task ended in error (0 when all are ok, 1 when some have no row yet, 2 for
unusable options or inputs).
"""

from __future__ import annotations

import argparse
import logging
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path

from rich.console import Console

from vista.llm.prices import PriceTable

from jobs.build_graphs_options import build_parser
from jobs.consolidate import consolidate
from jobs.driver import job_main, keep_planned, label_dataset, new_run_id, stream_status
from jobs.errors import JobInputError
from jobs.job_gateway import warn_if_unpriced
from jobs.llm_budget import job_budget
from jobs.llm_options import answer_fields, check_endpoint, check_llm, llm_config, llm_configured
from jobs.manifest import check_manifest
from jobs.outputs import MarkerStore, OutputLock
from jobs.patient_loader import coding_profile_for
from jobs.progress import ProgressPrinter, ProgressTracker
from jobs.ray_runtime import LIGHT_TASK_CPUS, RayOptions, connect, shutdown
from jobs.resources import plan_resources
from jobs.summary import RunSummary
from jobs.tasks import TaskKey, keys_table, plan_tasks, read_label_tasks, task_keys
from jobs.vista_actor import PATIENTS, VistaActor, VistaSettings
from jobs.vista_index import register_graphs
from jobs.vista_rows import STAGES, VISTA_SCHEMA, rows_to_table, vista_row_from_json
from jobs.vista_tasks import (
    XmlTask,
    check_listable,
    dataset_task_keys,
    list_xml_tasks,
    subject_source,
    unusable_shards,
    with_null_times,
    xml_dataset,
)

log = logging.getLogger("jobs.build_graphs")
FORMAT_VERSION = 3  # of the persisted artifacts (3: the graph store layout `vista` opens); part of the resume check
EXIT_SOME_FAILED = 3


# ---------------------------------------------------------------------------------------------- settings
def resolve_stages(text: str, *, model_configured: bool) -> tuple[str, ...]:
    """The stages a ``--stages`` value asks for, in pipeline order.

    >>> resolve_stages("auto", model_configured=False), resolve_stages("auto", model_configured=True)
    (('graph',), ('graph', 'toa', 'display'))
    >>> resolve_stages("display,toa", model_configured=False)
    ('graph', 'toa', 'display')
    >>> resolve_stages("graph,display", model_configured=True)
    Traceback (most recent call last):
    ...
    jobs.errors.JobInputError: --stages: display needs toa (it is built from the timeline)
    """
    if text.strip() == "auto":
        return STAGES if model_configured else ("graph",)
    asked = {part.strip() for part in text.split(",") if part.strip()}
    unknown = sorted(asked - set(STAGES))
    if unknown:
        raise JobInputError(f"--stages: unknown stage(s) {', '.join(unknown)} (choose from {', '.join(STAGES)}, or auto)")
    if "display" in asked and "toa" not in asked:
        raise JobInputError("--stages: display needs toa (it is built from the timeline)")
    return tuple(stage for stage in STAGES if stage in asked or stage == "graph")


def _toa_config(args: argparse.Namespace):
    from vista.toa import ChunkBudget, TOAConfig

    fields: dict[str, object] = {"safety_net": not args.no_safety_net, "resolve_ambiguous": not args.no_judge}
    if args.profile is not None:
        fields["profile"] = args.profile
    if args.chunk_limit is not None:
        log.warning("--chunk-limit/--chunk-unit are deprecated (kept for one release): use --chunk-tokens N or "
                    "--chunk-chars N")
        fields["budget"] = ChunkBudget(limit=args.chunk_limit, unit=args.chunk_unit)
    elif args.chunk_tokens is not None:
        fields["budget"] = ChunkBudget(limit=args.chunk_tokens, unit="tokens")
    elif args.chunk_chars is not None:
        fields["budget"] = ChunkBudget(limit=args.chunk_chars, unit="chars")
    if args.max_events_per_chunk is not None:
        fields["max_events_per_chunk"] = args.max_events_per_chunk
    if args.answer_tokens is not None:
        fields["max_tokens"] = args.answer_tokens
    return TOAConfig(**fields)


def _display_config(args: argparse.Namespace):
    from vista.display import DisplayConfig

    fields: dict[str, object] = {"summary_note": not args.no_summary_note}
    if args.variables is not None:
        fields["variables"] = args.variables.resolve()
    if args.group_size is not None:
        fields["group_size"] = args.group_size
    if args.answer_tokens is not None:
        fields["max_tokens"] = args.answer_tokens
    return DisplayConfig(**fields)


def build_settings(args: argparse.Namespace, run_id: str) -> VistaSettings:
    """The actors' settings from the command line (`JobInputError` for unusable values)."""
    from pydantic import ValidationError

    for flag, value in (("--limit", args.limit), ("--sample", args.sample), ("--actors", args.actors),
                        ("--patients-per-actor", args.patients_per_actor), ("--batch-size", args.batch_size)):
        if value is not None and value < 1:
            raise JobInputError(f"{flag} must be at least 1, not {value}")
    if args.labels is not None and args.xml_dir is not None:
        raise JobInputError("--labels goes with --dataset, not with --xml-dir")
    stages = resolve_stages(args.stages, model_configured=llm_configured(args))
    llm = llm_config(args) if len(stages) > 1 else None
    try:
        toa, display = _toa_config(args), _display_config(args)
    except ValidationError as exc:
        first = exc.errors(include_input=False)[0]
        raise JobInputError(f"stage option {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    if "display" in stages:
        from vista.display import load_variables

        load_variables(display.variables)  # a bad variables file fails here, naming the file
    if "toa" in stages:
        from vista.toa import load_profile

        load_profile(toa.profile)  # likewise for the event profile
    return VistaSettings(
        out=args.out.resolve(), dataset=args.dataset.resolve() if args.dataset else None,
        coding_profile=coding_profile_for(args.dataset, args.coding_profile) if args.dataset else args.coding_profile,
        xml_dir=args.xml_dir.resolve() if args.xml_dir else None, stages=stages, toa=toa, display=display, llm=llm,
        patients_per_actor=args.patients_per_actor or 1, patient_timeout_s=args.patient_timeout,
        retry_failed=args.retry_failed, run_id=run_id,
    )


def fingerprint(settings: VistaSettings, labels: Path | None) -> dict[str, object]:
    """The settings that decide the outputs (see `jobs.manifest`)."""
    from vista.graph import DEFAULT_CONFIG

    llm_stages = settings.llm_stages
    return {
        "dataset": str(settings.dataset) if settings.dataset else None, "coding_profile": settings.coding_profile,
        "xml_dir": str(settings.xml_dir) if settings.xml_dir else None,
        "labels": str(labels.resolve()) if labels else None, "format": FORMAT_VERSION,
        "graph": DEFAULT_CONFIG.fingerprint(), "stages": list(settings.stages),
        "toa": settings.toa.model_dump(mode="json") if llm_stages else None,
        "display": settings.display.model_dump(mode="json") if "display" in settings.stages else None,
        "llm": answer_fields(settings.llm) if settings.llm is not None else None,
    }


# ---------------------------------------------------------------------------------------------- the run
def run(args: argparse.Namespace, console: Console | None = None) -> RunSummary:
    """The whole job; returns its summary (also printed and written to ``OUT/summary.json``)."""
    console = console or Console(width=110)
    started_at = datetime.now().astimezone()
    run_id = new_run_id()
    settings = build_settings(args, run_id)
    if settings.dataset is not None and args.labels is None:
        check_listable(settings.dataset)  # names every unreadable shard (and a missing dataset) before Ray starts
    elif settings.dataset is not None:
        for problem in unusable_shards(settings.dataset):  # their label rows get error rows naming the shard
            console.print(f"[build-graphs] warning: {problem}", markup=False, highlight=False, soft_wrap=True)
    label_tasks = read_label_tasks(args.labels) if args.labels is not None else None
    xml_tasks = list_xml_tasks(settings.xml_dir) if settings.xml_dir is not None else None
    if settings.llm is not None:
        check_llm(settings.llm)
        check_endpoint(settings.llm)  # one line when the endpoint is unreachable, refuses the key or lacks the model
        warn_if_unpriced(settings.llm)
    out = settings.out
    store = MarkerStore(out, PATIENTS)
    with OutputLock(out):
        check_manifest(out, "build-graphs", fingerprint(settings, args.labels),
                       allow_code_change=args.resume_with_changed_code)
        store.remove_stale_temporaries()
        runtime = connect(RayOptions.from_args(args))
        try:
            if xml_tasks is not None:
                keys = [t.key for t in xml_tasks]
            elif label_tasks is not None:
                keys = task_keys(label_tasks)
            else:
                keys = dataset_task_keys(settings.dataset)
            plan = plan_tasks(keys, store.scan(), limit=args.limit, sample=args.sample, seed=args.seed,
                              retry_failed=args.retry_failed)
            tracker = ProgressTracker("build-graphs", to_run=len(plan.todo), skipped_before=plan.skipped)
            if plan.todo:
                _execute(args, settings, plan.todo, xml_tasks, tracker, runtime, console, len(plan.selected),
                         plan.skipped)
            else:
                console.print(f"[build-graphs] run {run_id}: all {len(plan.selected)} selected tasks already have a row; "
                              "consolidating only", markup=False, highlight=False, soft_wrap=True)
        finally:
            shutdown(runtime)
        report = consolidate(store, plan.selected, out / "patients.parquet", parse=vista_row_from_json,
                             to_table=rows_to_table, schema=VISTA_SCHEMA, status_of=lambda row: row.status)
        index = register_graphs(out, report.path)
        summary = RunSummary.from_tracker(
            tracker, run_id=run_id, started_at=started_at, selected=len(plan.selected), skipped=plan.skipped,
            retried=plan.retried, complete=report.complete,
            outputs={"patients": str(report.path), "index": str(index.path)},
            totals=dict(sorted(report.statuses.items())),
        )
        summary.write(out)
    summary.print(console)
    not_ok = sum(n for status, n in summary.totals.items() if status != "ok")
    if not_ok:
        console.print(f"[build-graphs] {not_ok} of {len(plan.selected)} selected tasks ended in error or failure; "
                      f"their rows in {report.path} say why (rerun with --retry-failed to try them again)",
                      markup=False, highlight=False, soft_wrap=True)
    if report.missing:
        console.print(f"[build-graphs] {len(report.missing)} selected tasks have no row yet; rerun the same command to "
                      "finish", markup=False, highlight=False, soft_wrap=True)
    return summary


def _execute(args: argparse.Namespace, settings: VistaSettings, todo: list[TaskKey], xml_tasks: list[XmlTask] | None,
             tracker: ProgressTracker, runtime, console: Console, selected: int, skipped: int) -> None:
    from ray.data import ActorPoolStrategy

    llm = settings.llm
    if llm is None:  # graph only: CPU-bound actors, one per CPU, small batches
        actors = args.actors or max(1, int(runtime.cpus))
        actor_cpus = args.actor_cpus if args.actor_cpus is not None else 0.5
        batch_size = args.batch_size or 16
        compute = ActorPoolStrategy(size=actors, max_tasks_in_flight_per_actor=2)
        model = "no LLM stage"
    else:
        resources = plan_resources(
            cluster_cpus=runtime.cpus, backend=llm.backend, two_stage=False, llm_concurrency=llm.max_concurrency,
            actors=args.actors, actor_cpus=args.actor_cpus, patients_per_actor=args.patients_per_actor,
            batch_size=args.batch_size)
        if resources.model_threads is not None and llm.threads is None:
            llm = llm.with_overrides({"threads": resources.model_threads})
        settings = settings.model_copy(update={"llm": llm, "patients_per_actor": resources.patients_per_actor})
        actors, actor_cpus, batch_size = resources.actors, resources.actor_cpus, resources.batch_size
        compute = ActorPoolStrategy(size=actors, max_tasks_in_flight_per_actor=2, max_concurrent_calls_per_actor=2,
                                    enable_true_multi_threading=True)
        model = f"model {llm.model} ({llm.backend}, {llm.base_url or 'in-process'})"
    where = "local Ray" if runtime.started_locally else f"cluster {runtime.address}"
    console.print(f"[build-graphs] run {settings.run_id}: {selected} selected, {skipped} already done, {len(todo)} to run "
                  f"({','.join(settings.stages)}) on {where} ({runtime.cpus:g} CPUs): {actors} actor(s) x "
                  f"{actor_cpus:g} CPU; {model}", markup=False, highlight=False, soft_wrap=True)
    planned = keys_table(todo)
    if xml_tasks is not None:
        wanted = set(todo)
        work = xml_dataset([t for t in xml_tasks if t.key in wanted], batch_size)
    elif args.labels is not None:
        work = label_dataset(args.labels, planned, batch_size)
    else:
        work = subject_source(settings.dataset).map_batches(
            with_null_times, batch_format="pyarrow", batch_size=None, num_cpus=LIGHT_TASK_CPUS,
        ).map_batches(
            keep_planned, fn_kwargs={"planned": planned}, batch_format="pyarrow", batch_size=None,
            num_cpus=LIGHT_TASK_CPUS,
        ).repartition(target_num_rows_per_block=batch_size)
    budget_scope = nullcontext() if llm is None else job_budget(
        llm, run_id=settings.run_id, in_flight=resources.in_flight, requests_per_s=args.requests_per_second,
        tokens_per_min=args.tokens_per_minute)
    with budget_scope as budget:  # every actor's LLM requests ask the job's budget; its figures stay in budget.final
        if budget is not None:
            settings = settings.model_copy(update={"llm_budget": budget.ref})
            prices = PriceTable.load(llm.prices_path)
            tracker.live_source = lambda: budget.live(prices, llm.model)
        results = work.map_batches(VistaActor, fn_constructor_kwargs={"settings": settings}, batch_size=batch_size,
                                   batch_format="pyarrow", compute=compute, num_cpus=actor_cpus)
        with ProgressPrinter(tracker, interval_s=args.progress_every):
            stream_status(results, tracker)


def exit_status(summary: RunSummary) -> int:
    """0 all selected tasks ok; 3 some ended in error/failure; 1 some have no row yet."""
    if not summary.complete:
        return 1
    return EXIT_SOME_FAILED if any(status != "ok" for status in summary.totals) else 0


def main(argv: list[str] | None = None, prog: str = "python -m jobs.build_graphs") -> int:
    """Exit status: 0 all selected tasks ok; 3 some ended in error/failure; 1 some have no row yet; 2 bad options."""
    return job_main(lambda: build_parser(prog), run, argv, exit_status)


if __name__ == "__main__":
    raise SystemExit(main())
