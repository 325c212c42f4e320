"""``stringdiag serve FILE``: headless Chromium opens the page, the diagram's interactive view;
the file is saved with another diagram, and the open page redraws by itself; a file saved broken
shows its error, and the page recovers when it is fixed. The version endpoint changes with the
file and with every file the drawing read (imports however deep, a derivation's rules and files,
an import that was missing), and with no other; the server listens on 127.0.0.1 only, writes no
scratch files, and stops cleanly on SIGTERM."""
from __future__ import annotations

import html
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from stringdiag.errors import DiagError

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


def _start(path: Path, *more: str, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "stringdiag.cli.main", "serve", str(path), *more],
                            cwd=path.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    m = re.search(r"at (http://127\.0\.0\.1:\d+/) ", line)
    assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, m.group(1)


@pytest.fixture
def served(tmp_path):
    path = tmp_path / "live.diag"
    path.write_text(FIRST)
    proc, url = _start(path)
    yield path, url
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


# -- the files a drawing read --------------------------------------------------------------
LEAF = """\
dim d : fixed
learn G : [d] -> [d]
diagram Leaf(x: [d]) -> [d] {
  return G(x)
}
"""
TOP = """\
import "mid.diag" as m
dim s : seq
diagram Top(x: [s, d]) -> [s, d] {
  y[i] = m.Leaf(x[i])
  return y
}
"""


def _page(path: Path):
    from stringdiag.cli.serve import Page

    return Page(path, None)


def _error(body: str) -> str | None:
    m = re.search(r"<pre class='sd-error'>(.*?)</pre>", body, re.S)
    return html.unescape(m.group(1)) if m else None


def test_a_file_imported_two_deep_redraws_the_page_and_shows_its_error(tmp_path):
    (tmp_path / "leaf.diag").write_text(LEAF)
    (tmp_path / "mid.diag").write_text('import "leaf.diag"\n')
    (tmp_path / "top.diag").write_text(TOP)
    (tmp_path / "unrelated.diag").write_text(LEAF)
    page = _page(tmp_path / "top.diag")
    v1, body = page.current()
    assert "<title>Top" in body and _error(body) is None
    _save(tmp_path / "unrelated.diag", "broken")  # a file the drawing did not read
    assert page.current() == (v1, body)
    _save(tmp_path / "leaf.diag", LEAF.replace("G(x)", "H(x)"))
    v2, body = page.current()
    assert v2 != v1 and f"{tmp_path / 'leaf.diag'}:4:10: error: undefined box 'H'" in _error(body)
    _save(tmp_path / "leaf.diag", LEAF)
    v3, body = page.current()
    assert v3 not in (v1, v2) and "<title>Top" in body and _error(body) is None


def test_an_import_that_was_missing_redraws_the_page_when_it_is_made(tmp_path):
    (tmp_path / "top.diag").write_text(TOP)
    page = _page(tmp_path / "top.diag")
    v1, body = page.current()
    assert 'cannot import "mid.diag": no such file' in _error(body)
    (tmp_path / "leaf.diag").write_text(LEAF)
    (tmp_path / "mid.diag").write_text('import "leaf.diag"\n')
    v2, body = page.current()
    assert v2 != v1 and "<title>Top" in body and _error(body) is None


RULES = "dim d : fixed\nrule twice<n>(x: [d]) -> [d] { return x + x } == { return 2 * x }\n"
DOUBLE = "dim s : seq\ndim d : fixed\ndiagram D(x: [s, d]) -> [s, d] {\n  return x + x\n}\n"


def _derivation(tmp_path: Path, *missing: str) -> Path:
    for name, text in (("r.rules", RULES), ("a.diag", DOUBLE)):
        if name not in missing:
            (tmp_path / name).write_text(text)
    (tmp_path / "x.deriv").write_text('use "r.rules"\nstart a.diag:D\napply twice\n')
    return tmp_path / "x.deriv"


