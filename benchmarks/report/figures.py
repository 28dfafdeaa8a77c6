"""The report's figures (matplotlib, Agg backend), each returned as PNG bytes.

Every function takes result models (never recomputes a number) so a figure shows exactly what the tables say.
Colours come from one `Palette` per report (a model keeps its colour in every figure); every AUROC point says
how many cases/controls it stands on. A result on too few cases or controls (`baselines.metrics.MIN_CASES`) is
never drawn among the others (`drawable` leaves it out; the caption names it), and points that reuse another
point's run are not drawn as a measured curve. AUROC axes stay within [0, 1]; every multi-model figure has a
legend.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
import numpy as np  # noqa: E402

from baselines import StratumResult  # noqa: E402
from baselines.metrics import too_few, too_few_text  # noqa: E402
from benchmarks.report.palette import Palette  # noqa: E402
from benchmarks.report.profile import RunProfile, SelectionPoint  # noqa: E402
from benchmarks.report.results import (  # noqa: E402
    AgentSensitivityPoint,
    GapPoint,
    ModelResult,
    PairedComparison,
    TruncationPoint,
)

DPI = 110
STAGE_COLORS = {"preprocess": "#c7c7c7", "workers": "#969696", "manager": "#525252", "single_agent": "#252525"}
N_FONT = 6.5


LEGEND_KEY = "Legend"
"""PNG text chunk listing the figure's legend entries (' | '-separated), so a reader of the page can check them."""


def legend_entries(fig) -> list[str]:
    """Every legend entry of ``fig`` (figure-level and per-axes legends), in order."""
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    return [text.get_text() for legend in legends for text in legend.get_texts()]


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight",
                metadata={LEGEND_KEY: " | ".join(legend_entries(fig))})
    plt.close(fig)
    return buffer.getvalue()


def span(values: Sequence[float], *, low: float, high: float, pad: float = 0.03) -> tuple[float, float]:
    """Axis limits holding every value and [low, high], padded.

    >>> span([0.12, 0.9], low=0.4, high=1.0)
    (0.09, 1.03)
    """
    finite = [v for v in values if np.isfinite(v)]
    return min([low, *finite]) - pad, max([high, *finite]) + pad


def auroc_span(values: Sequence[float], *, low: float = 0.4, pad: float = 0.03, room: float = 0.0
               ) -> tuple[float, float]:
    """AUROC axis limits: every value and [low, 1], padded below (``room`` more for labels), never outside [0, 1].

    >>> auroc_span([0.12, 1.0]), auroc_span([0.7], room=0.1)
    ((0.09, 1.0), (0.27, 1.0))
    """
    lower, _ = span(values, low=low, high=1.0, pad=pad)
    return round(max(0.0, lower - room), 6), 1.0


def drawable(items: Sequence, *, too_few_of=lambda item: item.too_few) -> tuple[list, list]:
    """(items to draw, items left out): a result on too few cases or controls never sits among the others."""
    return [i for i in items if not too_few_of(i)], [i for i in items if too_few_of(i)]


def _room_for_labels(ax, share: float = 0.12) -> None:
    """Widen the x axis on the right so the n labels written after each CI stay inside the axes."""
    low, high = ax.get_xlim()
    ax.set_xlim(low, high + share * (high - low))


def _n(n_pos: int, n_neg: int) -> str:
    return f"n={n_pos}/{n_neg}" + (" too few" if too_few(n_pos, n_neg) else "")


def _dot(ax, x, y, err, color, *, hollow: bool, label: str | None = None) -> None:
    ax.errorbar([x], [y], xerr=err, fmt="o", ms=4.5, capsize=2, color=color, label=label,
                markerfacecolor="white" if hollow else color)


