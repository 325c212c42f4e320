"""Empty and degenerate inputs in every compiled gallery module: a batch of none, a sequence of
no positions and of one. Each either runs, giving outputs of the shape the output types say
(an empty batch or sequence axis where the input had one), or is refused clearly; it never
fails inside torch. A batch of two at length one agrees with each example run alone."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from stringdiag import DiagError, load
from stringdiag.lower import compile
from stringdiag.verify.oracle import dim_names

GALLERY = Path(__file__).resolve().parents[1] / "gallery"


def cases() -> list[tuple[str, str]]:
    out = []
    for path in sorted(GALLERY.glob("*.diag")):
        prog = load(path)
        for name in prog.defs:
            d = prog[name]
            if d.program is prog and d.input_types:
                out.append((path.name, name))
    return out


def sizes_for(d, seq: int) -> dict[str, int]:
    prog = d.program
    names = dim_names(d.expand())
    return {n: seq if prog.dims.get(n) is not None and prog.dims[n].kind == "seq" else 3 for n in names}


def run(d, sizes: dict[str, int], batch: int):
    torch.manual_seed(0)
    m = compile(d, dims=sizes, dtype=torch.float64)
    xs = [torch.randn(batch, *[dim.evaluate(sizes) for dim in ty], dtype=torch.float64) for ty in d.input_types]
    with torch.no_grad():
        y = m(*xs)
    return xs, (tuple(y) if isinstance(y, (tuple, list)) else (y,)), m


CASES = cases()


@pytest.mark.parametrize("file, name", CASES, ids=[f"{f}:{n}" for f, n in CASES])
def test_a_batch_of_none_and_sequences_of_none_and_one(file, name):
    d = load(GALLERY / file)[name]
    try:
        run(d, sizes_for(d, 3), 2)
    except DiagError as e:  # refused clearly (an abstract family, a size it needs given): nothing to run
        assert e.message
        return
    except RuntimeError as e:  # only a model of token ids fails on random real inputs
        ops = {d.expand().record(b).op for b in d.expand().boxes()}
        assert ops & {"embed", "bucket"}, f"{file}:{name} fails inside torch on real inputs: {e}"
        return
    for seq, batch in [(3, 0), (0, 2), (1, 2)]:
        sizes = sizes_for(d, seq)
        try:
            xs, ys, m = run(d, sizes, batch)
        except DiagError as e:  # refused clearly is allowed; a failure inside torch is not
            assert e.message, (seq, batch)
            continue
        for y, ty in zip(ys, d.output_types):
            assert tuple(y.shape) == (batch, *[dim.evaluate(sizes) for dim in ty]), (seq, batch, y.shape)
        if seq == 1 and batch == 2:
            with torch.no_grad():
                alone = [m(*[x[k:k + 1] for x in xs]) for k in range(2)]
            for k, one in enumerate(alone):
                one = tuple(one) if isinstance(one, (tuple, list)) else (one,)
                for y, z in zip(ys, one):
                    torch.testing.assert_close(y[k:k + 1], z, rtol=1e-9, atol=1e-12, equal_nan=True)
