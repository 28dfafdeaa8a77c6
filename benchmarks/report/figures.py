"""The report's figures (matplotlib, Agg backend), each returned as PNG bytes.

Every function takes result models (never recomputes a number) so a figure shows exactly what the tables say.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from baselines import StratumResult  # noqa: E402
from benchmarks.report.profile import RunProfile, SelectionPoint  # noqa: E402
from benchmarks.report.results import GapPoint, ModelResult, TruncationPoint  # noqa: E402

DPI = 110
PALETTE = plt.get_cmap("tab10").colors


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def _colors(names: Sequence[str]) -> dict[str, tuple]:
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def auroc_overview(results: Sequence[ModelResult], cohorts: Sequence[str]) -> bytes:
    """AUROC with 95% CI of every model on every cohort (dot-and-whisker, one row per cohort)."""
    models = list(dict.fromkeys(r.model for r in results))
    colors = _colors(models)
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(cohorts) + 1.4), layout="constrained")
    offsets = np.linspace(-0.25, 0.25, len(models)) if len(models) > 1 else [0.0]
    index = {c: i for i, c in enumerate(cohorts)}
    for model, offset in zip(models, offsets):
        rows = [r for r in results if r.model == model and r.cohort in index]
        y = [index[r.cohort] + offset for r in rows]
        x = [r.evaluation.auroc.value for r in rows]
        err = [[r.evaluation.auroc.value - r.evaluation.auroc.lower for r in rows],
               [r.evaluation.auroc.upper - r.evaluation.auroc.value for r in rows]]
        ax.errorbar(x, y, xerr=err, fmt="o", ms=4, capsize=2, color=colors[model], label=model)
    ax.axvline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_yticks(range(len(cohorts)), cohorts)
    ax.invert_yaxis()
    ax.set_xlabel("AUROC (95% bootstrap CI)")
    ax.set_xlim(0.4, 1.0)
    fig.legend(loc="outside lower center", ncols=min(3, len(models)), fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def roc_pr(results: Sequence[ModelResult], cohort: str) -> bytes:
    """ROC and precision–recall curves of every model on one cohort (the paper's Fig. 2b,c)."""
    fig, (roc_ax, pr_ax) = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
    colors = _colors([r.model for r in results])
    for r in results:
        e = r.evaluation
        label = f"{r.model} (AUROC {e.auroc.value:.3f}, n={e.n})"
        roc_ax.plot(e.roc.false_positive_rate, e.roc.true_positive_rate, color=colors[r.model], lw=1.6, label=label)
        pr_ax.plot(e.precision_recall.recall, e.precision_recall.precision, color=colors[r.model], lw=1.6,
                   label=f"{r.model} (AUPRC {e.auprc.value:.3f})", drawstyle="steps-post")
    roc_ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":")
    roc_ax.set(xlabel="false positive rate", ylabel="true positive rate", title=f"ROC — {cohort}", xlim=(0, 1),
               ylim=(0, 1.01))
    prevalence = results[0].evaluation.n_positive / results[0].evaluation.n if results else 0.5
    pr_ax.axhline(prevalence, color="grey", lw=0.8, ls=":")
    pr_ax.set(xlabel="recall", ylabel="precision", title=f"Precision–recall — {cohort}", xlim=(0, 1), ylim=(0, 1.01))
    roc_ax.legend(loc="lower right", fontsize=7)
    pr_ax.legend(loc="lower left", fontsize=7)
    return _png(fig)


