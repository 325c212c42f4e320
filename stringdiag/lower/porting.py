"""Loading another library's weights into a compiled diagram, by name, all or nothing.

A compiled module's parameters are named from diagram paths (``names.py``: ``attn.WQ.weight``);
a reference model's ``state_dict`` names them its own way. :func:`load_weights` takes a
mapping from reference names to ours and checks the whole correspondence before it copies
anything: every reference tensor must land in one of our tensors of its shape, and every one
of ours must receive one. What fails is reported at once, every tensor of it.

Two layouts differ between libraries and are said explicitly, never guessed:

- a reference tensor that packs several of ours (``c_attn`` holds Q, K and V) maps to a list
  of names: it is cut into that many equal parts along its first axis, in order;
- a reference that stores a linear map as ``[in, out]`` (Hugging Face's ``Conv1D``) is named in
  ``transpose``: its 2-D tensors are transposed before anything else, to torch's ``[out, in]``.

Names in ``mapping`` and ``transpose`` may hold ``*``, which matches within one dotted part
(``h.*.ln_1.weight``); in a mapping's target each ``*`` is what the source's matched, in order.
A named placeholder such as ``{layer}`` also matches within one dotted part, and the target's
``{layer}`` is what it matched, wherever it stands: the map of one layer ports a stack
(``{"h.{layer}.ln_1.weight": "x.{layer}.ln1.weight"}``; ``names.py`` numbers a stack's copies).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Union

import torch
from torch import nn

from ..errors import DiagError, kind

Target = Union[str, list, tuple, None]
Rules = Union[Mapping[str, Target], Callable[[str], Target], None]


PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)\}")


def _pattern(glob: str) -> re.Pattern:
    """``*`` as an unnamed group, ``{name}`` as a named one (a name twice must match the same)."""
    seen: set[str] = set()

    def piece(part: str) -> str:
        if part == "*":
            return "([^.]*)"
        m = PLACEHOLDER.fullmatch(part)
        if not m:
            return re.escape(part)
        first = m[1] not in seen
        seen.add(m[1])
        return f"(?P<{m[1]}>[^.]*)" if first else f"(?P={m[1]})"
    return re.compile("".join(piece(p) for p in re.split(r"(\*|\{[A-Za-z_]\w*\})", glob)))


def _fill(template: str, m: re.Match) -> str:
    """``template`` with its ``*`` and ``{name}`` replaced by what the source's matched."""
    named = m.groupdict()
    unnamed = [g for k, g in enumerate(m.groups(), 1) if k not in {m.re.groupindex[n] for n in named}]
    for name in PLACEHOLDER.findall(template):
        if name not in named:
            raise DiagError(f"mapping target '{template}' names '{{{name}}}', which its source does not")
    template = PLACEHOLDER.sub(lambda p: named[p[1]], template)
    parts = template.split("*")
    if len(parts) - 1 > len(unnamed):
        raise DiagError(f"mapping target '{template}' has more '*' than its source")
    return parts[0] + "".join(c + p for c, p in zip(unnamed, parts[1:]))


def _target(name: str, rules: Rules) -> Target:
    """Where reference tensor ``name`` goes: by the callable, the first rule that matches it
    (an exact name before any pattern), or its own name."""
    if callable(rules):
        return rules(name)
    if not rules:
        return name
    if name in rules:
        return rules[name]
    for glob, to in rules.items():
        m = _pattern(glob).fullmatch(name) if "*" in glob or PLACEHOLDER.search(glob) else None
        if m:
            return to if to is None else ([_fill(t, m) for t in to] if isinstance(to, (list, tuple))
                                          else _fill(to, m))
    return name


def _matches(name: str, globs: Iterable[str]) -> bool:
    return any(_pattern(g).fullmatch(name) for g in globs)


@dataclass
class PortPlan:
    """What would be copied where, and every reason it cannot be."""

    copies: list  # (our name, tensor)
    problems: list  # lines of the error


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(map(str, t.shape)) + "]"


