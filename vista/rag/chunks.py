"""Chunks of the raw serialized record for BM25 retrieval: windows of whole lines with an overlap.

The record is `vista.toa.serialize.serialize_graph`'s text (encounter headers, then one line per event led by its
``[e<k>]`` id), so every retrieved line still names the MEDS Graph event it came from. Windows are packed greedily
with whole lines up to ``chunk_size``; the next window starts with the last whole lines of the previous one that
fit in ``overlap``. A line longer than a chunk is cut at spaces into pieces that each keep its ``[e<k>]`` prefix.
A chunk's size is the sum of its lines' sizes (each counted with its newline), in characters or tiktoken tokens.

>>> lines = ["=== encounter e0 AMB 2020-01-05 ===", "[e1] 2020-01-05 a b c", "[e2] 2020-01-05 d e f",
...          "[e3] 2020-01-05 g h i"]
>>> chunks = window_lines(lines, [dt.date(2020, 1, 5)] * 4, RagConfig(chunk_size=50, chunk_unit="chars", overlap=25))
>>> [c.text.splitlines() for c in chunks]
[['=== encounter e0 AMB 2020-01-05 ==='], ['[e1] 2020-01-05 a b c', '[e2] 2020-01-05 d e f'], ['[e2] 2020-01-05 d e f', '[e3] 2020-01-05 g h i']]
>>> sorted(chunks[2].event_ids)
['e2', 'e3']
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

from vista.graph import PatientGraph
from vista.rag.config import RagConfig
from vista.rag.errors import RagError
from vista.shared.tokens import count_tokens_batch
from vista.toa.serialize import serialize_graph

_REF = re.compile(r"^\[(e\d+)\] ")
_REFS = re.compile(r"\[(e\d+)\]")


@dataclass(frozen=True, slots=True)
class RecordChunk:
    """One retrievable piece of the record: its text, the graph event ids it shows and the dates it spans."""

    index: int
    text: str
    event_ids: frozenset[str]
    start: dt.date
    end: dt.date


def _sizes(lines: Sequence[str], unit: str) -> list[int]:
    if unit == "chars":
        return [len(line) + 1 for line in lines]
    return count_tokens_batch([line + "\n" for line in lines]).tolist()


def _cut(line: str, limit: int, unit: str) -> list[str]:
    """Pieces of an over-long line, each within ``limit`` and led by the line's ``[e<k>]`` prefix.

    Word sizes are counted once (each with its separating space) and added up; a piece whose real size still
    exceeds the limit (a single huge word) is cut by characters, a character being at most one token.
    """
    match = _REF.match(line)
    prefix = match.group(0) if match else ""
    words = line[len(prefix):].split(" ")
    word_sizes = _sizes([" " + word for word in words], unit)
    room = limit - _sizes([prefix], unit)[0] - 1  # the piece's newline
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for word, word_size in zip(words, word_sizes):
        if current and size + word_size > room:
            pieces.append(prefix + " ".join(current))
            current, size = [], 0
        current.append(word)
        size += word_size
    if current:
        pieces.append(prefix + " ".join(current))
    out = []
    step = max(1, room)
    for piece in pieces:
        while _sizes([piece], unit)[0] > limit and len(piece) > len(prefix) + step:
            out.append(piece[: len(prefix) + step])
            piece = prefix + piece[len(prefix) + step:]
        out.append(piece)
    return out


def window_lines(lines: Sequence[str], days: Sequence[dt.date], config: RagConfig) -> list[RecordChunk]:
    """Overlapping windows of whole ``lines`` (``days[i]`` is line i's encounter date) under ``config``'s size."""
    if len(lines) != len(days):
        raise ValueError(f"{len(lines)} lines but {len(days)} dates")
    limit, unit = config.chunk_size, config.chunk_unit
    flat_lines: list[str] = []
    flat_days: list[dt.date] = []
    sizes = _sizes(lines, unit) if lines else []
    for line, day, size in zip(lines, days, sizes):
        pieces = _cut(line, limit, unit) if size > limit else [line]
        flat_lines.extend(pieces)
        flat_days.extend([day] * len(pieces))
    sizes = _sizes(flat_lines, unit) if flat_lines else []
    chunks: list[RecordChunk] = []
    start = 0
    while start < len(flat_lines):
        end, total = start, 0
        while end < len(flat_lines) and (end == start or total + sizes[end] <= limit):
            total += sizes[end]
            end += 1
        text = "\n".join(flat_lines[start:end]) + "\n"
        chunks.append(RecordChunk(len(chunks), text, frozenset(_REFS.findall(text)), flat_days[start], flat_days[end - 1]))
        if end >= len(flat_lines):
            break
        back, kept = end, 0
        while back - 1 > start and kept + sizes[back - 1] <= config.overlap:
            back -= 1
            kept += sizes[back]
        start = back
    return chunks


def record_lines(graph: PatientGraph) -> tuple[list[str], list[dt.date]]:
    """The serialized record's lines (encounter headers included) and each line's encounter date."""
    lines: list[str] = []
    days: list[dt.date] = []
    for block in serialize_graph(graph):
        lines.extend(block.lines)
        days.extend([block.start] * len(block.lines))
    return lines, days


def chunk_record(graph: PatientGraph, config: RagConfig = RagConfig()) -> list[RecordChunk]:
    """The patient's serialized record cut into overlapping chunks (`RagError` naming the patient when it is empty)."""
    lines, days = record_lines(graph)
    if not lines:
        raise RagError(f"patient {graph.subject_id} ({graph.info.source}): no clinical events to index")
    return window_lines(lines, days, config)
