"""The type checker runs: mypy, configured in pyproject.toml, finds no error in the rooms held to
it (graph/, analysis/, rewrite/, syntax/, elaborate/, verify/, data/, construct/, study/, search/,
derive/, train/); docs/architecture.md lists the others' counts.

The package ships ``py.typed``, so its users' checkers read these annotations: in these rooms
they are checked, not just written."""
from __future__ import annotations

from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is in the test extra")

ROOT = Path(__file__).resolve().parent.parent
TYPED = ("graph", "analysis", "rewrite", "syntax", "elaborate", "verify", "data", "construct", "study", "search",
         "derive", "train")


def mypy(*args: str) -> tuple[str, int]:
    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), *args])
    return out + err, status


def test_the_typed_rooms_have_no_type_error():
    report, status = mypy(*(str(ROOT / "stringdiag" / room) for room in TYPED))
    assert status == 0, report


def test_the_check_can_fail():
    report, status = mypy("-c", "from stringdiag.graph.box import Box, Kind\nBox(Kind.LEARN, 3)")
    assert status == 1 and 'incompatible type "int"; expected "str"' in report, report
