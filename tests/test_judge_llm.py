"""The pairwise judge on the real embedded model (SmolLM2-135M) for one pair: both orders answer valid JSON."""

from __future__ import annotations

import asyncio

import pytest

from judge_fixtures import prediction_row, write_run
from trajonco.judge import RUBRIC_KEYS, compare_runs
from vista.shared.llm import LLMConfig

pytestmark = pytest.mark.llm


def test_one_pair_on_the_embedded_model(tmp_path):
    run_a = write_run(tmp_path / "a", [prediction_row(1, variant="one_stage", risk=8)])
    run_b = write_run(tmp_path / "b", [prediction_row(1, variant="two_stage", risk=3,
                                                      summary="Routine visits only; nothing of note.")])
    config = LLMConfig(timeout_s=300, max_tokens=512)
    report = asyncio.run(compare_runs(run_a, run_b, config, n_resamples=50))
    assert report.pairing.n_paired == 1 and report.judge_calls == 2
    assert report.judge_model == LLMConfig().model and report.judge_backend == "embedded"
    (pair,) = report.judgements
    assert [o.order for o in pair.orders] == ["ab", "ba"]
    for order in pair.orders:
        assert order.ok, order.error  # the bounded schema makes the small model's answer valid JSON
        assert set(order.verdicts) == set(RUBRIC_KEYS) and order.prompt_tokens > 0
        assert all(0 < len(reason) <= report.reason_chars for reason in order.reasons.values())
    assert report.n_judged == 1
    for result in report.rubrics:
        assert result.win.value + result.tie.value + result.loss.value == pytest.approx(1.0)
        assert result.bias.n == 1 and result.bias.flips in (0, 1)
