"""``python -m jobs.data_steps features``: a cohort's summary features (`baselines.feature_step.FeatureStep`) with a
Ray task per shard — the training and test matrices `SummaryFeaturizer` gives in one process, written to ``--out``
(``train.npz``/``test.npz``: scipy CSR; ``features.txt``: the column names; ``{train,test}_rows.parquet``: subject and
prediction time of each row)."""

from __future__ import annotations

import argparse
from pathlib import Path

from jobs.data_steps import DataStepCommand, ShardRunner, register


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="MEDS dataset root")
    parser.add_argument("--cohort", required=True, help="a cohort directory (`trajonco cohort`): its "
                        "labels/train.parquet and labels/test.parquet are featurized")
    parser.add_argument("--out", required=True, help="output directory (created; files overwritten)")
    parser.add_argument("--min-prevalence", type=float, default=0.01,
                        help="share of training rows a feature must be present in (default 0.01)")


def _execute(args: argparse.Namespace, run: ShardRunner) -> int:
    import numpy as np
    import polars as pl
    import scipy.sparse as sp

    from baselines.feature_step import feature_step
    from baselines.features import FeatureConfig
    from baselines.labels import read_labels
    from vista.shared.atomic import make_dirs
    from vista.shared.meds.shard_scan import checked_shards

    labels = Path(args.cohort) / "labels"
    paths = (labels / "train.parquet", labels / "test.parquet")
    train, test = (read_labels(path, require_outcome=False) for path in paths)
    scan = checked_shards(args.dataset)
    step = feature_step(scan, train, test, sources=(str(paths[0]), str(paths[1])),
                        config=FeatureConfig(min_prevalence=args.min_prevalence))
    matrices = run(step, step.shards)
    out = Path(args.out)
    make_dirs(out)
    for name, matrix in zip(("train", "test"), matrices):
        sp.save_npz(out / f"{name}.npz", matrix.X)
        pl.DataFrame({"subject_id": matrix.subject_ids, "prediction_time": matrix.prediction_times,
                      **({"boolean_value": matrix.labels} if matrix.labels is not None else {})}
                     ).write_parquet(out / f"{name}_rows.parquet")
        print(f"{name}: {matrix.n_rows:,} rows × {len(matrix.feature_names):,} features, "
              f"{matrix.X.nnz:,} values ({np.count_nonzero(matrix.X.getnnz(axis=1)):,} rows with any)")
    (out / "features.txt").write_text("\n".join(matrices[0].feature_names) + "\n", encoding="utf-8")
    return 0


COMMAND = register(DataStepCommand(
    name="features",
    summary="summary features of a cohort's train and test labels, with a Ray task per shard",
    add_arguments=_add_arguments,
    execute=_execute,
))
