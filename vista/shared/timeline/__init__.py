"""XML patient timelines: render a `PatientRecord` into typed timestamp blocks, truncate, parse back.

`render_timeline` is the entry point; `Timeline.blocks` lets the chunker work without re-parsing.
"""

from vista.shared.timeline.errors import TimelineError
from vista.shared.timeline.modality import DEFAULT_MODALITIES, Modality, ModalityTable
from vista.shared.timeline.model import EventElement, PatientRoot, TimeBlock, Timeline
from vista.shared.timeline.parse import join_timelines, merge_blocks, parse_timeline
from vista.shared.timeline.render import render_timeline
from vista.shared.timeline.truncate import truncate_left

__all__ = [
    "DEFAULT_MODALITIES",
    "EventElement",
    "Modality",
    "ModalityTable",
    "PatientRoot",
    "TimeBlock",
    "Timeline",
    "TimelineError",
    "join_timelines",
    "merge_blocks",
    "parse_timeline",
    "render_timeline",
    "truncate_left",
]
