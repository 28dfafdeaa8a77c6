"""The shard-by-shard cohort builder writes, row for row, what the whole-dataset builder wrote (tests/cohort_golden.py
keeps those outputs), and its per-shard summaries hold whatever way the subjects are spread over the shards."""

from __future__ import annotations

from pathlib import Path

import pytest

from cohort_golden import CASES, GOLDEN, differences, write_dataset
from trajonco.cohorts import build_cohort, load_definition

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("golden")
    return {kind: write_dataset(kind, base / kind) for kind in sorted({kind for kind, _ in CASES})}


@pytest.mark.parametrize(("kind", "name"), CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_outputs_match_the_whole_dataset_builder(kind, name, datasets, tmp_path):
    out = tmp_path / "cohort"
    build_cohort(datasets[kind], load_definition(name), out)
    assert differences(out, GOLDEN / f"{kind}-{name}") == []
