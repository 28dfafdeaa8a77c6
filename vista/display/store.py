"""Persist displays next to the graphs (``<root>/display/<sid>.json``); skip patients whose content hash is unchanged.

Re-running an unchanged patient reads the stored display back and makes no LLM call: the display returned then
says ``calls=0`` and no tokens (what this run cost), its values and note are those stored.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from vista.display.config import DisplayConfig
from vista.display.generate import build_display
from vista.display.hashing import display_hash
from vista.display.model import DisplayError, TumorBoardDisplay
from vista.graph import PatientGraph
from vista.llm import LLMGateway
from vista.toa.model import PatientTimeline

DISPLAY_DIR = "display"


class DisplayStore:
    """Tumor-board displays of a graph store's patients under ``<root>/display/``."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.directory = self.root / DISPLAY_DIR

    def path_of(self, subject_id: int) -> Path:
        return self.directory / f"{subject_id}.json"

    def load(self, subject_id: int) -> TumorBoardDisplay:
        """The stored display of ``subject_id`` (`DisplayError` naming the file, subject and field when unusable)."""
        path = self.path_of(subject_id)
        try:
            display = TumorBoardDisplay.model_validate_json(path.read_bytes())
        except OSError as exc:
            raise DisplayError(f"{path}: cannot read the display of subject {subject_id} ({exc.strerror})") from None
        except ValidationError as exc:
            first = exc.errors(include_input=False)[0]
            field = ".".join(str(p) for p in first["loc"]) or "<root>"
            raise DisplayError(f"{path}: subject {subject_id}: field {field}: {first['msg']}") from None
        if display.subject_id != subject_id:
            raise DisplayError(f"{path}: subject {subject_id}: field subject_id holds {display.subject_id}")
        return display

    def save(self, display: TumorBoardDisplay) -> Path:
        """Write atomically (a temp file in the same directory, then rename)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path_of(display.subject_id)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(display.model_dump_json(indent=1), encoding="utf-8")
        tmp.replace(path)
        return path

    def is_current(self, graph: PatientGraph, timeline: PatientTimeline, gateway: LLMGateway,
                   config: DisplayConfig = DisplayConfig()) -> TumorBoardDisplay | None:
        """The stored display if its content hash matches what a build would produce now, else None."""
        if not self.path_of(graph.subject_id).exists():
            return None
        stored = self.load(graph.subject_id)
        return stored if stored.content_hash == display_hash(graph, timeline, gateway, config) else None

    async def build(self, graph: PatientGraph, timeline: PatientTimeline, gateway: LLMGateway,
                    config: DisplayConfig = DisplayConfig()) -> tuple[TumorBoardDisplay, bool]:
        """(the patient's display, True if it was built now / False if the stored one was current — then with
        ``calls=0`` and zero tokens, since serving it cost nothing)."""
        current = self.is_current(graph, timeline, gateway, config)
        if current is not None:
            return current.model_copy(update={"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}), False
        display = await build_display(graph, timeline, gateway, config)
        self.save(display)
        return display, True
