"""The judge's messages: the rubrics as the system prompt, the outcome and the two candidates as the user message.

Templates live in ``trajonco/prompts/judge/`` (``string.Template``: ``$name`` placeholders). A candidate is shown
without its run's name (model, variant): score, per-chunk risk, summary, reasoning and events, so the judge sees what
a clinician would. Candidates too long for the judge's context are cut to a token budget (the cut is marked in the
text and recorded in the judgement).

>>> from datetime import datetime
>>> c = Candidate(subject_id=1, prediction_time=datetime(2021, 1, 1), cancer="lung", label=True, status="ok",
...               risk_score=7, summary="Smoker; new cough in 2020.", reasoning="Rising risk.",
...               trajectory=[{"chunk_index": 0, "risk_level": "Low"}, {"chunk_index": 1, "risk_level": "High"}],
...               events=[{"timestamp": "2020-05-01", "description": "Chronic cough", "sources": []}])
>>> print(candidate_text(c))
Risk score (1-10): 7
Risk per part of the record: Low -> High
Summary: Smoker; new cough in 2020.
Reasoning: Rising risk.
Events:
- 2020-05-01: Chronic cough
>>> system_text, user_text = judge_prompts("lung", 365, True, "first text", "second text")
>>> "lung cancer within 1 year" in system_text and "Temporal reasoning" in system_text
True
>>> "diagnosed with lung cancer within 1 year" in user_text.split("True outcome: ")[1]
True
"""

from __future__ import annotations

from vista.shared.prompts import PromptFolder

from trajonco.agents.evidence import flag_note
from trajonco.agents.prompts import horizon_text
from trajonco.cancers import CANCERS
from trajonco.judge.rubrics import RUBRICS
from trajonco.judge.runs import Candidate

CUT_MARK = "\n[... cut to fit the judge's context ...]"


_template = PromptFolder("trajonco.prompts", folder="judge").template


def cancer_name(cancer: str) -> str:
    """How prompts name a cancer key ('lung' -> 'lung cancer'; 'any' -> 'any cancer')."""
    if cancer in CANCERS:
        return CANCERS[cancer].display_name
    return "any cancer" if cancer == "any" else f"{cancer} cancer"


def candidate_text(candidate: Candidate) -> str:
    """One answer as the judge (and a human reviewer) reads it, without the run's identity."""
    lines = [f"Risk score (1-10): {candidate.risk_score if candidate.risk_score is not None else 'none'}"]
    levels = [step.risk_level or "?" for step in candidate.trajectory]
    if levels:
        lines.append(f"Risk per part of the record: {' -> '.join(levels)}")
    lines.append(f"Summary: {(candidate.summary or '').strip() or '(none)'}")
    lines.append(f"Reasoning: {(candidate.reasoning or '').strip() or '(none)'}")
    lines.append("Events:" if candidate.events else "Events: (none)")
    lines += [f"- {event.timestamp.isoformat()}: {event.description.strip()}{flag_note(event.flags)}"
              for event in candidate.events]
    return "\n".join(lines)



def outcome_text(cancer: str, horizon_days: int, label: bool | None) -> str:
    name, horizon = cancer_name(cancer), horizon_text(horizon_days)
    if label is None:
        return "not known"
    return (f"the patient WAS diagnosed with {name} within {horizon}." if label else
            f"the patient was NOT diagnosed with {name} within {horizon}.")


def judge_prompts(cancer: str, horizon_days: int, label: bool | None, first: str, second: str) -> tuple[str, str]:
    """(system, user) texts with ``first`` shown as A and ``second`` as B."""
    rubrics = "\n".join(f"{i}. {r.title} ({r.key}): {r.question}" for i, r in enumerate(RUBRICS, 1))
    context = {"cancer": cancer_name(cancer), "horizon": horizon_text(horizon_days)}
    system = _template("system").substitute(context, rubrics=rubrics)
    user = _template("user").substitute(context, outcome=outcome_text(cancer, horizon_days, label),
                                        candidate_a=first, candidate_b=second)
    return system, user


def cut_to_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """``text`` cut to at most ``max_tokens`` tokens (cl100k), with `CUT_MARK` appended; (text, whether it was cut)."""
    from vista.shared.tokens import get_encoding

    encoding = get_encoding()
    tokens = encoding.encode(text)
    if len(tokens) <= max_tokens:
        return text, False
    return encoding.decode(tokens[:max(0, max_tokens - 16)]) + CUT_MARK, True


def candidate_budget(context_tokens: int | None, answer_tokens: int, cancer: str, horizon_days: int,
                     *, safety: float = 0.8, cap: int = 12_000) -> int:
    """Tokens each candidate may take: what is left of ``safety`` × context after the prompts and the answer, halved.

    The embedded model's tokenizer is not cl100k, hence the safety margin. ``cap`` bounds a candidate on huge
    contexts (an answer is a few thousand tokens at most).
    """
    from vista.shared.tokens import count_tokens

    if context_tokens is None:
        return cap
    fixed = sum(count_tokens(t) for t in judge_prompts(cancer, horizon_days, True, "", ""))
    left = int(context_tokens * safety) - fixed - answer_tokens
    if left < 200:
        from trajonco.judge.errors import EvaluationInputError

        raise EvaluationInputError(f"the judge's context ({context_tokens} tokens) leaves {left} tokens for the two "
                                   f"candidates after the prompt and a {answer_tokens}-token answer: use a model "
                                   "with a larger context or a smaller max_tokens")
    return min(cap, left // 2)