def auroc_overview(results: Sequence[ModelResult], cohorts: Sequence[str], palette: Palette) -> bytes:
    """AUROC with 95% CI of every model on every cohort (dot-and-whisker, one row per cohort), n beside each;
    results on too few patients are left out (the caption names them)."""
    results, _ = drawable(results)
    models = list(dict.fromkeys(r.model for r in results))
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(cohorts) * max(1, len(models)) + 1.6), layout="constrained")
    offsets = np.linspace(-0.3, 0.3, len(models)) if len(models) > 1 else [0.0]
    index = {c: i for i, c in enumerate(cohorts)}
    for model, offset in zip(models, offsets):
        first = True
        for r in (r for r in results if r.model == model and r.cohort in index):
            a, y = r.evaluation.auroc, index[r.cohort] + offset
            _dot(ax, a.value, y, [[a.value - a.lower], [a.upper - a.value]], palette[model], hollow=False,
                 label=model if first else None)
            ax.annotate(_n(r.evaluation.n_positive, r.evaluation.n_negative), (a.lower, y), xytext=(-4, 0),
                        textcoords="offset points", va="center", ha="right", fontsize=N_FONT, color=palette[model])
            first = False
    lows = [r.evaluation.auroc.lower for r in results]
    ax.set_xlim(*auroc_span(lows, room=0.12))
    ax.axvline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_yticks(range(len(cohorts)), cohorts)
    ax.invert_yaxis()
    ax.set_xlabel("AUROC (95% bootstrap CI); n = cases/controls")
    fig.legend(loc="outside lower center", ncols=min(3, max(1, len(models))), fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def paired_plot(comparisons: Sequence[PairedComparison], palette: Palette) -> bytes:
    """AUROC difference agent − comparator (paired bootstrap CI) on the agent's patients, one row per pair."""
    rows, _ = drawable([c for c in comparisons if c.difference is not None])
    fig, ax = plt.subplots(figsize=(9, 0.34 * max(1, len(rows)) + 1.5), layout="constrained")
    for i, c in enumerate(rows):
        d = c.difference
        assert d is not None
        _dot(ax, d.value, i, [[d.value - d.lower], [d.upper - d.value]], palette[c.comparator], hollow=False,
             label=c.comparator)
        ax.annotate(_n(c.n_cases, c.n_controls), (d.upper, i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=N_FONT)
    ax.set_yticks(range(len(rows)), [f"{c.agent}\nvs {c.comparator} ({c.cohort})" for c in rows], fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0.0, color="grey", lw=0.8, ls=":")
    values = [v for c in rows if c.difference for v in (c.difference.lower, c.difference.upper)]
    low, high = span(values, low=-0.5, high=0.5)
    ax.set_xlim(max(-1.0, low), min(1.0, high))
    _room_for_labels(ax)
    ax.set_xlabel("AUROC difference, agent − comparator, same patients (95% paired bootstrap CI)")
    ax.grid(axis="x", alpha=0.3)
    handles = dict(zip(*reversed(ax.get_legend_handles_labels())))
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(3, len(handles)),
                   fontsize=7, title="comparator", title_fontsize=7)
    return _png(fig)


def roc_pr(results: Sequence[ModelResult], cohort: str, palette: Palette) -> bytes:
    """ROC and precision–recall curves of every model on one cohort (the paper's Fig. 2b,c)."""
    results, _ = drawable(results)
    fig, (roc_ax, pr_ax) = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
    for r in results:
        e = r.evaluation
        n = _n(e.n_positive, e.n_negative)
        style = "-"
        roc_ax.plot(e.roc.false_positive_rate, e.roc.true_positive_rate, color=palette[r.model], lw=1.6, ls=style,
                    label=f"{r.model} (AUROC {e.auroc.value:.3f}, {n})")
        pr_ax.plot(e.precision_recall.recall, e.precision_recall.precision, color=palette[r.model], lw=1.6,
                   ls=style, label=f"{r.model} (AUPRC {e.auprc.value:.3f}, {n})", drawstyle="steps-post")
    roc_ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":")
    roc_ax.set(xlabel="false positive rate", ylabel="true positive rate", title=f"ROC — {cohort}", xlim=(0, 1),
               ylim=(0, 1))
    prevalence = results[0].evaluation.n_positive / results[0].evaluation.n if results else 0.5
    pr_ax.axhline(prevalence, color="grey", lw=0.8, ls=":")
    pr_ax.set(xlabel="recall", ylabel="precision", title=f"Precision–recall — {cohort}", xlim=(0, 1), ylim=(0, 1))
    roc_ax.legend(loc="lower right", fontsize=7)
    pr_ax.legend(loc="lower left", fontsize=7)
    return _png(fig)


def measured_agent_points(points: Sequence[AgentSensitivityPoint]) -> list[AgentSensitivityPoint]:
    """The points of one agent run that are measurements of their own: on enough patients, with an AUROC, and one
    per prediction file (points reusing a file already drawn are the same measurement, not a new one)."""
    seen, out = set(), []
    for p in points:
        if p.too_few or p.auroc is None or p.source in seen:
            continue
        seen.add(p.source)
        out.append(p)
    return out


