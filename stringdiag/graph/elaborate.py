"""Syntax tree of a diagram body to typed graph, with type checking and inference.

Each statement is one SIMD frame: indices bound on the left (``y[i] = ...``) iterate
the boxes on the right; ``sum_j`` binds a summed index and becomes a contraction box.
Index ranges are inferred from the axes they index. A box whose argument has more
axes than its port is applied over the extra leading axes (an implicit SIMD box), so
``Q(x)`` on ``x : [s, d]`` is ``q[i] = Q(x[i])``. Every box is placed in the SIMD boxes
of the indices its inputs depend on, never more: the tightened form (App. A.1.3).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lark import Token, Tree

from ..errors import DiagError, DiagWarning, Pos
from ..syntax.parser import pos_of
from .constants import OPERATORS, show
from .diagram import Diagram
from .program import BoxDecl, Definition, Program, box_decls, dim_expr, suggest, tensor_type, type_list
from .types import Dim, TensorType, show_type, substitute_type

_BINOP = {"add": "add", "sub": "sub", "mul": "mul", "div": "div"}
TOO_DEEP = "expressions are nested too deeply to check; split them into named wires"


@dataclass
class Val:
    """A value in a statement: a wire seen through an index view, or a constant.

    ``view`` has one entry per axis of the wire: a statement index label (that axis is
    indexed) or ``None`` (a local axis, still part of the value's type).
    """

    wire: int | None
    view: tuple[str | None, ...] = ()
    const: Any = None  # a constant expression tree, when wire is None

    def labels(self) -> set[str]:
        return {v for v in self.view if v is not None}


@dataclass
class Scope:
    """Indices of one statement: user name -> label, and label -> range."""

    ranges: dict[str, Dim | None] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    active: dict[str, str] = field(default_factory=dict)
    display: dict[str, str] = field(default_factory=dict)
    first_use: dict[str, Pos] = field(default_factory=dict)

    def bind(self, name: str) -> str:
        label = name
        while label in self.ranges:
            label += "'"
        self.ranges[label] = None
        self.order.append(label)
        self.active[name] = label
        self.display[label] = name
        return label

    def rank(self, label: str) -> int:
        return self.order.index(label)


def elaborate(defn: Definition) -> Diagram:
    return Elaborator(defn).run()


class Elaborator:
    def __init__(self, defn: Definition):
        self.defn = defn
        self.prog: Program = defn.program
        self.file = self.prog.path
        self.generics = set(defn.generics)
        self.d = Diagram(name=defn.name, generics=defn.generics, pos=defn.pos,
                         source=self.prog.path, program=self.prog)
        self.names: dict[str, int] = {}
        self.name_pos: dict[str, Pos] = {}
        self.local_boxes: dict[str, BoxDecl] = {}
        self.used_local: set[str] = set()
        self.uses: dict[str, int] = {}  # definition -> how many uses so far (instance numbers)

    # -- helpers --------------------------------------------------------------------
    def err(self, msg: str, where) -> DiagError:
        pos = where if isinstance(where, Pos) or where is None else pos_of(where, self.file)
        return DiagError(msg, pos, self.prog.source)

    def warn(self, msg: str, pos: Pos | None) -> None:
        self.prog.warnings.append(DiagWarning(msg, pos, self.prog.source))

    def type_of(self, v: Val) -> TensorType:
        return self.d.wire_type(v.wire)

    def local_type(self, v: Val) -> TensorType:
        if v.wire is None:
            return ()
        return tuple(dim for lab, dim in zip(v.view, self.type_of(v)) if lab is None)

    # -- the diagram ----------------------------------------------------------------
    def run(self) -> Diagram:
        tree = self.defn.tree
        _, _, *rest = tree.children
        params = [c for c in rest if isinstance(c, Tree) and c.data == "param"]
        out_tree = next(c for c in rest if isinstance(c, Tree) and c.data == "type_list")
        body = [c for c in rest if isinstance(c, Tree) and c.data in
                ("box_decl", "assign", "scan_assign", "return_stmt")]
        for p in params:
            tok, ty = p.children
            name = str(tok)
            if name in self.names:
                raise self.err(f"input '{name}' is declared twice", tok)
            w = self.d.add_wire(tensor_type(ty, self.prog, self.generics), name=name, pos=pos_of(tok, self.file))
            self.d.inputs.append(w)
            self.d.input_names.append(name)
            self.names[name] = w
            self.name_pos[name] = pos_of(tok, self.file)
        declared_outs = type_list(out_tree, self.prog, self.generics)
        for stmt in body:
            if stmt.data == "box_decl":
                for decl in box_decls(stmt, self.prog, local=True, outer_generics=self.generics):
                    if decl.name in self.local_boxes or decl.name in self.names:
                        raise self.err(f"'{decl.name}' is already defined in this diagram", decl.pos)
                    self.local_boxes[decl.name] = decl
        returns = [s for s in body if s.data == "return_stmt"]
        if not returns:
            raise self.err(f"diagram '{self.d.name}' has no return statement", self.defn.tree.children[0])
        if len(returns) > 1:
            raise self.err("a diagram has exactly one return statement", returns[1])
        if body[-1] is not returns[0]:
            raise self.err("return must be the last statement of a diagram", returns[0])
        for frame, stmt in enumerate(body):
            start = self.d._next
            try:
                if stmt.data == "assign":
                    self.assign(stmt)
                elif stmt.data == "scan_assign":
                    self.assign(stmt, scan=True)
            except RecursionError:
                raise self.err(TOO_DEEP, stmt.children[1]) from None
            self._mark_frame(start, frame)
        start = self.d._next
        try:
            self.returns(returns[0], declared_outs)
        except RecursionError:
            raise self.err(TOO_DEEP, returns[0].children[0]) from None
        self._mark_frame(start, len(body))
        self.check_unused()
        return self.d

    def _mark_frame(self, start: int, frame: int) -> None:
        """Boxes made by one statement share its SIMD boxes in pictures (``clusters``)."""
        g = self.d.graph
        for n in range(start + 1, self.d._next + 1):
            a = g.nodes[n]
            if a["kind"] == "box":
                a["clusters"] = tuple(("simd", frame, lab, dim, bool(a.get("scan")) and k == len(a["simd"]) - 1)
                                      for k, (lab, dim) in enumerate(a["simd"]))

    def returns(self, stmt: Tree, declared: tuple[TensorType, ...]) -> None:
        exprs = stmt.children
        if len(exprs) != len(declared):
            raise self.err(f"diagram '{self.d.name}' declares {len(declared)} output(s) "
                           f"but returns {len(exprs)}", stmt)
        for k, (e, want) in enumerate(zip(exprs, declared)):
            v = self.expr(e, Scope())
            if v.wire is None:
                v = self.materialize(v, pos_of(e, self.file))
            if v.view and any(lab is not None for lab in v.view):  # pragma: no cover - no free indices here
                raise self.err("a returned value cannot depend on an index", e)
            got = self.type_of(v)
            if got != want:
                raise self.err(f"output {k + 1} of '{self.d.name}' has type {show_type(got)} "
                               f"but the diagram declares {show_type(want)}", e)
            self.d.outputs.append(v.wire)

    def check_unused(self) -> None:
        outs = set(self.d.outputs)
        for name, w in self.names.items():
            if name.startswith("_") or w in outs or self.d.consumers(w):
                continue
            what = "input" if w in self.d.inputs else "wire"
            self.warn(f"{what} '{name}' is never used (it is deleted)", self.name_pos.get(name))
        for name, decl in self.local_boxes.items():
            if name not in self.used_local:
                self.warn(f"learnable '{name}' is declared but never used", decl.pos)

    # -- statements -----------------------------------------------------------------
    def assign(self, stmt: Tree, scan: bool = False) -> None:
        targets_tree, rhs = stmt.children
        scope = Scope()
        targets = []
        for t in targets_tree.children:
            tok, *idx = t.children
            idx = [i for i in idx if i is not None]
            labels = []
            for i in idx:
                if str(i) in scope.active:
                    raise self.err(f"index '{i}' appears twice on the left", i)
                labels.append(scope.bind(str(i)))
                scope.first_use[labels[-1]] = pos_of(i, self.file)
            name = str(tok)
            if name != "_" and (name in self.names or name in self.local_boxes):
                where = self.name_pos.get(name)
                raise self.err(f"'{name}' is already defined" + (f" (at {where})" if where else "")
                               + "; wires are named once", tok)
            targets.append((name, labels, tok))
        if scan:
            vals = self.scan_call(rhs, scope, targets, stmt)
        elif len(targets) > 1:
            if not (isinstance(rhs, Tree) and rhs.data == "call"):
                raise self.err(f"{len(targets)} names on the left need a box with "
                               f"{len(targets)} outputs on the right", rhs)
            vals = self.call(rhs, scope, want_all=True)
            if len(vals) != len(targets):
                raise self.err(f"'{rhs.children[0]}' has {len(vals)} output(s) but "
                               f"{len(targets)} names are assigned", stmt)
        else:
            vals = [self.expr(rhs, scope)]
        for (name, labels, tok), v in zip(targets, vals):
            self.bind(name, labels, tok, v, scope)

    def bind(self, name: str, labels: list[str], tok: Token, v: Val, scope: Scope) -> None:
        pos = pos_of(tok, self.file)
        for lab in labels:
            if scope.ranges[lab] is None:
                raise self.err(f"index '{scope.display[lab]}' is not used on the right-hand side, "
                               "so its range is unknown", scope.first_use[lab])
        if v.wire is None:
            v = self.materialize(v, pos)
        stray = sorted(v.labels() - set(labels), key=scope.rank)
        if stray:  # one name of several lacks an index its value depends on
            shown = ", ".join(scope.display[lab] for lab in stray)
            raise self.err(f"'{name}' depends on index {', '.join(repr(scope.display[x]) for x in stray)}; "
                           f"bind it on the left: {name}[{shown}]", tok)
        want = tuple(labels) + (None,) * len(self.local_type(v))
        if v.view == want or (not labels and all(lab is None for lab in v.view)):
            w = v.wire
            if self.d.graph.nodes[w]["name"] is None:
                self.d.graph.nodes[w]["name"] = name
        else:
            simd = tuple((lab, scope.ranges[lab]) for lab in labels)
            axes = self.axes_for(v, {})
            _, (w,) = self.d.add_box("reindex", "reindex", [(v.wire, axes)], [self.local_type(v)],
                                     simd=simd, pos=pos, out_names=[name],
                                     display=self._display(scope, labels))
        self.names[name] = w
        self.name_pos[name] = pos

    @staticmethod
    def _display(scope: Scope, labels) -> dict:
        return {lab: scope.display.get(lab, lab) for lab in labels}

    # -- expressions ----------------------------------------------------------------
    def expr(self, t: Tree | Token, scope: Scope) -> Val:
        kind = t.data if isinstance(t, Tree) else "token"
        if kind == "number":
            return Val(None, const=("num", float(t.children[0])))
        if kind == "name":
            return self.name(t.children[0])
        if kind == "indexed":
            return self.indexed(t, scope)
        if kind == "call":
            return self.call(t, scope)[0]
        if kind in _BINOP:
            return self.apply_prim(_BINOP[kind], [self.expr(c, scope) for c in t.children], scope, t)
        if kind == "neg":
            return self.apply_prim("neg", [self.expr(t.children[0], scope)], scope, t)
        if kind == "summation":
            return self.summation(t, scope)
        raise AssertionError(kind)  # pragma: no cover

    def name(self, tok: Token) -> Val:
        name = str(tok)
        if name in self.names:
            w = self.names[name]
            return Val(w, (None,) * len(self.d.wire_type(w)))
        if name in self.generics or self.prog.lookup_dim(name):
            return Val(None, const=("dim", Dim.var(name)))
        if name in self.local_boxes or self.prog.lookup_box(name) or self.prog.lookup_def(name):
            raise self.err(f"'{name}' is a box; apply it to its inputs: {name}(...)", tok)
        hint = suggest(name, list(self.names) + list(self.prog.dims))
        raise self.err(f"undefined name '{name}'{hint}", tok)

    def indexed(self, t: Tree, scope: Scope) -> Val:
        base_tree, *idx = t.children
        base = self.expr(base_tree, scope)
        if base_tree.data in ("name", "number"):
            what = str(base_tree.children[0])
            quoted = f"'{what}'"
        else:
            what, quoted = "this value", "this value"
        if base.wire is None:
            raise self.err(f"{quoted} is a constant, not a wire; it cannot be indexed", base_tree)
        ty = self.d.wire_type(base.wire)
        free = [k for k, lab in enumerate(base.view) if lab is None]  # axes not indexed yet
        if len(idx) > len(free):
            shown = show_type(tuple(ty[k] for k in free))
            raise self.err(f"'{what}' has {len(free)} ax{'i' if len(free) == 1 else 'e'}s {shown} "
                           f"but {len(idx)} indices were given", t)
        view = list(base.view)
        for k, it in zip(free, idx):
            itok = it.children[0]
            if str(itok) == ":":
                continue
            name = str(itok)
            if name not in scope.active:
                raise self.err(f"index '{name}' is not bound: bind it on the left "
                               f"(y[{name}] = ...) or sum over it (sum_{name} ...)", itok)
            lab = scope.active[name]
            if lab in view:
                raise self.err(f"index '{name}' is used twice on '{what}' (diagonals are not supported)", itok)
            have = scope.ranges[lab]
            if have is None:
                scope.ranges[lab] = ty[k]
            elif have != ty[k]:
                raise self.err(f"index '{name}' ranges over {have} elsewhere but over {ty[k]} "
                               f"here (axis {free.index(k) + 1} of '{what}' : "
                               f"{show_type(tuple(ty[j] for j in free))})", itok)
            view[k] = lab
        return Val(base.wire, tuple(view))

    def summation(self, t: Tree, scope: Scope) -> Val:
        names: list[Token] = []
        body = t
        while isinstance(body, Tree) and body.data == "summation":  # sum_j sum_f e  ==  sum_{j,f} e
            tok, body = body.children
            text = str(tok)[4:]
            parts = text[1:-1].split(",") if text.startswith("{") else [text]
            for p in parts:
                p = p.strip()
                if not p.isidentifier():
                    raise self.err(f"'{p}' is not an index name", tok)
                names.append(Token("NAME", p, line=tok.line, column=tok.column))
        saved = dict(scope.active)
        labels = []
        for n in names:
            if str(n) in scope.active:
                raise self.err(f"index '{n}' is already bound in this statement", n)
            labels.append(scope.bind(str(n)))
            scope.first_use[labels[-1]] = pos_of(n, self.file)
        factors = self._factors(body)
        vals = [self.expr(f, scope) for f in factors]
        for lab, n in zip(labels, names):
            if scope.ranges[lab] is None:
                raise self.err(f"summed index '{n}' is never used", n)
        scope.active = saved
        pos = pos_of(t, self.file)
        vals = [self.materialize(v, pos) if v.wire is None else v for v in vals]
        locals_ = [self.local_type(v) for v in vals]
        common = max(locals_, key=len)
        for lt, f in zip(locals_, factors):
            if lt and lt != common:
                raise self.err(f"cannot multiply values of types {show_type(common)} and {show_type(lt)} "
                               "elementwise; index the axes to contract them", f)
        deps = set().union(*(v.labels() for v in vals))
        summed = set(labels)
        simd_labels = sorted(deps - summed, key=scope.rank)
        simd = tuple((lab, scope.ranges[lab]) for lab in simd_labels)
        summed_t = tuple((lab, scope.ranges[lab]) for lab in labels)
        ins = [(v.wire, self.axes_for(v, {})) for v in vals]
        _, (w,) = self.d.add_box("contract", "contract", ins, [common], simd=simd, pos=pos, summed=summed_t,
                                 display=self._display(scope, simd_labels + labels))
        return Val(w, tuple(simd_labels) + (None,) * len(common))

    @staticmethod
    def _factors(t):
        if isinstance(t, Tree) and t.data == "mul":
            return Elaborator._factors(t.children[0]) + Elaborator._factors(t.children[1])
        return [t]

    def axes_for(self, v: Val, implicit: dict[int, str]) -> tuple:
        """Input axes of a box: statement labels stay, local axes number from 0.

        ``implicit`` maps positions among the local axes to implicit SIMD labels.
        """
        axes, k, j = [], 0, 0
        for lab in v.view:
            if lab is not None:
                axes.append(lab)
            elif j in implicit:
                axes.append(implicit[j])
                j += 1
            else:
                axes.append(k)
                k += 1
                j += 1
        return tuple(axes)

    def materialize(self, v: Val, pos: Pos) -> Val:
        _, (w,) = self.d.add_box("const", show(v.const), [], [()], pos=pos, value=v.const)
        return Val(w, ())

    # -- box application ------------------------------------------------------------
    def resolve(self, tok: Token):
        name = str(tok)
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
                    raise self.err(e.message, tok) from None
                raise
            return defn
        if name in self.names:
            raise self.err(f"'{name}' is a wire, not a box; index it with [...] instead", tok)
        if name in self.generics or self.prog.lookup_dim(name):
            raise self.err(f"'{name}' is a dimension, not a box", tok)
        boxes = [n for n in self.prog.all_names() if not self.prog.lookup_dim(n)] + list(self.local_boxes)
        hint = suggest(name, boxes)
        raise self.err(f"undefined box '{name}'{hint}", tok)

    def call(self, t: Tree, scope: Scope, want_all: bool = False, scan_label: str | None = None) -> list[Val]:
        tok, gargs, *args = t.children
        args = [a for a in args if a is not None]
        callee = self.resolve(tok)
        explicit = [dim_expr(g, self.prog, self.generics) for g in gargs.children] if gargs else []
        vals = [self.expr(a, scope) for a in args]
        outs = self.apply(callee, vals, scope, t, explicit, scan_label=scan_label, arg_trees=args)
        if not want_all and len(outs) != 1:
            raise self.err(f"'{tok}' has {len(outs)} outputs; assign them to as many names "
                           f"(a, b = {tok}(...))", t)
        return outs

    def apply_prim(self, op: str, vals: list[Val], scope: Scope, t: Tree) -> Val:
        decl = self.prog.lookup_box(op)
        assert decl is not None, f"prelude lacks {op}"
        return self.apply(decl, vals, scope, t, [])[0]

    def apply(self, callee, vals: list[Val], scope: Scope, t: Tree, explicit: list[Dim],
              scan_label: str | None = None, arg_trees=None) -> list[Val]:
        if isinstance(callee, Definition):
            d = callee.diagram()
            name, generics, ins, outs = callee.name, callee.generics, d.input_types, d.output_types
            # each use is its own weight set (H#1, H#2); a copy of the box keeps it (weights.py)
            self.uses[callee.name] = self.uses.get(callee.name, 0) + 1
            box, extra = "diagram", {"ref": d, "instance": f"{callee.name}#{self.uses[callee.name]}"}
            # a sequence length is supplied at run time, so a definition written over s may be
            # used on any sequence: its seq dimensions are parameters inferred from the inputs
            generics = generics + tuple(sorted(
                n for t in ins for dim in t for n in dim.names()
                if n not in generics and (decl := callee.program.lookup_dim(n)) is not None and decl.kind == "seq"))
        else:
            name, generics, ins, outs = callee.name, callee.generics, list(callee.ins), list(callee.outs)
            box, extra = callee.box, {"ref": callee}
            if callee.box == "learn":
                extra["local"], extra["param"] = callee.local, callee.name
        pos = pos_of(t, self.file)
        arg_trees = arg_trees or [t] * len(vals)
        if len(vals) != len(ins):
            raise self.err(f"'{_shown(name)}' takes {len(ins)} input{'s' if len(ins) != 1 else ''} but "
                           f"{len(vals)} {'was' if len(vals) == 1 else 'were'} given", t)
        if len(explicit) > len(generics):
            raise self.err(f"'{name}' has {len(generics)} dimension parameter(s) but "
                           f"{len(explicit)} were given", t)
        # constants fold: sqrt(k), 1 / 2
        if box == "fixed" and name in OPERATORS and vals and all(v.wire is None for v in vals):
            return [Val(None, const=(name, *[v.const for v in vals]))]
        vals = [self.materialize(v, pos) if v.wire is None else v for v in vals]
        sub: dict[str, Dim] = dict(zip(generics, explicit))
        locs = [self.local_type(v) for v in vals]
        extras = []
        for k, (port, lt) in enumerate(zip(ins, locs)):
            r = len(port)
            if len(lt) < r:
                raise self.err(f"input {k + 1} of '{name}' must have type {show_type(port)} "
                               f"but has type {show_type(lt)}", arg_trees[k])
            tail = lt[len(lt) - r:]
            for p, a in zip(port, tail):
                ps = p.substitute(sub)
                if ps.name in generics and ps.name not in sub:
                    sub[ps.name] = a
                elif ps.names() & (set(generics) - set(sub)):
                    raise self.err(f"cannot infer the dimension parameters of '{name}' from its inputs; "
                                   f"give them explicitly: {name}<{', '.join(generics)}>(...)", t)
                elif ps != a:
                    want = show_type(substitute_type(port, sub))
                    raise self.err(f"input {k + 1} of '{name}' must have type {want} but has type "
                                   f"{show_type(lt)}", arg_trees[k])
            extras.append(len(lt) - r)
        missing = [g for g in generics if g not in sub]
        if missing:
            raise self.err(f"cannot infer dimension '{missing[0]}' of '{name}'; give it explicitly: "
                           f"{name}<{', '.join(generics)}>(...)", t)
        # implicit SIMD over extra leading axes, right-aligned across arguments
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
                                   "index them to say which go together", arg_trees[k])
        if scan_label is not None and m:
            raise self.err("scan does not apply over extra axes; index every argument explicitly", t)
        taken = set(scope.ranges)
        imp_labels = []
        for dim in imp_dims:
            lab = str(dim) if dim.name else "n"
            while lab in taken:
                lab += "'"
            taken.add(lab)
            imp_labels.append(lab)
        deps = sorted(set().union(*(v.labels() for v in vals)) if vals else set(), key=scope.rank)
        if scan_label is not None:
            if scan_label not in deps:
                raise self.err(f"no argument of '{name}' is indexed by the scanned index "
                               f"'{scope.display[scan_label]}'", t)
            if scan_label in vals[0].labels():
                raise self.err(f"the carried state (input 1 of '{name}') must not depend on the scanned "
                               f"index '{scope.display[scan_label]}'", arg_trees[0])
            deps = [d for d in deps if d != scan_label] + [scan_label]
        simd = tuple((lab, scope.ranges[lab]) for lab in deps) + tuple(zip(imp_labels, imp_dims))
        inputs = []
        for v, e in zip(vals, extras):
            implicit = {q: imp_labels[m - e + q] for q in range(e)}
            inputs.append((v.wire, self.axes_for(v, implicit)))
        out_types = [substitute_type(o, sub) for o in outs]
        if generics:
            extra["generics"] = tuple((g, sub[g]) for g in generics)
        if scan_label is not None:
            extra["scan"] = True
        display = self._display(scope, deps)
        display.update({lab: lab for lab in imp_labels})
        _, wires = self.d.add_box(box, name, inputs, out_types, simd=simd, pos=pos, display=display, **extra)
        res = []
        for port, (w, ot) in enumerate(zip(wires, out_types)):
            stmt_labels = [lab for lab in deps if not (scan_label and port == 0 and lab == scan_label)]
            res.append(Val(w, tuple(stmt_labels) + (None,) * (m + len(ot))))
        return res

    def scan_call(self, rhs: Tree, scope: Scope, targets, stmt: Tree) -> list[Val]:
        if len(targets) < 2:
            raise self.err("scan needs the final state and at least one output: h, y[t] = scan Cell(h0, x[t])",
                           stmt)
        state_labels = set(targets[0][1])
        scanned = set().union(*(set(t[1]) for t in targets[1:])) - state_labels
        if len(scanned) != 1:
            raise self.err("scan iterates exactly one index: bind it on the outputs but not on the state "
                           "(h, y[t] = scan Cell(h0, x[t]))", stmt)
        (scan_label,) = scanned
        callee = self.resolve(rhs.children[0])
        ins = callee.diagram().input_types if isinstance(callee, Definition) else list(callee.ins)
        outs = callee.diagram().output_types if isinstance(callee, Definition) else list(callee.outs)
        if not ins or not outs or ins[0] != outs[0]:
            raise self.err(f"'{rhs.children[0]}' cannot be scanned: its first input and first output "
                           "(the carried state) must have the same type", rhs)
        vals = self.call(rhs, scope, want_all=True, scan_label=scan_label)
        if len(vals) != len(targets):
            raise self.err(f"'{rhs.children[0]}' has {len(vals)} output(s) but {len(targets)} names "
                           "are assigned", stmt)
        return vals


def _shown(op: str) -> str:
    """How a box is named in messages: arithmetic by its operator."""
    return {"add": "+", "sub": "-", "mul": "*", "div": "/"}.get(op, op)
