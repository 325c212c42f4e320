"""Elaborating box applications: resolving the box, inferring its dimension parameters from
its inputs, the implicit SIMD box over extra leading axes, and ``scan``.

A mixin of the elaborator: expressions (``expr``) are ``expressions.py``'s.
"""
from __future__ import annotations


from ..errors import DiagError, Pos
from ..graph.box import Box, Global, Instance, Kind, Local, Repeat, Scan
from ..graph.constants import OPERATORS, ConstOp
from ..syntax.records import Mutable
from ..graph.decls import BoxDecl, Definition, suggest, unknown_qualified
from ..graph.types import Dim, DimKind, TensorType, show_type, substitute_type
from ..syntax import ast as A
from .declarations import dim_expr
from .state import ElabState, Scope, Val


# torch's names for routing, which the prelude spells otherwise: what to write instead
_GATHER = ("gather(ids, table) picks rows by index (ids typed [k] of n, as topk gives them, or a computed "
           "number made an id by bucket<n>(x))")
_BUCKET = "bucket<n>(x) makes a computed number an id in 0, ..., n - 1 (nearest integer, clamped) for embed or gather"
_SCATTER = ("a mixture of experts adds the chosen experts' results back with moe_swiglu(x, ids, w, ...), "
            "or as a sum over the chosen ones: y[i] = sum_j w[i, j] * ...")
_SORT = "topk<n>(x) sorts (values, indices)"
INSTEAD = {"argmax": "topk<1>(x) gives the largest entry and its index", "argsort": _SORT, "sort": _SORT,
           "index_select": _GATHER, "take": _GATHER, "one_hot": _GATHER,
           "scatter": _SCATTER, "scatter_add": _SCATTER, "index_add": _SCATTER, "route": _SCATTER,
           "bucketize": _BUCKET, "searchsorted": _BUCKET, "ids": _BUCKET, "long": _BUCKET, "int": _BUCKET,
           "round": "floor(x + 0.5) rounds a number; " + _BUCKET}


class Use(Mutable, frozen=False):
    """What one use of a box needs: its name, dimension parameters, port types, and the
    record of the box made for it (its SIMD, place and generics filled in at the use)."""

    name: str
    generics: tuple[str, ...]
    ins: list[TensorType]
    outs: list[TensorType]
    rec: Box
    ranges: list[Dim | None]  # per input: the range of its token ids ([s] of v), or None

    @classmethod
    def of(cls, callee: Definition | BoxDecl, uses: dict[str, int]) -> "Use":
        """``uses`` counts the uses of each definition: each is its own weight set (H#1, H#2)."""
        if isinstance(callee, BoxDecl):
            kind = Kind(callee.box)
            weights = (Local if callee.local else Global)(callee.name) if kind is Kind.LEARN else None
            rec = Box(kind, callee.name, ref=callee, weights=weights,
                      seed=callee.seed if kind is Kind.RANDOM else None)
            return cls(callee.name, callee.generics, list(callee.ins), list(callee.outs), rec,
                       list(callee.port_ranges()))
        d = callee.diagram()
        uses[callee.name] = uses.get(callee.name, 0) + 1
        # a sequence length is supplied at run time, so a definition written over s may be
        # used on any sequence: its seq dimensions are parameters inferred from the inputs
        generics = callee.generics + tuple(sorted(
            n for t in d.input_types for dim in t for n in dim.names()
            if n not in callee.generics and (decl := callee.program.lookup_dim(n)) is not None
            and decl.kind is DimKind.SEQ))
        rec = Box(Kind.DIAGRAM, callee.name, ref=d, weights=Instance(f"{callee.name}#{uses[callee.name]}"))
        return cls(callee.name, generics, d.input_types, d.output_types, rec, [d.id_range(w) for w in d.inputs])


