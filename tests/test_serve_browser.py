"""`vista serve` in a real browser: Debian's chromium driven by Selenium through Debian's chromedriver (nothing
downloaded), against the app served by uvicorn on 127.0.0.1 over a small store built with the real code paths and a
scripted model (`serve_fixtures`)."""

from __future__ import annotations

import io
import secrets
import shutil

import numpy as np
import pytest
from PIL import Image

from serve_fixtures import XSS_NOTE, build_serve_store, http, running_server

CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM = shutil.which("chromium")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    (CHROMEDRIVER is None or CHROMIUM is None) and __import__("os").environ.get("REQUIRE_CHROMIUM") != "1",
    reason="Debian's chromium and chromium-driver are not installed (scripts/ensure_chromium.sh installs them)")]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = build_serve_store(tmp_path_factory.mktemp("serve"))
    token = secrets.token_urlsafe(16)
    with running_server(root, token) as base:
        yield root, base, token


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--window-size=1400,1100"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def wait_for(driver, condition, timeout: float = 20):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def no_alert(driver) -> bool:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        driver.switch_to.alert
    except NoAlertPresentException:
        return True
    return False


def test_cohort_to_patient_to_a_citations_source_text(served, browser):
    from selenium.webdriver.common.by import By

    _, base, token = served
    browser.get(f"{base}/?token={token}")
    rows = browser.find_elements(By.CSS_SELECTOR, "#cohort tbody tr")
    assert [r.find_element(By.TAG_NAME, "td").text for r in rows] == ["21", "22", "23", "24"]
    assert "failed" in rows[3].text and "graph only" in rows[2].text and "Adenocarcinoma" in rows[0].text
    browser.find_element(By.CSS_SELECTOR, "a.patient-link[href='/patient/21']").click()
    wait_for(browser, lambda d: d.find_element(By.TAG_NAME, "h1").text == "Patient 21")
    biomarkers = browser.find_element(By.CSS_SELECTOR, "tr[data-key='biomarkers']")
    hidden = biomarkers.find_elements(By.CSS_SELECTOR, "details.more li")
    assert len(biomarkers.find_elements(By.CSS_SELECTOR, "li")) == 5 and not any(li.is_displayed() for li in hidden)
    biomarkers.find_element(By.CSS_SELECTOR, "details.more summary").click()  # a list shows 3 items, then expands
    assert [li.text for li in hidden if li.is_displayed()] == ["ROS1 negative", "KRAS G12C"]
    browser.find_element(By.CSS_SELECTOR, "tr[data-key='histology'] button.cite").click()
    panel = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#source-panel .panel"))
    assert "Final diagnosis: adenocarcinoma of the lung." in panel.text  # the pathology note e11 the value rests on
    assert panel.find_element(By.TAG_NAME, "mark").text.startswith("Final diagnosis")
    assert "data/train/0.parquet, row 511" in panel.text  # provenance: first_row 500 + 11


def test_a_lab_point_opens_its_source_row_from_the_server(served, browser):
    from selenium.webdriver.common.by import By

    _, base, token = served
    browser.get(f"{base}/patient/21?token={token}")
    figure = browser.find_element(By.CSS_SELECTOR, "figure.trend[data-code='LOINC//718-7']")
    figure.find_elements(By.CSS_SELECTOR, "circle.point")[0].click()
    panel = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#source-panel .panel"))
    assert "LOINC//718-7" in panel.text and "Hemoglobin" in panel.text and "Value: 13.1 g/dL" in panel.text


def test_script_and_onerror_in_a_note_render_as_text_and_never_run(served, browser):
    from selenium.webdriver.common.by import By

    _, base, token = served
    browser.get(f"{base}/patient/22?token={token}")
    for details in browser.find_elements(By.CSS_SELECTOR, "#events details"):
        details.click()
    text = browser.find_element(By.ID, "events").text
    assert "Assessment: <script>alert(1)</script> stable." in text
    assert "<img src=x onerror=alert(2)>" in text
    assert "<script>alert('model')</script>" in browser.find_element(By.ID, "summary").text  # model output
    browser.find_element(By.CSS_SELECTOR, "tr[data-key='histology'] button.cite").click()
    panel = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#source-panel .panel"))
    assert XSS_NOTE.splitlines()[0] in panel.text
    assert browser.execute_script("return document.images.length") == 0
    assert browser.execute_script("return document.querySelectorAll('main script, #source-panel script').length") == 0
    assert no_alert(browser)
    assert "Not found" in browser.find_element(By.CSS_SELECTOR, "tr[data-key='stage']").text  # uncited value


