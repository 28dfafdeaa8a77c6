"""Left-truncation: keep the most recent whole timestamps that fit a token budget, and say so on the root.

The TrajOnco paper varies how much history the agents see (2k … 256k most recent tokens); this is that knob.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from vista.shared.timeline.errors import TimelineError
from vista.shared.timeline.model import Timeline
from vista.shared.tokens import count_tokens


def truncate_left(timeline: Timeline, max_tokens: int) -> Timeline:
    """``timeline`` if it fits in ``max_tokens``; else its newest whole timestamps that fit, root flagged.

    The root gains ``truncated_before`` (the first kept time) and ``dropped_events``; when not even the newest
    timestamp fits, no block is kept. Raises `TimelineError` when the root alone does not fit.
    """
    if max_tokens < 1:
        raise TimelineError(f"subject {timeline.root.subject_id}: max_tokens must be positive, got {max_tokens}")
    if timeline.n_tokens() <= max_tokens:
        return timeline
    blocks = timeline.blocks
    counts = timeline.block_tokens()
    suffix = np.concatenate([np.cumsum(counts[::-1])[::-1], [0]])  # suffix[s] = tokens of blocks[s:]
    events_before = np.concatenate([[0], np.cumsum([len(b.elements) for b in blocks])])
    footer = timeline.footer_tokens()
    unflagged_header = timeline.header_tokens()
    # suffix is non-increasing: the first start that fits with the unflagged header is a lower bound.
    lower = min(len(blocks), int(np.searchsorted(-suffix, -(max_tokens - unflagged_header - footer), side="left")))
    for start in range(lower, len(blocks) + 1):
        first_kept = blocks[start].time if start < len(blocks) else timeline.root.prediction_time
        root = replace(
            timeline.root,
            truncated_before=first_kept,
            dropped_events=timeline.root.dropped_events + int(events_before[start]),
        )
        if count_tokens(root.header) + int(suffix[start]) + footer <= max_tokens:
            return Timeline(root, blocks[start:], _block_tokens=counts[start:])
    raise TimelineError(
        f"subject {timeline.root.subject_id}: max_tokens={max_tokens} is smaller than the patient root alone "
        f"({count_tokens(root.header) + footer} tokens)"
    )