def truncation_plot(points: Sequence[TruncationPoint], cohort: str) -> bytes:
    """AUROC vs left-truncation budget per model (whole record at the right), with history length kept."""
    models = list(dict.fromkeys(p.model for p in points))
    colors = _colors(models)
    budgets = sorted({p.budget_tokens for p in points if p.budget_tokens is not None})
    positions = {b: i for i, b in enumerate(budgets)}
    full_x = len(budgets)
    fig, ax = plt.subplots(figsize=(8.5, 4.4), layout="constrained")
    for model in models:
        rows = sorted((p for p in points if p.model == model),
                      key=lambda p: positions.get(p.budget_tokens, full_x) if p.budget_tokens is not None else full_x)
        x = [positions[p.budget_tokens] if p.budget_tokens is not None else full_x for p in rows]
        y = [p.auroc.value for p in rows]
        ax.plot(x, y, "o-", color=colors[model], label=model)
        ax.fill_between(x, [p.auroc.lower for p in rows], [p.auroc.upper for p in rows], color=colors[model],
                        alpha=0.12)
    labels = [f"{b // 1000}k" for b in budgets] + ["whole"]
    history = {p.budget_tokens: p.median_history_years for p in points}
    ax.set_xticks(range(len(labels)), [f"{lab}\n{history.get(b, float('nan')):.1f} y"
                                       for lab, b in zip(labels, [*budgets, None])])
    ax.set_xlabel("token budget of the left-truncated timeline (median years of history kept)")
    ax.set_ylabel("AUROC (95% CI)")
    ax.set_title(f"Trajectory length — {cohort}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def gap_plot(points: Sequence[GapPoint]) -> bytes:
    """AUROC vs prediction gap, one line per cohort, one panel per model (the paper's Fig. 11)."""
    models = list(dict.fromkeys(p.model for p in points))
    cohorts = list(dict.fromkeys(p.cohort for p in points))
    cmap = plt.get_cmap("tab20")
    fig, axes = plt.subplots(1, len(models), figsize=(7.5 * len(models), 4.8), squeeze=False,
                             layout="constrained")
    for ax, model in zip(axes[0], models):
        for i, cohort in enumerate(cohorts):
            rows = sorted((p for p in points if p.model == model and p.cohort == cohort), key=lambda p: p.gap_years)
            if rows:
                ax.plot([p.gap_years for p in rows], [p.auroc.value for p in rows], "o-", ms=3.5, lw=1.3,
                        color=cmap(i % 20), label=cohort)
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set(xlabel="gap between prediction time and diagnosis (years)", ylabel="AUROC", title=f"Time gap — {model}")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _png(fig)


def strata_plot(results: Sequence[StratumResult], cohort: str) -> bytes:
    """AUROC with CI within each stratum, one panel per stratifier, every model."""
    stratifiers = list(dict.fromkeys(r.stratifier for r in results))
    models = list(dict.fromkeys(r.model for r in results))
    colors = _colors(models)
    heights = [max(1, len({r.stratum for r in results if r.stratifier == s})) for s in stratifiers]
    fig, axes = plt.subplots(len(stratifiers), 1, figsize=(8, 0.38 * sum(heights) + 1.2 * len(stratifiers)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False, layout="constrained")
    for ax, stratifier in zip(axes[:, 0], stratifiers):
        strata = list(dict.fromkeys(r.stratum for r in results if r.stratifier == stratifier))
        offsets = np.linspace(-0.25, 0.25, len(models)) if len(models) > 1 else [0.0]
        for model, offset in zip(models, offsets):
            rows = [r for r in results if r.stratifier == stratifier and r.model == model and r.auroc is not None]
            y = [strata.index(r.stratum) + offset for r in rows]
            ax.errorbar([r.auroc.value for r in rows], y, fmt="o", ms=3.5, capsize=2, color=colors[model],
                        xerr=[[r.auroc.value - r.auroc.lower for r in rows],
                              [r.auroc.upper - r.auroc.value for r in rows]],
                        label=model)
        ax.set_yticks(range(len(strata)), strata, fontsize=8)
        ax.invert_yaxis()
        ax.axvline(0.5, color="grey", lw=0.8, ls=":")
        ax.set_xlim(0.2, 1.0)
        ax.set_title(f"{cohort} — by {stratifier.replace('_', ' ')}", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="lower right")
    axes[-1, 0].set_xlabel("AUROC (95% CI)")
    return _png(fig)


def latency_plot(profiles: Sequence[RunProfile],
                 per_patient: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]) -> bytes:
    """Runtime per patient vs EHR length (XML tokens, chunks) per run, and median seconds per stage."""
    names = [p.name for p in profiles]
    colors = _colors(names)
    fig, (tok_ax, chunk_ax, stage_ax) = plt.subplots(1, 3, figsize=(15, 4.4), layout="constrained")
    for name in names:
        tokens, chunks, runtime = per_patient.get(name, (np.array([]), np.array([]), np.array([])))
        tok_ax.scatter(tokens, runtime, s=22, color=colors[name], label=name, alpha=0.8)
        chunk_ax.scatter(chunks, runtime, s=22, color=colors[name], label=name, alpha=0.8)
    tok_ax.set(xlabel="XML timeline tokens", ylabel="runtime per patient (s)", title="Runtime by EHR length")
    chunk_ax.set(xlabel="chunks", ylabel="runtime per patient (s)", title="Runtime by number of chunks")
    stage_names = ["preprocess", "workers", "manager", "single_agent"]
    bottom = np.zeros(len(profiles))
    for i, stage in enumerate(stage_names):
        values = np.array([(p.stages[stage].median or 0.0) if stage in p.stages else 0.0 for p in profiles])
        if values.any():
            stage_ax.barh(range(len(profiles)), values, left=bottom, color=PALETTE[(i + 4) % 10], label=stage)
            bottom += values
    stage_ax.set_yticks(range(len(profiles)), names, fontsize=8)
    stage_ax.set(xlabel="median seconds per patient", title="Per stage")
    stage_ax.legend(fontsize=7)
    for ax in (tok_ax, chunk_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _png(fig)


def selection_plot(points: Sequence[SelectionPoint]) -> bytes:
    """AUROC vs median runtime; marker area ∝ median cost per patient; the Pareto front dashed."""
    fig, ax = plt.subplots(figsize=(7.5, 4.6), layout="constrained")
    costs = np.array([p.median_cost_usd for p in points])
    scale = costs.max() if costs.size and costs.max() > 0 else 1.0
    colors = _colors([p.name for p in points])
    for p in points:
        size = 60 + 600 * (p.median_cost_usd / scale)
        ax.scatter(p.median_runtime_s, p.auroc, s=size, color=colors[p.name], alpha=0.75,
                   edgecolor="black" if p.on_pareto_front else "none", label=f"{p.name} (${p.median_cost_usd:.4f})")
    front = sorted((p for p in points if p.on_pareto_front), key=lambda p: p.median_runtime_s)
    if len(front) > 1:
        ax.plot([p.median_runtime_s for p in front], [p.auroc for p in front], ls="--", color="deeppink", lw=1.2,
                label="Pareto front")
    ax.set(xlabel="median runtime per patient (s, log scale; baselines: fit + scoring time per scored patient)",
           ylabel="AUROC", title="Model selection")
    if points and min(p.median_runtime_s for p in points) > 0:
        ax.set_xscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return _png(fig)

