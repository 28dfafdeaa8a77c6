"""A board packet: the cohort page and chosen patients' pages written as self-contained HTML files, with no server.

Each file inlines the style sheet and the page script (a few kilobytes) and carries a Content-Security-Policy that
allows exactly those two by their SHA-256 hashes, so the pages open from disk, offline, and a note holding
``<script>`` shows as text and could not run. Citation panels are in the page (no request needed); what needs the
server — the question box, fetching a source event that is not cited on the page — is left out. Files are private
(0600, in a 0700 directory), as the store's are.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from vista.serve.app import asset, templates
from vista.serve.cohort import Cohort, CohortPage, StoreManifest
from vista.serve.patient import patient_page
from vista.serve.urls import PacketUrls
from vista.shared.atomic import atomic_write_text
from vista.shared.errors import CommandLineError


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def packet_csp(js: str, css: str) -> str:
    """The policy of an exported page: only the inlined script and style (by hash), images from data: URLs."""
    return (f"default-src 'none'; script-src {_hash(js)}; style-src {_hash(css)}; img-src data:; "
            "base-uri 'none'; form-action 'none'")


def export_packet(root: str | os.PathLike, out: str | os.PathLike, subjects: Sequence[int], *,
                  similar_k: int = 8) -> list[Path]:
    """Write ``out/index.html`` and ``out/patient-<sid>.html`` for ``subjects`` of the store at ``root``; the
    written files. A subject the store has no graph for is a `CommandLineError` naming it (nothing is written)."""
    store = StoreManifest(root)
    unknown = [s for s in subjects if s not in store]
    if unknown:
        raise CommandLineError(f"--subjects: {root} has no graph for subject(s) {', '.join(map(str, unknown))}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)
    env = templates()
    js, css = asset("app.js"), asset("app.css")
    common = {"exported": True, "js": js, "css": css, "csp": packet_csp(js, css), "urls": PacketUrls(frozenset(subjects))}
    neighbours = _similar(root, subjects, similar_k)
    written = []
    for sid in subjects:
        view = patient_page(root, store.load(sid))
        html = env.get_template("patient.html.j2").render(p=view, similar=neighbours.get(sid, []), questions=False,
                                                          token="", **common)
        written.append(_write(out / f"patient-{sid}.html", html))
    cohort = Cohort(root, store)
    cheap = dict(zip(cohort.subjects.tolist(), cohort.cheap_status(cohort.subjects).tolist()))
    rows = tuple(cohort.row(sid, cheap[sid]) for sid in subjects)
    page = CohortPage(rows, len(rows), len(rows), 1, 1, None, None)
    html = env.get_template("cohort.html.j2").render(cohort=page, query="", status="", statuses=(),
                                                     store=f"board packet of {Path(root).name}", **common)
    written.insert(0, _write(out / "index.html", html))
    return written


def _similar(root, subjects: Sequence[int], k: int) -> dict[int, list]:
    from vista.patient_search import open_source
    from vista.patient_search.similarity import similarity_matrix

    matrix = similarity_matrix(open_source(root))
    return {sid: matrix.neighbours(sid, k) for sid in subjects}


def _write(path: Path, html: str) -> Path:
    atomic_write_text(path, html)
    os.chmod(path, 0o600)
    return path
