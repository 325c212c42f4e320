"""From a PyTorch module to a diagram: ``trace(module, example_inputs, other_inputs)`` captures
the module with torch.fx, reads the batch and sequence axes from runs on the examples, and
writes a ``.diag`` program (one definition per submodule) with the map from the module's
weights to the compiled program's, so that ``compile`` of the trace, loaded with the module's
weights, computes what the module does. What the module makes from sizes and buffers alone is
read by its values (positions, masks, numbers, constants stored with the weights:
``byvalue.py``), so the written file and weights file stand on their own. What the language
cannot say is kept as a marked box, run by torch when ``Traced.compile`` compiles it, with a
warning at the line of source that did it."""
from __future__ import annotations

import re
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import torch
from torch import nn

from ..errors import DiagError, kind
from ..graph.arguments import need_text
from .capture import ModuleCall
from .body import ident as ident_of
from .byvalue import CONSTANT
from .emit import Emitter


@dataclass
class WeightMap:
    """The module's parameter names -> the compiled program's (a list where one tensor is
    cut into several, in order, along its first axis), and the names stored transposed."""

    mapping: dict = field(default_factory=dict)
    transpose: list = field(default_factory=list)
    constants: dict = field(default_factory=dict)  # the module's constants (``NAME@constant``) -> their tensors
    aliases: list = field(default_factory=list)  # names of a tensor mapped under another name (tied weights)
    squeeze: list = field(default_factory=list)  # names stored without their axes of size one ([1, 1, d] as [d])

    def _state(self, state_dict: Mapping[str, torch.Tensor]) -> dict:
        state = {k: v for k, v in state_dict.items() if k not in self.aliases}
        state.update({k: state[k].reshape([n for n in state[k].shape if n != 1]) for k in self.squeeze if k in state})
        return {**state, **self.constants}

    def load(self, compiled: nn.Module, state_dict: Mapping[str, torch.Tensor]) -> None:
        from ..lower.porting import load_weights

        load_weights(compiled, self._state(state_dict), self.mapping, self.transpose)

    def tensors(self, state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The module's weights (and constants) under the compiled program's names (for a safetensors file)."""
        out = {}
        state_dict = self._state(state_dict)
        for theirs, ours in self.mapping.items():
            t = state_dict[theirs]
            t = t.t() if theirs in self.transpose and t.dim() == 2 else t
            parts = ours if isinstance(ours, list) else [ours]
            out.update({o: p.contiguous() for o, p in zip(parts, t.chunk(len(parts), 0))})
        return out


@dataclass
class Traced:
    """A traced module: ``program, weights = trace(...)`` unpacks the two that matter."""

    program: Any  # stringdiag.graph.decls.Program
    weights: WeightMap
    text: str
    name: str  # the module's own definition
    warnings: list
    opaque: dict  # box name -> emit.Opaque

    def __iter__(self) -> Iterator:
        return iter((self.program, self.weights))

    def compile(self, dtype: torch.dtype | None = None, **kwargs) -> nn.Module:
        """The module as the compiler makes it from the trace (opaque boxes run by torch)."""
        from ..elaborate.loader import loads
        from ..lower import compile as lower
        from .compiled import opaque_boxes

        # the file marks opaque boxes abstract (nothing in it says how to run them); here torch runs them
        runnable = (loads(re.sub(r"(?m)^abstract (op_)", r"fixed \1", self.text), "<trace>") if self.opaque
                    else self.program)
        with opaque_boxes(self.opaque):
            return lower(runnable[self.name], approximator="linear", dtype=dtype, **kwargs)


def _compiled_name(ours, ident):
    """The name the compiler gives a weight (each part an identifier, a layer's number kept)."""
    if not isinstance(ours, str):
        return [_compiled_name(o, ident) for o in ours]
    return ".".join(p if p.isdigit() else ident(p) for p in ours.split("."))


def _calls(module: nn.Module, example_inputs, more) -> list[ModuleCall]:
    """The runs: the examples, the examples with one more row of batch, and the other examples."""
    def call(x) -> ModuleCall:
        if isinstance(x, Mapping):
            return ModuleCall((), dict(x))
        return ModuleCall(tuple(x) if isinstance(x, (tuple, list)) else (x,), {})

    first = call(example_inputs)
    grow = lambda t: torch.cat([t, t[:1]]) if isinstance(t, torch.Tensor) and t.dim() else t  # noqa: E731
    runs = [first, ModuleCall(*torch.utils._pytree.tree_map(grow, (first.args, first.kwargs)))]
    return runs + ([call(more)] if more is not None else [])


def _check(module, example_inputs, other_inputs, file) -> None:
    """trace's arguments: a torch module, inputs as a module is called with, a file name or None."""
    if not isinstance(module, nn.Module):
        raise DiagError(f"trace() takes a torch module (an nn.Module), got {kind(module)}")
    for what, x in (("example_inputs", example_inputs), ("other_inputs", other_inputs)):
        if not isinstance(x, (torch.Tensor, tuple, list, Mapping)) and (what == "example_inputs" or x is not None):
            raise DiagError(f"trace(): {what} must be a tensor, a tuple of arguments or a dict of keyword "
                            f"arguments, got {kind(x)}")
    if file is not None:
        need_text(file, "trace(): file")


def trace(module: nn.Module, example_inputs, other_inputs=None, file: str | None = None) -> Traced:
    """Trace ``module`` called on ``example_inputs`` (a tensor, a tuple of positional
    arguments, or a dict of keyword ones; the first axis of each tensor is the batch). With
    ``other_inputs`` (the same with another sequence length), the axes whose length differs
    become the sequence dimension ``s``; otherwise every axis is fixed."""
    _check(module, example_inputs, other_inputs, file)
    module = module.eval()
    calls = _calls(module, example_inputs, other_inputs)
    em = Emitter()
    em.tied = _tied(module)
    em.reset()
    em.vocabulary = next((m.num_embeddings for m in module.modules() if isinstance(m, nn.Embedding)), None)
    with torch.no_grad():
        em.define(module, calls)  # the first pass learns how sizes are cut
        em.sizes.frozen = True
        em.sizes.literal = em.sizes.conflict is not None
        top, text, program = _write(em, module, calls, file)
        if program is None and not em.sizes.literal:  # sizes the checker cannot match by name: by number
            em.sizes.literal = True
            top, text, program = _write(em, module, calls, file)
    if program is None:
        raise DiagError(f"the trace of {type(module).__name__} does not check (a bug of the tracer): {text}")
    if em.sizes.literal:
        em.warnings.append(f"warning: {type(module).__name__}'s sizes are cut in ways that names cannot say at once "
                           "(a width split into 8 * 8 and 4 * 16, say): every fixed size is written as its number")
    from ..lower.param_names import ident

    weights = WeightMap()
    for ours, theirs, transposed in top.weights:
        weights.mapping[theirs] = _compiled_name(ours, ident)
        if transposed == "squeeze":
            weights.squeeze.append(theirs)
        elif transposed:
            weights.transpose.append(theirs)
        if theirs.endswith(CONSTANT) and theirs not in weights.constants:
            where, _, key = theirs.rpartition(".")
            weights.constants[theirs] = em.constants[(id(module.get_submodule(where)), key)]
    for t in em.tied.values():
        if t.used:
            weights.mapping[t.names[0]] = f"{t.box}.weight"
            weights.aliases += t.names[1:]
    return Traced(program, weights, text, top.name, em.warnings, em.fixed)


def _write(em: Emitter, module: nn.Module, calls, file: str | None):
    """The second pass: the definitions written with the sizes' cuts known; (top, text, program),
    the program None (the text then the checker's error and the text) when it does not check."""
    from ..elaborate.loader import loads

    em.reset()
    top = em.define(module, calls)
    text = em.source()
    try:
        return top, text, loads(text, f"{file or type(module).__name__ + '.diag'}")
    except DiagError as e:
        return top, f"{e}\n{text}", None


def _tied(module: nn.Module) -> dict:
    """The parameters held by several submodules, each one learnable tensor of the file."""
    from .emit import Tied

    names: dict = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), (p, []))[1].append(name)
    out = {}
    for key, (p, held) in names.items():
        if len(held) > 1:
            box = ident_of(held[0].rsplit(".", 2)[-2] if "." in held[0] else held[0])
            out[key] = Tied(box, held, tuple(p.shape))
    return out


class _Package(types.ModuleType):
    """This package, callable as the function: ``stringdiag.trace(module, example)`` works whether
    ``stringdiag.trace`` was first reached as the package's attribute or imported as a package."""

    def __call__(self, *args, **kwargs) -> Traced:
        return trace(*args, **kwargs)


sys.modules[__name__].__class__ = _Package
