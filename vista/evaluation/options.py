"""Command-line pieces of ``vista evaluate`` kept beside the evaluation: the judge's settings and the truth options.

The judge should not be the model that wrote the displays (the paper judges with a different, stronger model), so
its settings are separate: ``--judge-llm KEY=VALUE`` items over ``VISTA_JUDGE_LLM_*`` environment variables over
the defaults. Only when neither is given does the judge fall back to the display model — `judge_config` then says so
(the caller logs one warning line, and the report names it).

>>> from vista.shared.llm import LLMConfig
>>> display = LLMConfig(model="writer")
>>> config, same = judge_config([], display, env={})
>>> config.model, same
('writer', True)
>>> config, same = judge_config([], display, env={"VISTA_JUDGE_LLM_MODEL": "stronger"})
>>> config.model, same
('stronger', False)
>>> judge_config(["model=big", "backend=openai"], display, env={})[0].backend
'openai'
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from vista.evaluation.errors import EvaluationError
from vista.shared.llm import LLMConfig
from vista.shared.records import Demographics

JUDGE_ENV_PREFIX = "VISTA_JUDGE_LLM_"
SAME_JUDGE_WARNING = ("the judge is the display model {model!r}: set a different, stronger judge with --judge-llm "
                      "KEY=VALUE or VISTA_JUDGE_LLM_* (the paper judges with another model)")

_ANSWERING = ("backend", "base_url", "model", "model_path")


def same_model(a: LLMConfig, b: LLMConfig) -> bool:
    """True when two settings reach the same model (same backend, endpoint, model name and model file)."""
    return all(getattr(a, name) == getattr(b, name) for name in _ANSWERING)


def judge_config(items: Iterable[str], display: LLMConfig,
                 env: Mapping[str, str] | None = None) -> tuple[LLMConfig, bool]:
    """(the judge's `LLMConfig`, whether it is the display model): ``items`` over ``VISTA_JUDGE_LLM_*`` over the
    defaults; with neither, the display's own settings (and True)."""
    items = list(items)
    env = os.environ if env is None else env
    if not items and not any(key.startswith(JUDGE_ENV_PREFIX) for key in env):
        return display, True
    config = LLMConfig.resolve(env=env, prefix=JUDGE_ENV_PREFIX, items=items, flag="--judge-llm")
    return config, same_model(config, display)


def run_judge_config(items: Iterable[str], out: Path, env: Mapping[str, str] | None = None) -> LLMConfig:
    """The judge of a run writing into ``out`` (`judge_config` against the display model of ``VISTA_LLM_*``, one
    warning line when it is that model), its response cache under ``out/llm_cache`` unless one is named."""
    env = os.environ if env is None else env
    items = list(items)
    config, same = judge_config(items, LLMConfig.from_env(env), env)
    if same:
        logging.getLogger(__name__).warning(SAME_JUDGE_WARNING.format(model=config.model))
    named = any(item.partition("=")[0].strip() == "cache_dir" for item in items) or any(
        env.get(prefix + "CACHE_DIR") for prefix in (JUDGE_ENV_PREFIX, "VISTA_LLM_"))
    if config.cache_dir is None and not named:
        config = config.with_overrides({"cache_dir": (Path(out) / "llm_cache").resolve()})
    return config


def load_truth_sources(truth_root: str | Path | None, references: str | Path | None,
                       subject_ids: Iterable[int] | None = None) -> dict[int, object]:
    """Subject id → truth: the generator's records of ``truth_root`` and/or the clinician answers of ``references``
    (a patient's clinician answers replace its generator record). With ``subject_ids`` every one must have a truth."""
    from vista.evaluation.references import load_reference_answers
    from vista.evaluation.truth import load_oncology_truths

    if truth_root is None and references is None:
        raise EvaluationError("no truth given: pass the generator's dataset (--truth) and/or clinician reference "
                              "answers (--references)")
    wanted = sorted(set(subject_ids)) if subject_ids else None
    truths: dict[int, object] = {}
    if truth_root is not None:
        truths.update(load_oncology_truths(truth_root))
    if references is not None:
        truths.update(load_reference_answers(references))
    if wanted is not None:
        if missing := [sid for sid in wanted if sid not in truths]:
            where = [f"{truth_root} (no oncology record in ground_truth/oncology.jsonl)" if truth_root else None,
                     f"{references} (no clinician answers)" if references else None]
            raise EvaluationError(f"no truth for subject(s) {missing}: {' or '.join(w for w in where if w)}")
        truths = {sid: truths[sid] for sid in wanted}
    return truths


def with_demographics(truth: object, demographics: Demographics | None) -> object:
    """The generator's record as a `TruthCase` carrying the patient's demographics (read from its graph), so that
    variable is scored (apart from the headline); clinician cases and ready `TruthCase`s are returned as they are."""
    from vista.evaluation.references import ClinicianCase
    from vista.evaluation.truth import TruthCase

    if isinstance(truth, (ClinicianCase, TruthCase)):
        return truth
    return TruthCase(truth, demographics=demographics)  # type: ignore[arg-type]
