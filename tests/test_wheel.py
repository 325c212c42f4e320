"""The wheel is the product (issue 18): built, installed into a fresh environment, and used from
an empty folder outside the repository, as a user meets it.

The rest of the suite runs from the source tree, where every data file is found whether it
ships or not; this is the test that sees what the wheel lacks. The fresh environment reuses this
interpreter's installed packages (torch and the rest) through a ``.pth`` line written after the
wheel is installed, not ``--system-site-packages``: an environment made from a virtual
environment's interpreter would see the base interpreter's packages, not these. A ``.pth`` line
adds a folder only, so the editable install's own ``.pth`` there (pointing at a checkout) is not
run: the ``stringdiag`` imported is the wheel's, which the test asserts. Nothing is downloaded
(``--no-index``). Skipped only where no wheel can be built (no setuptools or venv), and never
where ``CI`` is set.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import site
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from helpers import ci

ROOT = Path(__file__).resolve().parents[1]
# what a build reads (the rest of the checkout, pictures and study results included, does not ship)
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "stringdiag", "grammars", "rules", "gallery")
_NOT_SOURCES = shutil.ignore_patterns("__pycache__", "*.pyc", "*.svg", "*.png")


def NOT_SOURCES(folder: str, names: list[str]) -> set[str]:
    """Caches and pictures; and gallery/study (results), not the package stringdiag/study."""
    return set(_NOT_SOURCES(folder, names)) | ({"study"} if Path(folder).name == "gallery" else set())


def _cannot_build() -> str | None:
    missing = [m for m in ("setuptools", "venv", "pip") if importlib.util.find_spec(m) is None]
    return f"cannot build a wheel here ({', '.join(missing)} missing)" if missing else None


def _run(cmd: list, cwd: Path, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


class Installed:
    """A fresh environment with the wheel installed, and an empty folder to work in."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        venv = tmp / "venv"
        self.python, self.bin = venv / "bin" / "python", venv / "bin"
        # no PYTHONPATH (the checkout) in any step: pip would take the checkout for an installed copy
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        self.env |= {"PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}", "OMP_NUM_THREADS": "1",
                     "XDG_CACHE_HOME": str(tmp / "cache")}  # a user's first run: no parser tables yet
        self.wheel = self._build()
        self._python([sys.executable, "-m", "venv", "--without-pip", venv])
        self._python([sys.executable, "-m", "pip", "--python", self.python, "install", "--no-deps", "--no-index",
                      "--disable-pip-version-check", "-q", self.wheel])
        self.site = Path(self._python([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]))
        # after installing: pip must not see (and replace) this interpreter's own stringdiag
        (self.site / "_reuse_installed.pth").write_text("\n".join(site.getsitepackages()) + "\n")
        self.work = tmp / "user"
        self.work.mkdir()
        self.ran: set[str] = set()  # the commands run against the wheel

    def _python(self, cmd: list, timeout: int = 120) -> str:
        return _run(cmd, self.tmp, self.env, timeout).stdout.strip()

    def _build(self) -> Path:
        src, dist = self.tmp / "src", self.tmp / "dist"
        src.mkdir()
        for name in SOURCES:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, src / name, ignore=NOT_SOURCES)
            elif (ROOT / name).is_file():
                shutil.copy(ROOT / name, src / name)
        done = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                     "--disable-pip-version-check", "-v", src, "-w", dist], self.tmp, self.env, timeout=300)
        self.build_log = done.stdout + done.stderr  # setuptools' own output (-v: pip passes it on)
        (wheel,) = dist.glob("stringdiag-*.whl")
        return wheel

    def stringdiag(self, *args) -> str:
        self.ran.add(args[0])
        return _run([self.bin / "stringdiag", *args], self.work, self.env).stdout


