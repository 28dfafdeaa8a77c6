"""The options of the predict job (`jobs.predict`), apart from the job so that ``--help`` and option mistakes answer
at once: this module imports only argparse-level code.

>>> args = build_parser().parse_args(["--labels", "l.parquet", "--dataset", "d", "--out", "o", "--cancer", "Lung"])
>>> args.cancer, args.variant, args.in_flight is None, args.graphs
('lung', None, True, None)
"""

from __future__ import annotations

import argparse

from jobs.job_options import add_job_arguments, add_selection_arguments, job_parser
from jobs.llm_options import add_llm_arguments
from trajonco.assessment_options import add_assessment_arguments, cancer_key, cancer_keys
from vista.shared.cli_kit import add_profile_option
from vista.shared.cli_kit import local_path

DESCRIPTION = """\
Run the TrajOnco agents over a cohort on Ray: one prediction row per patient, resumable without paying twice.

example:
  trajonco predict --labels out/cohorts/lung/labels/test.parquet --dataset out/synth --out out/predict-lung
  trajonco predict ... --model gpt-4.1-mini --base-url https://api.openai.com/v1 --in-flight 64 --tokens-per-minute 2000000
  trajonco predict ... --graphs out/vista     # the same read also stores each patient's MEDS Graph for `vista`
  ray job submit --working-dir . -- python -m jobs.predict --labels ... --dataset s3://bucket/meds --out s3://bucket/run
"""

EPILOG = """\
Rerun the same command to resume: patients with a row are skipped, calls already answered come from the cache.
How the job runs (actors, LLM budget, retries, outputs): docs/jobs.md and docs/cluster.md.
"""


def build_parser(prog: str = "python -m jobs.predict") -> argparse.ArgumentParser:
    """The job's options (light imports only: ``--help`` answers at once; `jobs.predict` holds the job)."""
    parser = job_parser(prog, DESCRIPTION, EPILOG, "%(prog)s --labels LABELS --dataset DATASET --out OUT [options]")
    io = parser.add_argument_group("inputs and outputs")
    io.add_argument("--labels", required=True, type=str, help="MEDS label parquet (subject_id, prediction_time, "
                    "boolean_value), e.g. COHORT/labels/test.parquet; a path or an s3://… URI (vista.shared.storage)")
    io.add_argument("--dataset", required=True, type=str, help="MEDS dataset root (data/**/*.parquet, metadata/); a "
                    "path or an s3://… URI")
    add_profile_option(io)
    io.add_argument("--out", required=True, type=str, help="output directory or s3://… prefix; rerunning the same "
                    "command resumes there")
    io.add_argument("--graphs", metavar="STORE", type=local_path, help="also build each patient's MEDS Graph (the "
                    "whole record) from the record the agents read and persist it into the graph store STORE (the "
                    "one `vista build` writes; `vista ask/source/similar --store STORE` open it): one read of the "
                    "cohort serves both systems; a local or shared directory")
    io.add_argument("--threshold", type=float, default=0.5,
                    help="predicted_boolean_value = risk/10 >= threshold (default 0.5, i.e. risk >= 5)")

    pick = add_selection_arguments(parser)
    pick.add_argument("--order", choices=["longest", "key"], default="longest",
                      help="order tasks start in: longest (default: longest estimated chain first) or key "
                           "(subject_id, prediction_time)")

    model = parser.add_argument_group("assessment")
    add_assessment_arguments(model)
    which = model.add_mutually_exclusive_group()
    which.add_argument("--cancer", default="lung", type=cancer_key, help=f"cancer to assess: {cancer_keys()} "
                       "(default lung)")
    which.add_argument("--any-cancer", action="store_true",
                       help="predict any cancer the patient's sex allows (how: --any-cancer-mode)")
    model.add_argument("--cancer-hints", action="store_true", help="add the cancer's known risk factors to the prompts")
    model.add_argument("--output-limits", choices=["auto", "standard", "compact"], default="auto",
                       help="bounds of the agents' answers (default auto: compact below a 32k-token context)")
    model.add_argument("--context-tokens", type=int, help="the model's context window (default: ask the endpoint)")

    add_llm_arguments(parser)
    run = add_job_arguments(parser, task="patient", two_stage_options=True)
    run.add_argument("--stage-timeout", type=float, help="two-stage: seconds to wait for one preprocessor call from "
                     "the pool (default: the LLM retry budget + request timeout + 30)")
    return parser
