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


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a test of many CPU seconds; `make test-fast` leaves it out "
                                       "(-m 'not slow'), `make test` runs it")


# -- two workers, kept busy: `make test` runs pytest-xdist with --dist loadfile, so that a module's
# shared fixture (a study, a trained run) is built once, not once per worker; the modules that
# hold slow tests are handed out first (--no-loadscope-reorder keeps this order), so that the
# longest work starts early and the short modules fill the end.
def _module_of(item) -> str:
    return item.nodeid.split("::")[0]


WHEEL_TEST = "tests/test_wheel.py::test_the_wheel_installed_in_a_fresh_environment_works_from_an_empty_folder"


def _run_against_the_wheel(config, items) -> None:
    """A docs page that the wheel test runs whole against the installed wheel (one that reaches what
    installing changes, with no block that runs in the clone only) is not run a second time in the
    checkout when the wheel test is in the session: deselected, and counted so (about 80 s of CPU)."""
    if not any(item.nodeid == WHEEL_TEST for item in items):
        return
    from test_docs import blocks
    from test_wheel import _cannot_build, uses_the_install

    if _cannot_build():
        return
    def theirs(item) -> bool:
        page = getattr(getattr(item, "callspec", None), "params", {}).get("page")
        return (item.nodeid.startswith("tests/test_docs.py::test_every_block_runs[") and page is not None
                and uses_the_install(page) and not any(b.marker and b.marker[0] == "clone only" for b in blocks(page)))
    gone = [item for item in items if theirs(item)]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = [item for item in items if not theirs(item)]


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected theirs
def pytest_collection_modifyitems(config, items):
    """Modules holding slow tests first; each module's tests together and in their order."""
    _run_against_the_wheel(config, items)
    slow = {_module_of(item) for item in items if item.get_closest_marker("slow")}
    order: dict[str, tuple[bool, int]] = {}
    for item in items:
        order.setdefault(_module_of(item), (_module_of(item) not in slow, len(order)))
    items.sort(key=lambda item: order[_module_of(item)])


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


# -- where an idle machine's time goes: CPU time per test ----------------------------------------
# Wall-clock durations (--durations) mostly measure the wait for a busy CPU; ``--cpu-durations=N``
# lists the N tests that used the most CPU time (this process and the programs it ran and waited
# for), with the sum over all tests: about what the suite needs of idle cores (with -n too).
def pytest_addoption(parser):
    parser.addoption("--cpu-durations", type=int, default=None, metavar="N",
                     help="list the N tests that used the most CPU time (with the programs they ran)")


def _cpu() -> float:
    import resource
    import time

    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def _timed_phase(item):
    if item.config.getoption("cpu_durations") is None:
        yield
        return
    start = _cpu()
    yield
    item.user_properties.append(("cpu_s", _cpu() - start))  # carried by the report (to xdist's controller too)


pytest_runtest_setup = pytest.hookimpl(hookwrapper=True)(_timed_phase)
pytest_runtest_call = pytest.hookimpl(hookwrapper=True)(_timed_phase)
pytest_runtest_teardown = pytest.hookimpl(hookwrapper=True)(_timed_phase)
_CPU_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    if report.when == "teardown":
        spent = sum(v for k, v in report.user_properties if k == "cpu_s")
        if spent:
            _CPU_SECONDS[report.nodeid] = spent


def pytest_terminal_summary(terminalreporter, config):
    n = config.getoption("cpu_durations")
    if n is None or not _CPU_SECONDS:
        return
    terminalreporter.section(f"most CPU time, {n} tests (the test's process and the programs it ran)")
    for nodeid, spent in sorted(_CPU_SECONDS.items(), key=lambda kv: -kv[1])[:n]:
        terminalreporter.write_line(f"{spent:8.2f}s cpu  {nodeid}")
    terminalreporter.write_line(f"{sum(_CPU_SECONDS.values()):8.2f}s cpu  in all, {len(_CPU_SECONDS)} tests")
