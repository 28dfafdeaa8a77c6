"""VISTA's Timeline Object Architecture (TOA): a concise, provenance-linked oncology timeline built from the MEDS Graph.

Stages (`build_timeline`): `serialize_graph` (text lines with event ids, one block per encounter) → `plan_chunks`
(encounter-aligned, under a char/token budget) → `extract_all` (parallel sub-agents through the LLM gateway; every
ref checked against the graph, unknown refs dropped, ref-less events rejected) → `unify` (same type, dates within
±3 days and a shared specific ref; hub refs such as a recap note never join events) → `radiology_safety_net`
(imaging studies from structured data — scan and report days clustered — missing within ±3 days are verified and
added, one event per study) → `resolve_ambiguous` (an LLM judge for the residue: same-type events within the window
left apart) → `synthesize_episodes` (baseline / diagnostic work-up / treatment lines as regimens / post-oncological,
by date range).
`TimelineStore` persists results as ``<store>/toa/<sid>.json`` keyed by a content hash.
Event types come from a TOML profile (`load_profile`, thoracic oncology by default).
"""

from vista.toa.ambiguity import SameEventVerdict, resolve_ambiguous
from vista.toa.chunks import Chunk, ChunkSize, plan_chunks
from vista.toa.episodes import synthesize_episodes
from vista.toa.errors import ChunkingError, ProfileError, StaleProvenanceError, TimelineFileError, TOAError
from vista.toa.extract import ChunkExtraction, extract_all, extract_chunk
from vista.toa.model import (
    Episode,
    EpisodeKind,
    ExtractedEvent,
    ExtractionAnswer,
    ExtractionStats,
    ImagingVerdict,
    PatientTimeline,
    RejectedEvent,
    TimelineEvent,
    extraction_answer_model,
)
from vista.toa.pipeline import TOAConfig, build_timeline, fitted_chunk_size, plan, timeline_hash
from vista.toa.profile import EventProfile, EventType, load_profile
from vista.toa.refs import CheckedEvent, check_event, check_provenance, graph_version, ref_fingerprint
from vista.toa.safety_net import SafetyNetResult, imaging_candidates, is_imaging_code, missing_dates, radiology_safety_net
from vista.toa.serialize import EncounterBlock, serialize_graph, serialize_text
from vista.toa.store import TimelineStore
from vista.toa.unify import ambiguous_pairs, ref_groups, unify

__all__ = [
    "CheckedEvent", "Chunk", "ChunkingError", "ChunkSize", "ChunkExtraction", "EncounterBlock", "Episode", "EpisodeKind",
    "EventProfile", "EventType", "ExtractedEvent", "ExtractionAnswer", "ExtractionStats", "ImagingVerdict",
    "PatientTimeline", "ProfileError", "RejectedEvent", "SameEventVerdict", "resolve_ambiguous", "SafetyNetResult", "TOAConfig", "TOAError",
    "TimelineEvent", "TimelineFileError", "TimelineStore", "ambiguous_pairs", "build_timeline", "check_event",
    "extract_all", "extract_chunk", "fitted_chunk_size", "extraction_answer_model", "imaging_candidates", "is_imaging_code",
    "load_profile", "missing_dates", "plan", "plan_chunks", "radiology_safety_net", "ref_groups", "serialize_graph",
    "serialize_text", "synthesize_episodes", "timeline_hash", "unify",
    "StaleProvenanceError", "check_provenance", "graph_version", "ref_fingerprint",
]