def _agent_line(ax, xs: Sequence[float], points: Sequence[AgentSensitivityPoint], color: str, label: str) -> None:
    """An agent run's own measurements (`measured_agent_points`): squares with CI bars and n, joined by a dashed
    line only when at least two distinct runs are drawn."""
    x_of = {id(p): x for x, p in zip(xs, points)}
    drawn = [(x_of[id(p)], p) for p in measured_agent_points(points)]
    if not drawn:
        return
    if len(drawn) > 1:
        ax.plot([x for x, _ in drawn], [p.auroc for _, p in drawn], ls="--", lw=1.2, color=color)
    for i, (x, p) in enumerate(drawn):
        assert p.auroc is not None
        err = [[p.auroc - p.auroc_ci.lower], [p.auroc_ci.upper - p.auroc]] if p.auroc_ci is not None else None
        ax.errorbar([x], [p.auroc], yerr=err, fmt="s", ms=5, capsize=2, color=color, label=label if i == 0 else None)
        above = p.auroc < 0.9  # the n label on the side of the point with room, so it stays inside the axes
        ax.annotate(_n(p.n_cases, p.n_controls), (x, p.auroc), xytext=(0, 7 if above else -7),
                    textcoords="offset points", ha="center", va="bottom" if above else "top", fontsize=N_FONT - 1,
                    color=color)


def _agent_values(points: Sequence[AgentSensitivityPoint]) -> list[float]:
    return [v for p in measured_agent_points(points)
            for v in ((p.auroc_ci.lower, p.auroc_ci.upper) if p.auroc_ci else (p.auroc,)) if v is not None]


def truncation_plot(points: Sequence[TruncationPoint], cohort: str, palette: Palette,
                    agent_points: Sequence[AgentSensitivityPoint] = ()) -> bytes:
    """AUROC vs left-truncation budget per model (whole record at the right), with history length kept; agent runs
    dashed with square markers and their n (hollow: too few)."""
    models = list(dict.fromkeys(p.model for p in points))
    budgets = sorted({p.budget_tokens for p in [*points, *agent_points] if p.budget_tokens is not None})
    positions = {b: i for i, b in enumerate(budgets)}
    full_x = len(budgets)

    def x_of(budget: int | None) -> int:
        return positions[budget] if budget is not None else full_x

    points = [p for p in points if not p.too_few and p.same_input_as is None]  # measured fits only
    models = list(dict.fromkeys(p.model for p in points))
    fig, ax = plt.subplots(figsize=(8.5, 4.4), layout="constrained")
    for model in models:
        rows = sorted((p for p in points if p.model == model), key=lambda p: x_of(p.budget_tokens))
        x = [x_of(p.budget_tokens) for p in rows]
        ax.plot(x, [p.auroc.value for p in rows], "o-", color=palette[model],
                label=f"{model} (n={max((p.n_test for p in rows), default=0)} test patients)")
        ax.fill_between(x, [p.auroc.lower for p in rows], [p.auroc.upper for p in rows], color=palette[model],
                        alpha=0.12)
    for agent in dict.fromkeys(p.model for p in agent_points):
        rows = sorted((p for p in agent_points if p.model == agent), key=lambda p: x_of(p.budget_tokens))
        n_pos, n_neg = max(p.n_cases for p in rows), max(p.n_controls for p in rows)
        _agent_line(ax, [x_of(p.budget_tokens) for p in rows], rows, palette[agent],
                    f"{agent} (agents, {_n(n_pos, n_neg)})")
    labels = [f"{b // 1000}k" if b >= 1000 else str(b) for b in budgets] + ["whole"]
    history = {p.budget_tokens: p.median_history_years for p in points}
    ax.set_xticks(range(len(labels)), [f"{lab}\n{history[b]:.1f} y" if b in history else lab
                                       for lab, b in zip(labels, [*budgets, None])])
    ax.set_ylim(*auroc_span([v for p in points for v in (p.auroc.lower, p.auroc.upper)] + _agent_values(agent_points),
                            pad=0.05))
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_xlim(-0.5, full_x + 0.5)  # room for the n labels of the first and last points
    ax.set_xlabel("token budget of the left-truncated timeline (median years of history kept, baselines' patients)")
    ax.set_ylabel("AUROC (95% CI)")
    ax.set_title(f"Trajectory length — {cohort}")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    return _png(fig)


