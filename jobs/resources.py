"""How many actors a job starts and what each asks for, from the cluster's CPUs and the kind of model.

* **HTTP endpoints** (``backend=openai``): patient actors wait on the network, so each asks for a quarter CPU and
  runs several patients at once (asyncio), up to the gateway's concurrency limit.
* **The embedded model** (llama.cpp in the actor's process) is CPU-bound: one model per actor, its threads matched
  to the actor's CPUs (a whole CPU per actor on machines with 4 or more; half a CPU, one thread, on smaller ones,
  so Ray Data's own tasks always find a CPU share), one actor per spare CPU.

Every figure can be overridden on the command line.

>>> plan_resources(cluster_cpus=2, backend="embedded", two_stage=False, llm_concurrency=4)
ResourcePlan(actors=1, actor_cpus=0.5, patients_per_actor=2, batch_size=2, preprocess_actors=0, preprocess_cpus=0.0, model_threads=1)
>>> plan_resources(cluster_cpus=64, backend="openai", two_stage=True, llm_concurrency=8)
ResourcePlan(actors=4, actor_cpus=0.25, patients_per_actor=8, batch_size=8, preprocess_actors=4, preprocess_cpus=0.25, model_threads=None)
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

IO_ACTOR_CPUS = 0.25
DEFAULT_HTTP_ACTORS = 4


@dataclass(frozen=True, slots=True)
class ResourcePlan:
    """Actors and their CPU shares for one job."""

    actors: int
    actor_cpus: float
    patients_per_actor: int
    batch_size: int
    preprocess_actors: int
    preprocess_cpus: float
    model_threads: int | None  # embedded model threads per actor (None: not embedded)

    @property
    def cpus_needed(self) -> float:
        return self.actors * self.actor_cpus + self.preprocess_actors * self.preprocess_cpus


def add_resource_arguments(parser: argparse.ArgumentParser, *, two_stage_options: bool = True) -> None:
    group = parser.add_argument_group("actors")
    group.add_argument("--actors", type=int, help="patient actors (default: 4 for HTTP endpoints; one per spare CPU for "
                       "the embedded model)")
    group.add_argument("--actor-cpus", type=float, help="CPUs each patient actor asks for (default: 0.25 for HTTP "
                       "endpoints; 1, or 0.5 on machines with fewer than 4 CPUs, for the embedded model)")
    group.add_argument("--patients-per-actor", type=int, help="patients an actor runs concurrently (default: the LLM "
                       "gateway's max_concurrency; 2 for the embedded model)")
    group.add_argument("--batch-size", type=int, help="patients handed to an actor per Ray Data batch (default: "
                       "--patients-per-actor)")
    if two_stage_options:
        group.add_argument("--preprocess-actors", type=int, help="two-stage: preprocessor actors (default: --actors)")
        group.add_argument("--preprocess-cpus", type=float, help="two-stage: CPUs per preprocessor actor (default: "
                           "--actor-cpus)")


def plan_resources(
    *,
    cluster_cpus: float,
    backend: str,
    two_stage: bool,
    llm_concurrency: int,
    actors: int | None = None,
    actor_cpus: float | None = None,
    patients_per_actor: int | None = None,
    batch_size: int | None = None,
    preprocess_actors: int | None = None,
    preprocess_cpus: float | None = None,
) -> ResourcePlan:
    """Defaults for whatever the user did not set (see the module docstring)."""
    embedded = backend == "embedded"
    if embedded:
        cpus = actor_cpus if actor_cpus is not None else (1.0 if cluster_cpus >= 4 else 0.5)
        count = actors if actors is not None else max(1, int(cluster_cpus) - 1)
        per_actor = patients_per_actor if patients_per_actor is not None else 2
        threads: int | None = max(1, math.floor(cpus))
    else:
        cpus = actor_cpus if actor_cpus is not None else IO_ACTOR_CPUS
        count = actors if actors is not None else DEFAULT_HTTP_ACTORS
        per_actor = patients_per_actor if patients_per_actor is not None else llm_concurrency
        threads = None
    for name, value in (("actors", count), ("patients per actor", per_actor)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, not {value}")
    if cpus <= 0:
        raise ValueError(f"actor CPUs must be positive, not {cpus}")
    pre_count = (count if preprocess_actors is None else preprocess_actors) if two_stage else 0
    pre_cpus = (cpus if preprocess_cpus is None else preprocess_cpus) if two_stage else 0.0
    batch = per_actor if batch_size is None else batch_size
    if two_stage and (pre_count < 1 or pre_cpus <= 0):
        raise ValueError(f"the two-stage variant needs at least 1 preprocessor actor with a positive CPU share, not "
                         f"{pre_count} x {pre_cpus}")
    if batch < 1:
        raise ValueError(f"batch size must be at least 1, not {batch}")
    return ResourcePlan(count, cpus, per_actor, batch, pre_count, pre_cpus, threads)
