"""The shard-by-shard cohort builder writes, row for row, what the whole-dataset builder wrote (tests/cohort_golden.py
keeps those outputs), and its per-shard summaries hold whatever way the subjects are spread over the shards."""

from __future__ import annotations

from pathlib import Path

import pytest

from cohort_golden import CASES, GOLDEN, differences, manifest_without_path, write_dataset
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


def test_subjects_split_across_shards_are_summarised_whole(datasets, tmp_path):
    """Shards cut mid-subject (each bench shard halved by row, so the boundary subject straddles two files, and
    the halves written in reverse order): the same cohort as from the intact shards."""
    import shutil

    import pyarrow.parquet as pq

    intact = datasets["bench"]
    cut = tmp_path / "cut"
    shutil.copytree(intact / "metadata", cut / "metadata")
    (cut / "data").mkdir()
    for i, shard in enumerate(sorted((intact / "data").glob("*.parquet"))):
        table = pq.read_table(shard)
        half = table.num_rows // 2
        pq.write_table(table.slice(half), cut / "data" / f"{2 * i}.parquet")
        pq.write_table(table.slice(0, half), cut / "data" / f"{2 * i + 1}.parquet")
    out = tmp_path / "from-cut"
    build_cohort(cut, load_definition("lung"), out)
    assert differences(out, GOLDEN / "bench-lung") == ["manifest.json differs"]  # it counts twice the data files
    found, expected = manifest_without_path(out / "manifest.json"), manifest_without_path(GOLDEN / "bench-lung" /
                                                                                         "manifest.json")
    assert (found["dataset"].pop("data_files"), expected["dataset"].pop("data_files")) == (18, 9)
    assert found == expected
