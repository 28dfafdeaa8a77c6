"""Loads the agents' prompt templates (`trajonco/prompts/*.txt`) and fills them for one cancer, date and horizon.

Templates use ``string.Template`` placeholders (``$cancer``, ``$prediction_time``, ``$horizon``, ...), so JSON
braces in the text need no escaping; a missing placeholder raises instead of leaving ``$name`` in a prompt.

>>> from datetime import date
>>> from trajonco.cancers import CANCERS
>>> ctx = PromptContext(CANCERS["lung"], date(2021, 6, 30), horizon_days=365)
>>> system, user = render_pair("preprocessor", ctx, chunk_xml="<patient/>", chunk_number=1, n_chunks=2)
>>> "lung cancer within 1 year?" in system, "<patient/>" in user
(True, True)
>>> horizon_text(182), horizon_text(730), horizon_text(45)
('6 months', '2 years', '45 days')
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from functools import cache
from importlib import resources
from string import Template

from trajonco.cancers import CancerType

AGENT_TEMPLATES = ("worker_first", "worker_next", "manager", "preprocessor", "single_agent")
"""Base names of the template pairs (``<name>.system.txt`` and ``<name>.user.txt``)."""


def horizon_text(days: int) -> str:
    """A prediction horizon in words: whole years, else whole months, else days."""
    years = days / 365.25
    if days >= 360 and abs(years - round(years)) < 0.02:
        n = round(years)
        return f"{n} year" if n == 1 else f"{n} years"
    months = days / 30.4375
    if days >= 28 and abs(months - round(months)) < 0.1:
        n = round(months)
        return f"{n} month" if n == 1 else f"{n} months"
    return f"{days} days"


@cache
def load_template(name: str) -> Template:
    """The template file ``trajonco/prompts/<name>.txt`` (cached)."""
    try:
        text = resources.files("trajonco.prompts").joinpath(f"{name}.txt").read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"prompt template trajonco/prompts/{name}.txt does not exist") from exc
    return Template(text)


@dataclass(frozen=True, slots=True)
class PromptContext:
    """What every prompt of one assessment shares: the cancer, the prediction date, the horizon, options."""

    cancer: CancerType
    prediction_time: date
    horizon_days: int = 365
    hints: bool = False
    memory_k: int = 10

    def variables(self) -> dict[str, str]:
        """The placeholders common to all templates."""
        hints = ""
        if self.hints:
            hints = load_template("cancer_hints").substitute(
                cancer=self.cancer.display_name, hint_list="; ".join(self.cancer.hints))
        return {
            "cancer": self.cancer.display_name,
            "prediction_time": self.prediction_time.isoformat(),
            "horizon": horizon_text(self.horizon_days),
            "hints": hints,
            "memory_k": str(self.memory_k),
        }


def render(name: str, ctx: PromptContext, **values: object) -> str:
    """Fill template ``name`` with the context's variables and ``values`` (KeyError names a missing placeholder)."""
    variables = ctx.variables() | {k: str(v) for k, v in values.items()}
    try:
        return load_template(name).substitute(variables)
    except KeyError as exc:
        raise KeyError(f"prompt template {name}.txt needs a value for ${exc.args[0]}") from None


def render_pair(agent: str, ctx: PromptContext, **values: object) -> tuple[str, str]:
    """The (system, user) prompts of ``agent`` (one of `AGENT_TEMPLATES`)."""
    return render(f"{agent}.system", ctx, **values), render(f"{agent}.user", ctx, **values)
