"""The predict job with every input and output on object storage: a real S3 API server (moto's server mode) on
127.0.0.1 holds the MEDS dataset, the label file, the job's outputs and its LLM response cache.

The job runs as its own process with its own local Ray, so its workers inherit the S3 settings of its environment
(dummy keys and ``AWS_ENDPOINT_URL``, as each node of a cluster would have its own), and nothing is on a shared
local path. A rerun finds every task done; a rerun after the rows are deleted is answered by the S3-held cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from vista.shared.testing.synthetic_server import SyntheticLLMServer

pytestmark = pytest.mark.ray

TEST_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "RAY_DATA_DISABLE_PROGRESS_BARS": "1"}
N_TASKS = 10
BUCKET = "trajonco-test"
DUMMY_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
              "AWS_EC2_METADATA_DISABLED": "true"}  # never real credentials


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto's S3 server on a random 127.0.0.1 port, a bucket, and a pyarrow filesystem talking to it."""
    moto_server = pytest.importorskip("moto.server")
    saved = {name: os.environ.get(name) for name in DUMMY_KEYS}
    os.environ.update(DUMMY_KEYS)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        fs = pafs.S3FileSystem(endpoint_override=endpoint, access_key="testing", secret_key="testing",
                               region="us-east-1", allow_bucket_creation=True)
        fs.create_dir(BUCKET)
        yield {"endpoint": endpoint, "fs": fs}
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
def uploaded(s3, tmp_path_factory):
    """A ~300-subject synthetic MEDS dataset and a MEDS label file of a few tasks (each subject at its last event
    time), uploaded to the bucket."""
    from vista.shared.synth import SynthConfig, generate

    root = tmp_path_factory.mktemp("s3_cohort")
    generate(SynthConfig(n_subjects=300, seed=5, workers=1), root / "meds", progress=False)
    labels = (pl.scan_parquet(str(root / "meds" / "data" / "**" / "*.parquet"))
              .filter(pl.col("time").is_not_null())
              .group_by("subject_id").agg(pl.col("time").max().alias("prediction_time"))
              .sort("subject_id").head(N_TASKS)
              .with_columns((pl.col("subject_id") % 2 == 0).alias("boolean_value")).collect())
    assert labels.height == N_TASKS
    pafs.copy_files(str(root / "meds"), f"{BUCKET}/meds", source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=s3["fs"])
    with s3["fs"].open_output_stream(f"{BUCKET}/labels.parquet") as sink:
        pq.write_table(labels.to_arrow(), sink)
    return {"keys": set(zip(labels["subject_id"].to_list(), labels["prediction_time"].to_list()))}


@pytest.fixture(scope="module")
def llm():
    with SyntheticLLMServer() as server:
        yield server


def run_predict(s3, llm, out: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **TEST_ENV, **DUMMY_KEYS, "AWS_ENDPOINT_URL": s3["endpoint"]}
    env.pop("RAY_ADDRESS", None)  # its own local Ray, whose workers inherit this environment
    argv = ["--dataset", f"s3://{BUCKET}/meds", "--labels", f"s3://{BUCKET}/labels.parquet", "--out", out,
            "--backend", "openai", "--base-url", llm.base_url, "--model", "synthetic", "--context-tokens", "32768",
            "--num-cpus", "2", "--actors", "1", "--patients-per-actor", "4", "--progress-every", "0"]
    done = subprocess.run([sys.executable, "-m", "jobs.predict", *argv], env=env, capture_output=True, text=True,
                          timeout=900, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
    return done


def requests(server: SyntheticLLMServer) -> int:
    with server._lock:
        return server.stats.requests


def keys_of(fs: pafs.FileSystem, path: str) -> set[tuple]:
    table = pq.read_table(path, filesystem=fs)
    return set(zip(table.column("subject_id").to_pylist(), table.column("prediction_time").to_pylist()))


def objects(fs: pafs.FileSystem, prefix: str) -> list[str]:
    return [i.path for i in fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
            if i.type == pafs.FileType.File]


def test_predict_reads_and_writes_only_object_storage_and_resumes_without_paying_twice(s3, uploaded, llm):
    fs, out = s3["fs"], f"s3://{BUCKET}/runs/x"
    first = run_predict(s3, llm, out)
    asked = requests(llm)
    assert asked > 0, first.stdout
    predictions = f"{BUCKET}/runs/x/predictions.parquet"
    table = pq.read_table(predictions, filesystem=fs)
    assert table.num_rows == N_TASKS and keys_of(fs, predictions) == uploaded["keys"]
    details = pq.read_table(f"{BUCKET}/runs/x/prediction_details.parquet", filesystem=fs)
    assert set(details.column("status").to_pylist()) == {"ok"} and details.num_rows == N_TASKS
    stored = objects(fs, f"{BUCKET}/runs/x")
    for name in ("job.json", "summary.json", "predictions.parquet", "prediction_details.parquet",
                 "meds_dev/predictions.parquet"):
        assert f"{BUCKET}/runs/x/{name}" in stored
    assert any("/rows/run=" in p and p.endswith(".parquet") for p in stored)
    assert any("/llm_cache/" in p for p in stored)
    assert not [p for p in stored if p.endswith(".tmp")]  # no temporary object left behind
    assert not (Path(__file__).resolve().parents[1] / "s3:").exists()  # no URI folded into a local path

    rerun = run_predict(s3, llm, out)  # every task has a row: nothing runs
    assert requests(llm) == asked and "already have an output" in rerun.stdout
    assert keys_of(fs, predictions) == uploaded["keys"]

    scored = ["subject_id", "prediction_time", "predicted_boolean_probability"]
    before = pq.read_table(predictions, filesystem=fs).select(scored)
    for path in objects(fs, f"{BUCKET}/runs/x/rows"):  # forget the rows, keep the cache on S3
        fs.delete_file(path)
    run_predict(s3, llm, out)
    assert requests(llm) == asked  # every answer came from the S3-held cache
    after = pq.read_table(predictions, filesystem=fs).select(scored)
    assert after.sort_by("subject_id").equals(before.sort_by("subject_id"))
