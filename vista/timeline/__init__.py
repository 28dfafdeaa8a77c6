"""XML patient timelines: render a `PatientRecord` into typed timestamp blocks, truncate, parse back.

`render_timeline` is the entry point; `Timeline.blocks` lets the chunker work without re-parsing.
"""

from vista.timeline.errors import TimelineError
from vista.timeline.modality import DEFAULT_MODALITIES, Modality, ModalityTable
from vista.timeline.model import EventElement, PatientRoot, TimeBlock, Timeline
from vista.timeline.parse import join_timelines, merge_blocks, parse_timeline
from vista.timeline.render import render_timeline
from vista.timeline.truncate import truncate_left

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
