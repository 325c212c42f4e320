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
from importlib import import_module

from .errors import DiagError, Pos

__all__ = ["DiagError", "Pos", "Diagram", "Program", "load", "loads", "compile", "load_weights", "__version__"]

# read on first use (PEP 562), so that `stringdiag --version`, `--help` or a bad command line
# never wait for networkx and lark, which the graph layer imports
_LAZY = {"Diagram": ".graph.diagram", "Program": ".graph.program", "load": ".graph.program",
         "loads": ".graph.program", "__version__": ".version"}  # the version: importlib.metadata


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import_module(".graph.diagram", __name__).Diagram._repr_svg_ = _repr_svg_  # the notebook picture
    value = getattr(import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def compile(diagram: "Diagram", dims: dict | None = None, approximator="mlp", dtype=None, fast: bool = True):
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


def _repr_svg_(diagram: "Diagram") -> str:
    """A diagram's picture in a notebook. The graph layer knows nothing of pictures, so the
    package, which sits above every layer, attaches it; drawn (and graphviz read) on demand."""
    from .render.draw import to_svg

    return to_svg(diagram)

