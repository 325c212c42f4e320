"""What a compiled module computes, kept on it (``module.interface``), so that a function given
a module can say what is wrong with it before torch does: ``generate`` wants a whole language
model (token ids ``[s] of v`` in, logits ``[s, v]`` out) and ids below v, and a head
(``[s, d] -> [s, d]``) given to it is refused by name rather than failing inside a matmul."""
from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import nn

from ..errors import DiagError, kind
from ..graph.arguments import need_int, need_real
from ..graph.diagram import Diagram
from ..graph.types import DimKind


class Interface(NamedTuple):  # a tuple: copied and pickled with the module
    diagram: str  # its name
    signature: str  # 'GPT : [s] of v -> [s, v]'
    vocab: int | None  # the size of v for a whole language model, else None
    sizes: tuple[tuple[str, int], ...] = ()  # the fixed sizes it was compiled with, by name

    def check_export(self, diagram: Diagram, dims: dict[str, int]) -> None:
        """An export's record must be what this module was compiled from: the same diagram, no
        size other than the one it was built with (the folder's module would say otherwise)."""
        if (diagram.name, diagram.signature()) != (self.diagram, self.signature):
            raise DiagError(f"export(): the module was compiled from {self.signature}, not from "
                            f"{diagram.signature()}; give the diagram it was compiled from")
        built = dict(self.sizes)
        wrong = [f"{n}={v} (it was compiled with {n}={built[n]})" for n, v in dims.items() if built.get(n, v) != v]
        if wrong:
            raise DiagError(f"export(): dims {', '.join(wrong)}; give the sizes it was compiled with")


def interface(diagram: Diagram, sizes: dict[str, int]) -> Interface:
    """The interface of ``diagram`` compiled at ``sizes``."""
    v = vocab_dim(diagram)
    size = sizes.get(v) if v is not None else None
    return Interface(diagram.name, diagram.signature(), size if isinstance(size, int) else None,
                     tuple(sorted(sizes.items())))


def vocab_dim(d: Diagram) -> str | None:
    """v when ``d`` is ``[s] of v -> [s, v]`` over a seq dimension s, else None."""
    if len(d.inputs) != 1 or len(d.outputs) != 1 or d.program is None:
        return None
    v, (t_in, t_out) = d.id_range(d.inputs[0]), (d.input_types[0], d.output_types[0])
    decl = d.program.lookup_dim(t_in[0].name) if len(t_in) == 1 and t_in[0].name else None
    if v is None or v.name is None or decl is None or decl.kind is not DimKind.SEQ or t_out != (t_in[0], v):
        return None
    return v.name


LM = "a whole language model (a diagram of type [s] of v -> [s, v]: token ids in, logits out)"


def need_language_model(model: Any, function: str) -> int | None:
    """The vocabulary size of ``model`` when it is a compiled stringdiag module (a run's model,
    a compiled diagram, its incremental form), None for another torch module; a module
    compiled from any other diagram is refused."""
    if not isinstance(model, nn.Module):
        raise DiagError(f"{function}() takes {LM}, compiled to a torch module "
                        f"(stringdiag.compile(program['GPT']) or a run's .model), got {kind(model)}")
    found = getattr(model, "interface", None) or getattr(getattr(model, "net", None), "interface", None)
    if not isinstance(found, Interface):
        return None
    if found.vocab is None:
        raise DiagError(f"{function}() takes {LM}; this module was compiled from {found.signature} "
                        f"(a head is trained or sampled inside a language model: stringdiag train --lm)")
    return found.vocab


def need_prompt(prompt: Any, vocab: int | None, function: str = "generate") -> None:
    """``prompt``: token ids (a list of ints, a 1-d integer tensor) or a batch of them (a
    list of such lists, a 2-d tensor), each from 0 to ``vocab`` - 1 when it is known."""
    what = f"{function}(): the prompt"
    if isinstance(prompt, torch.Tensor):
        if prompt.dtype.is_floating_point or prompt.dtype.is_complex or prompt.dtype == torch.bool or \
                prompt.dim() not in (1, 2):
            raise DiagError(f"{what} must be token ids: a list of ints or a 1-d or 2-d integer tensor, got a "
                            f"{prompt.dim()}-d {str(prompt.dtype).removeprefix('torch.')} tensor")
        rows = prompt.reshape(-1, prompt.shape[-1]).tolist() if prompt.dim() else []
    elif isinstance(prompt, (list, tuple)):
        batch = bool(prompt) and isinstance(prompt[0], (list, tuple, torch.Tensor))
        rows = [_row(p, what) for p in prompt] if batch else [list(prompt)]
    else:
        hint = "; encode text first (a run's .tokenizer.encode(text))" if isinstance(prompt, str) else ""
        raise DiagError(f"{what} must be token ids (a list of ints), got {kind(prompt)}{hint}")
    for row in rows:
        for t in row:
            if need_int(t, f"{what}'s token ids", 0) >= (vocab or 2 ** 63):
                raise DiagError(f"{what}'s token ids must be below {vocab}, the model's vocabulary size; got {t}")


def _row(p: Any, what: str) -> list:
    """One prompt of a batch: a list (tuple) of ids, or a 1-d integer tensor."""
    if isinstance(p, (list, tuple)):
        return list(p)
    if isinstance(p, torch.Tensor) and not (p.dtype.is_floating_point or p.dtype.is_complex) and p.dim() == 1:
        return p.tolist()
    raise DiagError(f"{what}: each prompt of a batch must be token ids (a list of ints), got {kind(p)}")


def need_sampling(tokens: Any, temperature: Any, top_k: Any, seed: Any, context: Any, options: dict) -> None:
    """generate's numbers: ``tokens`` from 0, ``temperature`` finite from 0, ``top_k`` and
    ``context`` positive (or None), ``seed`` one torch takes, ``top_p`` from 0 to 1."""
    need_int(tokens, "generate(): tokens", 0)
    need_real(temperature, "generate(): temperature", 0)
    if top_k is not None:
        need_int(top_k, "generate(): top_k", 1)
    need_int(seed, "generate(): seed", -2 ** 63, 2 ** 64 - 1)
    if context is not None:
        need_int(context, "generate(): context", 1)
    if options.get("top_p") is not None:
        need_real(options["top_p"], "generate(): top_p", 0, 1)
    stop = options.get("stop", ())
    if isinstance(stop, (str, bytes)) or not hasattr(stop, "__iter__"):
        raise DiagError(f"generate(): stop must be a list of token ids, got {kind(stop)}")
    for t in stop:
        need_int(t, "generate(): a stop token id", 0)
    if options.get("cache") not in (None, True, False):
        raise DiagError(f"generate(): cache must be True, False or None, got {kind(options['cache'])}")
    if options.get("progress") is not None and not callable(options["progress"]):
        raise DiagError(f"generate(): progress must be a function progress(done, total), "
                        f"got {kind(options['progress'])}")


def need_dtype(dtype: Any) -> None:
    """None, or a floating-point (or complex) torch dtype: a module's parameters are real."""
    if dtype is not None and not (isinstance(dtype, torch.dtype) and (dtype.is_floating_point or dtype.is_complex)):
        raise DiagError(f"dtype must be a floating-point torch dtype such as torch.float64, got {kind(dtype)}")


__all__ = ["Interface", "interface", "vocab_dim", "need_language_model", "need_prompt", "need_sampling",
           "need_dtype", "LM"]
