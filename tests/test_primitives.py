"""One meaning per primitive (issue 7, item 4).

The prelude defines ``softmax``, ``ssoftmax``, ``scale``, ``mean``, ``sum``, ``elu1``,
``layernorm`` and the fused attentions (``sdpa``, ``causal_sdpa``,
``causal_linear_attention``, ``causal_linear_sum``) as diagrams, and the compiler also
lowers them natively (``NATIVE`` in stringdiag/lower/table.py: a stable softmax, a fused
layer norm, ``F.scaled_dot_product_attention``, chunked linear attention). Here every name
in ``NATIVE`` (the set itself, so that a new native lowering is covered as soon as it is
added) is compiled twice in float64 — natively, and with ``native=False``, which opens the
prelude's definition so that its body's own primitives are used — and both are compared
with each other and with an independent hand-written torch reference, on random inputs
of several sizes, with extra leading batch axes, and for the softmaxes on inputs of large
magnitude. Layer norm gets the same random gain and bias on both sides.

The second half checks the primitive table's ``FIXED`` section against the prelude's
``fixed`` declarations: every fixed primitive of the prelude has an entry (and nothing
else has), every one compiles and runs, and every scalar one agrees with a reference
written with Python's ``math``.
"""
from __future__ import annotations

import math
from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import stringdiag
from stringdiag import DiagError
from stringdiag.elaborate.loader import prelude
from stringdiag.graph.decls import BoxDecl
from stringdiag.graph.types import show_type
from stringdiag.lower.approximators import LearnableTensor, factory
from stringdiag.lower.lower import Lowering, compile
from stringdiag.lower.table import FIXED as TABLE_FIXED
from stringdiag.lower.table import NATIVE
from helpers import rel_max

TOL = 1e-12
SIZES = (1, 2, 7, 64)  # the size of every dimension parameter of the definition
LARGE = 1e3            # exp(1e3) overflows float64: only a stable softmax survives it
EPS = 1e-5             # the prelude's layer norm: c / sqrt(mean(c * c) + 0.00001)

# -- independent references: xs are [*batch, local axes], s the dimension parameters ----------
def attention(q, k, v, scale: float, causal: bool = False, window: int | None = None, glob: int = 0):
    e = q @ k.transpose(-1, -2) * scale
    if causal:
        e = e.masked_fill(~torch.ones(e.shape[-2:], dtype=torch.bool).tril(), -math.inf)
    if window is not None:  # |i - j| < window, or i or j one of the first glob positions
        i = torch.arange(e.shape[-1])
        keep = ((i[:, None] - i[None, :]).abs() < window) | (i[:, None] < glob) | (i[None, :] < glob)
        e = e.masked_fill(~keep, -math.inf)
    return torch.softmax(e, dim=-1) @ v


def linear(q, k, v=None):
    e = (q @ k.transpose(-1, -2)).tril()
    return e @ v if v is not None else e.sum(-1)


def decayed(q, k, v, r):
    """sum_{j <= i} exp(-(r_{j+1} + ... + r_i)) (q_i . k_j) v_j, each range summed on its own."""
    s = r.shape[-1]
    seg = torch.stack([torch.stack([r[..., j + 1:i + 1].sum(-1) for j in range(s)], -1) for i in range(s)], -2)
    decay = torch.exp(-seg) * torch.ones(s, s, dtype=r.dtype).tril()
    return ((q @ k.transpose(-1, -2)) * decay) @ v


def experts(x, ids, w, wg, wu, wd):
    """sum_j w_j Wd_e (silu(Wg_e x) * (Wu_e x)), e = ids_j: every expert run on every token, the
    unchosen ones weighted 0 (the dense form a sparse mixture must agree with)."""
    dense = torch.zeros(*w.shape[:-1], wg.shape[-3], dtype=w.dtype).scatter_add(-1, ids, w)  # [..., n]
    h = F.silu(torch.einsum("...efd,...d->...ef", wg, x)) * torch.einsum("...efd,...d->...ef", wu, x)
    return torch.einsum("...e,...edf,...ef->...d", dense, wd, h)


