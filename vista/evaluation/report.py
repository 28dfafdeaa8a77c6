"""`EvaluationReport`: every scored evaluation, per-variable and overall accuracy with CIs, and how to show them.

Accuracy is the share of evaluations scoring at least ``threshold`` (8 of 10 by default); the mean score is shown
beside it. Both carry 95% CIs from the patient bootstrap. Evaluations that could not be scored are counted, never
dropped: a display value whose call failed scores 0 (the method failed), a judge call that failed scores 0 too
(counted as wrong, in its own column — a failing judge cannot raise the accuracy), and a variable the truth cannot
settle is left out of the accuracy and counted as unscorable. A value whose answer cited no event is scored as the
"Not found" the display shows, and counted (``uncited``). The headline (OVERALL) is over the scored tumor-board
variables; the patient-information variables are summed up apart. `to_table` (rich) and `to_markdown` put VISTA and
RAG side by side and name the LLM that wrote each method's displays, the judge LLM and where the truth came from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Group
from rich.table import Table
from rich.text import Text

from vista.display import Comparison
from vista.shared.bootstrap import Interval

Scorer = Literal["exact", "date", "set", "judge", "display_failed", "judge_failed", "unscorable"]


COLUMNS = ("accuracy [95% CI]", "mean score", "n scored", "not scored")
"""Each method's columns: accuracy, mean score (0-10), evaluations scored of those possible, and why not."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ItemScore(_Model):
    """One variable of one patient's display, scored (or why not)."""

    subject_id: int
    method: str
    key: str
    comparison: Comparison
    scorer: Scorer = Field(description="exact/date/set/judge: how it was scored; display_failed: the display's call "
                           "failed (score 0); judge_failed: the judge call failed (score 0, counted as wrong); "
                           "unscorable: the truth cannot settle it")
    score: int | None = Field(default=None, ge=0, le=10)
    correct: bool | None = Field(default=None, description="score >= threshold (None when not scored)")
    rationale: str = ""
    reference: str = ""
    value: str = ""
    uncited: bool = Field(default=False, description="the display's answer cited no event it was shown, so it was "
                          "shown and scored as 'Not found'")

    @property
    def evaluated(self) -> bool:
        return self.score is not None


class ScoreSummary(_Model):
    """What a set of evaluations scored: accuracy and mean score with their CIs, and the counts behind them (how
    many were scored, and why the others were not). A variable's and a method's results are one each."""

    n_patients: int
    n_evaluated: int
    n_correct: int
    accuracy: Interval | None
    mean_score: Interval | None
    display_failures: int
    judge_failures: int
    unscorable: int
    uncited: int = Field(default=0, description="scored values whose answer cited nothing (scored as 'Not found')")


class VariableResult(ScoreSummary):
    """One method's results on one variable across patients."""

    method: str
    key: str
    label: str
    comparison: Comparison
    scored: bool = Field(description="the variable spec's `scored`")
    section: Literal["patient", "tumor_board"] = Field(default="tumor_board", description="tumor_board variables "
                                                       "make the headline; patient information is reported apart")
    unscorable_reasons: tuple[str, ...] = ()


class MethodResult(ScoreSummary):
    """One method's overall results over a set of variables (the headline: the scored tumor-board variables)."""

    method: str
    display_models: tuple[str, ...] = Field(description="the LLM(s) named by the method's displays")
    display_calls: int = Field(default=0, description="LLM calls the displays report (VISTA: display calls only, "
                               "not the one-time TOA build)")
    display_prompt_tokens: int = 0
    display_completion_tokens: int = 0


