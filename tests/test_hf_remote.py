"""A whole language model saved by ``stringdiag.save_pretrained`` loads in Hugging Face
``transformers`` (``AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)``) with
every tensor from the file, gives the saved model's logits, and ``.generate()`` runs it: greedy
decoding compared with a plain argmax loop over the saved model, written here."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import torch

import stringdiag
from stringdiag.train.lm import Spec, WholeModel, diagram_of, sources

transformers = pytest.importorskip("transformers")
ROOT = Path(__file__).resolve().parents[1]


def _model(seed: int = 0) -> WholeModel:
    texts, main = sources(ROOT / "gallery" / "lm.diag")
    spec = Spec(texts, main, "GPT", {"v": 23, "d": 16, "L": 2, "h": 2, "k": 8, "f": 32}, "mlp", 16)
    torch.manual_seed(seed)
    with tempfile.TemporaryDirectory() as tmp:
        return WholeModel(diagram_of(spec, Path(tmp)), spec, check_causal=False).eval()


def _greedy(model: torch.nn.Module, ids: torch.Tensor, tokens: int) -> torch.Tensor:
    for _ in range(tokens):
        with torch.no_grad():
            nxt = model(ids)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
    return ids


def test_transformers_loads_a_saved_model_and_generates(tmp_path):
    model = _model()
    folder = stringdiag.save_pretrained(model, tmp_path / "gpt")
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_stringdiag.StringdiagForCausalLM"
    assert (folder / "modeling_stringdiag.py").is_file()

    hf, info = transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True,
                                                                 output_loading_info=True)
    assert info["missing_keys"] == set() and info["unexpected_keys"] == set() and info["mismatched_keys"] == set()
    hf.eval()
    ids = torch.tensor([[1, 5, 7, 2, 9], [3, 3, 0, 22, 4]])
    with torch.no_grad():
        assert torch.equal(hf(ids).logits, model(ids))
        fresh = _model(seed=1)  # other weights: the file's, not the seed's, are what was loaded
        assert not torch.allclose(fresh(ids), model(ids))
    out = hf.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(out, _greedy(model, ids, 6))


def test_the_loss_is_next_token_cross_entropy(tmp_path):
    model = _model()
    folder = stringdiag.save_pretrained(model, tmp_path / "gpt")
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    ids = torch.tensor([[1, 5, 7, 2, 9, 11]])
    with torch.no_grad():
        logits = model(ids)[0]
        want = -torch.log_softmax(logits[:-1].double(), -1)[torch.arange(5), ids[0, 1:]].mean()
        got = hf(ids, labels=ids).loss
    assert abs(got.item() - want.item()) < 1e-5