def layer_norm(x, eps, gain, bias):
    """Layer norm with one eps per position (eps has x's shape less its last axis)."""
    c = x - x.mean(-1, keepdim=True)
    return c / torch.sqrt((c * c).mean(-1, keepdim=True) + eps[..., None]) * gain + bias


POSITIVE_INPUTS = {"layernorm_eps": (1,),  # inputs that must be positive (an eps under a square root,
                   "causal_decay_attention": (3,)}  # a decay rate: a negative one grows, exp(1e3) overflows)

Reference = Callable[[list, dict, dict], torch.Tensor]
REFERENCE: dict[str, Reference] = {
    "softmax": lambda xs, s, w: torch.softmax(xs[0], dim=-1),
    "ssoftmax": lambda xs, s, w: torch.softmax(xs[0] / math.sqrt(s["k"]), dim=-1),
    "scale": lambda xs, s, w: xs[0] / math.sqrt(s["k"]),
    "mean": lambda xs, s, w: xs[0].mean(dim=-1),
    "sum": lambda xs, s, w: xs[0].sum(dim=-1),
    "elu1": lambda xs, s, w: F.elu(xs[0]) + 1,
    "layernorm": lambda xs, s, w: F.layer_norm(xs[0], (xs[0].shape[-1],), w["gain"], w["bias"], eps=EPS),
    "layernorm_eps": lambda xs, s, w: layer_norm(xs[0], xs[1], w["gain"], w["bias"]),
    "sdpa": lambda xs, s, w: attention(*xs, 1 / math.sqrt(s["c"])),
    "causal_sdpa": lambda xs, s, w: attention(*xs, 1 / math.sqrt(s["c"]), causal=True),
    "causal_linear_attention": lambda xs, s, w: linear(*xs),
    "causal_linear_sum": lambda xs, s, w: linear(*xs),
    "causal_decay_attention": lambda xs, s, w: decayed(*xs),
    "window_sdpa": lambda xs, s, w: attention(*xs, 1 / math.sqrt(s["c"]), window=s["w"]),
    "causal_window_sdpa": lambda xs, s, w: attention(*xs, 1 / math.sqrt(s["c"]), causal=True, window=s["w"]),
    "window_global_sdpa": lambda xs, s, w: attention(*xs, 1 / math.sqrt(s["c"]), window=s["w"], glob=s["g"]),
    "moe_swiglu": lambda xs, s, w: experts(*xs),
}
# definitions whose opened body cannot be evaluated, and why (their tests are expected to fail)


def wrapper_source(name: str, ins, outs, generics: tuple[str, ...], ranges=(), out_ranges=()) -> str:
    """A .diag file whose diagram ``Use`` applies ``name`` once, its dimension parameters
    declared as fixed dimensions (so that their sizes are given by ``dims``); ``ranges`` gives
    a token-id input its range (``[] of v``)."""
    head = f"dim {', '.join(generics)} : fixed\n" if generics else ""
    gen = f"<{', '.join(generics)}>" if generics else ""
    ranges = tuple(ranges) or (None,) * len(ins)
    out_ranges = tuple(out_ranges) or (None,) * len(outs)
    params = ", ".join(f"x{i}: {show_type(t, r)}" for i, (t, r) in enumerate(zip(ins, ranges)))
    args = ", ".join(f"x{i}" for i in range(len(ins)))
    ys = ", ".join(f"y{i}" for i in range(len(outs)))
    res = ", ".join(show_type(t) for t in outs)
    # an output of indices (topk's) is returned as numbers: the entry of positions it picks
    back = "".join(f"  z{i} = pick<0, 0>(gather(y{i}, unflatten<{r}, 1>(positions<{r}>())))\n"
                   for i, r in enumerate(out_ranges) if r is not None)
    zs = ", ".join(f"{'y' if r is None else 'z'}{i}" for i, r in enumerate(out_ranges))
    return f"{head}diagram Use({params}) -> {res} {{\n  {ys} = {name}{gen}({args})\n{back}  return {zs}\n}}\n"


