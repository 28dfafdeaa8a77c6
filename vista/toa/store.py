"""Persist timelines next to the graphs (``<store>/toa/<sid>.json``) and skip patients whose content hash is unchanged.

The hash (`vista.toa.pipeline.timeline_hash`) covers the chunk texts, the config, the profile, the prompts and the
model name, so a re-run over an unchanged patient reads the file back and makes no LLM call.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from vista.graph import PatientGraph
from vista.llm import LLMGateway
from vista.toa.errors import TimelineFileError
from vista.toa.model import PatientTimeline
from vista.toa.pipeline import TOAConfig, build_timeline, plan, timeline_hash
from vista.toa.profile import load_profile

TOA_DIR = "toa"


class TimelineStore:
    """Timelines of a graph store's patients under ``<root>/toa/``."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.directory = self.root / TOA_DIR

    def path_of(self, subject_id: int) -> Path:
        return self.directory / f"{subject_id}.json"

    def load(self, subject_id: int) -> PatientTimeline:
        path = self.path_of(subject_id)
        try:
            return PatientTimeline.model_validate_json(path.read_bytes())
        except OSError as exc:
            raise TimelineFileError(f"{path}: cannot read the timeline of subject {subject_id} ({exc.strerror})") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "<root>"
            raise TimelineFileError(f"{path}: subject {subject_id}: field {field}: {first['msg']}") from None

    def save(self, timeline: PatientTimeline) -> Path:
        """Write atomically (temp file then rename)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path_of(timeline.subject_id)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(timeline.model_dump_json(indent=1), encoding="utf-8")
        tmp.replace(path)
        return path

    def is_current(self, graph: PatientGraph, gateway: LLMGateway, config: TOAConfig) -> PatientTimeline | None:
        """The stored timeline if its content hash matches what a build would produce now, else None."""
        if not self.path_of(graph.subject_id).exists():
            return None
        stored = self.load(graph.subject_id)
        expected = timeline_hash(plan(graph, config, gateway), config, load_profile(config.profile), gateway.config.model)
        return stored if stored.content_hash == expected else None

    async def build(self, graph: PatientGraph, gateway: LLMGateway, config: TOAConfig = TOAConfig()) -> tuple[PatientTimeline, bool]:
        """(the patient's timeline, True if it was built now / False if the stored one was current)."""
        current = self.is_current(graph, gateway, config)
        if current is not None:
            return current, False
        timeline = await build_timeline(graph, gateway, config)
        self.save(timeline)
        return timeline, True
