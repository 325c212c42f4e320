"""A stringdiag language model as Hugging Face ``transformers`` loads it:
``AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)``, then ``.generate()``.

:func:`stringdiag.save_pretrained` copies this file into the folder as ``modeling_stringdiag.py``
and names it in ``config.json``'s ``auto_map``; stringdiag itself never imports it (it needs
``transformers``). The model is rebuilt from the ``.diag`` sources that ``config.json`` carries
(stringdiag must be installed where it is loaded); its tensors are the compiled diagram's, under
the same names as in ``model.safetensors``, so transformers loads them as they are. Generation
recomputes the whole window at each token (``use_cache`` is off): the diagram's own incremental
form is stringdiag's ``generate``. An ``attention_mask`` is honoured by running each row on the
tokens it keeps, so a left-padded batch generates what each prompt generates alone.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput


class StringdiagConfig(PretrainedConfig):
    """``stringdiag``: the model's spec (sources, diagram, sizes, approximator), as stringdiag saves it."""

    model_type = "stringdiag"

    def __init__(self, stringdiag: dict | None = None, vocab_size: int | None = None, **kwargs):
        self.stringdiag = stringdiag
        self.vocab_size = vocab_size
        kwargs.setdefault("use_cache", False)
        super().__init__(**kwargs)


class StringdiagForCausalLM(PreTrainedModel, GenerationMixin):
    """The compiled diagram, token ids ``[batch, s]`` to logits ``[batch, s, v]``. Its parameters,
    buffers and submodules are the compiled module's own (one registry, shared), so that the names
    in ``model.safetensors`` are this model's names."""

    config_class = StringdiagConfig
    main_input_name = "input_ids"
    _no_split_modules: list[str] = []
    _net: torch.nn.Module  # the compiled diagram (set in __init__, not registered as a submodule)

    def __init__(self, config: StringdiagConfig):
        super().__init__(config)
        from stringdiag.errors import DiagError
        from stringdiag.train.lm import Spec, WholeModel, diagram_of

        if config.stringdiag is None:
            raise DiagError("this config.json carries no stringdiag spec (save_pretrained writes one)")
        spec = Spec.from_json(config.stringdiag)
        with tempfile.TemporaryDirectory(prefix="stringdiag-hf-") as tmp:
            net = WholeModel(diagram_of(spec, Path(tmp)), spec, check_causal=False).net
        for registry in ("_parameters", "_buffers", "_non_persistent_buffers_set", "_modules"):
            object.__setattr__(self, registry, getattr(net, registry))
        object.__setattr__(self, "_net", net)  # not a submodule: its registry is this model's
        self.post_init()

    def _init_weights(self, module: torch.nn.Module) -> None:
        """Every tensor comes from the checkpoint; the compiled module initialised its own."""

    def get_input_embeddings(self):
        return None

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, **kwargs) -> CausalLMOutput:
        """Logits; with an ``attention_mask``, each row is the diagram run on its kept tokens alone
        (padding neither seen nor counted as a position), its logits where those tokens stand and
        zeros at the padding; the loss then scores only targets whose token and predecessor are kept."""
        keep = None if attention_mask is None else attention_mask.to(torch.bool)
        if keep is not None and keep.shape != input_ids.shape:
            raise ValueError(f"attention_mask has shape {tuple(keep.shape)}, input_ids {tuple(input_ids.shape)}")
        if keep is None or bool(keep.all()):
            logits = self._net(input_ids)
        else:
            logits = self._kept(input_ids, keep)
        loss = None
        if labels is not None:  # next-token loss, as transformers' causal models define it
            if keep is not None:
                labels = labels.masked_fill(~keep, -100)
                labels[:, 1:] = labels[:, 1:].masked_fill(~keep[:, :-1], -100)
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), labels[:, 1:].reshape(-1),
                                   ignore_index=-100)
        return CausalLMOutput(loss=loss, logits=logits)

    def _kept(self, input_ids: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """The diagram on each row's kept tokens, rows with as many run as one batch."""
        counts = keep.sum(1)
        out: torch.Tensor | None = None
        for n in sorted(set(counts.tolist()) - {0}):
            rows = (counts == n).nonzero()[:, 0]
            where = keep[rows].nonzero()[:, 1].view(len(rows), n)  # the kept positions, in order
            got = self._net(input_ids[rows[:, None], where])
            if out is None:
                out = got.new_zeros(*input_ids.shape, got.shape[-1])
            out[rows[:, None], where] = got
        if out is None:  # no row keeps a token
            return torch.zeros(*input_ids.shape, self.config.vocab_size, dtype=self.dtype, device=input_ids.device)
        return out

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                                      **kwargs) -> dict:
        return {"input_ids": input_ids, "attention_mask": attention_mask}
