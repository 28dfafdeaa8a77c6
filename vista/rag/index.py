"""`RagIndex`: a BM25 index (bm25s) over one patient's record chunks, queried with a variable's question.

Records and queries go through the same bm25s `Tokenizer` (lower-case words of 2+ characters, bm25s' English
stopwords, the Snowball English stemmer from PyStemmer — all offline); query words the record never uses are
ignored, and chunks scoring 0 are not returned, so an unrelated question retrieves nothing rather than noise.

>>> from vista.rag.chunks import RecordChunk
>>> import datetime as dt
>>> day = dt.date(2020, 1, 1)
>>> texts = ["[e1] 2020-01-01 Hemoglobin = 11.2 g/dL", "[e2] 2020-01-01 NOTE//PATHOLOGY adenocarcinoma of the lung",
...          "[e3] 2020-01-01 NOTE//PROGRESS ECOG performance status 2"]
>>> index = RagIndex.build(7, [RecordChunk(i, t, frozenset(), day, day) for i, t in enumerate(texts)])
>>> [(hit.chunk.index, hit.rank) for hit in index.search("Histology: adenocarcinoma or squamous?", k=2)]
[(1, 0)]
>>> index.search("What is the weather?", k=2)
[]
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import bm25s
import numpy as np
from bm25s.tokenization import Tokenizer

from vista.graph import PatientGraph
from vista.rag.chunks import RecordChunk, chunk_record
from vista.rag.config import RagConfig
from vista.rag.errors import RagError


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved chunk, its BM25 score and its rank (0 = best) for the query."""

    chunk: RecordChunk
    score: float
    rank: int


def _stemmer(name: Literal["english", "none"]):
    if name == "none":
        return None
    try:
        import Stemmer  # PyStemmer: Snowball stemmers compiled in, no data files
    except ImportError:
        raise RagError("RagConfig.stemmer='english' needs the PyStemmer package (pip install PyStemmer); "
                       "or set stemmer='none'") from None
    return Stemmer.Stemmer(name)


class RagIndex:
    """The BM25 index of one patient's chunks, with the tokenizer that must also read the queries."""

    def __init__(self, subject_id: int, chunks: Sequence[RecordChunk], tokenizer: Tokenizer, retriever: bm25s.BM25,
                 build_seconds: float):
        self.subject_id = subject_id
        self.chunks = tuple(chunks)
        self._tokenizer = tokenizer
        self._retriever = retriever
        self.build_seconds = build_seconds

    @classmethod
    def build(cls, subject_id: int, chunks: Sequence[RecordChunk], *, stemmer: Literal["english", "none"] = "english",
              stopwords: Literal["en", "none"] = "en") -> RagIndex:
        """Tokenize and index ``chunks`` (a `RagError` naming the patient when there are none)."""
        if not chunks:
            raise RagError(f"patient {subject_id}: nothing to index (no record chunks)")
        began = time.perf_counter()
        tokenizer = Tokenizer(stemmer=_stemmer(stemmer), stopwords=[] if stopwords == "none" else stopwords)
        ids = tokenizer.tokenize([c.text for c in chunks], return_as="ids", show_progress=False)
        retriever = bm25s.BM25()
        retriever.index(ids, show_progress=False)
        return cls(subject_id, chunks, tokenizer, retriever, time.perf_counter() - began)

    def __len__(self) -> int:
        return len(self.chunks)

    def search(self, query: str, k: int) -> list[Hit]:
        """The at most ``k`` chunks scoring above 0 for ``query``, best first."""
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        tokens = self._tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)
        if not any(tokens[0]):  # no query word occurs in the record (unknown words map to the empty token 0)
            return []
        docs, scores = self._retriever.retrieve(tokens, k=min(k, len(self.chunks)), show_progress=False, n_threads=1)
        found = [(int(d), float(s)) for d, s in zip(np.asarray(docs)[0], np.asarray(scores)[0]) if s > 0]
        return [Hit(self.chunks[d], s, rank) for rank, (d, s) in enumerate(found)]


def build_index(graph: PatientGraph, config: RagConfig = RagConfig()) -> RagIndex:
    """Chunk the patient's serialized record (`chunk_record`) and index the chunks with BM25."""
    return RagIndex.build(graph.subject_id, chunk_record(graph, config), stemmer=config.stemmer,
                          stopwords=config.stopwords)
