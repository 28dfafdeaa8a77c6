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


@pytest.fixture(scope="module")
def flawed(dataset, tmp_path_factory) -> Path:
    """The dataset with problems for quarantine to find: empty codes in one shard, an empty file."""
    import shutil

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("flawed") / "meds"
    shutil.copytree(dataset, root)
    shard = root / "data" / "1.parquet"
    table = pq.read_table(shard)
    bad = pc.is_in(table.column("subject_id"), value_set=pa.array([210, 215, 333], pa.int64()))
    codes = pc.if_else(pc.and_(bad, pc.equal(table.column("code"), "ENCOUNTER//AMB")), "", table.column("code"))
    pq.write_table(table.set_column(table.schema.get_field_index("code"), "code", codes.cast(pa.large_string())), shard)
    (root / "data" / "9.parquet").write_bytes(b"")
    return root


def test_validate_on_two_nodes_matches_the_local_check(cluster, flawed, tmp_path):
    import pyarrow.parquet as pq

    from vista.shared.meds.validation import validate_dataset

    local = validate_dataset(flawed, on_error="quarantine")
    assert local.subjects_quarantined == 3 and len(local.quarantine.files) == 1 and local.duplicate_rows > 0
    report = tmp_path / "ray.parquet"
    done = _job(["validate", str(flawed), "--quarantine", "--report", str(report), "--address", cluster,
                 "--task-cpus", "0.5"])
    assert done.returncode == 1, done.stderr  # problems were quarantined
    assert pq.read_table(report).to_pylist() == local.quarantine.to_table().to_pylist()
    shown = [line for line in done.stdout.splitlines() if " rows in " not in line]
    expected = [line for line in str(local).splitlines() if " rows in " not in line]
    assert shown[:len(expected)] == expected
    counts = f"checked {local.files_checked} files, {local.subjects_checked} subjects, {local.rows_checked} rows"
    assert counts in done.stdout


def test_features_on_two_nodes_match_the_local_featurizer(cluster, dataset, tmp_path):
    import numpy as np
    import polars as pl
    import scipy.sparse as sp

    from baselines.features import SummaryFeaturizer
    from trajonco.cohorts import build_cohort, load_definition
    from vista.shared.meds.shard_scan import scan_shards

    cohort = tmp_path / "lung"
    build_cohort(dataset, load_definition("lung"), cohort)
    train, test = (pl.read_parquet(cohort / "labels" / f"{name}.parquet") for name in ("train", "test"))
    shards = scan_shards(dataset)
    featurizer = SummaryFeaturizer()
    local = {"train": featurizer.fit_transform(shards, train), "test": featurizer.transform(shards, test)}
    out = tmp_path / "features"
    done = _job(["features", "--dataset", str(dataset), "--cohort", str(cohort), "--out", str(out),
                 "--address", cluster, "--task-cpus", "0.5"])
    assert done.returncode == 0, done.stderr
    names = (out / "features.txt").read_text().splitlines()
    assert tuple(names) == local["train"].feature_names
    for part, matrix in local.items():
        found = sp.load_npz(out / f"{part}.npz")
        assert found.shape == matrix.X.shape and (found != matrix.X).nnz == 0 and matrix.X.nnz > 0
        rows = pl.read_parquet(out / f"{part}_rows.parquet")
        assert np.array_equal(rows["subject_id"].to_numpy(), matrix.subject_ids)
