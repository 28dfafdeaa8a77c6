"""MEDS-Tab (PyPI ``meds-tab`` 0.2.0, the MEDS community's tabular baseline) beside our baselines, on one cohort's
label files: AUROC with a bootstrap CI, the paired difference against each of our baselines on the same test
patients, wall and CPU, in one run.

    python -m benchmarks.bench_meds_tab --dataset MEDS --cohort COHORT --out OUT \\
        [--windows 365d,full] [--aggs code/count,value/sum] [--min-code-count 10 | --min-code-count sweep] \\
        [--trials 10] [--baselines logistic_regression,xgboost]

MEDS-Tab runs in its own venv (``.side-venvs/meds-tab``, scripts/side_venvs.sh: it pins meds 0.3.3 and polars 1.x),
as MEDS-DEV's ``meds_tab/tiny`` model runs it: ``meds-tab-describe``, ``meds-tab-tabularize-static`` (only when a
``static/*`` aggregation is asked), ``meds-tab-tabularize-time-series`` at the label times, then
``meds-tab-xgboost`` (an optuna sweep of ``--trials`` trials, tuned on the ``tuning`` split, its best trial's
``held_out`` predictions kept). The cohort's label files (``COHORT/labels/{train,test}.parquet``, unchanged) are laid
out as MEDS-Tab reads labels: one file per data shard, ``OUT/labels/<split>/<n>.parquet``.

Settings, and why (all printed with the figures):

- ``--windows 365d,full``: MEDS-Tab's default windows (1d, 7d, 30d, 365d, full) multiply the tabularization; on a
  20k-subject dataset they would take over two hours here.
- ``--min-code-count 10``: a fixed minimum number of occurrences for a code to become a feature. MEDS-Tab's
  xgboost launcher otherwise sweeps it over ``tag(log, range(10, 1000000))``. On a cohort of a few hundred labelled
  subjects, most sampled values are above nearly every code's count, so most trials keep few or no codes. A command
  line value fixes it (Hydra's optuna sweeper leaves an overridden key out of the search); ``sweep`` keeps
  MEDS-Tab's default.
- ``--trials 10``: as MEDS-DEV's ``meds_tab/tiny``.

Our baselines (`baselines`: summary features fitted on the train labels, tuned by cross-validation) run in this
process on the same labels. MEDS-Tab's predictions go to ``OUT/meds_tab.parquet`` (MEDS-DEV's columns), which
``trajonco report --predictions lung=OUT/meds_tab.parquet`` also takes: the report then names it ``meds_tab`` (the
file's stem) and puts it in its paired section against every baseline. CPU: each MEDS-Tab command's whole process tree
(`benchmarks.tree_cpu`), this process's own for our baselines. Figures and settings also go to
``OUT/meds_tab_comparison.json``.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import polars as pl
from pydantic import BaseModel, Field

REPO = Path(__file__).resolve().parents[1]
SPLITS = ("train", "tuning", "held_out")


class MedsTabSettings(BaseModel):
    """What MEDS-Tab was asked to do."""

    windows: list[str] = Field(description="tabularization.window_sizes")
    aggs: list[str] = Field(description="tabularization.aggs")
    min_code_count: int | None = Field(description="tabularization.min_code_inclusion_count (None: MEDS-Tab's sweep)")
    trials: int = Field(description="optuna trials of meds-tab-xgboost")

    def overrides(self) -> list[str]:
        """The Hydra overrides every MEDS-Tab command shares."""
        fixed = [] if self.min_code_count is None else [f"tabularization.min_code_inclusion_count={self.min_code_count}"]
        return [f"tabularization.window_sizes=[{','.join(self.windows)}]", f"tabularization.aggs=[{','.join(self.aggs)}]",
                *fixed]

    def describe(self) -> str:
        count = "swept by MEDS-Tab (10 to 1,000,000, log)" if self.min_code_count is None else str(self.min_code_count)
        return (f"windows {', '.join(self.windows)}; aggregations {', '.join(self.aggs)}; minimum code count {count}; "
                f"{self.trials} optuna trials")


class Row(BaseModel):
    model: str
    auroc: float
    lower: float
    upper: float
    wall_s: float
    cpu_s: float
    n_positive: int
    n_negative: int


class Paired(BaseModel):
    baseline: str
    meds_tab_auroc: float
    baseline_auroc: float
    difference: float
    lower: float
    upper: float


class Comparison(BaseModel):
    settings: MedsTabSettings
    settings_text: str
    rows: list[Row]
    paired: list[Paired] = Field(description="MEDS-Tab − baseline on the same test patients, paired bootstrap CI")
    meds_tab_steps: dict[str, float] = Field(description="wall seconds of each MEDS-Tab command")


def shard_labels(dataset: Path, label_files: Sequence[Path], dest: Path) -> dict[str, int]:
    """The rows of ``label_files`` split by the data shard holding each subject, written as
    ``dest/<split>/<n>.parquet`` (MEDS-Tab's label layout); rows per split."""
    labels = pl.concat([pl.read_parquet(p).select("subject_id", "prediction_time", "boolean_value")
                        for p in label_files])
    rows: dict[str, int] = {}
    for shard in sorted((dataset / "data").rglob("*.parquet")):
        relative = shard.relative_to(dataset / "data")
        subjects = pl.read_parquet(shard, columns=["subject_id"])["subject_id"].unique().implode()
        part = labels.filter(pl.col("subject_id").is_in(subjects))
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        part.write_parquet(target)
        rows[relative.parts[0]] = rows.get(relative.parts[0], 0) + part.height
    return rows


def side_venv() -> Path:
    done = subprocess.run(["bash", str(REPO / "scripts" / "side_venvs.sh"), "meds-tab"], capture_output=True,
                          text=True, check=True)
    return Path(done.stdout.strip().splitlines()[-1])


def run_meds_tab(venv: Path, dataset: Path, labels: Path, out: Path, settings: MedsTabSettings) -> tuple[Path, dict[str, float], float]:
    """The MEDS-Tab commands; returns its best trial's held_out predictions, each step's wall and the total CPU."""
    from benchmarks.tree_cpu import run_counted

    work, results = out / "meds_tab_work", out / "meds_tab_results"
    data = [f"input_dir={dataset / 'data'}", f"output_dir={work}"]
    tabular = [*data, *settings.overrides(), "do_overwrite=False", f"input_label_dir={labels}"]
    steps = [("describe", ["meds-tab-describe", *data])]
    if any(agg.startswith("static/") for agg in settings.aggs):
        steps.append(("tabularize-static", ["meds-tab-tabularize-static", *tabular]))
    steps += [
        ("tabularize-time-series", ["meds-tab-tabularize-time-series", "--multirun", "worker=range(0,1)",
                                    "hydra/launcher=joblib", *tabular]),
        ("xgboost", ["meds-tab-xgboost", "--multirun", *data, *settings.overrides(), f"output_model_dir={results}",
                     "task_name=null", "do_overwrite=False", f"hydra.sweeper.n_trials={settings.trials}",
                     "hydra.sweeper.n_jobs=1", f"input_tabularized_cache_dir={work / 'tabularize'}",
                     f"input_label_cache_dir={labels}"]),
    ]
    walls: dict[str, float] = {}
    cpu = 0.0
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(out), "VIRTUAL_ENV": str(venv)}
    for name, command in steps:
        print(f"== {name}: {' '.join(command)}", flush=True)
        counted = run_counted([str(venv / "bin" / command[0]), *command[1:]], env=env, timeout_s=6 * 3600)
        if counted.usage.returncode != 0:
            sys.exit(f"bench_meds_tab: {name} failed (exit {counted.usage.returncode}): {counted.stderr[-2000:]}")
        walls[name], cpu = round(counted.usage.wall_s, 1), cpu + counted.usage.cpu_s
    best = sorted(results.glob("*/best_trial/held_out_predictions.parquet"), key=lambda p: p.stat().st_mtime)
    if not best:
        sys.exit(f"bench_meds_tab: no best_trial/held_out_predictions.parquet under {results}")
    return best[-1], walls, cpu


