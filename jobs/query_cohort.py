"""query-cohort: one query plan over every patient of a graph store, on Ray, resumable — one row per patient.

    python -m jobs.query_cohort --store OUT/vista --out OUT/anemia --plan '{"measure": "hemoglobin", ...}'
    python -m jobs.query_cohort --store OUT/vista --out OUT/hgb --question "lowest hemoglobin during carboplatin"

The cohort query's parts of the shared driver (`jobs.runner`): the store's subjects as tasks, a CPU-sized pool of
`QueryActor`s (no LLM: a plan runs without a model) writing `vista.query.cohort.CohortPlanRow` part files, and
``answers.parquet`` at the end. A question is planned once on the driver (`vista.query.bridge`) and the plan kept in
``OUT/plan.json``: a resumed run reads it back and asks nothing (`vista.query.cohort.cohort_plan`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import pyarrow as pa
from pydantic import Field
from rich.console import Console

from jobs.actor_base import TaskActor
from jobs.actor_settings import ActorRunSettings
from jobs.driver import job_main, new_run_id, task_dataset
from jobs.llm_budget import BudgetRef
from jobs.query_cohort_options import build_parser
from jobs.ray_runtime import RayRuntime
from jobs.runner import CohortJob, LazyRay, check_common_options, run_job, stream_actor_pool
from vista.query.cohort import COHORT_PLAN_SCHEMA, CohortPlanRow, cohort_plan, part_record, plan_row
from vista.query.plan import Plan, parse_plan
from vista.shared.cli_kit import check_output_dir
from vista.shared.meds.task_key import TaskKey
from vista.shared.meds.tasks import keys_table
from vista.shared.runs.errors import JobInputError
from vista.shared.runs.parts import PartConsolidation
from vista.shared.runs.progress import ProgressTracker, StatusRow
from vista.shared.runs.summary import RunSummary

ANSWERS_FILE = "answers.parquet"
BLOCK_ROWS = 32
ACTOR_CPUS = 0.5

__all__ = ["QueryActor", "QueryCohortJob", "QuerySettings", "build_parser", "main", "run"]


class QuerySettings(ActorRunSettings):
    """Everything a query actor needs: the store, the plan, where to write, the run."""

    store: Path
    plan: Plan
    out: Path
    llm: None = Field(None, description="no LLM: the plan runs without a model")


class QueryActor(TaskActor[TaskKey]):
    """Answers the plan for each patient as it arrives (a thread per block: opening graphs is CPU and I/O)."""

    part_schema = COHORT_PLAN_SCHEMA

    def __init__(self, settings: QuerySettings):
        super().__init__(settings, dataset=None, coding_profile=None)

    async def prepare(self, batch: pa.Table, keys: list[TaskKey]) -> list[TaskKey]:
        return keys

    async def run(self, key: TaskKey) -> tuple[dict[str, object], StatusRow]:
        settings = self.settings
        row: CohortPlanRow = await asyncio.to_thread(plan_row, settings.store, settings.plan, key.subject_id,
                                                     settings.run_id)
        status = StatusRow(key.subject_id, None, row.status, row.error_kind, 0, 0, 0, 0, 0.0, 0, row.wall_s)
        return part_record(row), status


class QueryCohortJob(CohortJob):
    """The cohort query's parts of the shared driver (`jobs.runner`)."""

    name = "query-cohort"
    output_name = ANSWERS_FILE
    output_schema = COHORT_PLAN_SCHEMA
    settings: QuerySettings

    def __init__(self, args: argparse.Namespace, run_id: str):
        super().__init__(args, run_id)
        self.subjects: list[int] = []
        self.matched = 0

    def check(self) -> None:
        from vista.query.errors import QueryError
        from vista.query.state import open_graph_store

        args = self.args
        check_common_options(args)
        check_output_dir(args.out, resumable=True)
        try:
            store = open_graph_store(args.store)
        except QueryError as exc:
            raise JobInputError(f"--store {exc}") from None
        known = store.subject_ids()
        if args.subjects:
            missing = sorted(set(args.subjects) - set(known))
            if missing:
                raise JobInputError(f"--subjects: no graph in {args.store} for subject(s) {', '.join(map(str, missing))}")
            self.subjects = sorted(set(args.subjects))
        else:
            self.subjects = known
        if not self.subjects:
            raise JobInputError(f"--store {args.store}: holds no patient")
        given = parse_plan(args.plan) if args.plan is not None else None
        plan = cohort_plan(args.out, given, args.question, self._planner if args.question else None)
        self.settings = QuerySettings.for_run(args, self.run_id, store=args.store.resolve(), plan=plan,
                                              out=args.out.resolve())

    async def _planner(self, question: str) -> Plan:
        """The plan of ``question``, asked once with the first patient's names (`vista.query.bridge`)."""
        from jobs.llm_options import llm_config
        from vista.query.bridge import PlanDraft, check_question, plan_from_draft, plan_messages
        from vista.query.entry import open_entry
        from vista.query.errors import PlanError
        from vista.shared.llm import open_gateway

        first = self.subjects[0]
        question = check_question(question, first)
        async with open_gateway(llm_config(self.args)) as gateway:
            result = await gateway.complete(plan_messages(question, open_entry(self.args.store, first)), PlanDraft,
                                            agent="query_plan", max_tokens=160)
        if not result.ok or not result.output.expressible:
            raise PlanError(f"--question: the model gave no plan for {question!r}; give --plan instead")
        return plan_from_draft(result.output)

    def fingerprint(self) -> dict[str, object]:
        return {"store": str(self.settings.store), "plan": json.loads(self.settings.plan.model_dump_json())}

    def task_keys(self, ray: LazyRay) -> list[TaskKey]:
        return [TaskKey(sid) for sid in self.subjects]

    def describe(self) -> str:
        return f"plan {self.settings.plan.compact()}"

    def _pool(self, cpus: float) -> tuple[int, float, int]:
        args = self.args
        return args.actors or max(1, int(cpus)), args.actor_cpus or ACTOR_CPUS, args.batch_size or BLOCK_ROWS

    def pool_clause(self, runtime: RayRuntime, order_s: float) -> str:
        actors, cpus, _ = self._pool(runtime.cpus)
        return f"{actors} actor(s) x {cpus:g} CPU, no LLM"

    def execute(self, pending: list[TaskKey], budget: BudgetRef | None, tracker: ProgressTracker) -> None:
        from ray.data import ActorPoolStrategy

        actors, cpus, block_rows = self._pool(self.cluster_cpus)
        work = task_dataset(keys_table(pending), block_rows)
        compute = ActorPoolStrategy(size=actors, max_tasks_in_flight_per_actor=2, max_concurrent_calls_per_actor=2)
        stream_actor_pool(self, work, QueryActor, {"settings": self.settings}, compute=compute, num_cpus=cpus,
                          memory=None, block_rows=block_rows, tracker=tracker)

    def finish(self, report: PartConsolidation, selected: list[TaskKey]) -> dict[str, str]:
        import pyarrow.parquet as pq

        table = pq.read_table(report.path, columns=["matched"])
        self.matched = sum(bool(v) for v in table.column("matched").to_pylist())
        return {"plan": str(Path(self.settings.out) / "plan.json")}


def run(args: argparse.Namespace, console: Console | None = None) -> RunSummary:
    """The whole job (`jobs.runner.run_job`), then how many patients matched."""
    console = console or Console(width=110)
    job = QueryCohortJob(args, new_run_id())
    started = time.perf_counter()
    summary = run_job(job, console)
    console.print(f"{job.matched} patient(s) matched the plan (rows in {ANSWERS_FILE}), "
                  f"{time.perf_counter() - started:.1f} s", highlight=False)
    return summary


def main(argv: list[str] | None = None, prog: str = "python -m jobs.query_cohort") -> int:
    """Exit status: 0 every patient answered; 3 some rows are errors; 1 some have no row yet; 2 bad options."""
    return job_main(lambda: build_parser(prog), run, argv, RunSummary.exit_status)


if __name__ == "__main__":
    sys.exit(main())
