"""stringdiag: string diagrams with SIMD boxes and universal approximators.

>>> import stringdiag
>>> prog = stringdiag.loads('''
... dim s : seq
... dim d : fixed
... learn F : [d] -> [d]
... diagram Residual(x: [s, d]) -> [s, d] {
...   return x + F(x)
... }''')
>>> prog["Residual"]
<Diagram Residual : [s, d] -> [s, d], 2 boxes>
"""
from .errors import DiagError, Pos
from .graph.diagram import Diagram
from .graph.program import Program, load, loads
from .version import __version__

__all__ = ["DiagError", "Pos", "Diagram", "Program", "load", "loads", "compile", "load_weights", "__version__"]


def compile(diagram: Diagram, dims: dict | None = None, approximator="mlp", dtype=None, fast: bool = True):
    """Lower a diagram to a trainable ``torch.fx.GraphModule`` (see :mod:`stringdiag.lower`).

    Imported on first use, so that checking and drawing never wait for torch.
    """
    from .lower import compile as lower

    return lower(diagram, dims=dims, approximator=approximator, dtype=dtype, fast=fast)


def load_weights(module, state_dict, mapping=None, transpose=()) -> None:
    """Copy a reference model's ``state_dict`` into a compiled diagram, names mapped by
    ``mapping`` (a dict of names or ``*`` globs, or a callable); all or nothing, with every
    unmatched or mis-shaped tensor named (see :mod:`stringdiag.lower.porting`)."""
    from .lower.porting import load_weights as load

    load(module, state_dict, mapping, transpose)


def _repr_svg_(diagram: Diagram) -> str:
    """A diagram's picture in a notebook. The graph layer knows nothing of pictures, so the
    package, which sits above every layer, attaches it; drawn (and graphviz read) on demand."""
    from .render.draw import to_svg

    return to_svg(diagram)


Diagram._repr_svg_ = _repr_svg_
