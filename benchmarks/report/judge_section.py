"""The report's pairwise-judge section (and the human-evaluation agreement, when reviewers' answers exist).

Built from a `trajonco.judge.JudgeReport` (``judge.json`` written by ``trajonco judge``) and, optionally, a
`trajonco.human_eval.HumanEvalReport`; with no judge report the section says how to make one instead of vanishing.
`judge_section` returns a `Section` like those of `benchmarks.report.sections`; the figures are also written to
``figures/fig-judge.png`` (verdicts per rubric) and ``figures/fig-judge-length.png`` (score by EHR length, as the
paper's Fig. 4b, from 4 patients on).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from vista.shared.atomic import atomic_write_bytes
from trajonco.report_document import Figure, Section, Table
from trajonco.human_eval.agreement import HumanEvalReport
from trajonco.judge.report import JudgeReport
from vista.shared.llm.config import EMBEDDED_MODEL_NAME

SECTION_ID = "pairwise-judge"
TIE_COLOR = (0.62, 0.62, 0.62)
Colors = Mapping[str, object]
"""Run name -> colour: a dict or the report's `benchmarks.report.palette.Palette` (anything with ``in`` and ``[]``),
so the runs keep the colours they have in the report's other figures."""
MIN_PATIENTS_FOR_CI = 10
"""Below this many judged patients the tables show the rate without an interval ("too few for a CI"): a bootstrap
over 3 or 4 patients gives intervals that look precise and are not (the intervals stay in judge.json)."""


def _color(colors: Colors | None, name: str, default: object) -> object:
    return colors[name] if colors is not None and name in colors else default


