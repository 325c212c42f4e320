"""A compiled diagram as a folder that imports and runs with torch alone.

Like torch.fx's ``GraphModule.to_folder`` (a module file with a class whose ``__init__`` builds
the submodules, its weights beside it, an ``__init__.py``), except that nothing is pickled:
``to_folder`` pickles every submodule it cannot write as a constructor call, here every module
the lowering makes is rebuilt by code (or the export is refused, naming the module). The
helpers the forward code calls (``primitives.py``) are copied in as source, with what they use
in turn, so the folder never imports stringdiag. The weights are a safetensors file, written
with its checksum (``tensorfile.py``) and read back by a dozen lines of plain torch copied in
the same way (:func:`read_safetensors`): a JSON header and raw bytes, no unpickling, and no
dependency but torch. The ``.diag`` files the diagram came from travel in ``diag/``.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import json
import keyword
import os
import re
import shutil
import sys
import tempfile
import textwrap
import types
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import fx, nn

from ..errors import DiagError, kind
from ..graph.arguments import check_dim_names, need_diagram, need_path, need_sizes
from ..graph.diagram import Diagram
from ..syntax.source import read_source, refuses_files, shown_path
from ..version import __version__
from .approximators import LearnableTensor
from .interface import Interface
from .tensorfile import write_atomic

MODULE, WEIGHTS, SOURCES = "module.py", "weights.safetensors", "diag"
MARK = "# Written by stringdiag's export"  # the first line of module.py: what may be replaced
CACHES = frozenset({"_MASKS"})  # module-level caches of copied helpers (banded.py's masks): written empty
LITERAL_LIMIT = 256  # a buffer outside the state dict up to this many values is written into module.py


# -- what the folder carries ------------------------------------------------------------
def read_safetensors(path) -> dict:
    """A safetensors file's tensors, read with torch alone: an 8-byte length, a JSON header,
    then raw little-endian bytes (nothing is unpickled), checked against the SHA-256 that
    stringdiag wrote in the metadata (``tensorfile.checksum``: name, dtype, shape, bytes)."""
    dtypes = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
              "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
              "U8": torch.uint8, "BOOL": torch.bool}
    if sys.byteorder != "little":
        raise ValueError("reading safetensors here needs a little-endian machine")
    data = Path(path).read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", None) or {}
    h, out = hashlib.sha256(), {}
    for name in sorted(header):
        info = header[name]
        if info["dtype"] not in dtypes:
            raise ValueError(f"{path}: tensor {name!r} has dtype {info['dtype']}, which this reader does not know")
        dtype = dtypes[info["dtype"]]
        start, end = info["data_offsets"]
        raw = data[8 + n + start:8 + n + end]
        flat = torch.frombuffer(bytearray(raw), dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = flat.reshape(info["shape"])
        h.update(f"{name}\0{str(dtype).removeprefix('torch.')}\0{list(info['shape'])}\0".encode())
        h.update(raw)
    expected = json.loads(meta.get("stringdiag", "{}")).get("checksum")
    if expected is not None and expected != "sha256:" + h.hexdigest():
        raise ValueError(f"{path}: the weights do not match their checksum (the file is damaged)")
    return out


# -- helpers as source ------------------------------------------------------------------
def _local_names(tree: ast.AST) -> set[str]:
    """Names bound inside a definition (arguments, assignments, loop targets): not globals."""
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    names |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments)
              for a in n.posonlyargs + n.args + n.kwonlyargs + [n.vararg, n.kwarg] if a is not None}
    return names


def _read_names(tree: ast.AST) -> set[str]:
    """Names a definition reads, leaving out annotations (never evaluated: the file has
    ``from __future__ import annotations``)."""
    skip = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.arg) and n.annotation is not None:
            skip |= {id(x) for x in ast.walk(n.annotation)}
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns is not None:
            skip |= {id(x) for x in ast.walk(n.returns)}
        if isinstance(n, ast.AnnAssign):
            skip |= {id(x) for x in ast.walk(n.annotation)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and id(n) not in skip}


def _portable(module: str) -> bool:
    """Whether a module may be imported by the exported code: torch's or the standard library's."""
    top = module.split(".")[0]
    return top == "torch" or top in sys.stdlib_module_names


@dataclass
class Helpers:
    """The module-level code the exported forward needs: imports, constants and the source of
    every stringdiag function or class it calls, with what those read in turn, once each."""

    imports: dict[str, str] = field(default_factory=dict)  # bound name -> import statement
    values: dict[str, str] = field(default_factory=dict)  # bound name -> assignment
    aliases: dict[str, str] = field(default_factory=dict)  # fx's name for a helper -> assignment
    sources: dict[str, str] = field(default_factory=dict)  # bound name -> definition, dependencies first
    objects: dict[str, object] = field(default_factory=dict)  # bound name -> what it is bound to here

    def bind(self, name: str, obj: object) -> None:
        """Make ``name`` mean ``obj`` in the exported module."""
        if name in self.objects:
            if self.objects[name] is not obj:
                raise ValueError(f"two helpers need the name {name!r} for different things")
            return
        self.objects[name] = obj
        if isinstance(obj, types.ModuleType):
            if not _portable(obj.__name__):
                raise ValueError(f"exported code cannot import {obj.__name__}")
            self.imports[name] = f"import {obj.__name__}" + ("" if name == obj.__name__ else f" as {name}")
        elif obj is type(None):
            self.values[name] = f"{name} = type(None)"
        elif isinstance(obj, float):
            self.values[name] = f"{name} = float({str(obj)!r})"
        elif obj is None or isinstance(obj, (bool, int, str)):
            self.values[name] = f"{name} = {obj!r}"
        elif name in CACHES and isinstance(obj, dict):  # filled again by the copied helpers
            self.values[name] = f"{name} = {{}}"
        elif getattr(obj, "__module__", "").startswith("stringdiag"):
            self._define(name, obj)
        else:
            self._import_from(name, obj)

    def _import_from(self, name: str, obj: object) -> None:
        mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if not (mod and qual and _portable(mod) and "." not in qual and getattr(sys.modules.get(mod), qual, None) is obj):
            raise ValueError(f"exported code cannot refer to {obj!r}")
        self.imports[name] = f"from {mod} import {qual}" + ("" if name == qual else f" as {name}")

    def _define(self, name: str, obj: object) -> None:
        """Copy a stringdiag function's or class's source, after what it reads (under another
        name, fx's for it, an alias of the copy)."""
        if name != obj.__name__:
            self.bind(obj.__name__, obj)
            self.aliases[name] = f"{name} = {obj.__name__}"
            return
        source = inspect.getsource(obj)
        tree = ast.parse(source)
        own = obj.__globals__ if inspect.isfunction(obj) else vars(sys.modules[obj.__module__])
        for ref in sorted(_read_names(tree) - _local_names(tree) - {obj.__name__}):
            if ref in own:
                self.bind(ref, own[ref])
            elif not hasattr(builtins, ref):
                raise ValueError(f"{obj.__qualname__} reads {ref!r}, which is neither global nor builtin")
        self.sources[name] = source.rstrip() + "\n"

    def text(self) -> str:
        imports = sorted(set(self.imports.values()), key=lambda s: (s.startswith("from"), s))
        return "\n".join([*imports, "", *self.values.values(), "", "", "\n\n".join(self.sources.values()),
                          "", *self.aliases.values()])


# -- modules as code ----------------------------------------------------------------------
def _attr(parent: str, name: str) -> str:
    """Code that reads submodule ``name`` of what the code ``parent`` evaluates to."""
    return f"{parent}.{name}" if name.isidentifier() and not keyword.iskeyword(name) else f"getattr({parent}, {name!r})"


def _set(parent: str, name: str, value: str) -> str:
    """A statement that makes ``value`` submodule ``name`` of ``parent``."""
    if name.isidentifier() and not keyword.iskeyword(name):
        return f"{parent}.{name} = {value}"
    return f"{parent}.add_module({name!r}, {value})"


class Writer:
    """The classes of one exported module: one per fx graph (the diagram, and each scanned or
    repeated definition), each with an ``__init__`` that builds its submodules."""

    def __init__(self, helpers: Helpers):
        self.helpers = helpers
        self.classes: dict[int, str] = {}  # id(GraphModule) -> its class's name
        self.bodies: dict[str, str] = {}  # class name -> its body (all but the ``class`` line)
        self.taken: set[str] = set()

    def graph_class(self, gm: fx.GraphModule, path: str, root: bool = False) -> str:
        """The name of the class that rebuilds ``gm`` (written on first use; identical copies
        of a repeated layer share one)."""
        if id(gm) in self.classes:
            return self.classes[id(gm)]
        code = gm.graph.python_code(root_module="self")
        for g, obj in code.globals.items():
            if _reads(code.src, g):
                self.helpers.bind(g, obj)
        init = self.build(gm, "self", path, {id(gm): "self"})
        if root:
            init += ties(gm) + ["if weights is not None:",
                     "    self.load_state_dict(read_safetensors(weights), assign=True)"]
            self.helpers.bind("read_safetensors", read_safetensors)
        args = "self, weights=WEIGHTS" if root else "self"
        doc = (f'"""{type(gm).__name__}, its weights read from ``weights`` (a safetensors file; None leaves '
               'them freshly initialised)."""' if root else f'"""A scanned or repeated {type(gm).__name__}."""')
        body = (f"\n    {doc}\n\n    def __init__({args}):\n        super().__init__()\n"
                + "".join(f"        {line}\n" for line in init)
                + "\n" + textwrap.indent(code.src.strip("\n"), "    ").rstrip() + "\n")
        name = type(gm).__name__
        for known, text in self.bodies.items():
            if text == body and known.rstrip("_") == name:
                self.classes[id(gm)] = known
                return known
        while name in self.taken or name in self.helpers.objects:
            name += "_"
        self.taken.add(name)
        self.bodies[name] = body
        self.classes[id(gm)] = name
        return name

    def build(self, module: nn.Module, at: str, path: str, seen: dict[int, str]) -> list[str]:
        """Statements that give ``at`` the children, parameters and buffers ``module`` has."""
        lines = []
        for name, p in module._parameters.items():
            if p is not None:
                lines.append(f"{at}.register_parameter({name!r}, nn.Parameter(torch.empty({tuple(p.shape)}, "
                             f"dtype={p.dtype}), requires_grad={p.requires_grad}))")
        for name, b in module._buffers.items():
            if name in module._non_persistent_buffers_set:
                lines.append(self.literal_buffer(at, name, b, path))
                continue
            if b is not None:
                lines.append(f"{at}.register_buffer({name!r}, torch.empty({tuple(b.shape)}, dtype={b.dtype}))")
        for name, child in module.named_children():
            where = f"{path}{name}"
            if id(child) in seen:  # one set of weights used in two places: one module
                lines.append(_set(at, name, seen[id(child)]))
                continue
            seen[id(child)] = _attr(at, name)
            if type(child) is nn.Module:  # a plain container (a definition's use)
                lines.append(_set(at, name, "nn.Module()"))
                lines += self.build(child, _attr(at, name), where + ".", seen)
            else:
                lines.append(_set(at, name, self.expression(child, where)))
        return lines

    @staticmethod
    def literal_buffer(at: str, name: str, b: torch.Tensor, path: str) -> str:
        """A buffer left out of the state dict (a dtype reference, a small constant), written into
        the module's source by value; a large one has no weights to ship and cannot be exported."""
        if b.numel() > LITERAL_LIMIT or b.dtype.is_complex:
            raise DiagError(f"cannot export '{path}{name}': a buffer left out of the state dict has no weights "
                            f"to ship ({b.numel():,} values, more than the {LITERAL_LIMIT} written into the source)")
        value = b.detach().cpu().tolist()  # Python floats: float32/float64 values round-trip exactly
        return (f"{at}.register_buffer({name!r}, torch.tensor({value!r}, dtype={b.dtype}), persistent=False)")

    def expression(self, m: nn.Module, path: str) -> str:
        """A constructor call that makes a module like ``m`` (its weights come from the file)."""
        if isinstance(m, fx.GraphModule):
            return f"{self.graph_class(m, path + '.')}()"
        kind = type(m)
        if kind is nn.Linear:
            return f"nn.Linear({m.in_features}, {m.out_features}, bias={m.bias is not None})"
        if kind is nn.Sequential and list(m._modules) == [str(i) for i in range(len(m))]:
            return f"nn.Sequential({', '.join(self.expression(c, f'{path}.{i}') for i, c in enumerate(m))})"
        if isinstance(m, nn.LayerNorm) and kind.__init__ is nn.LayerNorm.__init__:
            self.helpers.bind(kind.__name__, kind) if kind is not nn.LayerNorm else None
            name = "nn.LayerNorm" if kind is nn.LayerNorm else kind.__name__
            return (f"{name}({tuple(m.normalized_shape)}, eps={m.eps!r}, elementwise_affine={m.elementwise_affine}, "
                    f"bias={getattr(m, 'bias', None) is not None})")
        if kind is LearnableTensor:
            self.helpers.bind(kind.__name__, kind)
            return f"{kind.__name__}({tuple(m.weight.shape)})"
        if _plain_torch(m):
            return f"nn.{kind.__name__}()"
        raise DiagError(f"cannot export '{path}': a {kind.__module__}.{kind.__qualname__} is not a module the "
                        "exported code can rebuild (nn.Linear, nn.Sequential, nn.LayerNorm, torch's activations "
                        "without settings); use the approximator 'mlp' or 'linear', or a factory made of these")

    def text(self) -> str:
        return "\n\n\n".join(f"class {name}(nn.Module):{body}" for name, body in self.bodies.items())


def ties(gm: fx.GraphModule) -> list[str]:
    """Statements that make one module of a weight set used in two fx graphs (a learnable box
    declared at the top and read inside a repeated definition): each graph's class builds its
    own, then the root puts the first in every other place. A set used twice inside one graph
    is one module already (``Writer.build``)."""
    owner, first, again, lines = {"": gm}, {}, set(), []
    for path, m in gm.named_modules(remove_duplicate=False):
        parent, _, name = path.rpartition(".")
        if parent in again:  # inside a second place of a module: placed with it
            again.add(path)
            continue
        if path:
            owner[path] = m if isinstance(m, fx.GraphModule) else owner[parent]
        if id(m) not in first:
            first[id(m)] = path
            continue
        again.add(path)
        if owner[parent] is not owner[first[id(m)].rpartition(".")[0]]:
            lines.append(_set(_expr(parent), name, _expr(first[id(m)])))
    return lines


def _expr(path: str) -> str:
    """Code that reads the submodule at a dotted path of the root."""
    at = "self"
    for part in path.split(".") if path else []:
        at = _attr(at, part)
    return at


def _reads(src: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", src) is not None


def _plain_torch(m: nn.Module) -> bool:
    """An activation of torch.nn with no settings, parameters or children (``nn.ReLU()``)."""
    kind = type(m)
    return (getattr(nn, kind.__name__, None) is kind and not m.extra_repr() and not list(m.children())
            and not m._parameters and not m._buffers)


# -- the folder --------------------------------------------------------------------------
def check_folder(path: str | Path) -> Path:
    """Refuse, before any work, an output that cannot become an importable export folder."""
    return _disk(check_name(path), shown_path(str(path)))


def check_name(path: str | Path) -> Path:
    """Refuse an output whose name cannot be an export folder (a ``.py`` file, not an identifier):
    wrong whatever the disk holds (the command line reports it as a usage error)."""
    out, shown = Path(path), shown_path(str(path))
    name = out.name
    if out.suffix == ".py":
        raise DiagError(f"cannot write {shown}: compile -o writes a folder (the module, its weights and its "
                        f"source), not one .py file; give a folder name, e.g. -o {out.stem or 'model'}")
    if not name.isidentifier() or keyword.iskeyword(name):
        raise DiagError(f"cannot write {shown}: the folder's name must be a Python identifier (letters, digits, "
                        f"'_'), so that `import {name}` finds it")
    return out


def _disk(out: Path, shown: str) -> Path:
    try:
        if out.exists() and not out.is_dir():
            raise DiagError(f"cannot write {shown}: it is a file, and compile -o writes a folder")
        if out.is_dir() and any(out.iterdir()) and not _ours(out):
            raise DiagError(f"cannot write {shown}: the folder is not empty and was not written by compile -o "
                            "(give a new folder)")
        at = out.absolute().parent
        while not at.exists():  # the folder that will hold what is made
            at = at.parent
    except OSError as e:
        raise DiagError(f"cannot write {shown}: {e.strerror or e}") from None
    if not at.is_dir():
        raise DiagError(f"cannot write {shown}: {shown_path(str(at))} is a file, not a folder")
    if (why := refuses_files(at)) is not None:
        raise DiagError(f"cannot write {shown}: no file can be made in {shown_path(str(at))} ({why})")
    return out


def _ours(folder: Path) -> bool:
    try:
        with open(folder / MODULE, encoding="utf-8") as f:
            return f.readline().startswith(MARK)
    except (OSError, UnicodeDecodeError):
        return False


def sources(diagram: Diagram) -> tuple[dict[str, str], str]:
    """The ``.diag`` files a diagram came from (its file and the files that file imports), by
    path relative to their common folder, and the path of the diagram's own file among them."""
    prog = diagram.program
    own = Path(prog.path).name if prog.path.endswith(".diag") else f"{diagram.name}.diag"
    if prog.path == "<string>":
        return {own: prog.source}, own
    files = {Path(prog.path).resolve(): prog.source}
    for d in prog.defs.values():  # the imports, by where their definitions were read
        if d.program.path != "<string>":
            files.setdefault(Path(d.program.path).resolve(), d.program.source)
    for decl in [*prog.dims.values(), *prog.boxes.values()]:  # and files that declare only boxes or sizes
        pos = getattr(decl, "pos", None)
        if pos is not None and pos.file != "<string>" and Path(pos.file).resolve() not in files:
            files[Path(pos.file).resolve()] = read_source(pos.file)
    if len(files) == 1:
        return {own: prog.source}, own
    base = Path(os.path.commonpath([str(p.parent) for p in files]))
    rel = {str(p.relative_to(base)): text for p, text in files.items()}
    return rel, str(Path(prog.path).resolve().relative_to(base))


@dataclass(frozen=True)
class Exported:
    """What :func:`export` wrote: the folder, the class to import from it, the tensors stored."""

    folder: Path
    class_name: str
    tensors: dict[str, tuple[tuple[int, ...], str]]  # name -> (shape, dtype)
    source: str  # the diagram's file inside the folder

    @property
    def parameters(self) -> int:
        import math

        return sum(math.prod(s) for s, _ in self.tensors.values())


def export(gm: fx.GraphModule, folder: str | Path, diagram: Diagram, dims: dict[str, int] | None = None,
           approximator: str = "mlp") -> Exported:
    """Write ``gm`` (``compile(diagram, dims, approximator)``) as an importable folder:
    ``__init__.py`` and ``module.py`` (the class, named after the diagram), ``weights.safetensors``
    and ``diag/`` (the source). A folder that a previous export wrote is replaced whole."""
    if not isinstance(gm, fx.GraphModule):
        raise DiagError(f"export() writes a compiled diagram (stringdiag.compile(diagram, dims)), got {kind(gm)}")
    sizes = need_sizes(dims)
    check_dim_names(need_diagram(diagram, "export"), sizes)
    if isinstance(getattr(gm, "interface", None), Interface):  # compiled by this version: what from, at what sizes
        gm.interface.check_export(diagram, sizes)
    out = check_folder(need_path(folder, "export(): folder"))
    helpers = Helpers()
    for name, obj in (("torch", torch), ("nn", nn), ("Path", Path)):  # what the classes and constants use
        helpers.bind(name, obj)
    writer = Writer(helpers)
    cls = writer.graph_class(gm, "", root=True)
    files, own = sources(diagram)
    state = _state(gm)
    sizes = ", ".join(f"{k}={v}" for k, v in sorted((dims or {}).items())) or "no sizes given"
    module = (f"{MARK} {__version__}: `stringdiag compile {own} -d {diagram.name}`; needs torch alone.\n"
              f'"""{diagram.signature()}, compiled from {SOURCES}/{own} with {sizes} ({approximator} approximators).\n\n'
              f"``{cls}()`` builds the module and loads {WEIGHTS} (beside this file); ``{cls}(weights=None)``\n"
              'leaves the weights freshly initialised, ``{cls}(weights=PATH)`` reads another file.\n"""\n'.replace("{cls}", cls)
              + "from __future__ import annotations\n\n"
              + helpers.text().strip("\n") + "\n\n\n"
              + f"WEIGHTS = Path(__file__).with_name({WEIGHTS!r})\n"
              + f"SOURCE = Path(__file__).with_name({SOURCES!r}) / {own!r}\n"
              + f"DIAGRAM, DIMS, APPROXIMATOR = {diagram.name!r}, {dict(sorted((dims or {}).items()))!r}, {approximator!r}\n\n\n"
              + writer.text() + "\n")
    _write_folder(out, {MODULE: module, "__init__.py": f'"""{diagram.signature()} (see module.py)."""\n'
                        f"from .module import {cls}\n\n__all__ = [{cls!r}]\n",
                        **{f"{SOURCES}/{rel}": text for rel, text in files.items()}},
                  state, {"diagram": diagram.name, "dims": dims or {}, "approximator": approximator})
    return Exported(out, cls, {k: (tuple(t.shape), str(t.dtype).removeprefix("torch.")) for k, t in state.items()},
                    f"{SOURCES}/{own}")


def _state(gm: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict as safetensors takes it: contiguous, on the CPU, no two names sharing
    memory (a weight set used in two places is stored twice and loaded into its one module)."""
    out, seen = {}, set()
    for k, t in gm.state_dict().items():
        t = t.detach().cpu().contiguous()
        key = (t.untyped_storage().data_ptr(), t.storage_offset())
        out[k] = t.clone() if key in seen and t.numel() else t
        seen.add(key)
    return out


def _write_folder(out: Path, texts: dict[str, str], state: dict[str, torch.Tensor], meta: dict) -> None:
    """Write everything into a fresh folder beside ``out``, then put it in ``out``'s place: a
    reader sees the previous export or the new one, never half of one."""
    tmp = trash = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
        for rel, text in texts.items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_text(text, encoding="utf-8")
        write_atomic(tmp / WEIGHTS, state, meta, "weights")
        os.chmod(tmp, 0o755)  # mkdtemp makes it private
        if out.exists():
            trash = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old."))
            os.replace(out, trash / out.name)
        os.replace(tmp, out)
        tmp = None
    except OSError as e:
        raise DiagError(f"cannot write {shown_path(str(out))}: {e.strerror or e}") from None
    finally:
        for p in (tmp, trash):
            if p is not None and p.exists():
                shutil.rmtree(p, ignore_errors=True)