def plan(ours: Mapping[str, torch.Tensor], theirs: Mapping[str, torch.Tensor], rules: Rules,
         transpose: Iterable[str]) -> PortPlan:
    """Match every reference tensor to ours (split, transposed as asked); collect the problems."""
    p = PortPlan([], [])
    for name, t in theirs.items():
        to = _target(name, rules)
        if to is None:
            continue
        if _matches(name, transpose) and t.dim() == 2:
            t = t.t()
        parts = list(to) if isinstance(to, (list, tuple)) else [to]
        if t.dim() == 0 or t.shape[0] % len(parts):
            p.problems.append(f"reference '{name}' {_shape(t)} cannot be cut into {len(parts)} equal parts along its "
                              "first axis")
            continue
        for k, (dst, piece) in enumerate(zip(parts, t.chunk(len(parts), 0) if len(parts) > 1 else [t])):
            what = f"reference '{name}'" + (f" (part {k + 1} of {len(parts)})" if len(parts) > 1 else "")
            if dst not in ours:
                p.problems.append(f"{what} {_shape(piece)}: the module has no tensor '{dst}' (map it to "
                                  "one of ours, or to None to leave it out)")
            elif ours[dst].shape != piece.shape:
                p.problems.append(f"{what} {_shape(piece)} does not fit '{dst}' {_shape(ours[dst])}"
                                  + ("" if piece.dim() != 2 or ours[dst].shape != piece.t().shape
                                     else f" (stored [in, out]? add '{name}' to transpose=)"))
            else:
                p.copies.append((dst, piece))
    return p


def _aliases(module: nn.Module) -> dict[str, str]:
    """Each name in the state dict -> the first name of the same tensor (a weight set that a
    scanned body shares with its caller appears under both)."""
    first: dict[int, str] = {}
    out = {}
    for name, t in module.state_dict(keep_vars=True).items():
        out[name] = first.setdefault(id(t), name)
    return out


def _arguments(module: Any, state_dict: Any, mapping: Any, transpose: Any) -> list[str]:
    """load_weights' arguments checked (a DiagError naming the wrong one); the globs of ``transpose``."""
    if not isinstance(module, nn.Module):
        raise DiagError(f"load_weights() copies into a compiled diagram (a torch module), got {kind(module)}")
    if not isinstance(state_dict, Mapping):
        raise DiagError(f"load_weights(): state_dict must be a dict of names to tensors (a model's "
                        f".state_dict()), got {kind(state_dict)}")
    for name, t in state_dict.items():
        if not isinstance(name, str) or not isinstance(t, torch.Tensor):
            raise DiagError(f"load_weights(): state_dict must map names to tensors, but it maps {kind(name)} "
                            f"to {kind(t)}")
    if mapping is not None and not isinstance(mapping, Mapping) and not callable(mapping):
        raise DiagError(f"load_weights(): mapping must be a dict of names (or globs) or a function, "
                        f"got {kind(mapping)}")
    globs = [transpose] if isinstance(transpose, str) else list(transpose) if isinstance(transpose, Iterable) else None
    if globs is None or not all(isinstance(g, str) for g in globs):
        raise DiagError(f"load_weights(): transpose must be names (globs) of reference tensors, got {kind(transpose)}")
    return globs


def load_weights(module: nn.Module, state_dict: Mapping[str, torch.Tensor], mapping: Rules = None,
                 transpose: Iterable[str] | str = ()) -> None:
    """Copy ``state_dict`` (a reference model's) into ``module`` (a compiled diagram).

    ``mapping`` sends a reference name to one of ours, to a list of ours (the reference is cut
    into equal parts along its first axis), or to None (left out); it is a dict (names, or
    globs with ``*``) or a callable; a name it does not cover keeps its own. ``transpose``
    names (globs) the reference tensors stored as ``[in, out]``. Nothing is copied unless
    every reference tensor lands in exactly one of ours of its shape and every tensor of ours
    receives one; otherwise a DiagError lists each tensor that does not."""
    transpose = _arguments(module, state_dict, mapping, transpose)
    ours = module.state_dict()
    alias = _aliases(module)
    p = plan(ours, state_dict, mapping, transpose)
    given: dict[str, list[str]] = {}
    for dst, _ in p.copies:
        given.setdefault(alias[dst], []).append(dst)
    p.problems += [f"'{n}' is given {len(v)} times" for n, v in given.items() if len(v) > 1]
    p.problems += [f"'{n}' {_shape(ours[n])} is given nothing" for n in ours if alias[n] == n and n not in given]
    if p.problems:
        raise DiagError(f"cannot load the weights ({len(p.problems)} problems):\n  " + "\n  ".join(p.problems))
    with torch.no_grad():
        for dst, t in p.copies:
            ours[dst].copy_(t)