def use(name: str):
    """The diagram ``Use`` applying the prelude definition ``name``, and that definition."""
    d = prelude()[name]
    ranges = [d.id_range(w) for w in d.inputs]
    p = stringdiag.loads(wrapper_source(name, d.input_types, d.output_types, d.generics, ranges),
                         f"use_{name}.diag")
    return p["Use"], d


def sizes_for(d, n: int) -> dict[str, int]:
    """Sizes of the dimension parameters: ``n`` for the first, distinct for the others."""
    return {g: n + 2 * p for p, g in enumerate(d.generics)}


def tie(name: str, native: nn.Module, opened: nn.Module, gen: torch.Generator) -> dict:
    """Give both compiled modules the same random parameters; returns them by role."""
    pn, po = dict(native.named_parameters()), dict(opened.named_parameters())
    if not pn and not po:
        return {}
    if name in ("layernorm", "layernorm_eps"):
        (ln,) = [m for m in native.modules() if isinstance(m, nn.LayerNorm)]
        gamma = [m for k, m in opened.named_modules() if isinstance(m, LearnableTensor) and k.endswith("gamma")]
        beta = [m for k, m in opened.named_modules() if isinstance(m, LearnableTensor) and k.endswith("beta")]
        assert len(gamma) == len(beta) == 1, list(po)
        assert len(pn) == len(po) == 2, (list(pn), list(po))
        n = ln.weight.shape[0]
        w = {"gain": 1 + torch.randn(n, generator=gen, dtype=torch.float64),
             "bias": torch.randn(n, generator=gen, dtype=torch.float64)}
        with torch.no_grad():
            ln.weight.copy_(w["gain"])
            ln.bias.copy_(w["bias"])
            gamma[0].weight.copy_(w["gain"].reshape(gamma[0].weight.shape))
            beta[0].weight.copy_(w["bias"].reshape(beta[0].weight.shape))
        return w
    pytest.fail(f"native '{name}' has parameters ({', '.join(pn)}): say here how to give both lowerings the same")


def inputs(d, sizes: dict, gen: torch.Generator, magnitude: float = 1.0) -> list[torch.Tensor]:
    """Random float64 inputs with two leading batch axes, some entries far from zero."""
    xs = []
    for k, (t, w) in enumerate(zip(d.input_types, d.inputs)):
        shape = (2, 3, *[dim.evaluate(sizes) for dim in t])
        if d.id_range(w) is not None:  # indices (moe_swiglu's chosen experts): distinct along the last axis
            xs.append(torch.rand(*shape[:-1], d.id_range(w).evaluate(sizes), generator=gen).argsort(-1)[..., :shape[-1]])
            continue
        x = torch.randn(*shape, generator=gen, dtype=torch.float64) * magnitude
        x += (torch.rand(*shape, generator=gen, dtype=torch.float64) < 0.1) * 4 * magnitude  # outliers
        xs.append(x.abs() + 1e-3 if k in POSITIVE_INPUTS.get(d.name, ()) else x)
    return xs


def both(name: str, n: int, seed: int = 0, opened: bool = True):
    """The native and the opened lowering of ``name`` at size ``n``, tied, and the sizes."""
    w, d = use(name)
    sizes = sizes_for(d, n)
    gen = torch.Generator().manual_seed(1000 * seed + n)
    native = compile(w, dims=sizes, dtype=torch.float64)
    opened = compile(w, dims=sizes, dtype=torch.float64, native=False)
    params = tie(name, native, opened, gen)
    return native, opened, d, sizes, params, gen


