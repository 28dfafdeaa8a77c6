"""The cohort driver's default hooks, without Ray: every job announces its plan, checks its endpoint, sizes and
streams its actor pool and words its stall hint through `jobs.runner.CohortJob` — no job keeps its own copy."""

from __future__ import annotations

import pytest
from rich.console import Console

from cohort_eval_fixtures import judge_argv, write_inputs
from jobs.build_graphs import GraphsJob
from jobs.evaluate import EvaluateJob, build_parser
from jobs.predict import PredictJob
from jobs.ray_runtime import RayRuntime
from vista.shared.runs.retry import RetryCounts
from jobs.runner import CohortJob
from vista.shared.meds.task_key import TaskKey
from vista.shared.runs.plan import TaskPlan
from vista.shared.testing.synthetic_server import SyntheticLLMServer

SHARED = ("announce", "check_llm_endpoint", "size", "pool_strategy", "stream_pool", "stall_hint")


@pytest.mark.parametrize("job", [PredictJob, GraphsJob, EvaluateJob])
def test_no_job_keeps_its_own_copy_of_the_shared_hooks(job):
    assert [name for name in SHARED if getattr(job, name) is not getattr(CohortJob, name)] == []


def test_the_default_plan_lines_size_and_stall_hint_of_a_job(tmp_path):
    store, dataset = write_inputs(tmp_path, (2, 3))
    with SyntheticLLMServer(model="judge-model") as server:
        job = EvaluateJob(build_parser().parse_args(judge_argv(store, dataset, tmp_path / "eval", server.base_url,
                                                               "--in-flight", "16", "--max-concurrency", "4",
                                                               "--actor-cpus", "1")), "r1")
        job.check()
        job.check_llm_endpoint()  # the endpoint answers GET /models and serves the model
        runtime = RayRuntime(address="127.0.0.1:6379", started_locally=False, connected_here=True, cpus=0.5)
        assert job.size(runtime, 10_000) == 16 and job.resources.actors_max == 4
        console = Console(record=True, width=400)
        keys = [TaskKey(2), TaskKey(3)]
        job.announce(console, TaskPlan(selected=keys, todo=keys), runtime, RetryCounts(), 0.0)
        lines = console.export_text().splitlines()
        assert lines[0].startswith("[evaluate] run r1: 2 selected, 0 already done, 2 to run (judged against the truth")
        assert "on cluster 127.0.0.1:6379 (0.5 CPUs): LLM budget 16 in flight; " in lines[0]
        assert lines[1] == f"[evaluate] model judge-model (openai, {server.base_url.split('/')[2]}); retry policy: transient"
        assert lines[2].startswith("[evaluate] warning: the actors ask for") and "--startup-timeout" in lines[2]
        hint = job.stall_hint(1.0, 2 * 1024**3)
        assert server.base_url in hint and "(1 CPU, 2.0 GiB each)" in hint and "--stall-timeout" in hint
