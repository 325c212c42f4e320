"""Declarations read from their syntax trees: dimension expressions, tensor types, a box
declaration's types, approximator, largest lengths and seed, checked as they are read, into
the records of ``graph/decls.py``.
"""
from __future__ import annotations

from ..errors import DiagError
from ..graph.box import Kind
from ..graph.decls import OPTIONS, Approximator, BoxDecl, Program, suggest
from ..graph.types import Dim, DimKind, TensorType
from ..syntax import ast as A


def dim_expr(e: A.DimSum | A.DimProduct | A.Name | A.Int, prog: Program, generics: tuple[str, ...] | set[str]) -> Dim:
    """Evaluate a dimension expression, checking that its names are dimensions."""
    match e:
        case A.Int(text, pos):
            if len(text) > 18:
                raise DiagError(f"the number {text[:20]}... is too large for a dimension", pos, prog.source)
            return Dim.const(int(text))
        case A.Name(name, pos):
            if name not in generics and prog.lookup_dim(name) is None:
                hint = suggest(name, [n for n in prog.dims] + list(generics))
                raise DiagError(f"undefined dimension '{name}'{hint}", pos, prog.source)
            return Dim.var(name)
        case A.DimSum(terms):
            total = Dim.const(0)
            for t in terms:
                total = total + dim_expr(t, prog, generics)
            return total
        case A.DimProduct(factors):
            prod = Dim.const(1)
            for f in factors:
                prod = prod * dim_expr(f, prog, generics)
            return prod
    raise AssertionError(e)  # pragma: no cover


def tensor_type(t: A.TypeExpr, prog: Program, generics) -> TensorType:
    return tuple(dim_expr(d, prog, generics) for d in t.dims)


def id_range(t: A.TypeExpr, prog: Program, generics) -> Dim | None:
    """The range v of a token-id type ``[s] of v``; None for a tensor of real numbers."""
    return None if t.of is None else dim_expr(t.of.dim, prog, generics)


def no_ids(ts: tuple[A.TypeExpr, ...], where: str, prog: Program) -> None:
    """Refuse ``of`` where token ids cannot be: they enter a diagram as inputs and are read by
    a fixed box's input port (embed); nothing computes them."""
    for t in ts:
        if t.of is not None:
            raise DiagError(f"token ids ('of') are {where}; write the inputs of a diagram or of a fixed box "
                            "as [s] of v and read them with embed(ids, table)", t.of.pos, prog.source)


def type_list(ts: tuple[A.TypeExpr, ...], prog: Program, generics) -> tuple[TensorType, ...]:
    return tuple(tensor_type(t, prog, generics) for t in ts)


def generic_names(g: A.Generics | None, prog: Program) -> tuple[str, ...]:
    """The <n, m> parameters of a declaration, each named once."""
    if g is None:
        return ()
    seen: list[str] = []
    for n in g.names:
        if n.text in seen:
            raise DiagError(f"dimension parameter '{n.text}' is declared twice", n.pos, prog.source)
        seen.append(n.text)
    return tuple(seen)


def box_decls(item: A.BoxDecl, prog: Program, local: bool, outer_generics=()) -> list[BoxDecl]:
    box = item.kind.text
    if local and box not in (Kind.LEARN, Kind.RANDOM):
        raise DiagError(f"only learnable and random boxes can be declared inside a diagram, not '{box}'",
                        item.kind.pos, prog.source)
    via = approximator(item.via, prog) if item.via is not None else None
    if (via is not None or item.bounds) and box != Kind.LEARN:
        at = item.via.pos if item.via is not None else item.bounds[0].pos
        raise DiagError(f"only a learnable box has an approximator or a largest length, not '{box}'", at, prog.source)
    seed = random_seed(item, prog)
    decls = []
    for dn in item.names:
        generics = generic_names(dn.generics, prog)
        scope = set(generics) | set(outer_generics)
        ins, outs = type_list(item.ins, prog, scope), type_list(item.outs, prog, scope)
        if box != Kind.FIXED:
            no_ids(item.outs, "no output of a box but a fixed one (topk's indices)", prog)
            no_ids(item.ins, f"an input of a fixed box only, not of a {box} box", prog)
        ins_of = tuple(id_range(t, prog, scope) for t in item.ins) if box == Kind.FIXED else ()
        outs_of = tuple(id_range(t, prog, scope) for t in item.outs) if box == Kind.FIXED else ()
        if via is not None and item.via is not None and not ins:
            raise DiagError(f"'{dn.name.text}' has no inputs: a learnable tensor has no approximator", item.via.pos,
                            prog.source)
        decls.append(BoxDecl(dn.name.text, box, generics, ins, outs, dn.name.pos, local, via,
                             bounds(item, ins, outs, prog), seed, ins_of if any(ins_of) else (),
                             outs_of if any(outs_of) else ()))
    return decls


