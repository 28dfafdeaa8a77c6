"""Typed records of VISTA's display layer: the tumor-board variables, one patient's filled-in display, the note.

The same `TumorBoardDisplay` is produced by the TOA-based generator (`vista.display`) and by the BM25 RAG baseline
(`vista.rag`), so the evaluation (`vista.evaluation`) compares like with like. Every value cites the evidence it
rests on: timeline event ids (``t<k>``, VISTA) and/or graph event ids (``e<k>``, both), which a reader can open in
the MEDS Graph to verify.
"""

from __future__ import annotations

import re
import tomllib
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vista.shared.errors import UserError

VARIABLES_FILE = "variables.toml"
NOT_DOCUMENTED = "Not documented"
NOT_AVAILABLE = "Not available"
NOT_FOUND = "Not found"
"""What a model-written value citing no event of the evidence it was shown is shown (and scored) as."""


def _words(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


_SILENT = frozenset(_words(t) for t in (NOT_DOCUMENTED, NOT_AVAILABLE, NOT_FOUND, "None documented"))


def states_nothing(value: str) -> bool:
    """True when ``value`` says the record is silent (such a value cites nothing, and needs not).

    >>> states_nothing("Not documented."), states_nothing("Stage IV")
    (True, False)
    """
    return _words(value) in _SILENT


class DisplayError(ValueError, UserError):
    """A variable definition file or a stored display that cannot be used (the message names the file)."""


class Comparison(StrEnum):
    """How a variable's answer is compared with the ground truth."""

    EXACT = "exact"
    DATE = "date"
    SET = "set"
    JUDGE = "judge"


class VariableSpec(BaseModel):
    """One tumor-board variable: what to ask for and how it is scored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    label: str = Field(min_length=1)
    question: str = Field(min_length=1, description="What the variable holds, as asked of the model.")
    comparison: Comparison
    scored: bool = True
    section: Literal["patient", "tumor_board"] = Field(
        default="tumor_board", description="patient: the patient-information panel (demographics, height/weight, "
        "allergies, prior conditions, medications), reported apart from the headline accuracy; tumor_board: the "
        "cancer variables the headline accuracy is made of.")

    @property
    def headline(self) -> bool:
        """Part of the headline accuracy: scored and a tumor-board variable (patient information is reported apart)."""
        return self.scored and self.section == "tumor_board"


class VariableValue(BaseModel):
    """A variable's value for one patient with the evidence it cites."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    value: str = Field(description="Short answer in clinical shorthand; 'Not documented' when the record is silent.")
    timeline_refs: tuple[str, ...] = Field(default=(), description="TOA event ids (t<k>) the value rests on.")
    source_refs: tuple[str, ...] = Field(default=(), description="MEDS Graph event ids (e<k>) the value rests on.")
    origin: Literal["structured", "llm", "uncited", "failed"] = Field(
        description="structured: computed from graph data without a model; llm: written by the model, citing the "
        "events it rests on; uncited: the model's answer cited no event it was shown, so the value is 'Not found' "
        "(`uncited_answer` keeps its words, `error` says why); failed: the model call failed (value is 'Not "
        "available' and `error` says why)")
    error: str | None = None
    uncited_answer: str | None = Field(default=None, description="origin uncited: what the model wrote, kept for a "
                                       "reader but never shown or scored as a fact")

    @property
    def uncited(self) -> bool:
        """A model's answer standing on no cited event: origin uncited, or (a display stored before the rule) a
        model-written value with no citation that states something. Shown and scored as `NOT_FOUND`."""
        if self.origin == "uncited":
            return True
        cited = bool(self.timeline_refs or self.source_refs)
        return self.origin == "llm" and not cited and not states_nothing(self.value)

    @property
    def shown(self) -> str:
        """The value as a reader (and the evaluation) may take it: `NOT_FOUND` when `uncited`."""
        return NOT_FOUND if self.uncited else self.value


class TumorBoardDisplay(BaseModel):
    """One patient's tumor-board display: every variable plus a short summary note."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject_id: int
    method: Literal["vista", "rag"] = Field(description="vista: from the TOA timeline and episodes; rag: BM25 retrieval "
                                            "over raw record chunks")
    model: str = Field(description="The LLM that wrote the llm-origin values (as the gateway names it).")
    content_hash: str = Field(description="Hash of the inputs, prompts and settings; unchanged hash, no new calls.")
    values: tuple[VariableValue, ...]
    summary_note: str = Field(default="", description="A few sentences a tumor board would read first.")
    summary_refs: tuple[str, ...] = ()
    calls: int = Field(default=0, ge=0, description="LLM calls made to build it (0 when served from the store).")
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    dropped_refs: int = Field(default=0, ge=0, description="Cited ids the model invented or was not shown (dropped).")
    uncited_values: int = Field(default=0, ge=0, description="Model-written values left with no valid citation, so "
                                "shown and scored as 'Not found' (origin uncited).")
    summary_error: str | None = Field(default=None, description="Why the summary note is missing, when its call failed.")
    graph_hash: str | None = Field(default=None, description="Version of the MEDS Graph it was built from "
                                   "(`vista.toa.refs.graph_version`); reads that resolve its refs check it.")
    ref_fingerprints: dict[str, str] = Field(default_factory=dict, description="Cited graph id -> digest of that event "
                                             "when it was built (`vista.toa.refs.ref_fingerprint`).")

    def incomplete_reason(self) -> str | None:
        """Why the display is incomplete (variables whose call failed, a failed summary note), or None."""
        failed = [v.key for v in self.values if v.origin == "failed"]
        parts = [f"{len(failed)} variable(s) not answered ({', '.join(failed[:5])})"] if failed else []
        if self.summary_error is not None:
            parts.append(f"summary note call failed ({self.summary_error[:160]})")
        return "; ".join(parts) or None

    def uncited_keys(self) -> list[str]:
        """Keys of the values shown as 'Not found' because the model's answer cited no event it was shown."""
        return [v.key for v in self.values if v.uncited]

    def value_of(self, key: str) -> VariableValue:
        """The value of variable ``key`` (KeyError naming the key when absent)."""
        for value in self.values:
            if value.key == key:
                return value
        raise KeyError(f"subject {self.subject_id}: display has no variable {key!r}")


def load_variables(path: str | Path | None = None) -> tuple[VariableSpec, ...]:
    """The variable definitions from ``path`` (default: the packaged thoracic-oncology list).

    >>> specs = load_variables()
    >>> len(specs), sum(spec.scored for spec in specs), sum(spec.headline for spec in specs)
    (20, 19, 14)
    >>> [spec.key for spec in specs if spec.section == "patient"]
    ['demographics', 'height_weight', 'allergies', 'prior_conditions', 'medications']
    """
    source = str(path) if path is not None else f"vista/display/{VARIABLES_FILE}"
    try:
        text = Path(path).read_text() if path is not None else resources.files("vista.display").joinpath(VARIABLES_FILE).read_text()
        raw = tomllib.loads(text)
        specs = tuple(VariableSpec(**item) for item in raw.get("variable", []))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DisplayError(f"{source}: cannot read variable definitions: {exc}") from None
    except (ValidationError, TypeError) as exc:
        raise DisplayError(f"{source}: bad variable definition: {exc}") from None
    if not specs:
        raise DisplayError(f"{source}: no [[variable]] entries")
    keys = [spec.key for spec in specs]
    if len(set(keys)) != len(keys):
        raise DisplayError(f"{source}: duplicate variable keys {sorted({k for k in keys if keys.count(k) > 1})}")
    return specs
