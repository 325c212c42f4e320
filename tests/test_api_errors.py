"""Bad input to the public functions (``stringdiag.__all__``) is the package's own DiagError,
with a message that says what was expected; never a KeyError, AttributeError, ValueError or a
torch error from inside. Valid input still does what it did: sizes, lookups and sampling are
checked against what the module itself computes (shapes, a greedy loop written here)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stringdiag
from stringdiag import DiagError
from stringdiag.cli.main import main

GALLERY = Path(__file__).resolve().parent.parent / "gallery"
SMALL = {"d": 16, "h": 2, "k": 8, "f": 32, "v": 50, "L": 1}  # a GPT of gallery/lm.diag, small


@pytest.fixture(scope="module")
def att():
    return stringdiag.load(str(GALLERY / "attention.diag"))


@pytest.fixture(scope="module")
def lm():
    return stringdiag.load(str(GALLERY / "lm.diag"))


@pytest.fixture(scope="module")
def gpt(lm):
    torch.manual_seed(0)
    return stringdiag.compile(lm["GPT"], SMALL)


# -- compile's sizes ------------------------------------------------------------------------------
def test_a_misspelt_size_is_refused_as_the_command_line_refuses_it(lm, capsys):
    with pytest.raises(DiagError) as e:
        stringdiag.compile(lm["GPT"], {"D": 16, "v": 50})
    assert main(["compile", str(GALLERY / "lm.diag"), "-d", "GPT", "--dims", "D=16,v=50"]) == 1
    cli = capsys.readouterr().err.strip().removeprefix("error: ")
    assert cli.startswith("--dims: 'D' is not a dimension of 'GPT'")
    assert str(e.value).startswith(cli.removeprefix("--")), (str(e.value), cli)  # the same check, the same words
    assert "did you mean 'd'?" in str(e.value)


def test_given_sizes_are_the_sizes_built(lm):
    m = stringdiag.compile(lm["GPT"], {"d": 16, "h": 2, "k": 8, "v": 50, "f": np.int64(24), "L": torch.tensor(1)})
    shapes = {tuple(t.shape) for t in m.state_dict().values()}
    assert (50, 16) in shapes and (24, 16) in shapes  # the embedding [v, d]; the feed-forward's [f, d]
    assert not any(64 in s for s in shapes)  # the file's default d = 64 is not used


@pytest.mark.parametrize("value", [-1, "8", 8.0, True, None, 2 ** 70])  # (0: an empty axis, a size)
def test_a_size_that_is_no_integer_from_0_is_refused(lm, value):
    with pytest.raises(DiagError, match=r"dims: the size of 'd' must be"):
        stringdiag.compile(lm["GPT"], {"d": value})
    with pytest.raises(DiagError, match=r"dims: the size of 'd' must be"):
        stringdiag.compile(lm["GPT"], {"d": value}, incremental=True)


@pytest.mark.parametrize("dims, message", [("d=8,k=4", "dims must be a dict of dimension sizes"),
                                           ([("d", 8), ("k", 4)], "dims must be a dict of dimension sizes"),
                                           (5, "dims must be a dict"),
                                           ({3: 4, "d": 8, "k": 4}, "a dimension is named by a string, got 3")])
def test_sizes_that_are_no_dict_of_names_are_refused(att, dims, message):
    with pytest.raises(DiagError, match=message):
        stringdiag.compile(att["SelfAttention"], dims)


def test_compile_takes_a_diagram_and_says_how_to_get_one(att):
    with pytest.raises(DiagError, match=r"not a program: pick one of its diagrams by name, program\['NAME'\]"):
        stringdiag.compile(att, {"d": 8, "k": 4})
    with pytest.raises(DiagError, match=r"not a string: .*stringdiag.loads\(text\)"):
        stringdiag.compile("diagram A(x: [s, d]) -> [s, d] { return x }", {"d": 8})
    with pytest.raises(DiagError, match=r"dtype must be a floating-point torch dtype"):
        stringdiag.compile(att["SelfAttention"], {"d": 8, "k": 4}, dtype=torch.int64)


# -- a program's diagrams ----------------------------------------------------------------------
def test_an_unknown_diagram_is_a_diag_error_and_a_key_error(att):
    with pytest.raises(DiagError, match="no diagram named 'selfattention'.*did you mean 'SelfAttention'") as e:
        att["selfattention"]
    assert isinstance(e.value, KeyError) and e.value.args[0] == e.value.message  # `except KeyError` still works
    for key in (3, None, ("SelfAttention",), b"SelfAttention"):
        with pytest.raises(DiagError, match="a diagram is named by a string"):
            att[key]
    assert "SelfAttention" in att and "Nope" not in att and 3 not in att and [] not in att


def test_info_and_the_composition_methods_take_diagrams(att):
    sa = att["SelfAttention"]
    for bad in ("x", 3, None, att):
        with pytest.raises(DiagError, match=r"info\(\) takes a diagram"):
            stringdiag.info(bad)
        with pytest.raises(DiagError, match=r"then\(\) takes a diagram"):
            sa.then(bad)
        with pytest.raises(DiagError, match=r"isomorphic\(\) takes a diagram"):
            sa.isomorphic(bad)
    with pytest.raises(DiagError, match="keep must be a set of definition names"):
        sa.expand(keep="Q")
    assert stringdiag.info(sa)["complexity"]["seq_time"] == "s^2"  # a diagram still passes


# -- generate ------------------------------------------------------------------------------------
def test_generate_refuses_a_head_by_its_type(att):
    head = stringdiag.compile(att["SelfAttention"], {"d": 8, "k": 4})
    with pytest.raises(DiagError, match=r"whole language model \(a diagram of type \[s\] of v -> \[s, v\].*"
                                        r"SelfAttention : \[s, d\] -> \[s, d\]"):
        stringdiag.generate(head, [1, 2], 3)
    with pytest.raises(DiagError, match="whole language model"):
        stringdiag.generate("gpt", [1, 2], 3)


@pytest.mark.parametrize("prompt, tokens, options, message", [
    ([50], 3, {}, "must be below 50, the model's vocabulary size; got 50"),
    ([-1], 3, {}, "must be at least 0, got -1"),
    ([1.5], 3, {}, r"must be an integer, got 1.5"),
    ("the king", 3, {}, r"encode text first"),
    (torch.tensor([1.0, 2.0]), 3, {}, "token ids"),
    ([1], -1, {}, "tokens must be at least 0"),
    ([1], "3", {}, "tokens must be an integer"),
    ([1], 3, {"temperature": float("nan")}, "temperature must be a finite number"),
    ([1], 3, {"temperature": -1}, "temperature must be a finite number"),
    ([1], 3, {"top_k": 0}, "top_k must be positive"),
    ([1], 3, {"seed": "a"}, "seed must be an integer"),
    ([1], 3, {"context": 0}, "context must be positive"),
    ([1], 3, {"top_p": 2}, "top_p must be a finite number from 0 to 1"),
    ([1], 3, {"stop": 7}, "stop must be a list of token ids"),
])
def test_generate_says_which_argument_is_wrong(gpt, prompt, tokens, options, message):
    with pytest.raises(DiagError, match=message):
        stringdiag.generate(gpt, prompt, tokens, **options)


def test_generate_still_samples_what_the_model_says(gpt):
    """Greedy sampling is the argmax of the model's own last logits, one token at a time."""
    ids, want = [3, 1, 4], []
    for _ in range(4):
        with torch.no_grad():
            want.append(int(gpt(torch.tensor([ids + want]))[0, -1].double().argmax()))
    assert stringdiag.generate(gpt, ids, 4, temperature=0) == want
    assert stringdiag.generate(gpt, torch.tensor([ids, ids]), 4, temperature=0) == [want, want]
    assert stringdiag.generate(gpt, np.array(ids).tolist(), np.int64(4), temperature=0, top_k=np.int64(5)) == want
    for tiny in (1e-300, 5e-324):  # the softmax of logits / temperature: every mass on the likeliest
        assert stringdiag.generate(gpt, ids, 4, temperature=tiny, seed=1) == want


