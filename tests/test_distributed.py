"""DistributedDataParallel over gloo, two processes on the CPU, as torchrun runs it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from stringdiag.train import checkpoint
from test_train import make

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_two_processes_match_one_process_with_the_same_global_batch(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parent)}
    ddp = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29517",
                          str(HERE / "ddp_worker.py"), str(tmp_path / "ddp"), "8"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    one = subprocess.run([sys.executable, str(HERE / "ddp_worker.py"), str(tmp_path / "one"), "16"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    torch.manual_seed(0)
    start = make()()
    a, b = make()(), make()()
    meta = checkpoint.load(tmp_path / "ddp" / "checkpoint.safetensors", a)
    checkpoint.load(tmp_path / "one" / "checkpoint.safetensors", b)
    assert meta["step"] == 30

    def flat(m):
        return torch.cat([p.flatten() for p in m.state_dict().values()])

    # the same windows, the gradients averaged over the two processes: the same training,
    # up to float32 summation order (which Adam's normalisation amplifies a little)
    moved = (flat(b) - flat(start)).norm()
    assert (flat(a) - flat(b)).norm() < 0.01 * moved  # within 1 % of how far training moved the weights
    assert moved > 0.1
