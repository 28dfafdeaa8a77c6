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

from vista.graph import PatientGraph
from vista.shared.llm import LLMGateway
from vista.toa.errors import TimelineFileError
from vista.toa.model import PatientTimeline
from vista.toa.pipeline import TOAConfig, answer_settings, build_timeline, plan, timeline_hash
from vista.toa.profile import load_profile
from vista.toa.refs import graph_version
from vista.toa.stamped_store import StampedStore

TOA_DIR = "toa"


class TimelineStore(StampedStore[PatientTimeline]):
    """Timelines of a graph store's patients under ``<root>/toa/`` (read, checked and written by `StampedStore`)."""

    folder = TOA_DIR
    model = PatientTimeline
    error = TimelineFileError
    noun = "timeline"

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
