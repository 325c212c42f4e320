"""Shared test configuration."""
import pytest
import torch

# run by torchrun from test_distributed.py, not a test module itself
collect_ignore = ["ddp_worker.py"]


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
    import os
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
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI is set, where a missing program is a failure")
        pytest.skip(why)

    return need
