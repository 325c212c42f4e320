"""Syntax tree of a diagram body to typed graph, with type checking and inference.

Each statement is one SIMD frame: indices bound on the left (``y[i] = ...``) iterate
the boxes on the right; ``sum_j`` binds a summed index and becomes a contraction box.
Index ranges are inferred from the axes they index. A box whose argument has more
axes than its port is applied over the extra leading axes (an implicit SIMD box), so
``Q(x)`` on ``x : [s, d]`` is ``q[i] = Q(x[i])``. Every box is placed in the SIMD boxes
of the indices its inputs depend on, never more: the tightened form (App. A.1.3).

This module elaborates statements; expressions are ``expressions.py``'s and box applications
``calls.py``'s, over the state of ``state.py``; declarations are read by ``declarations.py``.
"""
from __future__ import annotations

from ..errors import Pos
from ..syntax import ast as A
from ..graph.box import Box, Kind
from ..graph.clusters import SimdFrame
from ..graph.decls import Definition
from ..graph.diagram import Diagram
from ..graph.types import TensorType, show_type
from .calls import Calls
from .declarations import box_decls, id_range, no_ids, tensor_type, type_list
from .expressions import Expressions
from .state import TOO_DEEP, Scope, Val


def elaborate(defn: Definition) -> Diagram:
    return Elaborator(defn).run()



def _rhs(stmt) -> A.Call | A.Expr | A.BoxDecl | A.Return:
    """The right-hand side of a statement (the statement itself where it has none)."""
    if isinstance(stmt, (A.Scan, A.Repeat)):
        return stmt.call
    return stmt.value if isinstance(stmt, A.Assign) else stmt

