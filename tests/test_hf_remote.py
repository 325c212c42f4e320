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
    out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False, pad_token_id=0)
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


def _alone(hf, ids: list[int], tokens: int) -> list[int]:
    return hf.generate(torch.tensor([ids]), max_new_tokens=tokens, do_sample=False, pad_token_id=0)[0, len(ids):].tolist()


def test_a_left_padded_batch_generates_what_each_prompt_generates_alone(tmp_path):
    model = _model(seed=2)
    hf = transformers.AutoModelForCausalLM.from_pretrained(stringdiag.save_pretrained(model, tmp_path / "gpt"),
                                                           trust_remote_code=True).eval()
    long, short = [4, 17, 9, 12], [1, 6]
    # the padding read as tokens would change this prompt's continuation: the test can tell
    assert _greedy(model, torch.tensor([[0, 0, *short]]), 5)[0, 4:].tolist() != \
        _greedy(model, torch.tensor([short]), 5)[0, 2:].tolist()
    ids = torch.tensor([long, [0, 0, *short]])
    mask = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]])
    out = hf.generate(ids, attention_mask=mask, max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert out[0, 4:].tolist() == _alone(hf, long, 5)
    assert out[1, 4:].tolist() == _alone(hf, short, 5)
    # the reference: an argmax loop over the saved model, each prompt unpadded
    assert out[1, 4:].tolist() == _greedy(model, torch.tensor([short]), 5)[0, 2:].tolist()
    assert out[0, 4:].tolist() == _greedy(model, torch.tensor([long]), 5)[0, 4:].tolist()


def test_masked_logits_and_loss_are_each_rows_alone(tmp_path):
    model = _model()
    hf = transformers.AutoModelForCausalLM.from_pretrained(stringdiag.save_pretrained(model, tmp_path / "gpt"),
                                                           trust_remote_code=True).eval()
    ids = torch.tensor([[1, 5, 7, 2, 9], [0, 0, 3, 8, 4], [0, 0, 0, 11, 6]])
    mask = (ids != 0).long()
    with torch.no_grad():
        got = hf(ids, attention_mask=mask, labels=ids)
        for r in range(3):
            kept = ids[r][mask[r].bool()]
            torch.testing.assert_close(got.logits[r, mask[r].bool()], model(kept[None])[0], rtol=0, atol=0)
        # the loss: every scored target of every row, its token's predecessor kept, in float64
        terms = []
        for r in range(3):
            kept = ids[r][mask[r].bool()]
            logp = torch.log_softmax(model(kept[None])[0].double(), -1)
            terms += [-logp[t, kept[t + 1]] for t in range(len(kept) - 1)]
    assert abs(got.loss.item() - torch.stack(terms).mean().item()) < 1e-5


def test_a_folder_saved_again_by_transformers_reads_back(tmp_path, capsys):
    import shutil

    from stringdiag.cli.main import main
    from stringdiag.train.run import Tokenizer

    model = _model()
    tok = Tokenizer(tuple(f"w{i:02d}" for i in range(23)))
    folder = stringdiag.save_pretrained(model, tmp_path / "gpt", tok)
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    hf.save_pretrained(tmp_path / "resaved")  # no stringdiag checksum in its safetensors
    shutil.copy(folder / "tokenizer.json", tmp_path / "resaved")
    again, _ = stringdiag.from_pretrained(tmp_path / "resaved")
    ids = torch.tensor([[1, 5, 7, 2, 9]])
    with torch.no_grad():
        assert torch.equal(again(ids), model(ids))
    for where in (folder, tmp_path / "resaved"):
        assert main(["sample", str(where), "--prompt", "w03 w04", "--tokens", "4", "--seed", "1"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first == second


def test_save_pretrained_refuses_what_is_not_a_whole_language_model(tmp_path):
    from stringdiag import DiagError

    head = stringdiag.compile(stringdiag.load(ROOT / "gallery" / "anatomy.diag")["M1"], dims={"d": 8, "k": 4})
    with pytest.raises(DiagError, match="save_pretrained takes a whole language model"):
        stringdiag.save_pretrained(head, tmp_path / "head")
    assert not (tmp_path / "head").exists()
