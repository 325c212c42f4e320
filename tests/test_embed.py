"""Token ids (``[s] of v``) and the ``embed`` primitive: a lookup in a learnable table, against
torch's ``nn.Embedding`` in float64; its cost; a table used twice is one set of weights; and
ids are kept apart from real numbers by the type checker, with positioned errors."""
from __future__ import annotations

import pytest
import torch

import stringdiag
from stringdiag import DiagError
from stringdiag.analysis.complexity import analyse
from stringdiag.lower.lower import compile

HEAD = "dim s : seq\ndim v, d, k : fixed\n"
TIED = HEAD + """learn E : -> [v, d]
diagram Tied(t: [s] of v) -> [s, v] {
  x = embed(t, E())
  y[i, u] = sum_f x[i, f] * E()[u, f]
  return y
}
diagram Lookup(t: [s] of v) -> [s, d] {
  return embed(t, E())
}
diagram PerHead(t: [s] of v) -> [k, s, d] {
  learn T : -> [k, v, d]
  y[h] = embed(t, T()[h])
  return y
}
"""


def prog():
    return stringdiag.loads(TIED, "lm.diag")


def ids(*shape: int, v: int = 11, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, v, shape, generator=torch.Generator().manual_seed(seed))


def test_embed_is_nn_embedding_forward_and_backward():
    m = compile(prog()["Lookup"], dims={"v": 11, "d": 4}, dtype=torch.float64)
    table = dict(m.named_parameters())["E.weight"]
    ref = torch.nn.Embedding(11, 4, dtype=torch.float64)
    with torch.no_grad():
        ref.weight.copy_(table)
    t = ids(3, 9)
    y = m(t)
    assert torch.equal(y, ref(t))
    w = torch.randn(y.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    (g,) = torch.autograd.grad((y * w).sum(), table)
    (g_ref,) = torch.autograd.grad((ref(t) * w).sum(), ref.weight)
    torch.testing.assert_close(g, g_ref, rtol=1e-14, atol=1e-14)


def test_a_table_used_twice_is_one_set_of_weights_a_tied_head():
    m = compile(prog()["Tied"], dims={"v": 11, "d": 4}, dtype=torch.float64)
    assert [n for n, _ in m.named_parameters()] == ["E.weight"]
    e = dict(m.named_parameters())["E.weight"]
    t = ids(2, 7)
    torch.testing.assert_close(m(t), e[t] @ e.T, rtol=1e-14, atol=1e-14)


def test_a_table_per_head_is_gathered_row_by_row():
    m = compile(prog()["PerHead"], dims={"v": 11, "d": 4, "k": 3}, dtype=torch.float64)
    (table,) = m.parameters()
    assert table.shape == (3, 11, 4)
    t = ids(2, 5)
    ref = torch.stack([table[h][t] for h in range(3)], dim=1)  # [batch, k, s, d]
    assert torch.equal(m(t), ref)


def test_an_lm_without_real_inputs_computes_in_the_dtype_of_its_weights():
    src = HEAD + "learn E : -> [v, d]\ndiagram P(t: [s] of v) -> [s, d] {\n  return embed(t, E()) / sqrt(d) + 1\n}\n"
    for dtype in (torch.float32, torch.float64):
        m = compile(stringdiag.loads(src, "p.diag")["P"], dims={"v": 5, "d": 4}, dtype=dtype)
        assert m(ids(2, 3, v=5)).dtype == dtype
        assert "dtype_ref" not in m.state_dict()


def test_a_lookup_costs_one_row_per_id_not_the_table():
    c = analyse(prog()["Lookup"])  # d per id, plus the table itself (a parameter, once): never s·v·d
    assert (c.time, c.seq_time) == ("s·d + d·v", "s")


def test_the_signature_shows_token_ids():
    assert prog()["Lookup"].signature() == "Lookup : [s] of v -> [s, d]"


@pytest.mark.parametrize("body, line, col, message", [
    ("diagram B(x: [s, d]) -> [s, d] {\n  learn E : -> [v, d]\n  return embed(x, E())\n}",
     5, 16, "input 1 of 'embed' takes token ids ([] of v) but is given real numbers ([s, d])"),
    ("diagram B(t: [s] of v) -> [s] {\n  return t * 2\n}",
     4, 10, "input 1 of '*' takes real numbers ([]) but is given token ids ([s] of v); turn ids into vectors"),
    ("diagram B(t: [s] of v) -> [s] of v {\n  return t\n}",
     3, 31, "token ids ('of') are inputs only, never the output of a diagram"),
    ("diagram B(t: [s] of v) -> [s] {\n  return t\n}",
     4, 10, "output 1 of 'B' is token ids ([s] of v); a diagram returns real numbers"),
    ("learn W : [d] of v -> [d]\n", 3, 15, "token ids ('of') are an input of a fixed box only, not of a learn box"),
    ("diagram B(t: [s] of k) -> [s, d] {\n  learn E : -> [v, d]\n  return embed(t, E())\n}",
     5, 19, "input 2 of 'embed' must have type [k, d] but has type [v, d]"),
    ("diagram B(t: [s] of k) -> [s, d] {\n  learn E : -> [v, d]\n  return embed<v, d>(t, E())\n}",
     5, 22, "input 1 of 'embed' takes token ids of v but is given ids of k"),
])
def test_ids_and_real_numbers_are_kept_apart_with_positioned_errors(body, line, col, message):
    with pytest.raises(DiagError) as e:
        stringdiag.loads(HEAD + body, "b.diag")["B"]
    assert message in e.value.message
    assert (e.value.pos.line, e.value.pos.col) == (line, col)


def test_info_shows_token_ids(tmp_path, capsys):
    import json
    import re

    from stringdiag.cli.main import main

    (tmp_path / "lm.diag").write_text(TIED)
    assert main(["info", str(tmp_path / "lm.diag"), "-d", "Lookup"]) == 0
    assert re.search(r"\n  t +\[s\] of v\n", capsys.readouterr().out)
    assert main(["info", str(tmp_path / "lm.diag"), "-d", "Lookup", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["inputs"] == [{"name": "t", "indices": ["s"], "of": "v"}]
