"""The tokens that describe a patient for similarity, read from the cohort's node index (one long frame
``subject_id, token, count``), so a whole cohort is profiled with a few polars group-bys.

Token families (`Family`):

* ``codes`` — the codes of the patient's events (``LOINC//718-7``), counted;
* ``ancestors`` — the graph's code nodes that are not event codes: the catalog parents the MEDS Graph links with
  ``is_a`` edges (``ICD10CM//C34`` above ``ICD10CM//C34.1``), so two patients coded at different depths still share;
* ``transitions`` — ``A>B`` for consecutive codes in the order the patient first met them, kept to specific codes
  (present in at most ``specific_share`` of the cohort), a cheap signature of the timeline's course (work-up →
  diagnosis → regimen → next regimen);
* ``values`` — ``code=value`` for events with a short categorical text value (a stage group ``IIIB``, a ``T3``):
  needs the patients' graphs (the index holds no text), so it is read only when asked for;
* ``episodes`` — from the patient's TOA timeline when the store holds a current one: ``<episode>:<event type>`` and
  ``<episode>:<code>`` for every timeline event and the codes of the graph events it cites, ``<episode>`` being
  ``baseline``, ``diagnosis``, ``line<n>`` or ``post_oncological`` — so "carboplatin in line 1" and "carboplatin in
  line 2" differ. Patients without a current timeline get no such tokens (stale ones are logged).

>>> from datetime import datetime
>>> index = pl.DataFrame({"subject_id": [1, 1, 1, 1], "node_id": ["e0", "e1", "e2", "code:X//1"],
...     "type": ["event", "event", "event", "code"], "code": ["X//1", "X//2", "X//1", "X//0"],
...     "time": [datetime(2020, 1, d) for d in (1, 2, 3, 3)]})
>>> code_tokens(index.lazy()).sort("token").collect().rows()
[(1, 'X//1', 2), (1, 'X//2', 1)]
>>> ancestor_tokens(index.lazy()).collect().rows()
[(1, 'X//0', 1)]
>>> transition_tokens(index.lazy(), specific_share=1.0).collect().rows()
[(1, 'X//1>X//2', 1)]
"""

from __future__ import annotations

import logging
from enum import StrEnum

import polars as pl

from vista.patient_search.source import CohortSource
from vista.toa.model import Episode, EpisodeKind, PatientTimeline

logger = logging.getLogger(__name__)

TOKEN_SCHEMA = {"subject_id": pl.Int64, "token": pl.String, "count": pl.UInt32}
VALUE_MAX_CHARS = 24
"""Longest event text value read as a categorical value (longer ones are free text)."""
SOURCE_TYPES = ("event", "encounter", "note")
"""Node types that are source events (an encounter with a row is the ``ENCOUNTER//`` event)."""


class Family(StrEnum):
    CODES = "codes"
    ANCESTORS = "ancestors"
    TRANSITIONS = "transitions"
    VALUES = "values"
    EPISODES = "episodes"


def _events(index: pl.LazyFrame) -> pl.LazyFrame:
    return index.filter(pl.col("type").is_in(SOURCE_TYPES) & pl.col("code").is_not_null())


def code_tokens(index: pl.LazyFrame) -> pl.LazyFrame:
    """``codes`` tokens: each event code of each patient with its number of events."""
    return (_events(index).group_by("subject_id", "code").agg(pl.len().cast(pl.UInt32).alias("count"))
            .rename({"code": "token"}).select(list(TOKEN_SCHEMA)))


def ancestor_tokens(index: pl.LazyFrame) -> pl.LazyFrame:
    """``ancestors`` tokens: code nodes of a patient's graph that no event of the patient carries (count 1)."""
    nodes = index.filter((pl.col("type") == "code") & pl.col("code").is_not_null()).select("subject_id", "code")
    own = _events(index).select("subject_id", "code").unique()
    return (nodes.join(own, on=["subject_id", "code"], how="anti").unique()
            .select("subject_id", pl.col("code").alias("token"), pl.lit(1, pl.UInt32).alias("count")))


def transition_tokens(index: pl.LazyFrame, *, specific_share: float = 0.5) -> pl.LazyFrame:
    """``transitions`` tokens: ``A>B`` for consecutive first occurrences of specific codes (see the module doc)."""
    events = _events(index).filter(pl.col("time").is_not_null())
    patients = index.select(pl.col("subject_id").n_unique()).collect().item() or 1
    df = events.select("subject_id", "code").unique().group_by("code").agg(pl.len().alias("df"))
    first = (events.group_by("subject_id", "code").agg(pl.col("time").min())
             .join(df, on="code").filter(pl.col("df") <= specific_share * patients)
             .sort("subject_id", "time", "code"))
    return (first.with_columns(pl.col("code").shift(1).over("subject_id").alias("previous"))
            .filter(pl.col("previous").is_not_null())
            .group_by("subject_id", (pl.col("previous") + ">" + pl.col("code")).alias("token"))
            .agg(pl.len().cast(pl.UInt32).alias("count")).select(list(TOKEN_SCHEMA)))


