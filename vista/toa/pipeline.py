"""Build one patient's TOA: serialize → chunk → parallel extraction → unify → radiology safety net → episodes.

`build_timeline` is the async entry point (one `LLMGateway` shared by every sub-agent); `TOAConfig` holds every
knob, and `timeline_hash` is the content hash that lets `vista.toa.store` skip an unchanged patient. The hash covers
everything that can change the result: the graph's version and the chunk texts, the config, the profile, every
prompt, the format version of this code, the gateway settings that change answers (`ANSWER_FIELDS`: model,
decoding parameters such as temperature, seed and max_tokens, schema mode...) and the endpoint's identity (as the
response cache keys on it: two servers that both call their model ``local`` are not the same model).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field

from vista.graph import PatientGraph
from vista.shared.llm import LLMGateway
from vista.shared.llm.config import ANSWER_FIELDS
from vista.toa.chunks import Chunk, ChunkSize, plan_chunks
from vista.toa.errors import ChunkingError
from vista.toa.episodes import synthesize_episodes
from vista.toa.extract import extract_all
from vista.toa.model import MAX_EVENTS_PER_CHUNK, ExtractionStats, PatientTimeline
from vista.toa.profile import DEFAULT_PROFILE, EventProfile, load_profile
from vista.toa.agent_prompts import prompt_text
from vista.toa.refs import UNKNOWN_REFS_DROPPED, graph_version, ref_fingerprints
from vista.toa.safety_net import radiology_safety_net
from vista.toa.serialize import serialize_graph
from vista.toa.ambiguity import resolve_ambiguous
from vista.toa.unify import ambiguous_pairs, renumber_with_map, unify

TOA_FORMAT_VERSION = "vista.toa/3"
"""Part of every timeline hash: bump it when the same inputs give a different timeline (2: graph-versioned refs,
decoding settings and endpoint in the hash; 3: events dated outside their refs' dates rejected, provenance failures
re-asked once)."""


class TOAConfig(BaseModel):
    """Settings of a TOA build (all part of the content hash)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: str = Field(default=DEFAULT_PROFILE, description="Packaged profile name or path to a profile TOML.")
    budget: ChunkSize | None = Field(
        default=None, description="Chunk size limit (chars or tokens); None fits the model: the paper's 120k characters "
        "when the context window is unknown or large enough, else the window minus prompt and answer room, in tokens.")
    start: dt.date | None = Field(default=None, description="Only encounters (and imaging dates) on/after this date.")
    end: dt.date | None = Field(default=None, description="Only encounters (and imaging dates) on/before this date.")
    safety_net: bool = Field(default=True, description="Run the radiology safety net.")
    window_days: int = Field(default=3, ge=0, description="± days within which a timeline imaging event covers a date.")
    max_tokens: int | None = Field(default=None, gt=0, description="Answer token cap per sub-agent call (None: gateway's).")
    resolve_ambiguous: bool = Field(default=True, description="Ask a judge about same-date, same-type events sharing no ref.")
    max_judged_pairs: int = Field(default=50, ge=0, description="Most ambiguous pairs judged per patient (the rest stay listed).")
    max_events_per_chunk: int = Field(default=MAX_EVENTS_PER_CHUNK, ge=1, le=200,
                                      description="Most events one extraction sub-agent may return (schema maxItems).")


PROMPT_ROOM_TOKENS = 1200
"""Tokens kept free in the context window for the system prompt, the message framing and the profile's types."""


def fitted_chunk_size(config: TOAConfig, context_tokens: int | None, answer_tokens: int) -> ChunkSize:
    """``config.budget``, or (when None) the largest chunk the model's context window can take with its answer.

    >>> fitted_chunk_size(TOAConfig(), 8192, 1024)
    ChunkSize(limit=5968, unit='tokens')
    >>> fitted_chunk_size(TOAConfig(), None, 1024)
    ChunkSize(limit=120000, unit='chars')
    """
    if config.budget is not None:
        return config.budget
    paper_default = ChunkSize()
    if context_tokens is None or context_tokens >= 64_000:
        return paper_default
    room = context_tokens - answer_tokens - PROMPT_ROOM_TOKENS
    if room < 200:
        raise ChunkingError(f"a {context_tokens}-token context leaves no room for a chunk after a {answer_tokens}-token "
                            "answer; set TOAConfig.budget or a smaller max_tokens")
    return ChunkSize(limit=room, unit="tokens")


