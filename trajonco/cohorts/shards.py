"""What a cohort needs from the data, read shard by shard: each MEDS shard is reduced to its subjects' facts
(`trajonco.cohorts.population.subject_facts`: sex, birth, visit counts, first visit, the visits a control's index
may be drawn from), its target-code rows and its rows per source code — a few columns per subject, never the rows.
The builder then matches on those (`trajonco.cohorts.builder`). It is a `vista.shared.meds.shard_step.ShardStep`, so
it runs in one process (`run_local`) or as Ray Data (``python -m jobs.data_steps cohort``) with the same result.

Codes are respelled per shard with the dataset's coding profile: a code's canonical spelling depends on the code
alone, so a shard's mapping is the whole dataset's restricted to the shard's codes. A subject whose rows sit in
several shards (MEDS keeps a subject in one shard, but nothing here relies on it) is summarised again from its rows
gathered from every shard, so its facts are the whole record's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa

from trajonco.cohorts.codesets import CodeSets
from trajonco.cohorts.definition import CohortDefinition
from trajonco.cohorts.errors import CohortDataError
from trajonco.cohorts.population import CodeKinds, subject_facts
from vista.shared.coding import CodingProfile
from vista.shared.meds import schema

SID = schema.SUBJECT_ID
PARTS = ("subjects", "target_rows", "code_counts")
"""The list columns of a shard's summary (one row per shard, plus the ``shard`` path)."""


@dataclass(frozen=True)
class CohortInputs:
    """Everything the builder reads from the data, over every shard.

    ``facts``: `subject_facts` of every subject in the data (sorted by subject_id). ``target_rows``: subject_id,
    time, code (canonical), cancer of every target-code row. ``code_counts``: each distinct source code (as the
    data spells it; null included) with its rows.
    """

    facts: pl.DataFrame
    target_rows: pl.DataFrame
    code_counts: pl.DataFrame


@dataclass(frozen=True)
class CohortShardStep:
    """The cohort's `ShardStep`: ``map_shard`` summarises one shard, ``reduce`` gathers `CohortInputs`."""

    definition: CohortDefinition
    code_sets: CodeSets
    profile: CodingProfile
    name: str = "cohort"

    def map_shard(self, shard: Path) -> pa.Table:
        """One row: the shard's path and its subjects, target rows and code counts as list columns."""
        try:
            rows = _read(pl.scan_parquet(shard))
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise CohortDataError(f"{shard}: cannot read the MEDS data ({exc})") from None
        counts = rows.group_by(schema.CODE).agg(rows=pl.len()).with_columns(pl.col(schema.CODE).cast(pl.String))
        subjects, targets = self._summarise(rows, counts[schema.CODE])
        parts = {"subjects": subjects, "target_rows": targets, "code_counts": counts}
        return pa.table({"shard": [str(shard)], **{name: _one_list(frame) for name, frame in parts.items()}})

    def _summarise(self, rows: pl.DataFrame, codes: pl.Series) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Facts and target rows of ``rows`` (all rows of their subjects, codes as the data spells them), ``codes``
        their distinct source codes: what each code means is settled once per distinct code, then rows are picked
        by code. Only candidate controls keep their ``control_visits``: no target code, sex and birth known, a sex
        the definition allows, enough visits."""
        distinct = codes.drop_nulls().to_list()
        respelled = self.profile.respellings(distinct)
        definition = self.definition
        cancers = (
            pl.DataFrame({"source": distinct, schema.CODE: [respelled.get(c, c) for c in distinct]},
                         schema={"source": pl.String, schema.CODE: pl.String})
            .with_columns(self.code_sets.cancer_expr())
            .filter(pl.col("cancer").is_not_null())
        )
        targets = (
            rows.filter(pl.col(schema.CODE).is_in(cancers["source"].implode()))
            .select(SID, schema.TIME, source=pl.col(schema.CODE).cast(pl.String))
            .join(cancers, on="source", how="left")
            .select(SID, schema.TIME, schema.CODE, "cancer")
        )
        kinds = CodeKinds.of(distinct, respelled)
        facts = subject_facts(rows, kinds, min_visits=definition.min_visits, gap_days=definition.gap_days)
        allowed = definition.allowed_sexes
        candidate = (
            ~pl.col(SID).is_in(targets[SID].unique().implode())
            & pl.col("sex").is_not_null()
            & pl.col("birth_time").is_not_null()
            & (pl.lit(True) if allowed is None else pl.col("sex").is_in(sorted(allowed)))
        )
        facts = facts.with_columns(control_visits=pl.when(candidate).then("control_visits"))
        return facts, targets

    def reduce(self, tables: Sequence[pa.Table]) -> CohortInputs:
        """`CohortInputs` from every shard's summary (any order, any grouping)."""
        parts = {name: _flatten(tables, name) for name in PARTS}
        facts, targets = parts["subjects"], parts["target_rows"]
        spread = facts.filter(pl.col(SID).is_duplicated())[SID].unique()
        if spread.len():
            shards = sorted({s for t in tables for s in t.column("shard").to_pylist()})
            facts = pl.concat([facts.filter(~pl.col(SID).is_in(spread.implode())), self._gathered(shards, spread)])
        order = [SID, schema.TIME, schema.CODE, "cancer"]
        return CohortInputs(
            facts=facts if facts[SID].is_sorted() else facts.sort(SID),
            target_rows=targets.sort(order, nulls_last=False) if targets.height else targets,
            code_counts=parts["code_counts"].group_by(schema.CODE).agg(pl.col("rows").sum()).sort(schema.CODE),
        )

    def _gathered(self, shards: list[str], subjects: pl.Series) -> pl.DataFrame:
        """Facts of ``subjects`` from their rows in every shard (subjects whose record is split across shards)."""
        try:
            rows = _read(pl.scan_parquet(shards, extra_columns="ignore").filter(pl.col(SID).is_in(subjects.implode())))
        except pl.exceptions.PolarsError as exc:
            raise CohortDataError(f"{Path(shards[0]).parent}: cannot read the MEDS data ({exc})") from None
        return self._summarise(rows, rows[schema.CODE].unique().cast(pl.String))[0]


def _read(rows: pl.LazyFrame) -> pl.DataFrame:
    """subject_id, time (µs) and code of ``rows``; the code as a categorical, which polars reads straight from the
    parquet dictionary — counting, and picking rows by code, then compare integers, not strings."""
    return rows.select(SID, pl.col(schema.TIME).dt.cast_time_unit("us"), pl.col(schema.CODE).cast(pl.Categorical)).collect()


def _one_list(frame: pl.DataFrame) -> pa.Array:
    """``frame`` as a one-element list of structs (a shard's part in its one-row summary)."""
    values = frame.to_struct("part").to_arrow()
    return pa.LargeListArray.from_arrays(pa.array([0, len(values)], pa.int64()), values)


def _flatten(tables: Sequence[pa.Table], name: str) -> pl.DataFrame:
    """Every shard's ``name`` part, as one frame; the shards' parts in the order of their first subject_id (when
    shards hold ranges of subjects, as usual, the frame is then sorted without sorting it)."""
    chunks = [chunk.flatten() for table in tables for chunk in table.column(name).chunks]
    if not chunks:
        raise CohortDataError("no MEDS shard was read")
    if SID in chunks[0].type.names:
        chunks.sort(key=lambda c: c[0][SID].as_py() if len(c) else -1)
    frames = [pl.from_arrow(pa.Table.from_struct_array(chunk)) for chunk in chunks]
    return pl.concat(frames, rechunk=False)  # type: ignore[arg-type]  # the shards' buffers, not a copy of them
