"""How one assessment fits the model: the model's facts, the chunk size, each agent's answer tokens and the room for the prompt.

Answers are sized from the agents' schemas (`trajonco.agents.schemas`): every string has a maxLength and every
list a maxItems, so the longest valid answer of each agent is known (`worst_case_chars`).

- **Small contexts** (compact bounds): the bounds shrink until the longest answer fits the LLM settings'
  ``max_tokens`` at one token per character (`fit_limits`), and every call asks for that ``max_tokens``.
- **Real endpoints** (standard bounds, ``answer_tokens="fit"``): each agent's request asks for its own worst
  case at `STANDARD_CHARS_PER_TOKEN`, capped by the model's output limit (`model_output_tokens`, for the models
  we know) and by half of the planned context; when the cap is lower, the bounds shrink to fit it, so an answer
  is never cut off at ``max_tokens`` (a cut answer fails validation, is re-asked, and the patient fails).
  Reasoning models (``max_tokens_field="max_completion_tokens"``) get the whole cap: their hidden reasoning
  counts against it.

>>> auto_chunk_tokens(8192), auto_chunk_tokens(128_000)
(1638, 16000)
>>> model_output_tokens("gpt-4o-2024-08-06"), model_output_tokens("gpt-4.1-mini"), model_output_tokens("my-llama")
(16384, 32768, None)
>>> facts = GatewayFacts("gpt-4.1", context_tokens=1_047_576, output_tokens=1024, encoding="o200k_base")
>>> plan = answer_fit(PipelineConfig(), facts)
>>> plan.limits.name, plan.tokens_for("manager"), plan.tokens_for("worker"), plan.tokens_for("preprocessor")
('standard', 17202, 12460, 2537)
>>> answer_fit(PipelineConfig(), GatewayFacts("gpt-4o", 128_000, 1024)).limits.name  # 16,384 output tokens
'standard-28672'
>>> answer_fit(PipelineConfig(), GatewayFacts("smollm2", 8192, 1024)).tokens  # compact: the settings' max_tokens
()
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel

from trajonco.agents.context_fit import ContextFitError, ContextFit
from trajonco.agents.prompts import PromptContext, render_pair
from trajonco.agents.schemas import (
    COMPACT_LIMITS,
    STANDARD_LIMITS,
    OutputLimits,
    OutputModels,
    fit_limits,
    output_models,
    worst_case_chars,
)
from trajonco.pipeline_config import PipelineConfig
from vista.shared.llm.caller import AnswerTokens, LLMCaller
from vista.shared.tokens import DEFAULT_ENCODING, model_encoding

DEFAULT_CHUNK_TOKENS = 16_000
COMPACT_CONTEXT_BELOW = 32_768
"""Contexts smaller than this get the compact output limits when ``output_limits`` is "auto"."""

STANDARD_CHARS_PER_TOKEN = 1.75
"""Characters (of the whitespace-free answer at its bounds, `worst_case_chars`) per answer token assumed for the
standard bounds. Measured with cl100k and o200k on answers filled to their bounds with clinical prose, numbers,
dates and 7-digit ids: 2.5 for compact JSON, 2.2 when the model indents it, 1.75 for the preprocessor's indented
id list (the densest answer); compact bounds assume the absolute worst case, 1 token per character."""

MODEL_OUTPUT_TOKENS: tuple[tuple[str, int], ...] = (
    ("gpt-4o", 16_384), ("chatgpt-4o", 16_384), ("gpt-4.1", 32_768), ("gpt-4.5", 16_384), ("gpt-5", 128_000),
    ("o1-mini", 65_536), ("o1", 100_000), ("o3", 100_000), ("o4-mini", 100_000), ("gpt-4-turbo", 4_096),
    ("gpt-4", 8_192), ("gpt-3.5-turbo", 4_096),
)
"""Most tokens OpenAI's models write per answer (published limits; a name prefix matches its dated snapshots)."""

ROLES = ("worker", "manager", "preprocessor", "any_manager")


