"""Rules about scans match a cell whatever the order of its per-step inputs: for every order of the
gallery's GLA, RetNet and SSD cells, the shipped rule finds the scan, the rewritten diagram computes
what the original does (compiled, float64, the same weights) and, where the gallery names one, is the
parallel form."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

import stringdiag
from stringdiag.rewrite import find_matches, library, rewrite

ROOT = Path(__file__).resolve().parents[1]
REC = stringdiag.load(str(ROOT / "gallery" / "recurrent.diag"))
DIMS = {"d": 3, "k": 2, "c": 2}
CASES = [("GLARecurrent", "scan_log_gate_channels", "GLAParallel", (2, 6, 3)),
         ("RetentionRecurrent", "scan_decay", None, (2, 3, 2, 3)),  # [m, c, d]: m chunks of c
         ("SSMRecurrent", "scan_log_gate", "SSDAttention", (2, 6, 3))]


def scan_box(d):
    (b,) = [b for b in d.boxes() if d.record(b).scan]
    return b


def reordered(d, perm: tuple[int, ...]):
    """``d`` with its scan's cell reading its per-step inputs in the order ``perm`` (the state first):
    written here, apart from the engine's own search over orders."""
    out = d.copy()
    b = scan_box(out)
    cell = out.record(b).ref
    body = cell.copy()
    full = (0, *perm)
    body.inputs = [cell.inputs[full.index(port)] for port in range(len(full))]
    body.input_names = [cell.input_names[full.index(port)] for port in range(len(full))]
    out.permute_inputs(b, full)
    out.reset(b, out.record(b)._replace(ref=body))
    return out


def run(d, state: dict | None, x: torch.Tensor):
    m = stringdiag.compile(d, dims=DIMS, dtype=torch.float64)
    if state is None:
        torch.manual_seed(0)
        with torch.no_grad():
            for p in m.parameters():
                p.normal_(0, 0.5)
        state = m.state_dict()
    else:
        m.load_state_dict(state)
    return m(x), state


def orders(name: str):
    cell = REC[name].record(scan_box(REC[name])).ref
    return list(itertools.permutations(range(1, len(cell.inputs))))


@pytest.mark.parametrize("name, rule, target, shape", CASES)
def test_every_order_of_a_cells_inputs_derives(name, rule, target, shape):
    x = torch.randn(*shape, dtype=torch.float64)
    want, state = run(REC[name], None, x)
    every = orders(name)
    for k, perm in enumerate(every):
        d = reordered(REC[name], perm)
        if k % 7 == 0 or k == len(every) - 1:  # the helper keeps the function (a scan compiles slowly: some)
            same, _ = run(d, state, x)
            torch.testing.assert_close(same, want, rtol=1e-12, atol=1e-12)
        (m,) = find_matches(d, library()[rule])
        assert bool(m.order) == (perm != tuple(sorted(perm))), m.order
        r = rewrite(d, m)
        assert not any(r.record(b).scan for b in r.boxes())  # the scan is gone: the parallel form
        got, _ = run(r, state, x)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
        if target:
            assert r.expand().isomorphic(REC[target].expand())
