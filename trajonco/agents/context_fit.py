"""Context fit: how many input tokens a call may use, and fitting a list of lines into what is left.

Counts use the fit's ``encoding`` (`vista.shared.tokens`: o200k_base for GPT-4o/4.1-class models, cl100k_base
otherwise); a model with another tokenizer may count more, so only a share (``safety``) of the context window
is planned for, minus the tokens reserved for the answer.

>>> b = ContextFit(context_tokens=8192, output_tokens=1024, safety=0.85)
>>> b.input_tokens
5939
>>> lines = ["a\\n", "bb bb\\n", "ccc ccc ccc\\n"]  # 2, 3 and 6 tokens
>>> oldest_to_drop(lines, available=9), oldest_to_drop(lines, available=100), oldest_to_drop(lines, available=5)
(1, 0, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vista.shared.errors import UserError
from vista.shared.tokens import DEFAULT_ENCODING, count_tokens, count_tokens_batch


class ContextFitError(ValueError, UserError):
    """The model's context cannot hold even the fixed part of a prompt."""


@dataclass(frozen=True, slots=True)
class ContextFit:
    """A model's context window, the tokens reserved for its answer, and the share of the window planned for."""

    context_tokens: int
    output_tokens: int
    safety: float = 0.85
    encoding: str = DEFAULT_ENCODING

    @property
    def input_tokens(self) -> int:
        """Tokens (in ``encoding``) a prompt may use."""
        return int(self.context_tokens * self.safety) - self.output_tokens

    def count(self, text: str) -> int:
        """Tokens of ``text`` in the fit's encoding."""
        return count_tokens(text, self.encoding)


def oldest_to_drop(lines: Sequence[str], available: int, encoding: str = DEFAULT_ENCODING) -> int:
    """How many of the oldest (first) lines to drop so the rest sum to at most ``available`` tokens."""
    if not lines:
        return 0
    counts = count_tokens_batch(list(lines), encoding).tolist()
    used = 0
    start = len(lines)
    while start > 0 and used + counts[start - 1] <= available:
        start -= 1
        used += counts[start]
    return start
