"""`RagConfig`: every setting of the BM25 RAG baseline (all of them part of the RAG display's content hash).

The defaults are matched to VISTA's display generation (`vista.display.DisplayConfig`): the same variables per call,
the same answer bounds (value length, cited ids), and about the same amount of text per call (3 variables x top-4 x
250-token chunks = at most 3,000 tokens of excerpts, near the display's 12,000-character timeline view), so the two
methods differ only in what the model reads.

>>> RagConfig().chunk_limit
ChunkSize(limit=250, unit='tokens')
>>> RagConfig(chunk_size=2000, chunk_unit="chars", overlap=200).chunk_limit.unit
'chars'
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vista.toa.chunks import ChunkSize

DEFAULT_GROUP_SIZE = 3
"""Variables per LLM call; the same as `vista.display.DEFAULT_GROUP_SIZE` (checked by the tests) so calls match."""


class RagConfig(BaseModel):
    """How the raw record is chunked and indexed, how much is retrieved per variable, and the answer bounds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chunk_size: int = Field(default=250, ge=40, description="Largest chunk of the serialized record, in `chunk_unit`.")
    chunk_unit: Literal["tokens", "chars"] = Field(default="tokens", description="What chunk_size and overlap count "
                                                   "(tokens: tiktoken cl100k_base, as everywhere in the project).")
    overlap: int = Field(default=30, ge=0, description="Size of the whole lines a chunk repeats from the end of the "
                         "previous one (in `chunk_unit`), so a fact at a boundary is retrievable from either side.")
    top_k: int = Field(default=4, ge=1, le=100, description="Chunks retrieved per variable (the variable's label and "
                       "question are the BM25 query); chunks scoring 0 are never sent.")
    stemmer: Literal["english", "none"] = Field(default="english", description="Snowball stemmer (PyStemmer, offline) "
                                                "applied to records and queries, or none.")
    stopwords: Literal["en", "none"] = Field(default="en", description="bm25s' built-in English stopword list or none.")
    variables: Path | None = Field(default=None, description="Variable definitions TOML; None = the packaged list.")
    group_size: int = Field(default=DEFAULT_GROUP_SIZE, ge=1, le=32, description="Variables asked for in one LLM call "
                            "(their retrieved chunks are merged, best ranks first, up to the context budget).")
    max_context_tokens: int | None = Field(default=None, gt=0, description="Most tokens of retrieved text in one call; "
                                           "None fits the model: its context window minus the answer and prompt room.")
    value_max_chars: int = Field(default=200, ge=20, le=2000, description="Longest value a model may write (schema maxLength).")
    max_cited: int = Field(default=6, ge=1, le=50, description="Most graph event ids one value may cite (schema maxItems).")
    max_tokens: int | None = Field(default=None, gt=0, description="Answer token cap per call (None: the gateway's).")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> RagConfig:
        if self.overlap >= self.chunk_size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than chunk_size ({self.chunk_size})")
        return self

    @property
    def chunk_limit(self) -> ChunkSize:
        """The chunk size as the TOA layer's `ChunkSize` (same units, same token counter)."""
        return ChunkSize(limit=self.chunk_size, unit=self.chunk_unit)