def compare(dataset: Path, cohort: Path, out: Path, settings: MedsTabSettings, baselines: Sequence[str], *,
            n_resamples: int = 2000, seed: int = 0) -> Comparison:
    from baselines import PredictionFileModel, SummaryFeaturizer, evaluate, fit_and_score, make_baselines, read_labels
    from baselines.evaluation import compare_on_same_rows
    from trajonco.prediction_files import MEDS_DEV_COLUMNS
    from vista.shared.meds.reader import MedsDataset

    train_file, test_file = cohort / "labels" / "train.parquet", cohort / "labels" / "test.parquet"
    rows = shard_labels(dataset, [train_file, test_file], out / "labels")
    print(f"labels by split: {rows}", flush=True)
    best, walls, meds_tab_cpu = run_meds_tab(side_venv(), dataset, out / "labels", out, settings)
    meds_tab_file = out / "meds_tab.parquet"
    pl.read_parquet(best).select(MEDS_DEV_COLUMNS).write_parquet(meds_tab_file)

    started, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    events = MedsDataset(dataset).scan()
    featurizer = SummaryFeaturizer()
    train = featurizer.fit_transform(events, read_labels(train_file))
    test = featurizer.transform(events, read_labels(test_file))
    feature_s, feature_cpu = time.perf_counter() - started, _cpu_since(cpu0)
    models = make_baselines(baselines, seed=seed)
    scored = []
    for model in models:
        t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        scored.append((fit_and_score([model], train, test)[0], time.perf_counter() - t0 + feature_s,
                       _cpu_since(c0) + feature_cpu))
    meds_tab = fit_and_score([PredictionFileModel(meds_tab_file, "meds_tab")], None, test)[0]
    scored.append((meds_tab, sum(walls.values()), meds_tab_cpu))

    table = []
    for scores, wall, cpu in scored:
        evaluation = evaluate(scores, n_resamples=n_resamples, seed=seed)
        table.append(Row(model=scores.model, auroc=evaluation.auroc.value, lower=evaluation.auroc.lower,
                         upper=evaluation.auroc.upper, wall_s=round(wall, 1), cpu_s=round(cpu, 1),
                         n_positive=evaluation.n_positive, n_negative=evaluation.n_negative))
    paired = []
    for scores, _, _ in scored[:-1]:
        diff = compare_on_same_rows(meds_tab, scores, n_resamples=n_resamples, seed=seed)
        paired.append(Paired(baseline=scores.model, meds_tab_auroc=diff.auroc_a, baseline_auroc=diff.auroc_b,
                             difference=diff.difference.value, lower=diff.difference.lower,
                             upper=diff.difference.upper))
    return Comparison(settings=settings, settings_text=settings.describe(), rows=table, paired=paired,
                      meds_tab_steps=walls)


