"""Where a page's links point: the server's routes, or the files of an exported board packet.

>>> ServerUrls(21, "0123456789ab").source_of("e7", "Histology: adenocarcinoma")
'/patient/21/source?v=0123456789ab&ids=e7&claim=Histology%3A+adenocarcinoma'
>>> ServerUrls().cohort_page("egfr", "display", page=2), PacketUrls(frozenset({21})).patient(21)
('/?q=egfr&status=display&page=2', 'patient-21.html')
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode


@dataclass(frozen=True, slots=True)
class ServerUrls:
    """Links of a served page (``subject`` and ``version``: the patient page's own, for its source links)."""

    subject: int | None = None
    version: str | None = None
    cohort: str = "/"

    def cohort_page(self, query: str, status: str, *, page: int | None = None, after: int | None = None) -> str:
        params = {k: v for k, v in (("q", query), ("status", status), ("page", page), ("after", after)) if v}
        return "/?" + urlencode(params)

    def patient(self, subject_id: int) -> str:
        return f"/patient/{subject_id}"

    def source_of(self, event_id: str, claim: str) -> str:
        """The source panel of one graph event, pinned to the page's graph version."""
        params = {"v": self.version or "", "ids": event_id, **({"claim": claim} if claim else {})}
        return f"/patient/{self.subject}/source?" + urlencode(params)

    def similar(self, subject_id: int) -> str:
        return f"/patient/{subject_id}/similar"

    def ask(self, subject_id: int) -> str:
        return f"/patient/{subject_id}/ask"


@dataclass(frozen=True, slots=True)
class PacketUrls:
    """Links of an exported board packet: its index and one file per patient; no server routes."""

    subjects: frozenset[int] = frozenset()
    cohort: str = "index.html"
    source_of: None = None

    def patient(self, subject_id: int) -> str | None:
        """The patient's file, or None when the packet does not hold it (no link)."""
        return f"patient-{subject_id}.html" if subject_id in self.subjects else None