def test_every_native_primitive_has_a_reference_and_a_prelude_definition():
    assert set(REFERENCE) == set(NATIVE), "add a hand-written torch reference for each native primitive"
    for name in NATIVE:
        assert name in prelude().defs, f"native '{name}' is not defined in the prelude"


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_the_switch_opens_the_definition(name):
    """Natively the definition stays one box; with native=False no trace of it is left."""
    w, d = use(name)
    sizes = sizes_for(d, 7)
    for native, count in ((True, 1), (False, 0)):
        low = Lowering(w, dict(sizes), factory("mlp"), nn.Module(), {}, native=native)
        ops = [low.d.record(b).op for b in low.d.boxes()]
        assert ops.count(name) == count, (native, ops)
        assert all(low.d.record(b).kind != "diagram" for b in low.d.boxes()) or native


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", sorted(NATIVE))
def test_native_lowering_agrees_with_the_prelude_definition(name, n):
    native, opened, d, sizes, params, gen = both(name, n)
    for trial in range(3):
        xs = inputs(d, sizes, gen)
        with torch.no_grad():
            yn, yo = native(*xs), opened(*xs)
        ref = REFERENCE[name](xs, sizes, params)
        assert rel_max(yn, yo) < TOL, f"native {name} differs from its prelude body: " \
                                             f"relative error {rel_max(yn, yo):.3g}"
        assert rel_max(yn, ref) < TOL, f"native {name}: relative error {rel_max(yn, ref):.3g}"
        assert rel_max(yo, ref) < TOL, f"prelude {name}: relative error {rel_max(yo, ref):.3g}"


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", sorted(NATIVE))
def test_native_lowering_is_stable_for_large_inputs(name, n):
    """Inputs around ±1e3: exp overflows float64, so a softmax must shift by the maximum."""
    native, _, d, sizes, params, gen = both(name, n, seed=1, opened=False)
    xs = inputs(d, sizes, gen, magnitude=LARGE)
    with torch.no_grad():
        yn = native(*xs)
    ref = REFERENCE[name](xs, sizes, params)
    assert torch.isfinite(yn).all()
    assert rel_max(yn, ref) < TOL, f"native {name}: relative error {rel_max(yn, ref):.3g}"


@pytest.mark.parametrize("name", ["softmax", "ssoftmax"])
def test_prelude_softmax_body_is_stable_for_large_inputs(name):
    native, opened, d, sizes, params, gen = both(name, 7, seed=1)
    xs = inputs(d, sizes, gen, magnitude=LARGE)
    with torch.no_grad():
        yn, yo = native(*xs), opened(*xs)
    assert rel_max(yn, yo) < TOL


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_native_and_opened_have_the_same_gradients(name):
    """Training uses the native form; the rewrite oracle the opened one: same derivatives too."""
    native, opened, d, sizes, params, gen = both(name, 5, seed=2)
    xs = inputs(d, sizes, gen)
    grads = []
    for m in (native, opened):
        xg = [x.clone().requires_grad_(True) if x.is_floating_point() else x for x in xs]  # not indices
        y = m(*xg)
        (y * torch.linspace(-1, 1, y.numel(), dtype=torch.float64).reshape(y.shape)).sum().backward()
        grads.append(torch.cat([x.grad.flatten() for x in xg if x.is_floating_point()]))
    assert rel_max(*grads) < 1e-10


# == the elementwise table and the prelude's fixed primitives =====================================
def _elu(x):
    return x if x > 0 else math.expm1(x)


SCALAR_REFERENCE: dict[str, Callable[..., float]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "neg": lambda a: -a,
    "exp": math.exp,
    "log": math.log,
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "pow": math.pow,
    "floor": lambda a: float(math.floor(a)),
    "relu": lambda a: max(a, 0.0),
    "elu": _elu,
    "sigmoid": lambda a: 1 / (1 + math.exp(-a)),
    "tanh": math.tanh,
    "softplus": lambda a: math.log1p(math.exp(a)),
    "where": lambda a, m: a if m != 0 else -math.inf,
    "lt": lambda a, b: 1.0 if a < b else 0.0,
    "erf": math.erf,
    "gelu": lambda a: a * 0.5 * (1 + math.erf(a / math.sqrt(2))),
    "gelu_tanh": lambda a: 0.5 * a * (1 + math.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3))),
    "max": max,
    "min": min,
    "clamp": lambda a, lo, hi: min(max(a, lo), hi),
    "detach": lambda a: a,
    "dropout": lambda a, p: a,  # evaluation mode: the identity (tests/test_prims.py checks training)
    # an id of n = 4 (_fixed_use's sizes) read back as a number; round's halves go to even, as torch's
    "bucket": lambda a: min(max(round(a), 0), 3),
}
POSITIVE = {"log", "sqrt", "pow"}  # primitives tested on positive inputs only
FIXED = {n: b for n, b in prelude().boxes.items() if b.box == "fixed"}
SCALAR = {n for n, b in FIXED.items() if all(t == () for t in b.ins + b.outs)}


