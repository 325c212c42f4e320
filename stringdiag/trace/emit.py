"""Writing a captured module as ``.diag`` text: one definition per submodule, one statement
(or none, for what only moves axes) per operation.

Two passes over the same captures: the first learns how sizes are cut (``dims.SizeSpelling``), the
second writes with those cuts frozen, so that a size is written the same way everywhere."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx, nn
from torch.utils import _pytree as pytree

from ..errors import DiagError
from .attention import attention_of, multihead
from .body import TracedBody, TracedDefinition, TracedUse, ident, prefixed
from .capture import Capture, ModuleCall, capture
from .dims import SizeSpelling, classify
from .byvalue import input_free, materialise
from .modules import emit_module
from .ops import RELABEL
from .nodes import IGNORES_ARGS, emit_node, is_tensorish
from .eager_attention import plan
from .repeat import stack
from .values import TracedValue, lookup as _lookup, op_name, where_


@dataclass
class Tied:
    """A parameter several submodules hold (a language model's embedding and output head): one
    learnable tensor of the file, which each of them reads."""

    box: str
    names: list  # the module's names for it, the first the one the weight map reads
    shape: tuple
    used: bool = False

    def read(self, em) -> str:
        self.used = True
        for n in self.shape:
            em.sizes.used.add(n)
        return f"{self.box}()"


@dataclass
class Emitter:
    sizes: SizeSpelling = field(default_factory=SizeSpelling)
    captures: dict = field(default_factory=dict)  # id(module) -> Capture
    texts: dict = field(default_factory=dict)  # definition name -> text
    fixed: dict = field(default_factory=dict)  # opaque box name -> Opaque
    warnings: list = field(default_factory=list)
    reserved: set = field(default_factory=set)
    constants: dict = field(default_factory=dict)  # (id(module), name) -> the tensor a stored constant holds
    constant_owners: dict = field(default_factory=dict)  # (id(module), name) -> the node that made it
    tied: dict = field(default_factory=dict)  # id(parameter) -> Tied: one tensor used by several submodules

    vocabulary: int | None = None  # the rows of the module's embedding table: what token ids range over

    def ids(self, value: torch.Tensor) -> str:
        """`` of V`` for a tensor of token ids (integers), read by an ``nn.Embedding`` of V rows."""
        if value.dtype.is_floating_point or value.dtype == torch.bool:
            return ""
        if self.vocabulary is None:
            raise DiagError("an integer input, but the module has no nn.Embedding to say what it ranges over")
        return f" of {self.sizes.expr(self.vocabulary)}"

    def reset(self) -> None:
        self.texts, self.fixed, self.warnings = {}, {}, []
        self.reserved = {t.box for t in self.tied.values()}

    def capture(self, module: nn.Module, calls: list[ModuleCall]) -> Capture:
        key = id(module)
        if key not in self.captures:
            self.captures[key] = capture(module, calls)
        return self.captures[key]

    def warn(self, node: fx.Node, message: str) -> None:
        self.warnings.append(f"{where_(node)}: warning: {message}")

    def define(self, module: nn.Module, calls: list[ModuleCall], free_inputs: frozenset = frozenset()) -> TracedDefinition:
        """The definition of ``module`` as called in ``calls`` (one per run), written once per text;
        ``free_inputs``: the call's tensors (by position) that its caller made from sizes alone."""
        if isinstance(module, nn.MultiheadAttention):
            return multihead(self, module, calls)
        cap = self.capture(module, calls)
        body = TracedBody(self, module=module)
        body.attrs |= {ident(n.target.removeprefix("inner.")) for n in cap.graph.nodes if n.op == "call_module"}
        env: dict[fx.Node, Any] = {}
        inputs, ins = [], []
        eager = plan(cap.graph, cap.values[0])
        placeholders = [n for n in cap.graph.nodes if n.op == "placeholder" and isinstance(cap.values[0][n], torch.Tensor)]
        free = input_free(cap, eager.inner, {n for k, n in enumerate(placeholders) if k in free_inputs})
        said = functools.partial(self._said, body, cap, env, free)
        for node in cap.graph.nodes:
            if node in free:
                continue  # said where it is used, as what its values show it is
            if node.op not in ("placeholder", "call_module") and op_name(node) not in IGNORES_ARGS and (
                    node.op == "output" or is_tensorish(cap.values[0][node])):
                used = list(node.all_input_nodes) + [n for n in eager.attentions.get(node, {}).values()
                                                     if isinstance(n, fx.Node)]
                for a in used:
                    if a in free:
                        said(a)
            if node in eager.inner:
                env[node] = None  # part of an attention, written at its last product
            elif node in eager.attentions:
                env[node] = attention_of(self, body, cap, node, eager.attentions[node], env)
            elif node.op == "placeholder" and isinstance(cap.values[0][node], torch.Tensor):
                k = placeholders.index(node)
                env[node], declared = self._input(body, cap, node, k)
                if node.users:
                    inputs.append(k)
                    ins.append((env[node].wire, declared))
            elif node.op == "placeholder":
                env[node] = cap.values[0][node]
            elif node.op == "output":
                outs = [v for v in pytree.tree_leaves(_lookup(env, node.args[0])) if isinstance(v, TracedValue)]
                body.say("return " + ", ".join(body.whole(v, "out") for v in outs))
                sig = ", ".join(body.type_of(v.axes) for v in outs)
            elif node.op == "call_module":
                env[node] = emit_module(self, body, cap, node, env, free, said)
            else:
                env[node] = emit_node(self, body, cap, node, env)
        read = [n for n, _ in ins if _reads(body, n)]  # passed on to a use that takes it not: no input
        return self.write(type(module).__name__, [d for n, d in ins if n in read],
                          sig, body, [k for k, (n, _) in zip(inputs, ins) if n in read])

    def _input(self, body: TracedBody, cap: Capture, node: fx.Node, k: int) -> tuple[TracedValue, str]:
        """The k-th tensor input of a definition, and its declaration (``x: [s, d]``, ``ids: [s] of v``)."""
        value = cap.values[0][node]
        axes = classify([run[node].shape for run in cap.values], node.name)
        name = body.fresh(cap.inputs[k] if k < len(cap.inputs) else node.name)
        ids = self.ids(value) if any(_takes_ids(cap, u) for u in node.users) else ""
        return TracedValue.whole(name, axes, ids=bool(ids)), f"{name}: {body.type_of(axes)}{ids}"

    def _said(self, body: TracedBody, cap: Capture, env: dict, free: set, a: fx.Node) -> Any:
        """A node made from sizes alone as the language says it (written once, where first used)."""
        if a not in env:
            value = materialise(self, body, cap, a)
            if value is None:  # as computed, from what it is computed from
                if a.op not in ("call_function", "call_method"):
                    raise DiagError(f"{where_(a)}: '{a.name}' is made from the input's length, and is neither "
                                    "positions, a mask nor a constant the language can say; cannot trace it")
                for b in a.all_input_nodes:
                    if b in free:
                        self._said(body, cap, env, free, b)
                value = emit_node(self, body, cap, a, env)
            env[a] = value
        return env[a]

    def write(self, cls: str, ins: list[str], sig: str, body: TracedBody, inputs: list[int]) -> TracedDefinition:
        lines = stack(body)
        inner = "\n".join("  " + s for s in body.decls + [x.text() if isinstance(x, TracedUse) else x for x in lines])
        text = f"({', '.join(ins)}) -> {sig} {{\n{inner}\n}}"
        name, k = ident(cls), 1
        while name in self.texts and self.texts[name] != text:
            k += 1
            name = f"{ident(cls)}_{k}"
        self.texts[name] = text
        self.reserved.add(name)
        weights = body.weights + [(prefixed(u.outs[0], o), f"{u.attr}.{t}", tr) for u in lines if isinstance(u, TracedUse)
                                  for o, t, tr in u.weights]
        return TracedDefinition(name, inputs, weights)

    def source(self) -> str:
        """The whole file: dimensions, opaque boxes, definitions (each after those it uses)."""
        boxes = []
        for name, op in self.fixed.items():
            sig_in = ", ".join("[" + ", ".join(self.sizes.axis(a) for a in axes if a.kept) + "]" for axes in op.ins)
            sig_out = "[" + ", ".join(self.sizes.axis(a) for a in op.out if a.kept) + "]"
            boxes.append(f"abstract {name} : {sig_in} -> {sig_out}   # NOT EXPRESSIBLE in the language: torch's "
                        f"{op.label}, run by torch when the trace compiles it")
        head = ["dim s : seq"] if "s" in self.sizes.used_kinds else []
        head += [f"dim d{n} : fixed = {n}" for n in self.sizes.atoms()] + boxes
        head += [f"learn {t.box} : -> [{', '.join(self.sizes.expr(n) for n in t.shape)}]   # one tensor: "
                 + ", ".join(t.names) for t in self.tied.values() if t.used]
        defs = [f"diagram {name}{text}" for name, text in self.texts.items()]
        return "\n".join(head) + "\n\n" + "\n\n".join(defs) + "\n"




def _takes_ids(cap: Capture, user: fx.Node) -> bool:
    """Whether an integer input is token ids: read by an nn.Embedding or ``F.embedding``, or handed
    to a submodule (whose own definition says), perhaps after a reshape; positions computed with
    are real numbers."""
    if user.op == "call_function" and op_name(user) == "embedding":
        return True
    if op_name(user) in RELABEL | {"long", "int", "to"} and user.op != "call_module":
        return any(_takes_ids(cap, u) for u in user.users)
    return user.op == "call_module" and (isinstance(cap.submodule(user), nn.Embedding)
                                         or not _is_leaf_box(cap.submodule(user)))


def _is_leaf_box(m: nn.Module) -> bool:
    return isinstance(m, (nn.Linear, nn.LayerNorm, nn.Dropout, nn.Identity))


def _reads(body: TracedBody, wire: str) -> bool:
    """Whether a statement of the body reads ``wire``."""
    pattern = re.compile(rf"(?<![\w.]){re.escape(wire)}(?!\w)")
    return any(pattern.search(x.text() if isinstance(x, TracedUse) else x.split("=", 1)[-1]) for x in body.lines)