def approximator(v: A.Via, prog: Program) -> Approximator:
    """Read ``via POLICY(OPTION = VALUE, ...)``, checking each option against its policy."""
    policy = v.policy.text
    if policy not in OPTIONS:
        raise DiagError(f"unknown approximator '{policy}': use one of {', '.join(OPTIONS)}{suggest(policy, list(OPTIONS))}",
                        v.policy.pos, prog.source)
    values: dict = {}
    for opt in v.options:
        name, val = opt.name.text, opt.value
        if name not in OPTIONS[policy] or name in values:
            what = "is given twice" if name in values else f"is not an option of '{policy}' ({', '.join(OPTIONS[policy])})"
            raise DiagError(f"'{name}' {what}", opt.name.pos, prog.source)
        if name == "bias" and isinstance(val, A.Name) and val.text in ("true", "false"):
            values[name] = val.text == "true"
        elif name == "hidden" and isinstance(val, A.Number) and val.text.isdigit() and 0 < int(val.text) < 2**31:
            values[name] = int(val.text)
        else:
            want = "true or false" if name == "bias" else "a positive integer"
            raise DiagError(f"'{name}' takes {want}, not '{getattr(val, 'text', val)}'", val.pos, prog.source)
    return Approximator(policy, **values)


def bounds(item: A.BoxDecl, ins: tuple, outs: tuple, prog: Program) -> tuple[tuple[str, int], ...]:
    """``where s <= 512``: each a seq dimension of a learnable tensor's type, bounded once."""
    out: dict[str, int] = {}
    for b in item.bounds:
        name, decl = b.dim.text, prog.lookup_dim(b.dim.text)
        if ins or decl is None or decl.kind is not DimKind.SEQ or not any(dim.name == name for t in outs for dim in t):
            raise DiagError(f"'{name}' must be a seq dimension that is an axis of a learnable tensor (a box without "
                            "inputs) to have a largest length", b.dim.pos, prog.source)
        if name in out or not b.limit.text.isdigit() or not 0 < int(b.limit.text) < 2**31:
            raise DiagError(f"the largest length of '{name}' must be given once, as a positive integer",
                            b.limit.pos, prog.source)
        out[name] = int(b.limit.text)
    return tuple(out.items())


def random_seed(item: A.BoxDecl, prog: Program) -> int | None:
    """A random box has a seed, no inputs and one output (the tensor it draws); no other box has a seed."""
    if item.kind.text != Kind.RANDOM:
        if item.seed is not None:
            raise DiagError(f"only a random box has a seed, not a '{item.kind.text}' box", item.seed.pos, prog.source)
        return None
    if item.seed is None:
        raise DiagError("a random box needs its seed: random W : -> [m, k] seed 7", item.kind.pos, prog.source)
    if item.ins or len(item.outs) != 1:
        raise DiagError("a random box has no inputs and one output: random W : -> [m, k] seed 7",
                        item.kind.pos, prog.source)
    if len(item.seed.text) > 18:
        raise DiagError(f"seed {item.seed.text} is too large (at most 18 digits)", item.seed.pos, prog.source)
    return int(item.seed.text)
