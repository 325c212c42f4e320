"""``stringdiag examples``: the shipped gallery and rules copied into a folder, so that the docs'
commands run as shown after a wheel install (tests/test_wheel.py runs the docs there)."""
import tomllib
from pathlib import Path

from stringdiag.cli.examples import SHIPPED, shipped_files
from stringdiag.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def test_what_it_copies_is_what_the_wheel_ships():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    want = {"gallery": set(data["stringdiag.gallery"]) | {f"{sub}/{p}" for sub in ("proofs", "modern")
                                                          for p in data[f"stringdiag.gallery.{sub}"]},
            "rules": set(data["stringdiag.rules"])}
    assert {k: set(v) for k, v in SHIPPED.items()} == want
    files = shipped_files()
    by_glob = {f"{name}/{p.relative_to(ROOT / name).as_posix()}" for name, pats in want.items()
               for pat in pats for p in (ROOT / name).glob(pat)}
    assert set(files) == by_glob and "gallery/attention.diag" in files and "rules/algebra.rules" in files
    assert not any("/study/" in f or f.endswith(".svg") for f in files)


def test_it_copies_once_and_the_copies_check_where_they_lie(tmp_path, capsys, monkeypatch):
    assert main(["examples", str(tmp_path / "ex")]) == 0
    out = capsys.readouterr().out
    n = len(shipped_files())
    assert out.startswith(f"copied {n} of the {n} example files (")
    for rel, source in shipped_files().items():
        assert (tmp_path / "ex" / rel).read_bytes() == source.read_bytes()
    monkeypatch.chdir(tmp_path / "ex")
    assert main(["check", "gallery/attention.diag", "rules/absorb.rules"]) == 0
    assert main(["examples"]) == 0 and f"copied 0 of the {n} example files" in capsys.readouterr().out


def test_it_never_overwrites_a_changed_file_and_then_writes_nothing(tmp_path, capsys):
    (tmp_path / "gallery").mkdir()
    (tmp_path / "gallery" / "attention.diag").write_text("# mine\n")
    assert main(["examples", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "attention.diag is already there and differs" in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["attention.diag", "gallery"]
    (tmp_path / "afile").write_text("")
    assert main(["examples", str(tmp_path / "afile")]) == 2 and "is a file, not a folder" in capsys.readouterr().err
