"""The resource plan puts the whole LLM budget within reach: for every cluster shape, budget and variant, the
actors' gateways together allow the budget, every actor holds enough patients to fill its gateway (one-stage: one
call in flight per patient), and the blocks an actor is handed at once hold those patients. (At the server, on Ray:
tests/test_jobs_in_flight_ray.py.)"""

from __future__ import annotations

import pytest

from jobs.resources import plan_resources

BUDGETS = (1, 2, 16, 33, 64, 100, 128, 200, 256, 300, 512, 1000, 4096)


@pytest.mark.parametrize("cpus", [0, 1, 2, 3, 4, 8, 64])
@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("two_stage", [False, True])
def test_the_plan_reaches_the_budget(cpus, fixed, two_stage):
    for budget in BUDGETS:
        plan = plan_resources(cluster_cpus=cpus, backend="openai", two_stage=two_stage, in_flight=budget,
                              fixed_cluster=fixed, shared_budget=True)
        what = (cpus, fixed, two_stage, budget, plan)
        assert plan.actors_max * plan.calls_per_actor >= budget, what
        if plan.preprocess_actors:  # shared budget: either side may hold all of it while the other waits
            assert plan.preprocess_actors * plan.preprocess_calls >= budget, what
        assert plan.patients_per_actor >= plan.calls_per_actor, what
        assert plan.tasks_per_actor * plan.block_rows >= plan.patients_per_actor, what


def test_256_on_a_local_two_core_ray_is_two_actors_of_128_each_holding_160_patients():
    plan = plan_resources(cluster_cpus=2, backend="openai", two_stage=False, in_flight=256, fixed_cluster=True,
                          shared_budget=True)
    assert (plan.actors_min, plan.actors_max, plan.calls_per_actor, plan.patients_per_actor) == (2, 2, 128, 160)
    plan = plan_resources(cluster_cpus=2, backend="openai", two_stage=False, in_flight=512, fixed_cluster=True,
                          shared_budget=True)
    assert (plan.actors_min, plan.actors_max, plan.calls_per_actor) == (2, 2, 256)
