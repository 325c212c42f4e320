"""The interactive HTML view (``render/html.py``), in a real browser: Debian's headless
chromium driven by Selenium loads a diagram's page, a derivation's, a taxonomy's and a grid's
(each written by its command), clicks a definition open and its frame shut, moves the slider,
opens members, hovers a wire, and checks what the page shows against the graph it was drawn
from. The pages are one file each: nothing is fetched."""
from __future__ import annotations

import contextlib
import io
import re
from collections import Counter
from pathlib import Path

import pytest

from stringdiag.cli.main import main
from stringdiag.derive.derivation import load_derivation
from stringdiag.elaborate.loader import load

GALLERY = Path(__file__).resolve().parents[1] / "gallery"
SMALL_TAX = f"""\
root primordial = {GALLERY}/taxonomy.diag:PrimordialAttention "primordial attention"
node sliding = {GALLERY}/taxonomy.diag:SlidingWindowAttention "sliding window" family "sparse"
edge primordial -> sliding by "{GALLERY}/taxonomy_sliding.deriv"
"""
ENUMERATE = ["enumerate", str(GALLERY / "anatomy.diag"), "--generators", "AttPrep,AttApply,ConcatFF", "--max", "3",
             "--symmetric", "ConcatFF"]


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """One page of each kind, written by the command line."""
    tmp = tmp_path_factory.mktemp("html")
    (tmp / "small.tax").write_text(SMALL_TAX)
    out = {k: tmp / f"{k}.html" for k in ("diagram", "derivation", "taxonomy", "grid")}
    commands = [["render", GALLERY / "transformer.diag", "-d", "TransformerEncoder", "-o", out["diagram"]],
                ["derive", GALLERY / "linearize.deriv", "-o", out["derivation"]],
                ["taxonomy", tmp / "small.tax", "-o", out["taxonomy"]],
                [*ENUMERATE, "--grid", out["grid"]]]
    for argv in commands:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert main([str(a) for a in argv]) == 0, argv
    out["terms"] = printed.getvalue()  # enumerate's table: each mechanism's name and term
    return out


@pytest.fixture(scope="module")
def browser(system_programs):
    system_programs("chromium chromium-driver", "chromium", "chromedriver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,900", "--host-resolver-rules=MAP * ~NOTFOUND"):  # no network at all
        options.add_argument(arg)
    import shutil

    options.binary_location = shutil.which("chromium")
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(5)
    yield driver
    driver.quit()


def open_page(browser, path: Path):
    browser.get(path.as_uri())
    view = browser.find_element("css selector", ".sd-view")
    assert view.get_attribute("data-ready") == "1"  # the script ran
    return view


def shown(browser) -> list:
    """The panes on screen (exactly one)."""
    panes = [p for p in browser.find_elements("css selector", ".sd-pane") if p.is_displayed()]
    assert len(panes) == 1
    return panes[0]


def boxes_in(pane) -> list[int]:
    return [int(g.get_attribute("data-box")) for g in pane.find_elements("css selector", "g[data-box]")]


# -- without a browser: what the file holds ---------------------------------------------------

def test_a_page_is_one_file_that_fetches_nothing(pages):
    for kind, path in pages.items():
        if kind == "terms":
            continue
        text = path.read_text()
        assert "<script>" in text and "<script src" not in text, kind
        fetches = re.findall(r'(?:src|href)\s*=\s*"([^"#][^"]*)"|url\(([^)]*)\)|@import', text)
        assert fetches == [], (kind, fetches[:3])


def test_every_box_and_wire_says_what_it_is(pages):
    d = load(GALLERY / "transformer.diag")["TransformerEncoder"]
    text = pages["diagram"].read_text()
    collapsed = text.split('data-key="collapsed"', 1)[1].split('data-key="expanded"', 1)[0]
    assert sorted(int(b) for b in re.findall(r'data-box="(\d+)"', collapsed)) == sorted(d.boxes())
    edges = re.findall(r'<g class="edge"([^>]*)>', text)
    assert edges and all('data-info="wire ' in e for e in edges)  # every edge drawn is a wire's
    # the embedding's output x0 : [s, dm], s a sequence length and dm a fixed width (the file's dims)
    assert 'data-info="wire x0 [s, dm]: s seq, dm fixed"' in collapsed


# -- in the browser ---------------------------------------------------------------------------

def test_a_definition_opens_and_closes_by_clicking(browser, pages):
    d = load(GALLERY / "transformer.diag")["TransformerEncoder"]
    view = open_page(browser, pages["diagram"])
    assert view.get_attribute("data-shown") == "collapsed"
    assert sorted(boxes_in(shown(browser))) == sorted(d.boxes())
    layer = next(b for b in d.boxes() if d.record(b).kind == "diagram")
    browser.find_element("css selector", f'.sd-pane[data-key="collapsed"] g[data-box="{layer}"]').click()
    assert view.get_attribute("data-shown") == "expanded"
    opened = d.expand(unroll={})
    assert sorted(boxes_in(shown(browser))) == sorted(opened.boxes())
    assert not any(opened.record(b).kind == "diagram" for b in opened.boxes())
    frames = shown(browser).find_elements("css selector", "g.sd-def-frame")
    assert frames and "EncoderLayer" in frames[0].text
    frames[0].find_element("css selector", "text").click()
    assert view.get_attribute("data-shown") == "collapsed"


def test_zoom_and_hover(browser, pages):
    from selenium.webdriver.common.action_chains import ActionChains

    view = open_page(browser, pages["diagram"])
    before = float(view.get_attribute("data-zoom"))
    browser.find_element("css selector", '[data-act="zoom-in"]').click()
    assert float(view.get_attribute("data-zoom")) == pytest.approx(before * 1.25, rel=1e-2)
    browser.find_element("css selector", '[data-act="fit"]').click()
    assert float(view.get_attribute("data-zoom")) == pytest.approx(before, rel=1e-2)
    label = shown(browser).find_element("css selector", 'g[data-info^="wire x0 "] text')
    ActionChains(browser).move_to_element(label).perform()
    assert browser.find_element("css selector", ".sd-hover").text == "wire x0 [s, dm]: s seq, dm fixed"


