"""How many actors a job starts and what each asks for: sized from the job's LLM budget, fitted to the cluster.

* **HTTP endpoints** (``backend=openai``): the unit is the job's **LLM in-flight budget** ``B`` (``--in-flight``,
  requests in flight at once over the whole job). A patient actor drives ``C`` requests at once (its gateway's
  concurrency: ``--max-concurrency``, default ``min(B, 32)``) and runs a few more patients than that, so its gateway
  never waits for a patient to be read or rendered; ``ceil(B / C)`` actors cover the budget. Actors wait on the
  network, so they ask for a small CPU share (a quarter CPU; less when the cluster is too small to hold them all,
  so every actor of the budget can start) and the pool autoscales between what fits now and what the budget needs
  (``ActorPoolStrategy(min_size, max_size)``), so nodes that join later are used.
* **The embedded model** (llama.cpp in the actor's process) is CPU-bound: one model per actor, its threads matched
  to the actor's CPUs (a whole CPU per actor on machines with 4 or more; half a CPU, one thread, on smaller ones),
  one actor per spare CPU, and memory for the model (``EMBEDDED_ACTOR_MEMORY``).
* **Two-stage** with a preprocessor pool: when the job's budget is shared (`jobs.llm_budget`: one limiter every
  actor asks before each request), the pool and the patient actors are each sized for the whole budget and the
  limiter keeps their sum within it, so neither side idles while the other has work; without a shared budget the
  budget is split between them (half each). ``--preprocess-actors 0`` runs the chunk filters in the patient actors
  instead (their gateway runs a patient's filters concurrently).

Ray Data only feeds the actors blocks the driver already holds (no read or repartition tasks), so the actors may
use every CPU of the cluster without starving a Ray Data step of its own. Each actor receives blocks of
``block_rows`` tasks, ``tasks_per_actor`` blocks at a time: enough queued patients that a slot freed by a finished
patient is refilled at once, and small blocks so the tail of the job spreads over the actors.

Every figure can be overridden on the command line.

>>> plan = plan_resources(cluster_cpus=2, backend="openai", two_stage=False, in_flight=64)
>>> plan.actors_min, plan.actors_max, plan.actor_cpus, plan.calls_per_actor, plan.patients_per_actor
(2, 2, 0.25, 32, 40)
>>> plan.block_rows, plan.tasks_per_actor, plan.in_flight
(10, 6, 64)
>>> plan = plan_resources(cluster_cpus=2, backend="openai", two_stage=True, in_flight=256)
>>> plan.actors_max, plan.preprocess_actors, plan.calls_per_actor, plan.preprocess_calls, plan.actor_cpus
(4, 4, 32, 32, 0.225)
>>> shared = plan_resources(cluster_cpus=2, backend="openai", two_stage=True, in_flight=256, shared_budget=True)
>>> shared.actors_max, shared.preprocess_actors, shared.actor_cpus
(8, 8, 0.112)
>>> plan_resources(cluster_cpus=0, backend="openai", two_stage=False, in_flight=128).actors_min  # CPU-less head
1
>>> local = plan_resources(cluster_cpus=2, backend="openai", two_stage=False, in_flight=256, fixed_cluster=True)
>>> local.actors_max, local.calls_per_actor  # a local Ray cannot grow: one actor per CPU, each driving more
(2, 128)
>>> plan = plan_resources(cluster_cpus=2, backend="embedded", two_stage=False, in_flight=16)
>>> plan.actors_max, plan.actor_cpus, plan.model_threads, plan.actor_memory == EMBEDDED_ACTOR_MEMORY
(1, 0.5, 1, True)
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace

IO_ACTOR_CPUS = 0.25
"""CPU share of an actor that waits on an HTTP endpoint (lowered on small clusters, never below `MIN_ACTOR_CPUS`)."""
MIN_ACTOR_CPUS = 0.05
CLUSTER_SHARE = 0.9
"""Share of the cluster's CPUs the job's actors may ask for in total (the rest: the driver's work, Ray itself)."""
DEFAULT_IN_FLIGHT = 16
"""LLM requests in flight over the whole job by default (the load the job used to put on an endpoint)."""
MAX_CALLS_PER_ACTOR = 32
"""Most requests one patient actor drives by default: one process parses, validates and renders for all of them."""
EMBEDDED_ACTOR_MEMORY = 700 * 1024**2
"""Memory an embedded-model actor asks for: the model (~0.4 GB with its context), the patients it holds and the
worker itself (Ray Data measured 513 MiB at most for one such actor here)."""


@dataclass(frozen=True, slots=True)
class ResourcePlan:
    """Actors, their shares and their concurrency for one job."""

    in_flight: int  # the job's LLM request budget
    actors_min: int  # patient actors started at once (what fits the cluster now)
    actors_max: int  # patient actors the budget needs (Ray Data autoscales up to it)
    actor_cpus: float
    actor_memory: int | None  # bytes each patient actor asks for (None: no reservation)
    calls_per_actor: int  # the patient actor's gateway concurrency
    patients_per_actor: int  # patients an actor runs at once
    block_rows: int  # tasks per Ray Data block (one UDF call)
    tasks_per_actor: int  # blocks in flight per actor (and its Ray max_concurrency)
    preprocess_actors: int
    preprocess_cpus: float
    preprocess_calls: int  # gateway concurrency of each preprocessor actor
    model_threads: int | None  # embedded model threads per actor (None: not embedded)

    @property
    def actors(self) -> int:
        return self.actors_max

    @property
    def batch_size(self) -> int:
        return self.block_rows

    @property
    def cpus_needed(self) -> float:
        """CPUs the actors ask for once the pool has grown to what the budget needs."""
        return self.actors_max * self.actor_cpus + self.preprocess_actors * self.preprocess_cpus

    @property
    def cpus_at_start(self) -> float:
        return self.actors_min * self.actor_cpus + self.preprocess_actors * self.preprocess_cpus


def add_resource_arguments(parser: argparse.ArgumentParser, *, two_stage_options: bool = True,
                           note: str | None = None) -> None:
    """The options that size a job's actors; ``note`` (e.g. a job's defaults without an LLM) goes under the title."""
    group = parser.add_argument_group("actors (sized from the LLM budget)", description=note)
    group.add_argument("--in-flight", type=int, help=f"the job's LLM budget: requests in flight at once over every "
                       f"actor (default {DEFAULT_IN_FLIGHT}); actors = budget / --max-concurrency")
    group.add_argument("--actors", type=int, help="patient actors (default: enough for --in-flight at --max-concurrency "
                       "each, autoscaling from what fits the cluster; one per spare CPU for the embedded model)")
    group.add_argument("--actor-cpus", type=float, help="CPUs each patient actor asks for (default: 0.25 for HTTP "
                       "endpoints, less when the cluster is too small for the budget's actors; 1, or 0.5 on machines "
                       "with fewer than 4 CPUs, for the embedded model)")
    group.add_argument("--patients-per-actor", type=int, help="patients an actor runs concurrently (default: its "
                       "gateway concurrency + 25%%, twice it with a preprocessor pool; 2 for the embedded model)")
    group.add_argument("--batch-size", type=int, help="patients per Ray Data block handed to an actor (default: a "
                       "quarter of --patients-per-actor)")
    if two_stage_options:
        group.add_argument("--preprocess-actors", type=int, help="two-stage: preprocessor actors (default: enough for "
                           "half the budget; 0 runs the chunk filters inside the patient actors)")
        group.add_argument("--preprocess-cpus", type=float, help="two-stage: CPUs per preprocessor actor (default: "
                           "--actor-cpus)")


def plan_resources(
    *,
    cluster_cpus: float,
    backend: str,
    two_stage: bool,
    in_flight: int | None = None,
    llm_concurrency: int | None = None,
    actors: int | None = None,
    actor_cpus: float | None = None,
    patients_per_actor: int | None = None,
    batch_size: int | None = None,
    preprocess_actors: int | None = None,
    preprocess_cpus: float | None = None,
    shared_budget: bool = False,
    fixed_cluster: bool = False,
) -> ResourcePlan:
    """Defaults for whatever the user did not set (see the module docstring).

    ``llm_concurrency`` is the patient actor's gateway concurrency when the user chose it (``--max-concurrency``);
    ``shared_budget``: a job-wide limiter holds the budget (two-stage sides need not split it); ``fixed_cluster``:
    the cluster cannot grow (a local Ray the job started), so a one-stage job plans no more HTTP actors than CPUs.
    """
    budget = DEFAULT_IN_FLIGHT if in_flight is None else in_flight
    for name, value in (("the LLM budget (--in-flight)", budget), ("actors", actors), ("patients per actor",
                        patients_per_actor), ("gateway concurrency", llm_concurrency), ("batch size", batch_size)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1, not {value}")
    if preprocess_actors is not None and preprocess_actors < 0:
        raise ValueError(f"preprocessor actors must be 0 or more, not {preprocess_actors}")
    for name, share in (("actor CPUs", actor_cpus), ("preprocessor CPUs", preprocess_cpus)):
        if share is not None and share <= 0:
            raise ValueError(f"{name} must be positive, not {share}")
    if backend == "embedded":
        return _embedded(cluster_cpus, two_stage, budget, llm_concurrency, actors, actor_cpus, patients_per_actor,
                         batch_size, preprocess_actors, preprocess_cpus)
    return _http(cluster_cpus, two_stage, budget, llm_concurrency, actors, actor_cpus, patients_per_actor, batch_size,
                 preprocess_actors, preprocess_cpus, shared_budget, fixed_cluster)


def _http(cluster_cpus: float, two_stage: bool, budget: int, calls: int | None, actors: int | None,
          actor_cpus: float | None, per_actor: int | None, block: int | None, pre_actors: int | None,
          pre_cpus: float | None, shared: bool, fixed: bool) -> ResourcePlan:
    pool = two_stage and pre_actors != 0
    if shared:  # the job's limiter holds the sum: each side may use the whole budget while the other waits
        pre_budget, chain_budget = (budget if pool else 0), budget
    else:
        pre_budget = max(1, budget // 2) if pool else 0
        chain_budget = max(1, budget - pre_budget)
    if actors is not None and calls is None:
        calls = math.ceil(chain_budget / actors)
    # one-stage on a cluster that cannot grow: one actor per CPU (measured better on 2 cores; two-stage was not)
    processes = max(1, math.floor(cluster_cpus)) if fixed and cluster_cpus > 0 and not pool else None
    calls = calls or _calls_per_actor(chain_budget, processes)
    count = actors or math.ceil(chain_budget / calls)
    n_pre = (pre_actors or math.ceil(pre_budget / _calls_per_actor(pre_budget, processes))) if pool else 0
    pre_calls = math.ceil(pre_budget / n_pre) if pool else 0
    per_actor = per_actor or (2 * calls if pool else calls + math.ceil(calls / 4))
    cpus = actor_cpus or IO_ACTOR_CPUS
    p_cpus = (pre_cpus or cpus) if pool else 0.0
    usable = CLUSTER_SHARE * cluster_cpus
    needed = count * cpus + n_pre * p_cpus
    if cluster_cpus > 0 and needed > usable:  # a small cluster: thinner shares, so the whole budget can start
        scale = usable / needed
        if actor_cpus is None:
            cpus = max(MIN_ACTOR_CPUS, math.floor(cpus * scale * 1000) / 1000)
        if pool and pre_cpus is None:
            p_cpus = max(MIN_ACTOR_CPUS, math.floor(p_cpus * scale * 1000) / 1000)
    fit = int(max(usable - n_pre * p_cpus, 0.0) // cpus) if cluster_cpus > 0 else 0
    low = count if actors is not None else min(count, max(1, fit))
    rows, tasks = _blocks(per_actor, block)
    return ResourcePlan(budget, low, count, cpus, None, calls, per_actor, rows, tasks, n_pre, p_cpus, pre_calls, None)


def _embedded(cluster_cpus: float, two_stage: bool, budget: int, calls: int | None, actors: int | None,
              actor_cpus: float | None, per_actor: int | None, block: int | None, pre_actors: int | None,
              pre_cpus: float | None) -> ResourcePlan:
    cpus = actor_cpus or (1.0 if cluster_cpus >= 4 else 0.5)
    fit = max(1, int(cluster_cpus) - 1) if cluster_cpus >= 4 else 1
    low = actors or fit
    # a growing cluster gets more models, up to the budget; on a small machine more models would only thrash
    high = actors or (max(low, budget) if cluster_cpus >= 4 or cluster_cpus == 0 else low)
    per_actor = per_actor or 2
    calls = calls or per_actor
    pool = two_stage and pre_actors != 0
    n_pre = (low if pre_actors is None else pre_actors) if pool else 0
    p_cpus = (pre_cpus or cpus) if pool else 0.0
    rows, tasks = _blocks(per_actor, block)
    return ResourcePlan(budget, low, high, cpus, EMBEDDED_ACTOR_MEMORY, calls, per_actor, rows, tasks, n_pre, p_cpus,
                        calls if pool else 0, max(1, math.floor(cpus)))


def spread_over_actors(plan: ResourcePlan, tasks: int) -> ResourcePlan:
    """``plan`` with blocks small enough that a cohort of ``tasks`` reaches every actor.

    An actor takes up to ``tasks_per_actor`` blocks as soon as it is ready, so with a cohort smaller than what the
    actors hold together, the first actor ready could take most of it and drive no more than its own concurrency,
    the others idling: 300 patients in blocks of 40 gave one actor 240 and the endpoint saw 188 of a 256 budget
    (`tests/test_jobs_in_flight_ray.py`). Blocks of ``ceil(tasks / (actors x tasks_per_actor))`` make one actor's
    share at most its part of the cohort. A large cohort keeps the plan.

    >>> plan = plan_resources(cluster_cpus=2, backend="openai", two_stage=False, in_flight=256, fixed_cluster=True)
    >>> plan.block_rows, plan.tasks_per_actor, spread_over_actors(plan, 300).block_rows
    (40, 6, 25)
    >>> spread_over_actors(plan, 100_000).block_rows
    40
    """
    if tasks >= plan.actors_max * plan.tasks_per_actor * plan.block_rows:
        return plan
    rows = max(1, math.ceil(tasks / (plan.actors_max * plan.tasks_per_actor)))
    return replace(plan, block_rows=min(plan.block_rows, rows))


def _calls_per_actor(budget: int, processes: int | None) -> int:
    """Requests one HTTP actor drives: `MAX_CALLS_PER_ACTOR` (or the whole budget, when smaller); on a cluster that
    cannot grow, enough that the budget needs at most ``processes`` actors (one per CPU): more processes than cores
    only contend for them (1,000 patients at 256 in flight on 2 cores: 208 s with 8 actors x 32, 193 s with 2 x 128,
    ``benchmarks/bench_predict_throughput.py``)."""
    calls = min(budget, MAX_CALLS_PER_ACTOR)
    return max(calls, math.ceil(budget / processes)) if processes else calls


def _blocks(per_actor: int, block: int | None) -> tuple[int, int]:
    """Rows per block and blocks in flight per actor: the actor holds its slots' patients plus two blocks."""
    rows = block or max(1, math.ceil(per_actor / 4))
    return rows, math.ceil(per_actor / rows) + 2
