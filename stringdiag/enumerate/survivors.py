"""The survivors named, ordered and written as a ``.diag`` file.

Order (documented, and the names follow it): for each family in turn, its smallest member
first — the families are ranked ``linear`` then ``dot``, which makes ``M0`` linear attention
and ``M1`` scaled dot product (the writer then checks them against the generator file's own
``M0`` and ``M1``) — then the rest by number of generators, family, and canonical form. A
member's family is the set of families its generators belong to: one family's name,
``both``, or ``none`` (a mechanism with no attention generator at all).

Families come from the required generators when a reading requires some (``--require
AttApply,LinAttApply``): each required generator is the family of the default family it
belongs to (``LinAttApply``: linear), or a family of its own name.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import DiagError
from ..graph.diagram import Diagram
from ..graph.types import show_type
from ..syntax.source import write_atomic
from .space import X, Generator, Wiring
from .symmetry import sort_key

DEFAULT_FAMILIES = {"linear": ("LinAttPrep", "LinAttApply"), "dot": ("AttPrep", "AttApply")}


@dataclass
class Named:
    name: str
    wiring: Wiring
    family: str
    generators: int
    source: str
    diagram: Diagram | None = None


def families_of(require: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The families a reading's required generators define (the defaults with none)."""
    if not require:
        return DEFAULT_FAMILIES
    out: dict[str, tuple[str, ...]] = {}
    for n in require:
        name = next((f for f, names in DEFAULT_FAMILIES.items() if n in names), n)
        out[name] = out.get(name, ()) + (n,)
    rank = list(DEFAULT_FAMILIES)
    return dict(sorted(out.items(), key=lambda kv: rank.index(kv[0]) if kv[0] in rank else len(rank)))


def family(w: Wiring, gens: list[Generator], families: dict[str, tuple[str, ...]]) -> str:
    used = {gens[g].name for g, _ in w.occurrences}
    hit = [f for f, names in families.items() if used & set(names)]
    return hit[0] if len(hit) == 1 else ("none" if not hit else "both")


def ordered(wirings: list[Wiring], gens: list[Generator], families=DEFAULT_FAMILIES) -> list[Named]:
    fams = [family(w, gens, families) for w in wirings]
    rank = {f: k for k, f in enumerate([*families, "both", "none"])}
    key = {id(w): (w.size, rank[f], sort_key(w)) for w, f in zip(wirings, fams)}
    firsts = []
    for f in families:
        of = [w for w, g in zip(wirings, fams) if g == f]
        if of:
            firsts.append(min(of, key=lambda w: key[id(w)]))
    rest = sorted((w for w in wirings if all(w is not x for x in firsts)), key=lambda w: key[id(w)])
    fam_of = {id(w): f for w, f in zip(wirings, fams)}
    return [Named(f"M{k}", w, fam_of[id(w)], w.size, source(w, gens, f"M{k}")) for k, w in enumerate(firsts + rest)]


def source(w: Wiring, gens: list[Generator], name: str) -> str:
    """The member as a diagram of the ``.diag`` language (for ``-o`` and ``--json``)."""
    stream = show_type(gens[0].ins[0])
    names = {}
    lines = []
    for k in w.topological():
        g, srcs = w.occurrences[k]
        gen = gens[g]
        outs = [f"v{k}" if len(gen.outs) == 1 else f"v{k}_{p}" for p in range(len(gen.outs))]
        for p, o in enumerate(outs):
            names[(k, p)] = o
        args = ", ".join("x" if s == X else names[s] for s in srcs)
        lines.append(f"  {', '.join(outs)} = {gen.name}({args})")
    lines.append(f"  return {names[w.root]}")
    return f"diagram {name}(x: {stream}) -> {stream} {{\n" + "\n".join(lines) + "\n}\n"


def write(path: str, members: list[Named], generator_file: str, header: str, defined: dict | None = None) -> None:
    """A ``.diag`` file importing the generators' file, one diagram per member (atomic).

    ``defined`` maps names the generators' file already defines to their diagrams: a member
    of that name must be isomorphic to it (then it is not written again; the import brings
    it), else the names would clash and it is an error."""
    rel = os.path.relpath(os.path.abspath(generator_file), os.path.dirname(os.path.abspath(path)) or ".")
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    parts = []
    for m in members:
        about = f"# {m.name}: {m.generators} generator{'s' if m.generators != 1 else ''}, {m.family}"
        have = (defined or {}).get(m.name)
        if have is None:
            parts.append(f"{about}\n{m.source}")
        elif have.isomorphic(m.diagram):
            parts.append(f"{about}: {rel} defines it already (the same diagram)\n")
        else:
            raise DiagError(f"{generator_file} defines a diagram '{m.name}' that is not the enumerated {m.name}; "
                            "rename it, or write the mechanisms elsewhere")
    body = "\n".join(parts)
    write_atomic(path, f"{comment}\nimport \"{rel}\"\n\n{body}")


__all__ = ["Named", "ordered", "source", "write", "family", "families_of", "DEFAULT_FAMILIES"]
