"""The end-of-run summary: what this run did (done, failed by reason, skipped, retried, tokens, cost, speed, start-up
time) and where the consolidated outputs are; printed as a table and written to ``summary.json`` (and
``runs/<run_id>.json``).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field
from rich.console import Console
from rich.table import Table

from vista.shared.llm.job_flow import BudgetStats
from vista.shared.runs.accounting import LLMAccounting
from vista.shared.runs.progress import STATUS_ORDER, USAGE_FIGURES, ProgressTracker, cost_text
from vista.shared.runs.retry import by_class
from vista.shared.storage import join, resolve

EXIT_SOME_FAILED = 3
"""A job's exit status when some selected tasks ended in error or failure (`RunSummary.exit_status`)."""


class AnsweringLLM(BaseModel):
    """Which LLM answered a run: what was configured and what the rows of the run recorded."""

    backend: str = Field(description="the configured backend: embedded (the in-process SmolLM2) or openai")
    endpoint_host: str = Field(description="the endpoint's host:port, or in-process (never a full URL or a key)")
    model: str = Field(description="the model name the run asked for")
    backends: list[str] = Field(default_factory=list, description="backends that answered, from the rows")
    served_models: list[str] = Field(default_factory=list, description="the models as the servers named them in "
                                     "their answers, from the rows ([] when no call was answered)")

    def describe(self) -> str:
        """One line: ``embedded in-process: smollm2-… (served as SmolLM2-135M-Instruct.Q4_1)``."""
        served = ", ".join(self.served_models)
        return (f"{self.backend} {self.endpoint_host}: {self.model}"
                + (f" (served as {served})" if served and served != self.model else ""))


