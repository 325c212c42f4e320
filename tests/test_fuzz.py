"""Fuzzing: whatever text it is given, ``stringdiag.loads`` returns a Program or raises DiagError.

Never a traceback: not from garbage bytes, not from token soup, not from valid programs with
tokens or characters deleted, inserted, duplicated, swapped or replaced.  Every test runs
with a fixed seed (``derandomize=True``) so that a failure reproduces on every run.

The last block holds the reproducers of crashes found while writing these tests (deep
expressions, huge integers, odd import paths): each must end in a Program or a positioned
DiagError.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import traceback

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import stringdiag
from stringdiag import DiagError, Program

FILE = "/nonexistent-stringdiag-fuzz/fuzz.diag"  # so that `import "..."` never finds a file

# -- valid programs (copies; they must stay valid: see test_corpus_is_valid) -------------

ATTENTION = """\
dim s : seq            # supplied at run time
dim d, k : fixed       # chosen by the modeller
learn Q, K : [d] -> [k]
learn V    : [d] -> [d]
fixed hardmax<n> : [n] -> [n]
diagram SelfAttention(x: [s, d]) -> [s, d] {
  q[i]    = Q(x[i])
  kk[j]   = K(x[j])
  v[j]    = V(x[j])
  e[i, j] = sum_f q[i, f] * kk[j, f]
  a[i]    = softmax(e[i] / sqrt(k))
  y[i]    = sum_j a[i, j] * v[j]


  return y
}
"""

RNN = """\
dim s, t : seq
dim d, h : fixed
learn Cell : [h], [d] -> [h], [h]
learn Init : -> [h]
learn WO : [h, d] -> [d]
diagram RNN(x: [s, d]) -> [h], [s, h] {
  h0 = Init()
  hN, y[i] = scan Cell(h0, x[i])
  return hN, y
}
diagram Bi(x: [s, d]) -> [s, h + h] {
  _, f = RNN(x)
  _b, b = RNN(rev(x))
  return cat(f, rev(b))
}
diagram T(x: [h, s, d]) -> [s, d] {
  o[i] = WO(x[:, i])
  z[i, a] = x[a, i]
  return o
}
diagram M(x: [s, d]) -> [s, d] {
  m = causal<s>()
  e[i,j] = sum_f x[i,f] * x[j,f]
  a[i] = softmax(where(e[i], m[i]))
  c[i] = x[i] - mean(x[i])
  return layernorm(c)
}
"""

GENERIC = """\
dim s : seq
dim d, k, h : fixed = 8
abstract sim : [k], [k] -> []
learn Q, K : [d] -> [k]
fixed halve<n> : [n + n] -> [n]
diagram Head<m>(x: [s, d]) -> [s, m] {
  learn W : [d] -> [m]
  w[i] = W(x[i])
  return w
}
diagram Cell(h: [k], x: [d]) -> [k], [k] {
  n = tanh(Q(x) + h)
  return n, n
}
learn H0 : -> [k]
diagram Multi(x: [s, d]) -> [s, k], [s, k] {
  a = Head<k>(x)
  b = Head<k>(x)
  e[i, j] = sim(Q(x[i]), K(x[j]))
  p[i] = hardmax(e[i])
  c[i] = ssoftmax<s, k>(e[i])
  u[i] = sum_{j} p[i, j] * c[i, j] * a[j]
  g = sum_{i, f} a[i, f]
  _h, r[t] = scan Cell(H0(), x[t])
  return a + b * -u[:, :] / 2.5e0 - g, halve<k>(cat(r, r))
}
"""

PRELUDE_LIKE = """\
fixed add, sub, mul, div : [], [] -> []
fixed hardmax<n> : [n] -> [n]
fixed split<n, m> : [n + m] -> [n], [m]
fixed flatten<n, m> : [n, m] -> [n * m]
diagram mean<n>(x: [n]) -> [] {
  return (sum_j x[j]) / n
}
diagram layernorm<n>(x: [n]) -> [n] {
  learn gamma, beta : -> [n]
  c = x - mean(x)
  v = mean(c * c)
  return c / sqrt(v + 0.00001) * gamma() + beta()
}
diagram Split<n>(x: [n + n]) -> [n], [n * n] {
  a, b = split<n, n>(x)
  o[i, j] = a[i] * b[j]
  u = unflatten<n, n>(flatten(o))
  return layernorm(a), flatten(u)
}
"""

CORPUS = [ATTENTION, RNN, GENERIC, PRELUDE_LIKE]


def _units(src: str) -> list[str]:
    """The program's declarations with one diagram at a time (and the diagrams it uses)."""
    head, *diagrams = re.split(r"(?m)^(?=diagram )", src)
    names = [re.match(r"diagram (\w+)", d).group(1) for d in diagrams]
    units = []
    for i, d in enumerate(diagrams):
        needs = [diagrams[j] for j in range(i) if re.search(rf"\b{names[j]}\s*[(<]", d)]
        units.append(head + "".join(needs) + d)
    return units