def test_primitive_table_matches_the_prelude():
    """The table's FIXED section is exactly the prelude's fixed primitives, and its NATIVE
    section prelude definitions (nothing else lowers a box by its name)."""
    assert set(TABLE_FIXED) == set(FIXED), (set(TABLE_FIXED) ^ set(FIXED))
    assert not NATIVE & set(FIXED)
    assert set(SCALAR_REFERENCE) == SCALAR, "add a math reference for each scalar primitive"


def _fixed_use(name: str, decl: BoxDecl, n: int):
    src = wrapper_source(name, decl.ins, decl.outs, decl.generics, decl.port_ranges(), decl.out_ranges())
    w = stringdiag.loads(src, f"fixed_{name}.diag")["Use"]
    sizes = {g: n + k for k, g in enumerate(decl.generics)}
    return w, sizes


@pytest.mark.parametrize("name", sorted(FIXED))
def test_every_fixed_primitive_compiles_or_says_why_not(name):
    decl = FIXED[name]
    w, sizes = _fixed_use(name, decl, 4)
    try:
        m = compile(w, dims=sizes, dtype=torch.float64)
    except DiagError as e:  # acceptable only as the compiler's own, clear refusal
        assert f"fixed process '{name}' has no implementation to compile" in e.message
        return
    gen = torch.Generator().manual_seed(3)
    xs = [torch.rand(2, *[dim.evaluate(sizes) for dim in t], generator=gen, dtype=torch.float64) + 0.5
          if r is None else torch.randint(0, r.evaluate(sizes), (2, *[dim.evaluate(sizes) for dim in t]), generator=gen)
          for t, r in zip(decl.ins, decl.port_ranges())]
    with torch.no_grad():
        ys = m(*xs)
    ys = ys if isinstance(ys, tuple) else (ys,)
    assert len(ys) == len(decl.outs)
    lead = (2,) if decl.ins else ()  # a diagram with no inputs has no batch axis
    for y, t in zip(ys, decl.outs):
        assert tuple(y.shape) == (*lead, *[dim.evaluate(sizes) for dim in t]), name
        assert torch.isfinite(y).all() or name == "where", name


@pytest.mark.parametrize("name", sorted(SCALAR))
def test_scalar_primitives_agree_with_math(name):
    decl = FIXED[name]
    w, sizes = _fixed_use(name, decl, 4)
    m = compile(w, dims=sizes, dtype=torch.float64).eval()  # dropout: evaluation
    gen = torch.Generator().manual_seed(4)
    xs = [torch.randn(5, 7, generator=gen, dtype=torch.float64) * 3 for _ in decl.ins]
    if name in POSITIVE:
        xs = [x.abs() + 0.01 for x in xs]
    if name == "where":
        xs[1] = (xs[1] > 0).to(torch.float64)
    with torch.no_grad():
        y = m(*xs)
    ref = torch.tensor([SCALAR_REFERENCE[name](*[float(x.flatten()[i]) for x in xs]) for i in range(35)],
                       dtype=torch.float64).reshape(5, 7)
    finite = torch.isfinite(ref)
    assert torch.equal(torch.isfinite(y), finite), name
    assert torch.equal(y[~finite], ref[~finite]), name
    assert rel_max(y[finite], ref[finite]) < TOL, name


def test_a_fixed_process_without_a_lowering_is_a_clear_error():
    p = stringdiag.loads("dim n : fixed\nfixed mystery : [n] -> [n]\n"
                         "diagram A(x: [n]) -> [n] {\n  return mystery(x)\n}\n", "m.diag")
    with pytest.raises(DiagError) as e:
        compile(p["A"], dims={"n": 3})
    assert "fixed process 'mystery' has no implementation to compile; define it as a diagram" in e.value.message
    assert str(e.value.pos) == "m.diag:4:10"


