"""Capturing one module: its forward as a torch.fx graph whose submodule calls stay calls,
and every node's value in each run of the module.

The module's own ``forward`` is traced, not its ``__call__`` (Hugging Face's decorators and
``**kwargs`` would defeat torch.fx's argument patching): a wrapper takes the tensors of the
call as plain arguments and rebuilds the call around them. Every submodule is a leaf, so
that each becomes a definition of its own (or one of the boxes that ``modules.py`` knows);
its arguments in each run are recorded for tracing it in turn."""
from __future__ import annotations

import contextlib
import inspect
import linecache
import re
import sys
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx, nn
from torch.fx._symbolic_trace import _maybe_revert_all_patches
from torch.utils import _pytree as pytree

from ..errors import DiagError

SLOTS = 16  # tensors one call may take
_SLOT = object()  # where a tensor of the call goes
WRAPPED = ("create_causal_mask",)  # Hugging Face's mask builder: recognised whole (ops.causal_mask)
# torch's tensor factories, which torch.fx cannot call with traced sizes (``torch.ones(b, s)``): one node each
FACTORIES = ("ones", "zeros", "full", "empty", "eye", "arange")


@dataclass
class ModuleCall:
    """One call of a module: positional and keyword arguments."""

    args: tuple
    kwargs: dict

    def leaves(self) -> tuple[list, Any]:
        return pytree.tree_flatten((self.args, self.kwargs))


@dataclass
class Capture:
    """A module's graph, what each node held in each run, and the calls of its submodules."""

    module: nn.Module
    graph: fx.Graph
    inputs: list[str]  # the name of each placeholder, from the argument it stands for
    values: list[dict[fx.Node, Any]]  # per run
    calls: dict[fx.Node, list[ModuleCall]] = field(default_factory=dict)  # per call_module node, per run

    def submodule(self, node: fx.Node) -> nn.Module:
        return self.module.get_submodule(node.target.removeprefix("inner").lstrip("."))


class _Wrapper(nn.Module):
    """``forward(t0, ..., t15)`` that rebuilds the recorded call with these tensors."""

    def __init__(self, inner: nn.Module, call: ModuleCall):
        super().__init__()
        self.inner = inner
        leaves, self._spec = call.leaves()
        self._leaves = [_SLOT if isinstance(v, torch.Tensor) else v for v in leaves]
        if sum(isinstance(v, torch.Tensor) for v in leaves) > SLOTS:
            raise DiagError(f"{type(inner).__name__} is called with more than {SLOTS} tensors; cannot trace it")

    def forward(self, t0=None, t1=None, t2=None, t3=None, t4=None, t5=None, t6=None, t7=None, t8=None, t9=None,
                t10=None, t11=None, t12=None, t13=None, t14=None, t15=None):
        given = iter((t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12, t13, t14, t15))
        leaves = [next(given) if v is _SLOT else v for v in self._leaves]
        args, kwargs = pytree.tree_unflatten(leaves, self._spec)
        return self.inner.forward(*args, **kwargs)


class _Known:
    """A proxy that knows the value it stands for in the first run: a shape can be unpacked
    (``(*x.shape[:-1], -1, k)``) and a condition on sizes or flags decided, as they were for the
    examples."""

    def _known(self):
        return self.node.meta.get("val")

    def __iter__(self):
        v = self._known()
        if isinstance(v, (tuple, list, torch.Tensor)):  # a tensor unpacks along its first axis
            return iter([self[i] for i in range(len(v))])
        return super().__iter__()

    def __bool__(self):
        v = self._known()
        if v is not None and not isinstance(v, torch.Tensor):
            return bool(v)
        if v is None:  # a value the tracer could not compute: torch.fx says why
            return super().__bool__()
        raise DiagError(f"{_caller()}: the module's Python branches on the values of a tensor (an if or a while "
                        "on data); a diagram has no such branch: cannot trace it")

    def __len__(self):
        v = self._known()
        if isinstance(v, (tuple, list, torch.Tensor)):
            return len(v)
        return super().__len__()


class _Proxy(_Known, fx.Proxy):
    def __getattr__(self, k: str):
        return _Attribute(self, k)


class _Attribute(_Known, fx.proxy.Attribute):
    pass


