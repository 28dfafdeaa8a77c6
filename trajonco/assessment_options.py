"""The assessment options `trajonco predict-one` and `trajonco predict` (`jobs.predict`) share, and the
`PipelineConfig` they make (an option not given: the pipeline's default). Light imports only, so ``--help`` answers
at once.

>>> parser = argparse.ArgumentParser()
>>> add_assessment_arguments(parser)
>>> config = assessment_config(parser.parse_args(["--memory-k", "3", "--variant", "two_stage"]), cancer="lung")
>>> config.memory_k, config.variant.value, config.horizon_days, config.answer_tokens
(3, 'two_stage', 365, 'fit')
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trajonco.pipeline_config import PipelineConfig


def cancer_keys() -> str:
    """Every cancer key, in the catalog's order (for help texts; the catalog module is light)."""
    from trajonco.cancers import CANCERS

    return ", ".join(CANCERS)


def cancer_key(text: str) -> str:
    """A cancer key for ``--cancer`` (display names and spellings such as 'Lung cancer' accepted), or a usage error
    that lists the keys."""
    from trajonco.cancers import UnknownCancerError, get_cancer

    try:
        return get_cancer(text).key
    except UnknownCancerError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_assessment_arguments(group: argparse._ActionsContainer) -> None:
    """How a patient is assessed: variant, any-cancer mode, horizon, chunks, memory, truncation, answers."""
    group.add_argument("--variant", choices=["one_stage", "two_stage", "single_agent"],
                       help="one_stage: worker chain + manager; two_stage: parallel relevance filters then the chain; "
                            "single_agent: the whole timeline in one call (default one_stage)")
    group.add_argument("--any-cancer-mode", choices=["chain", "max"],
                       help="how any cancer is assessed: chain (default, the paper's): one chain asked for the "
                            "strongest signal of any cancer, its manager naming the most likely type; max: one chain "
                            "per cancer (12-15x the cost), the highest score kept")
    group.add_argument("--horizon-days", type=int, help="prediction horizon in days (default: the cohort's gap from "
                       "COHORT/manifest.json when --labels is a cohort's label file, else 365)")
    group.add_argument("--chunk-tokens", type=int, help="chunk limit l in tokens (default: 16000, at most a fifth of "
                       "the model's context: 1638 for the embedded model)")
    group.add_argument("--memory-k", type=int, help="latest memory events shown to each worker (default 10)")
    group.add_argument("--answer-budget", choices=["fit", "fixed"],
                       help="max_tokens of each call with standard bounds: fit (default): each agent's worst-case "
                            "answer from its schema, capped by the model's output limit (the bounds shrink to fit it); "
                            "fixed: the LLM settings' max_tokens for every call")
    group.add_argument("--truncate-tokens", type=int, help="left-truncation: the agents see only the newest part of "
                       "each timeline within N tokens (the paper's trajectory-length sensitivity, 2000-256000; "
                       "default: the whole timeline)")
    group.add_argument("--part-numbers", action="store_true", help="say 'Part k of n' when handing a chunk to an "
                       "agent (off by default: n grows with the record's length, a signal the paper's prompts don't give)")


def assessment_config(args: argparse.Namespace, *, cancer: str, **extra: object) -> PipelineConfig:
    """The `PipelineConfig` of ``args`` (`add_assessment_arguments`, and ``--labels`` when the command has it) for
    ``cancer``, with a command's ``extra`` fields; a bad value is one `vista.shared.errors.CommandLineError` line."""
    from trajonco.cohorts.manifest import label_horizon
    from trajonco.pipeline_config import config_from_options

    return config_from_options(
        variant=args.variant, cancer=cancer, horizon_days=label_horizon(getattr(args, "labels", None), args.horizon_days),
        chunk_tokens=args.chunk_tokens, memory_k=args.memory_k, truncate_tokens=args.truncate_tokens,
        part_numbers=args.part_numbers or None, any_cancer_mode=args.any_cancer_mode, answer_tokens=args.answer_budget,
        **extra)