class Elaborator(Expressions, Calls):
    """One definition's body, statement by statement, into its graph."""

    def run(self) -> Diagram:
        node = self.defn.node
        self.inputs(node.params)
        no_ids(node.outs, "inputs only, never the output of a diagram", self.prog)
        declared_outs = type_list(node.outs, self.prog, self.generics)
        self.declare_local_boxes(node.body)
        ret = self.the_return(node.body)
        for frame, stmt in enumerate(node.body):
            start = self.d.last_id
            try:
                match stmt:
                    case A.Assign():
                        self.assign(stmt)
                    case A.Scan():
                        self.scan(stmt)
                    case A.Repeat():
                        self.repeat(stmt)
            except RecursionError:  # at the right-hand side
                raise self.err(TOO_DEEP, _rhs(stmt).pos) from None
            self._mark_frame(start, frame)
        start = self.d.last_id
        try:
            self.returns(ret, declared_outs)
        except RecursionError:
            raise self.err(TOO_DEEP, ret.values[0].pos) from None
        self._mark_frame(start, len(node.body))
        self.check_unused()
        return self.d

    def inputs(self, params: tuple[A.Param, ...]) -> None:
        for p in params:
            name = p.name.text
            if name in self.names:
                raise self.err(f"input '{name}' is declared twice", p.name.pos)
            w = self.d.add_wire(tensor_type(p.type, self.prog, self.generics), name=name, pos=p.name.pos,
                                of=id_range(p.type, self.prog, self.generics))
            self.d.inputs.append(w)
            self.d.input_names.append(name)
            self.names[name] = w
            self.name_pos[name] = p.name.pos

    def declare_local_boxes(self, body: tuple[A.Stmt, ...]) -> None:
        """Learnable boxes declared in a body: fresh weights for each use of the diagram."""
        for stmt in body:
            if not isinstance(stmt, A.BoxDecl):
                continue
            for decl in box_decls(stmt, self.prog, local=True, outer_generics=self.generics):
                if decl.name in self.local_boxes or decl.name in self.names:
                    raise self.err(f"'{decl.name}' is already defined in this diagram", decl.pos)
                self.local_boxes[decl.name] = decl

    def the_return(self, body: tuple[A.Stmt, ...]) -> A.Return:
        returns = [s for s in body if isinstance(s, A.Return)]
        if not returns:
            raise self.err(f"diagram '{self.d.name}' has no return statement", self.defn.node.name.pos)
        if len(returns) > 1:
            raise self.err("a diagram has exactly one return statement", returns[1].pos)
        if body[-1] is not returns[0]:
            raise self.err("return must be the last statement of a diagram", returns[0].pos)
        return returns[0]

    def _mark_frame(self, start: int, frame: int) -> None:
        """Boxes made by one statement share its SIMD boxes in pictures (``clusters``)."""
        for n in range(start + 1, self.d.last_id + 1):
            if self.d.is_box(n):
                box = self.d.record(n)
                if not box.simd and not box.clusters:
                    continue  # no SIMD box to frame, and no frame to clear
                self.d.update(n, clusters=tuple(SimdFrame(frame, lab, dim, box.scan and k == len(box.simd) - 1)
                                                 for k, (lab, dim) in enumerate(box.simd)))

    def returns(self, stmt: A.Return, declared: tuple[TensorType, ...]) -> None:
        if len(stmt.values) != len(declared):
            raise self.err(f"diagram '{self.d.name}' declares {len(declared)} output(s) "
                           f"but returns {len(stmt.values)}", stmt.pos)
        for k, (e, want) in enumerate(zip(stmt.values, declared)):
            v = self.expr(e, Scope())
            if v.wire is None:
                v = self.materialize(v, e.pos)
            if v.view and any(lab is not None for lab in v.view):  # pragma: no cover - no free indices here
                raise self.err("a returned value cannot depend on an index", e.pos)
            got = self.type_of(v)
            if self.d.id_range(v.placed) is not None:
                raise self.err(f"output {k + 1} of '{self.d.name}' is token ids ({show_type(got, self.d.id_range(v.placed))}); "
                               "a diagram returns real numbers (gather or embed by the ids to return vectors)", e.pos)
            if got != want:
                raise self.err(f"output {k + 1} of '{self.d.name}' has type {show_type(got)} "
                               f"but the diagram declares {show_type(want)}", e.pos)
            self.d.outputs.append(v.placed)

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

    # -- assignments ------------------------------------------------------------------
    def assign(self, stmt: A.Assign) -> None:
        scope = Scope()
        targets = [self.target(t, scope) for t in stmt.targets]
        rhs = stmt.value
        if len(targets) > 1:
            if not isinstance(rhs, A.Call):
                raise self.err(f"{len(targets)} names on the left need a box with "
                               f"{len(targets)} outputs on the right", rhs.pos)
            vals = self.call(rhs, scope, want_all=True)
            if len(vals) != len(targets):
                raise self.err(f"'{rhs.box.text}' has {len(vals)} output(s) but "
                               f"{len(targets)} names are assigned", stmt.pos)
        else:
            vals = [self.expr(rhs, scope)]
        self.bind_all(targets, vals, scope)

    def scan(self, stmt: A.Scan) -> None:
        scope = Scope()
        targets = [self.target(t, scope) for t in stmt.targets]
        self.bind_all(targets, self.scan_call(stmt.call, scope, targets, stmt), scope)

    def repeat(self, stmt: A.Repeat) -> None:
        scope = Scope()
        targets = [self.target(t, scope) for t in stmt.targets]
        if len(targets) != 1:
            raise self.err("repeat gives one value: y = repeat 6 Block(x)", stmt.pos)
        self.bind_all(targets, self.repeat_call(stmt, scope), scope)

    def target(self, t: A.Target, scope: Scope) -> tuple[str, list[str], A.Name]:
        """A name on the left and the indices it binds, as statement labels."""
        labels: list[str] = []
        for i in t.indices:
            shared = scope.active.get(i.text)  # bound by an earlier name: x1[i], x2[i] = split(...)
            if shared in labels:
                raise self.err(f"index '{i.text}' appears twice on '{t.name.text}'", i.pos)
            if shared is None:
                shared = scope.bind(i.text)
                scope.first_use[shared] = i.pos
            labels.append(shared)
        name = t.name.text
        if name != "_" and (name in self.names or name in self.local_boxes):
            where = self.name_pos.get(name)
            raise self.err(f"'{name}' is already defined" + (f" (at {where})" if where else "")
                           + "; wires are named once", t.name.pos)
        return name, labels, t.name

    def bind_all(self, targets: list[tuple[str, list[str], A.Name]], vals: list[Val], scope: Scope) -> None:
        for (name, labels, n), v in zip(targets, vals):
            self.bind(name, labels, n.pos, v, scope)

    def bind(self, name: str, labels: list[str], pos: Pos, v: Val, scope: Scope) -> None:
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
                           f"bind it on the left: {name}[{shown}]", pos)
        want = tuple(labels) + (None,) * len(self.local_type(v))
        if v.view == want or (not labels and all(lab is None for lab in v.view)):
            w = v.placed
            if self.d.wire_label(w) is None:
                self.d.update(w, name=name)
        else:
            simd = tuple((lab, scope.ranges[lab]) for lab in labels)
            axes = self.axes_for(v, {})
            _, (w,) = self.d.emit(Box(Kind.REINDEX, "reindex", simd, pos=pos, display=scope.shown(labels)),
                                  [(v.placed, axes)], [self.local_type(v)], out_names=[name])
        self.names[name] = w
        self.name_pos[name] = pos
