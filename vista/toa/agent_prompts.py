"""The TOA sub-agents' prompts (text files in ``vista/toa/prompts/``) filled with the profile and the chunk."""

from __future__ import annotations

import datetime as dt

from vista.shared.llm import Message, system, user
from vista.shared.prompts import PromptFolder
from vista.toa.profile import EventProfile

PROMPTS = PromptFolder("vista.toa", suffix=".md")
prompt_text = PROMPTS.text
"""The packaged prompt ``vista/toa/prompts/<name>.md``."""


def event_type_lines(profile: EventProfile) -> str:
    return "\n".join(f"- {t.name}: {t.definition} Subtypes: {', '.join(profile.subtypes_of(t.name))}."
                     for t in profile.types)


def extraction_messages(profile: EventProfile, chunk_text: str) -> list[Message]:
    """System prompt (task, rules, the profile's types) and the chunk as the user message."""
    return [system(prompt_text("extract").format(event_types=event_type_lines(profile))),
            user("Record slice:\n" + chunk_text)]


def verification_messages(profile: EventProfile, day: dt.date, lines: list[str],
                          last_day: dt.date | None = None) -> list[Message]:
    """The imaging verifier's prompt and the lines dated ``day`` (through ``last_day`` for a study whose report
    came on a later day)."""
    subtypes = ", ".join(profile.subtypes_of(profile.imaging_type))
    dated = day.isoformat() if last_day is None or last_day == day else f"{day.isoformat()} to {last_day.isoformat()}"
    return [system(prompt_text("verify_imaging").format(date=dated, subtypes=subtypes)),
            user(f"Record lines dated {dated}:\n" + "\n".join(lines))]
