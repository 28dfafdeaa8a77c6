"""evaluate: score a cohort's stored tumor-board displays against the truth with an LLM judge, on Ray, resumable.

    python -m jobs.evaluate --store OUT/vista --truth MEDS --out OUT/eval --judge-llm backend=openai \\
        --judge-llm base_url=http://HOST:8000/v1 --judge-llm model=NAME
    python -m jobs.evaluate --store OUT/vista --references refs.csv --out OUT/eval

Inputs. ``--store``: a store holding ``display/<subject>.json`` (what ``jobs.build_graphs --stages
graph,toa,display`` and ``vista display`` write) and, for demographics, the patients' graphs. The truth: the
generator's ``--truth DATASET`` (``ground_truth/oncology.jsonl``) and/or a clinician's ``--references CSV|JSON``
(`vista.evaluation.references`; a patient's clinician answers replace the generator's record). Patients evaluated:
``--subjects``, else every stored display whose patient has a truth.

Work. One Ray task per patient (a small CPU share: the work is waiting on the judge) loads the display, scores
every variable (`vista.evaluation.score_items`: rule scorers, judge calls through its own gateway, a failed judge
call counted as wrong) and writes ``evaluated/<bucket>/<subject>.json`` — the patient's scored items and display,
the done marker — atomically (``.failed.json`` with the error when the patient could not be evaluated). The judge
should not be the display model: its settings come from ``--judge-llm`` or ``VISTA_JUDGE_LLM_*`` (one warning line
when it is the same model).

Resume. A rerun skips patients with a marker (``--retry-failed`` reruns the failed ones) and rebuilds the report
from every marker; the judge and truth settings are recorded in ``OUT/job.json`` and a rerun with others stops
with the differences. At the end: ``evaluation.json`` and ``evaluation.md`` (`EvaluationReport`: headline accuracy
over the tumor-board variables, patient information apart, judge failures counted, display and judge models named).
Exit status 0 when every patient was evaluated, 3 when some failed, 2 for unusable options or inputs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from jobs.errors import JobInputError
from jobs.evaluate_options import build_parser
from jobs.outputs import MarkerStore
from jobs.ray_runtime import RayOptions, connect, shutdown
from jobs.tasks import TaskKey
from vista.atomic import atomic_write_text
from vista.display import TumorBoardDisplay
from vista.evaluation.report import ItemScore
from vista.llm import LLMConfig

log = logging.getLogger(__name__)

MARKERS = "evaluated"
JOB_FILE = "job.json"
TASK_CPUS = 0.25
"""CPU share of one patient's task: it mostly waits on the judge endpoint."""
EXIT_FAILED = 3


class EvaluateSettings(BaseModel):
    """What every patient task needs (pickled to the workers)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    store: Path
    out: Path
    judge: LLMConfig
    threshold: int = Field(default=8, ge=0, le=10)
    judge_max_tokens: int | None = 256
    variables: Path | None = None


class EvaluatedPatient(BaseModel):
    """One patient's marker: the display scored, its items, the judge calls made and where the truth came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject_id: int
    display: TumorBoardDisplay
    items: tuple[ItemScore, ...]
    judge_calls: int
    truth_source: str
    judge_endpoint: str
    judge_backend: str
    seconds: float


# ------------------------------------------------------------------------------------------------ one patient
async def _evaluate(settings: EvaluateSettings, subject_id: int, truth: object) -> EvaluatedPatient:
    from vista.display import DisplayStore, load_variables
    from vista.evaluation.evaluate import as_truth_sources, score_items, source_name
    from vista.evaluation.options import with_demographics
    from vista.llm import LLMGateway
    from vista.llm.config import redact_url

    started = time.perf_counter()
    graph = _stored_graph(settings.store, subject_id)
    displays = DisplayStore(settings.store)
    # with the graph, the store refuses a display built from another version of it (stale provenance)
    display = displays.load(subject_id) if graph is None else displays.load(subject_id, graph)
    demographics = graph.info.demographics if graph is not None else None  # none: that variable is unscorable
    case = as_truth_sources({subject_id: with_demographics(truth, demographics)})[subject_id]
    specs = load_variables(settings.variables)
    async with LLMGateway(settings.judge) as judge:
        items, calls = await score_items({display.method: [display]}, {subject_id: case}, specs, judge,
                                         threshold=settings.threshold, judge_max_tokens=settings.judge_max_tokens)
        endpoint, backend = redact_url(judge.endpoint), judge.backend.name
    return EvaluatedPatient(subject_id=subject_id, display=display, items=tuple(items), judge_calls=calls,
                            truth_source=source_name(case), judge_endpoint=endpoint, judge_backend=backend,
                            seconds=time.perf_counter() - started)


