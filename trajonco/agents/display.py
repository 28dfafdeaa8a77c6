"""Shows a `PatientResult` (or an `AnyCancerResult`) to a person (rich tables) or to a program (JSON).

These print patient-derived text on purpose: they are the output of a command the user ran for one patient,
not log lines.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from trajonco.agents.evidence import flag_note
from trajonco.agents.prompts import horizon_text
from trajonco.agents.results import AnyCancerResult, PatientResult
from trajonco.cancers import CANCERS

_RISK_STYLE = {"Low": "green", "Moderate": "yellow", "High": "red"}


def result_json(result: PatientResult | AnyCancerResult) -> str:
    """The result as indented JSON (every field, dates in ISO format)."""
    return result.model_dump_json(indent=2)


def _headline(result: PatientResult) -> Text:
    cancer = CANCERS[result.cancer].display_name if result.cancer in CANCERS else f"{result.cancer} cancer"
    if result.likely_cancer is not None:
        cancer += f" (most likely: {CANCERS[result.likely_cancer].display_name})"
    score = "—" if result.risk_score is None else f"{result.risk_score}/10"
    text = Text.assemble(
        (f"subject {result.subject_id}", "bold"), f" · {cancer} within {horizon_text(result.horizon_days)} of ",
        result.prediction_time.date().isoformat(), " · risk ", (score, "bold"),
        f" · {result.variant.value} · {result.model} · ",
        (result.status, {"ok": "green", "partial": "yellow", "failed": "red"}[result.status]),
    )
    return text


def _trajectory(result: PatientResult) -> Table:
    table = Table(title="risk per chunk", expand=False)
    for column in ("chunk", "from", "to", "risk", "events (new to memory)"):
        table.add_column(column)
    for step in result.risk_trajectory:
        level = step.risk_level.value if step.risk_level is not None else "failed"
        table.add_row(
            str(step.chunk_index + 1),
            step.start_time.date().isoformat() if step.start_time else "",
            step.end_time.date().isoformat() if step.end_time else "",
            Text(level, _RISK_STYLE.get(level, "red")),
            f"{step.new_events} ({step.stored_events})",
        )
    return table


def _events(result: PatientResult) -> Table:
    flagged = result.evidence_unsourced + result.evidence_out_of_record
    title = "related events" + (f" ({flagged} flag(s): shown as the agent said, not as facts)" if flagged else "")
    table = Table(title=title, expand=True)
    table.add_column("date", no_wrap=True)
    table.add_column("event")
    table.add_column("source rows")
    for event in result.events:
        sources = ", ".join(f"{s.event_id}→{s.shard}#{s.row}" for s in event.sources)
        style = "yellow" if event.flags else ""
        table.add_row(Text(event.timestamp.isoformat(), style), Text(event.description + flag_note(event.flags), style),
                      sources or Text("none", "yellow"))
    return table


def _facts(result: PatientResult) -> Table:
    table = Table(title="run", expand=False)
    table.add_column("")
    table.add_column("")
    c = result.chunks
    chunks = f"C={c.n_chunks} (l={c.chunk_tokens}, {c.timeline_tokens} tokens, {c.timeline_events} events)"
    if c.n_chunks_reduced is not None:
        chunks += f" → C_new={c.n_chunks_reduced} ({c.reduced_tokens} tokens, {c.reduced_events} events)"
    table.add_row("chunks", chunks)
    lat = result.latency
    table.add_row("latency s", f"preprocess {lat.preprocess:.2f} · workers {lat.workers:.2f} · manager {lat.manager:.2f} · "
                  f"single {lat.single_agent:.2f} · total {lat.total:.2f}")
    for agent, usage in result.usage.items():
        table.add_row(f"usage {agent}", f"{usage.calls} calls ({usage.cache_hits} cached, {usage.failed} failed) · "
                      f"{usage.prompt_tokens}+{usage.completion_tokens} tokens · {usage.model_seconds:.2f} s model")
    table.add_row("memory", f"{result.memory_events} events · dropped: {result.dropped_event_ids} unknown ids, "
                  f"{result.dropped_events} events dated at/after the prediction time · flagged: "
                  f"{result.evidence_unsourced} unsourced, {result.evidence_out_of_record} dated outside the record")
    if result.truncation_note:
        table.add_row("truncated", result.truncation_note)
    for error in result.errors:
        where = "" if error.chunk_index is None else f" chunk {error.chunk_index + 1}"
        table.add_row(Text("error", "red"), f"{error.agent}{where}: {error.message}")
    return table


def render_result(result: PatientResult) -> Group:
    """The rich renderable of one result."""
    parts: list = [_headline(result)]
    if result.summary:
        parts.append(Panel(result.summary, title="risk evolution"))
    if result.reasoning:
        parts.append(Panel(result.reasoning, title="reasoning"))
    if result.risk_trajectory:
        parts.append(_trajectory(result))
    if result.events:
        parts.append(_events(result))
    parts.append(_facts(result))
    return Group(*parts)


def render_any_cancer(result: AnyCancerResult) -> Group:
    """The rich renderable of an any-cancer result: the chain's whole result, or the pooled and per-cancer scores."""
    score = "—" if result.risk_score is None else f"{result.risk_score}/10"
    named = "most likely" if result.mode == "chain" else "strongest"
    head = Text.assemble((f"subject {result.subject_id}", "bold"), f" · any cancer ({result.mode}) · risk ", (score, "bold"),
                         f" · {named}: {result.strongest_cancer or '—'} · {result.status}")
    if result.mode == "chain":
        parts = [head, *(render_result(r) for r in result.results)]
        if result.skipped:
            parts.append(Text(f"not considered (sex): {', '.join(result.skipped)}"))
        return Group(*parts)
    table = Table(title="per cancer")
    table.add_column("cancer")
    table.add_column("risk")
    table.add_column("status")
    for s in result.scores:
        table.add_row(CANCERS[s.cancer].display_name, "—" if s.risk_score is None else str(s.risk_score), s.status)
    parts: list = [head, table]
    if result.skipped:
        parts.append(Text(f"not assessed (sex): {', '.join(result.skipped)}"))
    return Group(*parts)


def print_result(result: PatientResult | AnyCancerResult, *, as_json: bool = False, console: Console | None = None) -> None:
    """Print a result readably (rich) or, with ``as_json``, as JSON."""
    console = console or Console()
    if as_json:
        console.print_json(result_json(result))
        return
    console.print(render_any_cancer(result) if isinstance(result, AnyCancerResult) else render_result(result))