def test_a_derivation_redraws_when_its_rules_or_its_diagrams_change(tmp_path):
    rules, diag = RULES, DOUBLE
    page = _page(_derivation(tmp_path))
    v1, body = page.current()
    assert _error(body) is None and "twice" in body
    _save(tmp_path / "r.rules", rules.replace("2 * x", "3 *"))
    v2, body = page.current()
    assert v2 != v1 and f"{tmp_path / 'r.rules'}:2:" in _error(body)
    _save(tmp_path / "r.rules", rules)
    assert _error(page.current()[1]) is None
    _save(tmp_path / "a.diag", diag.replace("x + x", "x + y"))
    assert "undefined name 'y'" in _error(page.current()[1])


def test_the_server_follows_an_imported_file(tmp_path):
    (tmp_path / "leaf.diag").write_text(LEAF)
    (tmp_path / "mid.diag").write_text('import "leaf.diag"\n')
    (tmp_path / "top.diag").write_text(TOP)
    proc, url = _start(tmp_path / "top.diag")
    try:
        before = urllib.request.urlopen(url + "version").read().decode()
        assert "<title>Top" in urllib.request.urlopen(url).read().decode()
        _save(tmp_path / "leaf.diag", LEAF.replace("G(x)", "H(x)"))
        assert urllib.request.urlopen(url + "version").read().decode() != before
        assert "leaf.diag:4:10: error: undefined box" in urllib.request.urlopen(url).read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# -- no scratch files, on any way out ------------------------------------------------------
@pytest.fixture
def scratch(tmp_path):
    """An environment whose temporary folder is empty and our own, to see what serve leaves there."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp_path / "live.diag").write_text(FIRST)
    return tmp, {**os.environ, "TMPDIR": str(tmp), "STRINGDIAG_CACHE": str(tmp_path / "cache")}


def test_a_port_in_use_is_an_error_and_leaves_nothing(tmp_path, scratch):
    tmp, env = scratch
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "stringdiag.cli.main", "serve", str(tmp_path / "live.diag"),
                            "--port", str(port)], capture_output=True, text=True, env=env, timeout=60)
    assert (r.returncode, r.stderr.strip()) == (1, "error: Address already in use"), r.stderr
    assert list(tmp.iterdir()) == []


def test_sigterm_stops_the_server_cleanly_and_leaves_nothing(tmp_path, scratch):
    tmp, env = scratch
    proc, url = _start(tmp_path / "live.diag", env=env)
    assert "<title>First" in urllib.request.urlopen(url).read().decode()
    proc.terminate()
    assert proc.wait(timeout=10) == 0, proc.stderr.read()
    assert proc.stderr.read() == "" and list(tmp.iterdir()) == []


@pytest.mark.parametrize("missing", ["r.rules", "a.diag"])
def test_a_derivation_waits_for_a_file_it_uses_that_is_missing(tmp_path, missing):
    page = _page(_derivation(tmp_path, missing))
    v1, body = page.current()
    assert f"no such file {missing}" in _error(body)
    (tmp_path / missing).write_text({"r.rules": RULES, "a.diag": DOUBLE}[missing])  # x.deriv as it was
    v2, body = page.current()
    assert v2 != v1 and _error(body) is None


def test_a_recording_holds_what_was_read_inside_it_and_an_outer_one_gets_it_too(tmp_path):
    from stringdiag.syntax.source import read_source, recording, stamp

    a, b, gone = tmp_path / "a.diag", tmp_path / "b.diag", tmp_path / "gone.diag"
    a.write_text("x")
    b.write_text("yy")
    read_source(a)  # outside any recording: recorded nowhere
    with recording() as outer:
        read_source(a)
        with recording() as inner:
            read_source(b)
            with pytest.raises(DiagError):
                read_source(gone)
        _save(a, "changed")
        read_source(a)  # read again: its stamp stays the one from before the first read
    assert inner == {str(b): stamp(b), str(gone): None}
    assert set(outer) == {str(a), str(b), str(gone)} and outer[str(a)] != stamp(a)
