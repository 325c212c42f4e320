"""``compile -o DIR``: a folder that imports and runs with torch alone and computes what the
compiled module computes.

Each diagram is exported, then imported in a fresh interpreter whose ``sys.path`` holds only the
standard library, the folder's parent and the site-packages torch lives in (read without its
``.pth`` files, so the editable install of stringdiag is not on it: the child asserts that
stringdiag cannot be found). The child runs every module on fixed float64 inputs; here a fresh
``stringdiag.compile`` of the same diagram, given the folder's weights by the safetensors library
itself, must agree to 1e-12.
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import stringdiag
from stringdiag.cli.main import main
from stringdiag.lower import primitives as P
from stringdiag.lower.export import Helpers, export, read_safetensors
from stringdiag.lower.tensorfile import write_atomic

GALLERY = Path(__file__).resolve().parents[1] / "gallery"
SITE = str(Path(torch.__file__).resolve().parents[1])

# a weight set used by every layer (E, declared at the top), a fixed random matrix (a buffer),
# layers with their own weights (repeat 2) and one layer used twice (repeat 2 shared)
TIED = """\
dim s : seq
dim d : fixed
learn E : [d] -> [d]
random R : -> [d, d] seed 3
diagram Layer(x: [s, d]) -> [s, d] {
  learn F : [d] -> [d]
  f[i] = F(E(x[i]))
  y[i, c] = sum_e f[i, e] * R()[e, c]
  return x + layernorm(y)
}
diagram Tied(x: [s, d]) -> [s, d] {
  a = repeat 2 Layer(x)
  b = repeat 2 shared Layer(a)
  return b
}
"""

CASES = {  # folder: (file, diagram, dims, input shapes: a batch axis of 2, then the diagram's)
    "self_attention": ("attention.diag", "SelfAttention", {"d": 8, "k": 4}, [(2, 5, 8)]),
    "m0": ("anatomy.diag", "M0", {"d": 8, "k": 4}, [(2, 5, 8)]),
    "m1": ("anatomy.diag", "M1", {"d": 8, "k": 4}, [(2, 5, 8)]),
    "gpt2_block": ("gpt2.diag", "GPT2Block", {"d": 8, "h": 2, "k": 4, "f": 16}, [(2, 5, 8)]),
    "encoder": ("transformer.diag", "TransformerEncoder", {"v": 11, "dm": 8, "dh": 4, "h": 2, "df": 16},
                [(2, 5, 11)]),  # repeat, learnable tensors, positional encoding
    "bahdanau": ("bahdanau.diag", "Bahdanau", {"d": 4, "h": 3, "e": 5, "g": 6, "o": 7},
                 [(2, 5, 4), (2, 3, 5)]),  # scans: learnable cells and a scanned definition
    "tied": (None, "Tied", {"d": 4}, [(2, 5, 4)]),
    # the banded window kernel, copied with its mask cache (written empty); s = 9 > 4 (w + g) takes the band
    "window": ("taxonomy.diag", "SlidingWindowAttention", {"d": 4, "k": 2, "w": 2}, [(2, 9, 4)]),
    # token ids in (an integer input; a dtype reference kept out of the state dict, written by value)
    "gpt_lm": ("lm.diag", "GPT", {"v": 13, "L": 2, "d": 8, "h": 2, "k": 4, "f": 16}, [("ids", 13, (2, 5))]),
}


def draw_input(shape, gen: torch.Generator) -> torch.Tensor:
    """Standard normal float64 values, or token ids below a vocabulary for ``("ids", v, shape)``."""
    if shape[0] == "ids":
        return torch.randint(0, shape[1], shape[2], generator=gen)
    return torch.randn(shape, generator=gen, dtype=torch.float64)

CHILD = """\
import importlib.util, sys
sys.path[:0] = [{parent!r}, {site!r}]
assert importlib.util.find_spec("stringdiag") is None, "stringdiag is importable"
import torch
names, inputs = sys.argv[1].split(","), torch.load(sys.argv[2], weights_only=True)
out = {{}}
for name in names:
    pkg = __import__(name)
    model = getattr(pkg, pkg.__all__[0])()
    with torch.no_grad():
        out[name] = model(*inputs[name])
    out[name + ".parameters"] = torch.tensor(sum(p.numel() for p in model.parameters()))
