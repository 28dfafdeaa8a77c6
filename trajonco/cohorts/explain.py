"""Why a cohort came out the size it did: which codes matched, who was excluded for what, and why it may be empty.

`code_match_report` counts, over the whole dataset, the subjects and rows each definition entry matched (per
vocabulary and per code); `CohortExplanation` adds the phenotype's verdicts per split and the exclusions of each
built cohort, and renders them for ``trajonco cohort … --explain``. The `*_detail` functions word the empty-cohort
errors so they say what to change.
"""

from __future__ import annotations

import polars as pl
from pydantic import BaseModel, Field

from trajonco.cohorts.codesets import CodeSets, vocabulary_expr
from trajonco.cohorts.coding import CodingChoice
from trajonco.cohorts.definition import CohortDefinition
from trajonco.cohorts.manifest import (
    CaseExclusion,
    CodeMatch,
    CodeMatchReport,
    CodeOverlapReport,
    SplitCohortReport,
    VocabularyMatch,
    VocabularyRows,
)
from vista.shared.meds import schema

SID = schema.SUBJECT_ID
VOCABULARIES_SHOWN = 8


def code_match_report(
    definition: CohortDefinition, code_sets: CodeSets, code_rows: pl.DataFrame, data_codes: pl.DataFrame
) -> CodeMatchReport:
    """Counts of the target rows (`target_code_rows`, collected) per cancer, vocabulary and code.

    ``data_codes`` is every canonical code of the dataset with its ``rows`` (`EventSource.code_rows`).
    """
    per_code = (
        code_rows.group_by("cancer", schema.CODE)
        .agg(subjects=pl.col(SID).n_unique(), events=pl.len())
        .sort(["subjects", "events", schema.CODE], descending=[True, True, False])
    )
    matches = []
    for row in per_code.iter_rows(named=True):
        vocabulary, entry, how = code_sets.rule(row["cancer"], row[schema.CODE])
        matches.append(CodeMatch(cancer=row["cancer"], vocabulary=vocabulary, entry=entry, how=how,
                                 code=row[schema.CODE], subjects=row["subjects"], events=row["events"]))
    rule_vocab = pl.DataFrame(
        {"cancer": [m.cancer for m in matches], schema.CODE: [m.code for m in matches],
         "rule_vocabulary": [m.vocabulary for m in matches]},
        schema={"cancer": pl.String, schema.CODE: pl.String, "rule_vocabulary": pl.String},
    )
    by_vocab = (
        code_rows.join(rule_vocab, on=["cancer", schema.CODE], how="left")
        .group_by("cancer", "rule_vocabulary")
        .agg(subjects=pl.col(SID).n_unique(), events=pl.len(), codes=pl.col(schema.CODE).n_unique())
        .sort("cancer", "rule_vocabulary")
    )
    vocabularies = (
        data_codes.group_by(vocabulary_expr().alias("vocabulary"))
        .agg(rows=pl.col("rows").sum(), codes=pl.len())
        .sort(["rows", "vocabulary"], descending=[True, False])
    )
    return CodeMatchReport(
        looked_for={c.name: c.vocabularies for c in definition.cancers},
        vocabularies_in_data=[VocabularyRows(**r) for r in vocabularies.iter_rows(named=True)],
        by_vocabulary=[VocabularyMatch(cancer=r["cancer"], vocabulary=r["rule_vocabulary"], subjects=r["subjects"],
                                       events=r["events"], codes=r["codes"]) for r in by_vocab.iter_rows(named=True)],
        codes=matches,
        overlaps=[CodeOverlapReport(code=o.code, cancers=o.cancers, counted_as=o.counted_as)
                  for o in code_sets.overlaps(data_codes[schema.CODE])],
        hierarchy_codes=code_sets.hierarchy_codes,
        subjects_with_target_codes=code_rows[SID].n_unique(),
        target_rows=code_rows.height,
    )


def _vocabulary_list(report: CodeMatchReport, limit: int = VOCABULARIES_SHOWN) -> str:
    shown = report.vocabularies_in_data[:limit]
    text = ", ".join(f"{v.vocabulary} ({v.rows:,} rows)" for v in shown)
    more = len(report.vocabularies_in_data) - len(shown)
    return text + (f" and {more} more" if more > 0 else "") if text else "none"


def no_codes_detail(report: CodeMatchReport, coding: CodingChoice | None) -> str:
    """Why no subject has a target code: the definition's vocabularies are absent, or present without its codes."""
    wanted: list[str] = []
    for vocabularies in report.looked_for.values():
        wanted += [v for v in vocabularies if v not in wanted]
    present = {v.vocabulary: v for v in report.vocabularies_in_data}
    found = [v for v in wanted if v in present]
    if found:
        head = ("the data has " + ", ".join(f"{v} codes ({present[v].codes:,} distinct)" for v in found)
                + " but none is one of the definition's")
    else:
        head = f"the definition looks for {', '.join(wanted)} codes and the data has no code of those vocabularies"
    how = f" (codes read with coding profile {coding.profile!r}, {coding.chosen_by})" if coding else ""
    return (f"{head}; vocabularies in the data: {_vocabulary_list(report)}{how} — add snomed_codes or patterns"
            " for the data's vocabulary to the definition, or pass --coding-profile if the codes were misread")