# -- files, weights, exports, traces --------------------------------------------------------------
def test_texts_and_paths_are_checked(tmp_path):
    for fn, arg in ((stringdiag.loads, b"dim s : seq"), (stringdiag.derive, b"start x")):
        with pytest.raises(DiagError, match=r"must be a string, got b'.*decode it first"):
            fn(arg)
    for fn in (stringdiag.load, stringdiag.load_derivation, stringdiag.load_taxonomy, stringdiag.load_run):
        with pytest.raises(DiagError, match="must be a path"):
            fn(3)
    with pytest.raises(DiagError, match="file must be a string"):
        stringdiag.loads("dim s : seq", file=3)


def test_load_weights_and_export_check_their_arguments(att, tmp_path):
    sa = att["SelfAttention"]
    m = stringdiag.compile(sa, {"d": 8, "k": 4})
    for args, message in [((3, {}), "copies into a compiled diagram"), ((m, 3), "state_dict must be a dict"),
                          ((m, {"a": 3}), "maps 'a' \\(a str\\) to 3 \\(an int\\)"),
                          ((m, {}, 3), "mapping must be"), ((m, {}, None, 3), "transpose must be")]:
        with pytest.raises(DiagError, match=message):
            stringdiag.load_weights(*args)
    with pytest.raises(DiagError, match="export\\(\\) writes a compiled diagram"):
        stringdiag.export(3, tmp_path / "a", sa, {"d": 8, "k": 4})
    with pytest.raises(DiagError, match="'D' is not a dimension of 'SelfAttention'"):
        stringdiag.export(m, tmp_path / "b", sa, {"D": 8, "k": 4})
    with pytest.raises(DiagError, match="compiled from SelfAttention : .*, not from MaskedSelfAttention"):
        stringdiag.export(m, tmp_path / "c", att["MaskedSelfAttention"], {"d": 8, "k": 4})
    with pytest.raises(DiagError, match=r"dims d=16 \(it was compiled with d=8\)"):
        stringdiag.export(m, tmp_path / "d", sa, {"d": 16, "k": 4})
    assert not any((tmp_path / n).exists() for n in "abcd")
    stringdiag.export(m, tmp_path / "e", sa, {"d": 8, "k": 4})  # what it was compiled from
    assert (tmp_path / "e" / "weights.safetensors").is_file()


