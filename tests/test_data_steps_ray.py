"""The data steps on a two-node Ray cluster on this machine (`ray.cluster_utils.Cluster`: a head and a worker node
of one CPU each) give, row for row, what the same steps give in one process.

The job runs as a subprocess driver joining the cluster with ``--address``, as a user's job would, over a small
dataset of several shards (`benchmarks.bench_cohort`'s writer); the local result is `build_cohort` with
`run_local`. Nothing here touches the session head of tests/conftest.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cohort_golden import differences
from conftest import TEST_ENV, short_ray_dir

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """The GCS address of a two-node cluster (head + one worker node, one CPU each)."""
    from ray.cluster_utils import Cluster

    with short_ray_dir("raydata_") as temp_dir:
        nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "temp_dir": str(temp_dir)})
        try:
            nodes.add_node(num_cpus=1)
            nodes.wait_for_nodes()
            yield nodes.address
        finally:
            nodes.shutdown()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    from benchmarks.bench_cohort import write_random_dataset

    root = tmp_path_factory.mktemp("meds") / "meds"
    write_random_dataset(root, 1_200, shard_subjects=200, seed=11)  # six shards
    return root


def _job(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(TEST_ENV, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "jobs.data_steps", *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("name", ["any_cancer"])
def test_cohort_on_two_nodes_matches_the_local_build(name, cluster, dataset, tmp_path):
    from trajonco.cohorts import build_cohort, load_definition

    local, on_ray = tmp_path / "local", tmp_path / "ray"
    build_cohort(dataset, load_definition(name), local)
    done = _job(["cohort", name, "--dataset", str(dataset), "--out", str(on_ray), "--address", cluster,
                 "--task-cpus", "0.5"])
    assert done.returncode == 0, done.stderr
    assert "cases" in done.stdout
    assert differences(on_ray, local) == []
