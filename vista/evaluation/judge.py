"""The LLM judge: scores one displayed value against the reference answer on a 0–10 rubric.

The rubric (``vista/evaluation/prompts/judge.txt``) rewards an honest "Not documented" when the truth has nothing,
treats equivalent phrasings alike, does not penalize extra correct detail and penalizes wrong dates and values. The
judge runs through its own `LLMGateway`, so it can be a different model from the one that wrote the displays (an
OpenAI-compatible endpoint, or the embedded model).

>>> msgs = judge_messages(VariableSpec(key="stage", label="Stage", question="AJCC stage?", comparison="judge"),
...                       "AJCC 8th stage IVA (T2a N2 M1a)", "The group must match.", "Stage 4A")
>>> print(msgs[1].content)
Field: Stage
Question: AJCC stage?
Reference answer: AJCC 8th stage IVA (T2a N2 M1a)
What matters: The group must match.
Candidate answer: Stage 4A
"""

from __future__ import annotations


from pydantic import BaseModel, ConfigDict, Field

from vista.display import VariableSpec
from vista.shared.llm import LLMGateway, LLMResult, Message, system, user
from vista.shared.prompts import PromptFolder

JUDGE_AGENT = "judge"
RATIONALE_MAX_CHARS = 300


class JudgeScore(BaseModel):
    """The judge's verdict on one value: a 0–10 score and a short reason."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    score: int = Field(ge=0, le=10, description="0 = wrong, 10 = same as the reference.")
    rationale: str = Field(min_length=1, max_length=RATIONALE_MAX_CHARS, description="One or two short sentences.")


def judge_prompt() -> str:
    """The packaged rubric ``vista/evaluation/prompts/judge.txt``."""
    return PromptFolder("vista.evaluation").text("judge")


def judge_messages(spec: VariableSpec, reference: str, hint: str, candidate: str) -> list[Message]:
    """The rubric as system prompt; the field, reference, hint and candidate as the user message."""
    body = (f"Field: {spec.label}\nQuestion: {spec.question}\nReference answer: {reference}\n"
            f"What matters: {hint or 'The facts must agree.'}\nCandidate answer: {candidate}")
    return [system(judge_prompt()), user(body)]


async def judge_value(gateway: LLMGateway, spec: VariableSpec, reference: str, hint: str, candidate: str, *,
                      subject_id: int | None = None, max_tokens: int | None = 256) -> LLMResult[JudgeScore]:
    """Ask the judge model for a `JudgeScore` (the gateway's result: check ``.ok``; it never raises for failures)."""
    return await gateway.complete(judge_messages(spec, reference, hint, candidate), JudgeScore, agent=JUDGE_AGENT,
                                  patient_id=subject_id, max_tokens=max_tokens)