class EvaluationReport(_Model):
    """The evaluation of one or more display methods against the ground truth by one judge."""

    judge_model: str
    judge_backend: str
    judge_endpoint: str = Field(default="", description="who answered the judge calls (base URL or model file)")
    judge_is_display_model: bool = Field(default=False, description="the judge also wrote displays (warned: the "
                                         "paper judges with a different, stronger model)")
    truth_sources: tuple[str, ...] = Field(default=(), description="where the reference answers came from")
    threshold: int = Field(ge=0, le=10)
    level: float
    n_resamples: int
    seed: int
    methods: tuple[MethodResult, ...] = Field(description="the headline: scored tumor-board variables, per method")
    variables: tuple[VariableResult, ...]
    patient_info: tuple[MethodResult, ...] = Field(default=(), description="the scored patient-information "
                                                   "variables per method, reported apart from the headline")
    difference: Interval | None = Field(default=None, description="headline accuracy of the first method minus the second "
                                        "(vista − rag) over the patients both have, resampled together")
    difference_methods: tuple[str, ...] = ()
    judge_calls: int = Field(default=0, ge=0, description="distinct judge questions asked (identical ones once)")
    items: tuple[ItemScore, ...]

    def method(self, name: str) -> MethodResult:
        for result in self.methods:
            if result.method == name:
                return result
        raise KeyError(f"no method {name!r} in the report (have {[m.method for m in self.methods]})")

    def variable(self, method: str, key: str) -> VariableResult:
        for result in self.variables:
            if result.method == method and result.key == key:
                return result
        raise KeyError(f"no result for method {method!r}, variable {key!r}")

    # ------------------------------------------------------------------------------------------ rendering
    def _method_names(self) -> list[str]:
        return [m.method for m in self.methods]

    def header_lines(self) -> list[str]:
        """Who wrote what and how it was scored, in words."""
        lines = [f"{m.method.upper()} displays written by: {', '.join(m.display_models) or 'no model'} "
                 f"({m.n_patients} patients; {m.display_calls} calls, {m.display_prompt_tokens} prompt + "
                 f"{m.display_completion_tokens} completion tokens)" for m in self.methods]
        endpoint = f", {self.judge_endpoint}" if self.judge_endpoint and self.judge_endpoint != self.judge_backend else ""
        lines.append(f"Judge: {self.judge_model} ({self.judge_backend}{endpoint}, {self.judge_calls} calls); "
                     f"correct = score >= {self.threshold}/10; "
                     f"{self.level:.0%} CIs by bootstrap over patients ({self.n_resamples} resamples, seed {self.seed})")
        if self.judge_is_display_model:
            lines.append(f"WARNING: the judge {self.judge_model} also wrote the displays (the paper judges with a "
                         "different, stronger model)")
        failures = sum(m.judge_failures for m in (*self.methods, *self.patient_info))
        if failures:
            lines.append(f"{failures} judge call(s) failed; each is counted as a wrong answer (score 0)")
        uncited = {m.method: sum(i.uncited and i.evaluated for i in self.items if i.method == m.method)
                   for m in self.methods}
        if any(uncited.values()):
            lines.append("Values whose answer cited no event, shown and scored as Not found: " +
                         ", ".join(f"{m} {n}" for m, n in uncited.items()))
        if self.truth_sources:
            lines.append(f"Truth: {'; '.join(self.truth_sources)}")
        lines.append("OVERALL = scored tumor-board variables; patient information (demographics etc.) is reported "
                     "apart: demographics are copied from the same structured data as their reference")
        if self.difference is not None:
            a, b = self.difference_methods
            lines.append(f"Accuracy difference {a} - {b}: {_fmt(self.difference)}")
        return lines

    def _cells(self, result: ScoreSummary | None) -> list[str]:
        if result is None:
            return ["-", "-", "-", "-"]
        notes = [f"{n} {what}" for n, what in ((result.display_failures, "display failed"),
                                                (result.judge_failures, "judge failed (counted wrong)"),
                                                (result.unscorable, "unscorable"),
                                                (result.uncited, "uncited (scored as Not found)")) if n]
        possible = result.n_evaluated + result.unscorable
        return [_fmt(result.accuracy), _fmt(result.mean_score, scale=1), f"{result.n_evaluated}/{possible}",
                "; ".join(notes) or "-"]

    def _rows(self) -> list[tuple[str, list[str]]]:
        names = self._method_names()
        keys = list(dict.fromkeys(v.key for v in self.variables))
        rows = []
        for key in keys:
            found = {v.method: v for v in self.variables if v.key == key}
            first = next(iter(found.values()))
            label = f"{first.label} [{first.comparison.value}]" + ("" if first.scored else " (not scored)") + \
                (" (patient info)" if first.section == "patient" else "")
            rows.append((label, [c for name in names for c in self._cells(found.get(name))]))
        if self.patient_info:
            found = {m.method: m for m in self.patient_info}
            rows.append(("PATIENT INFORMATION (apart)", [c for name in names for c in self._cells(found.get(name))]))
        rows.append(("OVERALL (scored tumor-board variables)", [c for m in self.methods for c in self._cells(m)]))
        return rows

    def to_table(self) -> Group:
        """A rich renderable: who wrote and judged, then one row per variable with each method's columns."""
        table = Table(title="Tumor-board variables: accuracy against the ground truth", show_lines=False)
        table.add_column("Variable")
        for name in self._method_names():
            for col in COLUMNS:
                table.add_column(f"{name.upper()} {col}", justify="right" if col != "not scored" else "left")
        rows = self._rows()
        last_variable = len(rows) - 2 - bool(self.patient_info)
        for k, (label, cells) in enumerate(rows):  # Text cells: brackets are content, not rich markup
            table.add_row(Text(label), *(Text(c) for c in cells), end_section=k == last_variable)
        return Group(*(Text(line) for line in self.header_lines()), table)

    def write(self, out: Path) -> dict[str, Path]:
        """``out/evaluation.json`` and ``out/evaluation.md`` (private, synced: `vista.shared.atomic`), by name."""
        from vista.shared.atomic import atomic_write_text

        paths = {"evaluation": Path(out) / "evaluation.json", "evaluation_md": Path(out) / "evaluation.md"}
        atomic_write_text(paths["evaluation"], self.model_dump_json(indent=1), fsync=True)
        atomic_write_text(paths["evaluation_md"], self.to_markdown(), fsync=True)
        return paths

    def to_markdown(self) -> str:
        """The same content as `to_table`, as a Markdown table."""
        names = self._method_names()
        head = ["Variable"] + [f"{n.upper()} {c}" for n in names for c in COLUMNS]
        out = [f"- {line}" for line in self.header_lines()] + ["", "| " + " | ".join(head) + " |",
                                                               "|" + "---|" * len(head)]
        for label, cells in self._rows():
            out.append("| " + " | ".join([label, *cells]) + " |")
        return "\n".join(out) + "\n"


def _fmt(interval: Interval | None, *, scale: int = 100) -> str:
    """``71% [55, 84]`` for accuracies (scale 100) or ``7.1 [6.0, 8.2]`` for mean scores (scale 1)."""
    if interval is None:
        return "n/a"
    digits = 0 if scale == 100 else 1
    unit = "%" if scale == 100 else ""
    value = f"{interval.value * scale:.{digits}f}{unit}"
    if interval.lower is None or interval.upper is None:
        return f"{value} [CI n/a]"
    return f"{value} [{interval.lower * scale:.{digits}f}, {interval.upper * scale:.{digits}f}]"
