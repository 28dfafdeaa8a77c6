"""The display calls' prompts (text files in ``vista/display/prompts/``) filled with the variables and the timeline."""

from __future__ import annotations

from collections.abc import Sequence

from vista.display.model import VariableSpec, VariableValue
from vista.shared.llm import Message, system, user
from vista.shared.prompts import PromptFolder

PROMPT_NAMES = ("variables", "summary")
SUMMARY_SENTENCES = "three to five"
PROMPTS = PromptFolder("vista.display")
prompt_text = PROMPTS.text
"""The packaged prompt ``vista/display/prompts/<name>.txt``."""


def variable_lines(specs: Sequence[VariableSpec]) -> str:
    return "\n".join(f"- {spec.key} ({spec.label}): {spec.question}" for spec in specs)


def variables_messages(specs: Sequence[VariableSpec], timeline_text: str) -> list[Message]:
    """System prompt (task and rules), then the rendered timeline followed by the group's variables.

    The variables come last so every group's prompt starts with the same text (system prompt + timeline): servers
    with a prefix cache (llama.cpp, vLLM, OpenAI) then process the timeline once per patient, not once per group."""
    return [system(prompt_text("variables")),
            user(f"Oncology timeline:\n{timeline_text}\n\n"
                 f"Variables to answer:\n{variable_lines(specs)}")]


def summary_messages(specs: Sequence[VariableSpec], values: Sequence[VariableValue],
                     timeline_text: str) -> list[Message]:
    """The note writer's prompt: the filled variables (failed ones left out) and the rendered timeline."""
    labels = {spec.key: spec.label for spec in specs}
    sheet = "\n".join(f"- {labels.get(v.key, v.key)}: {v.value}" for v in values if v.origin != "failed")
    return [system(prompt_text("summary").format(sentences=SUMMARY_SENTENCES)),
            user(f"Summary sheet:\n{sheet or '(empty)'}\n\nOncology timeline:\n{timeline_text}")]
