"""What checking a dataset found: the quarantine report (dropped subjects and files) and the validation summary.

>>> from vista.shared.meds.errors import IssueKind, IssueScope, MedsIssue
>>> report = QuarantineReport()
>>> report.add(MedsIssue(IssueKind.VALUE, IssueScope.SUBJECT, "data/0.parquet", "1 null code (first at row 4)",
...                      subject_id=7, field="code"))
True
>>> report.add(MedsIssue(IssueKind.FILE, IssueScope.FILE, "data/1.parquet", "file is empty (0 bytes)"))
True
>>> report.subjects, report.files
([7], ['data/1.parquet'])
>>> report.to_table().column("field").to_pylist()
['code', None]
>>> print(DatasetWarning(kind="duplicates", file="data/0.parquet", count=3,
...                      problem="3 exact duplicate rows in 1 subject (e.g. subject 7: row 12 repeats row 11)"))
data/0.parquet: 3 exact duplicate rows in 1 subject (e.g. subject 7: row 12 repeats row 11)
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from vista.shared.atomic import atomic_path, atomic_write_text
from vista.shared.errors import describe_location
from vista.shared.meds.errors import IssueScope, MedsIssue

OnError = Literal["raise", "quarantine"]

QUARANTINE_SCHEMA = pa.schema([
    pa.field("subject_id", pa.int64(), nullable=True),
    pa.field("file", pa.string(), nullable=False),
    pa.field("field", pa.string(), nullable=True),
    pa.field("problem", pa.string(), nullable=False),
    pa.field("row", pa.int64(), nullable=True),
])
"""Columns of the quarantine parquet table: ``subject_id`` is null when the whole file was dropped; ``row`` is the
first offending row of the file when the problem has one."""


class QuarantineEntry(BaseModel):
    """One reason something was dropped: a subject (``subject_id`` set) or a whole file (``subject_id`` None)."""

    model_config = ConfigDict(frozen=True)

    subject_id: int | None = Field(description="the dropped subject; None when the whole file was dropped")
    file: str = Field(description="data file, relative to the dataset root")
    field: str | None = Field(description="the column at fault, when there is one")
    problem: str = Field(description="what is wrong, without patient data")
    row: int | None = Field(None, description="first offending row inside the file, when the problem has one")

    def __str__(self) -> str:
        return describe_location(self.file, self.subject_id, self.field, self.problem)


class QuarantineReport(BaseModel):
    """Everything quarantine mode dropped, with the reasons; written as JSON or as a parquet table."""

    entries: list[QuarantineEntry] = Field(default_factory=list, description="one entry per problem, in order found")
    _seen: set[QuarantineEntry] = PrivateAttr(default_factory=set)

    def model_post_init(self, context: object, /) -> None:
        self._seen = set(self.entries)

    def add(self, issue: MedsIssue) -> bool:
        """Record ``issue`` (file-level issues drop their file, the others their subject); False if already recorded."""
        entry = QuarantineEntry(
            subject_id=None if issue.scope is IssueScope.FILE else issue.subject_id,
            file=issue.file, field=issue.field, problem=issue.problem, row=issue.row,
        )
        if entry in self._seen:
            return False
        self._seen.add(entry)
        self.entries.append(entry)
        return True

    @property
    def subjects(self) -> list[int]:
        """Dropped subjects, sorted."""
        return sorted({e.subject_id for e in self.entries if e.subject_id is not None})

    @property
    def files(self) -> list[str]:
        """Dropped files, sorted."""
        return sorted({e.file for e in self.entries if e.subject_id is None})

    def __len__(self) -> int:
        return len(self.entries)

    def to_table(self) -> pa.Table:
        """The entries as an arrow table with `QUARANTINE_SCHEMA`."""
        columns = {name: [getattr(e, name) for e in self.entries] for name in QUARANTINE_SCHEMA.names}
        return pa.table(columns, schema=QUARANTINE_SCHEMA)

    def write_json(self, path: Path) -> None:
        atomic_write_text(path, self.model_dump_json(indent=2) + "\n")

    def write_parquet(self, path: Path) -> None:
        with atomic_path(path) as tmp:
            pq.write_table(self.to_table(), tmp)

    def write(self, path: Path) -> None:
        """Write the report as a parquet table when ``path`` ends in ``.parquet``, else as JSON."""
        if path.suffix.lower() == ".parquet":
            self.write_parquet(path)
        else:
            self.write_json(path)

    @classmethod
    def read_json(cls, path: Path) -> QuarantineReport:
        return cls.model_validate_json(path.read_text(encoding="utf-8"))


WarningKind = Literal["duplicates", "splits", "metadata"]


class DatasetWarning(BaseModel):
    """Something legal in MEDS but probably wrong, which drops nothing: exact duplicate rows, a subject splits file
    that disagrees with the data, a missing metadata file. ``subject_id``/``row`` locate an example when there is one."""

    model_config = ConfigDict(frozen=True)

    kind: WarningKind = Field(description="duplicates | splits | metadata")
    file: str = Field(description="the file concerned, relative to the dataset root")
    problem: str = Field(description="what was found, with counts and examples")
    count: int = Field(0, description="how many rows or subjects are concerned (0: not countable)")
    subject_id: int | None = Field(None, description="the subject of the example, when there is one")
    row: int | None = Field(None, description="the file row of the example, when there is one")

    def __str__(self) -> str:
        return f"{self.file}: {self.problem}"


class ValidationReport(BaseModel):
    """The result of checking a whole dataset (see `vista.shared.meds.validation.validate_dataset`)."""

    root: str = Field(description="dataset root as given")
    on_error: OnError = Field(description="'raise' stops at the first problem; 'quarantine' drops and goes on")
    now: datetime = Field(description="times after this were reported as impossible")
    files_checked: int = Field(description="data files looked at")
    files_quarantined: int = Field(description="data files dropped as a whole")
    subjects_checked: int = Field(description="distinct subjects in the files that could be read")
    subjects_quarantined: int = Field(description="subjects dropped")
    rows_checked: int = Field(description="rows whose values were checked")
    elapsed_s: float = Field(description="wall-clock seconds for the whole check")
    quarantine: QuarantineReport = Field(description="what was dropped and why")
    warnings: list[DatasetWarning] = Field(default_factory=list, description="what looks wrong but drops nothing")

    @property
    def issues_found(self) -> int:
        return len(self.quarantine)

    @property
    def duplicate_rows(self) -> int:
        """Exact duplicate rows found (see `vista.shared.meds.duplicates`)."""
        return sum(w.count for w in self.warnings if w.kind == "duplicates")

    @property
    def clean(self) -> bool:
        """No problem and no warning."""
        return self.ok and not self.warnings

    @property
    def rows_per_second(self) -> float:
        return self.rows_checked / self.elapsed_s if self.elapsed_s > 0 else float("inf")

    @property
    def ok(self) -> bool:
        return self.issues_found == 0

    def __str__(self) -> str:
        verdict = "OK" if self.ok else f"{self.issues_found} problem{'' if self.issues_found == 1 else 's'} found"
        if self.warnings:
            verdict += f", {len(self.warnings)} warning{'' if len(self.warnings) == 1 else 's'}"
        lines = [
            f"MEDS dataset {self.root}: {verdict}",
            f"  checked {self.files_checked} files, {self.subjects_checked} subjects, {self.rows_checked} rows "
            f"in {self.elapsed_s:.2f} s ({self.rows_per_second / 1e6:.1f}M rows/s)",
        ]
        if not self.ok:
            files, subjects = len(self.quarantine.files), self.subjects_quarantined
            lines.append(f"  quarantined {files} file{'' if files == 1 else 's'} and {subjects} "
                         f"subject{'' if subjects == 1 else 's'}:")
            shown = self.quarantine.entries[:20]
            lines.extend(f"    {entry}" for entry in shown)
            if len(self.quarantine) > len(shown):
                lines.append(f"    ... and {len(self.quarantine) - len(shown)} more")
        if self.warnings:
            lines.append("  warnings:")
            lines.extend(f"    {warning}" for warning in self.warnings)
        return "\n".join(lines)
