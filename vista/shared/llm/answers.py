r"""Reading a model's answer: validate it against the response model, and word the re-ask when it fails.

>>> from typing import Literal
>>> from pydantic import BaseModel
>>> class Risk(BaseModel):
...     level: Literal["Low", "High"]
>>> parse_answer('```json\n{"level": "High"}\n```', Risk)
(Risk(level='High'), '')
>>> parse_answer('{"level": "Severe"}', Risk)
(None, "level: Input should be 'Low' or 'High'")
"""

import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from vista.shared.llm.messages import Message

M = TypeVar("M", bound=BaseModel)

_MAX_QUOTED_ANSWER = 4000
_FENCED = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def parse_answer(content: str | None, response_model: type[M]) -> tuple[M | None, str]:
    """Validate an answer text; returns (value, "") or (None, a short description of what is wrong).

    Accepts the JSON wrapped in a code fence or surrounded by prose (models without constrained decoding do that).
    """
    if content is None or not content.strip():
        return None, "the answer was empty"
    try:
        return response_model.model_validate_json(content), ""
    except ValidationError as exc:
        first_error = exc
    for candidate in _json_candidates(content):
        try:
            return response_model.model_validate_json(candidate), ""
        except ValidationError:
            continue
    return None, describe_validation_error(first_error)


def describe_validation_error(exc: ValidationError, limit: int = 8) -> str:
    """Field paths and messages of a validation error, without the offending input values."""
    errors = exc.errors(include_input=False, include_url=False)
    parts = [f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in errors[:limit]]
    more = f" (+{len(errors) - limit} more)" if len(errors) > limit else ""
    return "; ".join(parts) + more


def _json_candidates(content: str) -> list[str]:
    found = []
    if match := _FENCED.match(content):
        found.append(match.group(1))
    first, last = content.find("{"), content.rfind("}")
    if 0 <= first < last:
        found.append(content[first : last + 1])
    return [c for c in found if c != content]


def reask_turns(content: str | None, problem: str, truncated: bool) -> tuple[Message, ...]:
    """The turns appended to ask again: the rejected answer (as the assistant) and what was wrong with it."""
    if truncated:
        feedback = (
            "Your answer was cut off at the length limit before the JSON was complete. Reply again with a shorter "
            "JSON object (shorter strings, fewer list items) that fits the schema."
        )
    else:
        feedback = f"Your answer could not be used: {problem}. Reply again with only the corrected JSON object."
    turns: list[Message] = []
    if content:
        turns.append(Message("assistant", content[:_MAX_QUOTED_ANSWER]))
    turns.append(Message("user", feedback))
    return tuple(turns)