class Calls(ElabState):
    def resolve(self, n: A.Name) -> Definition | BoxDecl:
        name = n.text
        if name in self.local_boxes:
            self.used_local.add(name)
            return self.local_boxes[name]
        decl = self.prog.lookup_box(name)
        if decl is not None:
            return decl
        defn = self.prog.lookup_def(name)
        if defn is not None:
            try:
                defn.diagram()
            except DiagError as e:
                if e.pos is None:  # recursion: report it at the use that closes the cycle
                    raise self.err(e.message, n.pos) from None
                raise
            return defn
        if "." in name:
            raise self.err(unknown_qualified(name, self.prog.all_names()), n.pos)
        if name in self.names:
            raise self.err(f"'{name}' is a wire, not a box; index it with [...] instead", n.pos)
        if name in self.generics or self.prog.lookup_dim(name):
            raise self.err(f"'{name}' is a dimension, not a box", n.pos)
        if name in INSTEAD:
            raise self.err(f"undefined box '{name}'; {INSTEAD[name]}", n.pos)
        boxes = [b for b in self.prog.all_names() if not self.prog.lookup_dim(b)] + list(self.local_boxes)
        raise self.err(f"undefined box '{name}'{suggest(name, boxes)}", n.pos)

    def call(self, t: A.Call, scope: Scope, want_all: bool = False, scan_label: str | None = None,
             loop: Repeat | None = None) -> list[Val]:
        callee = self.resolve(t.box)
        explicit = [dim_expr(g, self.prog, self.generics) for g in t.dim_args]
        vals = [self.expr(a, scope) for a in t.args]
        outs = self.apply(callee, vals, scope, t.pos, explicit, scan_label=scan_label,
                          arg_pos=[a.pos for a in t.args], loop=loop)
        if not want_all and len(outs) != 1:
            raise self.err(f"'{t.box.text}' has {len(outs)} outputs; assign them to as many names "
                           f"(a, b = {t.box.text}(...))", t.pos)
        return outs

    def apply_prim(self, op: str, vals: list[Val], scope: Scope, pos: Pos) -> Val:
        decl = self.prog.lookup_box(op)
        assert decl is not None, f"prelude lacks {op}"
        return self.apply(decl, vals, scope, pos, [])[0]

    def apply(self, callee, vals: list[Val], scope: Scope, pos: Pos, explicit: list[Dim],
              scan_label: str | None = None, arg_pos: list[Pos] | None = None, loop: Repeat | None = None) -> list[Val]:
        """A box applied to values: its box node, in the SIMD boxes of the indices its inputs
        depend on (the scanned index last) and of the extra leading axes of its inputs;
        ``loop``: a repeat box's count and sharing."""
        use = Use.of(callee, self.uses)
        if loop is not None:
            use.rec = use.rec._replace(loop=loop)
        arg_pos = arg_pos or [pos] * len(vals)
        if len(vals) != len(use.ins):
            raise self.err(f"'{_shown(use.name)}' takes {len(use.ins)} input{'s' if len(use.ins) != 1 else ''} "
                           f"but {len(vals)} {'was' if len(vals) == 1 else 'were'} given", pos)
        if len(explicit) > len(use.generics):
            raise self.err(f"'{use.name}' has {len(use.generics)} dimension parameter(s) but "
                           f"{len(explicit)} were given", pos)
        # constants fold: sqrt(k), 1 / 2
        if use.rec.kind is Kind.FIXED and use.name in OPERATORS and vals and all(v.wire is None for v in vals):
            return [Val(None, const=ConstOp(use.name, *[v.const for v in vals]))]
        vals = self.wired(vals, pos)
        locs = [self.local_type(v) for v in vals]
        sub = dict(zip(use.generics, explicit))
        for k, v in enumerate(vals):
            self.check_ids(use, k, v, sub, arg_pos[k])
        extras = [self.unify(use, k, port, lt, sub, pos, arg_pos[k]) for k, (port, lt) in enumerate(zip(use.ins, locs))]
        missing = [g for g in use.generics if g not in sub]
        if missing:
            raise self.err(f"cannot infer dimension '{missing[0]}' of '{use.name}'; give it explicitly: "
                           f"{use.name}<{', '.join(use.generics)}>(...)", pos)
        imp_dims = self.implicit_dims(use.name, locs, extras, arg_pos)
        if scan_label is not None and imp_dims:
            raise self.err("scan does not apply over extra axes; index every argument explicitly", pos)
        deps = self.dependencies(use.name, vals, scope, scan_label, pos, arg_pos)
        return self.add_use(use, vals, scope, pos, sub, deps, extras, imp_dims, scan_label)

    def unify(self, use: Use, k: int, port: TensorType, lt: TensorType, sub: dict[str, Dim], pos: Pos,
              arg: Pos) -> int:
        """Match input ``k``'s local type ``lt`` against its port, binding dimension parameters
        in ``sub``; how many extra leading axes it has (an implicit SIMD box)."""
        r = len(port)
        if len(lt) < r:
            raise self.err(f"input {k + 1} of '{use.name}' must have type {show_type(port)} "
                           f"but has type {show_type(lt)}", arg)
        for p, a in zip(port, lt[len(lt) - r:]):
            ps = p.substitute(sub)
            if ps.name in use.generics and ps.name not in sub:
                sub[ps.name] = a
            elif ps.names() & (set(use.generics) - set(sub)):
                raise self.err(f"cannot infer the dimension parameters of '{use.name}' from its inputs; "
                               f"give them explicitly: {use.name}<{', '.join(use.generics)}>(...)", pos)
            elif ps != a:
                want = show_type(substitute_type(port, sub))
                raise self.err(f"input {k + 1} of '{use.name}' must have type {want} but has type "
                               f"{show_type(lt)}", arg)
        return len(lt) - r

    def check_ids(self, use: Use, k: int, v: Val, sub: dict[str, Dim], arg: Pos) -> None:
        """Token ids go only where a port takes them (``[] of v``), and only there; a port's
        range is bound (inferred) or checked as a dimension is."""
        want, have = use.ranges[k], self.d.id_range(v.placed)
        port = show_type(substitute_type(use.ins[k], sub), want.substitute(sub) if want is not None else None)
        if want is None and have is not None and use.name == "bucket":
            raise self.err(f"input 1 of 'bucket' takes a number but is given ids ({show_type(self.local_type(v), have)}) "
                           "already; give them to embed(ids, table) or gather(ids, table) as they are", arg)
        if want is None and have is not None:
            what, read = _ids(self.d, v.placed)
            raise self.err(f"input {k + 1} of '{_shown(use.name)}' takes real numbers ({port}) but is given {what} "
                           f"({show_type(self.local_type(v), have)}); turn {what.split()[-1]} into vectors with {read}",
                           arg)
        if want is not None and have is None:
            raise self.err(f"input {k + 1} of '{_shown(use.name)}' takes token ids ({port}) but is given real numbers "
                           f"({show_type(self.local_type(v))}); token ids enter as a diagram input typed [s] of v, "
                           "indices as topk's second output, and a number computed here becomes an id in 0, ..., n - 1 "
                           "with bucket<n>(x)", arg)
        if want is None or have is None:  # (both are known past the checks above)
            return
        ws = want.substitute(sub)
        if ws.name in use.generics and ws.name not in sub:
            sub[ws.name] = have
        elif ws != have:
            raise self.err(f"input {k + 1} of '{_shown(use.name)}' takes token ids of {ws} but is given ids of {have}",
                           arg)

    def implicit_dims(self, name: str, locs: list[TensorType], extras: list[int], arg_pos: list[Pos]) -> list[Dim]:
        """The ranges of the implicit SIMD box over extra leading axes, right-aligned across
        arguments."""
        m = max(extras, default=0)
        imp_dims: list[Dim | None] = [None] * m
        for k, (lt, e) in enumerate(zip(locs, extras)):
            for q in range(e):
                slot = m - e + q
                if imp_dims[slot] is None:
                    imp_dims[slot] = lt[q]
                elif imp_dims[slot] != lt[q]:
                    others = [show_type(o) for o in locs if o != lt]
                    raise self.err(f"'{_shown(name)}' cannot combine inputs of types {show_type(lt)} and "
                                   f"{others[0] if others else '?'}: extra axes are matched from the right; "
                                   "index them to say which go together", arg_pos[k])
        return [dim for dim in imp_dims if dim is not None]  # (the input with the most extra axes fills every slot)

    def dependencies(self, name: str, vals: list[Val], scope: Scope, scan_label: str | None, pos: Pos,
                     arg_pos: list[Pos]) -> list[str]:
        """The statement indices the inputs depend on, in binding order; a scanned one last."""
        deps = sorted(set().union(*(v.labels() for v in vals)) if vals else set(), key=scope.rank)
        if scan_label is None:
            return deps
        if scan_label not in deps:
            raise self.err(f"no argument of '{name}' is indexed by the scanned index "
                           f"'{scope.display[scan_label]}'", pos)
        if scan_label in vals[0].labels():
            raise self.err(f"the carried state (input 1 of '{name}') must not depend on the scanned "
                           f"index '{scope.display[scan_label]}'", arg_pos[0])
        return [d for d in deps if d != scan_label] + [scan_label]

    def add_use(self, use: Use, vals: list[Val], scope: Scope, pos: Pos, sub: dict[str, Dim], deps: list[str],
                extras: list[int], imp_dims: list[Dim], scan_label: str | None) -> list[Val]:
        """The box node of a use, and its outputs as values of the statement."""
        m = len(imp_dims)
        imp_labels = _fresh_labels(imp_dims, scope)
        simd = tuple((lab, scope.ranges[lab]) for lab in deps) + tuple(zip(imp_labels, imp_dims))
        inputs = []
        for v, e in zip(vals, extras):
            implicit = {q: imp_labels[m - e + q] for q in range(e)}
            inputs.append((v.placed, self.axes_for(v, implicit)))
        out_types = [substitute_type(o, sub) for o in use.outs]
        display = scope.shown(deps)
        display.update({lab: lab for lab in imp_labels})
        rec = use.rec._replace(simd=simd, pos=pos, display=display, generics=tuple((g, sub[g]) for g in use.generics),
                               loop=Scan() if scan_label is not None else use.rec.loop)
        _, wires = self.d.emit(rec, inputs, out_types)
        res = []
        for port, (w, ot) in enumerate(zip(wires, out_types)):
            stmt_labels = [lab for lab in deps if not (scan_label and port == 0 and lab == scan_label)]
            res.append(Val(w, tuple(stmt_labels) + (None,) * (m + len(ot))))
        return res

    def scan_call(self, rhs: A.Call, scope: Scope, targets: list, stmt: A.Scan) -> list[Val]:
        """``h, y[t] = scan Cell(h0, x[t])``: the state is carried along the one index bound on
        the outputs but not on the state."""
        if len(targets) < 2:
            raise self.err("scan needs the final state and at least one output: h, y[t] = scan Cell(h0, x[t])",
                           stmt.pos)
        state_labels = set(targets[0][1])
        scanned = set().union(*(set(t[1]) for t in targets[1:])) - state_labels
        if len(scanned) != 1:
            raise self.err("scan iterates exactly one index: bind it on the outputs but not on the state "
                           "(h, y[t] = scan Cell(h0, x[t]))", stmt.pos)
        (scan_label,) = scanned
        callee = self.resolve(rhs.box)
        ins = callee.diagram().input_types if isinstance(callee, Definition) else list(callee.ins)
        outs = callee.diagram().output_types if isinstance(callee, Definition) else list(callee.outs)
        if not ins or not outs or ins[0] != outs[0]:
            raise self.err(f"'{rhs.box.text}' cannot be scanned: its first input and first output "
                           "(the carried state) must have the same type", rhs.pos)
        vals = self.call(rhs, scope, want_all=True, scan_label=scan_label)
        if len(vals) != len(targets):
            raise self.err(f"'{rhs.box.text}' has {len(vals)} output(s) but {len(targets)} names "
                           "are assigned", stmt.pos)
        return vals

    def repeat_call(self, stmt: A.Repeat, scope: Scope) -> list[Val]:
        """``y = repeat t Block(x, m)``: ``Block`` applied t times in sequence, its first input
        carried from copy to copy, the others (``m``) passed unchanged to every copy."""
        rhs = stmt.call
        count = self.repeat_count(stmt.count)
        callee = self.resolve(rhs.box)
        if not isinstance(callee, Definition):
            raise self.err(f"repeat applies a definition (a diagram); '{rhs.box.text}' is a declared box: "
                           "define a diagram that uses it and repeat that", rhs.box.pos)
        d = callee.diagram()
        ins, outs = d.input_types, d.output_types
        if len(outs) != 1 or not ins or ins[0] != outs[0]:
            shown = f"{', '.join(map(show_type, ins))} -> {', '.join(map(show_type, outs))}"
            raise self.err(f"'{rhs.box.text}' cannot be repeated: it must have one output, of the type of its "
                           f"first input (it maps {shown})", rhs.box.pos)
        return self.call(rhs, scope, loop=Repeat(count, stmt.shared))

    def repeat_count(self, count: A.Int | A.Name) -> Dim:
        """How many copies: a number, or a fixed dimension (or a generic) sized when compiled."""
        if isinstance(count, A.Name) and count.text not in self.generics:
            decl = self.prog.lookup_dim(count.text)
            if decl is not None and decl.kind is not DimKind.FIXED:
                raise self.err(f"the count of repeat must be known when compiling: '{count.text}' is a "
                               f"{decl.kind} dimension; declare a fixed one (dim {count.text} : fixed)", count.pos)
            if decl is not None and decl.default is not None and decl.default < 1:
                raise self.err(f"repeat needs at least one copy; '{count.text}' is {decl.default}", count.pos)
        dim = dim_expr(count, self.prog, self.generics)
        if isinstance(count, A.Int) and dim.evaluate({}) < 1:
            raise self.err(f"repeat needs at least one copy; got {count.text}", count.pos)
        return dim


def _fresh_labels(dims: list[Dim], scope: Scope) -> list[str]:
    """Labels of an implicit SIMD box, one per extra axis, named after its dimension."""
    taken = set(scope.ranges)
    labels = []
    for dim in dims:
        lab = str(dim) if dim.name else "n"
        while lab in taken:
            lab += "'"
        taken.add(lab)
        labels.append(lab)
    return labels


def _shown(op: str) -> str:
    """How a box is named in messages: arithmetic by its operator."""
    return {"add": "+", "sub": "-", "mul": "*", "div": "/"}.get(op, op)


def _ids(d, w: int) -> tuple[str, str]:
    """What a wire of ids is and what reads it: token ids (a diagram's input) embed, a box's
    indices (topk's) gather."""
    return ("token ids", "embed(ids, table)") if d.producer(w) is None else ("indices", "gather(ids, table)")
