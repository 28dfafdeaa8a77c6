"""Reading a batch of patients inside an actor, one bad subject never costing the others.

The dataset is opened in quarantine mode: a subject with bad rows is left out of the batch and its reason kept;
a subject missing from the dataset fails the batch read, which is then retried subject by subject, so each
problem comes back as a `MedsDataError` naming its file, subject and field, attached to that subject only.
Reads are serialized per actor (a `MedsDataset` caches shard footers and layouts; one reader at a time keeps
those caches consistent when Ray Data runs two batches in one actor).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

from vista.meds.errors import MedsDataError, MedsSubjectNotFoundError
from vista.meds.reader import MedsDataset
from vista.records import CodeCatalog, PatientRecord

Loaded = PatientRecord | MedsDataError


class PatientLoader:
    """Targeted reads of the requested subjects from a MEDS dataset (parquet statistics pick the shards)."""

    def __init__(self, root: str | Path):
        self.dataset = MedsDataset(root, on_error="quarantine")
        self._lock = threading.Lock()
        self._catalog: CodeCatalog | None = None

    def catalog(self) -> CodeCatalog:
        with self._lock:
            if self._catalog is None:
                self._catalog = self.dataset.code_catalog()
            return self._catalog

    def load(self, subject_ids: Iterable[int]) -> dict[int, Loaded]:
        """Each requested subject's record, or the `MedsDataError` saying why it cannot be read."""
        wanted = sorted(set(int(s) for s in subject_ids))
        out: dict[int, Loaded] = {}
        with self._lock:
            try:
                out.update(self.dataset.load_patients(wanted))
            except MedsSubjectNotFoundError:
                for sid in wanted:
                    try:
                        out.update(self.dataset.load_patients([sid]))
                    except MedsDataError as exc:
                        out[sid] = exc
            except MedsDataError as exc:  # quarantine mode reports per subject; anything left stops the whole batch
                for sid in wanted:
                    out.setdefault(sid, exc)
            for sid in wanted:
                if sid not in out:
                    out[sid] = self._quarantine_error(sid)
        return out

    def _quarantine_error(self, subject_id: int) -> MedsDataError:
        entries = [e for e in self.dataset.quarantine.entries if e.subject_id == subject_id]
        if not entries:
            return MedsDataError(str(self.dataset.root), "subject left out of the read without a recorded reason",
                                 subject_id=subject_id)
        first = entries[0]
        more = f" (+{len(entries) - 1} more problem(s))" if len(entries) > 1 else ""
        return MedsDataError(first.file, first.problem + more, subject_id=subject_id, field=first.field)
