"""Loads the agents' prompt templates (`trajonco/prompts/*.txt`) and fills them for one cancer, date and horizon.

Templates use ``string.Template`` placeholders (``$cancer``, ``$prediction_time``, ``$horizon``, ...), so JSON
braces in the text need no escaping; a missing placeholder raises instead of leaving ``$name`` in a prompt.

>>> from datetime import date
>>> from trajonco.cancers import CANCERS
>>> ctx = PromptContext(CANCERS["lung"], date(2021, 6, 30), horizon_days=365)
>>> system, user = render_pair("preprocessor", ctx, chunk_xml="<patient/>", chunk_number=1, n_chunks=2)
>>> "lung cancer within 1 year?" in system, "<patient/>" in user
(True, True)
>>> user.splitlines()[0]  # the record's length is not given away (cases have longer records)
'A part of the record:'
>>> numbered = PromptContext(CANCERS["lung"], date(2021, 6, 30), part_numbers=True)
>>> render_pair("preprocessor", numbered, chunk_xml="<patient/>", chunk_number=1, n_chunks=2)[1].splitlines()[0]
'Part 1 of 2 of the record:'

The any-cancer chain (the paper's any-cancer variant) asks the same agents about any of the cancers the patient
can develop; its manager and single agent also name the most likely cancer type (``<agent>_any`` templates):

>>> from trajonco.cancers import applicable_cancers
>>> anyc = PromptContext(ANY_CANCER, date(2021, 6, 30), candidates=tuple(applicable_cancers("M")))
>>> system, _ = render_pair("manager", anyc, final_worker_output="{}", memory_events="", memory_note="")
>>> "any cancer within 1 year" in system, '"likely_cancer"' in system, "ovarian" in system
(True, True, False)
>>> horizon_text(182), horizon_text(730), horizon_text(45)
('6 months', '2 years', '45 days')
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from vista.shared.prompts import PromptFolder

from trajonco.cancers import CancerType

AGENT_TEMPLATES = ("worker_first", "worker_next", "manager", "preprocessor", "single_agent")
"""Base names of the template pairs (``<name>.system.txt`` and ``<name>.user.txt``)."""

ANY_CANCER_TEMPLATES = frozenset({"manager", "single_agent"})
"""Agents with their own any-cancer templates (``<name>_any.*.txt``: they also name the most likely cancer)."""

ANY_CANCER = CancerType("any", "any cancer", frozenset({"F", "M"}), ())
"""What the any-cancer chain's prompts assess (``$cancer`` reads "any cancer")."""


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


PROMPTS = PromptFolder("trajonco.prompts", folder="")
load_template = PROMPTS.template
"""The template file ``trajonco/prompts/<name>.txt`` (``string.Template``, cached)."""


@dataclass(frozen=True, slots=True)
class PromptContext:
    """What every prompt of one assessment shares: the cancer, the prediction date, the horizon, options."""

    cancer: CancerType
    prediction_time: date
    horizon_days: int = 365
    hints: bool = False
    memory_k: int = 10
    part_numbers: bool = False  # "Part k of n" in the prompts: off by default, since n leaks the record's length
    candidates: tuple[CancerType, ...] = ()  # any-cancer chain: the cancers the patient can develop (else empty)

    @property
    def any_cancer(self) -> bool:
        """Whether these prompts ask about any cancer (one chain for all candidate cancers)."""
        return bool(self.candidates)

    def variables(self) -> dict[str, str]:
        """The placeholders common to all templates."""
        hints = ""
        if self.any_cancer:
            hints = load_template("any_cancer_hints").substitute(
                cancer_list=", ".join(c.display_name for c in self.candidates))
        elif self.hints:
            hints = load_template("cancer_hints").substitute(
                cancer=self.cancer.display_name, hint_list="; ".join(self.cancer.hints))
        return {
            "cancer": self.cancer.display_name,
            "prediction_time": self.prediction_time.isoformat(),
            "horizon": horizon_text(self.horizon_days),
            "hints": hints,
            "memory_k": str(self.memory_k),
            "cancer_keys": ", ".join(f'"{c.key}"' for c in self.candidates),
        }


PART_HEADINGS = {"worker_first": "The earliest part of the record you are given:",
                 "worker_next": "The next part of the record:"}
"""How a chunk is introduced without numbers (other agents: "A part of the record:")."""


def part_heading(name: str, ctx: PromptContext, values: dict[str, object]) -> str:
    """The line introducing a chunk: "Part k of n of the record:" only with ``ctx.part_numbers`` — the number of
    chunks grows with the record, and cases have longer records than controls, so by default it is not said."""
    if ctx.part_numbers and "chunk_number" in values and "n_chunks" in values:
        return f"Part {values['chunk_number']} of {values['n_chunks']} of the record:"
    return PART_HEADINGS.get(name.split(".")[0], "A part of the record:")


def render(name: str, ctx: PromptContext, **values: object) -> str:
    """Fill template ``name`` with the context's variables and ``values`` (KeyError names a missing placeholder)."""
    variables = ctx.variables() | {"part_heading": part_heading(name, ctx, values)} | {k: str(v) for k, v in values.items()}
    try:
        return load_template(name).substitute(variables)
    except KeyError as exc:
        raise KeyError(f"prompt template {name}.txt needs a value for ${exc.args[0]}") from None


def render_pair(agent: str, ctx: PromptContext, **values: object) -> tuple[str, str]:
    """The (system, user) prompts of ``agent`` (one of `AGENT_TEMPLATES`; its ``_any`` form in the any-cancer chain)."""
    name = f"{agent}_any" if ctx.any_cancer and agent in ANY_CANCER_TEMPLATES else agent
    return render(f"{name}.system", ctx, **values), render(f"{name}.user", ctx, **values)
