"""Chat messages sent to a model: a typed role + text pair, and the helpers to build them.

>>> [m.to_wire() for m in (system("Be brief."), user("Hi"))]
[{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Hi'}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Role = Literal["system", "user", "assistant"]
_ROLES: frozenset[str] = frozenset({"system", "user", "assistant"})


@dataclass(frozen=True, slots=True)
class Message:
    """One chat turn."""

    role: Role
    content: str

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(f"message role must be one of {sorted(_ROLES)}, got {self.role!r}")
        if not isinstance(self.content, str):
            raise TypeError(f"message content must be str, got {type(self.content).__name__}")

    def to_wire(self) -> dict[str, str]:
        """The OpenAI chat-completions form of this message."""
        return {"role": self.role, "content": self.content}


def system(content: str) -> Message:
    return Message("system", content)


def user(content: str) -> Message:
    return Message("user", content)


def assistant(content: str) -> Message:
    return Message("assistant", content)


def as_messages(messages: Sequence[Message | Mapping[str, str]]) -> list[Message]:
    """`Message`s from messages or ``{"role", "content"}`` mappings (raises naming the bad item)."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise TypeError("messages must be a non-empty list of Message or {'role', 'content'} mappings")
    out = []
    for i, item in enumerate(messages):
        if isinstance(item, Message):
            out.append(item)
        elif isinstance(item, Mapping) and set(item) == {"role", "content"}:
            out.append(Message(item["role"], item["content"]))  # type: ignore[arg-type]
        else:
            raise TypeError(f"messages[{i}] must be a Message or a mapping with exactly 'role' and 'content', got {item!r:.80}")
    return out


def with_schema_prompt(messages: Sequence[Message], instructions: str) -> list[Message]:
    """Append ``instructions`` to the first system message (or add a system message in front)."""
    out = list(messages)
    if out and out[0].role == "system":
        out[0] = Message("system", out[0].content + "\n\n" + instructions)
    else:
        out.insert(0, Message("system", instructions))
    return out
