"""`compare_runs`: load two prediction runs, pair their patients, judge both orders, aggregate into a `JudgeReport`."""

from __future__ import annotations

from pathlib import Path

from trajonco.judge.answer import reason_chars_for
from trajonco.judge.errors import EvaluationInputError
from trajonco.judge.pairwise import judge_runs
from trajonco.judge.report import JudgeReport, RunInfo, build_report
from trajonco.judge.runs import Run, load_run, pair_runs


async def compare_loaded(run_a: Run, run_b: Run, gateway, *, limit: int | None = None, seed: int = 0,
                         reason_chars: int | None = None, level: float = 0.95,
                         n_resamples: int = 2000) -> JudgeReport:
    """Judge ``run_a`` against ``run_b`` with ``gateway``'s model (its own `vista.shared.llm.LLMConfig`)."""
    paired = pair_runs(run_a, run_b, limit=limit, seed=seed)
    if not paired.pairs:
        raise EvaluationInputError(f"{run_a.path} and {run_b.path}: no patient to compare: "
                                   f"{paired.pairing.sentence()}")
    answer_tokens = gateway.config.max_tokens
    reason_chars = reason_chars or reason_chars_for(answer_tokens)
    judgements = await judge_runs(gateway, paired, reason_chars=reason_chars, answer_tokens=answer_tokens)
    return build_report(judgements, run_a=RunInfo(name=run_a.name, path=str(run_a.path)),
                        run_b=RunInfo(name=run_b.name, path=str(run_b.path)), pairing=paired.pairing,
                        judge_model=gateway.config.model, judge_backend=gateway.config.backend,
                        horizon_days=paired.horizon_days, reason_chars=reason_chars, answer_tokens=answer_tokens,
                        level=level, n_resamples=n_resamples, seed=seed)


async def compare_runs(path_a: str | Path, path_b: str | Path, config=None, *, backend=None,
                       names: tuple[str | None, str | None] = (None, None), **options) -> JudgeReport:
    """`compare_loaded` on two run paths with a fresh gateway (``backend`` replaces the config's, e.g. in tests)."""
    from vista.shared.llm import open_gateway

    run_a, run_b = load_run(path_a, names[0]), load_run(path_b, names[1])
    if run_a.name == run_b.name:  # e.g. two runs of the same variant and model: tell them apart by folder
        run_a, run_b = (load_run(p, n or f"{r.name} ({Path(p).name})") for p, n, r in
                        ((path_a, names[0], run_a), (path_b, names[1], run_b)))
    async with open_gateway(config, backend=backend, job_id="pairwise-judge") as gateway:
        return await compare_loaded(run_a, run_b, gateway, **options)