assert not [m for m in sys.modules if m.split(".")[0] == "stringdiag"]
torch.save(out, sys.argv[3])
"""


def diagram(case: str, tmp: Path):
    file, name, _, _ = CASES[case]
    if file is None:
        (tmp / "tied.diag").write_text(TIED)
        return stringdiag.load(tmp / "tied.diag")[name]
    return stringdiag.load(GALLERY / file)[name]


def run_child(parent: Path, names: list[str], inputs: dict) -> dict:
    torch.save(inputs, parent / "inputs.pt")
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "OMP_NUM_THREADS")}
    r = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", CHILD.format(parent=str(parent), site=SITE),
                        ",".join(names), str(parent / "inputs.pt"), str(parent / "outputs.pt")],
                       capture_output=True, text=True, env=env, cwd=parent, timeout=300)
    assert r.returncode == 0, r.stderr
    return torch.load(parent / "outputs.pt", weights_only=True)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Every case exported (float64), run in one fresh interpreter; its outputs by case."""
    tmp = tmp_path_factory.mktemp("exports")
    gen = torch.Generator().manual_seed(0)
    inputs = {}
    for case, (_, _, dims, shapes) in CASES.items():
        d = diagram(case, tmp)
        stringdiag.export(stringdiag.compile(d, dims=dims, dtype=torch.float64), tmp / case, d, dims)
        inputs[case] = [draw_input(s, gen) for s in shapes]
    return tmp, inputs, run_child(tmp, list(CASES), inputs)


@pytest.mark.parametrize("case", list(CASES))
def test_the_folder_computes_what_the_compiled_module_computes(exported, case):
    tmp, inputs, outputs = exported
    _, _, dims, _ = CASES[case]
    reference = stringdiag.compile(diagram(case, tmp), dims=dims, dtype=torch.float64)  # fresh weights...
    reference.load_state_dict(load_file(tmp / case / "weights.safetensors"))  # ...replaced by the folder's
    with torch.no_grad():
        want = reference(*inputs[case])
    got = outputs[case]
    assert got.dtype == torch.float64 and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    # a weight set used in two places is one set of parameters there too
    assert int(outputs[case + ".parameters"]) == sum(p.numel() for p in reference.parameters())


def test_the_folder_carries_its_source_and_nothing_of_stringdiag(exported):
    tmp, _, _ = exported
    folder = tmp / "m1"
    assert sorted(p.name for p in folder.iterdir()) == ["__init__.py", "diag", "module.py", "weights.safetensors"]
    assert (folder / "diag" / "anatomy.diag").read_text() == (GALLERY / "anatomy.diag").read_text()
    code = (folder / "module.py").read_text()
    assert "stringdiag." not in code.replace("stringdiag_lower_", "") and "import stringdiag" not in code
    assert "class M1(nn.Module):" in code and "def __init__(self, weights=WEIGHTS):" in code
    # the shipped source is the diagram: compiled from it, the weights load with every name matching
    d = stringdiag.load(folder / "diag" / "anatomy.diag")["M1"]
    stringdiag.compile(d, dims={"d": 8, "k": 4}, dtype=torch.float64).load_state_dict(
        load_file(folder / "weights.safetensors"))


