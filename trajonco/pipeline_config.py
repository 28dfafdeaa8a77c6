"""`PipelineConfig`: how one patient is assessed (variant, cancer, horizon, chunking, prompts, answer budgets).

>>> PipelineConfig(cancer="Multiple Myeloma").cancer
'multiple_myeloma'
>>> PipelineConfig().any_cancer_mode, PipelineConfig().answer_tokens
('chain', 'fit')
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from trajonco.agents.results import AnyCancerMode, Variant
from trajonco.cancers import get_cancer
from vista.shared.errors import CommandLineError


class PipelineConfig(BaseModel):
    """How to assess a patient."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    variant: Variant = Field(Variant.ONE_STAGE, description="one_stage: worker chain + manager; two_stage: parallel "
                             "relevance filters first, then the chain on the re-chunked remainder; single_agent: one call")
    cancer: str = Field("lung", description="one of the 15 cancer keys of trajonco.cancers (display names accepted)")
    any_cancer_mode: AnyCancerMode = Field("chain", description="how an any-cancer assessment runs: chain (the paper's): "
                                           "one assessment whose prompts ask for the strongest signal of any cancer the "
                                           "patient can develop, its manager naming the most likely type; max: one "
                                           "assessment per cancer (12-15x the calls), the highest score kept")
    horizon_days: int = Field(365, ge=1, description="prediction horizon in days, i.e. the gap between the prediction time "
                              "and the index date of the cohort (the paper: 365; sensitivity analyses 182-1826)")
    chunk_tokens: int | None = Field(None, ge=256, description="chunk limit l in cl100k tokens; None: 16000 capped at a fifth "
                                     "of the model's context (1638 for the embedded 8192-token model)")
    memory_k: int = Field(10, ge=0, description="how many of the latest memory events each worker sees")
    cancer_hints: bool = Field(False, description="add the cancer's known risk factors to the prompts (the paper's prompts "
                               "have no cancer-specific knowledge, hence off by default; the any-cancer chain's prompts "
                               "list the candidate cancers instead)")
    output_limits: Literal["auto", "standard", "compact"] = Field("auto", description="bounds of the agents' answers; auto: "
                                                                  "compact below a 32k-token context, else standard; compact "
                                                                  "bounds shrink until the longest answer fits max_tokens")
    answer_tokens: Literal["fit", "fixed"] = Field("fit", description="max_tokens of each call with standard bounds; fit: "
                                                   "each agent's worst-case answer (from its schema's bounds), capped by "
                                                   "the model's output limit and half the planned context (the bounds "
                                                   "shrink when the cap is lower); fixed: the LLM settings' max_tokens for "
                                                   "every call. Compact bounds always fit the LLM settings' max_tokens")
    context_tokens: int | None = Field(None, ge=1024, description="the model's context window; None: ask the gateway")
    truncate_tokens: int | None = Field(None, ge=256, description="left-truncation: keep only the newest whole "
                                        "timestamps of the timeline within this many tokens (the paper's trajectory-"
                                        "length sensitivity, 2k-256k); None: the whole timeline")
    part_numbers: bool = Field(False, description="say 'Part k of n' when giving a chunk to an agent; off by default: "
                               "the number of parts grows with the record, and cases have longer records")
    context_safety: float = Field(0.8, gt=0.1, le=1.0, description="share of the context window prompts may plan to fill "
                                  "(slack for tokenizers that count more tokens than cl100k: SmolLM2 counts ~1.2x)")

    @field_validator("cancer")
    @classmethod
    def _known_cancer(cls, value: str) -> str:
        return get_cancer(value).key


def config_from_options(**options: object) -> PipelineConfig:
    """A `PipelineConfig` from a command's options named as its fields (None: the default); a bad value is one
    `CommandLineError` line naming the options.

    >>> config_from_options(chunk_tokens=None, memory_k=3).memory_k
    3
    >>> config_from_options(chunk_tokens=100)
    Traceback (most recent call last):
    ...
    vista.shared.errors.CommandLineError: --chunk-tokens: Input should be greater than or equal to 256
    """
    try:
        return PipelineConfig(**{name: value for name, value in options.items() if value is not None})
    except ValidationError as exc:
        raise CommandLineError("; ".join(f"--{'-'.join(map(str, e['loc'])).replace('_', '-')}: {e['msg']}"
                                         for e in exc.errors())) from None
