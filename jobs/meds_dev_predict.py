"""MEDS-DEV's ``supervised.predict`` for TrajOnco (``meds_dev/models/trajonco/model.yaml``): the agents, zero-shot.

    python -m jobs.meds_dev_predict --dataset {dataset_dir} --labels-dir {labels_dir} --split {split} \\
        --out {output_dir} [--work DIR] [any jobs.predict option, e.g. --cancer lung --actors 2]

MEDS-DEV gives a model a MEDS dataset, a task's labels (``meds-dev-task`` writes ACES's shards,
``LABELS/<split>/<n>.parquet``; a ``trajonco cohort`` folder's ``labels/<split>.parquet`` is taken too) and an output
folder, then scores every parquet file under that folder (``meds-dev-evaluation predictions_dir={output_dir}``). So:

1. the split's label files are merged into one (`vista.shared.meds.labels.merge_label_files`) under the work folder;
2. `jobs.predict` runs on them there (``WORK/run``: its rows, details, LLM cache, summary), resumable as ever;
3. the run's MEDS-DEV file (``summary.json``'s ``meds_dev_predictions_dir``: float64 scores, the form MEDS-DEV
   0.0.14's meds-evaluation 0.0.3 reads) is copied to ``{output_dir}/predictions.parquet``, alone there.

The work folder (default: ``{output_dir}.trajonco`` beside the output folder, never inside it: the evaluator would
read the run's other parquet files) keeps the run, so a rerun pays no LLM call twice. The LLM is the job's default
choice: ``VISTA_LLM_*`` environment variables, else the embedded model. A model.yaml command is fixed text, so more
jobs.predict options may also come from ``TRAJONCO_PREDICT_ARGS`` (split as a shell would), before the command's own.
Exit status: that of jobs.predict (0 complete, 1 some task without a row, 2 bad input, 4 stalled).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from pathlib import Path

from trajonco.prediction_files import MEDS_DEV_OUTPUT, PREDICTIONS_FILE
from vista.shared.atomic import atomic_path
from vista.shared.runs.errors import JobInputError

PREDICT_ARGS_ENV = "TRAJONCO_PREDICT_ARGS"


def build_parser(prog: str = "python -m jobs.meds_dev_predict") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="TrajOnco as a MEDS-DEV model: jobs.predict on the "
                                     "labels of one split, MEDS-DEV's predictions file alone in --out. Other options "
                                     f"go to jobs.predict (also from ${PREDICT_ARGS_ENV}).")
    parser.add_argument("--dataset", type=Path, required=True, help="the MEDS dataset ({dataset_dir})")
    parser.add_argument("--labels-dir", type=Path, required=True, help="the task's labels ({labels_dir}): "
                        "LABELS/<split>/**/*.parquet (meds-dev-task, ACES) or LABELS/<split>.parquet")
    parser.add_argument("--split", required=True, help="the split to predict ({split}, e.g. held_out)")
    parser.add_argument("--out", type=Path, required=True, help="MEDS-DEV's output folder ({output_dir}); "
                        "receives predictions.parquet only")
    parser.add_argument("--work", type=Path, help="where the jobs.predict run lives (default OUT.trajonco, beside "
                        "OUT; it must not be inside OUT)")
    return parser


def split_label_files(labels_dir: Path, split: str) -> list[Path]:
    """The label files of ``split`` under ``labels_dir``: ``<split>/**/*.parquet`` (sorted), else
    ``<split>.parquet``; `JobInputError` naming both when there is neither.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "held_out").mkdir(); (root / "held_out" / "1.parquet").touch(); (root / "held_out" / "0.parquet").touch()
    >>> [p.name for p in split_label_files(root, "held_out")]
    ['0.parquet', '1.parquet']
    >>> split_label_files(root, "tuning")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vista.shared.runs.errors.JobInputError: ...: no label files for split 'tuning' (looked for .../tuning/**/*.parquet and .../tuning.parquet)
    """
    folder, single = labels_dir / split, labels_dir / f"{split}.parquet"
    files = sorted(folder.rglob("*.parquet")) if folder.is_dir() else []
    if not files and single.is_file():
        files = [single]
    if not files:
        raise JobInputError(f"{labels_dir}: no label files for split {split!r} (looked for {folder}/**/*.parquet "
                            f"and {single})")
    return files


def work_folder(out: Path, work: Path | None) -> Path:
    """The run's folder: ``work``, or ``OUT.trajonco`` beside ``out``; refused inside ``out``.

    >>> work_folder(Path("/x/predict"), None)
    PosixPath('/x/predict.trajonco')
    >>> work_folder(Path("/x/predict"), Path("/x/predict/run"))
    Traceback (most recent call last):
    ...
    vista.shared.runs.errors.JobInputError: --work /x/predict/run is inside --out /x/predict: meds-dev-evaluation would read the run's other parquet files
    """
    folder = work if work is not None else out.with_name(out.name + ".trajonco")
    if folder.resolve().is_relative_to(out.resolve()):
        raise JobInputError(f"--work {folder} is inside --out {out}: meds-dev-evaluation would read the run's other "
                            "parquet files")
    return folder


def main(argv: list[str] | None = None) -> int:
    from jobs import predict
    from vista.shared.meds.labels import LabelFileError, merge_label_files
    from vista.shared.runs.summary import RunSummary

    args, rest = build_parser().parse_known_args(argv)
    rest = [*shlex.split(os.environ.get(PREDICT_ARGS_ENV, "")), *rest]
    try:
        files = split_label_files(args.labels_dir, args.split)
        work = work_folder(args.out, args.work)
        labels = work / "labels" / f"{args.split}.parquet"
        labels.parent.mkdir(parents=True, exist_ok=True)
        merged = merge_label_files(files, labels)
    except (JobInputError, LabelFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"[meds-dev] {args.split}: {merged.num_rows:,} label rows from {len(files)} file(s) -> {labels}",
          flush=True)
    run = work / "run"
    code = predict.main(["--labels", str(labels), "--dataset", str(args.dataset), "--out", str(run), *rest])
    if code not in (0, 1):
        return code
    summary = RunSummary.model_validate_json((run / "summary.json").read_text())
    source = Path(str(summary.meds_dev_predictions_dir)) / PREDICTIONS_FILE  # (jobs.predict always names it)
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_path(args.out / PREDICTIONS_FILE) as tmp:
        shutil.copyfile(source, tmp)
    scored = summary.output_rows.get(MEDS_DEV_OUTPUT, 0)
    print(f"[meds-dev] wrote {args.out / PREDICTIONS_FILE}: {scored:,} scored of {summary.selected:,} task(s) "
          f"(the others' errors: {run / 'prediction_details.parquet'})", flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