def test_no_gradient_flows_through_detach():
    # y = x * detach(x): dy/dx is detach(x) = x, not 2x
    d = stringdiag.loads("""dim s : seq
diagram Stop(x: [s]) -> [s] {
  return x * detach(x)
}""")["Stop"]
    m = compile(d, dims={}, dtype=torch.float64)
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    m(x).sum().backward()
    assert torch.equal(x.grad, x.detach())


# == every other fixed primitive at its edges, against plain Python =============================
# Each reference below works on one row (a Python list: the last axis) or builds a small table
# entry by entry, sharing nothing with stringdiag/lower/primitives.py. The sizes are the edges:
# empty and size-1 axes, a window of 1, of exactly the sequence and wider, the entry |i - j| = w
# just outside a window, no global tokens and all of them, a shift by nothing and by everything;
# the inputs have ties (small integers) and rows that are -infinity throughout.
def _rows(x: torch.Tensor, fn) -> torch.Tensor:
    """``fn`` (a list -> a list or a number) on every row of the last axis."""
    lead = x.shape[:-1]
    out = [fn([float(v) for v in row]) for row in x.reshape(math.prod(lead), x.shape[-1])]
    t = torch.tensor(out, dtype=torch.float64)
    return t.reshape(*lead, *t.shape[1:]) if out else torch.zeros(*lead, 0, dtype=torch.float64)


def _table(n: int, m: int, keep) -> torch.Tensor:
    return torch.tensor([[float(keep(i, j)) for j in range(m)] for i in range(n)], dtype=torch.float64).reshape(n, m)


def _hardmax_row(row):
    top = max(row, default=None)
    hits = [j for j, v in enumerate(row) if v == top]
    return [1 / len(hits) if j in hits else 0.0 for j in range(len(row))]


def _running(op, start):
    def run(row):
        out, acc = [], start
        for v in row:
            acc = op(acc, v)
            out.append(acc)
        return out
    return run


def _shift_row(k):
    return lambda row: [row[j - k] if j >= k else 0.0 for j in range(len(row))]


def _posenc(n, m):
    return _table(n, m, lambda p, f: math.sin(p / 10000 ** ((f - f % 2) / m)) if f % 2 == 0
                  else math.cos(p / 10000 ** ((f - f % 2) / m)))


EDGE_REFERENCE: dict[str, Callable] = {
    "hardmax": lambda xs, s: _rows(xs[0], _hardmax_row),
    "amax": lambda xs, s: _rows(xs[0], lambda row: max(row, default=-math.inf)),
    "cumsum": lambda xs, s: _rows(xs[0], _running(lambda a, b: a + b, 0.0)),
    "cumprod": lambda xs, s: _rows(xs[0], _running(lambda a, b: a * b, 1.0)),
    "ones": lambda xs, s: torch.tensor([1.0] * s["n"], dtype=torch.float64),
    "zeros": lambda xs, s: torch.tensor([0.0] * s["n"], dtype=torch.float64),
    "cat": lambda xs, s: torch.cat(xs, -1),
    "split": lambda xs, s: (xs[0][..., : s["n"]], xs[0][..., s["n"]:]),
    "rev": lambda xs, s: _rows(xs[0], lambda row: row[::-1]),
    "flatten": lambda xs, s: xs[0].reshape(*xs[0].shape[:-2], s["n"] * s["m"]),
    "unflatten": lambda xs, s: xs[0].reshape(*xs[0].shape[:-1], s["n"], s["m"]),
    "pick": lambda xs, s: _rows(xs[0], lambda row: row[s["a"]]),
    "narrow": lambda xs, s: _rows(xs[0], lambda row: row[s["a"]: s["a"] + s["m"]]),
    "shift": lambda xs, s: _rows(xs[0], _shift_row(s["k"])),
    "causal_conv": lambda xs, s: torch.stack([_rows(torch.cat([x, k], -1), lambda row: [
        sum(row[s["n"] + u] * row[j + u - s["w"] + 1] for u in range(s["w"]) if j + u - s["w"] + 1 >= 0)
        for j in range(s["n"])]) for x, k in [xs]]).squeeze(0),
    "embed": lambda xs, s: torch.stack([xs[1][b, int(xs[0][b])] for b in range(xs[0].shape[0])]),
    "bucket": lambda xs, s: _rows(xs[0][..., None], lambda row: float(min(max(round(row[0]), 0), s["n"] - 1))),
    "positions": lambda xs, s: torch.tensor([float(p) for p in range(s["n"])], dtype=torch.float64),
    "posenc": lambda xs, s: _posenc(s["n"], s["m"]),
    "causal": lambda xs, s: _table(s["n"], s["n"], lambda i, j: j <= i),
    "window": lambda xs, s: _table(s["n"], s["n"], lambda i, j: abs(i - j) < s["w"]),
    "strided": lambda xs, s: _table(s["n"], s["n"], lambda i, j: (i - j) % s["w"] == 0 and j <= i),
    "global": lambda xs, s: _table(s["n"], s["n"], lambda i, j: i < s["g"] or j < s["g"]),
    "gauss": lambda xs, s: torch.stack([torch.tensor([math.exp(-(p - float(mu)) ** 2 / (2 * float(sg) ** 2))
                                                      for p in range(s["n"])], dtype=torch.float64)
                                        for mu, sg in zip(*xs)]),
}