# Smaller programs parse faster: the 10,000-mutant test mutates these.
UNITS = [u for src in CORPUS for u in _units(src)]

# -- tokens -----------------------------------------------------------------------------------

TOKEN = re.compile(r'sum_\{[^}]*\}|sum_\w+|[A-Za-z_]\w*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|"[^"\n]*"'
                   r"|#[^\n]*|->|\s+|.", re.S)
CORPUS_TOKENS = [TOKEN.findall(src) for src in CORPUS]
UNIT_TOKENS = [TOKEN.findall(src) for src in UNITS]
assert all("".join(toks) == src for toks, src in zip(CORPUS_TOKENS + UNIT_TOKENS, CORPUS + UNITS))

KEYWORDS = ["dim", "seq", "fixed", "learn", "abstract", "diagram", "return", "scan", "import", "_"]
PUNCT = ["(", ")", "[", "]", "{", "}", "<", ">", ",", ":", "=", "+", "-", "*", "/", "->", "\n"]
EXTRA = ['"missing.diag"', '""', "sum_j", "sum_{i, j}", "sum_{}", "sum_{1}", "0", "1", "64", "2.5",
         "1e999", "x", "y", "i", "j", "n", "s", "d", "Q", "softmax", "causal", "cat", "split",
         "hardmax", "sqrt", "#", "$", "\t", "é", "\x00"]
VOCAB = sorted({t for toks in CORPUS_TOKENS for t in toks if not t.isspace()}
               | set(KEYWORDS) | set(PUNCT) | set(EXTRA))


def check(source: str, file: str = FILE) -> str:
    """Load the source; anything but a Program or a DiagError fails the test."""
    try:
        prog = stringdiag.loads(source, file=file)
    except DiagError as e:
        assert isinstance(e.message, str) and e.message
        assert e.pos is not None and e.pos.file == file
        assert 1 <= e.pos.line <= source.count("\n") + 1 and e.pos.col >= 1
        assert e.render().startswith(f"{e.pos}: error: ")
        return "error"
    except Exception as e:  # a crash: report it briefly (a RecursionError has ~1000 frames)
        frames = "".join(traceback.format_list(traceback.extract_tb(e.__traceback__)[-6:]))
        raise AssertionError(f"loads crashed with {type(e).__name__}: {str(e)[:300]}\n"
                             f"input ({len(source)} chars): {source[:300]!r}\n{frames}") from None
    assert isinstance(prog, Program)
    for w in prog.warnings:
        w.render("warning")
    return "ok"


COMMON = dict(derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])


def test_corpus_is_valid():
    for src in CORPUS + UNITS:
        prog = stringdiag.loads(src, file=FILE)
        assert list(prog), src
    assert len(UNITS) == 11


# -- (a) garbage ------------------------------------------------------------------------------

@settings(max_examples=400, **COMMON)
@given(st.text(max_size=300))
def test_random_text(text):
    check(text)


@settings(max_examples=400, **COMMON)
@given(st.binary(max_size=300))
def test_random_bytes(data):
    check(data.decode("utf-8", errors="surrogateescape"))
    check(data.decode("latin-1"))


@settings(max_examples=1500, **COMMON)
@given(st.lists(st.tuples(st.sampled_from(VOCAB), st.sampled_from([" ", "", "\n", "  "])), max_size=80))
def test_token_soup(pairs):
    check("".join(tok + sep for tok, sep in pairs))


