"""Screenshots of the interactive HTML views for the documentation, into docs/img/html-*.png.

    python docs/screenshots.py

Run from the repository root with this checkout importable; needs Graphviz and Debian's
chromium and chromium-driver (``make test`` installs them). Each page is written by its
command into a scratch folder, opened in headless chromium, put in the state the picture
shows (a definition clicked open, the slider moved, a member opened) and captured.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"
GALLERY = Path("gallery")  # relative: the pages name their files as a user would


def stringdiag(*argv: str) -> None:
    subprocess.run([sys.executable, "-m", "stringdiag", *argv], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,860",
                "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND"):
        options.add_argument(arg)
    options.binary_location = shutil.which("chromium")
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))


def main() -> int:
    IMG.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="stringdiag-shots-"))
    pages = {"diagram": tmp / "encoder.html", "derivation": tmp / "linearize.html",
             "taxonomy": tmp / "taxonomy.html", "grid": tmp / "mechanisms.html"}
    stringdiag("render", str(GALLERY / "transformer.diag"), "-d", "TransformerEncoder", "-o", str(pages["diagram"]))
    stringdiag("derive", str(GALLERY / "linearize.deriv"), "-o", str(pages["derivation"]))
    stringdiag("taxonomy", str(GALLERY / "taxonomy.tax"), "-o", str(pages["taxonomy"]))
    stringdiag("enumerate", str(GALLERY / "anatomy.diag"), "--generators", "AttPrep,AttApply,ConcatFF", "--max", "3",
               "--symmetric", "ConcatFF", "--grid", str(pages["grid"]))
    driver = browser()
    css = driver.find_element
    wrote = []

    def shot(name: str) -> None:
        path = IMG / f"html-{name}.png"
        driver.save_screenshot(str(path))
        wrote.append(path)

    try:
        driver.get(pages["diagram"].as_uri())
        shot("diagram")
        css("css selector", 'g.sd-def').click()  # the layers opened
        shot("diagram-expanded")
        driver.get(pages["derivation"].as_uri())
        css("css selector", "tr[data-opens='3']").click()
        shot("derivation")
        driver.get(pages["taxonomy"].as_uri())
        next(b for b in driver.find_elements("css selector", ".sd-members [data-opens]")
             if b.text.startswith("Longformer")).click()
        shot("taxonomy")
        driver.get(pages["grid"].as_uri())
        driver.find_elements("css selector", ".sd-members [data-opens]")[-1].click()
        shot("grid")
    finally:
        driver.quit()
        shutil.rmtree(tmp)
    for path in wrote:
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