def _edge_sizes(name: str) -> list[dict]:
    """The generic sizes each primitive is tried at."""
    n_only = [{"n": n} for n in (0, 1, 2, 5)]
    masks = [{"n": n, "w": w} for n in (1, 2, 6) for w in sorted({1, 2, n - 1, n, n + 1} - {0})]
    return {
        "cat": [{"n": n, "m": m} for n, m in ((0, 2), (1, 0), (3, 2))],
        "split": [{"n": n, "m": m} for n, m in ((0, 2), (1, 0), (3, 2))],
        "flatten": [{"n": n, "m": m} for n, m in ((1, 1), (0, 3), (2, 3))],
        "unflatten": [{"n": n, "m": m} for n, m in ((1, 1), (3, 0), (2, 3))],
        "pick": [{"a": a, "r": r} for a, r in ((0, 0), (0, 3), (3, 0), (1, 1))],
        "narrow": [{"a": a, "m": m, "r": r} for a, m, r in ((0, 0, 2), (0, 3, 0), (2, 1, 0), (1, 2, 1))],
        "shift": [{"k": k, "n": n} for n in (1, 4) for k in (0, 1, n - 1, n, n + 2)],
        "causal_conv": [{"w": w, "n": n} for n in (0, 1, 4) for w in sorted({1, 2, max(n, 1), n + 2})],  # n = 0: no positions
        "embed": [{"v": 1, "d": 2}, {"v": 4, "d": 1}, {"v": 5, "d": 3}],
        "bucket": [{"n": 1}, {"n": 4}],
        "topk": [{"k": k, "n": n} for n in (1, 4) for k in (0, 1, n)],
        "posenc": [{"n": n, "m": m} for n, m in ((1, 1), (3, 1), (4, 5), (6, 6))],
        "window": masks,
        "strided": masks,
        "global": [{"n": n, "g": g} for n in (1, 5) for g in (0, 1, n - 1, n, n + 2)],
        "gauss": [{"n": n} for n in (1, 6)],
    }.get(name, n_only)


def _edge_inputs(name: str, decl: BoxDecl, sizes: dict, gen: torch.Generator) -> list[torch.Tensor]:
    xs = []
    for t, r in zip(decl.ins, decl.port_ranges()):
        shape = (3, *[dim.evaluate(sizes) for dim in t])
        if r is not None:
            xs.append(torch.randint(0, r.evaluate(sizes), shape, generator=gen))
        elif name in ("hardmax", "amax"):  # ties, and a row of -infinity throughout
            x = torch.randint(-1, 2, shape, generator=gen).to(torch.float64)
            x[0] = -math.inf
            xs.append(x)
        elif name == "bucket":  # halves (round to even), numbers past both ends
            xs.append(torch.tensor([-1.5, -0.5, 0.5, 1.5, 2.5, 3.49, 3.5, 9.0], dtype=torch.float64))
        elif name == "gauss" and len(xs) == 1:
            xs.append(torch.rand(shape, generator=gen, dtype=torch.float64) + 0.3)  # a width sigma > 0
        else:
            xs.append(torch.randn(shape, generator=gen, dtype=torch.float64))
    return xs