_HINTS = {
    CaseExclusion.PRIOR_TARGET_CODE.value: "their records code the cancer before the prediction time; set"
    " exclude_prior_target_codes = false to keep them knowingly, or shorten gap_days",
    CaseExclusion.TOO_FEW_VISITS_BEFORE_PREDICTION.value: "lower min_visits or gap_days",
    CaseExclusion.MISSING_BIRTH_OR_SEX.value: "no MEDS_BIRTH or GENDER// row was found for them: check the coding"
    " profile with `trajonco profile`",
    CaseExclusion.SEX_RESTRICTION.value: "the definition restricts the cancer to one sex",
    CaseExclusion.PREVALENT.value: "their first qualifying pair falls inside the washout; lower washout_days",
    CaseExclusion.NO_QUALIFYING_PAIR.value: "fewer than min_codes codes within max_days_between_codes",
}


def excluded_detail(phenotype_cases: int, reasons: dict[str, int]) -> str:
    """The case exclusions, largest first, with what to change for the largest."""
    ordered = sorted(((k, v) for k, v in reasons.items() if v), key=lambda kv: -kv[1])
    listed = ", ".join(f"{k}: {v}" for k, v in ordered)
    hint = f" — {_HINTS[ordered[0][0]]}" if ordered and ordered[0][0] in _HINTS else ""
    return f"{phenotype_cases} phenotype cases, excluded as {listed}{hint}"


def splits_hint(elsewhere: dict[str, int], option: str) -> str:
    """How to point a cohort at the splits that do hold cases ('' when none does)."""
    if not elsewhere:
        return ""
    where = ", ".join(f"{split}: {n}" for split, n in sorted(elsewhere.items()))
    return (f"; other splits hold {sum(elsewhere.values())} case(s) ({where}) — pick the splits with {option} in the"
            f" definition TOML or --{option.replace('_', '-')} on the command line")


class CohortExplanation(BaseModel):
    """Everything ``--explain`` prints (also attached to `EmptyCohortError.explanation`)."""

    cohort: str
    coding: CodingChoice | None
    code_matches: CodeMatchReport | None
    phenotype_by_split: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="split → phenotype verdict (case, prevalent, no_qualifying_pair) → subjects",
    )
    reports: dict[str, SplitCohortReport] = Field(default_factory=dict, description="the cohorts built (test, train)")
    empty: str | None = Field(default=None, description="the empty-cohort error, when the build stopped on one")

    def render(self, codes_shown: int = 25) -> str:
        lines = [f"cohort {self.cohort}: explanation"]
        if self.coding is not None:
            lines.append(f"  {self.coding.line()}")
        m = self.code_matches
        if m is not None:
            looked = "; ".join(f"{c}: {', '.join(v)}" for c, v in m.looked_for.items())
            lines.append(f"  definition looks for — {looked}")
            lines.append(f"  vocabularies in the data: {_vocabulary_list(m)}")
            parents = (f"{m.hierarchy_codes:,} codes with parent_codes in codes.parquet (SNOMED CT descendants counted)"
                       if m.hierarchy_codes else "no parent_codes in codes.parquet: SNOMED CT ids matched exactly only")
            lines.append(f"  {parents}")
            lines.append(f"  target codes: {m.target_rows:,} rows of {m.subjects_with_target_codes:,} subjects"
                         " (whole dataset, all splits)")
            if m.by_vocabulary:
                lines.append(f"    {'cancer':<18} {'vocabulary':<10} {'subjects':>9} {'events':>9} {'codes':>6}")
                lines += [f"    {v.cancer:<18} {v.vocabulary:<10} {v.subjects:>9,} {v.events:>9,} {v.codes:>6,}"
                          for v in m.by_vocabulary]
            if m.codes:
                shown = m.codes[:codes_shown]
                rules = [f"{c.vocabulary} {c.entry} ({c.how})" for c in shown]
                wc = max(len("code"), *(len(c.code) for c in shown))
                wn = max(len("cancer"), *(len(c.cancer) for c in shown))
                wr = max(len("matched by"), *(len(r) for r in rules))
                lines.append(f"  matched codes (top {len(shown)} of {len(m.codes)} by subjects):")
                lines.append(f"    {'code':<{wc}} {'cancer':<{wn}} {'matched by':<{wr}} {'subjects':>9} {'events':>9}")
                for c, rule in zip(shown, rules):
                    lines.append(f"    {c.code:<{wc}} {c.cancer:<{wn}} {rule:<{wr}} {c.subjects:>9,} {c.events:>9,}")
            for o in m.overlaps[:10]:
                lines.append(f"  note: {o.code} is claimed by {', '.join(o.cancers)}; counted as {o.counted_as}")
        for split, verdicts in sorted(self.phenotype_by_split.items()):
            shown = ", ".join(f"{k} {v:,}" for k, v in sorted(verdicts.items()))
            lines.append(f"  phenotype in split {split}: {shown}")
        for name, report in self.reports.items():
            excluded = ", ".join(f"{k} {v:,}" for k, v in report.case_exclusions.items() if v) or "none"
            lines.append(f"  {name} ({'+'.join(report.splits)}): {report.phenotype_cases:,} phenotype cases →"
                         f" {report.eligible_cases:,} eligible → {report.cases:,} cases; case exclusions: {excluded}")
            ctrl = ", ".join(f"{k} {v:,}" for k, v in report.control_exclusions.items() if v) or "none"
            lines.append(f"    {report.control_candidates:,} control candidates → {report.eligible_controls:,}"
                         f" eligible → {report.controls:,} controls; control exclusions: {ctrl}")
            if report.cases_with_prior_target_code:
                lines.append(f"    {report.cases_with_prior_target_code:,} kept cases code the cancer before the"
                             " prediction time (exclude_prior_target_codes = false)")
        if self.empty:
            lines.append(f"  EMPTY: {self.empty}")
        return "\n".join(lines)