def _cpu_since(before: resource.struct_rusage) -> float:
    now = resource.getrusage(resource.RUSAGE_SELF)
    return (now.ru_utime - before.ru_utime) + (now.ru_stime - before.ru_stime)


def render(result: Comparison) -> str:
    lines = [f"MEDS-Tab settings: {result.settings_text}",
             f"{'model':<22} {'AUROC (95% CI)':<24} {'cases/controls':>15} {'wall s':>8} {'CPU s':>8}"]
    for row in result.rows:
        lines.append(f"{row.model:<22} {row.auroc:.3f} ({row.lower:.3f}-{row.upper:.3f}){'':<5} "
                     f"{row.n_positive:>7}/{row.n_negative:<7} {row.wall_s:>8.1f} {row.cpu_s:>8.1f}")
    lines.append("MEDS-Tab - baseline, same test patients (paired bootstrap 95% CI):")
    for p in result.paired:
        lines.append(f"  vs {p.baseline:<20} {p.difference:+.3f} ({p.lower:+.3f} to {p.upper:+.3f})")
    lines.append("MEDS-Tab steps (wall s): " + ", ".join(f"{k} {v:g}" for k, v in result.meds_tab_steps.items()))
    lines.append("CPU: MEDS-Tab = every command's process tree; baselines = this process (features + fit + score)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True, help="the MEDS dataset")
    parser.add_argument("--cohort", type=Path, required=True, help="a trajonco cohort folder (labels/train.parquet, "
                        "labels/test.parquet)")
    parser.add_argument("--out", type=Path, required=True, help="where MEDS-Tab works and the figures go")
    parser.add_argument("--windows", default="365d,full", help="MEDS-Tab window sizes (default 365d,full)")
    parser.add_argument("--aggs", default="code/count,value/sum", help="MEDS-Tab aggregations")
    parser.add_argument("--min-code-count", default="10", help="a fixed minimum code count, or 'sweep' (MEDS-Tab's)")
    parser.add_argument("--trials", type=int, default=10, help="optuna trials (default 10)")
    parser.add_argument("--baselines", default="logistic_regression,xgboost", help="our baselines to compare")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    args = parser.parse_args(argv)
    for name in ("train", "test"):
        if not (args.cohort / "labels" / f"{name}.parquet").is_file():
            print(f"error: {args.cohort / 'labels' / f'{name}.parquet'}: label file not found", file=sys.stderr)
            return 2
    if args.min_code_count != "sweep" and not args.min_code_count.isdigit():
        print(f"error: --min-code-count must be a number or 'sweep', not {args.min_code_count!r}", file=sys.stderr)
        return 2
    settings = MedsTabSettings(windows=args.windows.split(","), aggs=args.aggs.split(","), trials=args.trials,
                               min_code_count=None if args.min_code_count == "sweep" else int(args.min_code_count))
    args.out.mkdir(parents=True, exist_ok=True)
    result = compare(args.dataset, args.cohort, args.out, settings, args.baselines.split(","),
                     n_resamples=args.resamples)
    (args.out / "meds_tab_comparison.json").write_text(result.model_dump_json(indent=2))
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