class _Tracer(fx.Tracer):
    """Every submodule a leaf; each node's value in the first run computed as it is traced."""

    def __init__(self, inner: nn.Module, inputs: list):
        super().__init__()
        self.inner, self.inputs = inner, inputs
        self.proxy_buffer_attributes = True  # a buffer read is a node (sliced by a traced length, say)

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return m is not self.inner

    def proxy(self, node: fx.Node) -> fx.Proxy:
        return _Proxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, *rest, **more):
        p = super().create_proxy(kind, target, args, kwargs, name, type_expr, *rest, **more)
        p.node.meta["where"] = _caller()
        try:
            p.node.meta["val"] = self._value(p.node)
        except Exception:  # a value it cannot compute stays unknown (the proxy then acts as torch.fx's)
            p.node.meta["val"] = None
        return p

    def _value(self, node: fx.Node) -> Any:
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
        with torch.no_grad(), _maybe_revert_all_patches():
            if node.op == "placeholder":
                k = int(node.target.lstrip("t").split("_")[0])
                return self.inputs[k] if k < len(self.inputs) else None
            if node.op == "get_attr":
                return _fetch(self.root, node.target)
            if node.op == "call_function":
                return node.target(*args, **kwargs)
            if node.op == "call_method":
                return getattr(args[0], node.target)(*args[1:], **kwargs)
            if node.op == "call_module":
                return self.root.get_submodule(node.target)(*args, **kwargs)
        return None


_INTERNAL = re.compile(r"[/\\](torch|stringdiag[/\\]trace)[/\\]")


def _caller() -> str:
    """``FILE:LINE`` of the innermost frame outside torch and this package: the source line
    that made a node (torch.fx's own stack traces cost seconds to symbolise on first use)."""
    frame = sys._getframe(1)
    while frame is not None and _INTERNAL.search(frame.f_code.co_filename):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "<unknown>"


def _caller_of(e: BaseException) -> str:
    """``FILE:LINE: `` of the innermost frame of ``e``'s traceback outside torch and this package."""
    tb, found = e.__traceback__, ""
    while tb is not None:
        if not _INTERNAL.search(tb.tb_frame.f_code.co_filename):
            found = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}: "
        tb = tb.tb_next
    return found


def _known_dtype(info):
    """``torch.finfo(x.dtype)`` with ``x.dtype`` traced: the dtype as the examples have it."""
    def wrapped(dtype=None):
        return info(dtype._known() if isinstance(dtype, _Known) else dtype) if dtype is not None else info()
    return wrapped


def _one_call(fn):
    """``fn`` as one node of the graph when given proxies (so that ``ops.py`` sees it whole)."""
    def wrapped(*args, **kwargs):
        proxies = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, fx.Proxy)]
        if not proxies:
            return fn(*args, **kwargs)
        simple = (fx.Proxy, int, float, bool, str, type(None))
        kept = {k: v for k, v in kwargs.items() if isinstance(v, simple)}
        bound = {k: v for k, v in kwargs.items() if k not in kept}  # a config object, say: not a graph argument

        def call(*a, **kw):
            return fn(*a, **kw, **bound)
        call.__name__ = fn.__name__
        return proxies[0].tracer.create_proxy("call_function", call, args, kept)
    wrapped.__name__ = fn.__name__
    return wrapped


@contextlib.contextmanager
def _whole(names=WRAPPED):
    """While tracing, the functions ``names`` of the libraries loaded are single calls."""
    patched = [(torch, name, getattr(torch, name)) for name in FACTORIES + ("finfo", "iinfo")]
    for _, name, fn in patched:
        setattr(torch, name, _one_call(fn) if name in FACTORIES else _known_dtype(fn))
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("transformers."):
            for name in names:
                fn = getattr(mod, name, None)
                if inspect.isfunction(fn):
                    patched.append((mod, name, fn))
                    setattr(mod, name, _one_call(fn))
    try:
        yield
    finally:
        for mod, name, fn in patched:
            setattr(mod, name, fn)


def _fetch(root: nn.Module, target: str) -> Any:
    at: Any = root
    for part in target.split("."):
        at = getattr(at, part)
    return at


