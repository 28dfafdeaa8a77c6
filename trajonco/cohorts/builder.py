"""Build the test and training case–control cohorts of a definition and write MEDS labels plus a manifest.

Output, under ``out_dir``: ``labels/test.parquet`` and ``labels/train.parquet`` (exactly the MEDS label columns
``subject_id``, ``prediction_time``, ``boolean_value``, so MEDS tools read them as they are), beside them
``label_details/test.parquet`` and ``label_details/train.parquet`` (the same key, then ``index_time``, ``cancer``,
``role``, ``matched_to``, ``age_at_index``, ``sex``, ``split``; `vista.shared.meds.labels.read_label_table` joins them back
for every reader) and ``manifest.json``. A model may read a subject's static rows and rows strictly before
``prediction_time`` = ``index_time`` - gap. The data is read shard by shard (`trajonco.cohorts.shards`: each shard
becomes a few columns per subject), so memory follows the number of subjects, not rows; cases and controls are
then chosen on that per-subject table with polars group-bys and joins.

Leakage door: the phenotype accepts an isolated earlier target code outside the washout, but if it lies before the
prediction time (or is static) the model would read the cancer in the input while no control can carry such a code.
Such a case is excluded (``prior_target_code``, counted in the manifest) unless the definition sets
``exclude_prior_target_codes = false``; then it is kept and counted as ``cases_with_prior_target_code``.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from vista.shared.atomic import make_dirs
from trajonco.cohorts.codesets import CodeHierarchy, CodeSets, read_hierarchy
from trajonco.cohorts.coding import ProfileSpec, choose_profile
from trajonco.cohorts.definition import CohortDefinition
from trajonco.cohorts.errors import EmptyCohortError
from trajonco.cohorts.explain import (
    CohortExplanation,
    code_match_report,
    excluded_detail,
    no_codes_detail,
    splits_hint,
)
from trajonco.cohorts.manifest import (
    CaseExclusion,
    CohortManifest,
    ControlExclusion,
    Distribution,
    MatchingQuality,
    SplitCohortReport,
)
from trajonco.cohorts.matching import draw_control_index, match_controls
from trajonco.cohorts.phenotype import PhenotypeStatus, classify_subjects
from trajonco.cohorts.population import Population, assemble_population
from trajonco.cohorts.shards import CohortInputs, CohortShardStep
from trajonco.cohorts.source import (
    SPLIT,
    data_files,
    dataset_info,
    read_coding,
    read_splits,
    scan_checked,
    warn_about_coverage,
)
from vista.shared.meds import schema
from vista.shared.meds.labels import write_label_file
from vista.shared.meds.shard_step import ShardStep, run_local

log = logging.getLogger(__name__)
SID = schema.SUBJECT_ID

LABEL_COLUMNS = ("subject_id", "prediction_time", "boolean_value")
LABELS_SCHEMA = pa.schema(
    [
        pa.field("subject_id", pa.int64(), nullable=False),
        pa.field("prediction_time", pa.timestamp("us"), nullable=False),
        pa.field("boolean_value", pa.bool_(), nullable=False),
        pa.field("index_time", pa.timestamp("us"), nullable=False),
        pa.field("cancer", pa.string()),
        pa.field("role", pa.string(), nullable=False),
        pa.field("matched_to", pa.int64()),
        pa.field("age_at_index", pa.float64(), nullable=False),
        pa.field("sex", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),
    ]
)
"""Label tables: the MEDS label columns first (prediction_time exclusive, see module doc), then the cohort's own (on
disk: ``labels/`` and ``label_details/``, see the module doc)."""

ROLE_CASE, ROLE_CONTROL = "case", "control"


@dataclass(frozen=True)
class SplitCohort:
    """One built cohort: its label rows (LABELS_SCHEMA columns) and its report for the manifest."""

    labels: pl.DataFrame
    report: SplitCohortReport


@dataclass(frozen=True)
class CohortResult:
    """What `build_cohort` produced: the written files, the manifest and the label tables themselves."""

    out_dir: Path
    manifest: CohortManifest
    test: pl.DataFrame
    train: pl.DataFrame | None
    label_paths: dict[str, Path]
    elapsed_seconds: float
    explanation: CohortExplanation


LOCAL_WORKERS = min(4, os.cpu_count() or 1)
"""Shards read at once by a local build: the machine's cores (up to 4; each holds one shard's rows)."""

ShardRunner = Callable[[ShardStep[CohortInputs], Sequence[Path]], CohortInputs]
"""How the shard step runs: `run_local` (default) or, from the jobs, Ray Data over the shards (`jobs.data_steps`)."""


def build_cohort(
    dataset_root: Path | str,
    definition: CohortDefinition,
    out_dir: Path | str,
    *,
    seed: int | None = None,
    profile: ProfileSpec | None = None,
    run: ShardRunner | None = None,
) -> CohortResult:
    """Build the test (and training) cohort of ``definition`` from a MEDS dataset and write labels and manifest.

    ``seed`` overrides the definition's seed (the manifest records the definition actually used); ``profile`` is the
    coding profile to read the codes with (`vista.shared.coding`; detected from the data when None); ``run`` runs the
    shard step (`trajonco.cohorts.shards`) over the data files (default: `run_local`, `LOCAL_WORKERS` shards at a
    time). An empty cohort raises `EmptyCohortError` carrying
    the explanation so far (``.explanation``).
    """
    started = time.perf_counter()
    root, out = Path(dataset_root), Path(out_dir)
    if seed is not None:
        definition = definition.with_overrides(seed=seed)
    scan_checked(root)  # every shard's footer and columns, before any row is read
    chosen, how, share = choose_profile(root, profile)
    splits = read_splits(root, warn=False)
    needs_tree = any(c.snomed_codes for c in definition.cancers)
    code_sets = CodeSets.build(definition, read_hierarchy(root, chosen) if needs_tree else CodeHierarchy())
    run = run or functools.partial(run_local, workers=LOCAL_WORKERS)
    inputs = run(CohortShardStep(definition, code_sets, chosen), data_files(root))
    warn_about_coverage(root, splits, inputs.facts[SID])
    coding, _, data_codes = read_coding(chosen, how, share, inputs.code_counts)
    population = assemble_population(inputs.facts, splits, source=str(root))
    code_rows = inputs.target_rows
    del inputs  # its per-subject facts (with every candidate's visits) now live in `population`
    phenotypes = classify_subjects(code_rows, population.subjects.select(SID, "first_visit_time"), definition)
    prior = _prior_target_codes(code_rows)
    log.info(
        "cohort %s: %d subjects, %d with target codes", definition.name, population.subjects.height, phenotypes.height
    )
    explanation = CohortExplanation(
        cohort=definition.name,
        coding=coding,
        code_matches=code_match_report(definition, code_sets, code_rows, data_codes),
        phenotype_by_split=_verdicts_by_split(population, phenotypes),
    )
    try:
        if code_rows.is_empty():
            raise EmptyCohortError(
                definition.name,
                "no code of the definition in the data",
                no_codes_detail(explanation.code_matches, coding),  # type: ignore[arg-type]
            )
        test = build_split_cohort(
            "test", definition.test_splits, definition.test_target_cases, population, phenotypes, definition,
            stream=0, prior=prior,
        )
        explanation.reports["test"] = test.report
        train = None
        if definition.train_splits:
            train = build_split_cohort(
                "train", definition.train_splits, definition.train_target_cases, population, phenotypes, definition,
                stream=1, prior=prior,
            )
            explanation.reports["train"] = train.report
    except EmptyCohortError as exc:
        explanation.empty = str(exc)
        exc.explanation = explanation
        raise
    if train is not None:
        shared = test.labels.join(train.labels, on=SID, how="semi")
        if shared.height:  # splits are disjoint, so this would be a bug, not bad input
            raise AssertionError(
                f"subjects {shared[SID].head(5).to_list()} are in both the test and the training cohort"
            )

    labels_dir = out / "labels"
    make_dirs(labels_dir)
    paths = {"test": labels_dir / "test.parquet"}
    write_labels(test.labels, paths["test"])
    if train is not None:
        paths["train"] = labels_dir / "train.parquet"
        write_labels(train.labels, paths["train"])
    manifest = CohortManifest(
        definition=definition,
        definition_hash=definition.digest(),
        dataset=dataset_info(root),
        coding=coding,
        code_matches=explanation.code_matches,
        subjects_in_dataset=population.subjects_in_data,
        subjects_without_split=population.subjects_without_split,
        test=test.report,
        train=None if train is None else train.report,
    )
    manifest.write(out / "manifest.json")
    elapsed = time.perf_counter() - started
    log.info("cohort %s built in %.2f s", definition.name, elapsed)
    return CohortResult(
        out_dir=out,
        manifest=manifest,
        test=test.labels,
        train=None if train is None else train.labels,
        label_paths=paths,
        elapsed_seconds=elapsed,
        explanation=explanation,
    )


def _prior_target_codes(code_rows: pl.DataFrame) -> pl.DataFrame:
    """Per subject with target codes: the earliest timed one and whether a static (untimed) one exists."""
    return code_rows.group_by(SID).agg(
        first_target_time=pl.col(schema.TIME).min(), static_target=pl.col(schema.TIME).is_null().any()
    )


def _verdicts_by_split(population: Population, phenotypes: pl.DataFrame) -> dict[str, dict[str, int]]:
    """split → phenotype verdict → subjects (subjects without a split under '(none)')."""
    counted = (
        phenotypes.join(population.subjects.select(SID, SPLIT), on=SID, how="left")
        .with_columns(pl.col(SPLIT).fill_null("(none)"))
        .group_by(SPLIT, "status")
        .len()
    )
    out: dict[str, dict[str, int]] = {}
    for split, status, n in counted.iter_rows():
        out.setdefault(split, {})[status] = int(n)
    return out


def build_split_cohort(
    name: str,
    splits: tuple[str, ...],
    target_cases: int | None,
    population: Population,
    phenotypes: pl.DataFrame,
    definition: CohortDefinition,
    *,
    stream: int,
    prior: pl.DataFrame | None = None,
) -> SplitCohort:
    """Cases, exclusions, control index dates and matching for the subjects of ``splits``.

    ``prior`` (subject_id, first_target_time, static_target; see `_prior_target_codes`) lets the build find cases
    whose record codes a target cancer before the prediction time; without it none is found.
    """
    rng = np.random.default_rng([definition.seed, stream])
    members = population.subjects.select(SID, SPLIT, "sex", "birth_time", "ready_time").filter(
        pl.col(SPLIT).is_in(list(splits))
    )  # what the cohort reads of a subject, so the copies made below stay narrow
    if members.is_empty():
        present = sorted(population.subjects[SPLIT].drop_nulls().unique().to_list())
        raise EmptyCohortError(
            name, "no subjects in its splits", f"no subject is in {list(splits)}; the splits file has {present}"
        )
    members = members.join(phenotypes, on=SID, how="left")
    status_counts = dict(members.group_by("status").len().drop_nulls("status").iter_rows())
    found = members.filter(pl.col("status") == PhenotypeStatus.CASE.value)
    if found.is_empty():
        elsewhere = dict(
            population.subjects.filter(pl.col(SPLIT).is_not_null() & ~pl.col(SPLIT).is_in(list(splits)))
            .join(phenotypes.filter(pl.col("status") == PhenotypeStatus.CASE.value), on=SID)
            .group_by(SPLIT)
            .len()
            .iter_rows()
        )
        raise EmptyCohortError(
            name,
            "no cases in its splits" if elsewhere else "no cases found",
            f"none of {members.height} subjects in {list(splits)} meets the phenotype"
            f" ({status_counts.get('prevalent', 0)} prevalent, {status_counts.get('no_qualifying_pair', 0)} with target"
            " codes but no qualifying pair)" + splits_hint(elsewhere, f"{name}_splits"),
        )

    gap = pl.duration(days=definition.gap_days)
    cases = _with_age(found.with_columns(prediction_time=pl.col("index_time") - gap), definition)
    if prior is None:
        prior = pl.DataFrame(
            schema={SID: pl.Int64, "first_target_time": pl.Datetime("us"), "static_target": pl.Boolean}
        )
    cases = cases.join(prior, on=SID, how="left").with_columns(
        prior_target=pl.col("static_target").fill_null(False)
        | (pl.col("first_target_time") < pl.col("prediction_time")).fill_null(False)
    )
    required_sex = {c.name: c.sex for c in definition.cancers if c.sex is not None}
    cases = cases.with_columns(
        reason=pl.when(pl.col("sex").is_null() | pl.col("birth_time").is_null())
        .then(pl.lit(CaseExclusion.MISSING_BIRTH_OR_SEX.value))
        .when(
            pl.col("cancer").replace_strict(required_sex, default=pl.col("sex"), return_dtype=pl.String)
            != pl.col("sex")
        )
        .then(pl.lit(CaseExclusion.SEX_RESTRICTION.value))
        .when(pl.col("index_time") < pl.col("birth_time"))
        .then(pl.lit(CaseExclusion.INDEX_BEFORE_BIRTH.value))
        .when(pl.col("ready_time").is_null() | (pl.col("ready_time") >= pl.col("prediction_time")))
        .then(pl.lit(CaseExclusion.TOO_FEW_VISITS_BEFORE_PREDICTION.value))
        .when(pl.lit(definition.exclude_prior_target_codes) & pl.col("prior_target"))
        .then(pl.lit(CaseExclusion.PRIOR_TARGET_CODE.value))
    )
    eligible_cases = cases.filter(pl.col("reason").is_null())
    case_reasons = _count(cases["reason"], CaseExclusion)
    case_reasons[CaseExclusion.PREVALENT.value] = status_counts.get(PhenotypeStatus.PREVALENT.value, 0)
    case_reasons[CaseExclusion.NO_QUALIFYING_PAIR.value] = status_counts.get(
        PhenotypeStatus.NO_QUALIFYING_PAIR.value, 0
    )
    if eligible_cases.is_empty():
        raise EmptyCohortError(name, "all cases excluded", excluded_detail(found.height, case_reasons))

    candidates = members.filter(pl.col("status").is_null()).drop("status", "cancer", "index_time")
    allowed = definition.allowed_sexes
    candidates = candidates.with_columns(
        reason=pl.when(pl.col("sex").is_null() | pl.col("birth_time").is_null())
        .then(pl.lit(ControlExclusion.MISSING_BIRTH_OR_SEX.value))
        .when(pl.lit(allowed is not None) & ~pl.col("sex").is_in(sorted(allowed or ())))
        .then(pl.lit(ControlExclusion.SEX_RESTRICTION.value))
        .when(pl.col("ready_time").is_null())
        .then(pl.lit(ControlExclusion.TOO_FEW_VISITS.value))
    )
    drawn = draw_control_index(population.control_visits, candidates.filter(pl.col("reason").is_null()), rng=rng)
    controls = _with_age(
        candidates.join(drawn, on=SID, how="left").with_columns(prediction_time=pl.col("index_time") - gap), definition
    ).with_columns(
        reason=pl.when(pl.col("reason").is_not_null())
        .then("reason")
        .when(pl.col("index_time").is_null())
        .then(pl.lit(ControlExclusion.NO_ELIGIBLE_INDEX_DATE.value))
        .when(pl.col("index_time") < pl.col("birth_time"))
        .then(pl.lit(ControlExclusion.INDEX_BEFORE_BIRTH.value))
    )
    eligible_controls = controls.filter(pl.col("reason").is_null())

    match = match_controls(
        eligible_cases,
        eligible_controls,
        keys=definition.matching_keys,
        controls_per_case=definition.controls_per_case,
        target_cases=target_cases,
        rng=rng,
    )
    if match.cases.is_empty():
        raise EmptyCohortError(
            name,
            "no eligible controls",
            f"{eligible_cases.height} eligible cases but none found a control among {eligible_controls.height} eligible"
            f" controls with equal {', '.join(definition.matching_keys) or 'anything'}",
        )
    case_reasons[CaseExclusion.NO_MATCHING_CONTROL.value] = match.cases_unmatched
    labels = _labels(match.cases, match.controls)
    report = SplitCohortReport(
        splits=splits,
        labels_file=f"labels/{name}.parquet",
        subjects_in_splits=members.height,
        target_cases=target_cases,
        cases=match.cases.height,
        controls=match.controls.height,
        cases_by_cancer=dict(sorted(match.cases.group_by("cancer").len().iter_rows())),
        phenotype_cases=found.height,
        eligible_cases=eligible_cases.height,
        control_candidates=candidates.height,
        eligible_controls=eligible_controls.height,
        case_exclusions=case_reasons,
        control_exclusions=_count(controls["reason"], ControlExclusion),
        cases_with_prior_target_code=int(match.cases["prior_target"].sum()),
        cases_not_sampled=eligible_cases.height - match.cases_considered,
        controls_unused=eligible_controls.height - match.controls.height,
        matching=_quality(match.cases, match.controls, match.cases_considered),
    )
    log.info("%s cohort: %d cases, %d controls", name, report.cases, report.controls)
    return SplitCohort(labels=labels, report=report)


def write_labels(labels: pl.DataFrame, path: Path) -> None:
    """Write a label table with the exact arrow types of LABELS_SCHEMA: its MEDS columns to ``labels/<split>.parquet``
    (checked by `meds`), the cohort's own to ``label_details/<split>.parquet`` (`vista.shared.meds.labels.write_label_file`)."""
    write_label_file(labels.to_arrow().cast(LABELS_SCHEMA), path)