def gap_plot(points: Sequence[GapPoint], palette: Palette, agent_points: Sequence[AgentSensitivityPoint] = ()) -> bytes:
    """AUROC vs prediction gap: one panel per cohort, one line per model (model colours as everywhere); agent runs
    dashed with square markers and their n (hollow: too few)."""
    cohorts = list(dict.fromkeys([*(p.cohort for p in points), *(p.cohort for p in agent_points)]))
    columns = min(4, max(1, len(cohorts)))
    grid_rows = -(-len(cohorts) // columns)
    fig, axes = plt.subplots(grid_rows, columns, figsize=(3.6 * columns, 3.0 * grid_rows + 0.6), squeeze=False,
                             layout="constrained", sharey=True)
    points = [p for p in points if not p.too_few]
    values = [v for p in points for v in (p.auroc.lower, p.auroc.upper)] + _agent_values(agent_points)
    limits = auroc_span(values, pad=0.06)
    for ax, cohort in zip(axes.flat, cohorts):
        for model in dict.fromkeys(p.model for p in points):
            rows = sorted((p for p in points if p.model == model and p.cohort == cohort), key=lambda p: p.gap_years)
            if not rows:
                continue
            ax.errorbar([p.gap_years for p in rows], [p.auroc.value for p in rows], fmt="o-", ms=3.5, lw=1.2,
                        capsize=2, color=palette[model], label=model,
                        yerr=[[p.auroc.value - p.auroc.lower for p in rows], [p.auroc.upper - p.auroc.value for p in rows]])
            for p in rows:
                ax.annotate(f"{p.n_cases}/{p.n_controls}", (p.gap_years, p.auroc.upper), xytext=(0, 3),
                            textcoords="offset points", ha="center", fontsize=N_FONT - 1)
        for agent in dict.fromkeys(p.model for p in agent_points):
            rows = sorted((p for p in agent_points if p.model == agent and p.cohort == cohort
                           and p.gap_years is not None), key=lambda p: p.gap_years or 0.0)
            if rows:
                _agent_line(ax, [p.gap_years or 0.0 for p in rows], rows, palette[agent], f"{agent} (agents)")
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set(title=cohort, ylim=limits, xlabel="gap (years)")
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(cohorts):]:
        ax.set_visible(False)
    axes[0][0].set_ylabel("AUROC (95% CI); labels: cases/controls")
    handles = {label: handle for ax in axes.flat for handle, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(3, max(1, len(handles))),
               fontsize=7)
    return _png(fig)


