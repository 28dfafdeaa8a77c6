"""Anticancer drugs named in a timeline event's wording, so episode synthesis can tell a regimen from another.

A timeline event carries free text ("Cycle 2 carboplatin/pemetrexed", "Keytruda 200 mg"), not codes, so the regimen
is read from the words: generic names by the WHO INN stems of anticancer drugs (``-platin``, ``-taxel``, ``-mab``,
``-nib``, ``-trexed``...), a few explicit names the stems miss, brand names and the short forms oncologists write
("carbo", "pembro"), all mapped to the generic name. Antibodies and kinase inhibitors used outside oncology
(denosumab, infliximab for colitis, tofacitinib...) are not regimen drugs. A description naming no drug ("cycle 3")
has an empty set: it continues whatever line is open.

>>> sorted(drugs_in("C2 carbo/pemetrexed + Keytruda; denosumab for bone metastases"))
['carboplatin', 'pembrolizumab', 'pemetrexed']
>>> drugs_in("Chemotherapy cycle 3")
frozenset()
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_STEMS = ("platin", "taxel", "mab", "nib", "rasib", "trexed", "citabine", "relbine", "poside", "tecan", "rubicin",
          "fosfamide", "mustine", "lisib", "parib", "ciclib", "tinib", "rafenib", "lutamide", "strozole", "trozole")
_NAMES = frozenset({"vincristine", "vinblastine", "fluorouracil", "lurbinectedin", "mitomycin", "bleomycin",
                    "temozolomide", "tamoxifen", "fulvestrant", "letrozole", "anastrozole", "exemestane", "everolimus",
                    "lenalidomide", "thalidomide", "pomalidomide", "bortezomib", "carfilzomib", "azacitidine",
                    "leuprolide", "abiraterone", "tarlatamab", "trabectedin", "eribulin", "ixabepilone"})
_ALIASES = {
    "carbo": "carboplatin", "cis": "cisplatin", "pembro": "pembrolizumab", "nivo": "nivolumab", "atezo": "atezolizumab",
    "durva": "durvalumab", "ipi": "ipilimumab", "pem": "pemetrexed", "gem": "gemcitabine",
    "keytruda": "pembrolizumab", "opdivo": "nivolumab", "tecentriq": "atezolizumab", "imfinzi": "durvalumab",
    "libtayo": "cemiplimab", "yervoy": "ipilimumab", "tagrisso": "osimertinib", "tarceva": "erlotinib",
    "iressa": "gefitinib", "gilotrif": "afatinib", "alecensa": "alectinib", "alunbrig": "brigatinib",
    "lorbrena": "lorlatinib", "xalkori": "crizotinib", "lumakras": "sotorasib", "krazati": "adagrasib",
    "alimta": "pemetrexed", "taxol": "paclitaxel", "abraxane": "paclitaxel", "taxotere": "docetaxel",
    "gemzar": "gemcitabine", "navelbine": "vinorelbine", "paraplatin": "carboplatin", "platinol": "cisplatin",
    "avastin": "bevacizumab", "cyramza": "ramucirumab", "herceptin": "trastuzumab", "etopophos": "etoposide",
    "vepesid": "etoposide", "hycamtin": "topotecan", "rybrevant": "amivantamab", "retevmo": "selpercatinib",
}
_NOT_REGIMEN = frozenset({
    "denosumab", "infliximab", "adalimumab", "tocilizumab", "vedolizumab", "omalizumab", "dupilumab", "mepolizumab",
    "benralizumab", "evolocumab", "alirocumab", "palivizumab", "natalizumab", "ocrelizumab", "secukinumab",
    "ustekinumab", "tofacitinib", "baricitinib", "upadacitinib", "romosozumab", "eculizumab",
})
_WORD = re.compile(r"[a-z][a-z0-9-]*")
_STEM = re.compile(r"[a-z]{3,}(?:" + "|".join(_STEMS) + r")$")


def drugs_in(text: str) -> frozenset[str]:
    """Generic names of the anticancer drugs ``text`` mentions."""
    found = set()
    for word in _WORD.findall(text.lower()):
        for token in {word, *word.split("-")}:
            name = _ALIASES.get(token, token)
            if name not in _NOT_REGIMEN and (name in _NAMES or name in _ALIASES.values() or _STEM.match(name)):
                found.add(name)
    return frozenset(found)


def line_regimen(descriptions: Iterable[str]) -> frozenset[str]:
    """The drugs named across several descriptions (e.g. the events of one line)."""
    return frozenset().union(*(drugs_in(d) for d in descriptions))