def _with_age(frame: pl.DataFrame, definition: CohortDefinition) -> pl.DataFrame:
    """Age in years (days / 365.25, as `Demographics.age_at`) and age band at ``index_time``."""
    age = (pl.col("index_time").dt.date() - pl.col("birth_time").dt.date()).dt.total_days() / 365.25
    return frame.with_columns(age_at_index=age).with_columns(
        age_band=(pl.col("age_at_index") // definition.age_band_years).cast(pl.Int64)
    )


def _count(reasons: pl.Series, kinds: type[CaseExclusion] | type[ControlExclusion]) -> dict[str, int]:
    counts = dict(reasons.drop_nulls().value_counts().iter_rows())
    return {kind.value: int(counts.get(kind.value, 0)) for kind in kinds}


def _labels(cases: pl.DataFrame, controls: pl.DataFrame) -> pl.DataFrame:
    columns = [name for name in LABELS_SCHEMA.names]
    case_rows = cases.with_columns(
        boolean_value=pl.lit(True), role=pl.lit(ROLE_CASE), matched_to=pl.lit(None, dtype=pl.Int64)
    ).select(columns)
    control_rows = controls.with_columns(
        boolean_value=pl.lit(False), role=pl.lit(ROLE_CONTROL), cancer=pl.lit(None, dtype=pl.String)
    ).select(columns)
    return pl.concat([case_rows, control_rows]).sort(SID)


def _quality(cases: pl.DataFrame, controls: pl.DataFrame, considered: int) -> MatchingQuality:
    pairs = controls.select("matched_to", "sex", "age_at_index", "age_band").join(
        cases.select(SID, "sex", "age_at_index", "age_band"), left_on="matched_to", right_on=SID, suffix="_case"
    )
    per_case = pairs.group_by("matched_to").len()["len"].value_counts()
    return MatchingQuality(
        cases_considered=considered,
        cases_matched=cases.height,
        share_matched=round(cases.height / considered, 4) if considered else 0.0,
        controls_per_case={str(k): int(v) for k, v in sorted(per_case.iter_rows())},
        age_difference_years=Distribution.of(pairs["age_at_index_case"] - pairs["age_at_index"]),
        sex_agreement=float((pairs["sex"] == pairs["sex_case"]).mean()) if pairs.height else None,  # type: ignore[arg-type]
        age_band_agreement=float((pairs["age_band"] == pairs["age_band_case"]).mean()) if pairs.height else None,  # type: ignore[arg-type]
    )
