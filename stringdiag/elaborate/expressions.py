"""Elaborating expressions: names, indexing and summation (a contraction box).

A mixin of the elaborator: box applications (``call``, ``apply_prim``) are ``calls.py``'s.
"""
from __future__ import annotations

from ..graph.box import Box, Kind
from ..graph.constants import ConstDim, ConstNum
from ..graph.decls import suggest
from ..graph.types import Dim, show_type
from ..syntax import ast as A
from .declarations import dim_expr
from .state import ElabState, Scope, Val


class Expressions(ElabState):
    def expr(self, e: A.Expr, scope: Scope) -> Val:
        match e:
            case A.Number():
                return Val(None, const=ConstNum(e.value))
            case A.Var(name):
                return self.var(name)
            case A.Indexed():
                return self.indexed(e, scope)
            case A.Call():
                return self.call(e, scope)[0]
            case A.BinOp(op, left, right):
                return self.apply_prim(op, [self.expr(c, scope) for c in (left, right)], scope, e.pos)
            case A.Neg(operand):
                return self.apply_prim("neg", [self.expr(operand, scope)], scope, e.pos)
            case A.Sum():
                return self.summation(e, scope)
        raise AssertionError(e)  # pragma: no cover

    def var(self, n: A.Name) -> Val:
        name = n.text
        if name in self.names:
            w = self.names[name]
            return Val(w, (None,) * len(self.d.wire_type(w)))
        if name in self.generics or self.prog.lookup_dim(name):
            return Val(None, const=ConstDim(Dim.var(name)))
        if name in self.local_boxes or self.prog.lookup_box(name) or self.prog.lookup_def(name):
            raise self.err(f"'{name}' is a box; apply it to its inputs: {name}(...)", n.pos)
        hint = suggest(name, list(self.names) + list(self.prog.dims))
        raise self.err(f"undefined name '{name}'{hint}", n.pos)

    def indexed(self, t: A.Indexed, scope: Scope) -> Val:
        base = self.expr(t.base, scope)
        match t.base:
            case A.Var(name):
                what, quoted = name.text, f"'{name.text}'"
            case A.Number(text):
                what, quoted = text, f"'{text}'"
            case _:
                what, quoted = "this value", "this value"
        if base.wire is None:
            raise self.err(f"{quoted} is a constant, not a wire; it cannot be indexed", t.base.pos)
        ty = self.d.wire_type(base.wire)
        free = [k for k, lab in enumerate(base.view) if lab is None]  # axes not indexed yet
        if len(t.indices) > len(free):
            shown = show_type(tuple(ty[k] for k in free))
            raise self.err(f"'{what}' has {len(free)} ax{'i' if len(free) == 1 else 'e'}s {shown} "
                           f"but {len(t.indices)} indices were given", t.pos)
        view = list(base.view)
        cuts = []
        for k, index in zip(free, t.indices):
            if isinstance(index, A.Name):
                view[k] = self.index(index, k, free, ty, view, what, scope)
            elif index is not None:  # ':' keeps the axis
                cuts.append((k, index))
        v = Val(base.wire, tuple(view))
        for k, cut in reversed(cuts):  # from the right: the axes before a cut keep their places
            v = self.cut(v, k, cut, what, scope)
        return v

    def cut(self, v: Val, k: int, cut: A.Pick | A.Slice, what: str, scope: Scope) -> Val:
        """``x[:, 0]`` or ``x[:, a:b]``: ``pick`` or ``narrow`` (the prelude's, on the last axis)
        applied to axis ``k``, every other free axis held by a label of its own, then put back in
        its place."""
        ty = self.type_of(v)
        n = ty[k]
        if isinstance(cut, A.Pick):
            a, m = dim_expr(cut.at, self.prog, self.generics), Dim.const(1)
        else:
            a = dim_expr(cut.start, self.prog, self.generics)
            m = dim_expr(cut.stop, self.prog, self.generics) - a
        r = n - a - m
        for part, shown in ((a, "its start"), (m, "its length"), (r, "what follows it")):
            if part.is_const() and part.evaluate({}) < 0:
                raise self.err(f"{_shown_cut(cut)} does not lie within axis {k + 1} of '{what}' "
                               f"({n} entries): {shown} would be {part}; its entries are 0 to {n - 1}", cut.pos)
        held = {j: self.hold(ty[j], scope) for j, lab in enumerate(v.view) if lab is None and j != k}
        view = tuple(held.get(j, lab) for j, lab in enumerate(v.view))
        pick = isinstance(cut, A.Pick)
        decl = self.prog.lookup_box("pick" if pick else "narrow")
        (out,) = self.apply(decl, [Val(v.wire, view)], scope, cut.pos, [a, r] if pick else [a, m, r])
        if not held:
            return out
        if not pick:
            held[k] = self.hold(m, scope)
            out = Val(out.wire, tuple(lab if lab is not None else held[k] for lab in out.view))
        kept = [lab for lab in out.view if lab is not None and lab not in held.values()]  # (every axis is labelled now)
        order = kept + [held[j] for j in sorted(held)]
        simd = tuple((lab, scope.ranges[lab]) for lab in order)
        _, (w,) = self.d.emit(Box(Kind.REINDEX, "reindex", simd, pos=cut.pos, display=scope.shown(order)),
                              [(out.placed, self.axes_for(out, {}))], [()])
        return Val(w, tuple(kept) + (None,) * len(held))

    def hold(self, dim: Dim, scope: Scope) -> str:
        """A label no source can write, for a free axis that a cut carries along."""
        label = scope.bind("·")
        del scope.active["·"]
        scope.ranges[label] = dim
        return label

    def index(self, n: A.Name, k: int, free: list[int], ty, view: list, what: str, scope: Scope) -> str:
        """The label of index ``n`` on axis ``k`` of a value; its range is that axis's."""
        name = n.text
        if name not in scope.active and (name in self.generics or self.prog.lookup_dim(name)):
            cut, pick = ", ".join([":"] * k + [f"{name}:{name} + 1"]), ", ".join([*"ijlmpq"[:k], "0"])
            raise self.err(f"'{name}' is a dimension, not an index: the entry at offset {name} of axis {k + 1} of "
                           f"'{what}' is the one-wide slice {name}:{name} + 1 (an axis of 1 entry, as "
                           f"y = {what}[{cut}]; then y[{pick}] drops it); an index is bound on the "
                           f"left (y[i] = ...) or summed (sum_i ...)", n.pos)
        if name not in scope.active:
            raise self.err(f"index '{name}' is not bound: bind it on the left "
                           f"(y[{name}] = ...) or sum over it (sum_{name} ...)", n.pos)
        lab = scope.active[name]
        if lab in view:
            raise self.err(f"index '{name}' is used twice on '{what}' (diagonals are not supported)", n.pos)
        have = scope.ranges[lab]
        if have is None:
            scope.ranges[lab] = ty[k]
        elif have != ty[k]:
            raise self.err(f"index '{name}' ranges over {have} elsewhere but over {ty[k]} "
                           f"here (axis {free.index(k) + 1} of '{what}' : "
                           f"{show_type(tuple(ty[j] for j in free))})", n.pos)
        return lab

    def summation(self, t: A.Sum, scope: Scope) -> Val:
        """``sum_j e``: a contraction box over the factors of ``e``, in the SIMD boxes of the
        indices they depend on that are not summed."""
        names, body = _summed(t)
        for n in names:
            if not n.text.isidentifier():
                raise self.err(f"'{n.text}' is not an index name", n.pos)
        saved = dict(scope.active)
        labels = []
        for n in names:
            if n.text in scope.active:
                raise self.err(f"index '{n.text}' is already bound in this statement", n.pos)
            labels.append(scope.bind(n.text))
            scope.first_use[labels[-1]] = n.pos
        factors = _factors(body)
        vals = [self.expr(f, scope) for f in factors]
        for lab, n in zip(labels, names):
            if scope.ranges[lab] is None:
                raise self.err(f"summed index '{n.text}' is never used", n.pos)
        scope.active = saved
        vals = self.wired(vals, t.pos)
        for v, f in zip(vals, factors):
            if self.d.id_range(v.placed) is not None:
                raise self.err(f"a sum multiplies real numbers, but this factor is indices "
                               f"({show_type(self.local_type(v), self.d.id_range(v.placed))}); read them with "
                               "gather(ids, table) (embed for token ids)", f.pos)
        locals_ = [self.local_type(v) for v in vals]
        common = max(locals_, key=len)
        for lt, f in zip(locals_, factors):
            if lt and lt != common:
                raise self.err(f"cannot multiply values of types {show_type(common)} and {show_type(lt)} "
                               "elementwise; index the axes to contract them", f.pos)
        deps = set().union(*(v.labels() for v in vals))
        simd_labels = sorted(deps - set(labels), key=scope.rank)
        simd = tuple((lab, scope.ranges[lab]) for lab in simd_labels)
        summed = tuple((lab, scope.ranges[lab]) for lab in labels)
        ins = [(v.placed, self.axes_for(v, {})) for v in vals]
        _, (w,) = self.d.emit(Box(Kind.CONTRACT, "contract", simd, summed, pos=t.pos,
                                  display=scope.shown(simd_labels + labels)), ins, [common])
        return Val(w, tuple(simd_labels) + (None,) * len(common))


def _summed(t: A.Sum) -> tuple[list[A.Name], A.Expr]:
    """``sum_j sum_f e`` is ``sum_{j, f} e``: the indices of nested sums, and the body."""
    names: list[A.Name] = []
    body: A.Expr = t
    while isinstance(body, A.Sum):
        names.extend(body.indices)
        body = body.body
    return names, body


def _factors(e: A.Expr) -> list[A.Expr]:
    if isinstance(e, A.BinOp) and e.op == "mul":
        return _factors(e.left) + _factors(e.right)
    return [e]



def _shown_cut(cut: A.Pick | A.Slice) -> str:
    return f"the index {cut.at.text}" if isinstance(cut, A.Pick) else "the range"