def _names(module: nn.Module, call: ModuleCall) -> list[str]:
    """The argument each tensor of the call stands for (``hidden_states``, ``position_embeddings_0``),
    in the order of the call's tensors."""
    try:
        params = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for path, leaf in pytree.tree_flatten_with_path((call.args, call.kwargs))[0]:
        if not isinstance(leaf, torch.Tensor):
            continue
        keys = [getattr(k, "idx", getattr(k, "key", None)) for k in path]
        head = (params[keys[1]] if keys[1] < len(params) else f"x{keys[1]}") if keys[0] == 0 else str(keys[1])
        names.append("_".join([head] + [str(k) for k in keys[2:]]))
    return names


class _Recorder(fx.Interpreter):
    """Runs the graph, keeping every node's value and the arguments of every submodule call."""

    def __init__(self, gm: fx.GraphModule):
        super().__init__(gm)
        self.values: dict[fx.Node, Any] = {}
        self.calls: dict[fx.Node, ModuleCall] = {}

    def run_node(self, n: fx.Node) -> Any:
        if n.op == "call_module":
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            self.calls[n] = ModuleCall(tuple(args), dict(kwargs))
        out = super().run_node(n)
        self.values[n] = out
        return out


class ModuleFailed(DiagError):
    """The traced module itself raised on the inputs it was given (its own code, not ours):
    ``error`` is what it raised, the message names it in one line."""

    def __init__(self, what: str, error: BaseException):
        super().__init__(f"{what}: {raised(error)}")
        self.error = error


def raised(error: BaseException) -> str:
    """What user code raised, in one line: its type and the first line of its message."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {first}"


def capture(module: nn.Module, calls: list[ModuleCall]) -> Capture:
    """Trace ``module`` as it is called in ``calls`` (one per run) and record each run."""
    wrapper = _Wrapper(module, calls[0])
    n_tensors = sum(isinstance(v, torch.Tensor) for v in calls[0].leaves()[0])
    concrete = {f"t{k}": None for k in range(n_tensors, SLOTS)}
    try:
        tensors = [v for v in calls[0].leaves()[0] if isinstance(v, torch.Tensor)]
        with _whole():
            graph = _Tracer(module, tensors).trace(wrapper, concrete_args=concrete)
    except DiagError:
        raise
    except Exception as e:  # torch.fx says why in its own words
        raise DiagError(f"{_caller_of(e)}torch.fx cannot trace {type(module).__name__}: {e}") from None
    gm = fx.GraphModule(wrapper, graph)
    cap = Capture(module, graph, _names(module, calls[0]), [])
    for k, call in enumerate(calls):
        rec = _Recorder(gm)
        tensors = [v for v in call.leaves()[0] if isinstance(v, torch.Tensor)]
        try:
            with torch.no_grad():
                rec.run(*tensors, *([None] * (SLOTS - len(tensors))))
        except DiagError:
            raise
        except Exception as e:  # the module's own error on the inputs it was given (a shape, a dtype)
            given = ("example_inputs", "example_inputs with one more row of batch", "other_inputs")[min(k, 2)]
            raise ModuleFailed(f"{type(module).__name__} fails when called on {given}", e) from None
        cap.values.append(rec.values)
        for node, c in rec.calls.items():
            cap.calls.setdefault(node, []).append(c)
    _source_names(graph)
    return cap


_TARGETS = re.compile(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)+)\s*=(?!=)")
_MOVES = {"transpose", "permute", "t", "contiguous", "to", "float", "double", "type_as"}  # no statement of their own


def _name_of(n: fx.Node) -> str:
    return n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "op")


_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")  # ``name = ...`` (one target)


def _source_names(graph: fx.Graph) -> None:
    """Each operation named after the variable its source line assigns (``query_states``,
    ``attn_weights``), not torch.fx's ``getitem_3``: the last operation of the line the
    variable itself, those before it the variable and their operation (``q_embed_mul``)."""
    for n in graph.nodes:
        if n.op not in ("call_function", "call_method"):
            continue
        where = n.meta.get("where", "")
        file, _, line = where.rpartition(":")
        text = linecache.getline(file, int(line)) if line.isdigit() else ""
        m = _ASSIGN.match(text)
        if m is None:
            many = _TARGETS.match(text)  # ``q, k, v = x.split(...)``: the parts' names
            if many:
                n.meta["targets"] = [t.strip() for t in many[1].split(",")]
            continue
        op = _name_of(n)
        last = op in _MOVES or all(_name_of(u) in _MOVES for u in n.users if u.meta.get("where") == where)
        n.name = m[1] if last else f"{m[1]}_{op}"
