"""Persist timelines next to the graphs (``<store>/toa/<sid>.json``) and skip patients whose content hash is unchanged.

The hash (`vista.toa.pipeline.timeline_hash`) covers the graph's version and chunk texts, the config, the profile,
the prompts, the format version and the model-side settings (model, decoding parameters, schema mode, endpoint), so
a re-run over an unchanged patient with unchanged settings reads the file back and makes no LLM call, and any
change to one of them builds it again.

Two more rules keep the store honest:

- **Incomplete timelines are never served as complete.** A stored timeline some of whose calls failed (chunk
  extractions, imaging verifications: `PatientTimeline.incomplete_reason`) is not current: the next request runs
  it again (the response cache answers the calls that succeeded, so only the failed ones are paid for again). A
  timeline that is still incomplete after that is stored and shown as incomplete (`vista.query.render`).
- **Refs are read only against the graph they were made from.** `TimelineStore.load` with the patient's graph
  refuses a timeline built from another version of it (`vista.toa.refs.check_provenance`: `StaleProvenanceError`
  naming the patient, both versions and the cited refs that changed).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from vista.atomic import atomic_write_text
from vista.graph import PatientGraph
from vista.llm import LLMGateway
from vista.toa.errors import TimelineFileError
from vista.toa.model import PatientTimeline
from vista.toa.pipeline import TOAConfig, answer_settings, build_timeline, plan, timeline_hash
from vista.toa.profile import load_profile
from vista.toa.refs import check_provenance, graph_version

TOA_DIR = "toa"


class TimelineStore:
    """Timelines of a graph store's patients under ``<root>/toa/``."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.directory = self.root / TOA_DIR

    def path_of(self, subject_id: int) -> Path:
        return self.directory / f"{subject_id}.json"

    def rebuild_hint(self, subject_id: int) -> str:
        """The command that builds a current timeline for ``subject_id`` (named in refusals)."""
        return f"rebuild it with `vista timeline --store {self.root} --subject {subject_id}`"

    def load(self, subject_id: int, graph: PatientGraph | None = None) -> PatientTimeline:
        """The stored timeline of ``subject_id`` (`TimelineFileError` naming file, subject and field when unusable).

        With ``graph`` (the patient's current graph) its refs are checked to have been made against that graph:
        `StaleProvenanceError` otherwise. Every reader that resolves the timeline's refs passes the graph.
        """
        path = self.path_of(subject_id)
        try:
            timeline = PatientTimeline.model_validate_json(path.read_bytes())
        except OSError as exc:
            raise TimelineFileError(f"{path}: cannot read the timeline of subject {subject_id} ({exc.strerror})") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "<root>"
            raise TimelineFileError(f"{path}: subject {subject_id}: field {field}: {first['msg']}") from None
        if timeline.subject_id != subject_id:
            raise TimelineFileError(f"{path}: subject {subject_id}: field subject_id holds {timeline.subject_id}")
        if graph is not None:
            if graph.subject_id != subject_id:
                raise ValueError(f"the graph is of subject {graph.subject_id}, not {subject_id}")
            check_provenance(graph, what=f"the stored timeline {path}", graph_hash=timeline.graph_hash,
                             fingerprints=timeline.ref_fingerprints, rebuild=self.rebuild_hint(subject_id))
        return timeline

    def save(self, timeline: PatientTimeline) -> Path:
        """Write atomically (temp file then rename)."""
        return atomic_write_text(self.path_of(timeline.subject_id), timeline.model_dump_json(indent=1))

    def is_current(self, graph: PatientGraph, gateway: LLMGateway, config: TOAConfig) -> PatientTimeline | None:
        """The stored timeline if a build now would give the same one: same content hash, built from this version
        of the graph, and complete (no failed call); else None."""
        if not self.path_of(graph.subject_id).exists():
            return None
        stored = self.load(graph.subject_id)
        version = graph_version(graph)
        if stored.graph_hash != version or stored.incomplete_reason() is not None:
            return None
        expected = timeline_hash(plan(graph, config, gateway), config, load_profile(config.profile),
                                 answer_settings(gateway), version)
        return stored if stored.content_hash == expected else None

    async def build(self, graph: PatientGraph, gateway: LLMGateway, config: TOAConfig = TOAConfig()) -> tuple[PatientTimeline, bool]:
        """(the patient's timeline, True if it was built now / False if the stored one was current)."""
        current = self.is_current(graph, gateway, config)
        if current is not None:
            return current, False
        timeline = await build_timeline(graph, gateway, config)
        self.save(timeline)
        return timeline, True
