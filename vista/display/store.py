"""Persist displays next to the graphs (``<root>/display/<sid>.json``); skip patients whose content hash is unchanged.

Re-running an unchanged patient reads the stored display back and makes no LLM call: the display returned then
says ``calls=0`` and no tokens (what this run cost), its values and note are those stored. The hash
(`vista.display.hashing.display_hash`) covers the graph's version, the timeline, the variables, the prompts, the
config and the model-side settings (model, decoding parameters, schema mode, endpoint), so changing any of them
builds the display again.

Two more rules keep the store honest:

- **Incomplete displays are never served as complete.** A stored display with values the model could not give
  (``origin="failed"``) or a failed summary note (`display_gaps`) is not current: the next request builds it again
  (the response cache answers the calls that succeeded). One still incomplete after that is stored as it is, and
  its failed values show as failed wherever it is rendered.
- **Refs are read only against the graph they were made from.** The display records the graph's version and a
  digest of every cited graph event; `DisplayStore.load` with the patient's graph refuses one built from another
  version (`vista.toa.refs.check_provenance`).
"""

from __future__ import annotations

from vista.display.config import DisplayConfig
from vista.display.generate import build_display
from vista.display.hashing import display_hash
from vista.display.model import DisplayError, TumorBoardDisplay
from vista.graph import PatientGraph
from vista.shared.llm import LLMGateway
from vista.toa.model import PatientTimeline
from vista.toa.refs import check_provenance, graph_version, ref_fingerprints
from vista.toa.stamped_store import StampedStore

DISPLAY_DIR = "display"


def display_gaps(display: TumorBoardDisplay, config: DisplayConfig = DisplayConfig()) -> str | None:
    """Why ``display`` is incomplete (variables whose call failed, a failed summary note when ``config`` asks for
    one), or None when complete."""
    if not config.summary_note and display.summary_error is not None:
        display = display.model_copy(update={"summary_error": None})
    return display.incomplete_reason()


def stamped(display: TumorBoardDisplay, graph: PatientGraph) -> TumorBoardDisplay:
    """``display`` with the graph's version and the digests of the graph events it cites."""
    refs = [r for v in display.values for r in v.source_refs] + list(display.summary_refs)
    return display.model_copy(update={"graph_hash": graph_version(graph),
                                      "ref_fingerprints": ref_fingerprints(graph, refs)})


class DisplayStore(StampedStore[TumorBoardDisplay]):
    """Tumor-board displays of a graph store's patients under ``<root>/display/`` (read, checked and written by
    `StampedStore`)."""

    folder = DISPLAY_DIR
    model = TumorBoardDisplay
    error = DisplayError
    noun = "display"

    def is_current(self, graph: PatientGraph, timeline: PatientTimeline, gateway: LLMGateway,
                   config: DisplayConfig = DisplayConfig()) -> TumorBoardDisplay | None:
        """The stored display if a build now would give the same one: same content hash, built from this version of
        the graph, and complete (`display_gaps`); else None."""
        if not self.path_of(graph.subject_id).exists():
            return None
        stored = self.load(graph.subject_id)
        if stored.graph_hash != graph_version(graph) or display_gaps(stored, config) is not None:
            return None
        return stored if stored.content_hash == display_hash(graph, timeline, gateway, config) else None

    async def build(self, graph: PatientGraph, timeline: PatientTimeline, gateway: LLMGateway,
                    config: DisplayConfig = DisplayConfig()) -> tuple[TumorBoardDisplay, bool]:
        """(the patient's display, True if it was built now / False if the stored one was current — then with
        ``calls=0`` and zero tokens, since serving it cost nothing). A timeline built from another version of the
        graph is refused (`StaleProvenanceError`): the display would cite rows the timeline never saw."""
        if timeline.graph_hash is not None:
            check_provenance(graph, what=f"the timeline given for the display of {self.path_of(graph.subject_id)}",
                             graph_hash=timeline.graph_hash, fingerprints=timeline.ref_fingerprints,
                             rebuild="rebuild the timeline first (`vista timeline`)")
        current = self.is_current(graph, timeline, gateway, config)
        if current is not None:
            return current.model_copy(update={"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}), False
        display = stamped(await build_display(graph, timeline, gateway, config), graph)
        self.save(display)
        return display, True
