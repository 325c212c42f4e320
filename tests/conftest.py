"""Shared test configuration."""
import os
from pathlib import Path

import pytest
import torch

from helpers import ci

# run by torchrun from test_distributed.py, not a test module itself
collect_ignore = ["ddp_worker.py"]

# Paths in tests are relative to the repository root, wherever pytest is started from.
ROOT = Path(__file__).resolve().parents[1]
os.chdir(ROOT)

# Under CI a skip is a failure: a missing test dependency (pytest.importorskip), a missing program
# (system_programs below) or a parameter list that found nothing must not pass unseen. These
# skips depend on the machine, not on what was installed, and stay skips there:
CI_MAY_SKIP = ("this machine has CUDA", "needs Linux /dev/zero")


def _skip_reason(report) -> str:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return reason.removeprefix("Skipped: ")


def _fail_skip_under_ci(report) -> None:
    if ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = _skip_reason(report)
        if not any(r in reason for r in CI_MAY_SKIP):
            report.outcome = "failed"
            report.longrepr = f"skipped ({reason}), but CI is set, where a skip is a failure"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_skip_under_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_skip_under_ci(outcome.get_result())


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models train faster on one thread (two threads on a busy machine spin and wait);
    modules that train ask for it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def system_programs():
    """``need(packages, *programs)``: skip a test whose Debian programs are missing (``make
    test`` installs them), saying which and how; under ``CI`` a missing one fails it instead,
    since there make has installed them."""
    import shutil

    def need(packages: str, *programs: str, tex: tuple[str, ...] = ()) -> None:
        """``tex``: files LaTeX must find (``kpsewhich``), e.g. tikz.sty."""
        import subprocess

        missing = [p for p in programs if shutil.which(p) is None]
        if shutil.which("kpsewhich"):
            missing += [f for f in tex if subprocess.run(["kpsewhich", f], capture_output=True).returncode]
        if not missing:
            return
        why = (f"{', '.join(missing)} not installed: `make test` installs it as root "
               f"(or: sudo apt-get install -y {packages})")
        if ci():
            pytest.fail(f"{why}; CI is set, where a missing program is a failure")
        pytest.skip(why)

    return need