def _stored_graph(store: Path, subject_id: int):
    """The patient's graph when ``store`` is a graph store holding it, else None."""
    from vista.graph.store import GraphStore, is_graph_store

    if not is_graph_store(store):
        return None
    graphs = GraphStore(store)
    return graphs.load(subject_id) if subject_id in graphs else None


def evaluate_patient(settings: EvaluateSettings, subject_id: int, truth: object) -> str:
    """Evaluate one patient and write its marker; returns "done" or "failed" (the error is in the marker)."""
    from vista.errors import user_errors
    from vista.llm.errors import LLMEndpointFailure

    markers = MarkerStore(settings.out, MARKERS)
    key = TaskKey(subject_id)
    try:
        part = asyncio.run(_evaluate(settings, subject_id, truth))
    except (*user_errors(), LLMEndpointFailure, OSError) as exc:
        markers.write(key, json.dumps({"subject_id": subject_id, "error": f"{type(exc).__name__}: {exc}"}).encode(),
                      failed=True)
        return "failed"
    markers.write(key, part.model_dump_json().encode(), failed=False)
    return "done"


# ------------------------------------------------------------------------------------------------ the driver
def load_truths(args: argparse.Namespace) -> dict[int, object]:
    """Subject id → truth (generator record or clinician case) from ``--truth`` and ``--references``."""
    from vista.evaluation.options import load_truth_sources

    if args.truth is None and args.references is None:
        raise JobInputError("give the truth: --truth DATASET (generator records) and/or --references CSV|JSON")
    return load_truth_sources(args.truth, args.references)


def stored_displays(store: Path) -> set[int]:
    from vista.display.store import DISPLAY_DIR

    folder = store / DISPLAY_DIR
    if not folder.is_dir():
        raise JobInputError(f"--store {store}: no {DISPLAY_DIR}/ folder (build displays with jobs.build_graphs "
                            "--stages graph,toa,display or `vista display`)")
    return {int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit()}


def select(args: argparse.Namespace, truths: dict[int, object], displays: set[int]) -> list[int]:
    if args.subjects:
        for sid in args.subjects:
            if sid not in displays:
                raise JobInputError(f"--subjects: {args.store} holds no display of subject {sid}")
            if sid not in truths:
                raise JobInputError(f"--subjects: no truth for subject {sid} in --truth/--references")
        return sorted(set(args.subjects))
    chosen = sorted(displays & set(truths))
    if not chosen:
        raise JobInputError(f"none of the {len(displays)} display(s) in {args.store} has a truth in "
                            "--truth/--references")
    return chosen


def judge_settings(args: argparse.Namespace) -> LLMConfig:
    from vista.evaluation.options import SAME_JUDGE_WARNING, judge_config

    display = LLMConfig.from_env()
    config, same = judge_config(args.judge_llm, display)
    if same:
        log.warning(SAME_JUDGE_WARNING.format(model=config.model))
    return config


def fingerprint(args: argparse.Namespace, judge: LLMConfig) -> dict[str, object]:
    from vista.display.hashing import ANSWER_FIELDS

    return {"judge": json.loads(judge.model_dump_json(include=set(ANSWER_FIELDS) | {"base_url"})),
            "truth": str(args.truth.resolve()) if args.truth else None,
            "references": str(args.references.resolve()) if args.references else None,
            "threshold": args.threshold}


def check_job_file(out: Path, recorded: dict[str, object]) -> None:
    """Record the settings at the first run; refuse a rerun with other settings (naming the differences)."""
    path = out / JOB_FILE
    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        changed = sorted(k for k in set(before) | set(recorded) if before.get(k) != recorded.get(k))
        if changed:
            raise JobInputError(f"{path}: this output was made with other settings ({', '.join(changed)} differ); "
                                "choose another --out or the same settings")
        return
    atomic_write_text(path, json.dumps(recorded, indent=1), fsync=True)  # (its folder made private)