@settings(max_examples=300, **COMMON)
@given(st.sampled_from(CORPUS), st.lists(st.sampled_from(VOCAB), min_size=1, max_size=30))
def test_valid_prefix_then_soup(src, toks):
    """A valid program followed by junk: the parser gets deep before it fails."""
    cut = len(src) // 2
    check(src[:cut] + " ".join(toks))


# -- (b) mutations of valid programs --------------------------------------------------------

OPS = ["delete", "insert", "duplicate", "swap", "replace", "move", "rename"]
NAMES = sorted(t for t in VOCAB if re.fullmatch(r"[A-Za-z_]\w*", t) and t not in KEYWORDS)
NUMBERS = ["0", "1", "2", "3", "8", "64", "0.5", "2.5e0", "1e999", "00"]
# positions worth mutating: not whitespace, not comments (changing those rarely breaks anything)
SIGNIFICANT = [[i for i, t in enumerate(toks) if not t.isspace() and not t.startswith("#")]
               for toks in UNIT_TOKENS]
RENAMEABLE = [[i for i, t in enumerate(toks) if re.fullmatch(r"\w+", t) and t not in KEYWORDS]
              for toks in UNIT_TOKENS]


def _similar(tok: str):
    """A token of the same kind, so that the mutant often still parses and reaches the elaborator."""
    if re.fullmatch(r"[A-Za-z_]\w*", tok):
        return st.sampled_from(NAMES)
    if tok[0].isdigit():
        return st.sampled_from(NUMBERS)
    return st.sampled_from(PUNCT)


@st.composite
def token_mutants(draw) -> str:
    k = draw(st.integers(0, len(UNITS) - 1))
    toks = list(UNIT_TOKENS[k])
    # half the mutants only rename names and numbers: they mostly parse, and probe the type checker
    renaming = draw(st.booleans())
    where = RENAMEABLE[k] if renaming else SIGNIFICANT[k]
    for _ in range(draw(st.integers(1, 3))):
        op = "rename" if renaming else draw(st.sampled_from(OPS))
        i = where[draw(st.integers(0, len(where) - 1))]
        if op == "delete":
            toks[i] = ""
        elif op == "insert":
            toks[i] = draw(st.sampled_from(VOCAB)) + " " + toks[i]
        elif op == "duplicate":
            toks[i] = "".join(toks[i:i + draw(st.integers(1, 6))]) + toks[i]
        elif op == "swap":
            j = where[draw(st.integers(0, len(where) - 1))]
            toks[i], toks[j] = toks[j], toks[i]
        elif op == "replace":
            toks[i] = draw(st.sampled_from(VOCAB))
        elif op == "move":
            j = where[draw(st.integers(0, len(where) - 1))]
            toks[j], toks[i] = toks[i] + " " + toks[j], ""
        elif op == "rename" and toks[i]:
            toks[i] = draw(_similar(toks[i]))
    return "".join(toks)


@st.composite
def char_mutants(draw) -> str:
    chars = list(draw(st.sampled_from(CORPUS)))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(OPS))
        i = draw(st.integers(0, len(chars) - 1))
        if op == "delete" and len(chars) > 1:
            n = draw(st.integers(1, 3))
            del chars[i:i + n]
        elif op == "insert":
            punct = st.sampled_from(list("()[]{}<>,:=+-*/_#\n\"' "))
            chars.insert(i, draw(st.characters(codec="utf-8") | punct))
        elif op == "duplicate":
            n = draw(st.integers(1, 12))
            chars[i:i] = chars[i:i + n]
        elif op == "swap":
            j = draw(st.integers(0, len(chars) - 1))
            chars[i], chars[j] = chars[j], chars[i]
        elif op == "replace":
            chars[i] = draw(st.sampled_from(list("()[]{}<>,:=+-*/_#0123456789sdkijxyQ \n")))
        elif op == "move":
            j = draw(st.integers(0, len(chars) - 1))
            chars.insert(j, chars.pop(i))
    return "".join(chars)


