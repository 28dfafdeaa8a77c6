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

from vista.shared.coding import load_profile
from vista.shared.meds.errors import MedsDataError, MedsSubjectNotFoundError
from vista.shared.meds.reader import MedsDataset
from vista.shared.records import CodeCatalog, PatientRecord

Loaded = PatientRecord | MedsDataError


class PatientLoader:
    """Targeted reads of the requested subjects from a MEDS dataset (parquet statistics pick the shards)."""

    def __init__(self, root: str | Path, profile: str | None = None):
        self.dataset = MedsDataset(root, on_error="quarantine", profile=profile)
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
        """Why the read left ``subject_id`` out: file, field, row and problem (`MedsDataset.why_left_out`)."""
        return self.dataset.why_left_out(subject_id)


def coding_profile_for(dataset: Path, given: str | None) -> str:
    """The coding profile a job's actors read ``dataset`` with: ``given`` (a built-in name, or a TOML path made
    absolute so every node finds it), else the one detected here, once, on the driver (its coverage warnings are
    logged here too, not once per actor)."""
    if given is None:
        return MedsDataset(dataset, on_error="quarantine").profile.name  # bad shards are reported later, per task
    profile = load_profile(given)  # a bad name or file fails here, in one line
    return str(Path(given).resolve()) if given.endswith(".toml") or "/" in given else profile.name
