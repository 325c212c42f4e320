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
