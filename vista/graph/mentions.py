"""Find mentions of a patient's own codes in note text by matching their catalog descriptions, word by word.

The method is deliberately simple and predictable (no NLP model):

* **Terms.** Each code's description gives up to two terms: the description with bracketed or parenthesized parts
  removed (``"Hemoglobin [Mass/volume] in Blood"`` → ``hemoglobin in blood``), and the part of it before the first
  comma or semicolon (``"Pneumonia, unspecified organism"`` → ``pneumonia``). A term is its lower-cased words
  (runs of letters and digits); terms shorter than ``min_chars`` characters, or made only of generic words
  (``other``, ``unspecified``…) or numbers, are dropped. Several codes may share a term; a mention links to each.
* **Matching.** The text is split into words the same way; wherever a word starts some term, the following word
  sequences are looked up in a dictionary. So a term matches only whole words, in order, case-insensitively —
  ``pneumonia`` in "Findings consistent with left lower lobe pneumonia." but not in "pneumonias" or "pneumoniae".
* **Result.** One mention per (code, text): the first matching term, in text order. Negation ("no pneumonia") is
  not detected: a mention says the words occur, not that the finding is present.

>>> matcher = TermMatcher.from_descriptions([(0, "Pneumonia, unspecified organism"), (1, "Malignant neoplasm of lung"),
...                                          (2, "metformin"), (3, "Other specified disorders")])
>>> sorted(matcher.terms)
[('malignant', 'neoplasm', 'of', 'lung'), ('metformin',), ('pneumonia',), ('pneumonia', 'unspecified', 'organism')]
>>> matcher.find("Impression: left lower lobe Pneumonia; continue Metformin. Pneumonia improving.")
[Mention(target=0, term='pneumonia'), Mention(target=2, term='metformin')]
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import NamedTuple

_WORD = re.compile(r"[^\W_]+")
_BREAK = "\x00"  # joins texts for `find_many`: never part of a word, and never in a text a graph keeps
_WORD_OR_BREAK = re.compile(r"[^\W_]+|\x00")
_ASCII_WORD_OR_BREAK = re.compile(r"[a-z0-9]+|\x00")  # the same tokens on lower-cased ASCII text, 3x faster
_BRACKETED = re.compile(r"\[[^\]]*\]|\([^)]*\)")
_HEAD = re.compile(r"[,;]")
GENERIC_WORDS = frozenset({
    "other", "others", "unspecified", "specified", "not", "elsewhere", "classified", "nos", "nec", "and", "or", "of",
    "the", "with", "without", "in", "on", "for", "to", "by", "type", "level", "unit", "units", "total", "code",
    "encounter", "visit", "examination", "exam", "test", "screening", "history", "status", "finding", "findings",
    "disease", "disorder", "disorders", "condition", "procedure", "report", "note", "serum", "plasma", "blood",
})
DEFAULT_MIN_CHARS = 4


class Mention(NamedTuple):
    """A term of ``target`` (e.g. a code node) found in a text."""

    target: int
    term: str


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def description_terms(description: str, min_chars: int = DEFAULT_MIN_CHARS) -> list[tuple[str, ...]]:
    """The match terms of one description (see the module docstring), as word tuples.

    >>> description_terms("Essential (primary) hypertension"), description_terms("Unspecified")
    ([('essential', 'hypertension')], [])
    """
    plain = _BRACKETED.sub(" ", description)
    terms = []
    for candidate in (plain, _HEAD.split(plain, maxsplit=1)[0]):
        words = tuple(_words(candidate))
        if len(" ".join(words)) < min_chars or all(w in GENERIC_WORDS or w.isdigit() for w in words):
            continue
        if words not in terms:
            terms.append(words)
    return terms


class TermMatcher:
    """Word-sequence dictionary of terms → targets (e.g. code node indices), built once per patient."""

    def __init__(self, terms: Mapping[tuple[str, ...], tuple[int, ...]]):
        self.terms = dict(terms)
        lengths: dict[str, set[int]] = defaultdict(set)
        for words in self.terms:
            lengths[words[0]].add(len(words))
        self._lengths = {first: sorted(ns, reverse=True) for first, ns in lengths.items()}
        self._firsts = frozenset(self._lengths)

    @classmethod
    def from_descriptions(cls, items: Iterable[tuple[int, str]], min_chars: int = DEFAULT_MIN_CHARS) -> TermMatcher:
        """A matcher over ``(target, description)`` pairs."""
        targets: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for target, description in items:
            for words in description_terms(description, min_chars):
                if target not in targets[words]:
                    targets[words].append(target)
        return cls({words: tuple(ts) for words, ts in targets.items()})

    def __bool__(self) -> bool:
        return bool(self.terms)

    def find(self, text: str) -> list[Mention]:
        """The first mention of each target in ``text``, in text order (longest term first at one position)."""
        return self.find_many([text])[0]

    def find_many(self, texts: list[str]) -> list[list[Mention]]:
        """`find` for each of ``texts``, done in one pass over their words (a separator token keeps terms inside a text)."""
        found: list[dict[int, Mention]] = [{} for _ in texts]
        if not self._firsts or not texts:
            return [[] for _ in texts]
        joined = _BREAK.join(texts).lower()
        words = (_ASCII_WORD_OR_BREAK if joined.isascii() else _WORD_OR_BREAK).findall(joined)
        if not self._firsts.intersection(words):
            return [[] for _ in texts]
        firsts, lengths, terms = self._firsts, self._lengths, self.terms
        breaks = [i for i, word in enumerate(words) if word == _BREAK]
        for i in [i for i, word in enumerate(words) if word in firsts]:
            seen = found[bisect_left(breaks, i)]
            for n in lengths[words[i]]:
                key = tuple(words[i:i + n])
                hit = terms.get(key)
                if hit is not None:
                    for target in hit:
                        if target not in seen:
                            seen[target] = Mention(target, " ".join(key))
        return [list(f.values()) for f in found]