def run_tasks(settings: EvaluateSettings, todo: list[int], truths: dict[int, object], max_in_flight: int | None,
              console=None) -> dict[str, int]:
    """Evaluate ``todo`` as Ray tasks, a bounded number at a time; counts of done and failed patients."""
    import ray

    remote = ray.remote(num_cpus=TASK_CPUS, max_retries=1)(evaluate_patient)
    limit = max_in_flight or max(2, int(2 * ray.cluster_resources().get("CPU", 1)))
    counts = {"done": 0, "failed": 0}
    pending, queue = [], list(todo)
    settings_ref = ray.put(settings)
    while queue or pending:
        while queue and len(pending) < limit:
            sid = queue.pop(0)
            pending.append(remote.remote(settings_ref, sid, truths[sid]))
        ready, pending = ray.wait(pending, num_returns=1)
        for status in ray.get(ready):
            counts[status] += 1
        if console is not None:
            console.print(f"evaluated {counts['done'] + counts['failed']}/{len(todo)} "
                          f"({counts['failed']} failed)", highlight=False)
    return counts


def gather_report(settings: EvaluateSettings, subjects: Iterable[int], resamples: int):
    """The `EvaluationReport` of every done marker among ``subjects``, and the failed patients with their errors."""
    from vista.display import load_variables
    from vista.evaluation.evaluate import report_from_items

    markers = MarkerStore(settings.out, MARKERS)
    parts, failed = [], {}
    for sid in subjects:
        key = TaskKey(sid)
        status, data = markers.status(key), markers.read(key)
        if status == "done" and data is not None:
            parts.append(EvaluatedPatient.model_validate_json(data))
        elif status == "failed" and data is not None:
            failed[sid] = json.loads(data).get("error", "unknown error")
    if not parts:
        return None, failed
    by_method: dict[str, list[TumorBoardDisplay]] = {}
    for part in parts:
        by_method.setdefault(part.display.method, []).append(part.display)
    displays = [p.display for p in parts]
    report = report_from_items(
        [i for p in parts for i in p.items], load_variables(settings.variables), by_method,
        judge_model=settings.judge.model, judge_backend=parts[0].judge_backend, judge_endpoint=parts[0].judge_endpoint,
        judge_is_display_model=settings.judge.model in {d.model for d in displays},
        judge_calls=sum(p.judge_calls for p in parts), truth_sources=tuple(sorted({p.truth_source for p in parts})),
        threshold=settings.threshold, n_resamples=resamples)
    return report, failed


class EvaluateSummary(BaseModel):
    """What a run did: patients selected, skipped (marker present), evaluated now, failed overall."""

    selected: int
    skipped: int
    done_now: int
    failed: int
    report: Path | None
    complete: bool = True


def run(args: argparse.Namespace, console=None) -> EvaluateSummary:
    from rich.console import Console

    console = console or Console(stderr=True)
    judge = judge_settings(args)
    truths = load_truths(args)
    subjects = select(args, truths, stored_displays(args.store))
    settings = EvaluateSettings(store=args.store.resolve(), out=args.out.resolve(), judge=judge,
                                threshold=args.threshold)
    check_job_file(settings.out, fingerprint(args, judge))
    markers = MarkerStore(settings.out, MARKERS)
    markers.remove_stale_temporaries()
    status = {key.subject_id: value for key, value in markers.scan().items()}
    todo = [sid for sid in subjects if status.get(sid) is None or (args.retry_failed and status[sid] == "failed")]
    console.print(f"{len(subjects)} patient(s): {len(subjects) - len(todo)} already evaluated, {len(todo)} to do; "
                  f"judge {judge.model}", highlight=False)
    counts = {"done": 0, "failed": 0}
    if todo:
        runtime = connect(RayOptions.from_args(args, job="evaluate"))
        try:
            counts = run_tasks(settings, todo, truths, args.max_in_flight, console)
        finally:
            shutdown(runtime)
    report, failed = gather_report(settings, subjects, args.resamples)
    for sid, error in sorted(failed.items()):
        console.print(f"subject {sid}: not evaluated: {error}", highlight=False)
    path = None
    if report is not None:
        path = settings.out / "evaluation.json"
        atomic_write_text(path, report.model_dump_json(indent=1), fsync=True)
        atomic_write_text(settings.out / "evaluation.md", report.to_markdown(), fsync=True)
        console.print(report.to_table())
        console.print(f"wrote {path} and evaluation.md", highlight=False)
    return EvaluateSummary(selected=len(subjects), skipped=len(subjects) - len(todo), done_now=counts["done"],
                           failed=len(failed), report=path)


def exit_status(summary: EvaluateSummary) -> int:
    return EXIT_FAILED if summary.failed else 0


def main(argv: list[str] | None = None, prog: str = "python -m jobs.evaluate") -> int:
    from jobs.driver import job_main

    return job_main(lambda: build_parser(prog), run, argv, exit_status=exit_status)


if __name__ == "__main__":
    sys.exit(main())
