"""Control index dates and case–control matching, as seeded column operations over whole tables.

Matching walks the cases in a random order and gives each the next ``k`` unused controls of its stratum (controls
are shuffled within each stratum), i.e. sampling without replacement; it stops once ``target_cases`` cases have at
least one control. The same result is computed without a loop: the r-th case of a stratum (in random order) gets
the controls ranked r·k … r·k+k-1 in that stratum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from vista.shared.meds import schema

SID = schema.SUBJECT_ID
STRATUM_COLUMNS = {"sex": "sex", "age_band": "age_band"}


def draw_control_index(visits: pl.DataFrame, candidates: pl.DataFrame, *, rng: np.random.Generator) -> pl.DataFrame:
    """A uniformly random one of each candidate's ``control_visits`` (the visits whose prediction time, visit - gap,
    still has the candidate's ``ready_time`` strictly before it, so the input window keeps its minimum number of
    visits; `trajonco.cohorts.population.subject_facts`): one draw of ``rng`` per candidate that has any, in
    subject_id order. ``visits`` (subject_id, control_visits) is sorted by subject_id and may hold other subjects;
    ``candidates`` gives the subject_ids to draw for. The lists are read in place, never copied.

    Returns subject_id and index_time; candidates without such a visit are left out.

    >>> from datetime import datetime as dt
    >>> visits = pl.DataFrame({"subject_id": [1, 2, 3], "control_visits": [[dt(2012, 1, 1), dt(2013, 1, 1)], [],
    ...                        [dt(2014, 1, 1)]]})
    >>> draw_control_index(visits, pl.DataFrame({"subject_id": [2, 1]}), rng=np.random.default_rng(0))
    shape: (1, 2)
    ┌────────────┬─────────────────────┐
    │ subject_id ┆ index_time          │
    │ ---        ┆ ---                 │
    │ i64        ┆ datetime[μs]        │
    ╞════════════╪═════════════════════╡
    │ 1          ┆ 2013-01-01 00:00:00 │
    └────────────┴─────────────────────┘
    """
    counts = visits["control_visits"].list.len().fill_null(0)
    take = (visits[SID].is_in(candidates[SID].implode()) & (counts > 0)).to_numpy()
    drawn = np.flatnonzero(take)
    picks = np.zeros(visits.height, dtype=np.int64)
    picks[drawn] = (rng.random(drawn.size) * counts.to_numpy()[drawn]).astype(np.int64)
    return visits.select(SID, index_time=pl.col("control_visits").list.get(pl.Series(picks), null_on_oob=True)).filter(
        pl.Series(take)
    )


@dataclass(frozen=True)
class MatchResult:
    """Selected cases, their controls (with ``matched_to``), and how many cases were tried to get there."""

    cases: pl.DataFrame
    controls: pl.DataFrame
    cases_considered: int
    cases_unmatched: int


def match_controls(
    cases: pl.DataFrame,
    controls: pl.DataFrame,
    *,
    keys: tuple[str, ...],
    controls_per_case: int,
    target_cases: int | None,
    rng: np.random.Generator,
) -> MatchResult:
    """Match controls to cases on equal ``keys`` (columns of both frames), without replacement, seeded.

    ``cases_considered`` counts the cases walked through in random order until ``target_cases`` were matched (all
    cases when the target is None or not reached); ``cases_unmatched`` those among them left without a control.

    >>> cases = pl.DataFrame({"subject_id": [1, 2, 3], "sex": ["F", "F", "M"]})
    >>> controls = pl.DataFrame({"subject_id": [10, 11, 12], "sex": ["F", "M", "M"]})
    >>> m = match_controls(cases, controls, keys=("sex",), controls_per_case=1, target_cases=None,
    ...                    rng=np.random.default_rng(0))
    >>> m.cases.height, m.cases_unmatched, sorted(m.controls["subject_id"].to_list())
    (2, 1, [10, 11])
    >>> all(m.controls.join(cases, left_on="matched_to", right_on="subject_id")
    ...     .select(pl.col("sex") == pl.col("sex_right")).to_series())
    True
    """
    strata = [STRATUM_COLUMNS[k] for k in keys] or ["_stratum"]
    if not keys:
        cases = cases.with_columns(_stratum=pl.lit(0))
        controls = controls.with_columns(_stratum=pl.lit(0))
    ranked_cases = (
        cases.sort(SID)
        .with_columns(case_key=pl.Series(rng.random(cases.height)))
        .with_columns(slot=(pl.col("case_key").rank("ordinal").over(strata) - 1).cast(pl.Int64))
    )
    ranked_controls = (
        controls.sort(SID)
        .with_columns(control_key=pl.Series(rng.random(controls.height)))
        .with_columns(
            slot=((pl.col("control_key").rank("ordinal").over(strata) - 1) // controls_per_case).cast(pl.Int64)
        )
    )
    pairs = ranked_controls.join(
        ranked_cases.select(*strata, "slot", "case_key", matched_to=pl.col(SID)), on=[*strata, "slot"], how="inner"
    )
    matched = ranked_cases.filter(pl.col(SID).is_in(pairs["matched_to"].implode())).sort("case_key")
    if target_cases is not None and matched.height > target_cases:
        matched = matched.head(target_cases)
        last_key = matched["case_key"].max()
        considered = ranked_cases.filter(pl.col("case_key") <= last_key).height
    else:
        considered = ranked_cases.height
    chosen = pairs.filter(pl.col("matched_to").is_in(matched[SID].implode()))
    drop = ["slot", "case_key", "control_key", "_stratum"]
    return MatchResult(
        cases=matched.drop(drop, strict=False).sort(SID),
        controls=chosen.drop(drop, strict=False).sort(SID),
        cases_considered=considered,
        cases_unmatched=considered - matched.height,
    )
