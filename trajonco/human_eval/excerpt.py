"""A timeline excerpt for reviewers: the timestamps the answers' events point to, or the latest ones.

A reviewer checks each event against the record. The whole timeline can be hundreds of thousands of tokens, so the
excerpt keeps the patient root, every timestamp block holding a cited element (``e<k>``) or falling on the date of
an answer's event, and -- when neither matches anything -- the latest ``fallback_blocks`` blocks, each gap marked
with how many timestamps were left out, cut at ``max_chars`` characters (the cut is marked too).

>>> from datetime import date, datetime
>>> from vista.shared.timeline import EventElement, Modality, PatientRoot, TimeBlock, Timeline
>>> blocks = tuple(TimeBlock(datetime(2020, 1, d), (EventElement(f"e{d}", Modality.LAB, (), f"lab {d}"),))
...                for d in range(1, 6))
>>> timeline = Timeline(PatientRoot(subject_id=1), blocks)
>>> text, note = timeline_excerpt(timeline, {"e2", "e4"})
>>> print(text.count("<events"), "omitted" in text, note)
2 True 2 of 5 timestamps: those holding the 2 cited elements.
>>> print(timeline_excerpt(timeline, set(), {date(2020, 1, 3)})[1])
1 of 5 timestamps: those on the 1 event date(s).
>>> print(timeline_excerpt(timeline, set(), fallback_blocks=2)[1])
2 of 5 timestamps: the latest ones (no element cited).
"""

from __future__ import annotations

from datetime import date

from vista.shared.timeline import Timeline


def _gap(n: int) -> str:
    return f"<!-- {n} timestamp(s) omitted -->\n"


def timeline_excerpt(timeline: Timeline, cited: set[str], dates: set[date] = frozenset(), *,
                     fallback_blocks: int = 12, max_chars: int = 20_000) -> tuple[str, str]:
    """(excerpt XML, a note saying what it holds)."""
    blocks = timeline.blocks
    keep = [i for i, b in enumerate(blocks) if cited & set(b.event_ids) or b.time.date() in dates]
    found = {e for b in blocks for e in b.event_ids} & cited
    if keep:
        reasons = ([f"holding the {len(found)} cited elements"] if found else []) + (
            [f"on the {len(dates)} event date(s)"] if dates else [])
        note = f"{len(keep)} of {len(blocks)} timestamps: those {' or '.join(reasons)}."
        if len(found) < len(cited):
            note += f" {len(cited) - len(found)} cited id(s) are not in the timeline."
    else:
        keep = list(range(max(0, len(blocks) - fallback_blocks), len(blocks)))
        note = (f"{len(keep)} of {len(blocks)} timestamps: the latest ones (no element cited"
                + (", no event date in the timeline)." if dates else ")."))
    parts, previous = [timeline.header], -1
    for i in keep:
        if i > previous + 1:
            parts.append(_gap(i - previous - 1))
        parts.append(blocks[i].text)
        previous = i
    if previous < len(blocks) - 1:
        parts.append(_gap(len(blocks) - 1 - previous))
    parts.append(timeline.footer)
    text = "".join(parts)
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n<!-- excerpt cut at {max_chars} characters -->\n"
        note += f" Cut at {max_chars} characters."
    return text, note
