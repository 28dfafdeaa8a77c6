"""benchmarks/bench_meds_tab.py's own parts: the label layout MEDS-Tab reads and the settings it is given (the whole
run needs MEDS-Tab's venv and minutes of tabularization: docs/meds-dev.md gives its measured figures)."""

from __future__ import annotations

from datetime import datetime

import polars as pl

from benchmarks.bench_meds_tab import MedsTabSettings, main, shard_labels


def test_labels_are_split_by_the_data_shard_holding_each_subject(tmp_path):
    dataset = tmp_path / "meds"
    shards = {"train/0": [1, 2], "train/1": [3], "held_out/0": [4, 5]}
    for name, subjects in shards.items():
        (dataset / "data" / name).parent.mkdir(parents=True, exist_ok=True)
        pl.DataFrame({"subject_id": subjects, "time": [datetime(2020, 1, 1)] * len(subjects),
                      "code": ["X"] * len(subjects)}).write_parquet(dataset / "data" / f"{name}.parquet")
    labels = pl.DataFrame({"subject_id": [1, 3, 4, 5], "prediction_time": [datetime(2021, 1, 1)] * 4,
                           "boolean_value": [True, False, True, False], "role": ["case", "control"] * 2})
    labels.write_parquet(tmp_path / "train.parquet")
    rows = shard_labels(dataset, [tmp_path / "train.parquet"], tmp_path / "labels")
    assert rows == {"held_out": 2, "train": 2}
    written = {p.relative_to(tmp_path / "labels").as_posix(): pl.read_parquet(p) for p in (tmp_path / "labels").rglob("*.parquet")}
    assert {k: v["subject_id"].to_list() for k, v in written.items()} == {
        "train/0.parquet": [1], "train/1.parquet": [3], "held_out/0.parquet": [4, 5]}
    assert written["train/0.parquet"].columns == ["subject_id", "prediction_time", "boolean_value"]  # MEDS columns only


def test_settings_fix_or_leave_the_minimum_code_count_to_meds_tabs_sweep():
    fixed = MedsTabSettings(windows=["365d", "full"], aggs=["code/count"], min_code_count=10, trials=10)
    assert fixed.overrides() == ["tabularization.window_sizes=[365d,full]", "tabularization.aggs=[code/count]",
                                 "tabularization.min_code_inclusion_count=10"]
    swept = fixed.model_copy(update={"min_code_count": None})
    assert not any("min_code" in o for o in swept.overrides()) and "swept by MEDS-Tab" in swept.describe()


def test_bad_options_exit_2(tmp_path, capsys):
    assert main(["--dataset", str(tmp_path), "--cohort", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "labels/train.parquet: label file not found" in capsys.readouterr().err
    (tmp_path / "labels").mkdir()
    for name in ("train", "test"):
        (tmp_path / "labels" / f"{name}.parquet").touch()
    assert main(["--dataset", str(tmp_path), "--cohort", str(tmp_path), "--out", str(tmp_path / "o"),
                 "--min-code-count", "few"]) == 2
    assert "--min-code-count must be a number or 'sweep'" in capsys.readouterr().err
