"""Encounter-aligned chunks: pack whole encounter blocks into chunks under a character or token budget.

An encounter is split only when it alone exceeds the budget; then its lines are cut at line boundaries, every
piece repeats the encounter header, and a single line longer than the budget is cut into pieces that each keep
the line's ``[e<k>]`` prefix (so no text ever loses its provenance).

>>> from vista.toa.serialize import EncounterBlock
>>> import datetime as dt
>>> b = lambda i, n: EncounterBlock(f"e{i}", dt.date(2020, 1, i + 1), (f"=== encounter e{i} ===",) + tuple(f"[e{i}{k}] x" for k in range(n)), ())
>>> [c.encounter_ids for c in plan_chunks([b(1, 2), b(2, 2), b(3, 9)], ChunkSize(limit=60))]
[('e1',), ('e2',), ('e3',), ('e3',), ('e3',)]
>>> [c.encounter_ids for c in plan_chunks([b(1, 2), b(2, 2)], ChunkSize(limit=100))]
[('e1', 'e2')]
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vista.shared.tokens import count_tokens
from vista.toa.errors import ChunkingError
from vista.toa.serialize import EncounterBlock

_REF = re.compile(r"^\[(e\d+)\]")
_REFS = re.compile(r"\[(e\d+)\]")


class ChunkSize(BaseModel):
    """How big a chunk may be: ``limit`` characters (the paper's default unit, ~120k) or tiktoken tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    limit: int = Field(default=120_000, ge=40, description="Maximum size of one chunk's text.")
    unit: Literal["chars", "tokens"] = Field(default="chars", description="What `limit` counts.")

    def size(self, text: str) -> int:
        return len(text) if self.unit == "chars" else count_tokens(text)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One sub-agent's input: serialized text, the encounters it covers and the event ids it shows."""

    index: int
    text: str
    encounter_ids: tuple[str, ...]
    event_ids: frozenset[str]
    start: dt.date
    end: dt.date


@dataclass(frozen=True, slots=True)
class _Piece:
    encounter_id: str
    day: dt.date
    text: str


def _cut_line(line: str, budget: ChunkSize, room: int) -> list[str]:
    """Cut an over-long line into pieces of at most ``room`` units, each keeping the line's ``[e<k>]`` prefix."""
    match = _REF.match(line)
    prefix = f"[{match.group(1)}] " if match else ""
    body = line[len(prefix):] if match and line.startswith(prefix) else line
    pieces, current = [], ""
    for word in body.split(" "):
        candidate = f"{current} {word}" if current else word
        if current and budget.size(prefix + candidate + "\n") > room:
            pieces.append(prefix + current)
            current = word
        else:
            current = candidate
    if current:
        pieces.append(prefix + current)
    out = []
    for piece in pieces:  # a single word longer than the room: cut by characters (chars ≥ tokens, so this fits)
        while budget.size(piece + "\n") > room and len(piece) > len(prefix) + 1:
            step = max(1, room - len(prefix) - 1)
            out.append(piece[: len(prefix) + step])
            piece = prefix + piece[len(prefix) + step:]
        out.append(piece)
    return out


def _split_block(block: EncounterBlock, budget: ChunkSize) -> list[_Piece]:
    header, *body = block.lines
    room = budget.limit - budget.size(header + "\n")
    if room < 20:
        raise ChunkingError(f"chunk budget {budget.limit} {budget.unit} cannot hold encounter {block.encounter_id}'s "
                            "header plus text; raise ChunkSize.limit")
    lines = [part for line in body for part in (_cut_line(line, budget, room) if budget.size(line + "\n") > room else [line])]
    pieces, current = [], []
    for line in lines:
        if current and budget.size("\n".join([header, *current, line]) + "\n") > budget.limit:
            pieces.append(current)
            current = []
        current.append(line)
    if current:
        pieces.append(current)
    return [_Piece(block.encounter_id, block.start, "\n".join([header, *p]) + "\n") for p in pieces]


def plan_chunks(blocks: list[EncounterBlock], budget: ChunkSize = ChunkSize()) -> list[Chunk]:
    """Greedy packing of encounter blocks (in order) into chunks of at most ``budget.limit``."""
    pieces: list[_Piece] = []
    for block in blocks:
        if budget.size(block.text) <= budget.limit:
            pieces.append(_Piece(block.encounter_id, block.start, block.text))
        else:
            pieces.extend(_split_block(block, budget))
    groups: list[list[_Piece]] = []
    size = 0
    for piece in pieces:
        piece_size = budget.size(piece.text)
        if groups and size + piece_size <= budget.limit:
            groups[-1].append(piece)
            size += piece_size
        else:
            groups.append([piece])
            size = piece_size
    chunks = []
    for i, group in enumerate(groups):
        text = "".join(p.text for p in group)
        encounters = tuple(dict.fromkeys(p.encounter_id for p in group))
        chunks.append(Chunk(i, text, encounters, frozenset(_REFS.findall(text)), group[0].day, group[-1].day))
    return chunks
