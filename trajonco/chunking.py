"""Time-aware chunking (TrajOnco §4.3.2): XML documents of at most ``max_tokens`` tokens, split between timestamps.

Each chunk is a complete document — the patient root with its demographics around a run of timestamp
blocks — and its full token count (cl100k_base, the exact string sent) is at most ``max_tokens``. Blocks
are packed greedily in time order. A timestamp that alone exceeds the budget is split between its events
(every piece keeps ``<events time=…>`` and says ``part="k/n"``); one event larger than the budget (a long
note) is split by its text as a last resort, each piece keeping the event id. Concatenating the chunks'
events gives every event once, in order — a text-split event appears in each of its consecutive pieces.

>>> from datetime import datetime
>>> from vista.shared.timeline import EventElement, Modality, PatientRoot, TimeBlock, Timeline
>>> def lab(i): return EventElement(f"e{i}", Modality.LAB, (("code", "LOINC//718-7"),), "Hemoglobin")
>>> tl = Timeline(PatientRoot(7), tuple(TimeBlock(datetime(2020, 1, d), (lab(d),)) for d in range(1, 6)))
>>> chunks = chunk_timeline(tl, max_tokens=100)
>>> [(c.event_ids, c.n_tokens) for c in chunks]
[(('e1', 'e2'), 93), (('e3', 'e4'), 93), (('e5',), 51)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from vista.shared.errors import UserError
from vista.shared.timeline import EventElement, TimeBlock, Timeline, join_timelines
from vista.shared.timeline.model import BLOCK_CLOSE, block_open, group_close, group_open
from vista.shared.tokens import count_tokens, count_tokens_batch

DEFAULT_MAX_TOKENS = 16_000

_WORST_PART = (999_999, 999_999)
"""Budgets for pieces are computed with this ``part`` attribute, never shorter in tokens than a real "k/n"."""


_TEXT_SPLIT_SLACK = 16
"""Tokens left free when cutting a text, so the cut piece usually fits once escaped without a retry."""


class ChunkingError(ValueError, UserError):
    """The token budget cannot hold the patient root or the smallest piece of an event."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One LLM-sized piece of a timeline: a standalone XML document and what it covers."""

    index: int
    xml: str
    n_tokens: int  # token count of ``xml`` (cl100k_base), re-encoded and checked when verify=True
    event_ids: tuple[str, ...]
    start_time: datetime | None  # None only for the single chunk of a timeline without events
    end_time: datetime | None


def _word_cut(text: str, start: int, end: int) -> int:
    """``end`` moved back just after the last space or newline of the previous 200 characters, if there is one."""
    if end >= len(text):
        return len(text)
    low = max(start + 1, end - 200)
    space = max(text.rfind(" ", low, end), text.rfind("\n", low, end))
    return space + 1 if space >= low else end


def _split_text(element: EventElement, room: int, element_tokens: int, subject_id: int, first_room: int) -> tuple[list[EventElement], bool]:
    """Pieces of ``element``'s text, each element (with the worst-case part attribute) at most ``room`` tokens.

    The first piece is sized for ``first_room`` (what is left in the piece being filled) when that can hold
    some text; the flag says whether it was. Cuts are placed by the text's characters-per-token ratio, at a
    word boundary, then checked by an exact count of the piece's element and moved back in proportion to
    any overshoot (escaping inflates tokens).
    """
    text = element.content

    def cost(piece: str) -> int:
        return count_tokens(element.with_content(piece, _WORST_PART).xml)

    wrapper = cost("")
    smallest = wrapper + _TEXT_SPLIT_SLACK + 8  # room for at least one escaped character in every piece
    if room < smallest:
        raise ChunkingError(
            f"subject {subject_id}: max_tokens too small to split event {element.event_id}: a piece of it needs at least "
            f"{smallest} tokens, {room} are left after the patient root and the timestamp tags"
        )
    continues = first_room >= smallest + 64  # not worth continuing a piece for a few dozen tokens of text
    chars_per_token = len(text) / max(1, element_tokens - wrapper)
    pieces: list[str] = []
    start = 0
    while start < len(text):
        limit = first_room if continues and not pieces else room
        target = limit - wrapper - _TEXT_SPLIT_SLACK
        end = min(len(text), start + max(1, int(target * chars_per_token)))
        while True:
            cut = _word_cut(text, start, end)
            used = cost(text[start:cut])
            if used <= limit:
                break
            shrunk = start + int((cut - start) * target / (used - wrapper))
            end = max(start + 1, min(shrunk, cut - 1))
        pieces.append(text[start:cut])
        start = cut
    return [element.with_content(p, (k + 1, len(pieces))) for k, p in enumerate(pieces)], continues