def _same(y: torch.Tensor, ref: torch.Tensor) -> bool:
    return (tuple(y.shape) == tuple(ref.shape) and torch.equal(torch.isfinite(y), torch.isfinite(ref))
            and torch.equal(y[~torch.isfinite(y)], ref[~torch.isfinite(ref)])
            and (not torch.isfinite(ref).any() or rel_max(y[torch.isfinite(y)], ref[torch.isfinite(ref)]) < TOL))


EDGE = sorted(set(FIXED) - SCALAR | {"bucket"})  # bucket: its halves and both ends


def test_every_other_fixed_primitive_has_an_edge_reference():
    assert set(EDGE_REFERENCE) | {"topk"} == set(EDGE), "add a plain reference for each fixed primitive"


@pytest.mark.parametrize("name", EDGE)
def test_fixed_primitives_agree_with_plain_python_at_their_edges(name):
    """Compiled alone, natively and opened, at every size of ``_edge_sizes``: the same values as
    the reference, exactly where they are not finite and to 1e-12 elsewhere."""
    decl = FIXED[name]
    w, _ = _fixed_use(name, decl, 1)
    gen = torch.Generator().manual_seed(7)
    for sizes in _edge_sizes(name):
        m = compile(w, dims=sizes, dtype=torch.float64)
        xs = _edge_inputs(name, decl, sizes, gen)
        with torch.no_grad():
            ys = m(*xs)
        ys = ys if isinstance(ys, tuple) else (ys,)
        if name == "topk":  # ties may come in either order: the values, largest first, and where they are
            (x,), (values, where) = xs, ys
            want = _rows(x, lambda row: sorted(row, reverse=True)[: sizes["k"]])
            assert _same(values, want), (sizes, values, want)
            picked = x.gather(-1, where.long()) if sizes["k"] else values
            assert torch.equal(picked, values), sizes
            assert all(len(set(r.tolist())) == len(r) for r in where.reshape(-1, max(sizes["k"], 1))), sizes
            continue
        refs = EDGE_REFERENCE[name](xs, sizes)
        refs = refs if isinstance(refs, tuple) else (refs,)
        for y, ref in zip(ys, refs):
            ref = ref.to(torch.float64) if xs else ref
            assert _same(y.to(torch.float64), ref.expand(y.shape) if not xs else ref), (name, sizes, y, ref)


def test_a_range_past_its_axis_at_run_time_names_the_range_and_the_axis():
    """A range whose sizes are known only at run time (a seq length) and do not fit: the lowering
    passes what follows the range as a negative count, and the error names both."""
    from stringdiag.lower import primitives as P

    with pytest.raises(DiagError, match=r"the range 2:5 does not lie within an axis of 4 entries$"):
        P.narrow(torch.zeros(2, 4), 2, 3, -1)
    with pytest.raises(DiagError, match=r"the range 3:4 does not lie within an axis of 3 entries$"):
        P.pick(torch.zeros(3), 3, -1)


def test_a_window_of_no_positions_leaves_every_row_undefined():
    """w = 0: no key lies within |i - j| < 0, so every softmax normalises nothing (NaN), as plain
    torch's softmax over a row of -inf does; no key may be invented (a global one, say)."""
    from stringdiag.lower.banded import window_attention

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 7, 3, generator=gen, dtype=torch.float64) for _ in range(3))
    want = torch.softmax(torch.full((2, 7, 7), -math.inf, dtype=torch.float64), dim=-1) @ v
    out = window_attention(q, k, v, 0, 0.5)
    assert torch.isnan(want).all() and out.shape == want.shape and torch.isnan(out).all()