def test_imports_travel_with_the_source(tmp_path):
    d = stringdiag.load(GALLERY / "mechanisms.diag")["M0"]  # defined in anatomy.diag, which mechanisms imports
    export(stringdiag.compile(d, dims={"d": 4, "k": 2}), tmp_path / "m", d, {"d": 4, "k": 2})
    assert sorted(p.name for p in (tmp_path / "m" / "diag").iterdir()) == ["anatomy.diag"]
    qk = stringdiag.load(GALLERY / "anatomy_qk.diag")
    name = next(n for n in qk.own)
    e = export(stringdiag.compile(qk[name], dims={"d": 4, "k": 2}), tmp_path / "q", qk[name], {"d": 4, "k": 2})
    shipped = tmp_path / "q" / e.source
    assert shipped.name == "anatomy_qk.diag" and (shipped.parent / "anatomy.diag").exists()
    assert stringdiag.load(shipped)[name].signature() == qk[name].signature()  # its import resolves there


# -- the weights file ----------------------------------------------------------------------
def test_read_safetensors_agrees_with_the_library_and_checks_the_checksum(tmp_path):
    gen = torch.Generator().manual_seed(1)
    tensors = {"a.weight": torch.randn(3, 4, generator=gen, dtype=torch.float64),
               "b": torch.randn(5, generator=gen).to(torch.bfloat16), "c": torch.tensor(2.5),
               "mask": torch.rand(2, 3, generator=gen) > 0.5, "idx": torch.arange(7), "empty": torch.zeros(0, 3)}
    write_atomic(tmp_path / "w.safetensors", tensors, {"k": 1}, "weights")
    mine, theirs = read_safetensors(tmp_path / "w.safetensors"), load_file(tmp_path / "w.safetensors")
    assert mine.keys() == theirs.keys() == tensors.keys()
    for k in tensors:
        assert mine[k].dtype == theirs[k].dtype and torch.equal(mine[k], theirs[k]), k
    data = bytearray((tmp_path / "w.safetensors").read_bytes())
    data[-1] ^= 1  # one bit of the last tensor
    (tmp_path / "bad.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="do not match their checksum"):
        read_safetensors(tmp_path / "bad.safetensors")


def _globals_read(obj) -> set[str]:
    """The global names a function or class's code reads, through nested code and methods."""
    codes = [obj.__code__] if inspect.isfunction(obj) else [
        f.__code__ for f in vars(obj).values() if inspect.isfunction(f)]
    names = set()
    while codes:
        c = codes.pop()
        names |= set(c.co_names)
        codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return names


def test_every_helper_copied_finds_what_it_reads():
    """Each function and class of primitives.py, copied with what it reads and run as a module
    of its own, resolves every global name that the original resolves."""
    helpers = Helpers()
    own = {n: o for n, o in vars(P).items()
           if (inspect.isfunction(o) or inspect.isclass(o)) and o.__module__ == P.__name__}
    for name, obj in own.items():
        helpers.bind(name, obj)
    space: dict = {"__name__": "copied"}
    exec(compile("from __future__ import annotations\n" + helpers.text(), "<copied>", "exec"), space)
    for name, obj in own.items():
        needed = _globals_read(obj) & set(vars(P))
        assert needed <= set(space), (name, needed - set(space))
        assert all(space[n] is vars(P)[n] or type(space[n]) is type(vars(P)[n]) for n in needed), name


# -- the command -----------------------------------------------------------------------------
def test_compile_writes_the_folder_and_reports_it_as_json(tmp_path, capsys):
    out = tmp_path / "sa"
    args = ["compile", str(GALLERY / "attention.diag"), "-d", "SelfAttention", "--dims", "d=8,k=4",
            "--approximator", "linear", "-o", str(out)]
    assert main(args + ["--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    # Q, K: 8*4 + 4 each; V: 8*8 + 8
    assert r["signature"] == "SelfAttention : [s, d] -> [s, d]" and r["parameters"] == 144
    assert r["inputs"] == [{"name": "x", "type": "[s, d]"}] and r["dims"] == {"d": 8, "k": 4}
    shapes = {t["name"]: t["shape"] for t in r["tensors"]}
    assert sum(torch.Size(s).numel() for s in shapes.values()) == 144
    stored = load_file(out / "weights.safetensors")
    assert {k: list(v.shape) for k, v in stored.items()} == shapes
    assert r["output"] == {"folder": str(out), "class": "SelfAttention", "source": "diag/attention.diag"}
    assert main(args) == 0  # again: the export it wrote before is replaced
    assert capsys.readouterr().out.splitlines() == [
        "SelfAttention : [s, d] -> [s, d]: 144 parameters (linear approximators)",
        f"wrote {out}/ (module.py, weights.safetensors, diag/attention.diag): from sa import SelfAttention"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folders left


@pytest.mark.parametrize("output, message, status", [  # a name never right: usage (2); the disk's state: 1
    ("m.py", "compile -o writes a folder (the module, its weights and its source), not one .py file; "
             "give a folder name, e.g. -o m", 2),
    ("1st", "the folder's name must be a Python identifier", 2),
    ("class", "the folder's name must be a Python identifier", 2),
    ("a_file", "it is a file, not a folder", 2),
    ("theirs", "the folder is not empty and was not written by compile -o (give a new folder)", 1),
    ("a_file/m", "a_file is a file, not a folder", 2),
])
def test_compile_refuses_an_output_before_any_work(tmp_path, capsys, output, message, status):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("mine")
    # the diagram file does not exist: the output is checked first
    assert main(["compile", str(tmp_path / "missing.diag"), "-d", "M1", "-o", str(tmp_path / output)]) == status
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"cannot write {tmp_path / output}: " in err and message in err, err
    assert (tmp_path / "theirs" / "notes.txt").read_text() == "mine"


def test_a_module_the_folder_cannot_rebuild_is_named(tmp_path):
    d = stringdiag.load(GALLERY / "attention.diag")["SelfAttention"]
    gm = stringdiag.compile(d, dims={"d": 4, "k": 2},
                            approximator=lambda i, o: torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.Dropout(0.1)))
    with pytest.raises(stringdiag.DiagError, match=r"cannot export '[\w.]+\.1': a torch\.nn\.modules\.dropout\.Dropout"):
        export(gm, tmp_path / "m", d, {"d": 4, "k": 2})
    assert not (tmp_path / "m").exists()


def test_a_large_buffer_outside_the_state_dict_is_refused_and_a_small_one_kept_by_value(tmp_path):
    d = stringdiag.load(GALLERY / "attention.diag")["SelfAttention"]
    gm = stringdiag.compile(d, dims={"d": 4, "k": 2}, dtype=torch.float64)
    gm.register_buffer("small", torch.tensor([0.1, 1 / 3, -2.5e-7], dtype=torch.float64), persistent=False)
    export(gm, tmp_path / "ok", d, {"d": 4, "k": 2})
    assert "register_buffer('small', torch.tensor([0.1, 0.3333333333333333, -2.5e-07]" in \
        (tmp_path / "ok" / "module.py").read_text()
    gm.register_buffer("big", torch.zeros(1000), persistent=False)
    with pytest.raises(stringdiag.DiagError, match=r"cannot export 'big': a buffer left out of the state dict "
                                                    r"has no weights to ship \(1,000 values"):
        export(gm, tmp_path / "m", d, {"d": 4, "k": 2})


def test_export_tries_the_folder_rather_than_trusting_its_permissions():
    """/proc says yes to root's permission check, and refuses every new file: export() refuses
    it before writing anything, with the reason."""
    d = stringdiag.load(GALLERY / "attention.diag")["SelfAttention"]
    gm = stringdiag.compile(d, {"d": 8, "k": 4})
    with pytest.raises(stringdiag.DiagError, match=r"cannot write /proc/m: no file can be made in /proc \("):
        stringdiag.export(gm, "/proc/m", d, {"d": 8, "k": 4})
