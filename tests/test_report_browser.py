"""The report as a reader sees it: rendered in headless Chromium, every image decodes, no section is empty, wide
tables scroll instead of being cut, and the screenshot is not blank. Built from hand-made results (no dataset, no
Ray) so it runs in seconds; `tests/test_report.py` runs the same check on the end-to-end report."""

from __future__ import annotations

import re

import pytest

from benchmarks.report import SECTION_IDS
from trajonco.report_document import Section
from benchmarks.report.sections import build_sections, notices, write_report
from browser_check import SKIP_WITHOUT_CHROMIUM, check_figure_files, open_report
from report_fixtures import build_report_data

pytestmark = [pytest.mark.slow, SKIP_WITHOUT_CHROMIUM]


def test_report_opens_in_chromium_with_every_image_and_section(tmp_path):
    data = build_report_data(tmp_path / "report")
    extra = Section("extra-example", "An extra section", paragraphs=["Added through build_sections(extra=...)."])
    html, _ = write_report(data, build_sections(data, extra=[extra]))
    view = open_report(html, tmp_path / "browser")
    assert view.section_ids == [*SECTION_IDS[:-1], "extra-example", SECTION_IDS[-1]]
    assert view.image_count >= 9 and view.broken_images == []
    assert view.empty_sections == []
    assert view.cut_tables == [] and view.page_width <= view.window_width
    assert view.screenshot_distinct_colors > 50, "the screenshot looks blank"
    assert check_figure_files(tmp_path / "report" / "figures") == []


def test_probe_catches_a_broken_image_and_an_empty_section(tmp_path):
    """The check itself can fail: a corrupt PNG and a section holding only its heading are reported."""
    page = ('<!doctype html><html><body><section id="full"><h2>A</h2><p>enough text to count as content</p>'
            '</section><section id="hollow"><h2>B</h2></section>'
            '<img id="bad" src="data:image/png;base64,iVBORw0KGgoAAAA="></body></html>')
    html = tmp_path / "page.html"
    html.write_text(page, encoding="utf-8")
    view = open_report(html, tmp_path / "browser")
    assert view.broken_images == ["bad"] and view.empty_sections == ["hollow"]


def test_embedded_model_caveat_is_on_top_only_for_the_embedded_model(tmp_path):
    embedded = build_report_data(tmp_path / "a")
    page = write_report(embedded, build_sections(embedded))[0].read_text(encoding="utf-8")
    first_section = page.index('<section id="overview"')
    notices_on_top = re.findall(r'<p class="notice">(.*?)</p>', page[:first_section])
    assert any("embedded test model smollm2-135m-instruct-q4_1" in n for n in notices_on_top)
    assert any("too few" in n for n in notices_on_top)
    real = build_report_data(tmp_path / "b", llm="gpt-4.1")
    assert not any("embedded" in n for n in notices(real))


def test_rendered_report_shows_no_number_from_too_few_patients_and_legends_on_the_strata_figures(tmp_path):
    """The done-when line: in Chromium the page shows no AUROC/CI from fewer than 10 cases or controls (main showed
    the 2+2 agent run's 1.000 (1.000–1.000) n=2/2 and +0.500 differences), and every strata figure has a legend."""
    data = build_report_data(tmp_path / "report")
    html, _ = write_report(data, build_sections(data))
    view = open_report(html, tmp_path / "browser")
    assert view.small_numbers == []
    strata = {k: v for k, v in view.legends.items() if k.startswith("fig-strata-")}
    assert strata and all(len(entries) >= 2 for entries in strata.values()), strata
    assert all(view.legends[k] for k in ("fig-auroc", "fig-roc-pr", "fig-selection", "fig-gap", "fig-truncation"))


def test_the_small_number_check_can_fail(tmp_path):
    """The check itself catches a CI shown on 2 + 2 patients, in a table row and in running text."""
    page = ('<!doctype html><html><body><section id="s"><h2>S</h2><p>lung: agent 1.000 (1.000–1.000) n=2/2</p>'
            '<table id="t"><thead><tr><th>cases / controls</th><th>agent AUROC</th></tr></thead><tbody>'
            '<tr><td>2 / 2</td><td>1.000</td></tr></tbody></table></section></body></html>')
    html = tmp_path / "page.html"
    html.write_text(page, encoding="utf-8")
    assert len(open_report(html, tmp_path / "browser").small_numbers) == 2