def plan(graph: PatientGraph, config: TOAConfig, gateway: LLMGateway | None = None) -> list[Chunk]:
    """The chunks a build would send (serialized encounters in the configured date range, packed under the budget,
    fitted to ``gateway``'s model when ``config.budget`` is None)."""
    context = gateway.context_tokens if gateway is not None else None
    answer = config.max_tokens or (gateway.config.max_tokens if gateway is not None else 0)
    return plan_chunks(serialize_graph(graph, start=config.start, end=config.end), fitted_chunk_size(config, context, answer))


def endpoint_identity(gateway: LLMGateway) -> str:
    """Who answers: the gateway's endpoint identity (base URL; embedded GGUF hash + context size), as the response
    cache keys on it; for a gateway without one, the configured backend and base URL or model file."""
    identity = getattr(gateway, "endpoint", None)
    if isinstance(identity, str) and identity:
        return identity
    llm = gateway.config
    return f"{llm.backend}:{llm.base_url or llm.model_path or 'default'}"


def answer_settings(gateway: LLMGateway) -> str:
    """Canonical text of what, on the model side, determines answers: `ANSWER_FIELDS` of the gateway's config and
    its endpoint identity (part of the TOA and display hashes)."""
    fields = gateway.config.model_dump(mode="json", include=set(ANSWER_FIELDS))
    return json.dumps({"endpoint": endpoint_identity(gateway), **fields}, sort_keys=True)


def timeline_hash(chunks: list[Chunk], config: TOAConfig, profile: EventProfile, settings: str,
                  graph_hash: str) -> str:
    """sha256 over what determines the result: the format version, the graph's version, the chunk texts, config,
    profile, prompts and the model-side ``settings`` (`answer_settings`)."""
    digest = hashlib.sha256()
    parts = [TOA_FORMAT_VERSION, graph_hash, config.model_dump_json(), profile.model_dump_json(), settings,
             prompt_text("extract"), prompt_text("reask"), prompt_text("verify_imaging"), prompt_text("same_event"),
             *(c.text for c in chunks)]
    for part in parts:
        digest.update(json.dumps(part).encode())
    return digest.hexdigest()


async def build_timeline(graph: PatientGraph, gateway: LLMGateway, config: TOAConfig = TOAConfig()) -> PatientTimeline:
    """Run every TOA stage for one patient and return its timeline (events t0.., episodes, rejections, counts)."""
    profile = load_profile(config.profile)
    chunks = plan(graph, config, gateway)
    version = graph_version(graph)
    digest = timeline_hash(chunks, config, profile, answer_settings(gateway), version)
    extractions = await extract_all(gateway, graph, chunks, profile, max_tokens=config.max_tokens,
                                    max_events=config.max_events_per_chunk)
    proposed = [e for x in extractions for e in x.events]
    rejected = [r for x in extractions for r in x.rejected]
    events, merged = unify(proposed)
    candidates = added = failed = 0
    if config.safety_net:
        net = await radiology_safety_net(gateway, graph, profile, events, window_days=config.window_days,
                                         max_tokens=config.max_tokens, start=config.start, end=config.end)
        candidates, added, failed = len(net.checked), len(net.added), net.failed
        rejected.extend(net.rejected)
        if net.added:
            events, more = unify([*events, *net.added])
            merged += more
    pairs = ambiguous_pairs(events)
    judged_merges = 0
    if config.resolve_ambiguous and pairs:
        events, judged_merges, pairs = await resolve_ambiguous(gateway, graph, events, pairs,
                                                               max_pairs=config.max_judged_pairs, max_tokens=config.max_tokens)
        events, new_id = renumber_with_map(events)
        pairs = [(new_id[a], new_id[b]) for a, b in pairs]
    stats = ExtractionStats(
        chunks=len(chunks), failed_chunks=sum(x.error is not None for x in extractions),
        proposed_events=sum(x.proposed for x in extractions), kept_events=len(proposed),
        rejected_events=sum(1 for r in rejected if r.chunk is not None and r.reason != UNKNOWN_REFS_DROPPED),
        dropped_refs=sum(len(r.dropped_refs) for r in rejected), merged_groups=merged,
        safety_net_candidates=candidates, safety_net_added=added, safety_net_failed=failed, judged_merges=judged_merges,
        reasked_events=sum(x.reasked for x in extractions),
        misdated_events=sum(1 for r in rejected if r.problem == "misdated"))
    return PatientTimeline(subject_id=graph.subject_id, profile=profile.name, content_hash=digest, events=tuple(events),
                           episodes=tuple(synthesize_episodes(events, profile)), rejected=tuple(rejected), stats=stats,
                           ambiguous_pairs=tuple(pairs), graph_hash=version,
                           ref_fingerprints=ref_fingerprints(graph, (r for e in events for r in e.source_event_refs)))
