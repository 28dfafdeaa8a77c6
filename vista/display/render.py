"""Show a display to people: a rich table (label, value, cited ids) with the note, or the same as Markdown.

>>> from vista.display.model import TumorBoardDisplay, VariableValue
>>> d = TumorBoardDisplay(subject_id=3, method="vista", model="m", content_hash="h", summary_note="Stage IV NSCLC.",
...     summary_refs=("t2",), values=(VariableValue(key="histology", value="Adenocarcinoma", timeline_refs=("t2",),
...     source_refs=("e11",), origin="llm"), VariableValue(key="stage", value="Not available", origin="failed",
...     error="timeout after 1 attempt(s): slow")))
>>> print(display_markdown(d))
### Tumor board display: subject 3 (vista, model m)
<BLANKLINE>
**INCOMPLETE display: 1 variable(s) not answered (stage)**
<BLANKLINE>
| Variable | Value | Cited |
|---|---|---|
| Histology | Adenocarcinoma | t2 → e11 |
| Stage (AJCC group and TNM) | Not available (failed: timeout after 1 attempt(s): slow) |  |
<BLANKLINE>
**Summary.** Stage IV NSCLC. (t2)
<BLANKLINE>
_0 LLM calls, 0 prompt + 0 completion tokens._
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from vista.display.model import DisplayError, TumorBoardDisplay, VariableSpec, VariableValue, load_variables
from vista.toa.model import PatientTimeline

_ORIGIN_STYLE = {"structured": "cyan", "llm": "", "uncited": "yellow", "failed": "red"}


def _labels(variables: Sequence[VariableSpec] | None) -> dict[str, str]:
    if variables is None:
        try:
            variables = load_variables()
        except DisplayError:
            variables = ()
    return {spec.key: spec.label for spec in variables}


def _value_text(value: VariableValue) -> str:
    if value.origin == "failed" and value.error:
        return f"{value.value} (failed: {value.error})"
    if value.uncited:  # the model's words stay in the JSON record, never in the sheet
        return f"{value.shown} (the model's answer cited no event it was shown)"
    return value.value


def _cited(value: VariableValue, timeline: PatientTimeline | None) -> str:
    if timeline is not None and value.timeline_refs:
        events = {e.event_id: e for e in timeline.events}
        refs = ", ".join(f"{r} ({events[r].date.isoformat()} {events[r].type})" if r in events else r
                         for r in value.timeline_refs)
    else:
        refs = ", ".join(value.timeline_refs)
    sources = ", ".join(value.source_refs)
    if refs and sources:
        return f"{refs} → {sources}"
    return refs or sources


def render_display(display: TumorBoardDisplay, timeline: PatientTimeline | None = None, *,
                   variables: Sequence[VariableSpec] | None = None) -> RenderableType:
    """A rich table of the variables (label, value, cited timeline → graph ids) followed by the summary note.

    With ``timeline``, each cited ``t<k>`` also shows its date and type. ``variables`` gives the labels (default:
    the packaged definitions; unknown keys show as themselves)."""
    labels = _labels(variables)
    table = Table(title=f"Tumor board display — subject {display.subject_id} ({display.method}, {display.model})",
                  show_lines=False, expand=False)
    table.add_column("Variable", style="bold", no_wrap=True)
    table.add_column("Value", overflow="fold")
    table.add_column("Cited", style="dim", overflow="fold")
    for value in display.values:
        style = _ORIGIN_STYLE["uncited" if value.uncited else value.origin]
        table.add_row(labels.get(value.key, value.key), Text(_value_text(value), style=style),
                      _cited(value, timeline))
    footer = Text(f"{display.calls} LLM calls, {display.prompt_tokens} prompt + {display.completion_tokens} "
                  "completion tokens", style="dim")
    note = display.summary_note or "(no summary note)"
    refs = f"\n[{', '.join(display.summary_refs)}]" if display.summary_refs else ""
    gaps = incomplete_lines(display, timeline)
    warning = [Text("\n".join(gaps), style="bold red")] if gaps else []
    return Group(*warning, table, Panel(Text(note + refs), title="Summary note", expand=False), footer)


def incomplete_lines(display: TumorBoardDisplay, timeline: PatientTimeline | None = None) -> list[str]:
    """``INCOMPLETE: …`` lines for a display (or the timeline under it) some of whose calls failed, and the
    ``UNCITED: …`` line (none when complete and cited): a reader must never take a partial display for a complete
    one, nor an uncited answer for a fact."""
    lines = []
    if (gaps := display.incomplete_reason()) is not None:
        lines.append(f"INCOMPLETE display: {gaps}")
    if timeline is not None and (gaps := timeline.incomplete_reason()) is not None:
        lines.append(f"INCOMPLETE timeline: {gaps}")
    if (uncited := uncited_line(display)) is not None:
        lines.append(uncited)
    return lines


def uncited_line(display: TumorBoardDisplay) -> str | None:
    """``UNCITED: …`` when some model answers cited no event they were shown (shown as Not found), else None."""
    keys = display.uncited_keys()
    if not keys:
        return None
    listed = ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")
    return (f"UNCITED: {len(keys)} value(s) shown as Not found, the model's answer cited no event it was shown "
            f"({listed})")


def citation_summary(display: TumorBoardDisplay) -> str:
    """One line of what stands on citations: values cited, shown as Not found for want of one, ids dropped."""
    kinds = ["uncited" if v.uncited else v.origin for v in display.values]
    by_origin = {o: kinds.count(o) for o in ("structured", "llm", "uncited", "failed")}
    return (f"display values: {by_origin['llm']} model-written with citations, {by_origin['structured']} from "
            f"structured data, {by_origin['uncited']} shown as Not found (uncited), {by_origin['failed']} failed; "
            f"{display.dropped_refs} cited id(s) dropped")


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def display_markdown(display: TumorBoardDisplay, *, variables: Sequence[VariableSpec] | None = None) -> str:
    """The display as Markdown: a heading, a variable table, the summary note with its cited ids, the call counts."""
    labels = _labels(variables)
    lines = [f"### Tumor board display: subject {display.subject_id} ({display.method}, model {display.model})", ""]
    lines += [f"**{line}**" for line in incomplete_lines(display)] + ([""] if incomplete_lines(display) else [])
    lines += ["| Variable | Value | Cited |", "|---|---|---|"]
    lines += [f"| {_cell(labels.get(v.key, v.key))} | {_cell(_value_text(v))} | {_cell(_cited(v, None))} |"
              for v in display.values]
    if display.summary_note:
        refs = f" ({', '.join(display.summary_refs)})" if display.summary_refs else ""
        lines += ["", f"**Summary.** {_cell(display.summary_note)}{refs}"]
    lines += ["", f"_{display.calls} LLM calls, {display.prompt_tokens} prompt + {display.completion_tokens} "
              "completion tokens._"]
    return "\n".join(lines)