def auto_chunk_tokens(context_tokens: int) -> int:
    """The chunk limit l for a context window: 16000, but at most a fifth of the window (prompts hold more)."""
    return min(DEFAULT_CHUNK_TOKENS, context_tokens // 5)


def model_output_tokens(model: str) -> int | None:
    """The output limit of a known model (the longest matching name prefix), None for others."""
    name = model.rsplit("/", 1)[-1].lower()
    for prefix, limit in sorted(MODEL_OUTPUT_TOKENS, key=lambda item: -len(item[0])):
        if name == prefix or name.startswith(prefix + "-"):
            return limit
    return None


@dataclass(frozen=True, slots=True)
class GatewayFacts:
    """What the pipeline needs to know about the model behind the gateway."""

    model: str
    context_tokens: int
    output_tokens: int  # the LLM settings' max_tokens
    encoding: str = DEFAULT_ENCODING  # the tiktoken encoding prompts are counted in
    reasoning: bool = False  # max_tokens also pays for hidden reasoning (max_completion_tokens)


async def gateway_facts(gateway: LLMCaller, config: PipelineConfig) -> GatewayFacts:
    """The model name, context window, answer tokens and token encoding of ``gateway`` (``config.context_tokens``
    overrides the window)."""
    context = config.context_tokens or gateway.context_tokens or await gateway.discover_context_tokens()
    if not context:
        raise ContextFitError(
            f"model {gateway.config.model!r}: the gateway cannot tell its context window; "
            "pass --context-tokens N (PipelineConfig.context_tokens, or --llm context_tokens=N)"
        )
    llm = gateway.config
    return GatewayFacts(llm.model, int(context), llm.max_tokens, model_encoding(llm.model),
                        llm.max_tokens_field == "max_completion_tokens")


@dataclass(frozen=True, slots=True)
class AnswerFit:
    """The agents' answer bounds and the ``max_tokens`` each role asks for (empty: the LLM settings' for all)."""

    limits: OutputLimits
    tokens: tuple[tuple[str, int], ...]
    reserve: int  # tokens of the context kept free for an answer: the largest request

    def tokens_for(self, role: str) -> int | None:
        return dict(self.tokens).get(role)

    def per_model(self) -> dict[type[BaseModel], int]:
        """``max_tokens`` keyed by response model (what `vista.shared.llm.caller.AnswerTokens` looks up)."""
        models = output_models(self.limits)
        return {getattr(models, role): n for role, n in self.tokens}


def _compact(config: PipelineConfig, facts: GatewayFacts) -> bool:
    if config.output_limits == "auto":
        return facts.context_tokens < COMPACT_CONTEXT_BELOW
    return config.output_limits == "compact"


def answer_cap(config: PipelineConfig, facts: GatewayFacts) -> int:
    """Most tokens one answer may ask for: the model's output limit, at most half of the planned context."""
    half = int(facts.context_tokens * config.context_safety) // 2
    known = model_output_tokens(facts.model)
    return min(half, known) if known is not None else half


def answer_fit(config: PipelineConfig, facts: GatewayFacts) -> AnswerFit:
    """The bounds and per-role ``max_tokens`` of one assessment (see the module docstring)."""
    if _compact(config, facts):
        return AnswerFit(fit_limits(COMPACT_LIMITS, facts.output_tokens), (), facts.output_tokens)
    if config.answer_tokens == "fixed":
        return AnswerFit(STANDARD_LIMITS, (), facts.output_tokens)
    cap = answer_cap(config, facts)
    limits = STANDARD_LIMITS
    models = output_models(limits)
    if max(_worst_tokens(models, role) for role in ROLES) > cap:
        limits = fit_limits(STANDARD_LIMITS, int(cap * STANDARD_CHARS_PER_TOKEN))
        models = output_models(limits)
    tokens = tuple((role, cap if facts.reasoning else min(cap, _worst_tokens(models, role))) for role in ROLES)
    return AnswerFit(limits, tokens, max(n for _, n in tokens))


def _worst_tokens(models: OutputModels, role: str) -> int:
    return math.ceil(worst_case_chars(getattr(models, role)) / STANDARD_CHARS_PER_TOKEN)


def context_fit(config: PipelineConfig, facts: GatewayFacts, answers: AnswerFit) -> ContextFit:
    """The room for the prompt: the planned share of the context minus the largest answer, counted in the model's encoding."""
    return ContextFit(facts.context_tokens, answers.reserve, config.context_safety, facts.encoding)


def worker_overhead(ctx: PromptContext, limits: OutputLimits, fit: ContextFit) -> int:
    """Worst-case tokens of a worker prompt without its chunk (previous answer and memory at their bounds)."""
    system, user = render_pair("worker_next", ctx, previous_output="", memory_events="", chunk_xml="", chunk_number=1, n_chunks=1)
    previous = limits.summary_chars + limits.temporal_chars + limits.reasoning_chars + limits.worker_events * (limits.event_chars + 80)
    memory = ctx.memory_k * (limits.event_chars + 60)
    return fit.count(system) + fit.count(user) + (previous + memory) // 3  # ≥ 3 characters per token in practice


def check_worker_fits(subject_id: int, chunk_tokens: int, ctx: PromptContext, limits: OutputLimits,
                      fit: ContextFit) -> None:
    """Raise `ContextFitError` when a worker prompt with a full chunk would not fit the room for the prompt."""
    need = chunk_tokens + worker_overhead(ctx, limits, fit)
    if need > fit.input_tokens:
        raise ContextFitError(
            f"subject {subject_id}: chunk_tokens={chunk_tokens} makes worker prompts of up to {need} "
            f"tokens, more than the {fit.input_tokens} planned for a {fit.context_tokens}-token context with "
            f"{fit.output_tokens} tokens of answer; lower chunk_tokens"
        )


def sized(gateway: LLMCaller, answers: AnswerFit) -> LLMCaller:
    """``gateway`` itself when every call uses the settings' max_tokens, else one whose calls ask for their response
    model's own (`vista.shared.llm.caller.AnswerTokens`)."""
    return AnswerTokens(gateway, answers.per_model()) if answers.tokens else gateway
