"""The report's document model: a `Section` of paragraphs, `Table`s of formatted cells and PNG `Figure`s.

Plain data, rendering-agnostic (``benchmarks.report.html.render_html`` renders it). It lives here, below the
benchmarks in the import order, so that trajonco's own report sections (`trajonco.insights.section`) are built as
report sections directly.

>>> Section("a", "A", tables=[Table("t", "T1", ["c"], [["1"]])]).tables[0].collapsed
False
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Table:
    """A table of already formatted cells."""

    id: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str | None = None
    collapsed: bool = False


@dataclass(frozen=True)
class Figure:
    """A PNG image with a caption."""

    id: str
    caption: str
    png: bytes


@dataclass
class Section:
    """One part of the report."""

    id: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    css_class: str | None = None
