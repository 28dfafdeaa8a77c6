"""`summary_table`: what `trajonco synth` made, as a small table a person reads (not a Python repr)."""

from __future__ import annotations

from rich.table import Table

from vista.shared.synth.generator import SynthSummary


def summary_table(summary: SynthSummary) -> Table:
    """Rows, subjects, cases per cancer and speed of one `generate` call.

    >>> import io
    >>> from rich.console import Console
    >>> s = SynthSummary(out_dir="out/synth", subjects=400, rows=103236, notes=3011, shards=1, data_files=3,
    ...                  cancer_patients={"lung": 7}, incident_cases={"lung": 6}, rule_outs=7, traps={"prior_code": 3},
    ...                  seconds=2.0, rows_per_second=51618.0, parent_peak_rss_mb=457.4, worker_peak_rss_mb={1: 287.3})
    >>> console = Console(width=100, file=io.StringIO())
    >>> console.print(summary_table(s))
    >>> text = console.file.getvalue()
    >>> "lung 6/7" in text and "103,236" in text
    True
    """
    table = Table(title=f"synthetic MEDS dataset in {summary.out_dir}", show_header=False, title_justify="left")
    table.add_column("", style="bold")
    table.add_column("")
    table.add_row("subjects / rows / notes", f"{summary.subjects:,} / {summary.rows:,} / {summary.notes:,}")
    table.add_row("shards / data files", f"{summary.shards} / {summary.data_files}")
    cases = ", ".join(f"{name} {summary.incident_cases.get(name, 0)}/{n}" for name, n in summary.cancer_patients.items())
    table.add_row("cancer: incident / all patients", cases or "none")
    table.add_row("rule-outs", f"{summary.rule_outs:,}")
    table.add_row("cohort traps", ", ".join(f"{k} {v}" for k, v in summary.traps.items()) or "none")
    workers = max(summary.worker_peak_rss_mb.values(), default=0.0)
    table.add_row("time", f"{summary.seconds:.1f} s ({summary.rows_per_second:,.0f} rows/s)")
    table.add_row("peak memory", f"parent {summary.parent_peak_rss_mb:,.0f} MB; largest worker {workers:,.0f} MB "
                  f"({len(summary.worker_peak_rss_mb)} worker(s))")
    return table
