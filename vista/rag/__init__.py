"""The BM25 RAG baseline VISTA is compared with: retrieve raw record chunks per variable, ask the same model.

`build_index` cuts a patient's serialized MEDS Graph (`vista.toa.serialize`) into overlapping chunks of whole lines
(each led by its ``[e<k>]`` id) and indexes them with bm25s; `build_rag_display` asks the display's variables a
group at a time over the chunks retrieved for them and returns the same `TumorBoardDisplay` VISTA produces
(method "rag"), so `vista.evaluation` compares like with like.
"""

from vista.rag.chunks import RecordChunk, chunk_record, record_lines, window_lines
from vista.rag.config import DEFAULT_GROUP_SIZE, RagConfig
from vista.rag.errors import RagError
from vista.rag.generate import (
    RagBuild,
    RagStats,
    build_rag_display,
    context_room,
    generate_rag_display,
    query_text,
    rag_hash,
    rag_messages,
    select_passages,
)
from vista.rag.index import Hit, RagIndex, build_index

__all__ = [
    "DEFAULT_GROUP_SIZE", "Hit", "RagBuild", "RagConfig", "RagError", "RagIndex", "RagStats", "RecordChunk",
    "build_index", "build_rag_display", "chunk_record", "context_room", "generate_rag_display", "query_text",
    "rag_hash", "rag_messages", "record_lines", "select_passages", "window_lines",
]