def strata_plot(results: Sequence[StratumResult], cohort: str, palette: Palette) -> bytes:
    """AUROC with CI within each stratum, one panel per stratifier, every model; strata too small say so."""
    stratifiers = list(dict.fromkeys(r.stratifier for r in results))
    models = list(dict.fromkeys(r.model for r in results if r.auroc is not None))  # too few everywhere: table only
    omitted = [m for m in dict.fromkeys(r.model for r in results) if m not in models]
    results = [r for r in results if r.model in models] or list(results)
    drawn = {r.model for r in results if r.auroc is not None}
    heights = [max(1, len({r.stratum for r in results if r.stratifier == s})) for s in stratifiers]
    fig, axes = plt.subplots(len(stratifiers), 1, figsize=(9, 0.22 * len(models) * sum(heights)
                                                            + 1.2 * len(stratifiers)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False, layout="constrained")
    limits = auroc_span([v for r in results if r.auroc for v in (r.auroc.lower, r.auroc.upper)], low=0.3,
                        room=0.22)  # room for the "too few" labels
    for ax, stratifier in zip(axes[:, 0], stratifiers):
        strata = list(dict.fromkeys(r.stratum for r in results if r.stratifier == stratifier))
        offsets = np.linspace(-0.3, 0.3, len(models)) if len(models) > 1 else [0.0]
        for model, offset in zip(models, offsets):
            for r in (r for r in results if r.stratifier == stratifier and r.model == model):
                y = strata.index(r.stratum) + offset
                if r.auroc is None:
                    ax.annotate(too_few_text(r.n_positive, r.n_negative), (limits[0], y), xytext=(3, 0),
                                textcoords="offset points", va="center", fontsize=N_FONT, color=palette[model])
                    continue
                a = r.auroc
                _dot(ax, a.value, y, [[a.value - a.lower], [a.upper - a.value]], palette[model], hollow=False)
                ax.annotate(f"{r.n_positive}/{r.n_negative}", (a.lower, y), xytext=(-3, 0), textcoords="offset points",
                            va="center", ha="right", fontsize=N_FONT, color=palette[model])
        ax.set_yticks(range(len(strata)), strata, fontsize=8)
        ax.set_ylim(len(strata) - 0.5, -0.5)
        ax.axvline(0.5, color="grey", lw=0.8, ls=":")
        ax.set_xlim(*limits)
        ax.set_title(f"{cohort} — by {stratifier.replace('_', ' ')}", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    handles = [Line2D([], [], marker="o", ls="", ms=4.5, color=palette[m], label=m) for m in models if m in drawn]
    if handles:  # one entry per model drawn, whichever stratum it first appears in
        fig.legend(handles=handles, loc="outside lower center", ncols=min(4, len(handles)), fontsize=7,
                   title="model", title_fontsize=7)
    axes[-1, 0].set_xlabel("AUROC (95% CI); labels: cases/controls"
                           + (f"\nnot drawn (too few patients in every stratum): {', '.join(omitted)}" if omitted else ""))
    return _png(fig)


def latency_plot(profiles: Sequence[RunProfile], per_patient: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
                 palette: Palette) -> bytes:
    """Runtime per patient vs EHR length (XML tokens, chunks) per run, and median seconds per stage."""
    names = [p.name for p in profiles]
    fig, (tok_ax, chunk_ax, stage_ax) = plt.subplots(1, 3, figsize=(15, 4.4), layout="constrained")
    for name in names:
        tokens, chunks, runtime = per_patient.get(name, (np.array([]), np.array([]), np.array([])))
        label = f"{name} (n={runtime.size})"
        tok_ax.scatter(tokens, runtime, s=22, color=palette[name], label=label, alpha=0.8)
        chunk_ax.scatter(chunks, runtime, s=22, color=palette[name], label=label, alpha=0.8)
    tok_ax.set(xlabel="XML timeline tokens", ylabel="runtime per patient (s)", title="Runtime by EHR length")
    chunk_ax.set(xlabel="chunks", ylabel="runtime per patient (s)", title="Runtime by number of chunks")
    bottom = np.zeros(len(profiles))
    for stage, color in STAGE_COLORS.items():
        values = np.array([(p.stages[stage].median or 0.0) if stage in p.stages else 0.0 for p in profiles])
        if values.any():
            stage_ax.barh(range(len(profiles)), values, left=bottom, color=color, label=stage)
            bottom += values
    stage_ax.set_yticks(range(len(profiles)), [f"{p.name} (n={p.profiled})" for p in profiles], fontsize=8)
    stage_ax.set(xlabel="median seconds per patient", title="Per stage")
    stage_ax.legend(fontsize=7)
    for ax in (tok_ax, chunk_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _png(fig)


def selection_plot(points: Sequence[SelectionPoint], palette: Palette) -> bytes:
    """AUROC (95% CI) vs median runtime; marker area ∝ median cost; runs on too few patients are not drawn."""
    points, _ = drawable(points)
    fig, ax = plt.subplots(figsize=(8, 4.8), layout="constrained")
    costs = np.array([p.median_cost_usd for p in points])
    scale = costs.max() if costs.size and costs.max() > 0 else 1.0
    for p in points:
        size = 60 + 600 * (p.median_cost_usd / scale)
        if p.auroc_ci is not None:
            ax.errorbar([p.median_runtime_s], [p.auroc], yerr=[[p.auroc - p.auroc_ci.lower],
                                                               [p.auroc_ci.upper - p.auroc]],
                        fmt="none", ecolor=palette[p.name], elinewidth=1, capsize=2, alpha=0.8)
        ax.scatter(p.median_runtime_s, p.auroc, s=size, alpha=0.8, linewidths=1.5, facecolor=palette[p.name],
                   edgecolor="black" if p.on_pareto_front else "none",
                   label=f"{p.name} (n={p.n_positive}/{p.n_negative}; ${p.median_cost_usd:.4f})")
    front = sorted((p for p in points if p.on_pareto_front), key=lambda p: p.median_runtime_s)
    if len(front) > 1:
        ax.plot([p.median_runtime_s for p in front], [p.auroc for p in front], ls="--", color="deeppink", lw=1.2,
                label="Pareto front")
    ax.set(xlabel="median runtime per patient (s, log scale; baselines: fit + scoring time per scored patient)",
           ylabel="AUROC (95% CI)", title="Model selection")
    values = [v for p in points for v in ((p.auroc_ci.lower, p.auroc_ci.upper) if p.auroc_ci else (p.auroc,))]
    ax.set_ylim(*auroc_span(values, low=0.5, pad=0.05))
    if points and min(p.median_runtime_s for p in points) > 0:
        ax.set_xscale("log")
    ax.grid(alpha=0.3)
    if points:
        fig.legend(loc="outside lower center", ncols=2, fontsize=7, markerscale=0.5)
    return _png(fig)
