"""Model price table (USD per 1M tokens) loaded from TOML, and the cost of one call.

>>> table = PriceTable.load()
>>> table.cost("gpt-4.1-mini", prompt_tokens=1_000_000, completion_tokens=100_000)
0.56
>>> table.cost("gpt-4.1-mini-2025-04-14", prompt_tokens=1000, completion_tokens=0)  # dated snapshot
0.0004
>>> table.cost("some-unpriced-model", prompt_tokens=10, completion_tokens=10) is None
True
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vista.shared.llm.errors import LLMConfigError

_SNAPSHOT_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


class ModelPrice(BaseModel):
    """Prices of one model in USD per 1M tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, description="USD per 1M prompt tokens")
    output: float = Field(ge=0, description="USD per 1M generated tokens")
    cached_input: float | None = Field(None, ge=0, description="USD per 1M prompt tokens served from the provider's cache")
    context_window: int | None = Field(None, gt=0, description="context length in tokens")


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    models: dict[str, ModelPrice]


class PriceTable:
    """Model name → `ModelPrice`; dated snapshots fall back to the undated name."""

    def __init__(self, prices: dict[str, ModelPrice]):
        self._prices = dict(prices)

    @classmethod
    def load(cls, path: Path | None = None) -> PriceTable:
        """Read a price TOML (the packaged ``prices.toml`` when ``path`` is None)."""
        source = path if path is not None else resources.files("vista.shared.llm").joinpath("prices.toml")
        try:
            data = tomllib.loads(source.read_text(encoding="utf-8"))
        except OSError as exc:
            raise LLMConfigError(f"price table {source}: cannot read ({exc.strerror or exc})") from None
        except tomllib.TOMLDecodeError as exc:
            raise LLMConfigError(f"price table {source}: not valid TOML ({exc})") from None
        try:
            return cls(_PriceFile.model_validate(data).models)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_input=False))
            raise LLMConfigError(f"price table {source}: {problems}") from None

    def get(self, model: str) -> ModelPrice | None:
        return self._prices.get(model) or self._prices.get(_SNAPSHOT_SUFFIX.sub("", model))

    def cost(self, model: str, *, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0) -> float | None:
        """USD for one call (None when the model has no price); cached prompt tokens at the cached rate."""
        price = self.get(model)
        if price is None:
            return None
        cached = min(max(cached_prompt_tokens, 0), prompt_tokens)
        cached_rate = price.cached_input if price.cached_input is not None else price.input
        usd = ((prompt_tokens - cached) * price.input + cached * cached_rate + completion_tokens * price.output) / 1e6
        return round(usd, 10)
