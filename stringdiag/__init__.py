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

from . import derive as _derive  # noqa: F401  (loaded first, so that stringdiag.derive stays the function below)
from .errors import DiagError, Pos

__all__ = ["DiagError", "Pos", "Diagram", "Program", "load", "loads", "compile", "load_weights", "derive",
           "load_derivation", "load_taxonomy", "info", "export", "load_run", "generate", "save_pretrained",
           "from_pretrained", "trace", "__version__"]

# read on first use (PEP 562), so that `stringdiag --version`, `--help` or a bad command line
# never wait for networkx and lark, which the graph layer imports
_LAZY = {"Diagram": ".graph.diagram", "Program": ".graph.decls", "load": ".elaborate.loader",
         "loads": ".elaborate.loader", "__version__": ".version",  # the version: a constant (version.py)
         "trace": ".trace"}  # the function (torch is imported then, not before)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    diagram = import_module(".graph.diagram", __name__).Diagram
    diagram._repr_svg_, diagram._repr_html_ = _repr_svg_, _repr_html_  # the notebook pictures
    import_module(".graph.decls", __name__).Program._repr_html_ = _program_html
    value = getattr(import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def compile(diagram: "Diagram", dims: dict | None = None, approximator="mlp", dtype=None, fast: bool = True,
            incremental: bool = False):
    """Lower a diagram to a trainable ``torch.fx.GraphModule`` (see :mod:`stringdiag.lower`); with
    ``incremental``, to its incremental form (``initial_state``, ``step``, ``prefill``: a key/value
    cache, a recurrent state; see :mod:`stringdiag.lower.incremental`). ``dims`` maps the
    diagram's dimensions to positive integers; a name that is none of its dimensions is an
    error, as ``--dims`` makes it.

    Imported on first use, so that checking and drawing never wait for torch.
    """
    from .graph.arguments import check_dim_names, need_diagram, need_sizes
    from .lower import compile as lower

    check_dim_names(need_diagram(diagram, "compile"), need_sizes(dims))  # a misspelt name is no default's
    return lower(diagram, dims=dims, approximator=approximator, dtype=dtype, fast=fast, incremental=incremental)


def load_weights(module, state_dict, mapping=None, transpose=()) -> None:
    """Copy a reference model's ``state_dict`` into a compiled diagram, names mapped by
    ``mapping`` (a dict of names or ``*`` globs, or a callable); all or nothing, with every
    unmatched or mis-shaped tensor named (see :mod:`stringdiag.lower.porting`)."""
    from .lower.porting import load_weights as load

    load(module, state_dict, mapping, transpose)


def export(module, folder, diagram: "Diagram", dims: dict | None = None, approximator: str = "mlp"):
    """Write a compiled (perhaps trained) module as a folder that imports and runs with torch
    alone: ``folder/module.py`` (a class named after the diagram that builds itself and loads
    its weights), ``folder/weights.safetensors``, ``folder/diag/`` (the source); see
    :mod:`stringdiag.lower.export`. ``dims`` and ``approximator`` are those it was compiled with."""
    from .lower.export import export as write

    return write(module, folder, diagram, dims, approximator)


def load_run(folder):
    """A whole language model's training run read back (``stringdiag train FILE -d NAME -o DIR`` for a
    NAME of type ``[s] of v -> [s, v]``): ``.model`` (rebuilt from the sources its checkpoint carries,
    the weights checked and loaded), ``.tokenizer``, ``.context``, ``.result``; see
    :mod:`stringdiag.train.run`."""
    from .graph.arguments import need_path
    from .train.run import load_run as read

    return read(need_path(folder, "load_run(): folder"))


def generate(model, prompt, tokens: int, temperature: float = 1.0, top_k=None, seed: int = 0, context=None,
             **options):
    """``tokens`` token ids sampled by ``model``, a whole language model (``[s] of v -> [s, v]``),
    after the ids ``prompt``, each below v (temperature 0: the likeliest each
    time; ``top_k``: among the k likeliest), reproducibly from ``seed``; through the model's
    incremental form when it has one (``options``: top_p, stop, cache, progress; see
    :func:`stringdiag.train.run.generate`)."""
    from .train.run import generate as sample  # (which checks every argument)

    return sample(model, prompt, tokens, temperature, top_k, seed, context, **options)


def save_pretrained(model, folder, tokenizer=None):
    """A trained whole language model in Hugging Face's layout: ``model.safetensors`` and
    ``config.json`` (which carries the ``.diag`` sources), and ``tokenizer.json`` when given."""
    from .train.run import save_pretrained as save

    return save(model, folder, tokenizer)


def from_pretrained(folder):
    """``(model, tokenizer)`` from a folder :func:`save_pretrained` wrote, the weights checked
    against their checksum."""
    from .train.run import from_pretrained as read

    return read(folder)


def derive(text: str, file: str = "<string>", verify: bool = False):
    """Run a derivation given as the text of a ``.deriv`` file, as :func:`loads` reads a
    ``.diag`` one (files it names are found from the folder of ``file``, by default the working
    directory). Returns its :class:`~stringdiag.derive.derivation.Derivation`: ``.steps``,
    ``.result``, ``.table()``; a notebook shows the table and the chain of pictures.

    (``stringdiag.derive`` is this function; the subpackage is imported by its full name,
    ``from stringdiag.derive.derivation import Derivation``.)
    """
    from .derive.derivation import Runner
    from .graph.arguments import need_text

    return Runner(need_text(text, "derive(): the text"), need_text(file, "derive(): file"), verify, None).run()


def load_derivation(path, verify: bool = False):
    """Run a ``.deriv`` file, checking every step (and, with ``verify``, every equality
    numerically, in float64); a failing step is a :class:`DiagError` at its line."""
    from .derive.derivation import load_derivation as load
    from .graph.arguments import need_path

    return load(need_path(path, "load_derivation(): path"), verify)


def load_taxonomy(path, verify: bool = False):
    """Check a ``.tax`` family tree, every edge a derivation; a notebook shows its picture."""
    from .derive.family_tree import load_taxonomy as load
    from .graph.arguments import need_path

    return load(need_path(path, "load_taxonomy(): path"), verify)


def info(diagram: "Diagram"):
    """What ``stringdiag info`` says of a diagram (a dict, as ``--json``): printed as the
    command prints it, shown in a notebook as tables."""
    from .cli.summary import summarize
    from .graph.arguments import need_diagram

    return summarize(need_diagram(diagram, "info"))


def _repr_svg_(diagram: "Diagram") -> str:
    """A diagram's picture in a notebook. The graph layer knows nothing of pictures, so the
    package, which sits above every layer, attaches it; drawn (and graphviz read) on demand."""
    from .render.draw import to_svg

    return to_svg(diagram)


def _repr_html_(diagram: "Diagram") -> str:
    """A diagram in a notebook: the interactive view (``render/html.py``: pan, zoom, its
    definitions opened by a click), which a notebook prefers to the plain picture."""
    from .render.html import diagram_view

    return diagram_view(diagram)


def _program_html(prog: "Program") -> str:
    """A program in a notebook: a table of its diagrams, their types and pictures."""
    from .render.notebook import program_html

    return program_html(prog)

