"""Open a report in headless Chromium and say what a reader would see broken: images that did not decode, empty
sections, a page wider than the window (a table cut instead of scrolling), a blank screenshot.

`open_report` runs Debian's ``chromium`` twice on a copy of the page: once with a small script appended that
records, after ``load``, each ``<img>``'s ``naturalWidth``, each ``<section>``'s content and the page width into
the DOM (read back with ``--dump-dom``), and once for a screenshot. No network: the report is self-contained.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

CHROMIUM = shutil.which("chromium")
REQUIRED = os.environ.get("REQUIRE_CHROMIUM") == "1"  # set by .ci/run, which installs it: a missing browser fails
SKIP_WITHOUT_CHROMIUM = pytest.mark.skipif(
    CHROMIUM is None and not REQUIRED,
    reason="Debian's chromium is not installed (apt-get install chromium; `make test` installs it when it can) — the "
           "report cannot be opened in a browser here")
WIDTH, HEIGHT = 1280, 16000

PROBE = """<script>
window.addEventListener('load', () => {
  const images = [...document.images].map(i => ({id: i.id, width: i.naturalWidth, complete: i.complete}));
  const sections = [...document.querySelectorAll('section')].map(s => ({
    id: s.id, parts: [...s.children].filter(e => e.tagName !== 'H2').length,
    text: s.innerText.replace(/\\s+/g, ' ').trim().length}));
  const cut = [...document.querySelectorAll('table')].filter(t => {
    const box = t.closest('.scroll');
    return t.offsetWidth > (box ? box.clientWidth : document.body.clientWidth) + 1 &&
           (!box || !['auto', 'scroll'].includes(getComputedStyle(box).overflowX));
  }).map(t => t.id);
  const tables = [...document.querySelectorAll('table')].map(t => ({id: t.id,
    head: [...t.querySelectorAll('thead th')].map(c => c.innerText.trim()),
    rows: [...t.querySelectorAll('tbody tr')].map(r => [...r.children].map(c => c.innerText.trim()))}));
  const captions = [...document.querySelectorAll('figcaption')].map(c => c.innerText.trim());
  const out = document.createElement('pre');
  out.id = 'browser-check';
  out.textContent = JSON.stringify({images, sections, cut, tables, captions, text: document.body.innerText,
                                    pageWidth: document.documentElement.scrollWidth,
                                    windowWidth: window.innerWidth});
  document.body.appendChild(out);
});
</script>"""


@dataclass(frozen=True)
class BrowserView:
    """What Chromium made of a report."""

    broken_images: list[str]
    image_count: int
    empty_sections: list[str]
    section_ids: list[str]
    cut_tables: list[str]
    page_width: int
    window_width: int
    screenshot: Path
    screenshot_distinct_colors: int
    small_numbers: list[str]
    legends: dict[str, list[str]]


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
               "--hide-scrollbars", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def open_report(html: Path, work: Path) -> BrowserView:
    """Render ``html`` in headless Chromium (profile and copies under ``work``) and report what it saw."""
    work.mkdir(parents=True, exist_ok=True)
    probed = work / "probed.html"
    probed.write_text(html.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    done = _chromium(["--virtual-time-budget=2000", "--dump-dom", probed.resolve().as_uri()], work / "profile")
    match = re.search(r'<pre id="browser-check">(.*?)</pre>', done.stdout, re.S)
    assert match, f"chromium did not run the probe (exit {done.returncode}): {done.stderr[-2000:]}"
    seen = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">"))
    shot = work / "screenshot.png"
    done = _chromium([f"--screenshot={shot}", html.resolve().as_uri()], work / "profile")
    assert shot.is_file(), f"chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    pixels = np.asarray(Image.open(shot).convert("RGB").resize((320, HEIGHT // 4)))
    colors = len(np.unique(pixels.reshape(-1, 3), axis=0))
    legends = {}
    for image_id, data in re.findall(r'<img id="([^"]+)"[^>]*src="data:image/png;base64,([^"]+)"', html.read_text(
            encoding="utf-8")):
        try:
            with Image.open(io.BytesIO(base64.b64decode(data))) as image:
                text = image.info.get("Legend", "")
        except OSError:  # a broken image: reported by broken_images
            text = ""
        legends[image_id] = [entry for entry in text.split(" | ") if entry]
    return BrowserView(
        broken_images=[i["id"] for i in seen["images"] if not i["complete"] or i["width"] == 0],
        image_count=len(seen["images"]),
        empty_sections=[s["id"] for s in seen["sections"] if s["parts"] == 0 or s["text"] < 20],
        section_ids=[s["id"] for s in seen["sections"]], cut_tables=seen["cut"], page_width=seen["pageWidth"],
        window_width=seen["windowWidth"], screenshot=shot, screenshot_distinct_colors=colors,
        small_numbers=small_numbers(seen["tables"], seen["text"]), legends=legends)


MIN_CASES = 10  # the report's threshold (baselines.metrics.MIN_CASES), restated so the check is independent of it
NUMBER = re.compile(r"(?<![\d.])[01]\.\d{3}(?!\d)|[+−-]\d\.\d{3}")
N_LABEL = re.compile(r"n=(\d+)/(\d+)")


def small_numbers(tables: list[dict], text: str) -> list[str]:
    """Numbers a reader sees that stand on fewer than `MIN_CASES` cases or controls: an AUROC/CI-looking number
    (three decimals) in an AUROC, AUPRC, difference or Brier column of a table row whose cases/controls are that
    small (a comparator's whole-cohort column stands on its own n), or beside an ``n=a/b`` that small anywhere in the
    page's text.

    >>> small_numbers([{"id": "t", "head": ["cases / controls", "AUROC"], "rows": [["2 / 2", "1.000 (1.000–1.000)"],
    ...                                                                             ["40 / 40", "0.700"]]}], "")
    ['t: 2 / 2: 1.000 (1.000–1.000)']
    >>> small_numbers([], "lung 1.000 (1.000–1.000) n=2/2; knn 0.71 n=43/43")
    ['lung 1.000 (1.000–1.000) n=2/2']
    >>> small_numbers([], "too few (n=2 cases, 2 controls)")
    []
    """
    found = []
    for table in tables:
        head = [h.lower() for h in table["head"]]
        pair = next((i for i, h in enumerate(head) if h in ("cases / controls", "cases/controls")), None)
        split = (head.index("cases"), head.index("controls")) if "cases" in head and "controls" in head else None
        for row in table["rows"]:
            try:
                if pair is not None and "/" in row[pair]:
                    counts = [int(v) for v in row[pair].split("/")]
                elif split is not None:
                    counts = [int(row[split[0]]), int(row[split[1]])]
                else:
                    continue
            except (ValueError, IndexError):
                continue
            if min(counts) >= MIN_CASES:
                continue
            metric = [i for i, h in enumerate(head) if any(w in h for w in ("auroc", "auprc", "difference", "brier"))
                      and "whole" not in h]
            found += [f"{table['id']}: {' / '.join(map(str, counts))}: {row[i]}" for i in metric
                      if i < len(row) and NUMBER.search(row[i]) and "too few" not in row[i]]
    for match in N_LABEL.finditer(text):
        if min(int(match.group(1)), int(match.group(2))) < MIN_CASES:
            before = text[max(0, match.start() - 40):match.start()].split(";")[-1].split("\n")[-1]
            if NUMBER.search(before):
                found.append((before.strip() + " " + match.group(0)).strip())
    return found


def check_figure_files(folder: Path) -> list[str]:
    """PNG files under ``folder`` that PIL cannot decode or that are blank (one colour)."""
    bad = []
    for path in sorted(folder.glob("*.png")):
        try:
            with Image.open(path) as image:
                image.load()
                if np.ptp(np.asarray(image.convert("L"))) == 0:
                    bad.append(f"{path.name}: blank")
        except OSError as exc:
            bad.append(f"{path.name}: {exc}")
    return bad
