"""Text → XML 1.0 helpers: drop illegal characters, escape exactly as lxml serializes, format times and numbers.

Escaping matches lxml's serializer byte for byte, so a timeline parsed with lxml and written again is unchanged.

>>> escape_text(sanitize("a < b && c ]]> d\\x00\\x1b\\r"))
'a &lt; b &amp;&amp; c ]]&gt; d&#13;'
>>> escape_attribute('say "hi"\\n')
'say &quot;hi&quot;&#10;'
>>> format_time(datetime(2020, 1, 5)), format_time(datetime(2020, 1, 5, 9, 30)), format_time(datetime(2020, 1, 5, 9, 30, 5))
('2020-01-05', '2020-01-05 09:30', '2020-01-05 09:30:05')
>>> format_number(11.199999809265137), format_number(120.0), format_number(1e-07)
('11.2', '120', '0.0000001')
"""

from __future__ import annotations

import re
from datetime import datetime

import numpy as np

# Characters allowed by XML 1.0 (§2.2); everything else (NUL, ESC, lone surrogates, U+FFFE…) is removed.
_ILLEGAL_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def sanitize(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot carry (control characters, lone surrogates)."""
    return _ILLEGAL_XML.sub("", text)


_TEXT_SPECIAL = re.compile("[&<>\r]")
_ATTRIBUTE_SPECIAL = re.compile('[&<>"\n\r\t]')


def escape_text(text: str) -> str:
    """Escape sanitized element content (``\\r`` kept as ``&#13;`` so parsers do not normalize it away)."""
    if _TEXT_SPECIAL.search(text) is None:  # most values: one scan, no copies
        return text
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")


def escape_attribute(text: str) -> str:
    """Escape a sanitized attribute value for double quotes (whitespace kept through attribute normalization)."""
    if _ATTRIBUTE_SPECIAL.search(text) is None:
        return text
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\n", "&#10;")
        .replace("\r", "&#13;")
        .replace("\t", "&#9;")
    )


def format_time(when: datetime) -> str:
    """Shortest unambiguous form: the date alone at midnight, minutes unless seconds are set."""
    if when.hour == when.minute == when.second == when.microsecond == 0:
        return when.date().isoformat()
    if when.second == when.microsecond == 0:
        return when.isoformat(sep=" ", timespec="minutes")
    return when.isoformat(sep=" ")


def parse_time(text: str) -> datetime:
    """Inverse of `format_time` (any ISO 8601 form Python accepts)."""
    return datetime.fromisoformat(text)


def format_number(value: float) -> str:
    """A MEDS float32 value as the shortest decimal that reads back to the same float32, never in exponent form."""
    return np.format_float_positional(np.float32(value), trim="-")
