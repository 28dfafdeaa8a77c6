"""One colour per model across every figure of a report.

The baselines and the record-length scores have fixed colours (the same in every report); other models (agent
runs, prediction files) get the remaining colours in the order the report first lists them. Build one `Palette`
per report from every model name it shows and hand it to each figure.

>>> p = Palette(["one_stage · gpt-4o", "xgboost", "two_stage · gpt-4o"])
>>> p["xgboost"] == FIXED["xgboost"], p["one_stage · gpt-4o"] != p["two_stage · gpt-4o"]
(True, True)
>>> p["one_stage · gpt-4o"] == Palette(["two_stage · x", "one_stage · gpt-4o"])["one_stage · gpt-4o"]
False
>>> p["never listed"] == UNLISTED
True
"""

from __future__ import annotations

from collections.abc import Iterable

Color = str

FIXED: dict[str, Color] = {
    "logistic_regression": "#1f77b4",
    "knn": "#ff7f0e",
    "xgboost": "#2ca02c",
    "record length: XML tokens": "#7f7f7f",
    "record length: visits": "#bcbd22",
}
"""Colours of the models every report can show."""

OTHERS: tuple[Color, ...] = ("#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#393b79", "#637939",
                             "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d")
"""Colours handed out, in order, to the other models (agent runs)."""
UNLISTED: Color = "#000000"
"""A model the palette was not built with (a bug in the caller, visible as black)."""


class Palette:
    """Model name -> colour, fixed for the whole report."""

    def __init__(self, names: Iterable[str]):
        self._colors: dict[str, Color] = {}
        others = iter(OTHERS)
        for name in dict.fromkeys(names):
            if name in FIXED:
                self._colors[name] = FIXED[name]
            else:
                self._colors[name] = next(others, None) or OTHERS[len(self._colors) % len(OTHERS)]

    def __getitem__(self, name: str) -> Color:
        return self._colors.get(name, UNLISTED)

    def __contains__(self, name: str) -> bool:
        return name in self._colors

    def names(self) -> list[str]:
        return list(self._colors)