@pytest.mark.slow
def test_ten_thousand_malformed_token_mutants(capsys):
    """10,000 malformed token-level mutants of valid programs, fixed seed: none may crash the tool.

    Mutants that happen to stay valid are checked too, but do not count: Hypothesis keeps
    generating until 10,000 of them have been rejected with a DiagError.
    """
    seen = {"ok": 0, "error": 0}

    @settings(max_examples=10_000, **COMMON)
    @given(token_mutants())
    def run(source):
        outcome = check(source)
        seen[outcome] += 1
        assume(outcome == "error")

    start = time.perf_counter()
    run()
    elapsed = time.perf_counter() - start
    with capsys.disabled():
        print(f"\n[fuzz] {seen['error']} malformed token mutants (and {seen['ok']} that stayed valid) "
              f"in {elapsed:.1f} s")
    assert seen["error"] >= 10_000


@settings(max_examples=2000, **COMMON)
@given(char_mutants())
def test_character_mutants(source):
    check(source)


# -- crashes found by fuzzing and probing -------------------------------------------------------

HEAD = "dim s : seq\ndim d : fixed\n"


def expect_diag_error(source: str, file: str = FILE) -> DiagError:
    assert check(source, file) == "error", "expected a DiagError, but the source loaded"
    try:
        stringdiag.loads(source, file=file)
    except DiagError as e:
        return e
    raise AssertionError("unreachable")  # pragma: no cover


def test_long_sum_is_not_a_recursion_error():
    # `x + x + ... + x` with 500 terms (left-nested) overflowed the elaborator's recursion
    source = HEAD + "diagram A(x: [d]) -> [d] {\n  return x" + " + x" * 500 + "\n}\n"
    assert check(source) in ("ok", "error")


def test_deeply_nested_calls_are_not_a_recursion_error():
    # exp(exp(...exp(x)...)) 330 deep was a RecursionError in Elaborator.expr / call / apply
    source = HEAD + "diagram A(x: [d]) -> [d] {\n  return " + "exp(" * 330 + "x" + ")" * 330 + "\n}\n"
    assert check(source) in ("ok", "error")


def test_many_unary_minuses_are_not_a_recursion_error():
    source = HEAD + "diagram A(x: [d]) -> [d] {\n  return " + "-" * 1000 + "x\n}\n"
    assert check(source) in ("ok", "error")


@pytest.mark.parametrize("source", [
    "learn F : [" + "9" * 5000 + "] -> []\n",
    "dim z : fixed = " + "9" * 5000 + "\n",
], ids=["in-a-type", "as-a-default"])
def test_huge_integer_is_a_diag_error(source):
    # int() of more than 4300 digits raised ValueError (Python's int_max_str_digits)
    expect_diag_error(source)


def test_nul_byte_in_import_path_is_a_diag_error():
    # Path.resolve() raised ValueError("embedded null byte")
    err = expect_diag_error('import "a\x00b"\n')
    assert (err.pos.line, err.pos.col) == (1, 8)


def test_import_of_a_file_that_is_not_utf8_is_a_diag_error(tmp_path):
    # _import caught OSError but not UnicodeDecodeError
    (tmp_path / "bin.diag").write_bytes(b"\xff\xfe\x00")
    err = expect_diag_error('import "bin.diag"\n', file=str(tmp_path / "main.diag"))
    assert (err.pos.line, err.pos.col) == (1, 8)


IMPORT_DEVICE = """
import re, resource, stringdiag
# reading /dev/zero must not eat the machine: allow 1 GiB more than this process already maps
vm = int(re.search(r"VmSize:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), vm + (1 << 30)))
try:
    stringdiag.loads('import "/dev/zero"\\n', file="x.diag")
except stringdiag.DiagError as e:
    print("DiagError", e.pos, e.message)
except BaseException as e:
    print("CRASH", type(e).__name__, e)
else:
    print("LOADED")
"""


@pytest.mark.skipif(not os.path.exists("/dev/zero") or sys.platform != "linux",
                    reason="needs Linux /dev/zero")
def test_import_of_a_device_is_a_diag_error():
    # read_text() on /dev/zero never ends: a MemoryError under a memory limit, else the machine's RAM
    out = subprocess.run([sys.executable, "-c", IMPORT_DEVICE], capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("DiagError x.diag:1:8 "), out.stdout + out.stderr