def test_trace_reports_the_modules_own_failure():
    with pytest.raises(DiagError, match=r"trace\(\) takes a torch module"):
        stringdiag.trace(3, (torch.zeros(2, 2),))
    with pytest.raises(DiagError, match="Linear fails when called on example_inputs: RuntimeError: mat1 and mat2"):
        stringdiag.trace(torch.nn.Linear(2, 2), (torch.zeros(3, 3),))


# -- any bad value, any public function ------------------------------------------------------------
BAD = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True), st.text(max_size=8),
                st.binary(max_size=4), st.lists(st.integers(-3, 60), max_size=3),
                st.dictionaries(st.text(max_size=3), st.one_of(st.integers(-3, 3), st.text(max_size=2)), max_size=2))


def calls(att, gpt):
    """Each public function with one argument replaced by ``x``."""
    sa = att["SelfAttention"]
    return [lambda x: stringdiag.compile(x, {"d": 8, "k": 4}), lambda x: stringdiag.compile(sa, x),
            lambda x: stringdiag.compile(sa, {"d": x, "k": 4}), lambda x: stringdiag.info(x),
            lambda x: att[x], lambda x: stringdiag.loads(x), lambda x: stringdiag.derive(x),
            lambda x: stringdiag.load(x), lambda x: stringdiag.generate(gpt, x, 1),
            lambda x: stringdiag.generate(gpt, [1], x), lambda x: stringdiag.generate(gpt, [1], 1, temperature=x),
            lambda x: stringdiag.generate(gpt, [1], 1, top_k=x), lambda x: stringdiag.generate(x, [1], 1),
            lambda x: stringdiag.load_weights(gpt, x), lambda x: stringdiag.trace(x, (torch.zeros(2),)),
            lambda x: sa.then(x), lambda x: sa.expand(keep=x)]


@settings(max_examples=150, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.integers(0, 16), x=BAD)
def test_bad_values_give_only_diag_errors(att, gpt, which, x):
    try:
        calls(att, gpt)[which](x)
    except DiagError:
        pass
