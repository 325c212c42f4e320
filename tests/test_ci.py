"""Under CI (``CI=true``, exported by ``.ci/run``) a skip is a failure: a missing test dependency,
a parameter list that found no files, a skip for a reason not listed as the machine's. Checked
by running pytest on a scratch folder with this folder's ``conftest.py`` and ``helpers.py``."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CASES = '''
import pytest

def test_a_missing_module():
    pytest.importorskip("no_such_module_for_the_ci_check")

@pytest.mark.parametrize("path", [])
def test_an_empty_parameter_list(path):
    pass

@pytest.mark.skipif(True, reason="this machine has CUDA")
def test_a_skip_of_the_machine():
    pass

def test_a_plain_pass():
    pass
'''
MODULE_SKIP = 'import pytest\npytest.importorskip("no_such_module_for_the_ci_check")\n\ndef test_x():\n    pass\n'


def _run(folder: Path, ci: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": ci} if ci is not None else {})
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "--continue-on-collection-errors",
                          str(folder)], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    return res.stdout + res.stderr


def test_a_skip_fails_under_ci_and_stays_a_skip_without_it(tmp_path):
    for f in ("conftest.py", "helpers.py"):
        shutil.copy(HERE / f, tmp_path / f)
    (tmp_path / "test_cases.py").write_text(CASES)
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    out = _run(tmp_path, "true")
    assert "FAILED test_cases.py::test_a_missing_module" in out, out
    assert "ERROR test_cases.py::test_an_empty_parameter_list" in out, out  # it fails at set-up
    assert "SKIPPED" in out and "this machine has CUDA" in out, out
    assert "PASSED test_cases.py::test_a_plain_pass" in out, out
    assert "ERROR test_module_skip.py" in out and "CI is set" in out, out
    # set but off: only a conftest that reads CI with helpers.ci (the one parser) skips here;
    # unset and the other spellings are helpers.ci's doctest
    out = _run(tmp_path, "false")
    assert "FAILED" not in out and "ERROR" not in out, out
    assert "4 skipped" in out and "1 passed" in out, out
