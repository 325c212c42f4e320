"""Mutation check: plant one small bug at a time in chosen functions and see whether the tests
that cover them fail (``make mutate``; ``python tools/mutate.py --help``).

Each mutant changes one thing in one function: a comparison's boundary or sense (``<`` into
``<=``, ``==`` into ``!=``), ``and`` into ``or``, a ``not`` dropped, ``+`` into ``-``, ``*`` into
``/``, a number made one larger, ``True`` into ``False``, an ``if``'s test negated. The checkout's
committed tree (``git archive HEAD``) is unpacked into a scratch folder and mutated there, never
here, so that nobody else's run sees a planted bug; each mutant runs its target's tests there with
``pytest -x`` (a failure, an error or a hang past the time limit kills it), in a fork of this
process, which has imported torch and the other heavy libraries once.

A mutant that survives either shows a blind spot of the tests (write a test that kills it) or
changes nothing a caller can see; those are listed in ``EQUIVALENT`` with the reason, by
function and by the code before and after. The score is killed / (mutants - equivalent).
"""
from __future__ import annotations

import argparse
import ast
import copy
import io
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    """Functions of one module (``Class.method`` for a method) and the tests that cover them."""

    name: str
    module: str
    functions: tuple[str, ...]
    tests: tuple[str, ...]


TARGETS = (
    Target("primitives", "stringdiag/lower/primitives.py",
           ("amax", "hardmax", "posenc", "causal", "window", "strided", "global_tokens", "gauss", "shift",
            "causal_conv", "narrow", "pick", "bucket"),
           ("tests/test_primitives.py::test_fixed_primitives_agree_with_plain_python_at_their_edges",
            "tests/test_primitives.py", "tests/test_prims.py", "tests/test_sparse_attention.py")),
    Target("banded", "stringdiag/lower/banded.py",  # the window kernels: sliding, global, causal
           ("_positions", "_window_drop", "_causal_drop", "_dense_mask", "window_attention"),
           ("tests/test_primitives.py::test_a_window_of_no_positions_leaves_every_row_undefined",
            "tests/test_banded.py", "tests/test_sparse_attention.py")),
    Target("iso", "stringdiag/graph/iso.py", ("_confirm", "_isomorphic"),
           ("tests/test_iso_confirm.py", "tests/test_iso_fast.py")),
    Target("rewrite", "stringdiag/rewrite/dpo.py", ("_Splice.boundary", "_Splice.delete", "_wanted"),
           ("tests/test_rewrite_layout.py", "tests/test_rewrite.py", "-k",
            "not holds_numerically and (not simd_box or copy_nat or assoc)")),
    Target("oracle", "stringdiag/verify/oracle.py", ("entrywise", "translate", "share_sets", "_module"),
           ("tests/test_oracle_weights.py", "tests/test_entrywise.py", "tests/test_oracle_adversarial.py")),
    Target("checkpoint", "stringdiag/train/checkpoint.py", ("load", "_whole", "_check_integrity", "_same_kind"),
           ("tests/test_checkpoint_plain.py", "tests/test_cli_errors.py", "tests/test_train.py", "tests/test_heads.py",
            "-k", "checkpoint or damaged or pickle or plain or shape or kind")),
)

# Survivors that change nothing a caller can see: (target, function, before, after) -> why.
_EARLY = ("a shortcut: the refinement traces compared next begin with the sorted node and edge labels and "
          "one key per node, so graphs that differ in these counts never get past them (only a hash "
          "collision could), and _confirm's one-way edge check is reached with equal edge counts")
EQUIVALENT: dict[tuple[str, str, str, str], str] = {
    ("iso", "_isomorphic", "len(ga.lab) != len(gb.lab) or sum(map(len, ga.out)) != sum(map(len, gb.out))",
     "len(ga.lab) != len(gb.lab) and sum(map(len, ga.out)) != sum(map(len, gb.out))"): _EARLY,
    ("checkpoint", "load", "True", "False"): "load_state_dict(strict=False) loads the same: _validate has refused "
                                             "any missing or unexpected key before",
    ("primitives", "causal_conv", "x[..., None] * kernel[..., None, :]", "x[..., None] / kernel[..., None, :]"):
        "the branch for a sequence of no positions: an empty product, divided or multiplied",
    ("primitives", "shift", "0", "1"): "F.pad(x, (k, 1)) pads one entry after the last, which [..., :n] then cuts",
    ("banded", "_window_drop", "i < s", "i <= s"): "the first padded query's row reads real keys instead of its own "
                                                  "zero key: padded rows are cut from the output (no gradient "
                                                  "reaches them), and that row is never empty (padding needs "
                                                  "w >= 2, so key s - 1 is in its window; global keys join it)",
    **{("banded", "window_attention", "w < 1", after): "which kernel: window_global_attention with no global "
       "tokens computes the same window (w = 0 or 1 sent there, or every w)" for after in ("not w < 1", "w <= 1")},
    ("banded", "window_attention", "1", "2"): "w = 1 sent to window_global_attention with no global tokens: "
                                              "the same window",
    ("banded", "_window_drop", "i == j", "i != j"): "a padded query's row keeps every key of its blocks but its own "
                                                   "instead of its own alone: finite either way (padding needs "
                                                   "b >= 2, so the row has another key), cut from the output, and "
                                                   "no gradient reaches it",
    ("iso", "_isomorphic", "len(ga.node_labels) != len(gb.node_labels) or len(ga.edge_labels) != len(gb.edge_labels)",
     "len(ga.node_labels) != len(gb.node_labels) and len(ga.edge_labels) != len(gb.edge_labels)"): _EARLY,
}

SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
        ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}


@dataclass(frozen=True)
class Mutant:
    target: str
    function: str
    line: int
    before: str
    after: str
    source: str  # the whole mutated module

    def key(self) -> tuple[str, str, str, str]:
        return (self.target, self.function, self.before, self.after)


def _functions(tree: ast.Module, names: tuple[str, ...]) -> dict[str, ast.AST]:
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            found[node.name] = node
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and f"{node.name}.{item.name}" in names:
                    found[f"{node.name}.{item.name}"] = item
    missing = set(names) - set(found)
    if missing:
        raise SystemExit(f"error: no function {', '.join(sorted(missing))} to mutate")
    return found


def _edits(node: ast.AST):
    """The replacements of one node, one change each."""
    if isinstance(node, ast.Compare):
        for k, op in enumerate(node.ops):
            if type(op) in SWAP:
                new = copy.deepcopy(node)
                new.ops[k] = SWAP[type(op)]()
                yield new
    elif isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield new
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield copy.deepcopy(node.operand)
    elif isinstance(node, ast.BinOp) and type(node.op) in ARITH:
        new = copy.deepcopy(node)
        new.op = ARITH[type(node.op)]()
        yield new
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield ast.Constant(not node.value)
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        yield ast.Constant(node.value + 1)


class _Replace(ast.NodeTransformer):
    def __init__(self, old: ast.AST, new: ast.AST):
        self.old, self.new = old, new

    def visit(self, node):
        if node is self.old:
            return ast.copy_location(self.new, node)
        return super().visit(node)


def mutants(target: Target, source: str) -> list[Mutant]:
    tree = ast.parse(source)
    out = []
    for fname, fn in _functions(tree, target.functions).items():
        body = fn.body[1:] if (fn.body and isinstance(fn.body[0], ast.Expr)
                               and isinstance(fn.body[0].value, ast.Constant)) else fn.body  # not the docstring
        for stmt in body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.If):  # an if's test negated
                    edits = [(node.test, ast.UnaryOp(ast.Not(), copy.deepcopy(node.test)))]
                else:
                    edits = [(node, new) for new in _edits(node)]
                for old, new in edits:
                    twin = ast.parse(source)  # a fresh tree to change, the node found by its place
                    twin_old = _same_node(twin, tree, old)
                    mutated = _Replace(twin_old, new).visit(twin)
                    ast.fix_missing_locations(mutated)
                    out.append(Mutant(target.name, fname, old.lineno, ast.unparse(old), ast.unparse(new),
                                      ast.unparse(mutated)))
    return out


def _same_node(twin: ast.AST, tree: ast.AST, node: ast.AST) -> ast.AST:
    """The node of ``twin`` (a fresh parse of the same source) at ``node``'s place in ``tree``."""
    for a, b in zip(ast.walk(tree), ast.walk(twin)):
        if a is node:
            return b
    raise AssertionError("node not found")


def _unpack(into: Path) -> None:
    tree = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tree)) as tar:
        tar.extractall(into, filter="data")


def _preload() -> None:
    """Import the heavy libraries the tests use once, here, so that each mutant's tests run in a
    fork of this process (seconds of CPU saved per mutant: torch alone takes about four). Nothing
    of ``stringdiag`` is imported here: each fork imports the scratch copy's, mutant and all."""
    os.environ["OMP_NUM_THREADS"] = "1"  # before torch reads it
    import hypothesis  # noqa: F401
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import torch  # noqa: F401