def test_requests_without_the_token_are_refused(served, browser):
    from selenium.webdriver.common.by import By

    _, base, _ = served
    assert http(f"{base}/")[0] == 401
    assert http(f"{base}/patient/21")[0] == 401
    assert http(f"{base}/?token=wrong")[0] == 403
    assert http(f"{base}/static/app.js")[0] == 401
    browser.delete_all_cookies()
    browser.get(f"{base}/patient/21")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Token required"
    assert "Patient 21" not in browser.page_source


def test_unknown_or_non_integer_subject_gets_the_404_page(served, browser):
    from selenium.webdriver.common.by import By

    _, base, token = served
    for path in ("/patient/999", "/patient/abc", "/patient/21%3Cscript%3E", "/nowhere"):
        assert http(f"{base}{path}?token={token}")[0] == 404
    browser.get(f"{base}/patient/999?token={token}")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Not found"


def test_screenshot_shows_a_drawn_timeline(served, browser, tmp_path):
    from selenium.webdriver.common.by import By

    _, base, token = served
    browser.get(f"{base}/patient/21?token={token}")
    svg = browser.find_element(By.ID, "timeline-svg")
    assert len(svg.find_elements(By.CSS_SELECTOR, "g.marker")) == 9
    assert {b.text for b in svg.find_elements(By.CSS_SELECTOR, "g.band text")} >= {"baseline", "diagnosis", "line 1"}
    pixels = np.asarray(Image.open(io.BytesIO(svg.screenshot_as_png)).convert("RGB"))
    assert pixels.shape[0] > 100 and pixels.shape[1] > 500
    colours = len(np.unique(pixels.reshape(-1, 3), axis=0))
    not_white = float((pixels.sum(axis=2) < 3 * 245).mean())
    assert colours > 20 and not_white > 0.2, (colours, not_white)
    browser.save_screenshot(str(tmp_path / "patient.png"))


def test_question_box_answers_with_cited_sources_and_posts_need_the_token(served, browser):
    from selenium.webdriver.common.by import By

    _, base, token = served
    browser.get(f"{base}/patient/21?token={token}")
    browser.find_element(By.CSS_SELECTOR, "#ask-form input[name='question']").send_keys("When did therapy start?")
    browser.find_element(By.CSS_SELECTOR, "#ask-form button").click()
    answer = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#answer .answer"))
    assert "pembrolizumab started on 2020-04-01" in answer.text
    assert "RXNORM//1736854" in answer.find_element(By.CSS_SELECTOR, ".panel").text  # e13, behind the cited t5
    cookie = f"vista_serve_token={token}"
    assert http(f"{base}/patient/21/ask", data=b"question=hi", cookie=cookie)[0] == 403  # cookie alone: refused
    assert http(f"{base}/patient/21/ask", data=b"question=hi")[0] == 401
    assert http(f"{base}/patient/21?token={token}", data=b"question=hi")[0] == 405  # nothing else takes a POST


def test_exported_packet_opens_without_a_server(served, browser, tmp_path):
    from selenium.webdriver.common.by import By

    from vista.serve.export import export_packet

    root, _, _ = served
    written = export_packet(root, tmp_path / "packet", [21, 22])
    assert [p.name for p in written] == ["index.html", "patient-21.html", "patient-22.html"]
    assert all(oct(p.stat().st_mode)[-3:] == "600" for p in written)
    browser.get(written[0].as_uri())
    browser.find_element(By.CSS_SELECTOR, "a.patient-link[href='patient-21.html']").click()
    wait_for(browser, lambda d: d.find_element(By.TAG_NAME, "h1").text == "Patient 21")
    browser.find_element(By.CSS_SELECTOR, "g.marker[data-event='t5']").click()  # a timeline marker's citation
    panel = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#source-panel .panel"))
    assert "RXNORM//1736854" in panel.text and "pembrolizumab" in panel.text
    browser.get((tmp_path / "packet" / "patient-22.html").as_uri())
    assert "<script>alert(1)</script>" in browser.page_source.replace("&lt;", "<").replace("&gt;", ">")
    assert browser.execute_script("return document.images.length") == 0 and no_alert(browser)