def _split_block(block: TimeBlock, budget: int, subject_id: int) -> list[TimeBlock]:
    """Pieces of an oversized timestamp, each block text at most ``budget`` tokens and labelled part k/n."""
    time_overhead = count_tokens(block_open(block.time, _WORST_PART)) + count_tokens(BLOCK_CLOSE)
    group_overhead = {m: count_tokens(group_open(m)) + count_tokens(group_close(m)) for m in {e.modality for e in block.elements}}
    element_tokens = count_tokens_batch([e.xml for e in block.elements])
    pieces: list[list[EventElement]] = []
    current: list[EventElement] = []
    used = time_overhead
    for element, n in zip(block.elements, element_tokens.tolist()):
        group = group_overhead[element.modality]
        opens_group = not current or current[-1].modality is not element.modality
        if used + n + (group if opens_group else 0) <= budget:
            current.append(element)
            used += n + (group if opens_group else 0)
            continue
        if time_overhead + group + n <= budget:  # fits in a piece of its own
            if current:
                pieces.append(current)
            current, used = [element], time_overhead + group + n
            continue
        # Last resort: split the event's text; its first piece may fill what is left of the current piece.
        room = budget - time_overhead - group
        first_room = budget - used - (group if opens_group else 0) if current else room
        texts, continues = _split_text(element, room, n, subject_id, first_room)
        if continues:
            current.append(texts[0])
        else:
            if current:
                pieces.append(current)
            current = [texts[0]]
        for text_piece in texts[1:]:
            pieces.append(current)
            current = [text_piece]
        if len(current) == 1:  # the last text piece opened a new piece
            used = time_overhead + group + count_tokens(current[-1].xml)
        else:  # the whole text went into the current piece (not expected: the event is larger than a piece)
            used += (group if opens_group else 0) + count_tokens(current[-1].xml)
    if current:
        pieces.append(current)
    return [TimeBlock(block.time, tuple(p), (k + 1, len(pieces))) for k, p in enumerate(pieces)]


def _packed_blocks(timeline: Timeline, budget: int) -> list[tuple[list[TimeBlock], int]]:
    """Greedy packing of whole blocks into chunks of at most ``budget`` block tokens; oversized blocks are split.

    Returns each chunk's blocks with their token total.
    """
    chunks: list[tuple[list[TimeBlock], int]] = []
    current: list[TimeBlock] = []
    used = 0
    for block, n in zip(timeline.blocks, timeline.block_tokens().tolist()):
        if n <= budget:
            if used + n > budget:
                chunks.append((current, used))
                current, used = [], 0
            current.append(block)
            used += n
            continue
        if current:
            chunks.append((current, used))
        pieces = _split_block(block, budget, timeline.root.subject_id)
        piece_tokens = count_tokens_batch([p.text for p in pieces]).tolist()
        chunks.extend(([p], n) for p, n in zip(pieces[:-1], piece_tokens))
        current, used = [pieces[-1]], piece_tokens[-1]
    if current:
        chunks.append((current, used))
    return chunks


def chunk_timeline(timeline: Timeline, max_tokens: int = DEFAULT_MAX_TOKENS, *, verify: bool = True) -> list[Chunk]:
    """Time-aware chunks of ``timeline``, each a full XML document of at most ``max_tokens`` tokens.

    ``n_tokens`` is the sum of the pieces' counts, exact because no cl100k token crosses a ``>\n`` | ``<``
    boundary; ``verify`` re-encodes every chunk and raises `ChunkingError` if that ever disagrees (one
    more pass over the text, ~0.1 s per 256k tokens). A timeline without events gives one chunk holding
    only the patient root. Raises `ChunkingError` when ``max_tokens`` cannot hold the root (or the smallest
    piece of an event).
    """
    subject_id = timeline.root.subject_id
    header, footer = timeline.header, timeline.footer
    frame = count_tokens(header) + count_tokens(footer)
    budget = max_tokens - frame
    if budget <= 0:
        raise ChunkingError(f"subject {subject_id}: max_tokens={max_tokens} cannot hold the patient root ({frame} tokens)")
    packed = _packed_blocks(timeline, budget) or [([], 0)]
    xmls = [header + "".join(b.text for b in blocks) + footer for blocks, _ in packed]
    counts = [frame + used for _, used in packed]
    too_big = [(i, n) for i, n in enumerate(counts) if n > max_tokens]
    if too_big:  # cannot happen unless the packing arithmetic is wrong: fail loudly rather than overflow a context
        raise ChunkingError(f"subject {subject_id}: chunk {too_big[0][0]} needs {too_big[0][1]} tokens > max_tokens={max_tokens}")
    if verify:
        real = count_tokens_batch(xmls).tolist()
        if real != counts:
            bad = next(i for i, (a, b) in enumerate(zip(real, counts)) if a != b)
            raise ChunkingError(
                f"subject {subject_id}: chunk {bad} has {real[bad]} tokens, expected {counts[bad]} (token counts not additive)"
            )
    chunks = []
    for index, ((blocks, _), xml, n) in enumerate(zip(packed, xmls, counts)):
        event_ids = tuple(i for b in blocks for i in b.event_ids)
        start, end = (blocks[0].time, blocks[-1].time) if blocks else (None, None)
        chunks.append(Chunk(index, xml, n, event_ids, start, end))
    return chunks


def rechunk(documents: Sequence[str], max_tokens: int = DEFAULT_MAX_TOKENS) -> list[Chunk]:
    """Chunk again the concatenation of timeline documents of one patient (e.g. chunks filtered by preprocessors).

    Pieces of a timestamp or of a long event that the first chunking split are joined before re-chunking.
    For filtering by event id without XML in between, use ``chunk_timeline(timeline.select(ids))``.
    """
    return chunk_timeline(join_timelines(documents), max_tokens)


__all__ = ["DEFAULT_MAX_TOKENS", "Chunk", "ChunkingError", "chunk_timeline", "rechunk"]
