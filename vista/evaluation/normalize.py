"""Text normalization for the deterministic scorers: words, dates written in the usual ways, metastatic sites.

>>> normalize_text("  Adenocarcinoma, NOS. ")
'adenocarcinoma nos'
>>> find_dates("Diagnosed 2012-11-21; biopsy Nov 15, 2012 and 03/2013")
[(datetime.date(2012, 11, 21), 'day'), (datetime.date(2012, 11, 15), 'day'), (datetime.date(2013, 3, 1), 'month')]
>>> split_sites("Osseous mets (T5), hepatic lesions and mediastinal lymph nodes")
('bone', 'liver', 'mediastinal node')
>>> split_sites("None documented"), says_nothing("Not documented."), says_nothing("No")
((), True, True)
"""

from __future__ import annotations

import datetime as dt
import re

NOT_DOCUMENTED = "Not documented"

_MONTHS = {name: k for k, names in enumerate((
    ("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",), ("jun", "june"),
    ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"), ("nov", "november"),
    ("dec", "december")), start=1) for name in names}
_MONTH = r"(?P<mon>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DATE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(?P<y>(?:19|20)\d\d)-(?P<m>\d{1,2})-(?P<d>\d{1,2})\b"), "day"),
    (re.compile(r"\b(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>(?:19|20)\d\d)\b"), "day"),
    (re.compile(_MONTH + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>(?:19|20)\d\d)\b", re.I), "day"),
    (re.compile(r"\b(?P<d>\d{1,2})\s+" + _MONTH + r",?\s+(?P<y>(?:19|20)\d\d)\b", re.I), "day"),
    (re.compile(r"\b(?P<y>(?:19|20)\d\d)-(?P<m>\d{1,2})\b(?!-\d)"), "month"),
    (re.compile(r"\b(?P<m>\d{1,2})/(?P<y>(?:19|20)\d\d)\b"), "month"),
    (re.compile(r"\b" + _MONTH + r"\s+(?P<y>(?:19|20)\d\d)\b", re.I), "month"),
)
_SILENT = frozenset({"not documented", "none", "no", "none documented", "not available", "not found", "unknown",
                     "not known",
                     "no metastases", "no distant metastases", "no metastasis", "not applicable", "n a", "na",
                     "no evidence of metastatic disease", "no metastatic disease", "none known"})
_SITE_NOISE = frozenset({"metastases", "metastasis", "metastatic", "mets", "met", "disease", "involvement", "lesions",
                         "lesion", "to", "the", "of", "distant", "deposits", "deposit", "spread", "lymph", "and",
                         "documented", "positive", "multiple", "sites", "site"})
_SITE_WORDS = {"osseous": "bone", "bones": "bone", "skeletal": "bone", "skeleton": "bone", "spine": "bone",
               "spinal": "bone", "hepatic": "liver", "cerebral": "brain", "intracranial": "brain", "adrenals": "adrenal",
               "pulmonary": "lung", "lungs": "lung", "pleural": "pleura", "nodal": "node", "nodes": "node",
               "peritoneal": "peritoneum"}
_SPLIT = re.compile(r"\s*(?:[,;/&+\n]|\band\b)\s*", re.I)
_PARENS = re.compile(r"\([^)]*\)")


def normalize_text(text: str) -> str:
    """Lower case, punctuation to spaces, whitespace collapsed."""
    return " ".join(re.sub(r"[^\w%]+", " ", text.lower()).split())


def says_nothing(value: str) -> bool:
    """True when an answer says the record is silent or names nothing ('Not documented', 'None', 'No', ...)."""
    return normalize_text(value) in _SILENT


def find_dates(text: str) -> list[tuple[dt.date, str]]:
    """The dates written in ``text`` in reading order, each with its precision ('day' or 'month', the 1st then)."""
    found: list[tuple[int, int, dt.date, str]] = []
    taken: list[tuple[int, int]] = []
    for pattern, precision in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            if any(a < match.end() and match.start() < b for a, b in taken):
                continue
            parts = match.groupdict()
            month = _MONTHS[parts["mon"].lower()] if parts.get("mon") else int(parts["m"])
            try:
                day = dt.date(int(parts["y"]), month, int(parts["d"]) if parts.get("d") else 1)
            except ValueError:
                continue
            taken.append((match.start(), match.end()))
            found.append((match.start(), match.end(), day, precision))
    return [(day, precision) for _, _, day, precision in sorted(found, key=lambda f: f[0])]


def normalize_site(site: str) -> str:
    """One metastatic site reduced to its organ words (e.g. 'Bone metastases' → 'bone')."""
    words = [_SITE_WORDS.get(w, w) for w in normalize_text(_PARENS.sub(" ", site)).split()]
    return " ".join(w for w in words if w not in _SITE_NOISE and not w.isdigit())


def split_sites(value: str) -> tuple[str, ...]:
    """The normalized, sorted, de-duplicated sites an answer lists (() when it says there are none)."""
    if says_nothing(value):
        return ()
    items = {normalize_site(part) for part in _SPLIT.split(_PARENS.sub(" ", value)) if part.strip()}
    items.discard("")
    if items <= {"none", "no", "not"}:
        return ()
    return tuple(sorted(items))
