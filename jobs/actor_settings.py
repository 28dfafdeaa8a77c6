"""What every cohort job tells its actors besides its pipeline's own config: the run, its slots and time limit, the
part-file flushing and the job's LLM budget (what `jobs.actor_base.TaskActor` reads, with ``out`` and ``llm``)."""

from __future__ import annotations

import argparse
from typing import Self

from pydantic import BaseModel, ConfigDict, Field

from jobs.llm_budget import BudgetRef


class ActorRunSettings(BaseModel):
    """The run's part of a job's actor settings (shipped to every actor; small and picklable)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    patients_per_actor: int = Field(1, ge=1, description="tasks an actor runs at once (its asyncio concurrency)")
    patient_timeout_s: float = Field(3600.0, gt=0, description="a task still running after this becomes an error row")
    flush_rows: int = Field(256, ge=1, description="rows an actor buffers before writing a part file")
    flush_s: float = Field(10.0, gt=0, description="longest a finished row waits in an actor's buffer, in seconds")
    llm_budget: BudgetRef | None = Field(None, description="the job's shared LLM budget (jobs.llm_budget); None: "
                                         "only the actor's own gateway limits")

    @classmethod
    def for_run(cls, args: argparse.Namespace, run_id: str, **fields: object) -> Self:
        """The settings of a run of the job given ``args`` (the `jobs.job_options` groups) and its own ``fields``."""
        return cls(run_id=run_id, patients_per_actor=args.patients_per_actor or 1,
                   patient_timeout_s=args.patient_timeout, flush_rows=args.flush_rows, flush_s=args.flush_seconds,
                   **fields)