def value_tokens(source: CohortSource, subject_ids: list[int]) -> pl.LazyFrame:
    """``values`` tokens, read from the graphs of ``subject_ids`` (events whose text value is short)."""
    rows: dict[str, list] = {"subject_id": [], "token": []}
    for sid in subject_ids:
        for item in source.texts(sid):
            text = " ".join(item.text.split())
            if item.code and not item.code.startswith("NOTE//") and 0 < len(text) <= VALUE_MAX_CHARS:
                rows["subject_id"].append(sid)
                rows["token"].append(f"{item.code}={text}")
    frame = pl.DataFrame(rows, schema={"subject_id": pl.Int64, "token": pl.String})
    return frame.group_by("subject_id", "token").agg(pl.len().cast(pl.UInt32).alias("count")).lazy()


def episode_label(episode: Episode) -> str:
    """``line<n>`` for a treatment line, else the episode kind."""
    return f"line{episode.line}" if episode.kind is EpisodeKind.TREATMENT_LINE else episode.kind.value


def timeline_tokens(timelines: dict[int, PatientTimeline], codes: pl.DataFrame) -> pl.DataFrame:
    """``episodes`` tokens of ``timelines``; ``codes`` maps ``subject_id, node_id`` to the cited events' ``code``.

    >>> import datetime as dt
    >>> from vista.toa.model import ExtractionStats, TimelineEvent
    >>> day = dt.date(2021, 3, 1)
    >>> t = PatientTimeline(subject_id=7, profile="thoracic", content_hash="h", rejected=(),
    ...     stats=ExtractionStats(chunks=1, failed_chunks=0, proposed_events=1, kept_events=1, rejected_events=0,
    ...                           dropped_refs=0, merged_groups=0),
    ...     events=(TimelineEvent(event_id="t1", date=day, type="treatment", subtype="chemotherapy",
    ...                           description="carboplatin", source_event_refs=("e5",)),),
    ...     episodes=(Episode(episode_id="p1", kind=EpisodeKind.TREATMENT_LINE, line=1, start=day, end=day,
    ...                       event_ids=("t1",)),))
    >>> codes = pl.DataFrame({"subject_id": [7], "node_id": ["e5"], "code": ["RXNORM//40048"]})
    >>> timeline_tokens({7: t}, codes).sort("token").rows()
    [(7, 'line1:RXNORM//40048', 1), (7, 'line1:treatment', 1)]
    """
    lookup = {(s, n): c for s, n, c in codes.select("subject_id", "node_id", "code").iter_rows() if c is not None}
    rows: dict[tuple[int, str], int] = {}
    for sid, timeline in timelines.items():
        events = {e.event_id: e for e in timeline.events}
        for episode in timeline.episodes:
            label = episode_label(episode)
            for event_id in episode.event_ids:
                event = events.get(event_id)
                if event is None:
                    continue
                found = [f"{label}:{event.type}"]
                found += [f"{label}:{lookup[(sid, ref)]}" for ref in event.source_event_refs if (sid, ref) in lookup]
                for token in found:
                    rows[(sid, token)] = rows.get((sid, token), 0) + 1
    return pl.DataFrame([(s, t, n) for (s, t), n in rows.items()], schema=TOKEN_SCHEMA, orient="row")


def episode_tokens(source: CohortSource) -> pl.LazyFrame:
    """``episodes`` tokens of the store's current TOA timelines (a warning names the stale ones left out)."""
    timelines, stale = source.timelines()
    if stale:
        logger.warning("%s: %d stored timeline(s) were built from another version of the graph and are left out of "
                       "the episode tokens (subjects %s); rebuild them with `vista timeline`", source.root,
                       len(stale), ", ".join(map(str, stale[:10])))
    if not timelines:
        return pl.DataFrame(schema=TOKEN_SCHEMA).lazy()
    codes = source.scan_index().filter(pl.col("subject_id").is_in(sorted(timelines))).select(
        "subject_id", "node_id", "code").collect()
    return timeline_tokens(timelines, codes).lazy()


def patient_tokens(source: CohortSource, families: tuple[Family, ...]) -> pl.DataFrame:
    """The long token frame of every stored patient for the chosen families (tokens prefixed by family)."""
    index = source.index.lazy()
    parts = []
    for family in families:
        if family is Family.CODES:
            part = code_tokens(index)
        elif family is Family.ANCESTORS:
            part = ancestor_tokens(index)
        elif family is Family.TRANSITIONS:
            part = transition_tokens(index)
        elif family is Family.VALUES:
            part = value_tokens(source, source.subject_ids())
        else:
            part = episode_tokens(source)
        parts.append(part.with_columns((pl.lit(f"{family.value}:") + pl.col("token")).alias("token")))
    if not parts:
        return pl.DataFrame(schema=TOKEN_SCHEMA)
    return pl.concat([p.select(list(TOKEN_SCHEMA)) for p in parts]).collect()