def _the_wheel_ships_the_data_and_not_the_pictures(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for folder in ("grammars", "rules", "gallery", "gallery/proofs", "gallery/modern"):
        want = {f"stringdiag/{p.relative_to(ROOT).as_posix()}" for p in (ROOT / folder).glob("*")
                if p.suffix in (".lark", ".rules", ".diag", ".deriv", ".tax") or p.name.endswith(".tables.json")}
        assert want and want <= names, sorted(want - names)
    assert {"stringdiag/prelude/prelude.diag", "stringdiag/py.typed", "stringdiag/__main__.py",
            "stringdiag/render/assets/view.js", "stringdiag/render/assets/view.css"} <= names
    # e.g. a data folder setuptools sees as a package it was not told of ("Package would be ignored")
    assert "Warning" not in installed.build_log, installed.build_log[installed.build_log.find("Warning") - 500:][:2000]
    assert any(n.endswith("/licenses/LICENSE") for n in names)
    data = sorted(n for n in names if n.endswith((".svg", ".png", ".csv", ".json")) and not n.endswith(".tables.json"))
    # GPT-2's weight map for gallery/lm.diag, construct's example inputs (its --help runs them), Fig. 2(b)'s
    # reference lines; no study results, no pictures
    inputs = sorted(f"stringdiag/gallery/{p.name}" for p in (ROOT / "gallery").glob("construct.*.json"))
    assert len(inputs) == 5 and data == sorted(["stringdiag/gallery/lm.gpt2.json", *inputs,
                                                "stringdiag/study/published.csv"]), data


def _the_metadata_names_the_project_urls(installed: Installed) -> None:
    """pyproject's [project.urls], read back from the installed METADATA (as pip and PyPI show them)."""
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    out = installed._python([installed.python, "-c", "from importlib.metadata import metadata; "
                             "print('\\n'.join(metadata('stringdiag').get_all('Project-URL') or []))"])
    assert out.splitlines() == [f"{label}, {url}" for label, url in urls.items()], out
    assert "https://arxiv.org/abs/2407.02423" in urls.values()  # the paper the tool reproduces


def _the_environment_imports_the_wheel_not_the_checkout(installed: Installed) -> None:
    out = _run([installed.python, "-c", "import stringdiag; print(stringdiag.__file__)"],
               installed.work, installed.env).stdout
    assert Path(out.strip()).is_relative_to(installed.site)


def _python_m_stringdiag_version(installed: Installed) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    out = _run([installed.python, "-m", "stringdiag", "--version"], installed.work, installed.env).stdout
    assert out.strip() == f"stringdiag {version}"


def _check_render_info_from_an_empty_folder(installed: Installed) -> None:
    shutil.copy(ROOT / "gallery" / "attention.diag", installed.work)
    assert "attention.diag: ok (4 diagrams" in installed.stringdiag("check", "attention.diag")
    installed.stringdiag("render", "attention.diag", "-d", "SelfAttention", "-o", "att.svg")
    assert "<svg" in (installed.work / "att.svg").read_text()
    installed.stringdiag("render", "attention.diag", "-d", "SelfAttention", "-o", "att.html")
    page = (installed.work / "att.html").read_text()  # the view's script and style are package data
    script = (ROOT / "stringdiag" / "render" / "assets" / "view.js").read_text(encoding="utf-8")
    assert "<svg" in page and script.strip().splitlines()[-1] in page
    assert "SelfAttention : [s, d] -> [s, d]" in installed.stringdiag("info", "attention.diag", "-d", "SelfAttention")


def _a_users_file_imports_a_shipped_one_by_package_name(installed: Installed) -> None:
    (installed.work / "twice.diag").write_text('import "stringdiag:gallery/attention.diag"\n'
                                               "diagram Twice(x: [s, d]) -> [s, d] {\n"
                                               "  return SelfAttention(SelfAttention(x))\n}\n")
    assert "twice.diag: ok (1 diagram" in installed.stringdiag("check", "twice.diag")


def _derive_a_shipped_derivation_with_rules_by_name(installed: Installed) -> None:
    from stringdiag.derive.derivation import load_derivation  # the source tree's, for reference

    out = installed.stringdiag("derive", "stringdiag:gallery/linearize.deriv")
    assert out.startswith("stringdiag:gallery/linearize.deriv: 5 steps, from GenericSimilarityAttention to "
                          "LinearAttention (isomorphic)")  # not the site-packages path
    assert load_derivation(ROOT / "gallery" / "linearize.deriv").table() in out


def _compile_reads_the_fast_path_rules(installed: Installed) -> None:
    shutil.copy(ROOT / "gallery" / "attention.diag", installed.work / "compiled.diag")
    out = installed.stringdiag("compile", "compiled.diag", "-d", "SelfAttention", "--dims", "d=16,k=8")
    assert "scaled_dot_product_attention" in out  # fastpath.rules fused the attention
    assert "SelfAttention : [s, d] -> [s, d]: 1,360 parameters" in out


def _compile_exports_a_folder_that_runs_with_torch_alone(installed: Installed) -> None:
    """The README's `compile -o M1`: the folder imports and runs in the new environment."""
    shutil.copy(ROOT / "gallery" / "anatomy.diag", installed.work)
    installed.stringdiag("compile", "anatomy.diag", "-d", "M1", "--dims", "d=32,k=8", "-o", "M1")
    script = ("import sys, torch; sys.modules['stringdiag'] = None; from M1 import M1; "
              "y = M1()(torch.randn(2, 5, 32)); print(tuple(y.shape))")
    assert _run([installed.python, "-c", script], installed.work, installed.env).stdout.strip() == "(2, 5, 32)"


def _enumerate_with_the_shipped_rules_that_import_the_gallery(installed: Installed) -> None:
    shutil.copy(ROOT / "gallery" / "anatomy.diag", installed.work)
    out = installed.stringdiag("enumerate", "anatomy.diag", "--generators", "AttPrep,AttApply,ConcatFF",
                               "--max", "2", "--rules", "stringdiag:rules/absorb.rules", "stringdiag:rules/merge.rules")
    assert "reduced" in out and "AttApply(AttPrep(x), x)" in out


def _a_short_train(installed: Installed) -> None:
    shutil.copy(ROOT / "gallery" / "anatomy.diag", installed.work / "train.diag")
    out = installed.stringdiag("train", "train.diag", "-d", "M1", "--data", "synthetic", "--max-steps", "2",
                               "--layers", "1", "--d-model", "16", "--heads", "2", "--context", "8",
                               "--batch-size", "4", "--eval-every", "2", "--no-test", "--dims", "k=8", "-o", "run")
    assert "step 2:" in out
    assert (installed.work / "run" / "checkpoint.safetensors").is_file()


def _construct_reads_the_shipped_blocks(installed: Installed) -> None:
    (installed.work / "seqs.json").write_text(
        '{"sequences": [{"label": "pos", "tokens": [[0.0, 1.0], [2.0, 0.5]]}, {"label": "neg", "tokens": [[1.0, 1.0]]}]}')
    out = installed.stringdiag("construct", "hardmax-classifier", "--sequences", "seqs.json", "-o", "cons")
    assert "every sequence lands in its target set (2 of 2" in out
    assert (installed.work / "cons" / "hardmax.diag").read_text() == (ROOT / "gallery" / "hardmax.diag").read_text()


def _a_whole_model_trains_and_samples_from_its_shipped_name(installed: Installed) -> None:
    out = installed.stringdiag("train", "stringdiag:gallery/lm.diag", "-d", "GPT", "--data", "synthetic",
                               "--dims", "d=16,k=8,f=32", "--context", "8", "--batch-size", "4", "--max-steps", "2",
                               "--test-tokens", "20", "-o", "lm")
    assert "step 2:" in out and out.strip().splitlines()[-1].startswith("test perplexity ")
    sampled = installed.stringdiag("sample", "lm", "--prompt", "w01 w02", "--tokens", "3")
    assert sampled.strip().startswith("w01 w02 |") and len(sampled.split("|")[1].split()) == 3
    script = ("import torch, stringdiag\nrun = stringdiag.load_run('lm')\nstringdiag.save_pretrained(run.model, 'hf')\n"
              "from transformers import AutoModelForCausalLM\n"
              "m = AutoModelForCausalLM.from_pretrained('hf', trust_remote_code=True)\n"
              "print(tuple(m.generate(torch.tensor([[2, 3]]), max_new_tokens=4, do_sample=False).shape))\n")
    assert _run([installed.python, "-c", script], installed.work, installed.env).stdout.strip().endswith("(1, 6)")


def _shipped_names_are_shown_never_site_packages(installed: Installed) -> None:
    wrong = subprocess.run([installed.bin / "stringdiag", "derive", "stringdiag:gallery/attention.diag"],
                           cwd=installed.work, env=installed.env, capture_output=True, text=True)
    assert wrong.returncode == 2 and "is a diagram file (.diag); derive expects" in wrong.stderr
    missing = subprocess.run([installed.bin / "stringdiag", "check", "gallery/attention.diag"],
                             cwd=installed.work, env=installed.env, capture_output=True, text=True)
    assert missing.returncode == 1 and "the copy shipped with stringdiag is stringdiag:gallery/attention.diag" \
        in missing.stderr
    script = ("import stringdiag\np = stringdiag.load('stringdiag:gallery/attention.diag')\nprint(repr(p))\n"
              "try:\n    p['Nope']\nexcept KeyError as e:\n    print(e.args[0])\n")
    out = _run([installed.python, "-c", script], installed.work, installed.env).stdout
    assert out.startswith("<Program stringdiag:gallery/attention.diag: SelfAttention"), out
    assert "no diagram named 'Nope' in stringdiag:gallery/attention.diag" in out
    rules = _run([installed.bin / "stringdiag", "check", "stringdiag:rules/algebra.rules"], installed.work, installed.env)
    out += rules.stdout + rules.stderr  # its warnings' positions are in the shipped file
    assert str(installed.site) not in out and "site-packages" not in out


def _the_readmes_python_runs_from_an_empty_folder(installed: Installed) -> None:
    """The README's Python blocks, as a user pastes them after a wheel install."""
    import re

    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.M | re.S)
    assert blocks
    for block in blocks:
        _run([installed.python, "-c", block], installed.work, installed.env)


