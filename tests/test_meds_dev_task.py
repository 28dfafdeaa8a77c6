"""The lung task in MEDS-DEV's form (meds_dev/tasks/cancer/lung/gap_1y_within_1y.yaml, its predicates in
meds_dev/datasets/<dataset>/predicates.yaml) against ``trajonco cohort lung`` on the same synthetic data.

ACES is run as ``meds-dev-task`` runs it (``aces-cli --multirun data=sharded ... config_path=TASK
predicates_path=PREDICATES``), with the es-aces 0.6.1 that MEDS-DEV 0.0.14 pins, in the side venv
``.side-venvs/meds-dev`` (polars 1.x). The two do not define the same rows, by design:

- MEDS-DEV's task has one row per qualifying encounter (many per subject, cases' and others' alike, unmatched);
  a subject is a *case* when one of its rows is labelled true: a first lung code 365-730 days after an encounter
  with two encounters of history up to it, and data after the target year.
- trajonco's cohort has one row per case (prediction time = first of two lung codes within 60 days - 365 days,
  two visits strictly before it) and one per matched control (same sex and age band).

So the case subjects differ, and every difference is named here by its cause, computed from the events.
"""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from tests.test_meds_dev import meds_dev_venv, side_env  # noqa: F401  (the side venv fixture)
from vista.shared.meds.labels import read_label_table

pytestmark = pytest.mark.slow

REPO = Path(__file__).parents[1]
TASK = REPO / "meds_dev" / "tasks" / "cancer" / "lung" / "gap_1y_within_1y.yaml"
PREDICATES = REPO / "meds_dev" / "datasets" / "trajonco_synth" / "predicates.yaml"
MIMIC_PREDICATES = REPO / "meds_dev" / "datasets" / "MIMIC-IV" / "predicates.yaml"
YEAR, TWO_YEARS = timedelta(days=365), timedelta(days=730)


