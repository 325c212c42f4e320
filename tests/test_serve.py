"""``stringdiag serve FILE``: headless Chromium opens the page, the diagram's interactive view;
the file is saved with another diagram, and the open page redraws by itself; a file saved broken
shows its error, and the page recovers when it is fixed. The version endpoint changes with the
file, and the server listens on 127.0.0.1 only."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRST = """\
dim s : seq
dim d : fixed
learn F : [d] -> [d]
diagram First(x: [s, d]) -> [s, d] {
  y[i] = F(x[i])
  return y
}
"""


@pytest.fixture
def served(tmp_path):
    path = tmp_path / "live.diag"
    path.write_text(FIRST)
    proc = subprocess.Popen([sys.executable, "-m", "stringdiag.cli.main", "serve", str(path)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"at (http://127\.0\.0\.1:\d+/) ", line)
    assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
    yield path, m.group(1)
    proc.terminate()
    proc.wait(timeout=10)


def _save(path: Path, text: str) -> None:
    time.sleep(0.05)  # a new modification time even on coarse clocks
    path.write_text(text)


def test_the_version_follows_the_file(served):
    path, url = served
    before = urllib.request.urlopen(url + "version").read().decode()
    page = urllib.request.urlopen(url).read().decode()
    assert "<title>First" in page and f'var seen = "{before}"' in page
    _save(path, FIRST + "\n# a comment\n")
    assert urllib.request.urlopen(url + "version").read().decode() != before


@pytest.fixture
def browser(system_programs):
    system_programs("chromium chromium-driver", "chromium", "chromedriver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"):  # no network but the loopback address
        options.add_argument(arg)
    options.binary_location = shutil.which("chromium")
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


def _titles(browser) -> list[str]:
    return browser.execute_script(
        "return Array.from(document.querySelectorAll('svg g.graph > title')).map(t => t.textContent)")


def test_the_page_redraws_in_chromium_when_the_file_is_saved(served, browser):
    from selenium.webdriver.support.ui import WebDriverWait

    path, url = served
    browser.get(url)
    WebDriverWait(browser, 20).until(lambda b: _titles(b) == ["First"])
    assert browser.find_element("css selector", ".sd-view").get_attribute("data-ready") == "1"

    _save(path, FIRST.replace("First", "Second"))
    WebDriverWait(browser, 20).until(lambda b: _titles(b) == ["Second"])

    _save(path, FIRST.replace("F(x[i])", "G(x[i])"))
    WebDriverWait(browser, 20).until(lambda b: b.find_elements("css selector", "pre.sd-error"))
    error = browser.find_element("css selector", "pre.sd-error").text
    assert "live.diag:5:10: error: undefined box 'G'" in error

    _save(path, FIRST)
    WebDriverWait(browser, 20).until(lambda b: _titles(b) == ["First"])
