"""Arguments of the public functions, checked where they come in: a wrong type or value is a
:class:`DiagError` that says what was expected, never an ``AttributeError`` or a torch error
from deep inside (which ``except stringdiag.DiagError`` would miss).

The sizes check is the one ``--dims`` uses on the command line (``cli/options.py``): a name
must be a dimension the diagram or its file declares, so a misspelt one is refused rather
than ignored while the file's default is used."""
from __future__ import annotations

import math
import operator
import os
from pathlib import Path
from typing import Any, Mapping

from ..errors import INT64_MAX, DiagError, kind
from .decls import Program, suggest
from .diagram import Diagram



def need_diagram(value: Any, function: str) -> Diagram:
    """``value`` if it is a :class:`Diagram`; a Program or a text is told how to get one."""
    if isinstance(value, Diagram):
        return value
    if isinstance(value, Program):
        names = ", ".join(f"'{n}'" for n in value.own) or "none"
        raise DiagError(f"{function}() takes a diagram, not a program: pick one of its diagrams by name, "
                        f"program['NAME'] (this one defines {names})")
    if isinstance(value, str):
        raise DiagError(f"{function}() takes a diagram, not a string: read the file with "
                        f"stringdiag.load(path) or its text with stringdiag.loads(text), then pick one "
                        f"of its diagrams by name, program['NAME']")
    raise DiagError(f"{function}() takes a diagram (stringdiag.load(path)['NAME']), got {kind(value)}")


def need_sizes(dims: Any, option: str = "dims") -> dict[str, int]:
    """``dims`` as a dict of dimension names to sizes, integers from 0 (None: no sizes)."""
    if dims is None:
        return {}
    if not isinstance(dims, Mapping):
        raise DiagError(f"{option} must be a dict of dimension sizes such as {{'d': 64, 'k': 16}}, got {kind(dims)}")
    out: dict[str, int] = {}
    for name, value in dims.items():
        if not isinstance(name, str):
            raise DiagError(f"{option}: a dimension is named by a string, got {kind(name)}")
        # 0 is a size (an empty axis: the primitives are tested at it); a repeat's count is checked
        # where it is used (at least one)
        out[name] = need_int(value, f"{option}: the size of '{name}'", least=0)
    return out


def check_dim_names(diagram: Diagram, names, option: str = "dims", takes: list[str] | None = None) -> None:
    """Every name a dimension of ``diagram``: one it or a definition it uses names (its generic
    parameters too), or one its file (or the prelude) declares; else an error that lists what
    it takes (:func:`accepted_dims`). ``--dims`` on the command line is checked here too. A
    diagram composed in Python without a program (``graph/compose.py``) has no file to declare
    its dimensions: its names are not checked. With ``takes`` (training a whole model: the
    fixed dimensions it uses, which ``train/lm.py`` finds), a name must be one of those."""
    from .dimuse import dims_named  # (only when sizes are given)

    for name in names:
        if takes is not None and name not in takes:
            raise DiagError(f"{option}: '{name}' is not a fixed dimension that '{diagram.name}' uses (it takes "
                            f"{', '.join(takes)}){suggest(name, takes)}")
    prog = diagram.program
    for name in names if takes is None else ():
        if prog is None or prog.lookup_dim(name) is not None or name in diagram.generics \
                or name in dims_named(diagram):
            continue
        takes = accepted_dims(diagram)
        has = f"it takes {', '.join(takes)}" if takes else "it has no dimensions to size"
        raise DiagError(f"{option}: '{name}' is not a dimension of '{diagram.name}' or of its file ({has})"
                        f"{suggest(name, takes)}")


def accepted_dims(diagram: Diagram) -> list[str]:
    """The names sizes may be given for: the fixed dimensions ``diagram`` uses (:func:`fixed_dims`),
    its generic parameters, then every other dimension its file (or the prelude) declares."""
    known = fixed_dims(diagram) + list(diagram.generics)
    prog = diagram.program
    declared = (list(prog.dims) + (list(prog.prelude.dims) if prog.prelude else [])) if prog else []
    return known + [n for n in dict.fromkeys(declared) if n not in known]


def fixed_dims(diagram: Diagram) -> list[str]:
    """The fixed dimensions a diagram's wires and boxes use, in declaration order."""
    from .dimuse import fixed_dims_used  # (only on a mistake)

    use = fixed_dims_used(diagram)
    prog = diagram.program
    order = (list(prog.dims) + (list(prog.prelude.dims) if prog.prelude else [])) if prog else []
    return sorted(use.widths + use.counts, key=lambda n: (order.index(n) if n in order else len(order), n))


def need_int(value: Any, what: str, least: int | None = None, most: int = INT64_MAX) -> int:
    """``value`` as an int (a bool, a float or a string is not one; numpy's and torch's
    integers are), from ``least`` to ``most``."""
    if isinstance(value, bool):
        raise DiagError(f"{what} must be an integer, got {kind(value)}")
    try:
        n = operator.index(value)
    except TypeError:
        raise DiagError(f"{what} must be an integer, got {kind(value)}") from None
    if least is not None and n < least:
        raise DiagError(f"{what} must be {'positive' if least == 1 else f'at least {least}'}, got {n}")
    if n > most:
        raise DiagError(f"{what} must be at most {most}, got {n}")
    return n


def need_real(value: Any, what: str, least: float = -math.inf, most: float = math.inf) -> float:
    """``value`` as a finite float from ``least`` to ``most`` (a bool or a string is no number)."""
    if isinstance(value, (bool, str, bytes)):
        raise DiagError(f"{what} must be a number, got {kind(value)}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise DiagError(f"{what} must be a number, got {kind(value)}") from None
    if not math.isfinite(x) or not least <= x <= most:
        bounds = f"from {least:g} to {most:g}" if math.isfinite(most) else f"at least {least:g}"
        raise DiagError(f"{what} must be a finite number {bounds}, got {x:g}")
    return x


def need_text(value: Any, what: str) -> str:
    """``value`` if it is a str (bytes are refused: decode them first)."""
    if isinstance(value, str):
        return value
    hint = "; decode it first, text.decode('utf-8')" if isinstance(value, (bytes, bytearray)) else ""
    raise DiagError(f"{what} must be a string, got {kind(value)}{hint}")


def need_path(value: Any, what: str) -> str | Path:
    """``value`` if it names a file: a str (kept, so that messages show it as written), or an
    ``os.PathLike`` such as a ``pathlib.Path``."""
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike) and isinstance(os.fspath(value), str):
        return Path(value)
    raise DiagError(f"{what} must be a path (a str or a pathlib.Path), got {kind(value)}")


__all__ = ["kind", "need_diagram", "need_sizes", "check_dim_names", "accepted_dims", "fixed_dims", "need_int", "need_real",
           "need_text", "need_path"]