def _run(copy_root: Path, tests: tuple[str, ...], timeout: int, said: list[str] | None = None) -> str:
    """'passed', 'failed' (any non-zero exit) or 'timeout'; ``said`` gets the tests' last lines."""
    log = copy_root.with_name(copy_root.name + ".log")  # beside the copy, not in it
    pid = os.fork()
    if pid == 0:  # the child: the tests of the scratch copy, as `pytest` run there would
        code = 3
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.chdir(copy_root)
            sys.path.insert(0, str(copy_root))
            sys.dont_write_bytecode = True
            os.environ.update({"PYTHONPATH": str(copy_root), "PYTHONDONTWRITEBYTECODE": "1",
                               "HYPOTHESIS_PROFILE": os.environ.get("HYPOTHESIS_PROFILE", "default")})
            os.environ.pop("CI", None)
            import pytest
            code = int(pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-n", "0", *tests]))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = time.monotonic() + timeout
    try:
        while not (done := os.waitpid(pid, os.WNOHANG))[0]:
            if time.monotonic() > deadline:
                raise TimeoutError
            time.sleep(0.1)
    except BaseException as e:  # the time limit, Ctrl-C or SIGTERM: the fork goes first
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        log.unlink(missing_ok=True)
        if not isinstance(e, TimeoutError):
            raise
        if said is not None:
            said.append(f"(no result within --timeout {timeout} s)")
        return "timeout"
    if said is not None:
        said.extend(log.read_text(errors="replace").splitlines()[-25:])
    log.unlink(missing_ok=True)
    return "passed" if os.waitstatus_to_exitcode(done[1]) == 0 else "failed"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("targets", nargs="*", help=f"which (default all): {', '.join(t.name for t in TARGETS)}")
    ap.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    ap.add_argument("--match", default="", help="only the mutants whose 'function: before  ->  after' has this text")
    ap.add_argument("--skip", type=int, default=0, metavar="N",
                    help="leave out the first N mutants of each target (a run resumed where it stopped)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per mutant before it counts as killed")
    args = ap.parse_args(argv)
    chosen = [t for t in TARGETS if not args.targets or t.name in args.targets]
    if not args.list:
        _preload()
    # stopped (kill, a CI's timeout): end the running tests and remove the scratch copy, as on Ctrl-C
    # (set after the imports, which may set a handler of their own)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.targets and len(chosen) != len(set(args.targets)):
        ap.error(f"unknown target; the targets are {', '.join(t.name for t in TARGETS)}")
    with tempfile.TemporaryDirectory(prefix="stringdiag-mutate-") as tmp:
        copy_root = Path(tmp)
        _unpack(copy_root)
        totals = [0, 0, 0]  # killed, equivalent, mutants
        for target in chosen:
            path = copy_root / target.module
            original = path.read_text()
            found = [m for m in mutants(target, original)
                     if args.match in f"{m.function}: {m.before}  ->  {m.after}"][args.skip:]
            if args.list:
                for m in found:
                    print(f"{target.name} {target.module}:{m.line} {m.function}: {m.before}  ->  {m.after}")
                continue
            start = time.monotonic()
            said: list[str] = []
            if _run(copy_root, target.tests, args.timeout, said) != "passed":
                print(f"error: the tests of {target.name} fail before any mutation "
                      f"(in {copy_root}, a copy of the committed tree; the tests said):", file=sys.stderr)
                print("\n".join(f"  {line}" for line in said), file=sys.stderr)
                return 1
            killed, equivalent, alive = 0, 0, []
            for m in found:
                path.write_text(m.source)
                outcome = _run(copy_root, target.tests, args.timeout)
                path.write_text(original)
                said = {"passed": "survived", "failed": "killed", "timeout": "killed (hung)"}[outcome]
                print(f"  {said:13} {target.module}:{m.line} {m.function}: {m.before}  ->  {m.after}",
                      flush=True)
                if outcome != "passed":
                    killed += 1
                elif m.key() in EQUIVALENT:
                    equivalent += 1
                else:
                    alive.append(m)
            score = killed / max(len(found) - equivalent, 1)
            print(f"{target.name}: {len(found)} mutants of {len(target.functions)} functions in {target.module}: "
                  f"{killed} killed, {equivalent} equivalent (explained), {len(alive)} survived; "
                  f"score {100 * score:.0f} % ({time.monotonic() - start:.0f} s)")
            for m in alive:
                print(f"  survived: {target.module}:{m.line} {m.function}: {m.before}  ->  {m.after}")
            sys.stdout.flush()
            totals = [totals[0] + killed, totals[1] + equivalent, totals[2] + len(found)]
        if not args.list:
            print(f"all: {totals[2]} mutants, {totals[0]} killed, {totals[1]} equivalent; "
                  f"score {100 * totals[0] / max(totals[2] - totals[1], 1):.0f} %")
            return 0 if totals[0] + totals[1] == totals[2] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
