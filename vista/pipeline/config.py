"""`PipelineConfig`: which of VISTA's per-patient stages run (graph, then TOA, then display) and their settings.

>>> resolve_stages("auto", model_configured=False), resolve_stages("auto", model_configured=True)
(('graph',), ('graph', 'toa', 'display'))
>>> resolve_stages("display,toa", model_configured=False)
('graph', 'toa', 'display')
>>> resolve_stages("graph,display", model_configured=True)
Traceback (most recent call last):
...
vista.pipeline.config.StageChoiceError: display needs toa (it is built from the timeline)
>>> PipelineConfig(stages=("graph", "toa")).llm_stages, PipelineConfig().fingerprint()["toa"]
(True, None)
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vista.display import DisplayConfig
from vista.graph import DEFAULT_CONFIG
from vista.toa import TOAConfig

Stage = Literal["graph", "toa", "display"]
STAGES: tuple[Stage, ...] = ("graph", "toa", "display")


class StageChoiceError(ValueError):
    """A stage list that cannot run (an unknown stage, or display without toa)."""


def resolve_stages(text: str, *, model_configured: bool) -> tuple[Stage, ...]:
    """The stages a comma-separated choice asks for, in pipeline order (graph always first); ``auto`` is every stage
    when a model is configured and the graph alone otherwise."""
    if text.strip() == "auto":
        return STAGES if model_configured else ("graph",)
    asked = {part.strip() for part in text.split(",") if part.strip()}
    unknown = sorted(asked - set(STAGES))
    if unknown:
        raise StageChoiceError(f"unknown stage(s) {', '.join(unknown)} (choose from {', '.join(STAGES)}, or auto)")
    if "display" in asked and "toa" not in asked:
        raise StageChoiceError("display needs toa (it is built from the timeline)")
    return tuple(stage for stage in STAGES if stage in asked or stage == "graph")


class PipelineConfig(BaseModel):
    """The stages to run, in order, and the settings of the LLM stages (small and picklable: shipped to actors)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stages: tuple[Stage, ...] = Field(("graph",), description="stages to run, in order; graph always first")
    toa: TOAConfig = Field(default_factory=TOAConfig)
    display: DisplayConfig = Field(default_factory=DisplayConfig)

    @classmethod
    def from_choices(cls, stages: tuple[Stage, ...], *, profile: str | None = None, chunk_tokens: int | None = None,
                     chunk_chars: int | None = None, max_events_per_chunk: int | None = None,
                     answer_tokens: int | None = None, safety_net: bool = True, judge_ambiguous: bool = True,
                     variables: Path | None = None, group_size: int | None = None,
                     summary_note: bool = True) -> PipelineConfig:
        """The stages and their settings from a command's choices (None: the stage's default); one chunk size, in
        tokens or characters; ``answer_tokens`` caps every answer of both LLM stages (pydantic's `ValidationError`
        for a value out of range, located by stage and field).

        >>> config = PipelineConfig.from_choices(("graph", "toa"), chunk_tokens=4000, answer_tokens=300)
        >>> config.toa.budget.unit, config.toa.budget.limit, config.toa.max_tokens, config.display.max_tokens
        ('tokens', 4000, 300, 300)
        """
        from vista.toa import ChunkSize

        toa: dict[str, object] = {"safety_net": safety_net, "resolve_ambiguous": judge_ambiguous, "profile": profile,
                                  "max_events_per_chunk": max_events_per_chunk, "max_tokens": answer_tokens}
        if chunk_tokens is not None or chunk_chars is not None:
            toa["budget"] = (ChunkSize(limit=chunk_tokens, unit="tokens") if chunk_tokens is not None
                             else ChunkSize(limit=chunk_chars, unit="chars"))
        display = {"summary_note": summary_note, "variables": variables.resolve() if variables else None,
                   "group_size": group_size, "max_tokens": answer_tokens}
        return cls(stages=stages, toa=TOAConfig(**{k: v for k, v in toa.items() if v is not None}),
                   display=DisplayConfig(**{k: v for k, v in display.items() if v is not None}))

    @property
    def llm_stages(self) -> bool:
        """Whether any stage asks the model (toa, display)."""
        return any(stage != "graph" for stage in self.stages)

    @property
    def runs_display(self) -> bool:
        return "display" in self.stages

    def check_files(self) -> None:
        """Read the files the chosen stages name (the display's variables, the timeline's event profile), so a bad
        one fails before any patient runs, naming the file."""
        if self.runs_display:
            from vista.display import load_variables

            load_variables(self.display.variables)
        if "toa" in self.stages:
            from vista.toa import load_profile

            load_profile(self.toa.profile)

    def fingerprint(self) -> dict[str, object]:
        """The settings that decide the outputs: the graph build, the stages, and the settings of those that run."""
        return {
            "graph": DEFAULT_CONFIG.fingerprint(), "stages": list(self.stages),
            "toa": self.toa.model_dump(mode="json") if self.llm_stages else None,
            "display": self.display.model_dump(mode="json") if self.runs_display else None,
        }
