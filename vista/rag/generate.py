"""Build one patient's tumor-board display (method "rag") by BM25 retrieval over raw record chunks.

Matched to VISTA's generator (`vista.display.generate`): the same variables, the same groups of variables per call,
the same structured demographics (`vista.display.STRUCTURED_VARIABLES`), the same answer fields and bounds and the
same model; only the model's input differs: instead of the TOA timeline, the top-k record chunks retrieved for
each variable of the group (query: the variable's label and question), merged best ranks first up to the context
budget and shown in date order. Every cited ``e<k>`` is checked: ids the call was not shown or the MEDS Graph lacks
are dropped and counted (as VISTA drops timeline ids a call was not shown); a value left with none is shown as "Not
found" (origin "uncited", counted), as VISTA's is. A failed call leaves its variables "Not available" (origin
"failed", with the error); the display is
still produced. No summary note is written (the note is not scored).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from vista.display import STRUCTURED_VARIABLES, TumorBoardDisplay, VariableSpec, VariableValue, load_variables
from vista.display.agent_prompts import variable_lines
from vista.display.answers import NOT_AVAILABLE, field_name
from vista.display.citations import cited_value
from vista.display.generate import plan_groups
from vista.display.hashing import ANSWER_FIELDS
from vista.graph import PatientGraph
from vista.shared.llm import LLMGateway, LLMResult, Message, system, user
from vista.shared.prompts import PromptFolder
from vista.rag.answers import RagAnswer, rag_answer_model
from vista.rag.chunks import RecordChunk
from vista.rag.config import RagConfig
from vista.rag.errors import RagError
from vista.rag.index import Hit, RagIndex, build_index
from vista.shared.tokens import count_tokens_batch
from vista.toa.serialize import serialize_text

log = logging.getLogger(__name__)

RAG_AGENT = "rag_variables"
RAG_FORMAT_VERSION = "vista.rag/2"
PROMPT_NAMES = ("variables",)
PROMPT_ROOM_TOKENS = 1200
"""Tokens kept free in the context window for the system prompt, the variable list and the message framing."""


PROMPTS = PromptFolder("vista.rag")
prompt_text = PROMPTS.text
"""The packaged prompt ``vista/rag/prompts/<name>.txt``."""


@dataclass(frozen=True, slots=True)
class RagStats:
    """What a RAG build did besides the display: index size and time, retrieval time, calls, dropped ids."""

    chunks: int
    index_seconds: float
    queries: int
    retrieval_seconds: float
    groups: int
    failed_calls: int
    dropped_refs: int
    passages_sent: int
    passages_left_out: int


@dataclass(frozen=True, slots=True)
class RagBuild:
    display: TumorBoardDisplay
    stats: RagStats


def context_room(config: RagConfig, gateway: LLMGateway) -> int | None:
    """Tokens of retrieved text one call may carry: the config's, else the model's window minus answer and prompt
    room (None when the window is unknown: every retrieved chunk is sent)."""
    if config.max_context_tokens is not None:
        return config.max_context_tokens
    window = gateway.context_tokens
    if window is None:
        return None
    answer = config.max_tokens or gateway.config.max_tokens
    room = window - answer - PROMPT_ROOM_TOKENS
    if room < 100:
        raise RagError(f"a {window}-token context leaves {room} tokens for retrieved text after a {answer}-token "
                       "answer; lower RagConfig.chunk_size or max_tokens, or set max_context_tokens")
    return room


def select_passages(ranked: Sequence[Sequence[Hit]], sizes: Sequence[int], budget: int | None) -> tuple[list[RecordChunk], int]:
    """Merge the variables' ranked hits round-robin by rank (each chunk once) while they fit ``budget`` tokens
    (``sizes`` = tokens per chunk index); returns the chunks in record order and how many were left out.

    >>> import datetime as dt
    >>> c = [RecordChunk(i, f"t{i}", frozenset(), dt.date(2020, 1, 1), dt.date(2020, 1, 1)) for i in range(4)]
    >>> a, b = [Hit(c[3], 2.0, 0), Hit(c[1], 1.0, 1)], [Hit(c[3], 1.5, 0), Hit(c[0], 1.0, 1), Hit(c[2], .5, 2)]
    >>> chosen, left = select_passages([a, b], [10] * 4, 30)
    >>> [x.index for x in chosen], left
    ([0, 1, 3], 1)
    """
    chosen: dict[int, RecordChunk] = {}
    used, left_out = 0, set()
    depth = max((len(hits) for hits in ranked), default=0)
    for rank in range(depth):
        for hits in ranked:
            if rank >= len(hits) or hits[rank].chunk.index in chosen:
                continue
            chunk = hits[rank].chunk
            size = sizes[chunk.index]
            if budget is not None and used + size > budget:
                left_out.add(chunk.index)
                continue
            chosen[chunk.index] = chunk
            used += size
    left_out -= set(chosen)
    return sorted(chosen.values(), key=lambda c: c.index), len(left_out)


def excerpts_text(chunks: Sequence[RecordChunk]) -> str:
    """The retrieved chunks as the user message shows them (numbered, with their date range)."""
    if not chunks:
        return "No part of the record matched these variables."
    parts = [f"--- excerpt {k}: {c.start.isoformat()} to {c.end.isoformat()} ---\n{c.text}" for k, c in enumerate(chunks, 1)]
    return "".join(parts)


def rag_messages(specs: Sequence[VariableSpec], chunks: Sequence[RecordChunk]) -> list[Message]:
    """System prompt (task, rules, the group's variables) and the excerpts as the user message."""
    return [system(prompt_text("variables").format(variables=variable_lines(specs))),
            user("Record excerpts (retrieved by keyword search):\n" + excerpts_text(chunks))]


def query_text(spec: VariableSpec) -> str:
    """The BM25 query of a variable: its label and question."""
    return f"{spec.label}. {spec.question}"


def rag_hash(graph: PatientGraph, gateway: LLMGateway, config: RagConfig,
             specs: Sequence[VariableSpec] | None = None) -> str:
    """sha256 over what a RAG display depends on: the serialized record, variables, prompts, config, model settings."""
    specs = tuple(specs) if specs is not None else load_variables(config.variables)
    structured = [STRUCTURED_VARIABLES[s.key](graph).model_dump_json() for s in specs if s.key in STRUCTURED_VARIABLES]
    parts = [RAG_FORMAT_VERSION, hashlib.sha256(serialize_text(graph).encode()).hexdigest(),
             *(spec.model_dump_json() for spec in specs), *(prompt_text(name) for name in PROMPT_NAMES),
             config.model_dump_json(exclude={"variables"}), gateway.config.model_dump_json(include=set(ANSWER_FIELDS)),
             *structured]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(json.dumps(part).encode())
    return digest.hexdigest()


def _failed(specs: Sequence[VariableSpec], why: str) -> list[VariableValue]:
    return [VariableValue(key=s.key, value=NOT_AVAILABLE, origin="failed", error=why) for s in specs]


@dataclass(frozen=True, slots=True)
class _GroupOutcome:
    values: list[VariableValue]
    result: LLMResult
    dropped_refs: int
    passages: int
    left_out: int


class _RagRun:
    """One patient's build: the index, the chunk sizes, the budget and the gateway."""

    def __init__(self, graph: PatientGraph, index: RagIndex, gateway: LLMGateway, config: RagConfig):
        self.graph, self.index, self.gateway, self.config = graph, index, gateway, config
        self.sizes = count_tokens_batch([c.text for c in index.chunks]).tolist()
        self.budget = context_room(config, gateway)
        self.retrieval_seconds = 0.0
        self.queries = 0

    def retrieve(self, spec: VariableSpec) -> list[Hit]:
        began = time.perf_counter()
        hits = self.index.search(query_text(spec), self.config.top_k)
        self.retrieval_seconds += time.perf_counter() - began
        self.queries += 1
        return hits

    def cited(self, refs: Sequence[str], shown: frozenset[str]) -> tuple[tuple[str, ...], int]:
        """The cited ids that the call was shown and the graph holds (in order, once), and how many were dropped."""
        kept = tuple(dict.fromkeys(r for r in refs if r in shown and self.graph.has_event(r)))
        return kept, len(set(refs)) - len(kept)

    async def ask(self, specs: tuple[VariableSpec, ...]) -> _GroupOutcome:
        chunks, left_out = select_passages([self.retrieve(s) for s in specs], self.sizes, self.budget)
        model = rag_answer_model(specs, value_max_chars=self.config.value_max_chars, max_cited=self.config.max_cited)
        result = await self.gateway.complete(rag_messages(specs, chunks), model, agent=RAG_AGENT,
                                             patient_id=self.graph.subject_id, max_tokens=self.config.max_tokens)
        if not result.ok:
            assert result.error is not None
            why = f"{result.error.kind.value}: {result.error.message}"[:500]
            return _GroupOutcome(_failed(specs, why), result, 0, len(chunks), left_out)
        answer: RagAnswer = result.output
        shown = frozenset().union(*(c.event_ids for c in chunks))
        values, dropped = [], 0
        for k, spec in enumerate(specs):
            item = getattr(answer, field_name(k))
            refs, lost = self.cited(item.source_refs, shown)
            dropped += lost
            values.append(cited_value(spec.key, item.value, (), refs, asked=item.source_refs, what="passages"))
        return _GroupOutcome(values, result, dropped, len(chunks), left_out)


async def generate_rag_display(graph: PatientGraph, gateway: LLMGateway, config: RagConfig = RagConfig(),
                               variables: Sequence[VariableSpec] | None = None, index: RagIndex | None = None) -> RagBuild:
    """The RAG display of one patient and what the build did (``index``: a prebuilt `build_index` to reuse)."""
    specs = tuple(variables) if variables is not None else load_variables(config.variables)
    index = index if index is not None else build_index(graph, config)
    if index.subject_id != graph.subject_id:
        raise RagError(f"index of patient {index.subject_id} given for patient {graph.subject_id}")
    run = _RagRun(graph, index, gateway, config)
    structured = {s.key: STRUCTURED_VARIABLES[s.key](graph) for s in specs if s.key in STRUCTURED_VARIABLES}
    groups = plan_groups(specs, config.group_size)  # VISTA's own grouping: the same variables share a call
    outcomes = await asyncio.gather(*(run.ask(group) for group in groups))
    by_key = dict(structured)
    for outcome in outcomes:
        by_key.update((v.key, v) for v in outcome.values)
    results = [o.result for o in outcomes]
    made = [r.usage for r in results if not r.usage.cache_hit]
    display = TumorBoardDisplay(
        subject_id=graph.subject_id, method="rag", model=gateway.config.model, content_hash=rag_hash(graph, gateway, config, specs),
        values=tuple(by_key[s.key] for s in specs), calls=len(made),
        uncited_values=sum(by_key[s.key].uncited for s in specs),
        prompt_tokens=sum(u.prompt_tokens for u in made), completion_tokens=sum(u.completion_tokens for u in made))
    failed = sum(not r.ok for r in results)
    if failed:
        log.warning("RAG display of patient %s: %d of %d calls failed", graph.subject_id, failed, len(results))
    stats = RagStats(chunks=len(index), index_seconds=index.build_seconds, queries=run.queries,
                     retrieval_seconds=run.retrieval_seconds, groups=len(groups), failed_calls=failed,
                     dropped_refs=sum(o.dropped_refs for o in outcomes), passages_sent=sum(o.passages for o in outcomes),
                     passages_left_out=sum(o.left_out for o in outcomes))
    return RagBuild(display, stats)


async def build_rag_display(graph: PatientGraph, gateway: LLMGateway, config: RagConfig = RagConfig(),
                            variables: Sequence[VariableSpec] | None = None) -> TumorBoardDisplay:
    """The tumor-board display of one patient by the BM25 RAG baseline (method "rag"); see `generate_rag_display`."""
    return (await generate_rag_display(graph, gateway, config, variables)).display
