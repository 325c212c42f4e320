"""Writes the generated parts of the documentation: the rule library page (every rule of
``rules/*.rules`` with its source and a picture of its two sides), the lower half of the
gallery page (every gallery file with its source and pictures) and the architecture page's
table of floors (``tests/test_layers.py``'s ``LAYERS``, the list the import checks hold the code to).

The first two are not committed: ``mkdocs build`` (``make docs``) makes them as it builds the
site, through this file's ``on_files`` hook (``mkdocs.yml``), so they cannot go stale; the floor
table lives inside a written page and is rewritten in place.

    python docs/generate.py                  # the two pages into build/docs/, the floor table in place
    python docs/generate.py --out DIR        # the two pages into DIR
    python docs/generate.py --pictures       # and the pictures of the rules, docs/rules/NAME.svg

Run from the repository root with this checkout importable. The rules' pictures need Graphviz.
"""
from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MARKER = "<!-- generated below by docs/generate.py: edit the files it reads, not this page -->"
SKIP_SOURCE = {"mechanisms.diag"}  # 1,600 generated lines: linked, not shown


def leading_comment(text: str) -> str:
    """The comment lines a file opens with, as prose."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return re.sub(r"\n(?!\n)", " ", "\n".join(lines)).strip()


def rule_sources(text: str) -> dict[str, str]:
    """Each rule's text: from its ``rule NAME`` line to the line before the next rule or
    comment block, trailing blank and comment lines left out."""
    lines = text.splitlines()
    starts = [k for k, line in enumerate(lines) if line.startswith("rule ")]
    out = {}
    for n, k in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        body = lines[k:end]
        while body and (not body[-1].strip() or body[-1].startswith("#")):
            body.pop()
        out[body[0].split()[1].split("<")[0].split("(")[0]] = "\n".join(body)
    return out


def rule_page() -> str:
    from stringdiag.rewrite.rule import load_rules

    parts = ["# Rule library", "",
             "The rules `derive`, `normalize`, `enumerate` and `compile` use, file by file, each with its",
             "source and its two sides drawn left and right of the relation (≡ an equation, usable both",
             "ways; ⇒ a reduction). Every equation is checked numerically by `stringdiag check FILE.rules",
             "--verify`; the format is in the [language reference](language.md#rules-rules-files).",
             "This page is written by `docs/generate.py` from the files themselves.", ""]
    for path in sorted((ROOT / "rules").glob("*.rules")):
        text = path.read_text(encoding="utf-8")
        sources = rule_sources(text)
        parts += [f"## {path.name}", "", leading_comment(text), ""]
        for rule in load_rules(path):
            parts += [f"### {rule.name}", "", f"{rule.symbol} — {rule.kind}" +
                      (f", proved by `{Path(os.path.normpath(rule.proof)).relative_to(ROOT).as_posix()}`" if rule.proof else ""), "",
                      "```rules", f"# rules/{path.name}", sources[rule.name], "```", "",
                      f"![{rule.name}: left and right]({'rules'}/{rule.name}.svg)", ""]
    return "\n".join(parts)


def rule_pictures() -> None:
    from stringdiag.render.draw import strip
    from stringdiag.rewrite.rule import load_rules

    out = DOCS / "rules"
    out.mkdir(exist_ok=True)
    for rule in load_rules(ROOT / "rules"):
        svg = strip([("left", "", rule.lhs), ("right", rule.symbol, rule.rhs)]).pipe(format="svg").decode()
        (out / f"{rule.name}.svg").write_text(svg, encoding="utf-8")


def gallery_part() -> str:
    gallery = ROOT / "gallery"
    parts = [MARKER, ""]
    files = [p for pattern in ("*.diag", "*.deriv", "*.tax", "modern/*.diag") for p in sorted(gallery.glob(pattern))]
    for path in files:
        text, name = path.read_text(encoding="utf-8"), path.relative_to(gallery).as_posix()
        parts += [f"### {name}", "", leading_comment(text), ""]
        if name in SKIP_SOURCE:
            parts += [f"The file is written by `stringdiag enumerate` ({len(text.splitlines())} lines).", ""]
        else:
            parts += [f"```{path.suffix[1:]}", f"# gallery/{name}", text.rstrip("\n"), "```", ""]
        stem = name.removesuffix(path.suffix).replace("/", ".")  # modern/llama.diag draws modern.llama.*.svg
        pictures = sorted(gallery.glob(f"{stem}.*.svg")) if path.suffix == ".diag" else \
            [p for p in [gallery / f"{stem}.svg"] if p.exists()]
        for picture in pictures:
            parts += [f"![{picture.stem}](gallery/{picture.name})", ""]
    return "\n".join(parts)


def gallery_page() -> str:
    head = (DOCS / "gallery.md").read_text(encoding="utf-8").split(MARKER)[0].rstrip("\n")
    return head + "\n\n" + gallery_part()


FLOORS = ("<!-- the floors, generated by docs/generate.py from tests/test_layers.py's LAYERS -->",
          "<!-- end of the floors -->")


def floor_table() -> str:
    """The floors of the package, lowest first: a module imports only from its own room or a
    lower floor (``tests/test_layers.py``)."""
    tree = ast.parse((ROOT / "tests" / "test_layers.py").read_text(encoding="utf-8"))
    (layers,) = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "LAYERS" for t in n.targets)]
    floors: dict[float, list[str]] = {}
    for room, floor in layers.items():
        floors.setdefault(floor, []).append(room if room.startswith("__") else f"{room}/" if
                                            (ROOT / "stringdiag" / room).is_dir() else f"{room}.py")
    rows = [f"| {k} | {', '.join(f'`{r}`' for r in sorted(rooms))} |" for k, (_, rooms) in enumerate(sorted(floors.items()))]
    return "\n".join(["| floor | rooms (of `stringdiag/`) |", "|---|---|", *rows])


def architecture_page() -> str:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    head, rest = text.split(FLOORS[0])
    tail = rest.split(FLOORS[1])[1]
    return f"{head}{FLOORS[0]}\n{floor_table()}\n{FLOORS[1]}{tail}"


def pages() -> dict[str, str]:
    """The generated pages, by their path under ``docs/``."""
    return {"rule-library.md": rule_page(), "gallery.md": gallery_page()}


def on_files(files, config):
    """mkdocs hook: the generated pages join (or replace) the site's files as it is built."""
    from mkdocs.structure.files import File

    for name, text in pages().items():
        written = files.get_file_from_path(name)
        if written is not None:
            files.remove(written)
        files.append(File.generated(config, name, content=text))
    return files


def write_pages(out: Path) -> list[Path]:
    """The generated pages written into ``out`` (to read them without building the site)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, text in pages().items():
        (out / name).write_text(text, encoding="utf-8")
    return sorted(out / name for name in pages())


def main(argv: list[str]) -> int:
    write_pages(Path(argv[argv.index("--out") + 1]) if "--out" in argv else ROOT / "build" / "docs")
    (DOCS / "architecture.md").write_text(architecture_page(), encoding="utf-8")
    if "--pictures" in argv:
        rule_pictures()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