def uses_the_install(page: Path) -> bool:
    """A page whose blocks reach what a wheel install changes: Python run against the package in
    site-packages, a shipped file named ``stringdiag:...``, or the package run as a module. The
    other pages run commands on example files only; tests/test_docs.py runs them in the clone."""
    from test_docs import blocks

    text = page.read_text(encoding="utf-8")
    python = any(b.kind in ("python", "pycon") for b in blocks(page))
    return python or any(s in text for s in ("stringdiag:gallery", "stringdiag:rules", "stringdiag examples",
                                             "python -m stringdiag"))


def _subcommands(pages: list[Path]) -> set[str]:
    from test_docs import blocks, commands

    return {cmd.split()[1] for page in pages for b in blocks(page) if b.kind == "console" and not b.marker
            for cmd, _ in commands(b.text) if cmd.startswith("stringdiag ")}


def _the_pages_that_use_the_install_run_against_the_wheel(installed: Installed) -> None:
    """Those pages' blocks, run by tests/test_docs.py as the suite runs them, but in the new
    environment: its ``stringdiag`` and ``python`` are the wheel's, nothing puts the checkout on
    the import path, and the example files the pages name (``gallery/...``, ``rules/...``) are
    those ``stringdiag examples`` copies out of the installed package. The other pages' commands
    (run once, in the clone) rest on what the steps around this one check against the wheel:
    the package whole, the example files the clone's, and each of their commands run here too."""
    from test_docs import PAGES

    work = installed.work / "docs"
    work.mkdir()
    env = installed.env | {"STRINGDIAG_DOCS_AGAINST": "installed"}
    pages = [p for p in PAGES if uses_the_install(p)]
    ids = [f"{ROOT / 'tests' / 'test_docs.py'}::test_every_block_runs[{p.name}]" for p in pages]
    done = subprocess.run([installed.python, "-m", "pytest", *ids, "-q", "-p", "no:cacheprovider", "--rootdir", ROOT],
                          cwd=work, env=env, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout[-6000:] + done.stderr[-2000:]
    assert f"\n{len(pages)} passed" in "\n" + done.stdout.strip().splitlines()[-1], done.stdout[-2000:]
    installed.ran |= _subcommands(pages)


def _the_wheel_holds_the_whole_package(installed: Installed) -> None:
    """Every file of the package in the checkout (modules and data), so that what the pages run
    in the clone finds the same code and data in the wheel."""
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    package = {p.relative_to(ROOT).as_posix() for p in (ROOT / "stringdiag").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    assert package and package <= names, sorted(package - names)


def _the_example_files_are_the_clones(installed: Installed) -> None:
    """``stringdiag examples`` gives, byte for byte, the gallery and rules files of the checkout
    that the pages run in the clone read (all that ship; gallery/study is the clone's alone)."""
    work = installed.work / "examples-copy"
    _run([installed.bin / "stringdiag", "examples", work], installed.work, installed.env)
    copied = {p.relative_to(work).as_posix(): p.read_bytes() for p in work.rglob("*") if p.is_file()}
    for rel, data in copied.items():
        assert data == (ROOT / rel).read_bytes(), f"{rel}: the shipped copy differs from the checkout's"
    checkout = {p.relative_to(ROOT).as_posix() for folder in ("gallery", "rules") for p in (ROOT / folder).rglob("*")
                if p.is_file() and p.suffix in (".diag", ".deriv", ".tax", ".rules")
                and "study" not in p.relative_to(ROOT).parts}
    assert checkout <= set(copied), sorted(checkout - set(copied))


def _every_command_of_the_other_pages_ran_against_the_wheel(installed: Installed) -> None:
    from test_docs import PAGES

    others = _subcommands([p for p in PAGES if not uses_the_install(p)])
    assert others and others <= installed.ran, sorted(others - installed.ran)


# --help examples not run by the wheel test, each with why (a line is left out when it holds the text)
EXAMPLES_NOT_RUN = {
    ("taxonomy", "--verify"): "checks every reduction of the tree numerically: minutes",
    ("study", "-o runs/"): "trains one model per mechanism, layer count and seed: minutes to hours",
    ("study", "--report"): "reads the study the first example trains, which is not run",
}
# commands that run until they are stopped: started, and stopped as a user stops them
SERVERS = {
    "serve": "serving ",  # serves until stopped: waits for the line naming its address, then SIGTERM (exit 0)
}


def _help_examples(installed: Installed, command: str, work: Path) -> list[str]:
    text = _run([installed.bin / "stringdiag", command, "--help"], work, installed.env).stdout
    return [line for line in text.split("\nexamples:\n", 1)[1].replace("\\\n", " ").splitlines() if line.strip()]


def _serve_until_it_answers(installed: Installed, argv: list[str], work: Path, ready: str) -> None:
    """A server started as the example says, stopped by SIGTERM once it prints ``ready``."""
    proc = subprocess.Popen([str(installed.bin / "stringdiag"), *argv], cwd=work, env=installed.env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith(ready), f"{argv}: {line}"
    finally:
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=30)[0]
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}: {rest}"


def _every_help_example_runs_from_an_empty_folder(installed: Installed) -> None:
    """Every command's --help examples as a user pastes them, in order, in one empty folder (an
    example may read what an earlier one of its command wrote), but those of EXAMPLES_NOT_RUN;
    the language server ends at once with its input closed, servers are stopped once serving."""
    import shlex

    from stringdiag.cli.main import COMMANDS

    work = installed.work / "examples"
    work.mkdir()
    ran: dict[str, int] = {}
    left: set = set()
    for command in COMMANDS:
        for line in _help_examples(installed, command, work):
            if keys := {(c, text) for c, text in EXAMPLES_NOT_RUN if c == command and text in line}:
                left |= keys
                continue
            argv = shlex.split(line)[1:]
            if command in SERVERS:
                _serve_until_it_answers(installed, argv, work, SERVERS[command])
            else:
                done = subprocess.run([str(installed.bin / "stringdiag"), *argv], cwd=work, env=installed.env,
                                      capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
                assert done.returncode == 0, f"{line} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            installed.ran.add(argv[0])
            ran[command] = ran.get(command, 0) + 1
    assert left == set(EXAMPLES_NOT_RUN), sorted(set(EXAMPLES_NOT_RUN) - left)  # none stale
    assert set(ran) == set(COMMANDS), sorted(set(COMMANDS) - set(ran))


STEPS = [
    _the_metadata_names_the_project_urls,
    _the_wheel_ships_the_data_and_not_the_pictures,
    _the_environment_imports_the_wheel_not_the_checkout,
    _python_m_stringdiag_version,
    _check_render_info_from_an_empty_folder,
    _a_users_file_imports_a_shipped_one_by_package_name,
    _derive_a_shipped_derivation_with_rules_by_name,
    _compile_reads_the_fast_path_rules,
    _compile_exports_a_folder_that_runs_with_torch_alone,
    _enumerate_with_the_shipped_rules_that_import_the_gallery,
    _construct_reads_the_shipped_blocks,
    _a_short_train,
    _a_whole_model_trains_and_samples_from_its_shipped_name,
    _shipped_names_are_shown_never_site_packages,
    _the_readmes_python_runs_from_an_empty_folder,
    _the_pages_that_use_the_install_run_against_the_wheel,
    _the_wheel_holds_the_whole_package,
    _the_example_files_are_the_clones,
    _every_help_example_runs_from_an_empty_folder,
    _every_command_of_the_other_pages_ran_against_the_wheel,
]


@pytest.mark.slow
def test_the_wheel_installed_in_a_fresh_environment_works_from_an_empty_folder(tmp_path):
    """One test, its steps in the order a user meets them: under pytest-xdist one worker builds
    one wheel (a module-scoped fixture would build it once per worker)."""
    why = _cannot_build()
    if why and ci():
        pytest.fail(f"{why}; CI is set, so the wheel test must run")
    if why:
        pytest.skip(why)
    installed = Installed(tmp_path)
    for step in STEPS:
        step(installed)


# -- package names in source files, from the source tree (fast; no wheel needed) --------------
def test_a_package_name_resolves_from_any_folder_and_a_relative_one_beside_the_file(tmp_path, monkeypatch):
    import stringdiag
    from stringdiag.graph.expand import expand
    from stringdiag.rewrite.rule import load_rules

    monkeypatch.chdir(tmp_path)  # outside the checkout
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "local.diag").write_text(
        'import "stringdiag:gallery/attention.diag"\n'
        "diagram Twice(x: [s, d]) -> [s, d] {\n  return SelfAttention(SelfAttention(x))\n}\n")
    (tmp_path / "mine" / "top.diag").write_text('import "local.diag"\n')  # relative: beside top.diag
    twice = stringdiag.load(tmp_path / "mine" / "top.diag")["Twice"]
    by_path = stringdiag.load(ROOT / "gallery" / "attention.diag")["SelfAttention"]
    assert twice.signature() == "Twice : [s, d] -> [s, d]" and len(expand(twice)) == 2 * len(expand(by_path))
    shipped = load_rules("stringdiag:rules/absorb.rules")  # it imports the gallery by package name
    assert [r.name for r in shipped] == [r.name for r in load_rules(ROOT / "rules" / "absorb.rules")]
    assert all(Path(r.proof).is_file() and Path(r.proof).is_relative_to(ROOT / "gallery" / "proofs")
               for r in shipped if r.proof is not None)


@pytest.mark.parametrize("name, message", [
    ("stringdiag:secret/x.diag", "names no shipped file: write stringdiag:FOLDER/FILE"),
    ("stringdiag:gallery", "names no shipped file"),
    ("stringdiag:gallery/../rules/algebra.rules", "leaves the shipped folders"),
    ("stringdiag:gallery/nothere.diag", "no such file"),
])
def test_a_bad_package_name_is_an_error_at_its_place(tmp_path, capsys, name, message):
    from stringdiag.cli.main import main

    (tmp_path / "bad.diag").write_text(f'dim d : fixed\nimport "{name}"\n')
    assert main(["check", str(tmp_path / "bad.diag")]) == 1
    err = capsys.readouterr().err
    assert "bad.diag:2:8: error: " in err and message in err and "Traceback" not in err