def test_a_derivation_steps_on_a_slider_beside_its_table(browser, pages):
    from selenium.webdriver.common.keys import Keys

    deriv = load_derivation(GALLERY / "linearize.deriv")
    view = open_page(browser, pages["derivation"])
    rows = browser.find_elements("css selector", "tr[data-opens]")
    assert [r.find_element("css selector", "td").text for r in rows] == [r[0] for r in deriv.text_rows()[1:]]
    slider = browser.find_element("css selector", ".sd-slider")
    slider.click()
    slider.send_keys(Keys.HOME)

    def expected(k: int) -> tuple[set[int], set[int]]:
        """The DPO match the next step replaces, and the boxes this step put in (``Step.changes``)."""
        nxt = deriv.steps[k + 1].changes.matched if k + 1 < len(deriv.steps) else ()
        return set(nxt), set(deriv.steps[k].changes.added if k else ())

    def outlined(pane) -> tuple[set[int], set[int]]:
        return tuple({int(g.get_attribute("data-box")) for g in pane.find_elements("css selector", f"g.sd-{c}")}
                     for c in ("matched", "changed"))

    assert outlined(shown(browser)) == expected(0)
    for k in range(1, len(deriv.steps)):
        slider.send_keys(Keys.RIGHT)
        assert view.get_attribute("data-shown") == str(k)
        step = deriv.steps[k]
        caption = " ".join(browser.find_element("css selector", ".sd-caption").text.split())
        assert caption == " ".join(f"{step.relation} {deriv.frames()[k][0]}".split())  # and the cost change
        assert caption.startswith(f"{step.relation} {step.number}. {step.text}")
        assert browser.find_element("css selector", "tr.sd-current").get_attribute("data-opens") == str(k)
        pane = shown(browser)
        assert sorted(boxes_in(pane)) == sorted(step.diagram.boxes())
        assert outlined(pane) == expected(k), k
        # and, independently of Step.changes: an operation the step brings in (more often than before) is outlined
        ops = lambda d, bs: Counter(d.record(b).op for b in bs)  # noqa: E731
        new = ops(step.diagram, step.diagram.boxes()) \
            - ops(deriv.steps[k - 1].diagram, deriv.steps[k - 1].diagram.boxes())
        assert not new - ops(step.diagram, outlined(pane)[1]), (k, new)
    assert sum(len(m) + len(c) for m, c in map(expected, range(len(deriv.steps)))) > 10  # steps do highlight
    rows[1].click()  # a row of the table opens its step
    assert view.get_attribute("data-shown") == "1" and slider.get_attribute("value") == "1"


def test_a_taxonomy_opens_its_members_one_at_a_time(browser, pages):
    view = open_page(browser, pages["taxonomy"])
    members = browser.find_elements("css selector", ".sd-members [data-opens]")
    assert [m.text for m in members] == ["primordial attention", "sliding window (sparse)"]
    assert view.get_attribute("data-shown") == "primordial"
    members[1].click()
    assert view.get_attribute("data-shown") == "sliding" and "sd-current" in members[1].get_attribute("class")
    caption = browser.find_element("css selector", ".sd-caption").text
    assert caption.startswith("sliding window (sparse) — from primordial attention by ")
    changed = int(re.search(r"(\d+) boxes changed", caption).group(1))
    assert changed > 0 and len(shown(browser).find_elements("css selector", "g.sd-changed")) == changed
    browser.find_element("css selector", ".sd-filter").send_keys("slid")
    assert [m.text for m in members if m.is_displayed()] == ["sliding window (sparse)"]


def test_a_grid_of_mechanisms_opens_each(browser, pages):
    terms = dict(re.findall(r"^  (M\d+) .*? (\S+\(.*\))$", pages["terms"], re.M))
    view = open_page(browser, pages["grid"])
    members = browser.find_elements("css selector", ".sd-members [data-opens]")
    assert [m.text.split()[0] for m in members] == list(terms) and len(terms) > 3
    for m in (members[0], members[-1]):
        m.click()
        assert view.get_attribute("data-shown") == m.get_attribute("data-opens")
        # each generator the term applies is drawn as one definition box
        drawn = shown(browser).find_elements("css selector", 'g[data-info*=" (diagram)"]')
        assert len(drawn) == len(re.findall(r"\w+\(", terms[m.text.split()[0]])), m.text


def test_two_views_on_one_page_keep_apart(browser, tmp_path):
    """A notebook shows many views on one page: each is set up once and works alone."""
    import stringdiag
    from stringdiag.render.html import page

    deriv = stringdiag.load_derivation(GALLERY / "linearize.deriv")
    prog = stringdiag.load(GALLERY / "transformer.diag")  # attaches the notebook views
    path = tmp_path / "two.html"
    path.write_text(page("two", prog["TransformerEncoder"]._repr_html_() + deriv._repr_html_()))
    browser.get(path.as_uri())
    first, second = browser.find_elements("css selector", ".sd-view")
    assert first.get_attribute("data-kind") == "diagram" and second.get_attribute("data-kind") == "derivation"
    second.find_element("css selector", "tr[data-opens='2']").click()
    assert second.get_attribute("data-shown") == "2" and first.get_attribute("data-shown") == "collapsed"
    first.find_element("css selector", "g.sd-def").click()
    assert first.get_attribute("data-shown") == "expanded" and second.get_attribute("data-shown") == "2"