class RunSummary(BaseModel):
    """One run of a job."""

    job: str
    run_id: str
    started_at: datetime
    finished_at: datetime
    wall_s: float
    selected: int = Field(description="tasks the command selected (after --limit/--sample)")
    skipped: int = Field(description="selected tasks that already had an output before this run (not run again)")
    retried: int = Field(0, description="selected tasks with a row that is not ok, run again by the retry policy")
    retry_policy: str | None = Field(None, description="--retry (transient, all or none)")
    retried_by_class: dict[str, int] = Field(default_factory=dict, description="retried tasks per retry class")
    kept_by_class: dict[str, int] = Field(default_factory=dict, description="selected tasks whose row is not ok and "
                                          "was kept by the retry policy, per retry class")
    ran: int = Field(description="tasks this run computed")
    by_status: dict[str, int] = Field(description="tasks this run computed, per status")
    failed_by_reason: dict[str, int] = Field(description="failed and error rows of this run, per reason")
    skipped_in_run: int = Field(0, description="tasks found already done when an actor retried a batch")
    llm_calls: int = Field(0, description="LLM calls recorded in this run's rows kept (cache hits included)")
    cache_hits: int = Field(0, description="calls answered from this output's response cache (OUT/llm_cache)")
    shared_cache_hits: int = Field(0, description="calls answered from a shared response cache outside OUT "
                                   "(--cache-dir, VISTA_LLM_CACHE_DIR): answers paid for elsewhere, not cache hits "
                                   "of this output")
    shared_cache: str | None = Field(None, description="the shared response cache (None: the cache is this output's, "
                                     "or there is none)")
    prompt_tokens: int = Field(0, description="prompt tokens answered by the endpoint (the job's LLM budget ledger; "
                               "the rows' when no budget ran): see llm_accounting")
    completion_tokens: int = Field(0, description="completion tokens answered by the endpoint (as prompt_tokens)")
    cost_usd: float = Field(0.0, description="cost of the tokens answered by the endpoint (as prompt_tokens)")
    llm_accounting: LLMAccounting | None = Field(None, description="tokens answered by the endpoint (ledger), tokens "
                                                 "in rows kept, and the difference paid for rows lost and rerun")
    unpriced_calls: int = Field(0, description="calls whose model has no price in the table (not in cost_usd)")
    patients_per_minute: float = 0.0
    startup_s: float | None = Field(None, description="seconds from the start of the run to the first task an actor "
                                    "started (its first LLM request follows within milliseconds)")
    first_row_s: float | None = Field(None, description="seconds from the start of the run to the first finished task")
    repair_passes: int = Field(0, description="passes over tasks whose row was lost with an actor")
    consolidated_rows: int | None = Field(None, description="tasks with a row (of any run) in the consolidated files")
    output_rows: dict[str, int] = Field(default_factory=dict, description="the rows each consolidated file holds, by "
                                        "name (predict: predictions = the scored tasks, prediction_details = every "
                                        "task with a row)")
    consolidation_s: float | None = Field(None, description="seconds spent building the consolidated file")
    llm_budget: BudgetStats | None = Field(None, description="the job-wide LLM budget and what it allowed "
                                                "(achieved concurrency, 429s, cool-downs); None: no shared budget")
    llm: AnsweringLLM | None = Field(None, description="which LLM answered this run (None: the job ran no LLM stage)")
    complete: bool = Field(description="every selected task has an output")
    outputs: dict[str, str] = Field(default_factory=dict, description="consolidated files written by this run")
    meds_dev_predictions_dir: str | None = Field(None, description="predict: the folder holding MEDS-DEV's "
                                                 "predictions file and nothing else (meds-dev-evaluation "
                                                 "predictions_dir=...); None for the other jobs")
    totals: dict[str, int] = Field(default_factory=dict, description="status counts over every selected task's output")

    @classmethod
    def from_tracker(cls, tracker: ProgressTracker, *, run_id: str, started_at: datetime, selected: int, skipped: int,
                     retried: int, complete: bool, outputs: dict[str, str], totals: dict[str, int]) -> RunSummary:
        ran = sum(tracker.by_status.values())
        wall = tracker.elapsed_s
        return cls(
            job=tracker.job, run_id=run_id, started_at=started_at, finished_at=datetime.now().astimezone(), wall_s=round(wall, 3),
            selected=selected, skipped=skipped, retried=retried, ran=ran,
            by_status={s: tracker.by_status[s] for s in STATUS_ORDER if tracker.by_status[s]},
            failed_by_reason=dict(sorted(tracker.by_reason.items())), skipped_in_run=tracker.skipped_in_run,
            **({name: tracker.usage[name] for name in USAGE_FIGURES} | {"cost_usd": round(tracker.usage["cost_usd"], 6)}),
            patients_per_minute=round(60.0 * ran / wall, 2) if wall > 0 else 0.0,
            startup_s=None if tracker.first_task_start_s is None else round(tracker.first_task_start_s, 3),
            first_row_s=None if tracker.first_row_s is None else round(tracker.first_row_s, 3),
            complete=complete, outputs=outputs, totals=totals,
        )

    def write(self, root: Path | str) -> None:
        """``summary.json`` and ``runs/<run_id>.json`` under ``root`` (a path or an object-store URI)."""
        text = self.model_dump_json(indent=2)
        resolve(join(root, "summary.json")).write_text(text)  # atomic: a rename locally, one PUT on an object store
        resolve(join(root, "runs", f"{self.run_id}.json")).write_text(text)

    def table(self) -> Table:
        table = Table(title=f"{self.job} run {self.run_id}" + ("" if self.complete else " (incomplete)"))
        table.add_column("")
        table.add_column("value", justify="right")
        rows = [
            ("selected", f"{self.selected:,}"),
            ("skipped (done before)", f"{self.skipped:,}"),
            ("ran", f"{self.ran:,}"),
        ]
        rows += [(f"  {status}", f"{count:,}") for status, count in self.by_status.items()]
        rows += [(f"  failed: {reason}", f"{count:,}") for reason, count in self.failed_by_reason.items()]
        if self.retried:
            retried = by_class(self.retried_by_class)
            rows.append((f"retried (--retry {self.retry_policy or 'all'})", f"{self.retried:,}" + (f" ({retried})" if retried else "")))
        if self.kept_by_class:
            rows.append(("failures kept", by_class(self.kept_by_class)))
        if self.skipped_in_run:
            rows.append(("skipped on actor retry", f"{self.skipped_in_run:,}"))
        if self.llm is not None:
            rows.append(("LLM", self.llm.describe()))
        rows.append(("LLM calls (cache hits of this output)", f"{self.llm_calls:,} ({self.cache_hits:,})"))
        if self.shared_cache_hits:
            rows.append((f"  answered by the shared cache {self.shared_cache}", f"{self.shared_cache_hits:,}"))
        acct = self.llm_accounting
        answered = "tokens in / out" + (" (answered by the endpoint)" if acct is not None and acct.source == "ledger" else "")
        rows.append((answered, f"{self.prompt_tokens:,} / {self.completion_tokens:,}"))
        if acct is not None and acct.source == "ledger":
            kept, lost = acct.in_rows_kept, acct.paid_for_rows_lost_and_rerun
            rows.append(("  tokens in rows kept", f"{kept.prompt_tokens:,} / {kept.completion_tokens:,}"))
            if lost is not None and lost.tokens:
                rows.append(("  paid for rows lost and rerun", f"{lost.prompt_tokens:,} / {lost.completion_tokens:,}"
                             + (f" (${lost.cost_usd:.4f})" if lost.cost_usd else "")))
        rows += [
            ("cost", cost_text(self.cost_usd, self.unpriced_calls)),
            ("wall time", f"{self.wall_s:.1f} s"),
            ("patients / minute", f"{self.patients_per_minute:.1f}"),
        ]
        if self.startup_s is not None or self.first_row_s is not None:
            shown = lambda v: "-" if v is None else f"{v:.1f} s"  # noqa: E731
            rows.append(("start-up: first task / first row", f"{shown(self.startup_s)} / {shown(self.first_row_s)}"))
        if self.repair_passes:
            rows.append(("repair passes (rows lost with an actor)", f"{self.repair_passes}"))
        if self.llm_budget is not None:
            b = self.llm_budget
            rows.append(("LLM in flight: limit / mean / peak", f"{b.in_flight_limit or '-'} / {b.in_flight_mean:.1f} / "
                                                                 f"{b.in_flight_peak}"))
            if b.in_flight_window_min is not None and (b.window_decreases or b.in_flight_window_min != b.in_flight_limit):
                rows.append(("LLM in-flight window: min / mean / final", f"{b.in_flight_window_min} / "
                             f"{b.in_flight_window_mean or 0:.1f} / {b.in_flight_window_final} "
                             f"({b.window_decreases:,} decreases)"))
            if b.rate_limited_429 or b.cooldowns:
                rows.append(("429s · job-wide pauses", f"{b.rate_limited_429:,} · {b.cooldowns:,} "
                                                       f"({b.cooldown_s:.1f} s paused)"))
            if b.stopped:
                rows.append(("stopped by the circuit breaker", b.stopped))
        if self.consolidation_s is not None:
            rows.append(("consolidation", f"{self.consolidated_rows or 0:,} tasks in {self.consolidation_s:.1f} s"))
        rows += [(f"  rows in {name}", f"{count:,}") for name, count in self.output_rows.items()]
        rows += [(f"all outputs: {status}", f"{count:,}") for status, count in self.totals.items()]
        rows += [(name, path) for name, path in self.outputs.items()]
        for name, value in rows:
            table.add_row(name, value)
        return table

    def exit_status(self) -> int:
        """The exit status of a job that fails on failed tasks: 0 every selected task ok, `EXIT_SOME_FAILED` some ended
        in error or failure (their rows say why), 1 some have no row yet (rerun the same command)."""
        if not self.complete:
            return 1
        return EXIT_SOME_FAILED if any(status != "ok" for status in self.totals) else 0

    def print(self, console: Console | None = None) -> None:
        (console or Console(width=110)).print(self.table())
