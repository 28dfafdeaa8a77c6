"""One rule chooses the LLM in every command and job: whatever names an endpoint means that endpoint (backend
openai); the embedded model runs only when nothing names one; naming the embedded backend and an endpoint is an
error. The three ways in (the Ray jobs' options, `vista`'s and `trajonco predict-one`'s) resolve alike."""

from __future__ import annotations

import logging

import pytest

from vista.shared.llm.config import LLMConfig
from vista.shared.llm.errors import LLMConfigError

URL = "http://127.0.0.1:8999/v1"


def job_config(argv: list[str], env: dict[str, str], tmp_path):
    from jobs.llm_options import llm_config
    from jobs.predict_options import build_parser

    args = build_parser().parse_args(["--labels", "l.parquet", "--dataset", "d", "--out", str(tmp_path / "o"), *argv])
    return llm_config(args, env=env)


def vista_config(argv: list[str], env: dict[str, str], tmp_path):
    from vista.cli import build_parser

    args = build_parser().parse_args(["timeline", "--store", str(tmp_path), "--subject", "1", *argv])
    return LLMConfig.from_cli(args.llm, env=env)


def predict_one_config(argv: list[str], env: dict[str, str], tmp_path):
    from trajonco.cli import build_parser

    args = build_parser().parse_args(["predict-one", "--dataset", str(tmp_path), "--subject", "1", *argv])
    return LLMConfig.from_cli(args.llm, env=env)


ENTRY_POINTS = [job_config, vista_config, predict_one_config]
NAMING_AN_ENDPOINT = [
    (["--base-url", URL, "--model", "M"], {}),  # the README's form, no --backend
    (["--llm", f"base_url={URL}", "--llm", "model=M"], {}),
    (["--model", "M"], {"VISTA_LLM_BASE_URL": URL}),
    (["--model", "M"], {"TRAJONCO_LLM_BASE_URL": URL}),  # deprecated, still read
    ([], {"VISTA_LLM_BASE_URL": URL, "VISTA_LLM_MODEL": "M"}),
]


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("argv, env", NAMING_AN_ENDPOINT)
def test_whatever_names_an_endpoint_means_that_endpoint(entry, argv, env, tmp_path):
    config = entry(argv, env, tmp_path)
    assert (config.backend, config.base_url, config.model) == ("openai", URL, "M")
    assert config.endpoint_host == "127.0.0.1:8999"


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda f: f.__name__)
def test_the_embedded_model_runs_only_when_nothing_names_an_endpoint(entry, tmp_path):
    assert entry([], {}, tmp_path).backend == "embedded"
    assert entry(["--llm", "max_tokens=64"], {"VISTA_LLM_TIMEOUT_S": "30"}, tmp_path).backend == "embedded"
    assert entry(["--backend", "openai", "--base-url", URL], {}, tmp_path).backend == "openai"


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("argv, env, sources", [
    (["--backend", "embedded", "--base-url", URL], {}, ("--backend embedded", f"--base-url {URL}")),
    (["--llm", "backend=embedded"], {"VISTA_LLM_BASE_URL": URL},
     ("--llm backend=embedded", "environment variable VISTA_LLM_BASE_URL")),
])
def test_the_embedded_backend_with_an_endpoint_is_an_error_naming_both(entry, argv, env, sources, tmp_path):
    if entry is not job_config:  # the CLIs' shortcuts are --llm items
        sources = tuple(s.replace("--backend ", "--llm backend=").replace("--base-url ", "--llm base_url=")
                        for s in sources)
    with pytest.raises(LLMConfigError) as caught:
        entry(argv, env, tmp_path)
    message = str(caught.value)
    assert all(source in message for source in sources) and "\n" not in message


def test_the_deprecated_variable_warns(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        config = vista_config([], {"TRAJONCO_LLM_BASE_URL": URL, "TRAJONCO_LLM_MODEL": "M"}, tmp_path)
    assert config.backend == "openai" and "VISTA_LLM_BASE_URL" in caplog.text and "deprecated" in caplog.text


@pytest.fixture(scope="module")
def tiny_cohort(tmp_path_factory):
    """A small synthetic MEDS dataset and a one-row label file."""
    from datetime import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    from vista.shared.synth import SynthConfig, generate

    root = tmp_path_factory.mktemp("choice")
    generate(SynthConfig(n_subjects=20, seed=5, workers=1), root / "meds", progress=False)
    labels = pa.table({"subject_id": pa.array([1], pa.int64()), "prediction_time": pa.array([datetime(2020, 1, 1)],
                       pa.timestamp("us")), "boolean_value": [False]})
    pq.write_table(labels, root / "labels.parquet")
    return root


def test_a_job_with_the_embedded_backend_and_an_endpoint_exits_2_in_one_line(tiny_cohort, tmp_path, capsys):
    from jobs.predict import main

    code = main(["--labels", str(tiny_cohort / "labels.parquet"), "--dataset", str(tiny_cohort / "meds"),
                 "--out", str(tmp_path / "o"), "--backend", "embedded", "--base-url", URL])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "contradicts" in err and "Traceback" not in err


def test_predict_one_with_the_embedded_backend_and_an_endpoint_exits_2_in_one_line(tmp_path, capsys):
    from trajonco.cli import main

    code = main(["predict-one", "--dataset", str(tmp_path), "--subject", "1", "--all-history",
                 "--backend", "embedded", "--base-url", URL])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "contradicts" in err


def test_the_endpoint_host_never_carries_credentials_or_a_path():
    config = LLMConfig.from_cli(["base_url=https://user:s3cret@llm.example.org:8443/openai/v1?key=abc"], env={})
    assert config.endpoint_host == "llm.example.org:8443"
