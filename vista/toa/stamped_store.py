"""`StampedStore`: one JSON document per patient next to the graphs (``<root>/<folder>/<subject>.json``), stamped
with the version of the graph it was made from — the common part of `vista.toa.TimelineStore` and
`vista.display.DisplayStore`.

It reads a document with one-line errors naming the file, the subject and the field, refuses one made from another
version of the patient's graph when given that graph (`vista.toa.refs.check_provenance`), and writes atomically.
What makes a stored document current (its content hash) is each store's own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar, Generic, Protocol, Self, TypeVar

from pydantic import ValidationError

from vista.shared.atomic import atomic_write_text
from vista.graph import PatientGraph
from vista.toa.refs import check_provenance


class Stamped(Protocol):
    """A stored per-patient document: whose it is, and the graph version and digests of the refs it cites."""

    subject_id: int
    graph_hash: str | None
    ref_fingerprints: dict[str, str]

    @classmethod
    def model_validate_json(cls, data: bytes) -> Self: ...

    def model_dump_json(self, *, indent: int | None = None) -> str: ...


Doc = TypeVar("Doc", bound=Stamped)


class StampedStore(Generic[Doc]):
    """Documents of a graph store's patients under ``<root>/<folder>/`` (subclasses name the folder, the document
    model, its error and its noun: ``timeline``, ``display``; the rebuilding command is ``vista <noun>``)."""

    folder: ClassVar[str]
    model: type[Doc]
    error: ClassVar[type[Exception]]
    noun: ClassVar[str]

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.directory = self.root / self.folder

    def path_of(self, subject_id: int) -> Path:
        return self.directory / f"{subject_id}.json"

    def rebuild_hint(self, subject_id: int) -> str:
        """The command that builds a current document for ``subject_id`` (named in refusals)."""
        return f"rebuild it with `vista {self.noun} --store {self.root} --subject {subject_id}`"

    def load(self, subject_id: int, graph: PatientGraph | None = None) -> Doc:
        """The stored document of ``subject_id`` (``error`` naming the file, subject and field when unusable).

        With ``graph`` (the patient's current graph) its refs are checked to have been made against that graph:
        `vista.toa.errors.StaleProvenanceError` otherwise. Every reader that resolves the document's refs passes it.
        """
        path = self.path_of(subject_id)
        try:
            doc = self.model.model_validate_json(path.read_bytes())
        except OSError as exc:
            raise self.error(f"{path}: cannot read the {self.noun} of subject {subject_id} ({exc.strerror})") from None
        except ValidationError as exc:
            first = exc.errors(include_input=False)[0]
            field = ".".join(str(p) for p in first["loc"]) or "<root>"
            raise self.error(f"{path}: subject {subject_id}: field {field}: {first['msg']}") from None
        if doc.subject_id != subject_id:
            raise self.error(f"{path}: subject {subject_id}: field subject_id holds {doc.subject_id}")
        if graph is not None:
            if graph.subject_id != subject_id:
                raise ValueError(f"the graph is of subject {graph.subject_id}, not {subject_id}")
            check_provenance(graph, what=f"the stored {self.noun} {path}", graph_hash=doc.graph_hash,
                             fingerprints=doc.ref_fingerprints, rebuild=self.rebuild_hint(subject_id))
        return doc

    def save(self, doc: Doc) -> Path:
        """Write atomically (a temp file in the same directory, then rename)."""
        return atomic_write_text(self.path_of(doc.subject_id), doc.model_dump_json(indent=1))