def _rate(rate) -> str:
    if rate is None:
        return "–"
    if rate.n < MIN_PATIENTS_FOR_CI:
        return f"{rate.value:.2f} (too few for a CI)"
    return str(rate)


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def judge_figure(report: JudgeReport, colors: Colors | None = None) -> bytes:
    """Stacked bars per rubric: run A wins, ties, run B wins (both orders pooled), n in the title."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    palette = plt.get_cmap("tab10").colors
    color_a = _color(colors, report.run_a.name, palette[0])
    color_b = _color(colors, report.run_b.name, palette[2])
    rubrics = [r for r in report.rubrics if r.win is not None][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.5 * max(len(rubrics), 1) + 1.6), layout="constrained")
    for y, r in enumerate(rubrics):
        left = 0.0
        for value, color, label in ((r.win.value, color_a, f"{report.run_a.name} wins"),
                                    (r.tie.value, TIE_COLOR, "tie"), (r.loss.value, color_b,
                                                                      f"{report.run_b.name} wins")):
            ax.barh(y, value, left=left, color=color, label=label if y == 0 else None)
            if value >= 0.08:
                ax.text(left + value / 2, y, f"{value:.0%}", ha="center", va="center", fontsize=8, color="white")
            left += value
    ax.set_yticks(range(len(rubrics)), [r.title for r in rubrics])
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of verdicts (both candidate orders)")
    ax.set_title(f"Pairwise judge ({report.judge_model}), n = {report.n_judged} patients", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, fontsize=8, frameon=False)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


LENGTH_RUBRICS = ("temporal_reasoning", "clinical_reasoning", "completeness")
"""Rubrics plotted against EHR length (the paper's Fig. 4b shows the dimensions that depend most on it)."""
_POINTS = {"a": 1.0, "tie": 0.5, "b": 0.0}


def length_points(report: JudgeReport, rubric: str) -> list[tuple[int, float]]:
    """(timeline tokens, run A's score averaged over the two orders) per judged patient with a known length."""
    return [(j.timeline_tokens, sum(_POINTS[o.verdicts[rubric]] for o in j.orders) / 2)
            for j in report.judgements if j.ok and j.timeline_tokens]


def length_figure(report: JudgeReport, colors: Colors | None = None) -> bytes:
    """Run A's per-patient score (win 1 / tie 0.5 / loss 0, mean of both orders) against the EHR length (log
    scale), with the mean per length quartile when there are at least 8 patients."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib import ticker

    fig, axes = plt.subplots(1, len(LENGTH_RUBRICS), figsize=(4 * len(LENGTH_RUBRICS), 3.2), sharey=True,
                             layout="constrained")
    color = _color(colors, report.run_a.name, plt.get_cmap("tab10").colors[0])
    rng = np.random.default_rng(0)
    for ax, key in zip(axes, LENGTH_RUBRICS):
        points = length_points(report, key)
        x = np.array([p[0] for p in points], float)
        y = np.array([p[1] for p in points], float)
        ax.scatter(x, y + rng.uniform(-0.03, 0.03, len(y)), s=14, alpha=0.6, color=color)
        if len(points) >= 8:
            edges = np.quantile(x, [0, 0.25, 0.5, 0.75, 1])
            bins = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, 3)
            centers = [np.exp(np.log(x[bins == b]).mean()) for b in range(4) if (bins == b).any()]
            means = [y[bins == b].mean() for b in range(4) if (bins == b).any()]
            ax.plot(centers, means, color="black", lw=1.5, label="mean per length quartile")
            ax.legend(fontsize=7, loc="lower left")
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_ylim(-0.1, 1.1)
        ax.axhline(0.5, color=TIE_COLOR, lw=0.8, ls="--")
        title = next(r.title for r in report.rubrics if r.rubric == key)
        ax.set_title(f"{title} (n = {len(points)})", fontsize=9)
        ax.set_xlabel("EHR length (timeline tokens)")
    axes[0].set_ylabel(f"score of {report.run_a.name}\n(1 win, 0.5 tie, 0 loss)", fontsize=8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def judge_tables(report: JudgeReport) -> list[Table]:
    level = f"{report.level:.0%} CI"
    rows = [[r.title, str(r.n), _rate(r.win), _rate(r.tie), _rate(r.loss), _rate(r.score),
             f"{r.bias.flips}/{r.bias.n}", _share(r.bias.first_share)] for r in report.rubrics]
    b = report.overall_bias
    rows.append(["all rubrics", str(report.n_judged), "", "", "", "", f"{b.flips}/{b.n}", _share(b.first_share)])
    results = Table("table-judge", f"Pairwise judge: {report.run_a.name} (A) vs {report.run_b.name} (B)",
                    ["rubric", "n", f"A wins ({level})", f"ties ({level})", f"B wins ({level})", "score A (1/0.5/0)",
                     "verdict flips with order", "decisive verdicts for first shown"],
                    rows, note="Rates pool the two candidate orders of each patient; CIs by bootstrap over patients "
                    f"({report.n_resamples} resamples). A flip: the verdict changes when A and B swap places; "
                    "'first shown' 50% means no preference for a position."
                    + (f" Fewer than {MIN_PATIENTS_FOR_CI} patients: no CI shown." if report.n_judged <
                       MIN_PATIENTS_FOR_CI else ""))
    kappa = Table("table-judge-orders", "Agreement of the judge with itself across candidate orders",
                  ["comparisons", "same verdict in both orders", "Cohen's kappa (order AB vs BA)"],
                  [[str(b.n), _share(b.agreement), str(b.order_kappa)]])
    return [results, kappa]


def human_table(human: HumanEvalReport) -> Table:
    rows = [[f"{a.rater_1} vs {a.rater_2}", a.kind, str(a.kappa.n), _share(a.kappa.observed),
             "n/a" if a.kappa.kappa is None else f"{a.kappa.kappa:.2f}"]
            for a in (*human.between_reviewers, *human.reviewer_vs_judge)]
    return Table("table-human-kappa", "Human evaluation: Cohen's kappa", ["raters", "questions", "n", "agreement",
                                                                          "kappa"], rows,
                 note="Reviewer-vs-judge rows compare the reviewer's rubric answers (unblinded) with the verdict the "
                 "judge gave in both candidate orders (a tie when the order changed it).")


def judge_section(report: JudgeReport | None, figures_dir: Path, *, human: HumanEvalReport | None = None,
                  colors: Colors | None = None) -> Section:
    """The pairwise-judge section (``colors`` maps run names to the report's model colours)."""
    section = Section(SECTION_ID, "Pairwise LLM judge (five rubrics, both candidate orders)")
    if report is None:
        section.paragraphs.append("No pairwise judge was run: it needs two agent prediction runs on the same patients "
                                  "(`trajonco judge RUN_A RUN_B --out DIR`, then pass DIR/judge.json).")
    else:
        section.paragraphs.append(
            f"A judge LLM ({report.judge_model}, {report.judge_backend}) compared {report.run_a.name} (A) with "
            f"{report.run_b.name} (B) patient by patient on five rubrics (clinical correctness, completeness and "
            "detail, clinical reasoning, temporal reasoning, clarity and actionability), once with each answer shown "
            f"first, told the true outcome. {report.pairing.sentence()}"
            + (f" {report.n_failed} patient(s) left out because a judge call failed." if report.n_failed else "")
            + (f" {report.n_cut} patient(s) had answers cut to fit the judge's context." if report.n_cut else ""))
        if report.judge_model == EMBEDDED_MODEL_NAME:
            section.paragraphs.append("The judge here is the embedded 135M test model: these verdicts prove the "
                                      "machinery only; use a strong model (--judge-llm) for real comparisons.")
        section.tables += judge_tables(report)
        if report.n_judged:
            png = judge_figure(report, colors)
            atomic_write_bytes(figures_dir / "fig-judge.png", png)
            section.figures.append(Figure("fig-judge", f"Pairwise judge verdicts per rubric (n = {report.n_judged} "
                                          "patients, both orders pooled)", png))
        if len(length_points(report, LENGTH_RUBRICS[0])) >= 4:
            png = length_figure(report, colors)
            atomic_write_bytes(figures_dir / "fig-judge-length.png", png)
            section.figures.append(Figure("fig-judge-length", f"Score of {report.run_a.name} against "
                                          f"{report.run_b.name} by EHR length (n = {report.n_judged} patients; "
                                          "each point averages the two candidate orders)", png))
    if human is not None:
        section.paragraphs.append(f"Human evaluation: {human.n_packets} blinded packets, reviewers "
                                  + ", ".join(r.reviewer for r in human.reviewers) + ".")
        section.tables.append(human_table(human))
    return section