@pytest.fixture(scope="module")
def aces_labels(lung_cohort_1500, meds_dev_venv, tmp_path_factory) -> pl.DataFrame:  # noqa: F811
    """ACES's rows for the task on the session's synthetic dataset, every split."""
    out = tmp_path_factory.mktemp("lung_task")
    data = lung_cohort_1500.dataset / "data"
    env = side_env(meds_dev_venv)
    shards = subprocess.run([str(meds_dev_venv / "bin" / "expand_shards"), str(data)], capture_output=True, text=True,
                            env=env, check=True).stdout.strip()
    done = subprocess.run([
        str(meds_dev_venv / "bin" / "aces-cli"), "--multirun", "cohort_name=lung", "data=sharded",
        "data.standard=meds", f"data.root={data}", f"data.shard={shards}", f"config_path={TASK}",
        f"predicates_path={PREDICATES}", f"output_filepath={out}" + "/${data._prefix}.parquet",
        f"log_dir={out}/.logs"], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return pl.read_parquet(sorted(out.rglob("*.parquet")))


def case_differences(events: pl.DataFrame, aces: pl.DataFrame, cohort: pl.DataFrame) -> dict[str, list[int]]:
    """The case subjects of each side, and each difference under its cause (the first that applies):

    - ``both``: a case on both sides;
    - trajonco only: ``no_encounter_in_year_before_prediction_time`` (MEDS-DEV's rows sit at encounters: none falls
      365-730 days before the diagnosis), ``one_encounter_of_history`` (such an encounter has fewer than two
      encounters up to it), ``no_data_after_target_year`` (censoring protection);
    - MEDS-DEV only: ``single_lung_code`` (no second lung code within 60 days of the first: trajonco's phenotype wants
      two), ``under_two_visits_before_prediction_time`` (trajonco wants two encounter dates strictly before
      first code - 365 days), ``unmatched`` (trajonco found no control of the same sex and age band, or did not
      sample the case: the manifest counts them);
    - ``unexplained``: anything else (the test wants none).
    """
    lung = events.filter(pl.col("lung")).group_by("subject_id").agg(
        first=pl.col("time").min(), days=pl.col("time").dt.date().unique().sort())
    encounters = events.filter(pl.col("encounter")).select("subject_id", "time")
    last = events.group_by("subject_id").agg(last=pl.col("time").max())
    aces_cases = set(aces.filter(pl.col("boolean_value"))["subject_id"].to_list())
    ours = set(cohort.filter(pl.col("role") == "case")["subject_id"].to_list())
    facts = {row["subject_id"]: row for row in lung.join(last, on="subject_id").iter_rows(named=True)}
    found: dict[str, list[int]] = {"both": sorted(aces_cases & ours)}

    def why_not_aces(subject: int) -> str:
        first, end = facts[subject]["first"], facts[subject]["last"]
        mine = encounters.filter(pl.col("subject_id") == subject)["time"].sort().to_list()
        triggers = [t for t in mine if first - TWO_YEARS <= t < first - YEAR]
        if not triggers:
            return "no_encounter_in_year_before_prediction_time"
        if not any(sum(e <= t for e in mine) >= 2 for t in triggers):
            return "one_encounter_of_history"
        if not any(end > t + TWO_YEARS for t in triggers):
            return "no_data_after_target_year"
        return "unexplained"

    def why_not_ours(subject: int) -> str:
        first, days = facts[subject]["first"], facts[subject]["days"]
        if not any(0 < (d - first.date()).days <= 60 for d in days):
            return "single_lung_code"
        visits = encounters.filter((pl.col("subject_id") == subject) & (pl.col("time") < first - YEAR))
        if visits["time"].dt.date().n_unique() < 2:
            return "under_two_visits_before_prediction_time"
        return "unmatched"

    for subject in sorted(ours - aces_cases):
        found.setdefault(f"trajonco_only:{why_not_aces(subject)}", []).append(subject)
    for subject in sorted(aces_cases - ours):
        found.setdefault(f"meds_dev_only:{why_not_ours(subject)}", []).append(subject)
    return found


def test_the_lung_task_and_trajonco_cohort_lung_agree_on_cases_but_for_named_causes(lung_cohort_1500, aces_labels):
    events = (pl.read_parquet(lung_cohort_1500.dataset / "data" / "*" / "*.parquet").select("subject_id", "time", "code")
              .filter(pl.col("time").is_not_null())
              .with_columns(lung=pl.col("code").str.contains(r"^(ICD10CM//C34|ICD9CM//162\.[2-589])"),
                            encounter=pl.col("code").str.starts_with("ENCOUNTER//")))
    cohort = pl.concat([pl.from_arrow(read_label_table(lung_cohort_1500.lung / "labels" / f"{split}.parquet"))
                        for split in ("test", "train")], how="diagonal_relaxed")
    found = case_differences(events, aces_labels, cohort)
    counts = {cause: len(ids) for cause, ids in found.items()}
    print("lung cases, MEDS-DEV task vs trajonco cohort lung:", counts)
    assert "trajonco_only:unexplained" not in counts and "meds_dev_only:unexplained" not in counts
    assert counts["both"] >= 0.5 * max(len(cohort.filter(pl.col("role") == "case")), 1)

    # every labelled-true row is a first lung code 365-730 days after its encounter (the task's own definition)
    firsts = events.filter(pl.col("lung")).group_by("subject_id").agg(first=pl.col("time").min())
    true_rows = aces_labels.filter(pl.col("boolean_value")).join(firsts, on="subject_id")
    delay = true_rows["first"] - true_rows["prediction_time"]
    assert true_rows.height and delay.min() > YEAR and delay.max() <= TWO_YEARS
    # MEDS-DEV's rows are not matched: far more negatives than positives, several rows per subject
    assert aces_labels.height > 10 * aces_labels["boolean_value"].sum()
    assert aces_labels.group_by("subject_id").len()["len"].max() > 1


def test_the_mimic_predicates_fill_every_placeholder_of_the_task():
    import yaml

    task = yaml.safe_load(TASK.read_text())
    assert all(spec == {"code": "???"} for spec in task["predicates"].values())  # MEDS-DEV's dataset-agnostic form
    for path in (PREDICATES, MIMIC_PREDICATES):
        assert set(yaml.safe_load(path.read_text())["predicates"]) == set(task["predicates"])
    mimic = yaml.safe_load(MIMIC_PREDICATES.read_text())["predicates"]["lung_cancer"]["code"]["regex"]
    codes = pl.Series(["DIAGNOSIS//ICD//10//C3411", "DIAGNOSIS//ICD//9//1622", "DIAGNOSIS//ICD//9//1620",
                       "DIAGNOSIS//ICD//10//C33", "DIAGNOSIS//ICD//10//C7800"])
    assert codes.str.contains(mimic).to_list() == [True, True, False, False, False]  # not trachea, not metastases
